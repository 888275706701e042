"""Tests of the performance baseline check (``sim/perf.py``) on a baseline of its own."""

import json

import pytest

from sim import perf


@pytest.fixture
def baseline(tmp_path, monkeypatch):
    for name in ("V4HW_SEED", "V4HW_SEED_SALT", "V4HW_PERF_UPDATE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "perf_baseline.json"


def record(monkeypatch, path, name, value, **kwargs):
    monkeypatch.setenv("V4HW_PERF_UPDATE", "1")
    assert perf.check(name, value, path=path, **kwargs) is None
    monkeypatch.delenv("V4HW_PERF_UPDATE")


def test_within_one_percent_passes(baseline, monkeypatch, capsys):
    record(monkeypatch, baseline, "x.cycles", 1000, simulator="verilator")
    assert json.loads(baseline.read_text())["figures"] == {
        "x.cycles@verilator": {"value": 1000, "better": "lower"}}
    assert perf.check("x.cycles", 1010, path=baseline, simulator="verilator") == \
        pytest.approx(0.01)
    assert perf.check("x.cycles", 990, path=baseline, simulator="verilator") == \
        pytest.approx(-0.01)
    assert "x.cycles@verilator = 1010 (baseline 1000, +1.00 % worse)" in capsys.readouterr().out


def test_worse_fails_with_the_figure_and_the_change(baseline, monkeypatch):
    record(monkeypatch, baseline, "x.cycles", 1000)
    with pytest.raises(perf.PerfRegression, match=r"x\.cycles got 1\.20 % worse: 1012 "
                                                  r"against the baseline's 1000"):
        perf.check("x.cycles", 1012, path=baseline)


def test_higher_is_better(baseline, monkeypatch):
    record(monkeypatch, baseline, "x.rate", 0.5, better="higher")
    perf.check("x.rate", 0.496, path=baseline, better="higher")
    with pytest.raises(perf.PerfRegression, match="worse"):
        perf.check("x.rate", 0.49, path=baseline, better="higher")
    with pytest.raises(perf.PerfRegression, match="says higher is better"):
        perf.check("x.rate", 0.5, path=baseline)


def test_an_improvement_must_be_recorded(baseline, monkeypatch):
    record(monkeypatch, baseline, "x.cycles", 1000)
    with pytest.raises(perf.PerfRegression, match="better.*V4HW_PERF_UPDATE=1"):
        perf.check("x.cycles", 900, path=baseline)
    record(monkeypatch, baseline, "x.cycles", 900)
    assert perf.check("x.cycles", 900, path=baseline) == 0


def test_a_figure_without_baseline_fails(baseline, monkeypatch):
    record(monkeypatch, baseline, "x.cycles", 1000, simulator="verilator")
    with pytest.raises(perf.PerfRegression, match=r"x\.other@verilator = 5 has no baseline"):
        perf.check("x.other", 5, path=baseline, simulator="verilator")


def test_other_seeds_are_shown_not_checked(baseline, monkeypatch, capsys):
    record(monkeypatch, baseline, "x.cycles", 1000)
    monkeypatch.setenv("V4HW_SEED_SALT", "3")
    assert perf.check("x.cycles", 2000, path=baseline) is None
    assert "+100.00 % worse" in capsys.readouterr().out


def test_arguments_are_checked(baseline):
    with pytest.raises(ValueError, match="better"):
        perf.check("x", 1, better="faster", path=baseline)
    with pytest.raises(TypeError, match="finite number"):
        perf.check("x", float("nan"), path=baseline)
    with pytest.raises(TypeError, match="finite number"):
        perf.check("x", None, path=baseline)


def test_check_all_reports_every_failure(baseline, monkeypatch):
    record(monkeypatch, baseline, "m.a", 100)
    record(monkeypatch, baseline, "m.b", 100)
    record(monkeypatch, baseline, "m.c", 100)
    with pytest.raises(perf.PerfRegression) as failure:
        perf.check_all("m", {"a": 150, "b": 100, "c": 50}, path=baseline)
    lines = str(failure.value).splitlines()
    assert len(lines) == 2 and "m.a got 50.00 % worse" in lines[0] and "m.c" in lines[1]


def test_icarus_figures_are_printed_not_checked(baseline, capsys):
    assert perf.check("x.cycles", 5, path=baseline, simulator="icarus") is None
    assert "x.cycles = 5 on icarus (not checked" in capsys.readouterr().out
