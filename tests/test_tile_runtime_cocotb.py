"""The host runtime (:mod:`sim.tile_runtime`) running decode steps of the tile presets on
the standalone VA and MA tops under Verilator (``sim/program_tb.py``), bit for bit
against the golden interpreter; the other block's commands, and those the RTL does not
have yet, played by the host.

The builds are the block regressions' own (``tests/test_va_cocotb.py``'s L=8 build,
``tests/test_ma_cocotb.py``'s P=8 build: the same Verilog text, configuration name and
options), so no build is added. ``make test`` runs the first commands of the ``notes``
step on each top; ``make regress`` the whole steps of both presets (and the ``notes``
step in int8 mode), and a smoke of the first commands on Icarus. Each run prints the
per-op table, the per-opcode table and the summary (``pytest -s``).
"""

import json
import os

import pytest

from sim.runner import run_cocotb
from tests import test_ma_cocotb as ma
from tests import test_va_cocotb as va

TESTBENCH = "sim.program_tb"
SLICE = 16


def run(block, preset, limit, tmp_path, timeout_s, mode="bf16", simulator="verilator"):
    report = tmp_path / "report.json"
    env = {"V4HW_RT_PRESET": preset, "V4HW_RT_LIMIT": str(limit), "V4HW_RT_REPORT": str(report),
           "V4HW_RT_MODE": mode,
           "V4HW_RT_LANES": str(va.L), "V4HW_VA_LANES": str(va.L)}
    env.update({k: v for k, v in os.environ.items() if k == "V4HW_RT_MEMORY_LATENCY"})
    if block == "va":
        run_cocotb(simulator, va.va_verilog(), va.TOPLEVEL, TESTBENCH,
                   config_name=va.config_name(va.L), testcase="program_on_va",
                   timeout_s=timeout_s, **va.VERILATOR, extra_env=env)
    else:
        run_cocotb(simulator, ma.ma_verilog(), ma.TOPLEVEL, TESTBENCH,
                   config_name=ma.CONFIG_NAME, testcase="program_on_ma",
                   timeout_s=timeout_s, **ma.VERILATOR, extra_env=env)
    out = json.loads(report.read_text())
    print(f"\n{out['table']}\n{out['summary']}")
    return out["records"]


def check(records, block, limit):
    if limit:
        assert len(records) == limit
    ours = [r for r in records if r["block"] == block]
    assert any(r["host"] is None for r in ours)
    for r in records:
        # played by the host: every command of the other block, and this block's the RTL
        # does not have yet; every RTL command was timed and checked
        if r["block"] != block:
            assert r["host"] == f"{r['block'].upper()} played by the host" and r["cycles"] is None
        elif r["host"] is not None:      # sim.tile_runtime.Capabilities.missing
            assert r["host"].startswith("no ") and r["cycles"] is None
        if r["host"] is None:
            assert r["cycles"] > 0 and r["checked"]


@pytest.mark.cocotb
@pytest.mark.parametrize("block", ["va", "ma"])
def test_runtime_slice(block, tmp_path):
    """The first commands of the ``notes`` decode step on each top."""
    check(run(block, "notes", SLICE, tmp_path, 600), block, SLICE)


@pytest.mark.cocotb
@pytest.mark.regress
@pytest.mark.parametrize("preset", ["notes", "deepseek-v4"])
@pytest.mark.parametrize("block", ["va", "ma"])
def test_runtime_decode_step(block, preset, tmp_path):
    """Every command of one decode step of every layer of ``preset``."""
    check(run(block, preset, 0, tmp_path, 7200), block, 0)


@pytest.mark.cocotb
@pytest.mark.regress
@pytest.mark.parametrize("block", ["va", "ma"])
def test_runtime_notes_int8(block, tmp_path):
    """The ``notes`` step in the MA's int8 mode: QUANTIZE on the VA, int8 GEMMs on the MA,
    DEQUANTIZE_MEM played by the host while the VA has no RTL for it."""
    records = run(block, "notes", 0, tmp_path, 3600, mode="int8")
    check(records, block, 0)
    assert any(r["opcode"] == ("QUANTIZE" if block == "va" else "GEMM_INT8") and r["host"] is None
               for r in records)


@pytest.mark.cocotb
@pytest.mark.regress
@pytest.mark.parametrize("block", ["va", "ma"])
def test_runtime_icarus_smoke(block, tmp_path):
    """The first commands of the ``notes`` step on Icarus (the regressions' Icarus builds)."""
    check(run(block, "notes", 10, tmp_path, 1200, simulator="icarus"), block, 10)
