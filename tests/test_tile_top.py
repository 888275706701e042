# amaranth: UnusedElaboratable=no
"""The tile's control port in the Amaranth simulator (``hdl/tile/control.py``): the
decoder in front of a register block per window (the MA's, VA's, MC's and migrate
engine's maps, and the tile's real MESH unit: the Muon register block and RBR arbiter),
the tile's own registers, SLVERR outside every block, IRQ_SOURCE and the interrupt;
reservations through the MESH window against the golden reservation table; and the
tile's parameter checks (``hdl/tile/top.py``), which refuse a configuration before
anything is built.

The whole tile runs under cocotb (``tests/test_tile_cocotb.py``)."""

import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring

from golden.muon import ReservationModel
from hdl.common.axi import AxiResp
from hdl.common.regblock import RegisterBlock
from hdl.ma import regmap as ma_regmap
from hdl.mc import regmap as mc_regmap
from hdl.muon import regmap as muon_regmap
from hdl.muon.rbr import decision_lead
from hdl.tile import migrate_regmap, sequencer_regmap
from hdl.tile import regmap as tile_regmap
from hdl.tile.control import CLASS_NODES, IRQ_BLOCKS, TILE_VERSION, TileControl, caps_word
from hdl.tile.top import BLOCKS, SMALL, TileTop, _MeshUnit
from hdl.top.muon import MUON_VERSION
from hdl.top.muon import caps_word as muon_caps
from hdl.va import regmap as va_regmap
from sim.blocks import descriptor
from sim.regs import Registers
from sim.tile_reserve import read64, reserve
from spec.codes import BlockId, ErrorCode, TrafficClass
from spec.tile import BLOCK_WINDOW_BITS, DEFAULT_NODES, TileBlock, base
from tests.test_regblock import SimAxiLiteMaster, simulate

MAPS = {"ma": ma_regmap, "va": va_regmap, "mc": mc_regmap, "migrate": migrate_regmap,
        "mesh": muon_regmap, "sequencer": sequencer_regmap}
IDS = {"ma": BlockId.MA, "va": BlockId.VA, "mc": BlockId.MC, "migrate": BlockId.MIGRATE,
       "mesh": BlockId.MUON, "sequencer": BlockId.SEQUENCER}
INFO = dict(cols=2, rows=2, data_width=128, nodes=DEFAULT_NODES, ma_p=4, va_l=8,
            va_fn_lanes=8, mc_channels=2, flit_bits=145, credits=32)
# An RW register of each block's map, to write through its window.
SCRATCH = {"ma": "M", "va": "LENGTH", "mc": "WINDOW", "migrate": "LENGTH", "mesh": "MAX_AGE",
           "sequencer": "COUNT"}
RESET = {"mc": 4096, "mesh": 100}     # SCRATCH's reset values (the others: 0)
RSV_SLOTS = 2


def _run(testbench, rng=None):
    """The decoder with a register block of each block's map behind its window (the
    MESH window: the tile's own :class:`_MeshUnit`, 2×2, ``RSV_SLOTS`` slots, as
    ``dut.mesh_unit``)."""
    dut = TileControl(BLOCKS, INFO)
    top = Module()
    top.submodules.control = dut
    now = Signal(64)
    top.d.sync += now.eq(now + 1)
    top.d.comb += dut.now.eq(now)
    for name in BLOCKS:
        if name == "mesh":
            top.submodules.mesh = dut.mesh_unit = unit = _MeshUnit(2, 2, RSV_SLOTS)
            wiring.connect(top, dut.mesh, unit.bus)
            top.d.comb += unit.now.eq(now)
            continue
        top.submodules[name] = regs = RegisterBlock(MAPS[name])
        wiring.connect(top, getattr(dut, name), regs.bus)
        top.d.comb += regs.id.block.eq(IDS[name])

    async def bench(ctx):
        master = SimAxiLiteMaster(ctx, dut.bus, rng)
        await testbench(ctx, master, dut, now)

    simulate(top, bench)


def _regs(master, name):
    return Registers(master, MAPS[name] if name != "tile" else tile_regmap, base=base(name))


