"""Faults in the middle of a ``notes`` decode step through the integrated tile
(``tests/tile_faults_tb.py``): an AXI read error, an AXI write error, a TAT miss and an
AXI read error in an indexed VA command (GATHER_IDX), each reported by its block (code,
ERR_ADDR), named by the host runtime, recovered from, the op run again bit-exact; an AXI
read and a write error in copies of the cache-migrate engine between two ops, each named
by the runtime, reported by the engine and the MC, recovered from and the copy run again
exactly; and the next step bit for bit.

The build is the tile tests' own (``tests/test_tile_cocotb.py``: the same Verilog text,
configuration name and options), so no build is added. ``pytest -s`` shows the faults'
reports.
"""

import json

import pytest

from sim.runner import run_cocotb
from tests import test_tile_cocotb as tile

TESTBENCH = "tests.tile_faults_tb"


def run_faults(tmp_path, faults, timeout_s=1800):
    report = tmp_path / "report.json"
    env = {"V4HW_TF_FAULTS": ",".join(faults), "V4HW_TS_REPORT": str(report)}
    try:
        run_cocotb("verilator", tile.tile_verilog(), tile.TOPLEVEL, TESTBENCH,
                   config_name=tile.CONFIG_NAME, testcase="faults_in_a_step",
                   gtkw_groups=tile.TILE_GTKW_GROUPS, timeout_s=timeout_s, extra_env=env,
                   **tile.VERILATOR)
    finally:
        if report.is_file():
            out = json.loads(report.read_text())
            print(json.dumps({k: out[k] for k in ("faults", "steps", "run_s")}, indent=1))
    return out


@pytest.mark.cocotb
def test_tile_faults_in_a_step(tmp_path):
    """The six faults in one step, then the next step: the run costs the two steps
    (the faults add a few thousand cycles), so one fault alone would save nothing."""
    kinds = ["read", "write", "tat", "gather", "migrate-read", "migrate-write"]
    out = run_faults(tmp_path, kinds)
    ops = [f["op"] for f in out["faults"]]     # in program order (a copy: the op after it)
    assert ops == sorted(ops) and sorted(f["fault"] for f in out["faults"]) == sorted(kinds)
    codes = {f["fault"]: f["code"] for f in out["faults"]}
    assert codes == {"read": "AXI_READ_ERROR", "write": "AXI_WRITE_ERROR", "tat": "TAT_MISS",
                     "gather": "AXI_READ_ERROR", "migrate-read": "AXI_READ_ERROR",
                     "migrate-write": "AXI_WRITE_ERROR"}
    for f in out["faults"]:
        assert f["err_addr"] == f["expected_err_addr"] and f["retry_cycles"] > 0, f
        if f["block"] == "migrate":
            assert f["message"].startswith(f"copy {f['copy']} (migrate COPY of "), f
        else:
            assert f["message"].startswith(f"op {f['op']} ({f['block']} {f['opcode']}, "), f
    assert [s["position"] for s in out["steps"]] == [27, 28]
    assert out["steps"][1]["bit_exact"]
