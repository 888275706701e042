# amaranth: UnusedElaboratable=no
"""The cache-migrate engine (hdl/tile/migrate.py) in the Amaranth simulator.

The engine runs on :class:`sim.bfm.memport.PortMemory` (in-order answers after a random
latency, random back-pressure on every stream) and is driven through its register block
by the AXI4-Lite master of ``tests/test_regblock.py`` and ``sim.regs.Registers``. Every
copy is checked byte for byte against a Python model of the whole memory (so nothing
outside DST may change), refusals and AXI errors against the rules of
docs/tile/migrate.md, and the cycles of a copy against ``golden/migrate_latency.py``.
Seeds are printed; ``V4HW_SEED=<n>`` reruns one.
"""

import random

import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from golden.migrate_latency import (
    LIMITED_TOLERANCE,
    STREAM_TOLERANCE,
    buffer_limited,
    bursts,
    migrate_cycles,
)
from hdl.common.axi import AxiResp
from hdl.mc.core import McCore
from hdl.muon.mesh import Mesh, node_index
from hdl.tile import migrate_regmap
from hdl.tile.memni import MemoryNi
from hdl.tile.migrate import MIGRATE_VERSION, MigrateEngine, caps_word
from hdl.tile.ni import RequesterNi
from hdl.tile.packets import min_flit_data_bits
from sim.bfm.memport import PortMemory
from sim.regs import Registers
from sim.seed import test_seed
from spec.codes import BlockId, ErrorCode, TrafficClass
from spec.memory import ADDRESS_LIMIT, PAGE_BYTES
from spec.tile import DEFAULT_NODES
from tests.test_regblock import SimAxiLiteMaster

SIZE = 1 << 17
ORIGIN = ADDRESS_LIMIT - SIZE  # the memory ends at 2^48, so copies reaching it can run
TIMEOUT = 200_000              # cycles a copy may take before the test fails


