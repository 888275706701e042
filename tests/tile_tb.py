"""cocotb tests of the ``v4hw_tile`` top (the small configuration: MA P=4, VA L=8, 128-bit
bus, 2×2 mesh), run by ``tests/test_tile_cocotb.py``.

Every test starts a :class:`sim.tile_driver.TileBench` (which checks the tile's ID, CAPS
and PARAMS and every block's ID at its window), draws its random choices from
:func:`sim.seed.test_seed`, and runs each block's commands through that block's own
standalone bench code, so results are checked bit for bit against the golden model
(``golden.ma``, ``golden.va``) exactly as on the standalone tops. Cycle counts are
printed as ``PERF <test> <what> <cycles>`` lines.

``standalone_ma`` and ``standalone_va`` run the same commands on the standalone tops
(``v4hw_ma`` P=4, ``v4hw_va`` L=8) for the tile-vs-standalone ratios of
docs/tile/README.md.
"""

import cocotb
import numpy as np

from golden.ma import gemm as golden_gemm
from golden.muon import ReservationModel
from golden.va import MemoryWindow, VaCommand, execute
from hdl.common.axi import AxiResp
from hdl.va.core import RTL_OPCODES
from sim.ma_driver import Command, MaBench, b_transposed, c_dtype, element_size
from sim.seed import test_seed
from sim.tile_driver import TileBench
from sim.tile_reserve import reserve
from sim.va_driver import VaBench
from spec.codes import MA_MODE_BF16, BlockId, ErrorCode, MaMode, TrafficClass, VaOpcode
from spec.tile import DEFAULT_NODES, TileBlock
from tests.va_tb import any_command

ICARUS = cocotb.SIM_NAME.lower().startswith("icarus")
P, L, BUS = 4, 8, 16
LATENCY = 20
HIGH = 0xBEEF_8000_0000
GEMM = 32
SILU_LENGTH = 1000
STREAM_GEMM = 128           # the streaming MA command: 128³ int8
STREAM_LENGTH = 65536       # and its streaming VA commands: SILU, ADD of 65 536 elements
STREAM_WINDOW = (0x7F00_0000_0000, 1 << 20)


def _wide():
    from golden.ma import TatEntry
    return [TatEntry(True, 0, 19, HIGH)]


async def new_tile(dut, **kwargs):
    rng = test_seed()
    bench = TileBench(dut, p=P, lanes=L, rng=rng, latency=LATENCY, **kwargs)
    await bench.start()
    return bench, rng


def operands(rng, mode, m, k, n):
    g = np.random.default_rng(rng.getrandbits(64))
    if not mode & MA_MODE_BF16:     # int8, B as stored or transposed
        return (g.integers(-128, 128, (m, k), dtype=np.int8),
                g.integers(-128, 128, (k, n), dtype=np.int8))
    # bf16 values of moderate range (random sign, exponent 120..134, mantissa).
    def bf16(shape):
        sign = g.integers(0, 2, shape, dtype=np.uint16) << 15
        exp = g.integers(120, 135, shape, dtype=np.uint16) << 7
        return sign | exp | g.integers(0, 128, shape, dtype=np.uint16)
    return bf16((m, k)), bf16((k, n))


async def run_gemms(ma, rng, label):
    """int8 and bf16 GEMMs of GEMM³ on ``ma`` (a MaBench or the tile's view)."""
    await ma.set_tat(_wide())
    for mode in (MaMode.INT8, MaMode.BF16):
        a, b = operands(rng, mode, GEMM, GEMM, GEMM)
        es = 2 if mode == MaMode.BF16 else 1
        outcome = await ma.gemm(mode, a, b, a_addr=0x10000, b_addr=0x20000,
                                c_addr=0x40000, lda=GEMM * es, ldb=GEMM * es)
        assert outcome.done, outcome
        print(f"PERF {label} ma_{mode.name.lower()}_{GEMM}x{GEMM}x{GEMM} {outcome.cycles}")


def silu(va, rng, length=SILU_LENGTH):
    g = np.random.default_rng(rng.getrandbits(64))
    src, dst = va.origin + 0x100, va.origin + va.size // 2 + 0x40
    values = (g.standard_normal(length) * 4).astype(np.float32).view(np.uint32)
    va.place(src, (values >> 16).astype(np.uint16))
    return VaCommand(VaOpcode.SILU, length, src=src, dst=dst)


