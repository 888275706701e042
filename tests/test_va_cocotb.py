"""cocotb regressions of the standalone VA top (``v4hw_va``, L=8, DATA_WIDTH=128), and of
the ULX3S-85F's configuration (L=32, FN_LANES=2).

L=8 is the smallest L of a 128-bit bus (8 bf16 a beat): its lengths around L keep the
runs short. L only sets the order of SUM's partial sums (the lane engine takes a bus word
a cycle whatever L), so the L=32 build is as large as L=8's; the lane-engine test runs
there too, where a beat is a quarter of a vector. The row commands (hdl/va/rows.py) do
not depend on L.
``V4HW_VA_PERF_LANES=32`` runs the performance test at L=32 (the README's figures).

Each cocotb test of ``tests/va_tb.py`` runs once per simulator (Icarus and Verilator);
the seed it printed reruns it (``V4HW_SEED=<n> python -m pytest '<node id>'``).
``WAVES=1`` leaves a VCD and a GTKWave save file (groups: ``sim.va_driver.VA_GTKW_GROUPS``).
"""

import os

import pytest
from amaranth.back import verilog as amaranth_verilog

from hdl.top.va import VaTop
from sim.runner import SIMULATORS, run_cocotb
from sim.va_driver import VA_GTKW_GROUPS
from sim.verilog_cache import disk_cached

L, DATA_WIDTH = 8, 128
PERF_L = int(os.environ.get("V4HW_VA_PERF_LANES", L))
TOPLEVEL = "v4hw_va"
TESTBENCH = "tests.va_tb"
TIMEOUT_S = {"icarus": 600, "verilator": 300}
PUBLIC = "top"
"""Verilator makes only the top's ports visible (``run_cocotb(verilator_public="top")``):
the testbenches touch nothing else, and the VA's C++ compiles in a fraction of the time
it takes with every signal public."""

OPT = "-O1"
"""Verilator compiles the model with -O1 (docs/testing.md: a shorter build than -Os)."""
VERILATOR = dict(verilator_public=PUBLIC, verilator_opt=OPT)

TESTS = ["elementwise_lengths", "strided_moves", "backpressure", "large", "bad_commands",
         "axi_errors", "axi_errors_under_pauses", "start_while_busy", "functions_exhaustive", "row_commands",
         "row_refusals", "rmsnorm_row_passes", "indexed_moves", "indexed_errors", "indexed_pauses",
         "program_commands", "topk_wide", "errors_of_every_opcode"]
# cocotb selects a testcase by the end of its name: no name here may end with another.


NARROW_L, NARROW_FN_LANES = 32, 2
"""L and FN_LANES of the narrowed build (the ULX3S-85F's setting): each bus word goes
through the function units in four pieces, and is a quarter of the lane engine's vector."""
NARROW_TESTS = ["functions_exhaustive", "row_commands", "elementwise_lengths",
                "program_commands", "topk_wide"]
NARROW_EXT_TESTS = ["ext_lengths_and_bounds"]


def config_name(lanes, fn_lanes=None):
    return f"va-l{lanes}-dw{DATA_WIDTH}" + (f"-fn{fn_lanes}" if fn_lanes else "")


@disk_cached
def va_verilog(lanes=L, data_width=DATA_WIDTH, fn_lanes=None):
    """Verilog of ``VaTop(lanes, data_width, fn_lanes)`` as ``v4hw_va``, once per
    configuration, without ``src`` attributes (so an edit elsewhere does not force a
    rebuild)."""
    return amaranth_verilog.convert(VaTop(lanes, data_width, fn_lanes), name=TOPLEVEL,
                                    emit_src=False)


ICARUS_FN_LANES = 2
"""FN_LANES of the L=8 build on Icarus. Icarus evaluates every clocked process each cycle,
and at FN_LANES=8 the function units make the VA's idle cycle six times as long as at
FN_LANES=2 (2 000 idle cycles of the bare top under vvp: 14.2 processor seconds against
2.4, docs/testing.md). FN_LANES=2 is the board's setting (hdl/va/narrow.py: each bus
word through the function units in four pieces); every directed test below runs on it
under Icarus, bit for bit against the same golden model, and on the FN_LANES=8 build
under Verilator."""


