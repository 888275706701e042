"""The board harness's parts in the Amaranth simulator: UART, UART bridge, on-chip memory.

The bridge drives the MA's register block (``RegisterBlock`` with the MA map) and the
memory's host port; the host side is ``sim.uart_host.BridgeHost`` over a bit-level UART,
and registers are named through ``sim.regs.Registers``. The memory's AXI4 side is covered
with the whole MA in tests/test_board_cocotb.py.
"""

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

import hdl.ma.regmap as regmap
from hdl.board.axi_ram import AxiRam
from hdl.board.bridge import BridgeOp, BridgeStatus, UartBridge
from hdl.board.uart import UartRx, UartTx
from hdl.common.axi import AXI4LiteSignature, AXI4Signature, AxiResp, flat_members
from hdl.common.regblock import RegisterBlock
from sim.regs import Registers
from sim.seed import test_seed
from sim.uart_host import AmaranthUart, BridgeHost, encode_request, reply_length
from spec.codes import BlockId

DIVISOR = 4
MEM_BYTES = 1024


def bench(data_width=128, timeout=400):
    m = Module()
    m.submodules.rx = rx = UartRx(DIVISOR)
    m.submodules.tx = tx = UartTx(DIVISOR)
    m.submodules.bridge = bridge = UartBridge(timeout=timeout)
    m.submodules.ram = ram = AxiRam(data_width, MEM_BYTES)
    m.submodules.regs = regs = RegisterBlock(regmap)
    wiring.connect(m, rx.data, bridge.rx)
    wiring.connect(m, bridge.tx, tx.data)
    wiring.connect(m, bridge.mem, ram.host)
    wiring.connect(m, bridge.ctrl, regs.bus)
    m.d.comb += regs.id.block.eq(BlockId.MA)
    return m, rx.rx, tx.tx


def run(testbench, **kwargs):
    m, rx, tx = bench(**kwargs)

    async def top(ctx):
        ctx.set(rx, 1)
        await ctx.tick().repeat(4)
        await testbench(ctx, AmaranthUart(ctx, rx, tx, DIVISOR))

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(top)
    sim.run()


def test_registers_by_name_through_the_uart():
    async def tb(ctx, uart):
        regs = Registers(BridgeHost(uart), regmap)
        assert (await regs.read("ID")) >> 16 == BlockId.MA
        for name, value in (("M", 77), ("A_ADDR", 0x12345678), ("LDC", 0x400)):
            await regs.write(name, value)
            assert await regs.read(name) == value
        _, resp = await regs.read_resp(regs.unmapped_offset())
        assert resp == AxiResp.SLVERR
    run(tb)


@pytest.mark.parametrize("data_width", [64, 128])
def test_memory_words_round_trip(data_width):
    rng = test_seed()

    async def tb(ctx, uart):
        host = BridgeHost(uart)
        words = {rng.randrange(MEM_BYTES // 4) * 4: rng.getrandbits(32) for _ in range(12)}
        for addr, word in words.items():
            await host.mem_write(addr, word)
        for addr, word in sorted(words.items()):
            assert await host.mem_read(addr) == word, f"addr={addr:#x}"
    run(tb, data_width=data_width)


def test_errors_answered_and_nothing_changed():
    async def tb(ctx, uart):
        host = BridgeHost(uart)
        await host.mem_write(0, 0xA5A5A5A5)
        # Outside the memory: SLVERR, and the wrapped address is untouched.
        assert (await host.request(BridgeOp.MEM_WRITE, MEM_BYTES, 1))[0] == BridgeStatus.SLVERR
        assert await host.request(BridgeOp.MEM_READ, MEM_BYTES) == (BridgeStatus.SLVERR, 0)
        assert await host.mem_read(0) == 0xA5A5A5A5
        # A register address above 16 bits: DECERR without an access.
        regs = Registers(host, regmap)
        await regs.write("M", 5)
        status, _ = await host.request(BridgeOp.REG_WRITE, 0x10000 + regs.offset("M"), 9)
        assert status == BridgeStatus.DECERR
        assert await regs.read("M") == 5
        # An unknown opcode: one byte, and the next request works.
        await uart.send(bytes([0x7E]))
        assert await uart.receive(1) == bytes([BridgeStatus.BAD_OPCODE.value])
        assert await regs.read("M") == 5
    run(tb)


def test_incomplete_request_dropped_after_timeout():
    timeout = 200

    async def tb(ctx, uart):
        await uart.send(encode_request(BridgeOp.REG_WRITE, 0, 0)[:3])
        await ctx.tick().repeat(timeout + 20)
        host = BridgeHost(uart)
        status, value = await host.request(BridgeOp.MEM_READ, 0)
        assert status == BridgeStatus.OKAY and reply_length(BridgeOp.MEM_READ) == 5
        assert value == 0
    run(tb, timeout=timeout)


class _AddressEcho(wiring.Component):
    """An AXI4-Lite slave of ``bits`` address bits whose every read returns the address."""

    def __init__(self, bits):
        super().__init__({"bus": In(AXI4LiteSignature(bits, 32))})

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        with m.If(bus.arvalid & ~bus.rvalid):
            m.d.comb += bus.arready.eq(1)
            m.d.sync += [bus.rvalid.eq(1), bus.rdata.eq(bus.araddr)]
        return m


def test_a_wider_control_port_reaches_every_address():
    """The tile's control port has 20 address bits: the bridge built for it passes them
    all (a window above the first is reached) and answers DECERR only beyond them."""
    m = Module()
    m.submodules.rx = rx = UartRx(DIVISOR)
    m.submodules.tx = tx = UartTx(DIVISOR)
    m.submodules.bridge = bridge = UartBridge(timeout=400, ctrl_addr_bits=20)
    m.submodules.echo = echo = _AddressEcho(20)
    wiring.connect(m, rx.data, bridge.rx)
    wiring.connect(m, bridge.tx, tx.data)
    wiring.connect(m, bridge.ctrl, echo.bus)

    async def tb(ctx):
        ctx.set(rx.rx, 1)
        await ctx.tick().repeat(4)
        host = BridgeHost(AmaranthUart(ctx, rx.rx, tx.tx, DIVISOR))
        for addr in (0x0_0008, 0x1_0010, 0xF_FFFC):
            assert await host.request(BridgeOp.REG_READ, addr) == (BridgeStatus.OKAY, addr)
        assert (await host.request(BridgeOp.REG_READ, 0x10_0000))[0] == BridgeStatus.DECERR

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


def test_harness_takes_the_control_width_of_its_block():
    from hdl.board.harness import BoardHarness

    class Kernel(wiring.Component):
        def __init__(self, bits):
            super().__init__({"ap_clk": In(1), "ap_rst_n": In(1), "interrupt": Out(1),
                              **flat_members("s_axi_control", In(AXI4LiteSignature(bits, 32))),
                              **flat_members("m_axi_gmem", Out(AXI4Signature(64, 64, 1)))})

    for bits in (16, 20):
        harness = BoardHarness(Kernel(bits), 64, divisor=DIVISOR)
        assert harness.ctrl_addr_bits == bits
        harness._MustUse__silence = harness.block._MustUse__silence = True   # never elaborated
