"""cocotb regressions of the VA's extension commands CLAMP, SOFTPLUS, SQRT on the
standalone VA top (the same build as ``tests/test_va_cocotb.py``).

Each cocotb test of ``tests/va_ext_tb.py`` runs once per simulator (Icarus and Verilator);
the seed it printed reruns it (``V4HW_SEED=<n> python -m pytest '<node id>'``).
"""

import pytest

from sim.runner import SIMULATORS, run_cocotb
from sim.va_driver import VA_GTKW_GROUPS

from .test_va_cocotb import TIMEOUT_S, TOPLEVEL, VERILATOR, L, config_name, va_verilog

TESTS = ["ext_functions_exhaustive", "ext_lengths_and_bounds"]


@pytest.mark.cocotb
@pytest.mark.parametrize("test", TESTS)
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_va_ext(simulator, test):
    run_cocotb(simulator, va_verilog(), TOPLEVEL, "tests.va_ext_tb", config_name=config_name(L),
               testcase=test, gtkw_groups=VA_GTKW_GROUPS, timeout_s=TIMEOUT_S[simulator],
               **VERILATOR, extra_env={"V4HW_VA_LANES": str(L)})
