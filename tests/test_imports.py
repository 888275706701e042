"""The layering of the packages: ``spec`` is a leaf, ``hdl`` and ``golden`` import it and
never each other, so the golden model cannot inherit the RTL's mistakes; ``plan`` (the
CircuitFlow IR and the planner) builds on ``spec`` and ``golden``'s latency models and
never sees the RTL or a simulator. ``sim`` (the simulation harness and the ``v4hw``
command) never imports the repository's ``tests``: an installed ``v4hw`` does not have
them on its path.

Imports are read statically (every ``import`` and ``from ... import`` statement of every
module, relative ones resolved), so an import inside a function counts too.
"""

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Top-level names a package must not import (beyond its own).
FORBIDDEN = {
    "hdl": {"golden", "numpy", "cocotb", "cocotb_tools", "cocotbext", "sim", "tests"},
    "golden": {"hdl", "amaranth", "cocotb", "cocotb_tools", "cocotbext", "sim", "tests"},
    "plan": {"hdl", "amaranth", "cocotb", "cocotb_tools", "cocotbext", "sim", "tests"},
    "sim": {"tests"},
}


def _imports(path, package_parts):
    """Top-level module names imported by the module at ``path`` (relative imports
    resolved against ``package_parts``, the module's package as a list of names)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[:len(package_parts) - node.level + 1]
                yield node.lineno, (base or [node.module or ""])[0]
            else:
                yield node.lineno, node.module.split(".")[0]


def violations(root):
    """Every forbidden import under ``root``: ``"path:line: package imports name"``."""
    found = []
    for package in ("spec", "hdl", "golden", "plan", "sim"):
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            package_parts = parts[:-1]   # a module's package, and an __init__'s own
            for line, name in _imports(path, package_parts):
                if name == package:
                    continue
                if package == "spec":
                    bad = name not in sys.stdlib_module_names
                else:
                    bad = name in FORBIDDEN[package]
                if bad:
                    found.append(f"{path.relative_to(root)}:{line}: {package} imports {name}")
    return found


def test_layering():
    assert violations(ROOT) == []


def test_layering_check_finds_violations(tmp_path):
    for package, text in (("spec", "import numpy\n"),
                          ("hdl", "from golden.va import FIX\n"),
                          ("golden", "def f():\n    from amaranth import Signal\n"),
                          ("plan", "from sim.seed import test_seed\n"),
                          ("sim", "def f():\n    from tests import test_tile_cocotb\n")):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "bad.py").write_text(text)
    (tmp_path / "hdl" / "ok.py").write_text("from . import bad\nimport spec.codes\n")
    assert violations(tmp_path) == [
        "spec/bad.py:1: spec imports numpy",
        "hdl/bad.py:1: hdl imports golden",
        "golden/bad.py:2: golden imports amaranth",
        "plan/bad.py:1: plan imports sim",
        "sim/bad.py:2: sim imports tests",
    ]