def test_each_window_reaches_its_block():
    async def bench(ctx, master, dut, now):
        for name in BLOCKS:
            regs = _regs(master, name)
            assert (await regs.read_fields("ID"))["BLOCK"] == IDS[name], name
        # A write through one window changes that block's register only.
        for k, name in enumerate(BLOCKS):
            await _regs(master, name).write(SCRATCH[name], 0x100 + k)
        for k, name in enumerate(BLOCKS):
            assert await _regs(master, name).read(SCRATCH[name]) == 0x100 + k, name
        # Byte strobes pass through.
        regs = _regs(master, "ma")
        assert await regs.write_bytes("M", b"\x7f", 1) == AxiResp.OKAY
        assert await regs.read("M") == 0x7F00 | 0x100
        # An offset with no register inside a block's window: that block's SLVERR.
        for name in BLOCKS:
            regs = _regs(master, name)
            value, resp = await regs.read_resp(regs.unmapped_offset())
            assert (value, resp) == (0, AxiResp.SLVERR), name
            assert await regs.write_resp(regs.unmapped_offset(), 1) == AxiResp.SLVERR, name
    _run(bench)


def test_tile_registers():
    async def bench(ctx, master, dut, now):
        regs = _regs(master, "tile")
        ident = await regs.read_fields("ID")
        assert ident == {"BLOCK": BlockId.TILE, "VERSION": TILE_VERSION}
        caps = await regs.read("CAPS")
        windows = [TileBlock.TILE, *BLOCKS.values()]
        assert caps == caps_word(windows, 2, 2, 128)
        assert descriptor("tile").decode_caps(caps) == {
            "WINDOWS": 0b1111111, "COLS": 2, "ROWS": 2, "BUS_BYTES": 16}
        assert regs.fields("CAPS", caps) == descriptor("tile").decode_caps(caps)
        nodes = await regs.read_fields("NODES")
        assert nodes == {name.upper(): x | y << 4 for name, (x, y) in DEFAULT_NODES.items()}
        assert await regs.read_fields("PARAMS") == {"MA_P": 4, "VA_L": 8, "VA_FN_LANES": 8,
                                                    "MC_CHANNELS": 2}
        assert await regs.read_fields("NI") == {"FLIT_BITS": 145, "CREDITS": 32}
        for name in ("STATUS", "ERROR", "ERR_ADDR", "IRQ_STATUS"):
            assert await regs.read(name) == 0, name
        # TRAFFIC_CLASS: decode for the MA and VA, cache-migrate for the engine, writable.
        assert await regs.read_fields("TRAFFIC_CLASS") == {
            "MA": TrafficClass.DECODE, "VA": TrafficClass.DECODE,
            "MIGRATE": TrafficClass.CACHE_MIGRATE}
        assert [ctx.get(getattr(dut, f"cls_{n}")) for n in CLASS_NODES] == [7, 7, 3]
        await regs.write_fields("TRAFFIC_CLASS", ma=TrafficClass.PREFILL, va=1, migrate=6)
        assert [ctx.get(getattr(dut, f"cls_{n}")) for n in CLASS_NODES] == [5, 1, 6]
        # RESERVE and RSV_GUARD to the reservation control; its counters read back.
        assert await regs.read_fields("RESERVE") == {"CLASSES": 0}
        assert await regs.read("RSV_GUARD") == 160
        assert (ctx.get(dut.rsv_classes), ctx.get(dut.rsv_guard)) == (0, 160)
        await regs.write_fields("RESERVE", classes=1 << TrafficClass.DECODE)
        await regs.write("RSV_GUARD", 77)
        assert (ctx.get(dut.rsv_classes), ctx.get(dut.rsv_guard)) == (0x80, 77)
        # RSV_SHARE: reset 0 (no sharing), its two fields to the reservation control.
        assert await regs.read_fields("RSV_SHARE") == {"RESERVED": 0, "BACKGROUND": 0}
        assert (ctx.get(dut.rsv_reserved), ctx.get(dut.rsv_background)) == (0, 0)
        await regs.write_fields("RSV_SHARE", reserved=300, background=0xFFFF)
        assert (ctx.get(dut.rsv_reserved), ctx.get(dut.rsv_background)) == (300, 0xFFFF)
        assert await regs.read("RSV_SHARE") == 0xFFFF << 16 | 300
        ctx.set(dut.rsv_starts, 12)
        ctx.set(dut.rsv_late, 3)
        ctx.set(dut.rsv_drain_max, 99)
        assert [await regs.read(n) for n in ("RSV_STARTS", "RSV_LATE", "RSV_DRAIN_MAX")] == [
            12, 3, 99]
        # TIME_LO / TIME_HI: the shared timebase.
        before = ctx.get(now)
        lo = await regs.read("TIME_LO")
        hi = await regs.read("TIME_HI")
        assert hi == 0 and before < lo < ctx.get(now)
    _run(bench)


