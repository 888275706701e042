"""Tests of the simulation runner (``sim/runner.py``) and its helpers, on a tiny counter."""

import math
import os
import random
import re
import shutil

import pytest
from amaranth.hdl import Fragment, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim import runner as sim_runner
from sim.runner import (
    SIMULATORS,
    ApTop,
    CocotbTestFailure,
    SimulationError,
    SimulationTimeout,
    ap_verilog,
    icarus_time0_fix,
    run_cocotb,
)
from sim.seed import default_seed, test_seed
from sim.toolchain import setup_environment
from sim.waves import (
    SIGNALS_WIDTH,
    WINDOW,
    block_groups,
    match_signals,
    read_vcd_signals,
    vcd_extent,
    whole_run_zoom,
    write_gtkw,
)

TB = "tests.runner_smoke_tb"
TOP = "smoke_counter"
TIMEOUT_S = 60


class Counter(wiring.Component):
    """Counts the cycles with ``en`` high, modulo 256.

    ``is_zero`` comes from a Switch (an ``always @*`` block in Verilog), ``interrupt`` is
    named like a C++ keyword; both on purpose, see ``runner_smoke_tb``.
    """

    en: In(1)
    count: Out(8)
    is_zero: Out(1)
    interrupt: Out(1)

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.count.eq(self.count + 1)
        with m.Switch(self.count):
            with m.Case(0):
                m.d.comb += self.is_zero.eq(1)
        m.d.comb += self.interrupt.eq(self.count[3])
        return m


@pytest.fixture(scope="module")
def verilog():
    return ap_verilog(Counter(), TOP)


# --- Simulations ---------------------------------------------------------------------------

@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_counter(simulator, verilog):
    results = run_cocotb(simulator, verilog, TOP, TB, config_name="runner-smoke",
                         timeout_s=TIMEOUT_S)
    assert results.name == "results.xml" and results.is_file()


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_failing_cocotb_test_fails(simulator, verilog):
    with pytest.raises(CocotbTestFailure, match="wrong_on_purpose: this test fails on purpose"):
        run_cocotb(simulator, verilog, TOP, TB, config_name="runner-smoke",
                   testcase="wrong_on_purpose", extra_env={"V4HW_SMOKE_WRONG": "1"},
                   timeout_s=TIMEOUT_S)


@pytest.mark.cocotb
def test_no_test_ran_is_an_error(verilog):
    with pytest.raises(SimulationError, match="no cocotb test ran"):
        run_cocotb("icarus", verilog, TOP, TB, config_name="runner-smoke",
                   testcase="no_such_test", timeout_s=TIMEOUT_S)


@pytest.mark.cocotb
def test_timeout(verilog):
    with pytest.raises(SimulationTimeout):
        run_cocotb("icarus", verilog, TOP, TB, config_name="runner-smoke",
                   testcase="hangs_on_purpose", extra_env={"V4HW_SMOKE_HANG": "1"},
                   timeout_s=2)


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_cache_and_waves(simulator, verilog, tmp_path, monkeypatch, caplog):
    """A fresh build, then a rerun that reuses it; both leave a VCD and a .gtkw."""
    monkeypatch.setattr(sim_runner, "BUILD_ROOT", tmp_path)
    groups = [("control", ["ap_clk", "ap_rst_n", "en"]),
              ("state", ["core.count", "core.is_zero", "interrupt"])]

    def run():
        return run_cocotb(simulator, verilog, TOP, TB, config_name="runner-cache",
                          testcase="counter_counts", waves=True, gtkw_groups=groups,
                          timeout_s=TIMEOUT_S)

    caplog.set_level("INFO", logger="sim.runner")
    results = run()
    build_dir = results.parents[2]
    assert build_dir.parent == tmp_path
    assert build_dir.name.startswith(f"runner-cache-{simulator}-")
    assert "building" in caplog.text
    program = build_dir / ("sim.vvp" if simulator == "icarus" else TOP)
    built = program.stat().st_mtime_ns

    caplog.clear()
    results = run()
    assert results.parents[2] == build_dir
    assert "reusing build" in caplog.text
    assert program.stat().st_mtime_ns == built, "the second run rebuilt the simulator"

    vcd, gtkw = results.with_name("dump.vcd"), results.with_name("runner-cache.gtkw")
    assert vcd.is_file() and gtkw.is_file()
    text = gtkw.read_text()
    for name in ["ap_clk", "ap_rst_n", "en", "core.count[7:0]", "core.is_zero", "interrupt"]:
        assert f" {TOP}.{name}\n" in text
    assert "-control\n" in text and "-state\n" in text


