"""cocotb regressions of the VA's extension commands CLAMP, SOFTPLUS, SQRT on the
standalone VA top (the same builds as ``tests/test_va_cocotb.py``: FN_LANES=2 on Icarus).

Each cocotb test of ``tests/va_ext_tb.py`` runs once per simulator (Icarus and Verilator);
the seed it printed reruns it (``V4HW_SEED=<n> python -m pytest '<node id>'``).
"""

import pytest

from sim.runner import SIMULATORS, run_cocotb

from .test_va_cocotb import cocotb_args

TESTS = ["ext_functions_exhaustive", "ext_lengths_and_bounds"]


@pytest.mark.cocotb
@pytest.mark.parametrize("test", TESTS)
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_va_ext(simulator, test):
    run_cocotb(simulator, testcase=test, **cocotb_args(simulator, "tests.va_ext_tb"))