def build_args(simulator):
    """The L=8 build of ``simulator``: its Verilog, configuration name and the
    testbench's environment (``V4HW_VA_LANES``, ``V4HW_VA_FN_LANES``)."""
    fn_lanes = ICARUS_FN_LANES if simulator == "icarus" else None
    env = {"V4HW_VA_LANES": str(L)}
    if fn_lanes:
        env["V4HW_VA_FN_LANES"] = str(fn_lanes)
    return dict(verilog=va_verilog(fn_lanes=fn_lanes), config_name=config_name(L, fn_lanes),
                extra_env=env)


def cocotb_args(simulator, test_module=TESTBENCH):
    """``run_cocotb``'s arguments but the testcase of ``test_va`` (L=8; ``make soak``
    runs its seeds on the same build, sim/soak.py)."""
    return dict(toplevel=TOPLEVEL, test_module=test_module, gtkw_groups=VA_GTKW_GROUPS,
                timeout_s=TIMEOUT_S[simulator], **VERILATOR, **build_args(simulator))


@pytest.mark.cocotb
@pytest.mark.parametrize("test", TESTS)
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_va(simulator, test):
    run_cocotb(simulator, testcase=test, **cocotb_args(simulator))


@pytest.mark.cocotb
@pytest.mark.parametrize("test", [("tests.va_tb", t) for t in NARROW_TESTS]
                         + [("tests.va_ext_tb", t) for t in NARROW_EXT_TESTS],
                         ids=lambda t: t[1])
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_va_narrow(simulator, test):
    """The board's configuration, L=32 and FN_LANES=2: the function commands
    (hdl/va/narrow.py: each bus word split into four pieces for the function units, the
    results joined): EXP/SILU, every row command (QUANTIZE's and DEQUANTIZE's packed half
    words, SOFTMAX's sum of the joined exp values, both RoPE pairings) and the extension
    commands; and the lane engine's commands at L=32 (SUM's order of 256 partials, a bus
    word a quarter of a vector); bit for bit against the golden model. The other tests
    depend on neither."""
    testbench, testcase = test
    run_cocotb(simulator, va_verilog(NARROW_L, fn_lanes=NARROW_FN_LANES), TOPLEVEL, testbench,
               config_name=config_name(NARROW_L, NARROW_FN_LANES), testcase=testcase,
               gtkw_groups=VA_GTKW_GROUPS, timeout_s=TIMEOUT_S[simulator], **VERILATOR,
               extra_env={"V4HW_VA_LANES": str(NARROW_L),
                          "V4HW_VA_FN_LANES": str(NARROW_FN_LANES)})


@pytest.mark.cocotb
def test_va_performance():
    """Throughput of SCALE, ADD, the strided gather, SOFTMAX, RMSNORM and SUM against their
    bus limits (``tests/va_tb.py::performance``): Verilator only, its runs of 10 000 to
    40 000 cycles would take minutes on Icarus."""
    run_cocotb("verilator", va_verilog(PERF_L), TOPLEVEL, TESTBENCH,
               config_name=config_name(PERF_L), testcase="performance",
               gtkw_groups=VA_GTKW_GROUPS, timeout_s=TIMEOUT_S["verilator"], **VERILATOR,
               extra_env={"V4HW_VA_LANES": str(PERF_L)})


@pytest.mark.cocotb
def test_va_indexed_performance():
    """Throughput of GATHER_IDX, GATHER_CSR and SCATTER_IDX against the bound of the
    golden model's check-before-write contract (``tests/va_tb.py::indexed_throughput``):
    Verilator only, like the other performance runs; the L of the regression (the
    indexed path does not depend on L)."""
    run_cocotb("verilator", va_verilog(), TOPLEVEL, TESTBENCH, config_name=config_name(L),
               testcase="indexed_throughput", gtkw_groups=VA_GTKW_GROUPS,
               timeout_s=TIMEOUT_S["verilator"], **VERILATOR, extra_env={"V4HW_VA_LANES": str(L)})