# --- Helpers without a simulator -----------------------------------------------------------

def test_ap_top_ports(verilog):
    header = re.search(rf"^module {TOP}\(([^)]*)\)", verilog, re.MULTILINE)[1]
    assert sorted(port.strip() for port in header.split(",")) == sorted(
        ["ap_clk", "ap_rst_n", "en", "count", "is_zero", "interrupt"])
    assert "input ap_rst_n;" in verilog and "rst = ~ ap_rst_n;" in verilog
    top = ApTop(Counter())
    assert list(top.signature.members) == ["ap_clk", "ap_rst_n", "en", "count", "is_zero",
                                           "interrupt"]
    assert top.count is top._core.count
    Fragment.get(top, None)


def test_default_waves_groups_come_from_the_block_descriptors():
    from sim.blocks import registry
    for block in registry().values():
        assert block_groups(block.verilog_name) == block.load_gtkw_groups()
    assert block_groups(TOP) is None        # any other top: the runner shows its ports


def test_ap_top_rejects():
    class Clash(wiring.Component):
        ap_clk: In(1)

        def elaborate(self, platform):
            return Module()

    clash = Clash()
    with pytest.raises(ValueError, match="ap_clk"):
        ApTop(clash)
    Fragment.get(clash, None)  # Amaranth warns about components that are never elaborated
    with pytest.raises(TypeError):
        ApTop(object())


def test_icarus_time0_fix(verilog):
    regs = re.findall(r"reg (\\\$auto\$verilog_backend\S*) += 0;", verilog)
    assert regs, "Amaranth no longer emits the register the fix rewrites"
    fixed = icarus_time0_fix(verilog)
    for reg in regs:
        assert f"reg {reg} ;\n" in fixed and f"initial #0 {reg} = 1'b0;" in fixed
    assert not re.search(r"reg \\\$auto\S* += 0;", fixed)


def test_run_cocotb_checks_arguments(verilog):
    with pytest.raises(ValueError, match="simulator"):
        run_cocotb("xcelium", verilog, TOP, TB, config_name="x")
    with pytest.raises(ValueError, match="no module"):
        run_cocotb("icarus", verilog, "other", TB, config_name="x")
    with pytest.raises(ValueError, match="config_name"):
        run_cocotb("icarus", verilog, TOP, TB, config_name="a/b")
    with pytest.raises(ValueError, match="verilator_public must"):
        run_cocotb("verilator", verilog, TOP, TB, config_name="x", verilator_public="some")
    with pytest.raises(ValueError, match="verilator_public_rw"):
        run_cocotb("verilator", verilog, TOP, TB, config_name="x",
                   verilator_public_rw=[("*timebase*",)])
    with pytest.raises(ValueError, match="verilator_public_rw"):
        run_cocotb("verilator", verilog, TOP, TB, config_name="x",
                   verilator_public_rw=[("*timebase*", 'now"')])


def test_setup_environment(monkeypatch):
    monkeypatch.setenv("PATH", os.environ["PATH"])
    monkeypatch.setenv("MAKEFLAGS", "-k")
    monkeypatch.delenv("VERILATOR_ROOT", raising=False)
    root = setup_environment()
    first = dict(os.environ)
    assert setup_environment() == root and dict(os.environ) == first
    assert os.environ["VERILATOR_ROOT"] == str(root)
    assert shutil.which("verilator") == str(root / "bin" / "verilator")
    assert os.environ["MAKEFLAGS"].split() == [
        "-k", "CFG_CXXFLAGS_PCH_I=-include", "CFG_CXXFLAGS_COROUTINES=-fcoroutines",
        "CFG_CXXFLAGS_STD=-std=gnu++20"]