async def run_silu(va, rng, label, length=SILU_LENGTH):
    outcome = await va.check(silu(va, rng, length))
    assert outcome.code == ErrorCode.NONE
    print(f"PERF {label} va_silu_{length} {outcome.cycles}")


async def run_streams(ma, va, rng, label):
    """The streaming commands: an int8 GEMM of STREAM_GEMM³, SILU and ADD of
    STREAM_LENGTH elements, each checked bit for bit."""
    await ma.set_tat(_wide())
    n = STREAM_GEMM
    a, b = operands(rng, MaMode.INT8, n, n, n)
    outcome = await ma.gemm(MaMode.INT8, a, b, a_addr=0x100000, b_addr=0x200000,
                            c_addr=0x400000, max_cycles=2_000_000)
    assert outcome.done
    print(f"PERF {label} ma_int8_{n}x{n}x{n} {outcome.cycles}")
    await run_silu(va, rng, label, STREAM_LENGTH)
    cmd = silu(va, rng, STREAM_LENGTH)
    add = VaCommand(VaOpcode.ADD, STREAM_LENGTH, src=cmd.src, src2=cmd.dst, dst=cmd.dst)
    outcome = await va.check(add)
    assert outcome.code == ErrorCode.NONE
    print(f"PERF {label} va_add_{STREAM_LENGTH} {outcome.cycles}")


@cocotb.test()
async def stream_tile(dut):
    """The streaming commands through the tile (docs/tile/README.md's ratios)."""
    bench, rng = await new_tile(dut, va_window=STREAM_WINDOW)
    await run_streams(bench.ma, bench.va, rng, "tile")


@cocotb.test()
async def identity(dut):
    """ID, CAPS, PARAMS of the tile; every window's block ID; the MA's and VA's CAPS."""
    bench, _ = await new_tile(dut)
    regs = bench.regs
    assert (await regs.read_fields("TRAFFIC_CLASS")) == {
        "MA": TrafficClass.DECODE, "VA": TrafficClass.DECODE,
        "MIGRATE": TrafficClass.CACHE_MIGRATE}
    lo = await regs.read("TIME_LO")
    assert 0 < lo <= bench.now()


@cocotb.test()
async def ma_gemm(dut):
    """int8 and bf16 32×32×32 GEMMs through the tile, bit for bit against golden.ma."""
    bench, rng = await new_tile(dut)
    await run_gemms(bench.ma, rng, "tile")


@cocotb.test()
async def va_silu(dut):
    """SILU of 1000 bf16 elements through the tile (the whole window against golden.va),
    then an ADD at another traffic class."""
    bench, rng = await new_tile(dut)
    await run_silu(bench.va, rng, "tile")
    await bench.regs.write_fields("TRAFFIC_CLASS", ma=TrafficClass.DECODE,
                                  va=TrafficClass.PREFILL,
                                  migrate=TrafficClass.CACHE_MIGRATE)
    va = bench.va
    cmd = silu(va, rng, 256)
    add = VaCommand(VaOpcode.ADD, 256, src=cmd.src, src2=cmd.src + 0x2000, dst=cmd.dst)
    assert (await va.check(add)).code == ErrorCode.NONE


@cocotb.test()
async def migrate_copy(dut):
    """The cache-migrate engine copies 8 KiB (crossing a page) through the mesh and MC."""
    bench, _ = await new_tile(dut)
    cycles = await bench.migrate_copy(0x5000_0000, 0x5100_0800, 8192)
    print(f"PERF tile migrate_8192 {cycles}")


@cocotb.test()
async def outside_windows(dut):
    """Reads and writes outside every block (the free windows, a hole in the tile's own
    map) answer SLVERR; reads return 0; the blocks are unaffected."""
    bench, rng = await new_tile(dut)
    for window in (7, 8, 15):
        addr = window << 16 | 4 * rng.randrange(1 << 14)
        resp = await bench.axil.write(addr, rng.randbytes(4))
        assert AxiResp(int(resp.resp)) == AxiResp.SLVERR, f"write at {addr:#x}: {resp.resp}"
        value = await bench.axil.read(addr, 4)
        assert AxiResp(int(value.resp)) == AxiResp.SLVERR, f"read at {addr:#x}"
        assert bytes(value.data) == bytes(4)
    regs = bench.regs
    value, resp = await regs.read_resp(regs.unmapped_offset())
    assert (value, resp) == (0, AxiResp.SLVERR)
    assert await regs.write_resp(regs.unmapped_offset(), 1) == AxiResp.SLVERR
    await bench.check_identity()


