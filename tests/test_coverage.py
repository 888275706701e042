"""`make coverage` (``sim/coverage.py``, the coverage builds of ``sim/runner.py``): the
points of a Verilator coverage run, merged and mapped back to the Amaranth lines."""

import subprocess
import sys
from pathlib import Path

import pytest
from amaranth.back import verilog as amaranth_verilog

from sim import coverage
from sim import runner as sim_runner
from sim.runner import REPO_ROOT, ApTop, run_cocotb

from .test_runner import TB, TOP, Counter

RUNNER_TEST = REPO_ROOT / "tests" / "test_runner.py"


def _line_of(text):
    """The line of ``tests/test_runner.py`` that holds ``text`` (the Counter's source)."""
    lines = RUNNER_TEST.read_text().splitlines()
    hits = [number for number, line in enumerate(lines, 1) if text in line]
    assert len(hits) == 1, text
    return hits[0]


@pytest.fixture(scope="module")
def counter_verilog():
    return amaranth_verilog.convert(ApTop(Counter()), name=TOP, emit_src=True)


def test_signals_and_lines_map_to_the_amaranth_source(counter_verilog):
    sources = coverage.VerilogSources(counter_verilog)
    where = ("tests/test_runner.py", _line_of("count: Out(8)"))
    assert sources.signal(f"{TOP}.core", "count") == where
    assert sources.signal(TOP, "count") == where
    # the temporary clocked into `count` is `count`'s
    assert sources.signal(f"{TOP}.core", "$2") == where
    lines = counter_verilog.splitlines()
    # every statement of the Switch's always block that sets is_zero is is_zero's line
    is_zero = ("tests/test_runner.py", _line_of("is_zero: Out(1)"))
    sets = [number for number, line in enumerate(lines, 1) if line.strip().startswith("is_zero =")]
    assert sets and all(sources.line(number) == is_zero for number in sets)
    # the adder's assign carries its operator's src: the `count + 1` line
    adder = next(number for number, line in enumerate(lines, 1)
                 if line.strip().startswith("assign \\$1 "))
    assert sources.line(adder) == ("tests/test_runner.py",
                                   _line_of("self.count.eq(self.count + 1)"))


def test_read_points_and_verilator_names(tmp_path):
    key = "\x01f\x02a.v\x01l\x0216\x01page\x02v_toggle/top.core\x01o\x02__0241[3]:0->1\x01h\x02top"
    dat = tmp_path / "coverage.dat"
    dat.write_text(f"# SystemC::Coverage-3\nC '{key}' 7\nC '{key.replace('0->1', '1->0')}' 0\n")
    points = coverage.read_points(dat)
    assert [count for _, count in points] == [7, 0]
    fields = points[0][0]
    assert coverage.kind_and_module(fields) == ("toggle", "top.core")
    assert fields["o"] == "__0241[3]:0->1"
    assert coverage._verilator_name("__0241") == "$1"


def test_coverage_build_is_never_a_normal_build(monkeypatch):
    normal = sim_runner._build_options("verilator", TOP, False, public="top", opt="-O1")
    assert "coverage" not in normal
    covered = sim_runner._build_options("verilator", TOP, False, public="top", opt="-O1",
                                        coverage=True)
    assert covered == dict(normal, coverage=list(sim_runner.COVERAGE))
    monkeypatch.delenv(sim_runner.COVERAGE_ENV, raising=False)
    assert not sim_runner.coverage_enabled()
    monkeypatch.setenv(sim_runner.COVERAGE_ENV, "1")
    assert sim_runner.coverage_enabled()


def test_emit_src_everywhere_keeps_the_src_attributes():
    # In a process of its own: it patches Amaranth for the whole process.
    code = ("from sim.coverage import emit_src_everywhere; emit_src_everywhere(); "
            "emit_src_everywhere(); from amaranth.back import verilog; "
            "from sim.runner import ApTop; from tests.test_runner import Counter; "
            "text = verilog.convert(ApTop(Counter()), name='t', emit_src=False); "
            "assert 'tests/test_runner.py:' in text, text[:400]; print('ok')")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


@pytest.mark.cocotb
@pytest.mark.regress
def test_counter_coverage_end_to_end(monkeypatch, tmp_path, counter_verilog):
    """A coverage build of the runner's counter: its run writes coverage.dat, the report
    merges it, and the counter's low bits toggled on the line that made `count`."""
    monkeypatch.setenv(sim_runner.COVERAGE_ENV, "1")
    results = run_cocotb("verilator", counter_verilog, TOP, TB, config_name="runner-covtest",
                         testcase="counter_counts", timeout_s=120)
    build = Path(results).parent.parent.parent
    assert "-verilator-cov-" in build.name
    dat = Path(results).with_name("coverage.dat")
    points = coverage.read_points(dat)
    toggles = {fields["o"]: count for fields, count in points
               if coverage.kind_and_module(fields) == ("toggle", f"{TOP}.core")}
    assert toggles["count[0]:0->1"] > 0 and toggles["count[0]:1->0"] > 0
    monkeypatch.delenv(sim_runner.COVERAGE_ENV)
    text = coverage.report(["runner"], out_root=tmp_path, html=False)
    assert "runner:" in text and "toggles" in text
    info = (tmp_path / "runner" / "amaranth.info").read_text()
    record = info.split(f"SF:{RUNNER_TEST}\n", 1)[1].split("end_of_record")[0]
    counts = dict(line[3:].split(",") for line in record.splitlines() if line.startswith("DA:"))
    assert str(_line_of("en: In(1)")) in counts
    assert (tmp_path / "runner" / "verilog.info").read_text().startswith("TN:")
