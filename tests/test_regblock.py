# amaranth: UnusedElaboratable=no
"""RegisterBlock (hdl/common/regblock.py) in the Amaranth simulator, with the MA's map.

(The first line keeps Amaranth quiet about the objects left behind by constructors that
the tests expect to raise.)

The bus is driven by ``SimAxiLiteMaster``, a small AXI4-Lite master with the
``read``/``write`` API of cocotbext-axi's ``AxiLiteMaster``, so the tests go through the
testbench helper ``sim.regs.Registers`` and name registers instead of writing offsets.
"""

from types import SimpleNamespace

import pytest
from amaranth.back import verilog
from amaranth.hdl import Module, Mux, Shape, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

import hdl.ma.regmap as regmap
from hdl.common.axi import AXI4LiteSignature, AXI4Signature, AxiResp, connect_flat, flat_members
from hdl.common.regblock import RegisterBlock
from sim.regs import RegisterAccessError, Registers
from sim.seed import test_seed
from spec.codes import BlockId, ErrorCode, MaMode

ORDERS = ("together", "aw_first", "w_first")
TIMEOUT = 50  # cycles a handshake may wait before the test fails


class SimAxiLiteMaster:
    """AXI4-Lite master for the Amaranth simulator (one word per access).

    With ``rng``, it waits 0..2 idle cycles before each channel and 0..3 before taking
    a response, and picks the AW/W order at random.
    """

    def __init__(self, ctx, bus, rng=None):
        self.ctx, self.bus, self.rng = ctx, bus, rng

    async def _idle(self, most):
        for _ in range(self.rng.randint(0, most) if self.rng else 0):
            await self.ctx.tick()

    async def handshake(self, *channels):
        """Present every ``(valid, ready, [(signal, value), ...])`` at once; return after
        the edge at which the last of them transferred."""
        pending = []
        for valid, ready, payload in channels:
            for signal, value in payload:
                self.ctx.set(signal, value)
            self.ctx.set(valid, 1)
            pending.append((valid, ready))
        for _ in range(TIMEOUT):
            _, _, *readies = await self.ctx.tick().sample(*(ready for _, ready in pending))
            for (valid, _), hit in zip(pending, readies, strict=True):
                if hit:
                    self.ctx.set(valid, 0)
            pending = [channel for channel, hit in zip(pending, readies, strict=True) if not hit]
            if not pending:
                return
        raise AssertionError(f"no handshake on {pending} in {TIMEOUT} cycles")

    async def receive(self, valid, ready, *payload):
        await self._idle(3)
        self.ctx.set(ready, 1)
        for _ in range(TIMEOUT):
            _, _, hit, *values = await self.ctx.tick().sample(valid, *payload)
            if hit:
                self.ctx.set(ready, 0)
                return values
        raise AssertionError(f"no {valid} in {TIMEOUT} cycles")

    def aw(self, address):
        bus = self.bus
        return bus.awvalid, bus.awready, [(bus.awaddr, address), (bus.awprot, 0)]

    def w(self, value, strb):
        bus = self.bus
        return bus.wvalid, bus.wready, [(bus.wdata, value), (bus.wstrb, strb)]

    async def send_write(self, address, value, strb=0xF, order="together"):
        """AW and W transfers; returns just after both are done (the write is then
        performed in the current cycle)."""
        if self.rng:
            order = self.rng.choice(ORDERS)
        await self._idle(2)
        if order == "together":
            await self.handshake(self.aw(address), self.w(value, strb))
        else:
            first, second = ((self.aw(address), self.w(value, strb)) if order == "aw_first"
                             else (self.w(value, strb), self.aw(address)))
            await self.handshake(first)
            await self._idle(2)
            await self.handshake(second)

    async def receive_b(self):
        (resp,) = await self.receive(self.bus.bvalid, self.bus.bready, self.bus.bresp)
        return resp

    async def write_word(self, address, value, strb=0xF, order="together"):
        await self.send_write(address, value, strb, order)
        return await self.receive_b()

    async def read_word(self, address):
        bus = self.bus
        await self._idle(2)
        await self.handshake((bus.arvalid, bus.arready, [(bus.araddr, address), (bus.arprot, 0)]))
        value, resp = await self.receive(bus.rvalid, bus.rready, bus.rdata, bus.rresp)
        return value, resp

    # The AxiLiteMaster API that sim.regs.Registers uses.
    async def write(self, address, data):
        lane = address % 4
        assert 0 < len(data) <= 4 - lane
        resp = await self.write_word(address - lane,
                                     int.from_bytes(data, "little") << 8 * lane,
                                     ((1 << len(data)) - 1) << lane)
        return SimpleNamespace(resp=resp)

    async def read(self, address, length):
        lane = address % 4
        value, resp = await self.read_word(address - lane)
        return SimpleNamespace(data=value.to_bytes(4, "little")[lane:lane + length], resp=resp)


