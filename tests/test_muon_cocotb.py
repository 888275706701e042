"""cocotb regressions of the Muon top (``v4hw_muon``) on 2×2 and 4×4 meshes.

Each cocotb test of ``tests/muon_tb.py`` runs once per mesh and simulator in its own
simulation; the seed it prints reruns it (``V4HW_SEED=<n> python -m pytest '<node id>'``).
``WAVES=1`` leaves a VCD and a GTKWave save file (groups: ``sim.muon_driver.MUON_GTKW_GROUPS``)
beside the run's ``results.xml``. The testbench takes any mesh size (``V4HW_MUON_COLS`` /
``V4HW_MUON_ROWS``). Verilator builds with only the top's signals public
(``verilator_public="top"``; the testbench touches nothing else, and the C++ is then
several times smaller) and compiles the model with ``-O1`` (about half the compile time
of Verilator's ``-Os``).
"""

import pytest
from amaranth.back import verilog as amaranth_verilog

from hdl.top.muon import MuonTop
from sim.muon_driver import MUON_GTKW_GROUPS
from sim.runner import SIMULATORS, run_cocotb
from sim.verilog_cache import disk_cached

TOPLEVEL = "v4hw_muon"
TESTBENCH = "tests.muon_tb"
TIMEOUT_S = {"icarus": 900, "verilator": 600}
MESHES = [(2, 2), (4, 4)]
TESTS = ["registers", "random_traffic_backpressure", "stale_drops", "bad_destination",
         "every_class_under_backpressure",
         "reservations_against_golden", "reserved_flows_zero_jitter",
         "priority_and_starvation_bound"]
# The 4×4 mesh runs the tests whose traffic spans the mesh (the others test what does not
# depend on its size, or use fixed nodes of a 2×2). Icarus runs only the random traffic
# with back-pressure there: each of its cycles costs four times a 2×2's, and the block's
# share of `make test` is a few minutes.
LARGE = {"verilator": {"random_traffic_backpressure", "stale_drops",
                       "reservations_against_golden", "reserved_flows_zero_jitter"},
         "icarus": {"random_traffic_backpressure"}}
CASES = [pytest.param(simulator, mesh, test, id=f"{simulator}-{mesh[0]}x{mesh[1]}-{test}")
         for simulator in SIMULATORS for mesh in MESHES for test in TESTS
         if mesh == (2, 2) or test in LARGE[simulator]]


@disk_cached
def muon_verilog(cols, rows):
    """Verilog of ``MuonTop(cols, rows)`` as ``v4hw_muon``, once per size (no ``src``
    attributes, so an edit elsewhere does not force a rebuild)."""
    return amaranth_verilog.convert(MuonTop(cols, rows), name=TOPLEVEL, emit_src=False)


def cocotb_args(simulator, cols, rows):
    """``run_cocotb``'s arguments but the testcase on a ``cols``×``rows`` mesh
    (``make soak`` runs its seeds on the same build, sim/soak.py)."""
    return dict(verilog=muon_verilog(cols, rows), toplevel=TOPLEVEL, test_module=TESTBENCH,
                config_name=f"muon-{cols}x{rows}",
                extra_env={"V4HW_MUON_COLS": str(cols), "V4HW_MUON_ROWS": str(rows)},
                timeout_s=TIMEOUT_S[simulator], gtkw_groups=MUON_GTKW_GROUPS,
                verilator_public="top", verilator_opt="-O1")


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator,mesh,test", CASES)
def test_muon(simulator, mesh, test):
    run_cocotb(simulator, testcase=test, **cocotb_args(simulator, *mesh))
