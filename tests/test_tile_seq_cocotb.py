"""The planned decode step run by the tile's command sequencer (``tests/tile_seq_tb.py``)
on ``v4hw_tile`` under Verilator and Icarus.

The build is the tile tests' own (``tests/test_tile_cocotb.py``: the same Verilog text,
configuration name and options), so no build is added. ``make test`` runs the list
planned for the first 12 commands of the ``notes`` step on Verilator; ``make regress``
the first 4 on Icarus (slow: the tile's Icarus build), the whole step and the
``deepseek-v4`` preset's whole step (three layers), each beside the host-driven run of the
same step for the ratio. ``pytest -s`` prints the report (the
plan-vs-measured distribution).

The jitter of planned steps (``tests/tile_seq_jitter_tb.py``): the same short list run
:data:`JITTER_STEPS_SHORT` times by the sequencer (``make test``), :data:`JITTER_STEPS`
times in ``regress`` with the whole step's list, while the cache-migrate engine copies in
the background, the decode class reserved: every step the same cycles, every entry's
launch and CTR at the same cycle after T0, bit for bit (and, in ``regress``, the short
list with nothing reserved, its spread printed).
"""

import json

import pytest

from sim.runner import run_cocotb
from tests import test_tile_cocotb as tile

TESTBENCH = "tests.tile_seq_tb"
SHORT = 12
"""Commands of the short run: the list planned for the step's first SHORT commands."""
SHORT_ICARUS = 4
JITTER_TESTBENCH = "tests.tile_seq_jitter_tb"
JITTER_STEPS_SHORT = 3
JITTER_STEPS = 20
JITTER_GUARD = 160
"""RSV_GUARD of the jitter runs: its reset value (docs/tile/README.md: the drains
measured), as tests/test_tile_jitter_cocotb.py's; added to every START's margin in the
plan."""


def run_planned(simulator, tmp_path, timeout_s, *, limit=0, host=False, on_time=False,
                preset="notes"):
    report = tmp_path / "report.json"
    env = {"V4HW_SQ_PRESET": preset, "V4HW_SQ_LIMIT": str(limit),
           "V4HW_SQ_REPORT": str(report), "V4HW_SQ_HOST": str(int(host)),
           "V4HW_SQ_ON_TIME": str(int(on_time))}
    verilog = tile.tile_verilog() if simulator == "verilator" else tile.tile_verilog_icarus()
    options = tile.VERILATOR if simulator == "verilator" else {}
    try:
        run_cocotb(simulator, verilog, tile.TOPLEVEL, TESTBENCH, config_name=tile.CONFIG_NAME,
                   testcase="planned_step", gtkw_groups=tile.TILE_GTKW_GROUPS,
                   timeout_s=timeout_s, extra_env=env, **options)
    finally:
        out = json.loads(report.read_text()) if report.is_file() else None
        if out is not None:
            print(json.dumps({k: v for k, v in out.items() if k != "ops"}, indent=1))
    return out


@pytest.mark.cocotb
def test_tile_sequencer_short(tmp_path):
    """The first commands of the notes step's planned list, launched by the sequencer:
    every entry on time, each CTR within the tile machine model's error."""
    out = run_planned("verilator", tmp_path, 1800, limit=SHORT, on_time=True)
    assert out["count"] > 0 and out["commands"] == SHORT and out["late_entries"] == 0


@pytest.mark.cocotb
@pytest.mark.regress
def test_tile_sequencer_short_icarus(tmp_path):
    """The same on Icarus, fewer commands (regress: 26 s of Icarus for the 4 commands'
    3 757 cycles, 143 s with its 21 s build and the Verilog, on the shared machine)."""
    out = run_planned("icarus", tmp_path, 3600, limit=SHORT_ICARUS)
    assert out["count"] > 0 and out["commands"] == SHORT_ICARUS


