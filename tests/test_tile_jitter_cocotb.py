"""The jitter of a decode step through ``v4hw_tile`` beside a background copy
(``tests/tile_jitter_tb.py``): 20 repetitions of the ``notes`` decode step (same state,
same tokens) while the cache-migrate engine copies, fixed-latency memory, with the
decode class reserved (RESERVE.CLASSES, ``hdl/tile/reserve.py``) and without.

With reservations every step takes the same number of cycles (spread 0), no guard ends
before the path drained (RSV_LATE 0), and the copy's share of the memory bus in each
step (its read and its write beats per step cycle) is printed: alone, the background
runs only between reserved commands, short of a quarter (docs/tile/README.md,
"Measured"); with time-division sharing inside the reserved commands (RSV_SHARE =
:data:`SHARE`) the steps are still identical and the copy gets at least a quarter of
each channel in every step. Without reservations, the spread is measured and printed.
The build is the tile tests' own (``tests/test_tile_cocotb.py``), so none is added;
``regress``: each run is minutes.
"""

import json

import pytest

from hdl.tile.top import SMALL
from sim.runner import run_cocotb
from tests import test_tile_cocotb as tile

TESTBENCH = "tests.tile_jitter_tb"
STEPS = 20
GUARD = 160          # RSV_GUARD's reset value (docs/tile/README.md: the drains measured)
SHARE = (64, 256)    # RSV_SHARE (RESERVED, BACKGROUND cycles) of the shared run
SHARE_GOAL = 0.25    # the copy's least share of each channel per step, shared


def run_jitter(tmp_path, reserve, share=(0, 0)):
    report = tmp_path / "jitter.json"
    env = {"V4HW_JITTER_STEPS": str(STEPS), "V4HW_JITTER_RESERVE": "1" if reserve else "0",
           "V4HW_JITTER_GUARD": str(GUARD), "V4HW_JITTER_REPORT": str(report),
           "V4HW_JITTER_RESERVED": str(share[0]), "V4HW_JITTER_BACKGROUND": str(share[1]),
           "V4HW_TS_P": str(SMALL["p"]), "V4HW_TS_L": str(SMALL["lanes"])}
    run_cocotb("verilator", tile.tile_verilog(), tile.TOPLEVEL, TESTBENCH,
               config_name=tile.CONFIG_NAME, testcase="decode_jitter",
               gtkw_groups=tile.TILE_GTKW_GROUPS, timeout_s=7200, extra_env=env,
               **tile.VERILATOR)
    out = json.loads(report.read_text())
    label = f"reserved, share {share}" if reserve else "unreserved"
    print(f"\njitter {label}: cycles {out['cycles']}, "
          f"spread {out['spread']}, background read share min {out['bg_read_share_min']:.3f}, "
          f"write share min {out['bg_write_share_min']:.3f}, counters {out['counters']}")
    return out


@pytest.mark.cocotb
@pytest.mark.regress
def test_tile_jitter_reserved(tmp_path):
    out = run_jitter(tmp_path, True)
    assert len(out["cycles"]) == STEPS
    assert out["spread"] == 0, out["cycles"]
    assert out["counters"]["RSV_LATE"] == 0, out["counters"]
    assert out["counters"]["RSV_DRAIN_MAX"] <= GUARD, out["counters"]
    assert out["counters"]["RSV_STARTS"] > 0
    assert out["bg_read_share_min"] > 0 and out["bg_write_share_min"] > 0, out


@pytest.mark.cocotb
@pytest.mark.regress
def test_tile_jitter_shared(tmp_path):
    """Reserved with RSV_SHARE = :data:`SHARE`: still spread 0 and no guard late, and
    the copy gets at least :data:`SHARE_GOAL` of each channel in every step."""
    out = run_jitter(tmp_path, True, SHARE)
    assert len(out["cycles"]) == STEPS
    assert out["spread"] == 0, out["cycles"]
    assert out["counters"]["RSV_LATE"] == 0, out["counters"]
    assert out["counters"]["RSV_DRAIN_MAX"] <= GUARD, out["counters"]
    assert out["counters"]["RSV_STARTS"] > 0
    assert min(out["bg_read_share_min"], out["bg_write_share_min"]) >= SHARE_GOAL, out


@pytest.mark.cocotb
@pytest.mark.regress
def test_tile_jitter_unreserved(tmp_path):
    out = run_jitter(tmp_path, False)
    assert len(out["cycles"]) == STEPS
    assert out["counters"]["RSV_STARTS"] == 0
    assert out["bg_read_share_min"] > 0 and out["bg_write_share_min"] > 0, out
