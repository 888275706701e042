"""cocotb regressions of the integrated tile ``v4hw_tile`` (the small configuration,
``hdl.tile.top.SMALL``: MA P=4, VA L=8, 128-bit bus, 2×2 mesh).

Every Verilator test shares ONE build (same Verilog text, same ``config_name``, only the
top's signals public, -O1: the tile's C++ with every signal public would take hours);
Icarus runs one smoke test (the tile's identity and a short VA command). The cocotb
tests are in ``tests/tile_tb.py``; each prints ``PERF`` lines with its cycle counts
(cocotb picks a test by the end of its name: no name there may end with another).
``test_tile_vs_standalone`` (``regress``) runs the same MA and VA commands on the
standalone tops of the same parameters, for the ratios of docs/tile/README.md.
"""

import re
from functools import cache

import pytest
from amaranth.back import verilog as amaranth_verilog

from sim.runner import run_cocotb
from sim.tile_build import CONFIG_NAME, TOPLEVEL, VERILATOR, tile_verilog
from sim.tile_driver import TILE_GTKW_GROUPS

TESTBENCH = "tests.tile_tb"
TESTS = ["identity", "ma_gemm", "va_silu", "migrate_copy", "outside_windows",
         "interrupt_source", "all_at_once", "reservations", "reserved_commands",
         "reserved_sharing", "random_traffic"]


_CONSTANT_ALWAYS = re.compile(
    r"^(?P<indent>[ \t]*)always @\*\n[ \t]+(?P<lhs>[^=;\n]+?) = (?P<value>\d+'[bhd][0-9a-fA-F_]+);\n",
    re.MULTILINE)


@cache
def tile_verilog_icarus():
    """:func:`tile_verilog` for Icarus: each ``always @*`` that reads nothing and only
    assigns a constant (the ALWNEVER blocks: the NIs' VC bit, the memory NI's unused flit
    bits) becomes an ``initial`` assignment. Icarus never runs such a block (and the
    runner's time-0 fix reaches only the blocks that read its dummy register), so those
    bits stayed X and the first memory packet never arrived."""
    text, count = _CONSTANT_ALWAYS.subn(
        lambda m: f"{m['indent']}initial {m['lhs']} = {m['value']};\n", tile_verilog())
    assert count, "no constant always block: the Icarus fix is stale"
    return text


def cocotb_args(simulator):
    """``run_cocotb``'s arguments but the testcase of ``test_tile_verilator`` (``make
    soak`` runs ``random_traffic``'s seeds on the same build, sim/soak.py)."""
    assert simulator == "verilator", "the tile's tests on Icarus are its smoke alone"
    return dict(verilog=tile_verilog(), toplevel=TOPLEVEL, test_module=TESTBENCH,
                config_name=CONFIG_NAME, gtkw_groups=TILE_GTKW_GROUPS, timeout_s=900,
                **VERILATOR)


@pytest.mark.cocotb
@pytest.mark.parametrize("test", TESTS)
def test_tile_verilator(test):
    run_cocotb("verilator", testcase=test, **cocotb_args("verilator"))


@pytest.mark.cocotb
def test_tile_icarus_smoke():
    run_cocotb("icarus", tile_verilog_icarus(), TOPLEVEL, TESTBENCH, config_name=CONFIG_NAME,
               testcase="icarus_smoke", gtkw_groups=TILE_GTKW_GROUPS, timeout_s=3600)


PERF_TESTBENCH = "tests.tile_perf_tb"


@pytest.mark.cocotb
@pytest.mark.regress
def test_tile_perf():
    """The streaming, short and strided commands through the tile (``tests/tile_perf_tb.py``:
    minutes, a 128³ GEMM at P=4), each figure checked against the perf baseline, the
    streaming VA commands against 90 % of the standalone top's."""
    run_cocotb("verilator", tile_verilog(), TOPLEVEL, PERF_TESTBENCH, config_name=CONFIG_NAME,
               testcase="tile_streams", gtkw_groups=TILE_GTKW_GROUPS, timeout_s=3600,
               **VERILATOR)


@pytest.mark.cocotb
@pytest.mark.regress
@pytest.mark.parametrize("block", ["ma", "va"])
def test_tile_vs_standalone(block):
    """The same commands on the standalone tops (P=4 / L=8, latency 20), for the ratios of
    docs/tile/README.md, each figure checked against the perf baseline."""
    if block == "ma":
        from hdl.top.ma import MaTop
        top, name, config = MaTop(p=4, data_width=128), "v4hw_ma", "ma-p4-dw128"
    else:
        from hdl.top.va import VaTop
        top, name, config = VaTop(lanes=8, data_width=128), "v4hw_va", "va-l8-dw128"
    verilog = amaranth_verilog.convert(top, name=name, emit_src=False)
    run_cocotb("verilator", verilog, name, PERF_TESTBENCH, config_name=config,
               testcase="standalone_streams", timeout_s=3600, **VERILATOR)
