"""cocotb regressions of the standalone MC top (``v4hw_mc``, 4 channels, 128-bit bus).

Each cocotb test of ``tests/mc_tb.py`` runs once per simulator in its own simulation; a
failure names the test, the simulator and the seed it printed
(``V4HW_SEED=<n> python -m pytest '<node id>'``). ``WAVES=1`` leaves a VCD and a GTKWave
save file (groups: ``sim.mc_driver.MC_GTKW_GROUPS``). Two builds: the default depths, and
every credit link at depth 1 (``credits1``: every item waits for the previous one's
credit).
"""

import pytest
from amaranth.back import verilog as amaranth_verilog

from hdl.top.mc import McTop
from sim.mc_driver import MC_GTKW_GROUPS
from sim.runner import SIMULATORS, run_cocotb
from sim.verilog_cache import disk_cached

TOPLEVEL = "v4hw_mc"
TESTBENCH = "tests.mc_tb"
TIMEOUT_S = {"icarus": 600, "verilator": 300}
VERILATOR = dict(verilator_public="top", verilator_opt="-O1")
"""Verilator's build options: the top's signals public (the testbench touches the ports
alone), the model compiled with -O1 (docs/testing.md)."""
CONFIGS = {
    "default": dict(req_depth=4, wdata_depth=16, resp_depth=64, prefetch_lines=32),
    "credits1": dict(req_depth=1, wdata_depth=1, resp_depth=1, prefetch_lines=4),
}
TESTS = ["registers", "random_traffic", "credits_stress", "write_then_read", "errors",
         "errors_on_every_channel",
         "starvation", "prefetch_sequential", "prefetch_invalidate"]
CREDITS1_TESTS = ["random_traffic", "credits_stress", "errors"]
# Measurements: thousands of requests, minutes on Icarus, seconds on Verilator.
VERILATOR_TESTS = ["throughput", "latency_per_class"]


@disk_cached
def mc_verilog(config):
    """Verilog of the configuration's ``McTop`` (no ``src`` attributes, so edits of the
    Python above a line do not force a rebuild)."""
    return amaranth_verilog.convert(McTop(4, 128, **CONFIGS[config]), name=TOPLEVEL,
                                    emit_src=False)


def cocotb_args(simulator, config):
    """``run_cocotb``'s arguments but the testcase for a configuration of ``CONFIGS``
    (``make soak`` runs its seeds on the same build, sim/soak.py)."""
    env = {f"V4HW_MC_{name.upper()}": str(value) for name, value in CONFIGS[config].items()}
    return dict(verilog=mc_verilog(config), toplevel=TOPLEVEL, test_module=TESTBENCH,
                config_name=f"mc-c4-dw128-{config}", gtkw_groups=MC_GTKW_GROUPS,
                extra_env=env, timeout_s=TIMEOUT_S[simulator], **VERILATOR)


def run(simulator, config, test):
    run_cocotb(simulator, testcase=test, **cocotb_args(simulator, config))


@pytest.mark.cocotb
@pytest.mark.parametrize("test", TESTS)
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_mc(simulator, test):
    run(simulator, "default", test)


@pytest.mark.cocotb
@pytest.mark.parametrize("test", VERILATOR_TESTS)
def test_mc_measure(test):
    """Performance figures (printed as "MC figure:" lines with -s), Verilator only: each
    run moves about 20 000 words, which would take minutes on Icarus."""
    run("verilator", "default", test)


@pytest.mark.cocotb
@pytest.mark.parametrize("test", CREDITS1_TESTS)
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_mc_credits1(simulator, test):
    run(simulator, "credits1", test)
