"""cocotb test of the board harness (UART bridge, on-chip memory) around the MA, on both
simulators: the path a bitstream of ``v4hw build`` takes, in simulation.

P=2 and a 64-bit bus keep it short (about 30 000 cycles, most of them UART bits).
"""

from functools import cache

import pytest
from amaranth.back import verilog as amaranth_verilog

from hdl.board.harness import BoardHarness
from hdl.top.ma import MaTop
from sim.runner import SIMULATORS, run_cocotb

DIVISOR = 4          # clock cycles per UART bit; tests/board_tb.py uses the same
MEM_BYTES = 16 * 1024
TOPLEVEL = "v4hw_board_ma"


@cache
def board_verilog():
    harness = BoardHarness(MaTop(p=2, data_width=64), 64, divisor=DIVISOR, mem_size=MEM_BYTES)
    return amaranth_verilog.convert(harness, name=TOPLEVEL, emit_src=False)


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_board_gemm_over_uart(simulator):
    run_cocotb(simulator, board_verilog(), TOPLEVEL, "tests.board_tb",
               config_name="board-ma-p2-dw64", timeout_s=600, verilator_public="top",
               verilator_opt="-O1")