@pytest.mark.parametrize("seed", [0, 1])
def test_outside_every_block_slverr(seed):
    rng = random.Random(seed)

    async def bench(ctx, master, dut, now):
        empty = [w for w in range(16) if w not in (TileBlock.TILE, *BLOCKS.values())]
        assert 7 in empty and TileBlock.SEQUENCER not in empty and TileBlock.MESH not in empty
        for window in empty:
            for offset in (0, 4 * rng.randrange(1 << 14)):
                addr = window << BLOCK_WINDOW_BITS | offset
                assert await master.write_word(addr, rng.getrandbits(32)) == AxiResp.SLVERR
                assert await master.read_word(addr) == (0, AxiResp.SLVERR)
        # The blocks behind are untouched and still answer.
        for name in BLOCKS:
            assert await _regs(master, name).read(SCRATCH[name]) == RESET.get(name, 0), name
    _run(bench, rng)


def test_the_sequencers_control_master():
    """The second master (the sequencer's ``ctl``) reaches every block's window like the
    host (each write read back by the host); its accesses to the SEQUENCER window
    answer SLVERR (the host's reach the sequencer's registers)."""
    rng = random.Random(3)

    async def bench(ctx, master, dut, now):
        seq = SimAxiLiteMaster(ctx, dut.seq, rng)
        for k, name in enumerate(n for n in BLOCKS if n != "sequencer"):
            regs = Registers(seq, MAPS[name], base=base(name))
            await regs.write(SCRATCH[name], 0x200 + k)
            assert await _regs(master, name).read(SCRATCH[name]) == 0x200 + k, name
        own = base("sequencer") + 4 * rng.randrange(1 << 14)
        assert await seq.write_word(own, 1) == AxiResp.SLVERR
        assert await seq.read_word(own) == (0, AxiResp.SLVERR)
        await _regs(master, "sequencer").write("COUNT", 5)
        assert await _regs(master, "sequencer").read("COUNT") == 5
    _run(bench, rng)


def test_random_accesses_against_a_model():
    """Random reads and writes of the blocks' RW registers and of empty windows, with
    random AW/W order and pauses: every answer as a dict model predicts."""
    rng = random.Random(7)

    async def bench(ctx, master, dut, now):
        model = {}
        for _ in range(120):
            name = rng.choice([*BLOCKS, None])
            if name is None:
                addr = rng.choice([7, 9, 15]) << 16
                if rng.random() < 0.5:
                    assert await master.write_word(addr, 1) == AxiResp.SLVERR
                else:
                    assert await master.read_word(addr) == (0, AxiResp.SLVERR)
                continue
            regs = _regs(master, name)
            if rng.random() < 0.5:
                value = rng.getrandbits(32)
                await regs.write(SCRATCH[name], value)
                fields = regs.register(SCRATCH[name])["fields"]
                model[name] = value & sum(((1 << f["width"]) - 1) << f["lsb"] for f in fields)
            elif name in model:
                assert await regs.read(SCRATCH[name]) == model[name]
    _run(bench, rng)


def test_irq_source_and_interrupt():
    async def bench(ctx, master, dut, now):
        regs = _regs(master, "tile")
        assert await regs.read("IRQ_SOURCE") == 0 and not ctx.get(dut.interrupt)
        for name in IRQ_BLOCKS:
            ctx.set(getattr(dut, f"irq_{name}"), 1)
            await ctx.tick()
            assert ctx.get(dut.interrupt)
            assert await regs.read_fields("IRQ_SOURCE") == {
                n.upper(): int(n == name) for n in IRQ_BLOCKS}
            ctx.set(getattr(dut, f"irq_{name}"), 0)
            await ctx.tick()
            assert not ctx.get(dut.interrupt)
        for name in ("va", "migrate"):
            ctx.set(getattr(dut, f"irq_{name}"), 1)
        bits = await regs.read("IRQ_SOURCE")
        assert bits == 1 << TileBlock.VA | 1 << TileBlock.MIGRATE
    _run(bench)