@cocotb.test()
async def interrupt_source(dut):
    """IRQ_SOURCE names the block whose interrupt is up: the VA after a command, the MA
    after a refused one; clearing the block's IRQ_STATUS drops it and the interrupt."""
    bench, rng = await new_tile(dut)
    regs = bench.regs
    assert await regs.read("IRQ_SOURCE") == 0 and not int(dut.interrupt.value)
    va = bench.block_regs("va")
    await va.write_fields("IRQ_ENABLE", done=1, error=1)
    await bench.va.write_command(silu(bench.va, rng, 64))
    await va.write("START", 1)
    await bench.wait_interrupt(20_000, " (VA SILU)")
    assert await regs.read("IRQ_SOURCE") == 1 << TileBlock.VA
    await va.write_fields("IRQ_STATUS", done=1, error=1)
    assert await regs.read("IRQ_SOURCE") == 0 and not int(dut.interrupt.value)
    ma = bench.block_regs("ma")
    await ma.write_fields("IRQ_ENABLE", done=1, error=1)
    await ma.write("M", 0)                  # a bad shape: refused at START
    await ma.write("START", 1)
    await bench.wait_interrupt(1000, " (MA refusal)")
    assert await ma.read("ERROR") == ErrorCode.BAD_COMMAND
    assert await regs.read_fields("IRQ_SOURCE") == {"MA": 1, "VA": 0, "MC": 0, "MIGRATE": 0,
                                                    "MESH": 0, "SEQUENCER": 0}
    await ma.write_fields("IRQ_STATUS", done=1, error=1)
    assert await regs.read("IRQ_SOURCE") == 0 and not int(dut.interrupt.value)


@cocotb.test()
async def reservations(dut):
    """The MESH window's RBR arbiter: a reservation of the MA's flow to the MC granted;
    the VA's flow, which shares its last two links, refused with retry_after; the VA's
    asked again at retry_after, granted (every answer as golden.muon's table). Then a
    VA SILU runs across the VA flow's window (its memory packets, best effort, wait out
    the window on the reserved links and are never dropped): its memory window against
    golden.va, and no drop counted."""
    bench, rng = await new_tile(dut)
    regs = bench.block_regs("mesh")
    slots = (await regs.read("CAPS") >> 8) & 0xFF
    model = ReservationModel(2, 2, slots)
    assert await regs.read("RSV_LEAD") == model.lead
    ma, va, mc = DEFAULT_NODES["ma"], DEFAULT_NODES["va"], DEFAULT_NODES["mc"]
    start = bench.now() + 1000
    first = await reserve(regs, model, ma, mc, start, 200, 100)
    assert first.granted, first
    refused = await reserve(regs, model, va, mc, start + 50, 100, 100)
    assert not refused.granted and not refused.full and refused.retry_after > start + 50
    again = await reserve(regs, model, va, mc, refused.retry_after, 100, 100)
    assert again.granted and again.id != first.id, again
    print(f"PERF reservations granted id {first.id} at {start}, refused retry_after "
          f"{refused.retry_after}, granted id {again.id} at {refused.retry_after}; "
          f"answers {first.grant_cycle - first.req_cycle} / "
          f"{refused.grant_cycle - refused.req_cycle} / {again.grant_cycle - again.req_cycle} "
          f"cycles after the request")
    va_bench = bench.va
    wait = refused.retry_after - 40 - bench.now()
    assert wait > 0, f"the requests took too long: {-wait} cycles past the VA's window"
    await bench.cycles(wait)
    began = bench.now()
    assert (await va_bench.check(silu(va_bench, rng, 512))).code == ErrorCode.NONE
    ended = bench.now()
    print(f"PERF reservations silu_512 across the VA flow's window: {ended - began} cycles "
          f"(began {began}, window {refused.retry_after}..{refused.retry_after + 100})")
    assert ended > refused.retry_after + 100, "the SILU ended before the window closed"
    assert await regs.read("BAD_DST") == 0
    assert [await regs.read(f"DROPPED_{c}") for c in range(8)] == [0] * 8