def test_seed_from_environment(monkeypatch, capsys):
    monkeypatch.setenv("V4HW_SEED", "1234")
    monkeypatch.delenv("V4HW_PYTEST_NODE", raising=False)
    rng = test_seed()
    assert rng.random() == random.Random(1234).random()
    line = capsys.readouterr().out.strip()
    assert line == ("seed=1234; rerun with: V4HW_SEED=1234 python -m pytest "
                    "tests/test_runner.py::test_seed_from_environment")


def test_seed_fixed_per_test(monkeypatch, capsys):
    """Without V4HW_SEED each test has its own seed, the same on every run; a salt
    (make soak) gives other seeds; the printed command reruns the case without it."""
    node = "tests/test_x.py::test_y[icarus]"
    monkeypatch.delenv("V4HW_SEED", raising=False)
    monkeypatch.delenv("V4HW_SEED_SALT", raising=False)
    monkeypatch.setenv("V4HW_PYTEST_NODE", node)
    first = test_seed().random()
    assert test_seed().random() == first
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == lines[1]
    seed = re.fullmatch(r"seed=(\d+); rerun with: V4HW_SEED=\1 python -m pytest "
                        r"'tests/test_x.py::test_y\[icarus\]'", lines[0])
    assert seed and int(seed[1]) == default_seed(node)
    assert random.Random(int(seed[1])).random() == first

    monkeypatch.setenv("V4HW_PYTEST_NODE", "tests/test_x.py::test_y[verilator]")
    assert test_seed().random() != first
    monkeypatch.setenv("V4HW_PYTEST_NODE", node)
    monkeypatch.setenv("V4HW_SEED_SALT", "7")
    salted = test_seed().random()
    assert salted != first
    assert salted == random.Random(default_seed(node, "7")).random()
    printed = int(re.match(r"seed=(\d+);", capsys.readouterr().out.splitlines()[-1])[1])
    monkeypatch.delenv("V4HW_SEED_SALT")
    monkeypatch.setenv("V4HW_SEED", str(printed))
    assert test_seed().random() == salted

    monkeypatch.setenv("V4HW_SEED", "-3")
    with pytest.raises(ValueError, match="V4HW_SEED"):
        test_seed()
    monkeypatch.delenv("V4HW_SEED")
    monkeypatch.setenv("V4HW_SEED_SALT", "x")
    with pytest.raises(ValueError, match="V4HW_SEED_SALT"):
        test_seed()


# A VCD header with what both simulators do to names: Icarus keeps the escapes, Verilator
# adds $rootio and drops the backslash; Amaranth names contain `.` and `$`.
VCD_HEADER = r"""$date today $end
$timescale 1ps $end
$scope module $rootio $end
$var wire 1 ! ap_clk $end
$upscope $end
$scope module top $end
$var wire 1 " ap_clk $end
$var wire 8 # inp__payload [7:0] $end
$var wire 3 $ \inp__payload.op [2:0] $end
$scope module core $end
$var wire 9 % \$1 [8:0] $end
$var reg 8 & count [7:0] $end
$scope module deep $end
$var wire 1 ' x $end
$upscope $end
$upscope $end
$upscope $end
$enddefinitions $end
#0
"""


def test_waves_patterns(tmp_path):
    vcd = tmp_path / "dump.vcd"
    vcd.write_text(VCD_HEADER)
    signals = read_vcd_signals(vcd)
    assert len(signals) == 7

    def names(*patterns):
        return [signal.gtkw_name for signal in match_signals(signals, patterns)]

    assert names("ap_clk") == ["top.ap_clk"]
    assert names("*") == ["top.ap_clk", "top.inp__payload[7:0]", r"top.\inp__payload.op[2:0]"]
    assert names("inp__payload.op") == [r"top.\inp__payload.op[2:0]"]
    assert names("core.$1", "core.*") == [r"top.core.\$1[8:0]", "top.core.count[7:0]"]
    assert names("**.x") == ["top.core.deep.x"]
    with pytest.raises(ValueError, match=r"'core\.cnt'; similar: .*core\.count"):
        names("core.cnt")

    gtkw = write_gtkw(vcd, tmp_path / "w.gtkw", [("in", ["ap_clk", "inp__*"])], top="top")
    text = gtkw.read_text()
    assert '[dumpfile] "dump.vcd"' in text       # relative to the save file's folder
    assert "+{ap_clk} top.ap_clk\n" in text
    assert r"+{inp__payload.op[2:0]} top.\inp__payload.op[2:0]" in text