def test_mesh_reservations():
    """The MESH window: the Muon block's ID and CAPS, RSV_LEAD; a granted reservation
    (its slot on the unit's ``slots``, to the mesh), an overlapping one refused with
    retry_after, the same flow asked again at retry_after granted, a third refused
    FULL with the cycle the first slot frees, a bad request BAD_COMMAND; every answer
    as the golden table's, DONE's interrupt; BAD_DST counts a router's drop."""
    ma, va, mc = DEFAULT_NODES["ma"], DEFAULT_NODES["va"], DEFAULT_NODES["mc"]

    async def bench(ctx, master, dut, now):
        regs = _regs(master, "mesh")
        unit = dut.mesh_unit
        model = ReservationModel(2, 2, RSV_SLOTS)
        assert await regs.read_fields("ID") == {"BLOCK": BlockId.MUON, "VERSION": MUON_VERSION}
        assert await regs.read("CAPS") == muon_caps(2, 2, RSV_SLOTS, 8, 4)
        assert await regs.read("RSV_LEAD") == decision_lead(RSV_SLOTS, 2, 2) == model.lead
        await regs.write_fields("IRQ_ENABLE", done=1, error=1)
        start = ctx.get(now) + 400
        first = await reserve(regs, model, ma, mc, start, 60, 20)
        assert first.granted and not first.full and first.req_cycle < first.grant_cycle
        assert ctx.get(unit.interrupt)
        await regs.write_fields("IRQ_STATUS", done=1, error=1)
        assert not ctx.get(unit.interrupt)
        slot = [s for s in ctx.get(unit.slots) if s.valid]
        assert [(s.src_x, s.src_y, s.dst_x, s.dst_y, s.start, s.duration, s.id)
                for s in slot] == [(*ma, *mc, start, 60, first.id)]
        # The VA's flow to the MC shares the MA's last two links: refused with the
        # earliest start that fits; asked again at that start, granted.
        refused = await reserve(regs, model, va, mc, start + 10, 30, 30)
        assert not refused.granted and not refused.full and refused.retry_after > start + 10
        again = await reserve(regs, model, va, mc, refused.retry_after, 30, 30)
        assert again.granted and again.id != first.id
        full = await reserve(regs, model, DEFAULT_NODES["migrate"], mc,
                             ctx.get(now) + 100, 10, 10)
        assert full.full and not full.granted and full.retry_after == start + 1 + 2 * 2 + 60
        assert await reserve(regs, model, ma, mc, start, 0, 0) is None
        assert await regs.read("ERROR") == ErrorCode.BAD_COMMAND
        assert await read64(regs, "RSV_REQ_CYCLE") == full.req_cycle    # not taken
        # BAD_DST: a drop at a router's port.
        assert await regs.read("BAD_DST") == 0
        ctx.set(unit.dropped[1].valid, 1)
        ctx.set(unit.dropped[1].payload.bad_dst, 1)
        await ctx.tick()
        ctx.set(unit.dropped[1].valid, 0)
        assert await regs.read("BAD_DST") == 1
        assert [await regs.read(f"DROPPED_{c}") for c in range(8)] == [0] * 8
    _run(bench)


@pytest.mark.parametrize("args, message", [
    (dict(p=3), "power of two"),
    (dict(lanes=4), "narrower than"),
    (dict(cols=1), "COLS must be in 2..8"),
    (dict(rows=9), "ROWS must be in 2..8"),
    (dict(credits=10), "CREDITS must be in 24..255"),
    (dict(flit_bits=120), "at least 145"),
    (dict(data_width=96), "64, 128, 256 or 512"),
    (dict(prefetch_lines=3), "power of two"),
    (dict(rsv_slots=0), "RBR slots must be in 1..32"),
    (dict(rsv_slots=True), "RSV_SLOTS must be an integer"),
])
def test_bad_parameters_are_one_value_error(args, message):
    with pytest.raises(ValueError, match=message) as info:
        TileTop(**{**SMALL, **args})
    assert "\n" not in str(info.value)


def test_parameters_reach_the_identification():
    top = TileTop(**SMALL)
    assert top.info() == INFO


@pytest.mark.parametrize("param", ["COLS=1", "P=3", "CREDITS=300", "FLIT_BITS=100", "L=2"])
def test_command_line_refuses_a_bad_parameter(param, tmp_path, capsys):
    from sim.cli import main
    status = main(["verilog", "tile", "--param", param, "-o", str(tmp_path / "t.v")])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert len(err.splitlines()) == 1 and err.startswith("v4hw: error:"), err
    assert not (tmp_path / "t.v").exists()
