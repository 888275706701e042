"""cocotb regressions of the Muon top (``v4hw_muon``) on a 2×2 mesh.

Each cocotb test of ``tests/muon_tb.py`` runs once per mesh and simulator in its own
simulation; the seed it prints reruns it (``V4HW_SEED=<n> python -m pytest '<node id>'``).
``WAVES=1`` leaves a VCD and a GTKWave save file beside the run's ``results.xml``.
The testbench takes any mesh size (``V4HW_MUON_COLS`` / ``V4HW_MUON_ROWS``).
Verilator builds with only the top's signals public (``verilator_public="top"``): the
testbench touches nothing else, and the C++ is then several times smaller (the 2×2 build
went from 503 s to 107 s on the shared machine).
"""

from functools import cache

import pytest
from amaranth.back import verilog as amaranth_verilog

from hdl.top.muon import MuonTop
from sim.runner import SIMULATORS, run_cocotb

TOPLEVEL = "v4hw_muon"
TESTBENCH = "tests.muon_tb"
TIMEOUT_S = {"icarus": 900, "verilator": 600}
MESHES = [(2, 2)]
TESTS = ["registers", "random_traffic_backpressure", "stale_drops", "bad_destination",
         "reservations_against_golden", "reserved_flows_zero_jitter",
         "priority_and_starvation_bound"]


@cache
def muon_verilog(cols, rows):
    """Verilog of ``MuonTop(cols, rows)`` as ``v4hw_muon``, once per size (no ``src``
    attributes, so an edit elsewhere does not force a rebuild)."""
    return amaranth_verilog.convert(MuonTop(cols, rows), name=TOPLEVEL, emit_src=False)


@pytest.mark.cocotb
@pytest.mark.parametrize("test", TESTS)
@pytest.mark.parametrize("mesh", MESHES, ids=lambda m: f"{m[0]}x{m[1]}")
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_muon(simulator, mesh, test):
    cols, rows = mesh
    run_cocotb(simulator, muon_verilog(cols, rows), TOPLEVEL, TESTBENCH,
               config_name=f"muon-{cols}x{rows}", testcase=test,
               extra_env={"V4HW_MUON_COLS": str(cols), "V4HW_MUON_ROWS": str(rows)},
               timeout_s=TIMEOUT_S[simulator], verilator_public="top")
