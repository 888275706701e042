"""cocotb regressions of the standalone MA top (``v4hw_ma``, P=8, DATA_WIDTH=128).

Each cocotb test of ``tests/ma_tb.py`` runs once per simulator (Icarus and Verilator) in
its own simulation, so a failure names the test and the simulator; the seed it printed
reruns it (``V4HW_SEED=<n> python -m pytest '<node id>'``). ``WAVES=1`` leaves a VCD and
a GTKWave save file (groups: ``sim.ma_driver.MA_GTKW_GROUPS``) next to the run's ``results.xml``.
"""

from functools import cache

import pytest
from amaranth.back import verilog as amaranth_verilog

from hdl.top.ma import MaTop
from sim.ma_driver import MA_GTKW_GROUPS
from sim.runner import SIMULATORS, run_cocotb

P, DATA_WIDTH = 8, 128
TOPLEVEL = "v4hw_ma"
CONFIG_NAME = f"ma-p{P}-dw{DATA_WIDTH}"
TESTBENCH = "tests.ma_tb"
TIMEOUT_S = {"icarus": 600, "verilator": 300}
VERILATOR = dict(verilator_public="top", verilator_opt="-O1",
                 verilator_public_rw=[("*timebase*", "now")])
"""Verilator's build options: only the top's signals public (the testbenches touch the
ports, and ``ctr_and_time`` deposits the timebase's ``now`` register, made writable on
its own) and the model compiled with -O1; the C++ is then a fraction of its size with
every signal public, and its build several times shorter (docs/testing.md)."""

TESTS = [
    "registers", "gemm_random", "gemm_large", "int8_extremes", "bf16_special_values",
    "accumulate_chain", "mode_switch", "strides", "tat_regions", "bad_tat", "tat_miss", "bad_shapes",
    "misaligned", "axi_read_error", "axi_write_error", "start_while_busy", "ctr_and_time",
    "interrupts", "backpressure", "memory_latency", "b_transposed_random", "b_transposed_errors",
]



@cache
def ma_verilog(p=P, data_width=DATA_WIDTH):
    """Verilog of ``MaTop(p, data_width)`` as module ``v4hw_ma``, generated once per
    configuration. Without ``src`` attributes: they hold Python line numbers, and any
    edit above a line would change the text and force a rebuild of the simulators."""
    return amaranth_verilog.convert(MaTop(p, data_width), name=TOPLEVEL, emit_src=False)


def cocotb_args(simulator):
    """``run_cocotb``'s arguments but the testcase: the build and run of every test here
    (``make soak`` runs its seeds of ``gemm_random`` on this build, sim/soak.py)."""
    return dict(verilog=ma_verilog(), toplevel=TOPLEVEL, test_module=TESTBENCH,
                config_name=CONFIG_NAME, gtkw_groups=MA_GTKW_GROUPS,
                timeout_s=TIMEOUT_S[simulator], **VERILATOR)


@pytest.mark.cocotb
@pytest.mark.parametrize("test", TESTS)
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_ma(simulator, test):
    run_cocotb(simulator, testcase=test, **cocotb_args(simulator))
