"""The common-register conformance test (``tests/conformance_tb.py``) on every block, on
both simulators.

Each block runs on the build of its default test configuration, with the same Verilog
and the same build options as its own cocotb tests (``tests/test_<block>_cocotb.py``),
so no build is added: one short simulation per block and simulator.
"""

import pytest

from sim.runner import SIMULATORS, run_cocotb

from . import test_ma_cocotb as ma
from . import test_mc_cocotb as mc
from . import test_muon_cocotb as muon
from . import test_va_cocotb as va

TESTBENCH = "tests.conformance_tb"
TIMEOUT_S = {"icarus": 300, "verilator": 120}
MUON_MESH = (2, 2)


def _ma(simulator):
    return dict(toplevel=ma.TOPLEVEL, gtkw_groups=ma.MA_GTKW_GROUPS, **ma.VERILATOR,
                **ma.build_args(simulator))


def _va(simulator):
    return dict(toplevel=va.TOPLEVEL, gtkw_groups=va.VA_GTKW_GROUPS, **va.VERILATOR,
                **va.build_args(simulator))


def _mc(simulator):
    return dict(verilog=mc.mc_verilog("default"), toplevel=mc.TOPLEVEL,
                config_name="mc-c4-dw128-default", gtkw_groups=mc.MC_GTKW_GROUPS, **mc.VERILATOR,
                extra_env={f"V4HW_MC_{name.upper()}": str(value)
                           for name, value in mc.CONFIGS["default"].items()})


def _muon(simulator):
    cols, rows = MUON_MESH
    return dict(verilog=muon.muon_verilog(cols, rows), toplevel=muon.TOPLEVEL,
                config_name=f"muon-{cols}x{rows}", gtkw_groups=muon.MUON_GTKW_GROUPS,
                verilator_public="top", verilator_opt="-O1",
                extra_env={"V4HW_MUON_COLS": str(cols), "V4HW_MUON_ROWS": str(rows)})


BLOCKS = {"ma": _ma, "va": _va, "mc": _mc, "muon": _muon}


@pytest.mark.cocotb
@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_conformance(simulator, block):
    options = BLOCKS[block](simulator)
    verilog, toplevel = options.pop("verilog"), options.pop("toplevel")
    options["extra_env"] = {**options.get("extra_env", {}), "V4HW_BLOCK": block}
    run_cocotb(simulator, verilog, toplevel, TESTBENCH, testcase="common_registers",
               timeout_s=TIMEOUT_S[simulator], **options)