async def _wait_done(regs, what, max_cycles, bench):
    deadline = bench.timing.edge() + max_cycles
    while True:
        status = await regs.read_fields("STATUS")
        if status["DONE"] or status["ERROR"]:
            assert status["DONE"], f"{what} ended with {ErrorCode(await regs.read('ERROR')).name}"
            return
        assert bench.timing.edge() < deadline, f"{what} did not end in {max_cycles} cycles"


def _gemm_job(ma, rng, mode, m, k, n, *, accumulate=False):
    """A GEMM for a concurrent round: its operands (and old C) placed through the MA's
    TAT at 0x10000, 0x20000, 0x40000; its command, C's place, and the golden C."""
    a, b = operands(rng, mode, m, k, n)
    if b_transposed(mode):
        b = np.ascontiguousarray(b.T)
    es = element_size(mode)
    cmd = Command(mode=mode, m=m, k=k, n=n, a_addr=0x10000, b_addr=0x20000, c_addr=0x40000,
                  lda=k * es, ldb=b.shape[1] * es, ldc=4 * n, accumulate=accumulate)
    ma.place(a, cmd.a_addr, cmd.lda)
    ma.place(b, cmd.b_addr, cmd.ldb)
    old = None
    if accumulate:
        old = np.frombuffer(rng.randbytes(4 * m * n), c_dtype(mode)).reshape(m, n)
        ma.place(old, cmd.c_addr, cmd.ldc)
    return cmd, golden_gemm(mode, a, b, old)


async def _concurrent(bench, label, *, gemm=None, vcmd=None, copy=None,
                      order=("ma", "va", "migrate"), max_cycles=400_000):
    """Write each job's registers, START them back to back in ``order``, wait for each
    to be DONE; check C against its golden C (``gemm``: from :func:`_gemm_job`), the VA's
    window against golden.va (``vcmd``), the copy against its source (``copy``: src,
    dst, bytes; the source is filled with random bytes here), that no other byte
    changed and no AXI rule broke. Returns each block's cycles from the first START."""
    ma, va = bench.ma, bench.va
    jobs = {"ma": gemm, "va": vcmd, "migrate": copy}
    order = [block for block in order if jobs[block] is not None]
    footprint = set()
    if vcmd is not None:
        golden_window = va.image.copy()
        execute(vcmd, MemoryWindow(va.origin, golden_window), lanes=L)
    if copy is not None:
        src, dst, length = copy
        data = bench.rng.randbytes(length)
        bench.ram.mem.write(src, data)
        footprint |= set(range(dst, dst + length))
    before = bench.ram.snapshot()
    if gemm is not None:
        await ma.write_command(gemm[0])
    if vcmd is not None:
        await va.write_command(vcmd)
    if copy is not None:
        mig = bench.block_regs("migrate")
        for name, value in (("SRC", src), ("DST", dst)):
            await mig.write(f"{name}_LO", value & 0xFFFFFFFF)
            await mig.write(f"{name}_HI", value >> 32)
        await mig.write("LENGTH", length)
    started = bench.now()
    for block in order:
        await bench.block_regs(block).write("START", 1)
    for block in order:
        await _wait_done(bench.block_regs(block), f"{label}: {block}", max_cycles, bench)
    cycles = {}
    for block in order:
        regs = bench.block_regs(block)
        lo = await regs.read("CTR_LO")
        hi = await regs.read("CTR_HI")
        cycles[block] = (hi << 32 | lo) - started
    if gemm is not None:
        cmd, expected_c = gemm
        got = ma.fetch(cmd.c_addr, cmd.m, cmd.n, expected_c.dtype, cmd.ldc)
        assert np.array_equal(got, expected_c), f"{label}: C differs from golden.ma ({cmd})"
        footprint |= set(ma._c_footprint(cmd))
    if vcmd is not None:
        assert np.array_equal(va.window_bytes(), golden_window), (
            f"{label}: the VA's window differs from golden.va ({vcmd})")
        footprint |= {va.origin + i for i in np.nonzero(golden_window != va.image)[0]}
        va.image = golden_window
    if copy is not None:
        assert bytes(bench.ram.mem.read(dst, length)) == data, f"{label}: the copy differs"
    stray = [x for x in bench.ram.changed_bytes(before) if x not in footprint]
    assert not stray, f"{label}: {len(stray)} bytes changed outside the results"
    assert not bench.ram.violations, "\n".join(bench.ram.violations)
    return cycles