def simulate(design, testbench, monitors=()):
    sim = Simulator(design)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    for monitor in monitors:
        sim.add_testbench(monitor, background=True)
    sim.run()


def recorder(log, *signals):
    """Background testbench appending the values of ``signals`` in every cycle to ``log``
    (entry i: the values during cycle i, sampled at its closing edge)."""
    async def monitor(ctx):
        async for _, _, *values in ctx.tick().sample(*signals):
            log.append(values)
    return monitor


def with_busy_core(dut):
    """The DUT plus a core that registers BUSY on the START pulse, as the MA does."""
    m = Module()
    m.submodules.regs = dut
    busy = Signal()
    with m.If(dut.start.start):
        m.d.sync += busy.eq(1)
    m.d.comb += dut.status.busy.eq(busy)
    return m


def storage(ctx, dut):
    """Values of every register-block-owned field (RW and W1C)."""
    return {(register["name"], field["name"]):
            ctx.get(getattr(getattr(dut, register["name"].lower()), field["name"].lower()))
            for register in dut.registers for field in register["fields"]
            if field["access"] in ("RW", "W1C")}


def holes():
    """Aligned offsets with no register: the lowest, one between register groups, the
    one after the last register and the top of the address space."""
    offsets = {register["offset"] for register in regmap.REGISTERS}
    gaps = [offset for offset in range(0, max(offsets) + 8, 4) if offset not in offsets]
    return sorted({gaps[0], gaps[len(gaps) // 2], gaps[-1], (1 << regmap.ADDR_WIDTH) - 4})


def test_members_follow_access():
    dut = RegisterBlock(regmap)
    members = dut.signature.members
    assert members["bus"] == In(AXI4LiteSignature(16, 32))

    def field(register, name):
        member = members[register].signature.members[name]
        return member.flow, Shape.cast(member.shape).width

    assert field("mode", "mode") == (Out, 2) and field("mode", "accumulate") == (Out, 1)
    assert field("status", "busy") == (In, 1)
    assert field("irq_status", "done") == (Out, 1) and field("irq_status", "done_set") == (In, 1)
    assert field("start", "start") == (Out, 1)
    assert field("ctr_lo", "value") == (In, 32) and field("ctr_lo", "rd_stb") == (Out, 1)
    assert field("time_lo", "rd_stb") == (Out, 1)
    assert "rd_stb" not in members["time_hi"].signature.members
    assert field("tat_logic_3", "base") == (Out, 20) and field("tat_logic_3", "size") == (Out, 5)
    assert field("m", "value") == (Out, 16)


def test_rejects_bad_maps():
    with pytest.raises(TypeError, match="generated regmap module"):
        RegisterBlock(42)
    clash = [dict(regmap.REGISTERS[0]), dict(regmap.REGISTERS[1], offset=0)]
    with pytest.raises(ValueError, match="offset 0x0"):
        RegisterBlock(clash)
    mode = next(register for register in regmap.REGISTERS if register["name"] == "MODE")
    overlap = dict(mode, fields=(*mode["fields"], dict(mode["fields"][0], name="X")))
    with pytest.raises(ValueError, match="overlaps"):
        RegisterBlock([overlap])


def test_rw_with_byte_strobes():
    dut = RegisterBlock(regmap)

    async def testbench(ctx):
        master = SimAxiLiteMaster(ctx, dut.bus)
        regs = Registers(master, regmap)
        await regs.write("A_ADDR", 0x11223344)
        assert await regs.read("A_ADDR") == 0x11223344
        assert ctx.get(dut.a_addr.addr) == 0x11223344
        assert await regs.write_bytes("A_ADDR", b"\xAA", byte=2) == AxiResp.OKAY
        assert await regs.read("A_ADDR") == 0x11AA3344
        await regs.write_bytes("A_ADDR", b"\x55\x66", byte=0)
        assert await regs.read("A_ADDR") == 0x11AA6655
        assert await master.write_word(regs.offset("A_ADDR"), 0, strb=0) == AxiResp.OKAY
        assert await regs.read("A_ADDR") == 0x11AA6655
        assert ctx.get(dut.b_addr.addr) == 0

        await regs.write("MODE", 0xFFFFFFFF)  # bits outside the fields read as 0
        assert await regs.read("MODE") == regs.encode("MODE", mode=3, accumulate=1)
        await regs.write_fields("MODE", mode=MaMode.BF16, accumulate=1)
        assert ctx.get(dut.mode.mode) == MaMode.BF16 and ctx.get(dut.mode.accumulate) == 1

        await regs.write("M", 0x12345)  # 16-bit field: 129 and 0xFFFF must be writable
        assert await regs.read("M") == 0x2345
        await regs.write("M", 129)
        assert ctx.get(dut.m.value) == 129

        await regs.write_fields("TAT_LOGIC_2", base=0x12345, size=3, valid=1)
        assert await regs.read_fields("TAT_LOGIC_2") == {"VALID": 1, "SIZE": 3,
                                                        "BASE": 0x12345}
        assert ctx.get(dut.tat_logic_2.base) == 0x12345
        assert ctx.get(dut.tat_logic_1.base) == 0 and ctx.get(dut.tat_logic_3.valid) == 0

    simulate(dut, testbench)


def test_read_only_registers():
    dut = RegisterBlock(regmap)

    async def testbench(ctx):
        regs = Registers(SimAxiLiteMaster(ctx, dut.bus), regmap)
        ctx.set(dut.id.block, BlockId.MA)
        ctx.set(dut.status.busy, 1)
        ctx.set(dut.status.start_dropped, 1)
        ctx.set(dut.error.code, ErrorCode.TAT_MISS)
        ctx.set(dut.err_addr.addr, 0xDEADBEEF)
        assert regs.field("ID", "BLOCK", await regs.read("ID")) == BlockId.MA
        assert await regs.read_fields("STATUS") == {"BUSY": 1, "DONE": 0, "ERROR": 0,
                                                   "START_DROPPED": 1}
        assert await regs.read("ERROR") == ErrorCode.TAT_MISS
        before = storage(ctx, dut)
        for name in ("STATUS", "ERROR", "ERR_ADDR", "CTR_HI"):  # ignored, OKAY
            assert await regs.write_resp(name, 0xFFFFFFFF) == AxiResp.OKAY
        assert storage(ctx, dut) == before
        assert await regs.read("ERR_ADDR") == 0xDEADBEEF

    simulate(dut, testbench)


def test_w1c_set_wins_over_clear():
    dut = RegisterBlock(regmap)

    async def pulse(ctx, signal):
        ctx.set(signal, 1)
        await ctx.tick()
        ctx.set(signal, 0)

    async def testbench(ctx):
        master = SimAxiLiteMaster(ctx, dut.bus)
        regs = Registers(master, regmap)
        done = regs.encode("IRQ_STATUS", done=1)
        await pulse(ctx, dut.irq_status.done_set)
        assert ctx.get(dut.irq_status.done) == 1
        assert await regs.read_fields("IRQ_STATUS") == {"DONE": 1, "ERROR": 0}
        await regs.write("IRQ_STATUS", 0)                                 # 0 keeps
        await regs.write("IRQ_STATUS", regs.encode("IRQ_STATUS", error=1))  # other bit
        assert await master.write_word(regs.offset("IRQ_STATUS"), done, strb=0b1110) \
            == AxiResp.OKAY                                               # strobe off
        assert ctx.get(dut.irq_status.done) == 1
        await regs.write("IRQ_STATUS", done)
        assert ctx.get(dut.irq_status.done) == 0

        # Set in the very cycle the clearing write is performed: the set wins.
        await pulse(ctx, dut.irq_status.done_set)
        await master.send_write(regs.offset("IRQ_STATUS"), done)
        assert not ctx.get(dut.bus.bvalid)
        await pulse(ctx, dut.irq_status.done_set)
        assert ctx.get(dut.bus.bvalid)  # so the write was performed in the pulse's cycle
        assert await master.receive_b() == AxiResp.OKAY
        assert ctx.get(dut.irq_status.done) == 1
        await regs.write("IRQ_STATUS", done)
        assert ctx.get(dut.irq_status.done) == 0

    simulate(dut, testbench)


@pytest.mark.parametrize("order", ORDERS)
def test_start_pulse_precedes_b(order):
    dut = RegisterBlock(regmap)
    log = []

    async def testbench(ctx):
        master = SimAxiLiteMaster(ctx, dut.bus)
        regs = Registers(master, regmap)
        assert await master.write_word(regs.offset("START"), 1, order=order) == AxiResp.OKAY
        # A STATUS read issued after the START response sees BUSY (docs/design.md).
        assert regs.field("STATUS", "BUSY", await regs.read("STATUS")) == 1
        assert await regs.read("START") == 0
        await regs.write("START", 0)
        await master.write_word(regs.offset("START"), 1, strb=0b1110)
        for offset in holes():
            await master.write_word(offset, 1)

    simulate(with_busy_core(dut), testbench, [recorder(log, dut.start.start, dut.bus.bvalid)])
    pulses = [cycle for cycle, (pulse, _) in enumerate(log) if pulse]
    first_b = next(cycle for cycle, (_, bvalid) in enumerate(log) if bvalid)
    assert pulses == [first_b - 1]


def test_read_strobes():
    dut = RegisterBlock(regmap)
    m = Module()
    m.submodules.regs = dut
    ctr = Signal(32, init=1000)  # a counter the core clears when CTR_LO is read
    m.d.sync += ctr.eq(Mux(dut.ctr_lo.rd_stb, 0, ctr + 1))
    m.d.comb += dut.ctr_lo.value.eq(ctr)
    log = []

    async def testbench(ctx):
        regs = Registers(SimAxiLiteMaster(ctx, dut.bus), regmap)
        values = [await regs.read("CTR_LO") for _ in range(3)]
        await regs.read("CTR_HI")
        await regs.write_resp("CTR_LO", 0)  # ignored: no strobe
        await regs.read("TIME_LO")
        await regs.read("TIME_HI")
        strobed = [value for stb, _, value in log if stb]
        assert values == strobed  # the value returned is the one of the strobe's cycle
        assert values[0] > 1000 and 0 < values[1] < 100 and 0 < values[2] < 100

    simulate(m, testbench, [recorder(log, dut.ctr_lo.rd_stb, dut.time_lo.rd_stb, ctr)])
    assert sum(stb for stb, _, _ in log) == 3
    assert sum(stb for _, stb, _ in log) == 1


def test_holes_answer_slverr():
    dut = RegisterBlock(regmap)
    log = []

    async def testbench(ctx):
        master = SimAxiLiteMaster(ctx, dut.bus)
        regs = Registers(master, regmap)
        before = storage(ctx, dut)
        assert regs.unmapped_offset() in holes()
        for offset in holes():
            assert await regs.read_resp(offset) == (0, AxiResp.SLVERR)
            assert await regs.write_resp(offset, 0xFFFFFFFF) == AxiResp.SLVERR
        assert storage(ctx, dut) == before
        # The write-only START reads as 0, OKAY.
        assert await regs.read_resp("START") == (0, AxiResp.OKAY)

    simulate(dut, testbench, [recorder(log, dut.start.start, dut.ctr_lo.rd_stb,
                                       dut.time_lo.rd_stb)])
    assert not any(any(entry) for entry in log)


def test_low_address_bits_ignored():
    dut = RegisterBlock(regmap)

    async def testbench(ctx):
        master = SimAxiLiteMaster(ctx, dut.bus)
        regs = Registers(master, regmap)
        base = regs.offset("LDB")
        for low in range(4):
            assert await master.write_word(base + low, 0x100 + low) == AxiResp.OKAY
            assert ctx.get(dut.ldb.stride) == 0x100 + low
            for read_low in range(4):
                assert await master.read_word(base + read_low) == (0x100 + low, AxiResp.OKAY)
        assert ctx.get(dut.lda.stride) == 0 and ctx.get(dut.ldc.stride) == 0

    simulate(dut, testbench)


@pytest.mark.parametrize("order", ("aw_first", "w_first"))
def test_write_waits_for_both_channels(order):
    dut = RegisterBlock(regmap)
    bus = dut.bus

    async def testbench(ctx):
        master = SimAxiLiteMaster(ctx, bus)
        regs = Registers(master, regmap)
        aw, w = master.aw(regs.offset("C_ADDR")), master.w(0xCAFE, 0xF)
        await master.handshake(aw if order == "aw_first" else w)
        ctx.set(bus.bready, 1)
        for _ in range(5):  # one channel alone does nothing, and is not accepted twice
            _, _, bvalid, awready, wready = await ctx.tick().sample(
                bus.bvalid, bus.awready, bus.wready)
            assert not bvalid and ctx.get(dut.c_addr.addr) == 0
            assert not (awready if order == "aw_first" else wready)
        ctx.set(bus.bready, 0)
        await master.handshake(w if order == "aw_first" else aw)
        assert await master.receive_b() == AxiResp.OKAY
        assert ctx.get(dut.c_addr.addr) == 0xCAFE

    simulate(dut, testbench)


def test_one_outstanding_write_reads_independent():
    dut = RegisterBlock(regmap)
    bus = dut.bus

    async def testbench(ctx):
        master = SimAxiLiteMaster(ctx, bus)
        regs = Registers(master, regmap)
        await master.send_write(regs.offset("LDA"), 64)
        for _ in range(4):  # B waits: no new write is accepted...
            await ctx.tick()
            assert ctx.get(bus.bvalid) and not ctx.get(bus.awready) and not ctx.get(bus.wready)
        assert await regs.read("LDA") == 64  # ...but reads go on
        assert ctx.get(bus.bvalid)
        assert await master.receive_b() == AxiResp.OKAY
        assert ctx.get(bus.awready) and ctx.get(bus.wready)

    simulate(dut, testbench)


def test_one_outstanding_read_writes_independent():
    dut = RegisterBlock(regmap)
    bus = dut.bus

    async def testbench(ctx):
        master = SimAxiLiteMaster(ctx, bus)
        regs = Registers(master, regmap)
        await regs.write("LDA", 32)
        await master.handshake((bus.arvalid, bus.arready, [(bus.araddr, regs.offset("LDA"))]))
        for _ in range(4):  # R waits: no new read is accepted...
            await ctx.tick()
            assert ctx.get(bus.rvalid) and not ctx.get(bus.arready)
        await regs.write("LDA", 64)  # ...but writes go on
        assert await master.receive(bus.rvalid, bus.rready, bus.rdata, bus.rresp) \
            == [32, AxiResp.OKAY]
        assert ctx.get(bus.arready)
        assert await regs.read("LDA") == 64

    simulate(dut, testbench)


def test_random_traffic_against_model():
    rng = test_seed()
    dut = RegisterBlock(regmap)
    rw = [register for register in regmap.REGISTERS if register["access"] == "RW"]

    def field_mask(register):
        return sum(((1 << field["width"]) - 1) << field["lsb"] for field in register["fields"])

    async def testbench(ctx):
        master = SimAxiLiteMaster(ctx, dut.bus, rng)
        model = {register["name"]: 0 for register in rw}
        for _ in range(150):
            register = rng.choice(rw)
            name, offset = register["name"], register["offset"] + rng.randrange(4)
            if rng.random() < 0.05:
                assert await master.read_word(rng.choice(holes())) == (0, AxiResp.SLVERR)
            elif rng.random() < 0.05:
                hole = rng.choice(holes())
                assert await master.write_word(hole, rng.getrandbits(32)) == AxiResp.SLVERR
            elif rng.random() < 0.5:
                value, strb = rng.getrandbits(32), rng.getrandbits(4)
                assert await master.write_word(offset, value, strb) == AxiResp.OKAY
                mask = sum(0xFF << 8 * lane for lane in range(4) if strb >> lane & 1)
                model[name] = ((model[name] & ~mask) | (value & mask)) & field_mask(register)
            else:
                assert await master.read_word(offset) == (model[name], AxiResp.OKAY)

    simulate(dut, testbench)


def test_registers_helper():
    regs = Registers(None, regmap)
    assert regs.offset("tat_phys_hi_1") == regs.offset("TAT_LOGIC_1") + 8
    value = regs.encode("TAT_LOGIC_0", base=0xABCDE, size=19, valid=1)
    assert regs.fields("TAT_LOGIC_0", value) == {"VALID": 1, "SIZE": 19, "BASE": 0xABCDE}
    assert regs.field("TAT_LOGIC_0", "size", value) == 19
    with pytest.raises(ValueError, match="5 bits"):
        regs.encode("TAT_LOGIC_0", size=32)
    with pytest.raises(KeyError):
        regs.offset("NO_SUCH")
    with pytest.raises(KeyError):
        regs.encode("MODE", bogus=1)

    dut = RegisterBlock(regmap)
    ghost = dict(regmap.REGISTERS[0], name="GHOST", offset=Registers(None, regmap)
                 .unmapped_offset())

    async def testbench(ctx):
        regs = Registers(SimAxiLiteMaster(ctx, dut.bus), [*regmap.REGISTERS, ghost])
        with pytest.raises(RegisterAccessError) as error:
            await regs.read("GHOST")
        assert error.value.resp == AxiResp.SLVERR
        with pytest.raises(RegisterAccessError):
            await regs.write("GHOST", 0)

    simulate(dut, testbench)


class _FlatTop(wiring.Component):
    """A standalone top as the blocks build them: flat AXI ports, nested inside."""

    def __init__(self):
        super().__init__({
            **flat_members("s_axi_control", In(AXI4LiteSignature(16, 32))),
            "irq_done": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = RegisterBlock(regmap)
        connect_flat(m, self, "s_axi_control", regs.bus)
        m.d.comb += regs.irq_status.done_set.eq(self.irq_done)
        return m


def test_flat_ports():
    ports = verilog.convert(_FlatTop(), name="flat_top")
    for name in AXI4LiteSignature().members:
        assert f"s_axi_control_{name}" in ports
    assert "s_axi_control__" not in ports

    top = _FlatTop()
    bus = SimpleNamespace(**{name: getattr(top, f"s_axi_control_{name}")
                             for name in AXI4LiteSignature().members})

    async def testbench(ctx):
        regs = Registers(SimAxiLiteMaster(ctx, bus), regmap)
        await regs.write("LDC", 4096)
        assert await regs.read("LDC") == 4096
        ctx.set(top.irq_done, 1)
        await ctx.tick()
        ctx.set(top.irq_done, 0)
        assert await regs.read_fields("IRQ_STATUS") == {"DONE": 1, "ERROR": 0}
        assert await regs.read_resp(regs.unmapped_offset()) == (0, AxiResp.SLVERR)

    simulate(top, testbench)


def test_connect_flat_checks_ports():
    # Flat ports of a master, but the inner interface is a slave's.
    outer = wiring.Signature(flat_members("s_axi_control", Out(AXI4LiteSignature()))).create()
    inner = AXI4LiteSignature().flip().create()
    with pytest.raises(TypeError, match="s_axi_control_awaddr"):
        connect_flat(Module(), outer, "s_axi_control", inner)
    with pytest.raises(TypeError, match="has no port 's_axi_ctl_awaddr'"):
        connect_flat(Module(), outer, "s_axi_ctl", inner.signature.flip().create())
    with pytest.raises(TypeError, match="Member must be"):
        flat_members("x", AXI4LiteSignature())


def test_axi_signatures_bind_to_cocotbext():
    axi = pytest.importorskip("cocotbext.axi.axi_channels")
    axil = pytest.importorskip("cocotbext.axi.axil_channels")
    for signature, channels, kind in ((AXI4Signature(64, 128), axi, "Axi"),
                                      (AXI4LiteSignature(16, 32), axil, "AxiLite")):
        members = signature.members
        for bus in (getattr(channels, f"{kind}{channel}Bus") for channel in ("AW", "W", "B",
                                                                               "AR", "R")):
            wanted = bus._signals + [name for name in bus._optional_signals
                                     if not name.endswith("user")]
            assert set(wanted) <= set(members), (signature, bus)
            source = getattr(channels, bus.__name__.replace("Bus", "Source"))
            for name, width in source._signal_widths.items():
                if name in members:
                    assert Shape.cast(members[name].shape).width == width, name
    assert AXI4Signature(id_width=4).members["bid"] == In(4)
    assert AXI4Signature().flip().data_width == 128
    with pytest.raises(ValueError, match="data_width"):
        AXI4Signature(data_width=96)
    with pytest.raises(ValueError, match="id_width"):
        AXI4Signature(id_width=0)
    with pytest.raises(TypeError, match="addr_width"):
        AXI4LiteSignature(addr_width="16")