class Bench:
    """The engine, its memory and the registers, inside one simulation."""

    def __init__(self, ctx, dut, memory, image, log, errors):
        self.ctx, self.dut, self.memory, self.image = ctx, dut, memory, image
        self.log, self.errors = log, errors
        self.master = SimAxiLiteMaster(ctx, dut.bus)
        self.regs = Registers(self.master, migrate_regmap)

    def now(self):
        return self.ctx.get(self.dut.now)

    async def set_copy(self, src, dst, length):
        for name, value in (("SRC_LO", src & 0xFFFF_FFFF), ("SRC_HI", src >> 32),
                            ("DST_LO", dst & 0xFFFF_FFFF), ("DST_HI", dst >> 32),
                            ("LENGTH", length)):
            await self.regs.write(name, value)

    async def start(self):
        """Write START; returns the cycle in which the write was performed."""
        await self.master.send_write(self.regs.offset("START"), 1)
        cycle = self.now()
        assert await self.master.receive_b() == AxiResp.OKAY
        return cycle

    async def wait(self):
        """Poll STATUS until BUSY is clear; returns STATUS's fields."""
        for _ in range(TIMEOUT // 8):
            status = await self.regs.read_fields("STATUS")
            if not status["BUSY"]:
                return status
        raise AssertionError(f"the copy did not end within {TIMEOUT} cycles")

    async def copy(self, src, dst, length):
        """Run one copy; returns (code, ERR_ADDR, cycles from START to the CTR)."""
        await self.set_copy(src, dst, length)
        started = await self.start()
        status = await self.wait()
        code = ErrorCode(await self.regs.read("ERROR"))
        assert status["ERROR"] == (code != ErrorCode.NONE)
        assert status["DONE"] == (not status["ERROR"])
        addr = await self.regs.read("ERR_ADDR")
        ctr = await self.regs.read("CTR_LO") | await self.regs.read("CTR_HI") << 32
        return code, addr, (ctr - started if code == ErrorCode.NONE else None)


class OnTheMesh(Elaboratable):
    """The engine as the tile places it: its port through a ``RequesterNi`` at its node of
    the 2×2 mesh, the memory NI and an ``McCore`` (a read and a write channel) at the
    MC's node; ``mem`` is the MC's memory port. The members a :class:`Bench` uses are
    the engine's (``bus``, ``now``, ``interrupt``), ``port`` the engine's own memory port."""

    def __init__(self, data_width=128, **params):
        self.data_width = data_width
        flit_bits = min_flit_data_bits(data_width)
        node, mc_node = DEFAULT_NODES["migrate"], DEFAULT_NODES["mc"]
        self.engine = MigrateEngine(data_width, **params)
        self.max_burst = self.engine.max_burst
        self.mesh = Mesh(2, 2, flit_data_bits=flit_bits, stale_drop=False)
        self.ni = RequesterNi(data_width, flit_bits, node, mc_node, checks=True)
        self.mc = McCore(2, data_width, checks=True)
        self.mem_ni = MemoryNi(data_width, flit_bits, mc_node, [node],
                               channel=self.mc.channel_signature,
                               credits=self.ni.credit_count, checks=True)
        self.bus, self.now, self.interrupt = self.engine.bus, self.engine.now, self.engine.interrupt
        self.port, self.mem = self.engine.mem, self.mc.mem

    def elaborate(self, platform):
        m = Module()
        m.submodules.engine, m.submodules.ni = self.engine, self.ni
        m.submodules.mesh, m.submodules.mc = self.mesh, self.mc
        m.submodules.mem_ni = self.mem_ni
        wiring.connect(m, self.engine.mem, self.ni.port)
        m.d.comb += [self.ni.cls.eq(TrafficClass.CACHE_MIGRATE), self.mesh.now.eq(self.now),
                     self.mesh.max_age.eq(0), self.mc.window.eq(0)]
        for ni, (x, y) in ((self.ni, self.ni.node), (self.mem_ni, self.mem_ni.node)):
            n = node_index(x, y, 2)
            wiring.connect(m, ni.inject, self.mesh.inject[n])
            wiring.connect(m, self.mesh.eject[n], ni.eject)
        wiring.connect(m, self.mem_ni.rd_chan, self.mc.chans[0])
        wiring.connect(m, self.mem_ni.wr_chan, self.mc.chans[1])
        return m


def simulate(program, *, data_width=128, latency=(1, 12), pause=0.2, rng=None, now=0,
             on_mesh=False, **params):
    """Run ``program(bench)`` on a fresh engine (``on_mesh``: :class:`OnTheMesh`) and a
    memory of random bytes ``[ORIGIN, 2^48)``; ``now``: the timebase in the first cycle.
    Returns what ``program`` returns."""
    rng = rng or random.Random(0)
    dut = (OnTheMesh if on_mesh else MigrateEngine)(data_width, **params)
    image = bytearray(rng.randbytes(SIZE))
    log, errors, result = [], [], {}
    memory = PortMemory(dut.mem, data_width, image, origin=ORIGIN, latency=latency,
                        pause=pause, rng=rng, errors=errors, log=log)

    async def clock(ctx):
        cycle = now
        ctx.set(dut.now, cycle)
        async for _ in ctx.tick():
            cycle += 1
            ctx.set(dut.now, cycle)

    stalls = []

    async def read_data_always_taken(ctx):
        """The engine asks only for read data it has room for: ``rd_resp`` is never
        back-pressured."""
        resp = getattr(dut, "port", dut.mem).rd_resp
        async for _, _, valid, ready in ctx.tick().sample(resp.valid, resp.ready):
            if valid and not ready:
                stalls.append(ctx.get(dut.now))

    async def bench(ctx):
        result["value"] = await program(Bench(ctx, dut, memory, image, log, errors))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_process(clock)
    sim.add_testbench(bench)
    sim.add_testbench(read_data_always_taken, background=True)
    memory.add_to(sim)
    sim.run()
    assert not stalls, f"read data back-pressured in {len(stalls)} cycles, first {stalls[0]}"
    return result["value"]


def model_copy(image, src, dst, length):
    """The memory after a successful copy (a snapshot copy: DST ≤ SRC overlaps too)."""
    after = bytearray(image)
    after[dst - ORIGIN:dst - ORIGIN + length] = image[src - ORIGIN:src - ORIGIN + length]
    return after


def first_difference(got, expected):
    for i, (a, b) in enumerate(zip(got, expected, strict=True)):
        if a != b:
            return f"byte {ORIGIN + i:#x}: {a:#04x}, expected {b:#04x}"
    return None


def accesses(log, kind):
    return [int(addr) for k, addr in log if k == kind]


async def checked_copy(bench, src, dst, length, *, cut=True):
    """A copy that must succeed: the memory afterwards is the model's, byte for byte, and
    (``cut``) the bursts are the cut of ``golden.migrate_latency.bursts``. Returns its
    cycles."""
    before = bytes(bench.image)
    bench.log.clear()
    code, addr, cycles = await bench.copy(src, dst, length)
    where = f"copy {src:#x} -> {dst:#x}, {length} bytes"
    assert (code, addr) == (ErrorCode.NONE, 0), f"{where}: {code.name} at {addr:#x}"
    diff = first_difference(bench.image, model_copy(before, src, dst, length))
    assert diff is None, f"{where}: {diff}"
    bb, burst = bench.dut.data_width // 8, bench.dut.max_burst
    if not cut:
        return cycles
    assert accesses(bench.log, "read") == [a for a, _ in bursts(src, length, bb, burst)], where
    assert accesses(bench.log, "write") == [a for a, _ in bursts(dst, length, bb, burst)], where
    return cycles


def random_copy(rng, bb):
    """SRC, DST, LENGTH inside the memory: one word to three pages, often near a page end,
    DST anywhere not above SRC inside the source range (a fifth overlap downwards)."""
    words = rng.choice([1, 2, rng.randint(1, 64), rng.randint(1, 3 * PAGE_BYTES // bb)])
    length = words * bb
    slots = (SIZE - length) // bb
    src = ORIGIN + bb * rng.randrange(slots + 1)
    if rng.random() < 0.3:
        page_end = (src // PAGE_BYTES + 1) * PAGE_BYTES
        src = max(ORIGIN, min(page_end - bb * rng.randint(1, 8), ADDRESS_LIMIT - length))
    if rng.random() < 0.2:
        dst = max(ORIGIN, src - bb * rng.randrange(words))
    else:
        while True:
            dst = ORIGIN + bb * rng.randrange(slots + 1)
            if not src < dst < src + length:
                break
    return src, dst, length


@pytest.mark.parametrize("data_width, params, copies", [
    (128, {}, 10),
    (64, {"max_burst": 4, "max_outstanding": 2}, 4),
    (256, {"max_burst": 32, "max_outstanding": 3}, 4),
    (512, {"max_burst": 1, "max_outstanding": 5}, 4),
    (128, {"max_burst": 1, "max_outstanding": 2}, 3),    # a full buffer of two words
])
def test_random_copies(data_width, params, copies):
    rng = test_seed()
    bb = data_width // 8

    async def program(bench):
        for _ in range(copies):
            await checked_copy(bench, *random_copy(rng, bb))

    simulate(program, data_width=data_width, latency=(1, 14), pause=0.25, rng=rng, **params)


def test_edges_that_are_accepted():
    """DST just above the source range, DST = SRC, DST one word below SRC (a forward copy
    over its own source), a copy ending at 2^48, a page-crossing copy."""
    async def program(bench):
        src = ORIGIN + 0x3000
        await checked_copy(bench, src, src + 0x200, 0x200)
        await checked_copy(bench, src, src, 0x400)
        await checked_copy(bench, src, src - 16, 0x1000)
        await checked_copy(bench, ORIGIN + 0x100, ADDRESS_LIMIT - 0x1010, 0x1010)
        await checked_copy(bench, ADDRESS_LIMIT - 0x1010, ORIGIN + 0x5FF0, 0x1010)

    simulate(program, rng=test_seed())


REFUSALS = [
    # (what, src, dst, length, code, ERR_ADDR)
    ("LENGTH 0", ORIGIN, ORIGIN + 0x1000, 0, ErrorCode.BAD_COMMAND, 0),
    ("SRC range past 2^48", ADDRESS_LIMIT - 0x40, ORIGIN, 0x50, ErrorCode.BAD_COMMAND,
     (ADDRESS_LIMIT - 0x40) & 0xFFFF_FFFF),
    ("SRC at 2^48", ADDRESS_LIMIT, ORIGIN, 0x10, ErrorCode.BAD_COMMAND, 0),
    ("SRC near 2^64", (1 << 64) - 0x10, ORIGIN, 0x20, ErrorCode.BAD_COMMAND, 0xFFFF_FFF0),
    ("DST range past 2^48", ORIGIN, ADDRESS_LIMIT - 0x10, 0x20, ErrorCode.BAD_COMMAND,
     0xFFFF_FFF0),
    ("DST inside the source range, above SRC", ORIGIN + 0x100, ORIGIN + 0x110, 0x40,
     ErrorCode.BAD_COMMAND, (ORIGIN + 0x110) & 0xFFFF_FFFF),
    ("DST on the source's last word", ORIGIN + 0x100, ORIGIN + 0x130, 0x40,
     ErrorCode.BAD_COMMAND, (ORIGIN + 0x130) & 0xFFFF_FFFF),
    ("SRC misaligned", ORIGIN + 0x108, ORIGIN + 0x1000, 0x40, ErrorCode.MISALIGNED,
     (ORIGIN + 0x108) & 0xFFFF_FFFF),
    ("DST misaligned", ORIGIN, ORIGIN + 0x1001, 0x40, ErrorCode.MISALIGNED,
     (ORIGIN + 0x1001) & 0xFFFF_FFFF),
    ("LENGTH misaligned", ORIGIN, ORIGIN + 0x1000, 0x48, ErrorCode.MISALIGNED, 0x48),
    # Several faults: the first check in the order of docs/tile/migrate.md gives the code.
    ("LENGTH 0 and SRC misaligned", ORIGIN + 4, ORIGIN + 0x1000, 0, ErrorCode.BAD_COMMAND, 0),
    ("overlap and DST misaligned", ORIGIN, ORIGIN + 0x8, 0x40, ErrorCode.BAD_COMMAND,
     (ORIGIN + 0x8) & 0xFFFF_FFFF),
    ("SRC and DST misaligned", ORIGIN + 4, ORIGIN + 0x1002, 0x40, ErrorCode.MISALIGNED,
     (ORIGIN + 4) & 0xFFFF_FFFF),
    ("DST range and LENGTH misaligned", ORIGIN, ADDRESS_LIMIT - 0x10, 0x24,
     ErrorCode.BAD_COMMAND, 0xFFFF_FFF0),
]


def test_refusals_make_no_memory_access():
    async def program(bench):
        await bench.regs.write_fields("IRQ_ENABLE", done=0, error=1)
        for what, src, dst, length, code, err_addr in REFUSALS:
            before = bytes(bench.image)
            bench.log.clear()
            got = await bench.copy(src, dst, length)
            assert got[:2] == (code, err_addr), (
                f"{what}: {got[0].name} at {got[1]:#x}, expected {code.name} at {err_addr:#x}")
            status = await bench.regs.read_fields("STATUS")
            assert (status["BUSY"], status["DONE"], status["ERROR"]) == (0, 0, 1), what
            assert bench.log == [] and bytes(bench.image) == before, f"{what}: memory touched"
            assert bench.ctx.get(bench.dut.interrupt), what
            await bench.regs.write_fields("IRQ_STATUS", error=1)
            assert not bench.ctx.get(bench.dut.interrupt), what
        # The engine takes the next command; ERROR and ERR_ADDR are cleared.
        await checked_copy(bench, ORIGIN, ORIGIN + 0x1000, 0x100)

    simulate(program, rng=test_seed())


@pytest.mark.parametrize("case", range(3))
def test_read_error_stops_the_copy(case):
    """A source word answered with an error: AXI_READ_ERROR at its address, nothing
    written at or after its place in DST, nothing outside DST; the next copy runs."""
    rng = test_seed()
    bb = 16

    async def program(bench):
        length = bb * rng.randint(40, 600)
        src = ORIGIN + bb * rng.randrange(0, 0x1000 // bb)
        dst = ORIGIN + 0x10000 + bb * rng.randrange(0, 0x1000 // bb)
        bad = rng.randrange(length // bb)
        bench.errors[:] = [(src + bad * bb + rng.randrange(bb), src + bad * bb + bb)]
        before = bytes(bench.image)
        bench.log.clear()
        code, addr, _ = await bench.copy(src, dst, length)
        assert (code, addr) == (ErrorCode.AXI_READ_ERROR, (src + bad * bb) & 0xFFFF_FFFF)
        after, copied = bytes(bench.image), model_copy(before, src, dst, length)
        for i in range(len(before)):
            if not dst <= ORIGIN + i < dst + length:
                assert after[i] == before[i], f"byte {ORIGIN + i:#x} outside DST written"
            elif ORIGIN + i >= dst + bad * bb:
                assert after[i] == before[i], f"byte {ORIGIN + i:#x} at or after the error"
            else:
                assert after[i] in (before[i], copied[i]), f"byte {ORIGIN + i:#x}"
        cut = bursts(dst, length, bb, bench.dut.max_burst)
        writes = accesses(bench.log, "write")
        assert writes == [a for a, _ in cut[:len(writes)]]
        assert all(a + n * bb <= dst + bad * bb for a, n in cut[:len(writes)])
        bench.errors.clear()
        await checked_copy(bench, src, dst, length)

    simulate(program, latency=(1, 12), pause=0.2, rng=rng)


@pytest.mark.parametrize("case", range(3))
def test_write_error_stops_the_copy(case):
    """A destination word refused: AXI_WRITE_ERROR at the first byte of the refused
    burst, which writes nothing; nothing outside DST; the next copy runs."""
    rng = test_seed()
    bb = 16

    async def program(bench):
        length = bb * rng.randint(40, 600)
        src = ORIGIN + bb * rng.randrange(0, 0x1000 // bb)
        dst = ORIGIN + 0x10000 + bb * rng.randrange(0, 0x1000 // bb)
        bad = rng.randrange(length // bb)
        bench.errors[:] = [(dst + bad * bb, dst + bad * bb + 1 + rng.randrange(bb))]
        cut = bursts(dst, length, bb, bench.dut.max_burst)
        refused = next(a for a, n in cut if a <= dst + bad * bb < a + n * bb)
        before = bytes(bench.image)
        code, addr, _ = await bench.copy(src, dst, length)
        assert (code, addr) == (ErrorCode.AXI_WRITE_ERROR, refused & 0xFFFF_FFFF)
        after, copied = bytes(bench.image), model_copy(before, src, dst, length)
        size = dict(cut)[refused] * bb
        for i in range(len(before)):
            a = ORIGIN + i
            if not dst <= a < dst + length or refused <= a < refused + size:
                assert after[i] == before[i], f"byte {a:#x} written"
            else:
                assert after[i] in (before[i], copied[i]), f"byte {a:#x}"
        bench.errors.clear()
        await checked_copy(bench, src, dst, length)

    simulate(program, latency=(1, 12), pause=0.2, rng=rng)


def test_start_while_busy_is_dropped():
    """A START while BUSY changes nothing but START_DROPPED; the copy uses the registers
    as they were at its START; the next accepted START clears START_DROPPED."""
    async def program(bench):
        src, dst, length = ORIGIN + 0x40, ORIGIN + 0x9000, 0x2000
        before = bytes(bench.image)
        await bench.set_copy(src, dst, length)
        await bench.start()
        assert (await bench.regs.read_fields("STATUS"))["BUSY"]
        await bench.set_copy(ORIGIN, ORIGIN + 0x100, 0x10)
        await bench.start()
        status = await bench.wait()
        assert (status["DONE"], status["ERROR"], status["START_DROPPED"]) == (1, 0, 1)
        assert first_difference(bench.image, model_copy(before, src, dst, length)) is None
        await checked_copy(bench, ORIGIN, ORIGIN + 0x100, 0x10)
        assert not (await bench.regs.read_fields("STATUS"))["START_DROPPED"]

    simulate(program, rng=test_seed())


def test_ctr_time_and_interrupt():
    """CTR: the timebase when the last write was acknowledged, read-to-clear, high word
    latched; TIME reads ``now``; ``interrupt`` = IRQ_STATUS & IRQ_ENABLE (level)."""
    base = (1 << 32) - 300      # the high word of the timebase changes during the copy

    async def program(bench):
        assert (await bench.regs.read("TIME_LO")) | (await bench.regs.read("TIME_HI")) << 32 \
            <= bench.now()
        await bench.regs.write_fields("IRQ_ENABLE", done=1, error=0)
        await bench.set_copy(ORIGIN, ORIGIN + 0x8000, 0x1000)
        started = await bench.start()
        assert not bench.ctx.get(bench.dut.interrupt)
        await bench.wait()
        assert bench.ctx.get(bench.dut.interrupt)
        assert await bench.regs.read_fields("IRQ_STATUS") == {"DONE": 1, "ERROR": 0}
        ctr = await bench.regs.read("CTR_LO")
        ctr |= await bench.regs.read("CTR_HI") << 32
        assert started < ctr <= bench.now() and ctr >> 32 == 1
        assert await bench.regs.read("CTR_LO") == 0 and await bench.regs.read("CTR_HI") == 0
        time = await bench.regs.read("TIME_LO")
        now = bench.now()
        time |= await bench.regs.read("TIME_HI") << 32
        assert now - 4 <= time <= now
        await bench.regs.write_fields("IRQ_STATUS", done=1)
        assert not bench.ctx.get(bench.dut.interrupt)
        # An error with its enable off: latched, no interrupt; enabling it raises one.
        await bench.copy(ORIGIN, ORIGIN, 0)
        assert await bench.regs.read_fields("IRQ_STATUS") == {"DONE": 0, "ERROR": 1}
        assert not bench.ctx.get(bench.dut.interrupt)
        await bench.regs.write_fields("IRQ_ENABLE", done=1, error=1)
        assert bench.ctx.get(bench.dut.interrupt)

    simulate(program, now=base, rng=test_seed())


@pytest.mark.parametrize("data_width, params", [(128, {}), (64, {"max_burst": 8,
                                                                  "max_outstanding": 3})])
def test_identity(data_width, params):
    async def program(bench):
        ident = await bench.regs.read_fields("ID")
        assert (ident["BLOCK"], ident["VERSION"]) == (BlockId.MIGRATE, MIGRATE_VERSION)
        caps = await bench.regs.read("CAPS")
        dut = bench.dut
        assert caps == caps_word(data_width, dut.max_burst, dut.max_outstanding)
        assert bench.regs.fields("CAPS", caps) == {
            "MAX_OUTSTANDING": dut.max_outstanding, "BUS_BYTES": data_width // 8,
            "MAX_BURST": dut.max_burst}
        _, resp = await bench.regs.read_resp(bench.regs.unmapped_offset())
        assert resp == AxiResp.SLVERR

    simulate(program, data_width=data_width, rng=test_seed(), **params)


def _check_model(measured, **copy):
    limited = buffer_limited(**{k: copy[k] for k in ("bus_bytes", "max_burst",
                                                      "max_outstanding", "read_latency")})
    relative, cycles = LIMITED_TOLERANCE if limited else STREAM_TOLERANCE
    model = migrate_cycles(**copy)
    assert abs(measured - model) <= relative * model + cycles, (
        f"measured {measured} cycles, model {model} ({copy})")
    return model


def test_cycles_of_a_64_KiB_copy():
    """64 KiB at latency 8, no back-pressure: near a bus word a cycle, and the model."""
    length, latency = 1 << 16, 8
    src, dst = ORIGIN, ORIGIN + length

    async def program(bench):
        return await checked_copy(bench, src, dst, length)

    cycles = simulate(program, latency=latency, pause=0.0)
    rate = length / cycles
    model = _check_model(cycles, length=length, src=src, dst=dst, bus_bytes=16,
                         max_burst=16, max_outstanding=8, read_latency=latency)
    print(f"64 KiB copy, latency {latency}: {cycles} cycles (model {model}), "
          f"{rate:.2f} bytes/cycle of a 16-byte bus ({rate / 16:.1%})")
    assert rate >= 0.95 * 16


def test_cycle_model():
    """Measured cycles against golden.migrate_latency on random copies and builds, with
    the buffer covering the latency and not (no back-pressure)."""
    rng = test_seed()
    cases = []
    for limited in (False, False, False, True, True, True):
        data_width = rng.choice([64, 128, 256, 512])
        bb = data_width // 8
        burst = rng.choice([2, 4, 8, 16, 32])
        outstanding = rng.randint(2, 8)
        depth = burst * outstanding
        latency = (rng.randint(depth - 2 * burst + 8, depth + 40) if limited
                   else rng.randint(1, max(1, depth * 3 // 4 - 2 * burst - 4)))
        length = bb * rng.randint(1, 2 * PAGE_BYTES // bb)
        src = ORIGIN + bb * rng.randrange(0, 0x8000 // bb)
        dst = ORIGIN + 0x10000 + bb * rng.randrange(0, 0x8000 // bb)
        cases.append(dict(length=length, src=src, dst=dst, bus_bytes=bb, max_burst=burst,
                          max_outstanding=outstanding, read_latency=latency))
    for copy in cases:
        async def program(bench, copy=copy):
            return await checked_copy(bench, copy["src"], copy["dst"], copy["length"])

        cycles = simulate(program, data_width=8 * copy["bus_bytes"],
                          latency=copy["read_latency"], pause=0.0, rng=rng,
                          max_burst=copy["max_burst"], max_outstanding=copy["max_outstanding"])
        _check_model(cycles, **copy)


@pytest.mark.parametrize("kwargs, message", [
    ({"data_width": 96}, "data_width must be 64, 128, 256 or 512 bits, not 96"),
    ({"max_burst": 0}, "max_burst must be a power of two in 1..128 words, not 0"),
    ({"max_burst": 12}, "max_burst must be a power of two in 1..128 words, not 12"),
    ({"max_burst": 256}, "max_burst must be a power of two in 1..128 words, not 256"),
    ({"max_outstanding": 1}, "max_outstanding must be 2..16 bursts, not 1"),
    ({"max_outstanding": 17}, "max_outstanding must be 2..16 bursts, not 17"),
])
def test_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        MigrateEngine(**kwargs)


def test_parameter_types():
    with pytest.raises(TypeError, match="max_burst must be an integer"):
        MigrateEngine(max_burst=4.0)


def test_copies_through_the_tile_network():
    """The engine behind a RequesterNi, the mesh, the memory NI and the MC (as the tile
    wires it; the NIs' protocol checkers on): random copies byte for byte, and the
    cycles of a page at latency 8, against the model's streaming figure."""
    rng = test_seed()

    async def program(bench):
        for _ in range(3):
            src, dst, length = random_copy(rng, 16)
            await checked_copy(bench, src, dst, min(length, 2 * PAGE_BYTES), cut=False)

    simulate(program, latency=(1, 12), pause=0.2, rng=rng, on_mesh=True)

    async def page(bench):
        return await checked_copy(bench, ORIGIN, ORIGIN + 0x8000, PAGE_BYTES, cut=False)

    cycles = simulate(page, latency=8, pause=0.0, on_mesh=True)
    alone = migrate_cycles(PAGE_BYTES, src=ORIGIN, dst=ORIGIN + 0x8000, read_latency=8)
    print(f"4 KiB through the NIs, the mesh and the MC at memory latency 8: {cycles} "
          f"cycles ({PAGE_BYTES / cycles:.2f} bytes/cycle); on the memory port alone "
          f"(model): {alone}")
    assert cycles >= alone