@cocotb.test()
async def all_at_once(dut):
    """Every requester node streams at once: an MA int8 64³ GEMM (class decode), a VA SILU
    of 8192 elements (prefill) and a 64 KiB migrate copy (cache-migrate) started
    back to back; each result is checked (C against golden.ma, the VA's window against
    golden.va, the copy against its source) and nothing else in memory changed."""
    bench, rng = await new_tile(dut)
    await bench.regs.write_fields("TRAFFIC_CLASS", ma=TrafficClass.DECODE,
                                  va=TrafficClass.PREFILL,
                                  migrate=TrafficClass.CACHE_MIGRATE)
    await bench.ma.set_tat(_wide())
    n = 64
    gemm = _gemm_job(bench.ma, rng, MaMode.INT8, n, n, n)
    vcmd = silu(bench.va, rng, 8192)
    cycles = await _concurrent(bench, "all_at_once", gemm=gemm, vcmd=vcmd,
                               copy=(0x5000_0000, 0x5100_0000, 65536))
    print("PERF all_at_once " + " ".join(f"{k}={v}" for k, v in cycles.items()))


RANDOM_ROUNDS = 4


@cocotb.test()
async def random_traffic(dut):
    """The tile's randomized test (``make soak``'s): rounds of concurrent work under random
    idle and back-pressure cycles on every ``m_axi_gmem`` channel, each node at a random
    traffic class; each round starts, in a random order, a random non-empty subset of an
    MA GEMM (any mode, M, K, N of 1 to 40, C = A·B or C += A·B), a VA command (any opcode,
    1 to 600 elements, through ``tests/va_tb.py``'s command makers) and a migrate copy
    (16 B to 16 KiB at random bus-aligned places); every result bit for bit against the
    golden models, nothing else changed, no AXI rule broken."""
    bench, rng = await new_tile(dut)
    bench.pause(bench.ram.channels(), rng.choice((0.1, 0.3, 0.5)))
    await bench.ma.set_tat(_wide())
    for round_ in range(RANDOM_ROUNDS):
        classes = {block: rng.choice(list(TrafficClass)) for block in ("ma", "va", "migrate")}
        await bench.regs.write_fields("TRAFFIC_CLASS", **classes)
        blocks = [b for b in ("ma", "va", "migrate") if rng.random() < 0.7] or ["va"]
        rng.shuffle(blocks)
        gemm = vcmd = copy = None
        if "ma" in blocks:
            mode = rng.choice(list(MaMode))
            gemm = _gemm_job(bench.ma, rng, mode, *(rng.randrange(1, 41) for _ in range(3)),
                             accumulate=rng.random() < 0.3)
        if "va" in blocks:
            vcmd = any_command(bench.va, rng, rng.choice(RTL_OPCODES), rng.randrange(1, 601))
        if "migrate" in blocks:
            src = 0x5000_0000 + BUS * rng.randrange(4096)
            copy = (src, src + 0x100_0000 + BUS * rng.randrange(4096),
                    BUS * rng.randrange(1, 1025))
        label = f"round {round_} ({', '.join(blocks)}; {classes})"
        cycles = await _concurrent(bench, label, gemm=gemm, vcmd=vcmd, copy=copy,
                                   order=blocks)
        print(f"PERF random_traffic {label}: " + " ".join(f"{k}={v}" for k, v in cycles.items()))