def test_gtkw_opens_with_the_whole_run_in_view(tmp_path):
    """The save file's zoom shows the VCD's last timestamp (times its timescale) across
    the wave pane; a moved run folder still finds its VCD."""
    run = tmp_path / "run"
    run.mkdir()
    vcd = run / "dump.vcd"
    vcd.write_text(VCD_HEADER.replace("#0\n", "").replace("$timescale 1ps $end", "$timescale 10ps $end")
                   + "#0\n#5000\n#123456\n")
    assert vcd_extent(vcd) == (123456, 10)
    gtkw = write_gtkw(vcd, run / "w.gtkw", [("in", ["ap_clk"])], top="top")
    zoom = float(re.search(r"^\*(-?[0-9.]+) ", gtkw.read_text(), re.MULTILINE)[1])
    pixels = WINDOW[0] - SIGNALS_WIDTH - 40
    assert zoom == pytest.approx(-math.log2(1234560 / pixels), abs=1e-5)
    assert 2 ** -zoom * pixels == pytest.approx(1234560, rel=1e-4)
    assert whole_run_zoom(100) == 0.0          # a short run: GTKWave's own zoom
    moved = tmp_path / "moved"
    run.rename(moved)
    dumpfile = re.search(r'^\[dumpfile\] "([^"]+)"', (moved / "w.gtkw").read_text(), re.MULTILINE)[1]
    assert (moved / dumpfile).is_file()


# --- Scheduling (tests/conftest.py) ---------------------------------------------------------

def test_schedule_puts_builds_first_and_waits_for_them():
    import json

    from tests.conftest import dumps, schedule

    builds = {"big-verilator": 100.0, "small-verilator": 30.0}
    tests = {
        "a": {"seconds": 5, "builds": ["big-verilator"]},
        "b": {"seconds": 50, "builds": ["big-verilator"]},
        "c": {"seconds": 2, "builds": ["small-verilator"]},
        "d": {"seconds": 40, "builds": []},
        "e": {"seconds": 1, "builds": []},
        "f": {"seconds": 3, "builds": ["big-verilator"]},
    }
    items = ["a", "b", "c", "d", "e", "f", "new"]
    order = schedule(items, tests, builds, 2)
    assert sorted(order) == sorted(items)
    # worksteal's split: 3 items to the first worker, 4 to the second.
    shares = [order[:3], order[3:]]
    # New tests first; each build's longest user starts it, the two builds in parallel.
    assert shares[1][0] == "new" or shares[0][0] == "new"
    firsts = {shares[0][0], shares[1][0], shares[0][1], shares[1][1]}
    assert {"b", "c"} <= firsts
    # Within a share the simulated start times never decrease; no user of the big build
    # starts on the other worker before the build is done (b's worker has it at 0..100).
    big = next(k for k in (0, 1) if "b" in shares[k])
    other = shares[1 - big]
    elapsed = 0.0
    for item in other:
        if item in ("a", "f"):
            assert elapsed >= 100, (order, item)
        elapsed += tests.get(item, {"seconds": 2.5})["seconds"] + (
            30 if item == "c" else 0)
    # One worker: the same items, builders before the others.
    single = schedule(items, tests, builds, 1)
    assert single.index("b") < single.index("a") and single.index("c") < single.index("d")
    assert json.loads(dumps(tests, builds)) == {"tests": tests, "builds": builds}


def test_every_regress_only_pattern_names_a_test():
    """Each line of tests/data/regress_only.txt still matches a collected test (a renamed
    test would otherwise come back into `make test` unnoticed), and what it matches is
    marked `regress`."""
    import subprocess
    import sys

    from tests.conftest import REGRESS_ONLY, regress_only

    def collect(*args):
        done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                               "-p", "no:cacheprovider", *args], cwd=REGRESS_ONLY.parents[2],
                              capture_output=True, text=True, check=True)
        return [line for line in done.stdout.splitlines() if "::" in line]

    marked = collect("-m", "regress")
    for pattern in regress_only():
        assert any(pattern.fullmatch(node) for node in marked), pattern.pattern
