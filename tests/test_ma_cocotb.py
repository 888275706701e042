"""cocotb regressions of the standalone MA top (``v4hw_ma``, DATA_WIDTH=128; P=8 on
Verilator, P=4 on Icarus: ``ICARUS_P``).

Each cocotb test of ``tests/ma_tb.py`` runs once per simulator (Icarus and Verilator) in
its own simulation, so a failure names the test and the simulator; the seed it printed
reruns it (``V4HW_SEED=<n> python -m pytest '<node id>'``). ``WAVES=1`` leaves a VCD and
a GTKWave save file (groups: ``sim.ma_driver.MA_GTKW_GROUPS``) next to the run's ``results.xml``.
"""

import pytest
from amaranth.back import verilog as amaranth_verilog

from hdl.top.ma import MaTop
from sim.ma_driver import MA_GTKW_GROUPS
from sim.runner import SIMULATORS, run_cocotb
from sim.verilog_cache import disk_cached

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
    "interrupts", "backpressure", "backpressure_errors", "backpressure_old_c_error",
    "memory_latency", "b_transposed_random", "b_transposed_errors",
]



@disk_cached
def ma_verilog(p=P, data_width=DATA_WIDTH):
    """Verilog of ``MaTop(p, data_width)`` as module ``v4hw_ma``, generated once per
    configuration. Without ``src`` attributes: they hold Python line numbers, and any
    edit above a line would change the text and force a rebuild of the simulators."""
    return amaranth_verilog.convert(MaTop(p, data_width), name=TOPLEVEL, emit_src=False)


ICARUS_P = 4
"""P of the build on Icarus. Icarus evaluates every clocked process each cycle, and the
P×P array makes the MA's idle cycle at P=8 three times as long as at P=4 (2 000 idle
cycles of the bare top under vvp: 2.84 processor seconds against 0.89, docs/testing.md).
The testbench's shapes are written in P (non-multiples, tiles that straddle P rows and
columns), so every directed test runs on Icarus at P=4 and on Verilator at P=8."""


def build_args(simulator):
    """The build of ``simulator``: its Verilog, configuration name and the testbench's
    environment (``V4HW_MA_P``)."""
    p = ICARUS_P if simulator == "icarus" else P
    return dict(verilog=ma_verilog(p), config_name=f"ma-p{p}-dw{DATA_WIDTH}",
                extra_env={"V4HW_MA_P": str(p)})


def cocotb_args(simulator):
    """``run_cocotb``'s arguments but the testcase: the build and run of every test here
    (``make soak`` runs its seeds of ``gemm_random`` on this build, sim/soak.py)."""
    return dict(toplevel=TOPLEVEL, test_module=TESTBENCH, gtkw_groups=MA_GTKW_GROUPS,
                timeout_s=TIMEOUT_S[simulator], **VERILATOR, **build_args(simulator))


@pytest.mark.cocotb
@pytest.mark.parametrize("test", TESTS)
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_ma(simulator, test):
    run_cocotb(simulator, testcase=test, **cocotb_args(simulator))