async def _timed(bench, block, cmd, spans=None):
    """Write ``cmd`` to ``block`` ("ma" or "va"), START it, wait for DONE; its cycles:
    the CTR minus the timebase at START's response. ``spans``: a list to append the
    command's (first, end) edges of the memory's timing to."""
    view = getattr(bench, block)
    regs = bench.block_regs(block)
    await view.write_command(cmd)
    await regs.write("START", 1)
    started, edge = bench.now(), bench.ram.timing.edge()
    await _wait_done(regs, block, 200_000, bench)
    lo = await regs.read("CTR_LO")
    hi = await regs.read("CTR_HI")
    cycles = (hi << 32 | lo) - started
    if spans is not None:
        spans.append((edge, edge + cycles))
    return cycles


COPY_SRC, COPY_DST, COPY_LENGTH = 0x5000_0000, 0x5100_0000, 1 << 19


class _ReservedBench:
    """The reserved-command cases' set-up: RESERVE.CLASSES = decode, an MA int8 32³ GEMM
    and a VA SILU of 1000 with their golden results, and a 512 KiB migrate copy to run
    beside them."""

    @classmethod
    async def create(cls, dut):
        self = cls()
        self.bench, rng = await new_tile(dut)
        tile, ma, va = self.bench.regs, self.bench.ma, self.bench.va
        await tile.write_fields("RESERVE", classes=1 << TrafficClass.DECODE)
        await ma.set_tat(_wide())
        a, b = operands(rng, MaMode.INT8, GEMM, GEMM, GEMM)
        self.cmd = Command(mode=MaMode.INT8, m=GEMM, k=GEMM, n=GEMM, a_addr=0x10000,
                           b_addr=0x20000, c_addr=0x40000, lda=GEMM, ldb=GEMM, ldc=4 * GEMM)
        ma.place(a, self.cmd.a_addr, self.cmd.lda)
        ma.place(b, self.cmd.b_addr, self.cmd.ldb)
        self.expected_c = golden_gemm(MaMode.INT8, a, b, None)
        self.vcmd = silu(va, rng, SILU_LENGTH)
        self.golden_window = va.image.copy()
        execute(self.vcmd, MemoryWindow(va.origin, self.golden_window), lanes=L)
        self.data = rng.randbytes(COPY_LENGTH)
        return self

    async def run_both(self, label, spans=None):
        """The GEMM then the SILU, each checked against golden; their cycles."""
        bench, ma, va = self.bench, self.bench.ma, self.bench.va
        ma_cycles = await _timed(bench, "ma", self.cmd, spans)
        got = ma.fetch(self.cmd.c_addr, GEMM, GEMM, np.int32, self.cmd.ldc)
        assert np.array_equal(got, self.expected_c), f"{label}: C differs from golden.ma"
        va_cycles = await _timed(bench, "va", self.vcmd, spans)
        assert np.array_equal(va.window_bytes(), self.golden_window), f"{label}: VA window"
        return ma_cycles, va_cycles

    async def start_copy(self):
        self.bench.ram.mem.write(COPY_SRC, self.data)
        self.mig = self.bench.block_regs("migrate")
        for name, value in (("SRC", COPY_SRC), ("DST", COPY_DST)):
            await self.mig.write(f"{name}_LO", value & 0xFFFFFFFF)
            await self.mig.write(f"{name}_HI", value >> 32)
        await self.mig.write("LENGTH", COPY_LENGTH)
        await self.mig.write("START", 1)
        await self.bench.cycles(300)

    def copy_beats(self, span):
        """The copy's read and write beats on ``m_axi_gmem`` in ``span`` (edges): read
        beats by their data's first edge, write bursts by their last W beat's."""
        ram, (first, end) = self.bench.ram, span
        rd = sum(b.beats for b in ram.reads if COPY_SRC <= b.addr < COPY_SRC + COPY_LENGTH
                 and first <= b.edge + ram.read_latency < end)
        wr = sum(b.beats for b in ram.writes if COPY_DST <= b.addr < COPY_DST + COPY_LENGTH
                 and first <= b.edge < end)
        return rd, wr

    async def check_copy(self):
        """The copy still runs; what it wrote so far is the source's."""
        assert (await self.mig.read_fields("STATUS"))["BUSY"], "the copy ended before the last run"
        ram = self.bench.ram
        written = [w for w in ram.writes if COPY_DST <= w.addr < COPY_DST + COPY_LENGTH]
        assert written, "the copy wrote nothing"
        for w in written:
            n, at = w.beats * BUS, w.addr - COPY_DST
            assert bytes(ram.mem.read(w.addr, n)) == self.data[at: at + n], \
                f"the copy's burst at {w.addr:#x} differs from its source"
        assert not ram.violations, "\n".join(ram.violations)

    async def counters(self):
        return {name: await self.bench.regs.read(name)
                for name in ("RSV_STARTS", "RSV_LATE", "RSV_DRAIN_MAX")}