@pytest.mark.cocotb
@pytest.mark.regress
def test_tile_sequencer_notes_step(tmp_path):
    """The whole notes step from the sequencer (every entry on time, each CTR within the
    tile machine model's error), then from the host for the ratio."""
    out = run_planned("verilator", tmp_path, 7200, host=True, on_time=True)
    assert out["count"] == out["entries"] and out["late_entries"] == 0
    print(f"planned step {out['run_cycles']} cycles (START to DONE), host-driven "
          f"{out['host_cycles']}: ratio {out['host_cycles'] / out['run_cycles']:.3f}")


@pytest.mark.cocotb
@pytest.mark.regress
def test_tile_sequencer_deepseek_v4_step(tmp_path):
    """The deepseek-v4 preset's whole step (three layers, 1981 commands, 4252 entries) from
    the sequencer (every entry on time, each CTR within the tile machine model's error,
    bit for bit), then from the host for the ratio."""
    out = run_planned("verilator", tmp_path, 7200, host=True, on_time=True,
                      preset="deepseek-v4")
    assert out["count"] == out["entries"] and out["late_entries"] == 0 and out["layers"] == 3
    print(f"planned step {out['run_cycles']} cycles (START to DONE), host-driven "
          f"{out['host_cycles']}: ratio {out['host_cycles'] / out['run_cycles']:.3f}")


def run_jitter(tmp_path, steps, timeout_s, *, limit=SHORT, reserve=True):
    report = tmp_path / "jitter.json"
    env = {"V4HW_SQJ_STEPS": str(steps), "V4HW_SQJ_LIMIT": str(limit),
           "V4HW_SQJ_GUARD": str(JITTER_GUARD), "V4HW_SQJ_RESERVE": str(int(reserve)),
           "V4HW_SQJ_REPORT": str(report)}
    run_cocotb("verilator", tile.tile_verilog(), tile.TOPLEVEL, JITTER_TESTBENCH,
               config_name=tile.CONFIG_NAME, testcase="planned_jitter",
               gtkw_groups=tile.TILE_GTKW_GROUPS, timeout_s=timeout_s, extra_env=env,
               **tile.VERILATOR)
    out = json.loads(report.read_text())
    print(f"\nplanned jitter: {out['steps']} steps of {out['entries']} entries "
          f"({out['commands']} commands), cycles {out['cycles']} (spread {out['spread']}), "
          f"late entries {out['late_entries']} (max {out['late_max']}), gaps {out['gaps']}, "
          f"reserved {out['reserve']}, background beats "
          f"read {out['bg_read_beats']} write {out['bg_write_beats']}, {out['counters']}, "
          f"{out['run_s']} s")
    return out


@pytest.mark.cocotb
def test_tile_sequencer_jitter_short(tmp_path):
    """The short list JITTER_STEPS_SHORT times beside a background copy: identical steps."""
    out = run_jitter(tmp_path, JITTER_STEPS_SHORT, 1800)
    assert len(out["cycles"]) == JITTER_STEPS_SHORT and out["spread"] == 0
    assert out["launches_identical"] and out["ctrs_identical"]


@pytest.mark.cocotb
@pytest.mark.regress
def test_tile_sequencer_jitter(tmp_path):
    """The whole notes step's list JITTER_STEPS times beside a background copy."""
    out = run_jitter(tmp_path, JITTER_STEPS, 3600, limit=0)
    assert len(out["cycles"]) == JITTER_STEPS and out["spread"] == 0
    assert out["launches_identical"] and out["ctrs_identical"]


@pytest.mark.cocotb
@pytest.mark.regress
def test_tile_sequencer_jitter_unreserved(tmp_path):
    """The short list JITTER_STEPS_SHORT times beside the copy, nothing reserved (planned
    without the guard): bit for bit every step; the spread and the late entries printed."""
    out = run_jitter(tmp_path, JITTER_STEPS_SHORT, 1800, reserve=False)
    assert len(out["cycles"]) == JITTER_STEPS_SHORT
