"""cocotb regressions of the standalone VA top (``v4hw_va``, L=32, DATA_WIDTH=128).

Each cocotb test of ``tests/va_tb.py`` runs once per simulator (Icarus and Verilator);
the seed it printed reruns it (``V4HW_SEED=<n> python -m pytest '<node id>'``).
``WAVES=1`` leaves a VCD and a GTKWave save file (groups: ``sim.va_driver.VA_GTKW_GROUPS``).
"""

from functools import cache

import pytest
from amaranth.back import verilog as amaranth_verilog

from hdl.top.va import VaTop
from sim.runner import SIMULATORS, run_cocotb
from sim.va_driver import VA_GTKW_GROUPS

L, DATA_WIDTH = 32, 128
TOPLEVEL = "v4hw_va"
CONFIG_NAME = f"va-l{L}-dw{DATA_WIDTH}"
TESTBENCH = "tests.va_tb"
TIMEOUT_S = {"icarus": 600, "verilator": 300}

TESTS = ["elementwise_lengths", "strided_moves", "backpressure", "large", "bad_commands",
         "axi_errors", "start_while_busy", "functions_exhaustive"]


@cache
def va_verilog(lanes=L, data_width=DATA_WIDTH):
    """Verilog of ``VaTop(lanes, data_width)`` as ``v4hw_va``, once per configuration,
    without ``src`` attributes (so an edit elsewhere does not force a rebuild)."""
    return amaranth_verilog.convert(VaTop(lanes, data_width), name=TOPLEVEL, emit_src=False)


@pytest.mark.cocotb
@pytest.mark.parametrize("test", TESTS)
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_va(simulator, test):
    run_cocotb(simulator, va_verilog(), TOPLEVEL, TESTBENCH, config_name=CONFIG_NAME,
               testcase=test, gtkw_groups=VA_GTKW_GROUPS, timeout_s=TIMEOUT_S[simulator])


@pytest.mark.cocotb
def test_va_performance():
    """Throughput of SCALE, ADD and the strided gather against their bus limits
    (``tests/va_tb.py::performance``): Verilator only, its runs of 10 000 to 40 000
    cycles would take minutes on Icarus."""
    run_cocotb("verilator", va_verilog(), TOPLEVEL, TESTBENCH, config_name=CONFIG_NAME,
               testcase="performance", gtkw_groups=VA_GTKW_GROUPS,
               timeout_s=TIMEOUT_S["verilator"])