@cocotb.test()
async def reserved_commands(dut):
    """RESERVE.CLASSES = decode: an MA int8 32³ GEMM and a VA SILU of 1000 take the same
    cycles with a long migrate copy running as on an idle tile (three runs each), their
    results bit for bit (C against golden.ma, the VA's window against golden.va); no
    guard ends late, RSV_STARTS counts them; the copy runs on between them, and every
    burst it wrote is the source's. Then, unreserved, the same GEMM beside the copy (its
    cycles printed: the background's effect)."""
    rsv = await _ReservedBench.create(dut)
    guard = await rsv.bench.regs.read("RSV_GUARD")
    quiet = await rsv.run_both("idle tile")
    await rsv.start_copy()
    loaded = [await rsv.run_both(f"beside the copy, run {k}") for k in range(3)]
    counters = await rsv.counters()
    await rsv.bench.regs.write_fields("RESERVE", classes=0)
    unreserved = [await _timed(rsv.bench, "ma", rsv.cmd) for _ in range(2)]
    await rsv.check_copy()
    print(f"PERF reserved_commands guard {guard}: MA 32³ {quiet[0]} idle, "
          f"{[c[0] for c in loaded]} beside the copy; VA SILU {quiet[1]} idle, "
          f"{[c[1] for c in loaded]} beside the copy; unreserved MA beside the copy "
          f"{unreserved}; {counters}")
    _check_reserved(quiet, loaded, counters, guard)



def _check_reserved(quiet, loaded, counters, guard):
    """Every run beside the copy took the idle tile's cycles, the eight reserved STARTs
    had no guard late, and no drain outlasted the guard."""
    assert all(c == quiet for c in loaded), f"reserved cycles moved: {quiet} idle, {loaded}"
    assert counters["RSV_STARTS"] == 8 and counters["RSV_LATE"] == 0, counters
    assert counters["RSV_DRAIN_MAX"] <= guard, counters

SHARE = (128, 384)      # reserved_sharing's RSV_SHARE: RESERVED, BACKGROUND cycles
SHARE_GOAL = 0.25       # the copy's least share of each channel in a reserved command


@cocotb.test()
async def reserved_sharing(dut):
    """``reserved_commands`` with RSV_SHARE = :data:`SHARE` (time-division sharing
    inside a reserved command): the GEMM and the SILU take the same cycles beside the
    copy as on the idle tile (three runs each), bit for bit, no guard late (the START's
    nor any between phases), and in each run of each command the copy's read beats and
    its write beats on ``m_axi_gmem`` are each at least :data:`SHARE_GOAL` of the
    command's cycles. RSV_SHARE = 0 afterwards gives the unshared cycles back."""
    rsv = await _ReservedBench.create(dut)
    tile = rsv.bench.regs
    guard = await tile.read("RSV_GUARD")
    await tile.write_fields("RSV_SHARE", reserved=SHARE[0], background=SHARE[1])
    quiet = await rsv.run_both("idle tile, shared")
    await rsv.start_copy()
    spans = []
    loaded = [await rsv.run_both(f"beside the copy, shared, run {k}", spans)
              for k in range(3)]
    counters = await rsv.counters()
    await tile.write("RSV_SHARE", 0)
    unshared = await rsv.run_both("beside the copy, unshared")
    await rsv.check_copy()
    shares = []
    for first, end in spans:
        rd, wr = rsv.copy_beats((first, end))
        shares.append((rd / (end - first), wr / (end - first)))
    print(f"PERF reserved_sharing guard {guard} share {SHARE}: MA 32³ {quiet[0]} idle, "
          f"{[c[0] for c in loaded]} beside the copy, {unshared[0]} unshared; VA SILU "
          f"{quiet[1]} idle, {[c[1] for c in loaded]} beside the copy, {unshared[1]} "
          f"unshared; the copy's read / write share in each command "
          f"{[(round(r, 3), round(w, 3)) for r, w in shares]}; {counters}")
    _check_reserved(quiet, loaded, counters, guard)
    assert min(min(r, w) for r, w in shares) >= SHARE_GOAL, shares
    assert unshared[0] < quiet[0] and unshared[1] < quiet[1], (unshared, quiet)


