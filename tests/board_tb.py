"""cocotb test of the board harness around the MA (``v4hw_board_ma``): the whole board
path, from UART bytes to the MA's bursts on the on-chip memory and back.

A host (``sim.uart_host.BridgeHost``) loads A and B into the memory, maps them with one
TAT entry, runs C = A·B in int8 and in bf16 (and C += A·B), polls STATUS through the
UART, and reads C back; C must equal ``golden.ma.gemm`` bit for bit.
"""

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles

import hdl.ma.regmap as regmap
from golden.ma import gemm as golden_gemm
from golden.ma import pack_matrix, unpack_matrix
from sim.regs import Registers
from sim.seed import test_seed
from sim.uart_host import BridgeHost, CocotbUart
from spec.codes import BlockId, MaMode

DIVISOR = 4          # must match tests/test_board_cocotb.py
MEM_BYTES = 16 * 1024
PAGE = 4096


async def start(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.uart_rx.value = 1
    dut.rst.value = 1
    await ClockCycles(dut.clk, 5)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 5)
    host = BridgeHost(CocotbUart(dut.clk, dut.uart_rx, dut.uart_tx, DIVISOR))
    return host, Registers(host, regmap)


async def gemm(host, regs, mode, a, b, c=None):
    m, k = a.shape
    n = b.shape[1]
    es = 1 if mode == MaMode.INT8 else 2
    c_dtype = np.int32 if mode == MaMode.INT8 else np.uint32
    lda, ldb, ldc = -(-k * es // 4) * 4, -(-n * es // 4) * 4, 4 * n
    a_addr, b_addr, c_addr = 0x000, 0x400, 0x800          # logical, in one 4 KiB page
    phys = PAGE                                           # the page's physical base
    for addr, image in ((a_addr, pack_matrix(a, lda)), (b_addr, pack_matrix(b, ldb))):
        await host.mem_write_bytes(phys + addr, image + bytes(-len(image) % 4))
    accumulate = c is not None
    if accumulate:
        await host.mem_write_bytes(phys + c_addr, pack_matrix(c, ldc))
    await regs.write_fields("TAT_LOGIC_0", valid=1, size=0, base=0)
    await regs.write_fields("TAT_PHYS_LO_0", base=phys >> 12)
    await regs.write_fields("TAT_PHYS_HI_0", base=0)
    for name, value in (("M", m), ("K", k), ("N", n), ("A_ADDR", a_addr), ("B_ADDR", b_addr),
                        ("C_ADDR", c_addr), ("LDA", lda), ("LDB", ldb), ("LDC", ldc)):
        await regs.write(name, value)
    await regs.write_fields("MODE", mode=mode, accumulate=int(accumulate))
    await regs.write("START", 1)
    for _ in range(50):
        status = await regs.read_fields("STATUS")
        if not status["BUSY"]:
            break
    assert status["DONE"] and not status["ERROR"], f"STATUS {status}"
    image = await host.mem_read_bytes(phys + c_addr, m * ldc)
    got = unpack_matrix(image, m, n, c_dtype, ldc)
    expected = golden_gemm(mode, a, b, c)
    assert np.array_equal(got, expected), f"{mode.name}: C\n{got}\nexpected\n{expected}"


@cocotb.test()
async def gemm_over_uart(dut):
    host, regs = await start(dut)
    rng = test_seed()
    g = np.random.default_rng(rng.getrandbits(64))
    assert (await regs.read("ID")) >> 16 == BlockId.MA
    m, k, n = 3, 4, 3
    a8 = g.integers(-128, 128, (m, k)).astype(np.int8)
    b8 = g.integers(-128, 128, (k, n)).astype(np.int8)
    await gemm(host, regs, MaMode.INT8, a8, b8)
    # bf16: moderate values of both signs, exponents 2^-4..2^4.
    bits = lambda shape: ((g.integers(0, 2, shape) << 15) | (g.integers(123, 132, shape) << 7)
                          | g.integers(0, 128, shape)).astype(np.uint16)
    a16, b16 = bits((m, k)), bits((k, n))
    c = (g.integers(0, 2, (m, n)) << 31 | g.integers(120, 135, (m, n)) << 23).astype(np.uint32)
    await gemm(host, regs, MaMode.BF16, a16, b16, c)
