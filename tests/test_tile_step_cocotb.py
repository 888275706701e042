"""Decode steps of the tile presets through the integrated tile ``v4hw_tile`` under
Verilator (``sim/tile_demo_tb.py``): the host runtime runs every MA and VA command the
RTL has on the tile, bit for bit against the golden interpreter.

The build is the tile tests' own (``tests/test_tile_cocotb.py``: the same Verilog text,
configuration name and options), so no build is added. ``make test`` runs the ``notes``
step; ``make regress`` the 3-layer ``deepseek-v4`` step and two consecutive steps of
each preset, the second from the memory the tile wrote in the first, the ``notes`` step
under random pauses on ``m_axi_gmem`` against the same step without, the ``notes``
prefill of 16 tokens, and that prefill followed by two decode steps on the state it
wrote. ``pytest -s`` shows the per-stage table, the per-opcode table and
the summary.
"""

import json

import pytest

from hdl.tile.top import SMALL
from sim import perf
from sim.runner import run_cocotb
from tests import test_tile_cocotb as tile

TESTBENCH = "sim.tile_demo_tb"
PERF_FIGURES = ("cycles", "step_cycles", "gmem_beats")


def run_step(preset, tmp_path, timeout_s, limit=0, steps=0, pause=0.0, tokens=0):
    """``steps`` 0: the ``decode_step`` test; else ``decode_steps`` of that many;
    ``tokens``: the ``prefill`` test of that many tokens instead, and with ``steps`` the
    ``prefill_then_decode`` test. ``pause``: the probability of a pause cycle on each
    ``m_axi_gmem`` channel."""
    report = tmp_path / "report.json"
    env = {"V4HW_TS_PRESET": preset, "V4HW_TS_LIMIT": str(limit), "V4HW_TS_REPORT": str(report),
           "V4HW_TS_P": str(SMALL["p"]), "V4HW_TS_L": str(SMALL["lanes"]),
           "V4HW_TS_STEPS": str(steps), "V4HW_TS_PAUSE": str(pause),
           "V4HW_TS_TOKENS": str(tokens)}
    testcase = ("prefill_then_decode" if tokens and steps else "prefill" if tokens
                else "decode_steps" if steps else "decode_step")
    try:
        run_cocotb("verilator", tile.tile_verilog(), tile.TOPLEVEL, TESTBENCH,
                   config_name=tile.CONFIG_NAME,
                   testcase=testcase,
                   gtkw_groups=tile.TILE_GTKW_GROUPS, timeout_s=timeout_s, extra_env=env,
                   **tile.VERILATOR)
    finally:
        if report.is_file():
            out = json.loads(report.read_text())
            print(f"\n{out['stages']}\n\n{out['by_opcode']}\n{out['summary']}\n{out['figures']}"
                  f"\n{out['steps']}")
    return out


def check(out, baseline=None):
    """Bit for bit, every RTL command run and checked; ``baseline``: the name under which
    the step's cycles (START to CTR, summed over its commands), its cycles with the host's
    accesses and its ``m_axi_gmem`` beats are checked against the perf baseline."""
    fig = out["figures"]
    assert fig["bit_exact"] and fig["failure"] is None
    assert fig["rtl_ops"] > 0 and fig["cycles"] > 0
    for r in out["records"]:
        if r["host"] is None:
            assert r["cycles"] > 0 and r["checked"], r
        else:   # only what the RTL does not have yet (sim.tile_runtime.Capabilities)
            assert r["host"].startswith("no ") and r["cycles"] is None, r
    if baseline:
        perf.check_all(f"tile.step.{baseline}", {k: fig[k] for k in PERF_FIGURES},
                       simulator="verilator")


@pytest.mark.cocotb
def test_tile_step_notes(tmp_path):
    """One decode step of the ``notes`` layer through the tile; its cycles against the
    perf baseline."""
    check(run_step("notes", tmp_path, 1800), "notes")


@pytest.mark.cocotb
@pytest.mark.regress
def test_tile_step_deepseek_v4(tmp_path):
    """One decode step of the 3-layer ``deepseek-v4`` preset through the tile."""
    check(run_step("deepseek-v4", tmp_path, 7200), "deepseek-v4")


@pytest.mark.cocotb
@pytest.mark.regress
@pytest.mark.parametrize("preset", ["notes", "deepseek-v4"])
def test_tile_consecutive_steps(preset, tmp_path):
    """Two consecutive decode steps, the second generated from the memory the tile wrote
    in the first and ending at the preset's position (``notes`` 27, 28: a new refresh
    anchor; ``deepseek-v4`` 62, 63: 63 completes a CSA group of 4 and an HCA group of 8)."""
    out = run_step(preset, tmp_path, 7200, steps=2)
    check(out, f"{preset}.two_steps")
    assert [s["position"] for s in out["steps"]] == {"notes": [27, 28],
                                                     "deepseek-v4": [62, 63]}[preset]


@pytest.mark.cocotb
@pytest.mark.regress
def test_tile_step_notes_backpressure(tmp_path):
    """The ``notes`` step with random pauses (p = 0.25 a cycle, from the test's seed) on
    all five ``m_axi_gmem`` channels, bit-exact, and slower than the same step without."""
    without = run_step("notes", tmp_path, 1800)
    check(without, "notes")
    (tmp_path / "paused").mkdir()
    paused = run_step("notes", tmp_path / "paused", 3600, pause=0.25)
    check(paused, "notes.paused")
    assert paused["figures"]["pause"] == 0.25
    a, b = without["figures"], paused["figures"]
    print(f"notes step: {a['cycles']} command cycles ({a['step_cycles']} in all) without "
          f"pauses, {b['cycles']} ({b['step_cycles']}) with (seed {b['seed']})")
    assert b["cycles"] > a["cycles"] and b["rtl_ops"] == a["rtl_ops"]


@pytest.mark.cocotb
@pytest.mark.regress
def test_tile_prefill_notes(tmp_path):
    """The ``notes`` layer's prefill of 16 tokens (positions 0..15) through the tile."""
    out = run_step("notes", tmp_path, 7200, tokens=16)
    check(out, "notes.prefill16")
    assert out["figures"]["tokens"] == 16


@pytest.mark.cocotb
@pytest.mark.regress
def test_tile_prefill_then_decode_notes(tmp_path):
    """The ``notes`` prefill of 16 tokens through the tile, then two decode steps (16: a
    new refresh anchor, its HCA summaries recomputed from the caches the prefill wrote;
    17) on the state it wrote, each bit-exact and its layer output the row the golden
    prefill of 18 tokens gives."""
    out = run_step("notes", tmp_path, 7200, steps=2, tokens=16)
    check(out, "notes.prefill16_then_2")
    steps = out["steps"]
    assert [s["position"] for s in steps] == ["prefill 0..15", 16, 17]
    assert out["figures"]["full_prefill_rows"] == [16, 17]
    assert all(s["rtl_ops"] == s["ops"] and s["cycles"] > 0 for s in steps)
    for s in steps:
        print(f"{s['position']}: {s['ops']} ops, {s['cycles']} cycles START to CTR "
              f"({s['predicted']} predicted), {s['step_cycles']} with the host's accesses")