@cocotb.test()
async def icarus_smoke(dut):
    """Icarus (about a cycle a second on this design): the tile's and the VA's ID, and a
    SILU of 16 elements through the VA, its output against golden.va, with as few
    register accesses as it takes."""
    rng = test_seed()
    bench = TileBench(dut, p=P, lanes=L, rng=rng, latency=LATENCY, va_window=(0x7F00_0000_0000, 4096))

    async def identity_only():
        assert (await bench.regs.read_fields("ID"))["BLOCK"] == BlockId.TILE
        assert (await bench.block_regs("va").read_fields("ID"))["BLOCK"] == BlockId.VA
    bench.check_identity = identity_only
    await bench.start()
    dut._log.info("identity read")
    va = bench.va
    cmd = silu(va, rng, 16)
    golden = va.image.copy()
    execute(cmd, MemoryWindow(va.origin, golden), lanes=L)
    regs = bench.block_regs("va")
    await regs.write_fields("OPCODE", op=cmd.op, esize=cmd.esize)
    await regs.write("LENGTH", cmd.length)
    await regs.write("SRC_LO", cmd.src & 0xFFFFFFFF)
    await regs.write("SRC_HI", cmd.src >> 32)
    await regs.write("DST_LO", cmd.dst & 0xFFFFFFFF)
    await regs.write("DST_HI", cmd.dst >> 32)
    await regs.write("START", 1)
    dut._log.info("SILU started")
    await _wait_done(regs, "SILU", 5000, bench)
    assert np.array_equal(va.window_bytes(), golden), "the VA's window differs from golden.va"


@cocotb.test()
async def standalone_ma(dut):
    """The ``ma_gemm`` commands on the standalone ``v4hw_ma`` (P=4), same latency."""
    rng = test_seed()
    bench = MaBench(dut, p=P, rng=rng, latency=LATENCY)
    await bench.start()
    await run_gemms(bench, rng, "standalone")


@cocotb.test()
async def standalone_va(dut):
    """The ``va_silu`` SILU on the standalone ``v4hw_va`` (L=8), same latency and window."""
    rng = test_seed()
    bench = VaBench(dut, lanes=L, data_width=8 * BUS, rng=rng, latency=LATENCY,
                    window=(0x7F00_0000_0000, 1 << 18))
    await bench.start()
    await run_silu(bench, rng, "standalone")


@cocotb.test()
async def stream_standalone(dut):
    """``stream_tile`` on the standalone tops: the MA's GEMM on ``v4hw_ma`` or the VA's
    commands on ``v4hw_va``, whichever ``dut`` is."""
    rng = test_seed()
    if dut._name == "v4hw_ma":
        bench = MaBench(dut, p=P, rng=rng, latency=LATENCY)
        await bench.start()
        await bench.set_tat(_wide())
        n = STREAM_GEMM
        a, b = operands(rng, MaMode.INT8, n, n, n)
        outcome = await bench.gemm(MaMode.INT8, a, b, a_addr=0x100000, b_addr=0x200000,
                                   c_addr=0x400000, max_cycles=2_000_000)
        print(f"PERF standalone ma_int8_{n}x{n}x{n} {outcome.cycles}")
        return
    bench = VaBench(dut, lanes=L, data_width=8 * BUS, rng=rng, latency=LATENCY,
                    window=STREAM_WINDOW)
    await bench.start()
    await run_silu(bench, rng, "standalone", STREAM_LENGTH)
    cmd = silu(bench, rng, STREAM_LENGTH)
    add = VaCommand(VaOpcode.ADD, STREAM_LENGTH, src=cmd.src, src2=cmd.dst, dst=cmd.dst)
    outcome = await bench.check(add)
    print(f"PERF standalone va_add_{STREAM_LENGTH} {outcome.cycles}")

