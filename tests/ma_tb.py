"""cocotb tests of the ``v4hw_ma`` top (P from V4HW_MA_P: 8 on Verilator, 4 on Icarus; DATA_WIDTH=128).

``tests/test_ma_cocotb.py`` runs each test below on both simulators. Every test builds a
:class:`sim.ma_driver.MaBench`, draws all its random choices from
:func:`sim.seed.test_seed` (``V4HW_SEED=<n>`` reruns a case), and every command goes
through ``MaBench.gemm``, which checks the outcome code and ERR_ADDR, C against the golden
model bit for bit, and that no byte outside C's rows changed. Icarus is about ten times
slower, so shapes and counts are smaller there (``ICARUS``).
"""

import os

import cocotb
import numpy as np

from golden.ma import TatEntry, unpack_matrix
from golden.ma import gemm as golden_gemm
from golden.ma_latency import MaCommand, ma_cycles
from hdl.common.axi import AxiResp
from hdl.top.ma import MA_VERSION
from sim import perf
from sim.bfm import PAGE, ErrorRange
from sim.ma_driver import Command, MaBench, b_transposed, c_dtype, element_size
from sim.seed import test_seed
from spec.codes import MA_MODE_B_T, MA_MODE_BF16, ErrorCode, MaMode

ICARUS = cocotb.SIM_NAME.lower().startswith("icarus")
P = int(os.environ.get("V4HW_MA_P", "8"))      # the DUT's P (tests/test_ma_cocotb.py)
BUS_BYTES = 16
INT8, BF16 = MaMode.INT8, MaMode.BF16
INT8_BT, BF16_BT = MaMode.INT8_BT, MaMode.BF16_BT      # B stored as N rows of K
# The default TAT: logical [0, 2 GiB) on a physical base with bits 47:32 set.
HIGH = 0xBEEF_8000_0000
WIDE = [TatEntry(True, 0, 19, HIGH)]

BF16_SPECIALS = np.array([
    0x0000, 0x8000,                  # ±0
    0x7F80, 0xFF80,                  # ±inf
    0x7FC0, 0xFFC0, 0x7F81, 0xFFFF,  # NaNs (quiet, signalling, negative)
    0x0001, 0x807F, 0x0040, 0x8011,  # subnormals: read as zero
    0x0080, 0x8080,                  # smallest normals
    0x7F7F, 0xFF7F, 0x7F00, 0x7E80,  # huge: products and sums overflow
    0x1F80, 0x9F80, 0x2000,          # 2^-64, -2^-64, 2^-63: products underflow
    0x3F80, 0xBF80, 0x4000, 0x3F00,  # ±1, 2, 0.5
], dtype=np.uint16)
F32_SPECIALS = np.array([
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
    0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000,
], dtype=np.uint32)


# --- Helpers -------------------------------------------------------------------------------

async def new_bench(dut, **kwargs):
    """Seeded rng, a started bench with the WIDE TAT."""
    rng = test_seed()
    bench = MaBench(dut, p=P, rng=rng, **kwargs)
    await bench.start()
    await bench.set_tat(WIDE)
    return bench, rng


def nprng(rng):
    return np.random.default_rng(rng.getrandbits(64))


def rand_int8(rng, rows, cols):
    return np.frombuffer(rng.randbytes(rows * cols), np.int8).reshape(rows, cols).copy()


def rand_bf16(rng, rows, cols, wild=0.05):
    """Mostly moderate values (exponent 2^-8..2^8, both signs), a fraction ``wild`` of
    arbitrary bit patterns (specials included)."""
    g = nprng(rng)
    sign = g.integers(0, 2, (rows, cols)) << 15
    exponent = g.integers(127 - 8, 127 + 9, (rows, cols)) << 7
    value = (sign | exponent | g.integers(0, 128, (rows, cols))).astype(np.uint16)
    wild_bits = g.integers(0, 1 << 16, (rows, cols)).astype(np.uint16)
    return np.where(g.random((rows, cols)) < wild, wild_bits, value).astype(np.uint16)


def rand_operands(rng, mode, m, k, n):
    """A (M×K) and B as stored: K×N, or N×K when ``mode`` has B transposed."""
    if mode & MA_MODE_BF16:
        a, b = rand_bf16(rng, m, k), rand_bf16(rng, k, n)
    else:
        a, b = rand_int8(rng, m, k), rand_int8(rng, k, n)
    return a, (b.T.copy() if b_transposed(mode) else b)


def round_up(x, unit):
    return -(-x // unit) * unit


def layout(rng, mode, m, k, n, *, base=0x40000, gap=True, min_pad=0):
    """Random addresses and strides for A, B, C one after the other from ``base``.
    ``gap``: strides larger than a row by a random amount (at least ``min_pad`` bytes).
    With B transposed (``mode`` bit 1) B is N rows of K."""
    es = element_size(mode)
    b_count, b_length = (n, k) if b_transposed(mode) else (k, n)

    def stride(row, unit):
        pad = max(min_pad, unit * rng.randrange(0, 9)) if gap else 0
        return round_up(row + pad, unit)

    lda, ldb, ldc = stride(k * es, es), stride(b_length * es, es), stride(n * 4, 4)
    a_addr = base + es * rng.randrange(0, 40)
    b_addr = round_up(a_addr + m * lda + 32 + rng.randrange(0, 200), es)
    c_addr = round_up(b_addr + b_count * ldb + 32 + rng.randrange(0, 200), 4)
    return dict(a_addr=a_addr, b_addr=b_addr, c_addr=c_addr, lda=lda, ldb=ldb, ldc=ldc)


RANDOM_LIMIT = P + 3 if ICARUS else 20
"""Largest M, K, N of a random command without a given shape (the one after every error
case): still more than one tile of P rows and columns."""


async def random_gemm(bench, rng, mode=None, shape=None, *, accumulate=None, wait=None,
                      base=0x40000, **kwargs):
    """One random command on the current TAT; returns the Outcome."""
    mode = rng.choice((INT8, BF16)) if mode is None else mode
    m, k, n = shape or tuple(rng.randint(1, RANDOM_LIMIT) for _ in range(3))
    a, b = rand_operands(rng, mode, m, k, n)
    accumulate = rng.random() < 0.4 if accumulate is None else accumulate
    wait = rng.choice(("poll", "interrupt")) if wait is None else wait
    where = layout(rng, mode, m, k, n, base=base)
    where.update(kwargs)
    bench.dut._log.info("%s M=%d K=%d N=%d%s, wait by %s", mode.name, m, k, n,
                        " ACCUMULATE" if accumulate else "", wait)
    return await bench.gemm(mode, a, b, accumulate=accumulate, wait=wait, **where)


async def good_command(bench, rng):
    """After an error: a valid TAT and a small random command must just work."""
    await bench.set_tat(WIDE)
    bench.ram.error_ranges.clear()
    outcome = await random_gemm(bench, rng)
    assert outcome.done, outcome


def shapes(rng, count, limit):
    """Random shapes in 1..limit, always including 1×1×1 and non-multiples of P."""
    fixed = [(1, 1, 1), (P + 1, 2 * P - 1, 3), (3, P, 2 * P + 5)]
    out = fixed + [tuple(rng.randint(1, limit) for _ in range(3))
                   for _ in range(count - len(fixed))]
    return [tuple(min(x, limit) for x in shape) for shape in out]


# --- Registers -----------------------------------------------------------------------------

RW_REGISTERS = ("IRQ_ENABLE", "MODE", "A_ADDR", "B_ADDR", "C_ADDR", "LDA", "LDB", "LDC",
                "M", "K", "N") + tuple(f"TAT_{kind}_{i}" for i in range(4)
                                       for kind in ("LOGIC", "PHYS_LO", "PHYS_HI"))
RO_REGISTERS = ("ID", "CAPS", "STATUS", "ERROR", "ERR_ADDR", "TIME_LO", "TIME_HI",
                "CTR_LO", "CTR_HI")


def field_mask(regs, name):
    mask = 0
    for desc in regs.register(name)["fields"]:
        mask |= ((1 << desc["width"]) - 1) << desc["lsb"]
    return mask


@cocotb.test()
async def registers(dut):
    """ID/CAPS; reset values; RW read-back and byte strobes (with an unaligned AW);
    bits 1:0 of the address ignored; unmapped offsets answer SLVERR and change nothing;
    writes to RO registers are ignored; a read of START returns 0 and starts nothing."""
    rng = test_seed()
    bench = MaBench(dut, p=P, rng=rng)
    await bench.start()
    regs = bench.regs
    ident = await regs.read_fields("ID")
    assert ident == {"VERSION": MA_VERSION, "BLOCK": 0x4D41}, ident
    for name in RW_REGISTERS + ("STATUS", "ERROR", "ERR_ADDR", "IRQ_STATUS", "CTR_LO"):
        assert await regs.read(name) == 0, f"{name} is not 0 after reset"

    values = {}
    for name in RW_REGISTERS:
        values[name] = rng.getrandbits(32) & field_mask(regs, name)
        await regs.write(name, values[name])
    for name in RW_REGISTERS:
        assert await regs.read(name) == values[name], f"{name} does not read back"

    # Byte strobes: one byte at a time, the address's low bits pointing at that byte.
    for name in ("A_ADDR", "LDC", "TAT_PHYS_LO_2"):
        for byte in range(4):
            new = rng.getrandbits(8)
            assert await regs.write_bytes(name, bytes([new]), byte) == AxiResp.OKAY
            mask = field_mask(regs, name) & (0xFF << 8 * byte)
            values[name] = (values[name] & ~mask) | ((new << 8 * byte) & mask)
            assert await regs.read(name) == values[name], f"{name}: byte {byte} strobe"
    # A read with address bits 1:0 set reads the same register (cocotbext picks the lane).
    for byte in range(1, 4):
        response = await bench.axil.read(regs.offset("B_ADDR") + byte, 1)
        assert response.data[0] == (values["B_ADDR"] >> 8 * byte) & 0xFF

    # Unmapped offsets: SLVERR, nothing changes.
    holes = {regs.unmapped_offset(), 0x001C, 0x003C, 0x0048, 0x103C, 0x1040, 0x2018,
             0x3000, 0xFFFC}
    for offset in sorted(holes):
        value, resp = await regs.read_resp(offset)
        assert resp == AxiResp.SLVERR and value == 0, (offset, value, resp)
        assert await regs.write_resp(offset, 0xFFFFFFFF) == AxiResp.SLVERR, hex(offset)
    for name in RW_REGISTERS:
        assert await regs.read(name) == values[name], f"{name} changed by an unmapped write"

    # Read-only registers ignore writes (OKAY).
    before = {name: await regs.read(name) for name in ("ID", "CAPS", "STATUS", "ERROR",
                                                       "ERR_ADDR", "CTR_LO", "CTR_HI")}
    for name in RO_REGISTERS:
        assert await regs.write_resp(name, 0xFFFFFFFF) == AxiResp.OKAY, name
    for name, value in before.items():
        assert await regs.read(name) == value, f"a write changed read-only {name}"
    # START is write-only: reads 0 and a read starts nothing.
    assert await regs.read("START") == 0
    await bench.cycles(5)
    assert await regs.read("STATUS") == 0


# --- Arithmetic ----------------------------------------------------------------------------

@cocotb.test()
async def gemm_random(dut):
    """Random shapes (1×1×1, non-multiples of P, up to 128 on Verilator), both modes,
    random ACCUMULATE, strides, alignments and waiting (poll or interrupt)."""
    bench, rng = await new_bench(dut)
    count, limit = (10, 24) if ICARUS else (16, 128)
    for shape in shapes(rng, count, limit):
        outcome = await random_gemm(bench, rng, shape=shape)
        assert outcome.done
        dut._log.info("M, K, N = %s: %d cycles", shape, outcome.cycles)


@cocotb.test()
async def gemm_large(dut):
    """Full-size operands: a 128×128×128 tile per mode on Verilator, then the same
    operands and addresses with B transposed (MODE bit 1, B stored as its transpose);
    on Icarus K=128 with small M and N. Each command's cycles are logged beside the
    latency model's."""
    bench, rng = await new_bench(dut)
    shape = (6, 128, 5) if ICARUS else (128, 128, 128)    # Icarus: 2 × 2 ragged tiles at P=4
    jobs = []
    for mode in (INT8, BF16):
        # random_gemm's draws, kept for the transposed run below
        a, b = rand_operands(rng, mode, *shape)
        wait = rng.choice(("poll", "interrupt"))
        where = layout(rng, mode, *shape)
        outcome = await bench.gemm(mode, a, b, wait=wait, **where)
        log_cycles(bench, mode, shape, where, outcome)
        perf.check(f"ma.gemm_large.{mode.name}.{'x'.join(map(str, shape))}", outcome.cycles)
        jobs.append((mode, a, b, wait, where))
    if not ICARUS:
        outcome = await random_gemm(bench, rng, BF16, (128, 128, 128), accumulate=True)
        perf.check("ma.gemm_large.BF16.128x128x128.accumulate", outcome.cycles)
    for mode, a, b, wait, where in jobs:
        mode = MaMode(mode | MA_MODE_B_T)
        m, k, n = shape
        if m != k or k != n:     # B's rows change length: a layout of its own
            where = layout(rng, mode, *shape)
        outcome = await bench.gemm(mode, a, b.T.copy(), wait=wait, **where)
        log_cycles(bench, mode, shape, where, outcome)
        perf.check(f"ma.gemm_large.{mode.name}.{'x'.join(map(str, shape))}", outcome.cycles)


def log_cycles(bench, mode, shape, where, outcome):
    """Log a command's cycles and golden.ma_latency's prediction for it."""
    m, k, n = shape
    model = ma_cycles(MaCommand(m=m, k=k, n=n, bf16=bool(mode & MA_MODE_BF16),
                                b_transposed=b_transposed(mode), **where),
                      p=P, data_width=8 * BUS_BYTES, latency=bench.ram.read_latency)
    bench.dut._log.info("%s %s: %d cycles, latency model %d", mode.name, shape,
                        outcome.cycles, model)


@cocotb.test()
async def int8_extremes(dut):
    """All −128 (the largest products, sums 2^21 at K=128), −128 × 127, and ACCUMULATE
    onto values near ±2^31 so that int32 sums wrap."""
    bench, rng = await new_bench(dut)
    m, n = (5, 9) if ICARUS else (40, 33)
    k = 128
    low = np.full((m, k), -128, np.int8)
    for b in (np.full((k, n), -128, np.int8), np.full((k, n), 127, np.int8)):
        await bench.gemm(INT8, low, b, **layout(rng, INT8, m, k, n))
    c = np.array(nprng(rng).choice([2**31 - 1, -2**31, 2**31 - 2**20, -5], (m, n)),
                 np.int32)
    await bench.gemm(INT8, low, np.full((k, n), -128, np.int8), c, accumulate=True,
                     **layout(rng, INT8, m, k, n))
    await bench.gemm(INT8, np.full((m, k), 127, np.int8), np.full((k, n), 127, np.int8), c,
                     accumulate=True, **layout(rng, INT8, m, k, n))


@cocotb.test()
async def bf16_special_values(dut):
    """bf16 operands drawn from ±0, ±inf, NaNs, subnormals, huge and tiny values (so
    products and sums overflow to inf, underflow to subnormal and flush, and inf − inf
    gives NaN), plus ACCUMULATE onto special binary32 values."""
    bench, rng = await new_bench(dut)
    g = nprng(rng)
    m, k, n = (6, 12, 10) if ICARUS else (24, 40, 30)
    for accumulate in (False, True):
        for mix in (1.0, 0.3):
            a = np.where(g.random((m, k)) < mix, g.choice(BF16_SPECIALS, (m, k)),
                         rand_bf16(rng, m, k)).astype(np.uint16)
            b = np.where(g.random((k, n)) < mix, g.choice(BF16_SPECIALS, (k, n)),
                         rand_bf16(rng, k, n)).astype(np.uint16)
            c = g.choice(F32_SPECIALS, (m, n)).astype(np.uint32)
            await bench.gemm(BF16, a, b, c, accumulate=accumulate,
                             **layout(rng, BF16, m, k, n))
    # One column of huge values: every partial sum overflows, +inf and -inf meet.
    a = np.full((m, k), 0x7F7F, np.uint16)
    b = np.where(np.arange(k)[:, None] % 2 == 0, 0x7F7F, 0xFF7F).repeat(n, 1).astype(np.uint16)
    await bench.gemm(BF16, a, b, **layout(rng, BF16, m, k, n))


@cocotb.test()
async def accumulate_chain(dut):
    """ACCUMULATE in both modes: C += A·B twice on the same C (the second command reads
    what the first wrote), with C tiles that straddle P columns."""
    bench, rng = await new_bench(dut)
    m, k, n = (P + 3, 7, 2 * P + 1) if ICARUS else (50, 77, 61)
    for mode in (INT8, BF16):
        a, b = rand_operands(rng, mode, m, k, n)
        where = layout(rng, mode, m, k, n)
        c_dtype = np.uint32 if mode == BF16 else np.int32
        c = np.frombuffer(rng.randbytes(4 * m * n), c_dtype).reshape(m, n)
        if mode == BF16:  # keep the old C finite and moderate so the sums mean something
            c = (c & np.uint32(0x807FFFFF)) | np.uint32(0x3F000000)
        await bench.gemm(mode, a, b, c, accumulate=True, **where)
        c1 = golden_gemm(mode, a, b, c)
        await bench.gemm(mode, a, b, c1, accumulate=True, place=False, **where)


@cocotb.test()
async def mode_switch(dut):
    """Back-to-back tiles alternating int8 and bf16 (and ACCUMULATE on and off) are all
    right, and a mode change costs at most one cycle: the same command takes at most one
    cycle more after a command of the other mode than after one of its own."""
    bench, rng = await new_bench(dut)
    m, k, n = (9, 11, 10) if ICARUS else (33, 40, 27)
    jobs = {}
    for mode in (INT8, BF16):
        a, b = rand_operands(rng, mode, m, k, n)
        jobs[mode] = (a, b, layout(rng, mode, m, k, n, base=0x40000 if mode == INT8
                                   else 0x80000))
    cycles = {}
    sequence = [INT8, INT8, BF16, BF16, INT8, BF16, INT8]
    previous = None
    for mode in sequence:
        a, b, where = jobs[mode]
        outcome = await bench.gemm(mode, a, b, **where)
        cycles.setdefault((previous == mode, mode), []).append(outcome.cycles)
        previous = mode
    for accumulate in (True, False, True):
        mode = rng.choice((INT8, BF16))
        await random_gemm(bench, rng, mode, (m, k, n), accumulate=accumulate)
    for mode in (INT8, BF16):
        same = max(cycles[(True, mode)])
        for switched in cycles[(False, mode)][1:] if mode == INT8 else cycles[(False, mode)]:
            assert switched <= same + 1, (
                f"{mode.name} after the other mode took {switched} cycles, "
                f"after {mode.name} {same}")


@cocotb.test()
async def strides(dut):
    """Row strides of 0 (every row of A is the same memory), smaller than a row (rows
    of B overlap) and of megabytes (rows of A and C far apart, each on its own page)."""
    bench, rng = await new_bench(dut)
    m, k, n = (P + 2, 13, P + 3) if ICARUS else (3 * P + 1, 45, 2 * P + 7)
    for mode in (INT8, BF16):
        es = element_size(mode)
        g = nprng(rng)
        # A: one row in memory, LDA = 0.
        a_addr, b_addr, c_addr = 0x0030_0000 + es, 0x0031_0000 + 3 * es, 0x0032_0000 + 4
        row = rand_operands(rng, mode, 1, k, 1)[0]
        a = np.repeat(row, m, axis=0)
        # B: rows overlap by all but 3 elements: build the bytes, read B back from them.
        ldb = 3 * es
        span = (k - 1) * ldb + n * es
        image = bytes(g.integers(0, 256, span, dtype=np.uint8))
        if mode == BF16:  # keep the overlapped values moderate: clear the exponent's top
            image = bytes(x & 0xBF if i % 2 else x for i, x in enumerate(image))
        b = unpack_matrix(image, k, n, np.uint16 if mode == BF16 else np.int8, ldb)
        bench.place(row, a_addr, k * es)
        bench.write_logical(b_addr, image)
        await bench.gemm(mode, a, b, a_addr=a_addr, lda=0, b_addr=b_addr, ldb=ldb,
                         c_addr=c_addr, place=False)
        # Megabyte strides: every row of A and C in its own far-away page.
        a, b = rand_operands(rng, mode, m, k, n)
        await bench.gemm(mode, a, b, a_addr=0x0100_0000 + 6 * es, lda=0x0010_0000 + 2 * es,
                         b_addr=0x0040_0000, c_addr=0x1000_0000 + 8, ldc=0x0020_0004,
                         accumulate=True)


# --- B transposed (MODE bit 1) ---------------------------------------------------------

@cocotb.test()
async def b_transposed_random(dut):
    """MODE bit 1, B stored as N rows of K (C = A·Bᵀ, q·Kᵀ), int8 and bf16: random shapes
    (1×1×1, non-multiples of P, up to 128 on Verilator), strides, alignments, ACCUMULATE
    (and an accumulate chain), each followed by a plain-B command of the same shape;
    bf16 special values; rows of Bᵀ that overlap (LDB smaller than a row, and 0)."""
    bench, rng = await new_bench(dut)
    count, limit = (5, 20) if ICARUS else (12, 128)
    for shape in shapes(rng, count, limit):
        mode = rng.choice((INT8_BT, BF16_BT))
        outcome = await random_gemm(bench, rng, mode, shape)
        plain = await random_gemm(bench, rng, MaMode(mode & MA_MODE_BF16), shape)
        dut._log.info("M, K, N = %s: %s %d cycles, %s %d", shape, mode.name, outcome.cycles,
                      MaMode(mode & MA_MODE_BF16).name, plain.cycles)

    # ACCUMULATE twice onto the same C (the second reads what the first wrote).
    m, k, n = (P + 3, 7, 2 * P + 1) if ICARUS else (50, 77, 61)
    for mode in (INT8_BT, BF16_BT):
        a, b = rand_operands(rng, mode, m, k, n)
        where = layout(rng, mode, m, k, n)
        c = np.frombuffer(rng.randbytes(4 * m * n), c_dtype(mode)).reshape(m, n)
        if mode & MA_MODE_BF16:
            c = (c & np.uint32(0x807FFFFF)) | np.uint32(0x3F000000)
        await bench.gemm(mode, a, b, c, accumulate=True, **where)
        c1 = golden_gemm(mode, a, b, c)
        await bench.gemm(mode, a, b, c1, accumulate=True, place=False, **where)

    # bf16 specials in A and Bᵀ, onto special old C.
    g = nprng(rng)
    m, k, n = (6, 12, 10) if ICARUS else (24, 40, 30)
    a = np.where(g.random((m, k)) < 0.3, g.choice(BF16_SPECIALS, (m, k)),
                 rand_bf16(rng, m, k)).astype(np.uint16)
    bt = np.where(g.random((n, k)) < 0.3, g.choice(BF16_SPECIALS, (n, k)),
                  rand_bf16(rng, n, k)).astype(np.uint16)
    c = g.choice(F32_SPECIALS, (m, n)).astype(np.uint32)
    await bench.gemm(BF16_BT, a, bt, c, accumulate=True, **layout(rng, BF16_BT, m, k, n))

    # Overlapping rows of Bᵀ: LDB of 3 elements, then 0 (every column of C the same).
    m, k, n = (P + 2, 13, P + 3) if ICARUS else (3 * P + 1, 45, 2 * P + 7)
    for mode in (INT8_BT, BF16_BT):
        es = element_size(mode)
        a = rand_operands(rng, mode, m, k, 1)[0]
        a_addr, b_addr, c_addr = 0x0030_0000 + es, 0x0031_0000 + 3 * es, 0x0032_0000 + 4
        for ldb in (3 * es, 0):
            span = (n - 1) * ldb + k * es
            image = bytes(g.integers(0, 256, span, dtype=np.uint8))
            if mode & MA_MODE_BF16:   # moderate values: clear the exponent's top bit
                image = bytes(x & 0xBF if i % 2 else x for i, x in enumerate(image))
            bt = unpack_matrix(image, n, k, np.uint16 if mode & MA_MODE_BF16 else np.int8, ldb)
            bench.place(a, a_addr, k * es)
            bench.write_logical(b_addr, image)
            await bench.gemm(mode, a, bt, a_addr=a_addr, b_addr=b_addr, ldb=ldb,
                             c_addr=c_addr, place=False)


@cocotb.test()
async def b_transposed_errors(dut):
    """The checks with B transposed: BF16_BT with an odd B_ADDR or LDB is MISALIGNED
    (INT8_BT accepts them); the walk covers Bᵀ's N rows of LDB (a TAT that maps K rows
    but not N gives TAT_MISS at Bᵀ's first unmapped row, and a B whose K rows miss but
    whose N rows fit runs); a Bᵀ row with a read error stops the command with
    AXI_READ_ERROR at that row, writing nothing."""
    bench, rng = await new_bench(dut)
    m, k, n = 5, 6, 7
    a, bt = rand_operands(rng, BF16_BT, m, k, n)
    where = layout(rng, BF16_BT, m, k, n)
    for case in (dict(b_addr=where["b_addr"] + 1), dict(ldb=where["ldb"] + 1),
                 dict(ldb=where["ldb"] + 3, c_addr=where["c_addr"] + 2)):
        await bench.gemm(BF16_BT, a, bt, expect=ErrorCode.MISALIGNED, **dict(where, **case))
        await good_command(bench, rng)
    a8, bt8 = rand_operands(rng, INT8_BT, m, k, n)
    await bench.gemm(INT8_BT, a8, bt8, a_addr=0x40001, lda=k + 3, b_addr=0x41003, ldb=k + 1,
                     c_addr=0x42004, ldc=4 * n + 4)

    # The TAT maps a 16 KiB region; Bᵀ's rows are 0x100 apart from 5 rows before its end.
    region = 0x0060_0000
    tat = [TatEntry(True, region, 2, 0x0000_5555_0000)]
    for mode, (mm, kk, nn), code in ((BF16_BT, (m, k, 9), ErrorCode.TAT_MISS),
                                     (BF16_BT, (m, 9, 5), None)):
        a, bt = rand_operands(rng, mode, mm, kk, nn)
        await bench.set_tat(tat)
        outcome = await bench.gemm(mode, a, bt, expect=code, a_addr=region + 0x40, lda=kk * 2,
                                   b_addr=region + 0x4000 - 5 * 0x100, ldb=0x100,
                                   c_addr=region + 0x1000, ldc=nn * 4)
        if code is not None:
            assert outcome.err_addr == region + 0x4000, hex(outcome.err_addr)
        await good_command(bench, rng)

    # A read error on row j of Bᵀ.
    for mode in (INT8_BT, BF16_BT):
        es = element_size(mode)
        m, k, n = 2 * P + 3, 20, P + 5
        a, bt = rand_operands(rng, mode, m, k, n)
        where = layout(rng, mode, m, k, n, min_pad=2 * BUS_BYTES)
        row = rng.randrange(n)
        error_range(bench, where["b_addr"] + row * where["ldb"] + es, 1)
        writes = len(bench.ram.writes)
        outcome = await bench.gemm(mode, a, bt, expect=ErrorCode.AXI_READ_ERROR, **where)
        assert outcome.err_addr == where["b_addr"] + row * where["ldb"], hex(outcome.err_addr)
        assert len(bench.ram.writes) == writes, "C was written although Bᵀ failed to load"
        await good_command(bench, rng)


# --- TAT -----------------------------------------------------------------------------------

@cocotb.test()
async def tat_regions(dut):
    """Translation: physical bases with high bits set (up to the top of the 48-bit
    space); regions of 4 KiB, 32 KiB, 512 KiB and a whole matrix; A, B, C in different
    entries; C spanning many 4 KiB pages of one region; a row split between two entries
    mapping far-apart physical pages; overlapping entries where the lowest index wins."""
    bench, rng = await new_bench(dut)
    m, k, n = (10, 24, 12) if ICARUS else (40, 100, 36)

    # A in a 4 KiB page at the top of the physical space, B in 32 KiB, C in 512 KiB with
    # a 4 KiB-plus stride, so that its rows sit on many pages.
    tat = [TatEntry(True, 0x0010_0000, 0, 0xFFFF_FFFF_F000),
           TatEntry(True, 0x0020_0000, 3, 0x8000_0000_8000),
           TatEntry(True, 0x0080_0000, 7, 0x1234_5678_0000)]
    await bench.set_tat(tat)
    for mode in (INT8, BF16):
        es = element_size(mode)
        a, b = rand_operands(rng, mode, min(m, 14), min(k, 64), n)
        mm, kk = a.shape
        await bench.gemm(mode, a, b, accumulate=mode == BF16,
                         a_addr=0x0010_0000 + PAGE - mm * kk * es - 2 * es, lda=kk * es,
                         b_addr=0x0020_0000 + 6 * es, ldb=n * es + 14 * es,
                         c_addr=0x0080_0000 + 0x7C, ldc=PAGE + 4 * rng.randrange(1, 40))

    # One A whose rows cross from one 4 KiB entry into another, mapped far apart.
    es = 2
    a, b = rand_operands(rng, BF16, m, k, n)
    lda = k * es + 2 * rng.randrange(0, 8)
    a_addr = 0x0030_0000 + PAGE - (m // 2) * lda - 2 * rng.randrange(1, k)
    tat = [TatEntry(True, 0x0030_0000, 0, 0x0000_7777_7000),
           TatEntry(True, 0x0030_1000, 0, 0x0000_0100_3000),
           TatEntry(True, 0x0040_0000, 4, 0xAAAA_0000_0000),
           TatEntry(False, 0x0030_0000, 0, 0)]
    await bench.set_tat(tat)
    await bench.gemm(BF16, a, b, a_addr=a_addr, lda=lda, b_addr=0x0040_0000 + 2 * 17,
                     c_addr=0x0040_0000 + 0x8000 + 4 * 9, ldb=n * es, ldc=n * 4 + 12)

    # Overlap: entry 0 remaps one page inside entry 1's region; fill the page entry 1
    # would give with other bytes, so using the wrong entry is a mismatch.
    tat = [TatEntry(True, 0x0050_1000, 0, 0x0000_0DEF_0000),
           TatEntry(True, 0x0050_0000, 4, 0x0000_ABC0_0000)]
    await bench.set_tat(tat)
    bench.ram.mem.write(0x0000_ABC0_1000, rng.randbytes(PAGE))
    a, b = rand_operands(rng, INT8, m, k, n)
    # A starts in entry 0's page and (on Verilator) runs on into entry 1's next page.
    await bench.gemm(INT8, a, b, a_addr=0x0050_1000 + 3, lda=k + 5,
                     b_addr=0x0050_0000 + 16, c_addr=0x0050_4000, ldb=n, ldc=4 * n)

    # A whole 128×128 bf16 matrix (32 KiB) as exactly one region (Verilator).
    if not ICARUS:
        tat = [TatEntry(True, 0x0100_0000, 3, 0x0F00_0000_0000),
               TatEntry(True, 0x0200_0000, 3, 0x0E00_0000_8000),
               TatEntry(True, 0x0400_0000, 4, 0x0D00_0001_0000)]
        await bench.set_tat(tat)
        a, b = rand_operands(rng, BF16, 128, 128, 128)
        await bench.gemm(BF16, a, b, a_addr=0x0100_0000, b_addr=0x0200_0000,
                         c_addr=0x0400_0000)


@cocotb.test()
async def bad_tat(dut):
    """A valid entry with a misaligned logical or physical base, or SIZE > 19, refuses
    the command (BAD_TAT, no memory access), even when the operands do not use it;
    invalid entries are never judged; precedence BAD_COMMAND > BAD_TAT > MISALIGNED."""
    bench, rng = await new_bench(dut)
    m, k, n = 4, 5, 6
    a, b = rand_operands(rng, BF16, m, k, n)
    where = layout(rng, BF16, m, k, n)
    bad_entries = [
        TatEntry(True, 0x4000_1000, 1, 0x2000),         # logical base not 8 KiB aligned
        TatEntry(True, 0x4000_0000, 2, 0xABCD_0000_3000),  # physical base not 16 KiB aligned
        TatEntry(True, 0x4000_0000, 20, 0),            # SIZE 20
        TatEntry(True, 0x0000_0000, 31, 0),            # SIZE 31
        TatEntry(True, 0x0000_0000, 19, 0x7FFF_F000),  # 2 GiB region, physical misaligned
    ]
    for bad in bad_entries:
        await bench.set_tat(WIDE + [TatEntry(False, 0x1234_5000, 7, 0x3000), bad])
        await bench.gemm(BF16, a, b, expect=ErrorCode.BAD_TAT, **where)
        await good_command(bench, rng)
    # Invalid entries with bad fields are ignored.
    await bench.set_tat(WIDE + [TatEntry(False, 0x4000_1000, 31, 0x1000)] * 3)
    await bench.gemm(BF16, a, b, **where)
    # Precedence.
    await bench.set_tat(WIDE + [bad_entries[0]])
    await bench.gemm(BF16, a, b, m=0, expect=ErrorCode.BAD_COMMAND, **where)
    await bench.gemm(BF16, a, b, expect=ErrorCode.BAD_TAT,
                     **dict(where, a_addr=where["a_addr"] + 1))
    await good_command(bench, rng)


@cocotb.test()
async def tat_miss(dut):
    """Operands not covered by the TAT: the command ends with TAT_MISS before any memory
    access; ERR_ADDR is the first unmapped byte of the first failing row (A rows, then B,
    then C): the row's start, or the page where a row leaves mapped memory; rows that run
    past 4 GiB."""
    bench, rng = await new_bench(dut)
    m, k, n = 12, 40, 10
    region = 0x0060_0000
    tat = [TatEntry(True, region, 2, 0x0000_5555_0000)]   # 16 KiB mapped
    for mode in (INT8, BF16):
        es = element_size(mode)
        a, b = rand_operands(rng, mode, m, k, n)
        inside = dict(a_addr=region + 2 * es, b_addr=region + 0x1000 + 4 * es,
                      c_addr=region + 0x2000, lda=k * es, ldb=n * es, ldc=n * 4)
        cases = [
            # A's row 5 runs off the end of the region: the first byte of the next page.
            dict(inside, a_addr=region + 0x4000 - 5 * k * es - k * es // 2, lda=k * es),
            # B's rows start outside: ERR_ADDR = B_ADDR.
            dict(inside, b_addr=region + 0x4000 + 64),
            # C's last row is outside; A and B are fine.
            dict(inside, c_addr=region + 0x4000 - (m - 1) * 64, ldc=64),
            # A and C both miss: A is reported.
            dict(inside, a_addr=region - 2 * es, c_addr=0x10),
        ]
        for where in cases:
            await bench.set_tat(tat)
            await bench.gemm(mode, a, b, expect=ErrorCode.TAT_MISS, **where)
            await good_command(bench, rng)
    # Rows past 4 GiB: the last page of the logical space is mapped; A's rows run off it.
    top = 0xFFFF_F000
    await bench.set_tat(WIDE + [TatEntry(True, top, 0, 0x0000_4444_0000)])
    a, b = rand_operands(rng, INT8, 4, 100, 3)
    await bench.gemm(INT8, a, b, a_addr=top + PAGE - 150, lda=100, b_addr=0x1000,
                     c_addr=0x2000, expect=ErrorCode.TAT_MISS)
    # B's row 1 starts above 4 GiB: its address does not wrap onto the WIDE entry.
    await bench.gemm(INT8, a, b, a_addr=0x3000, lda=100, b_addr=0xFFFF_FFF0, ldb=0x100,
                     c_addr=0x2000, expect=ErrorCode.TAT_MISS)
    await good_command(bench, rng)


# --- Refused commands ----------------------------------------------------------------------

@cocotb.test()
async def bad_shapes(dut):
    """M, K or N of 0, 129 or 0xFFFF are refused with BAD_COMMAND (ERR_ADDR 0, no memory
    access, BUSY never seen), with B transposed too; the next good command works. (Every
    MODE.MODE value is a mode: bit 1 is B transposed.)"""
    bench, rng = await new_bench(dut)
    a, b = rand_operands(rng, INT8, 3, 4, 5)
    where = layout(rng, INT8, 3, 4, 5)
    for override in (dict(m=0), dict(k=0), dict(n=0), dict(m=129), dict(k=129),
                     dict(n=129), dict(m=0xFFFF), dict(m=128, k=128, n=129),
                     dict(k=1000)):
        await bench.gemm(INT8, a, b, expect=ErrorCode.BAD_COMMAND, **override, **where)
    for mode in (INT8_BT, BF16_BT):
        a, b = rand_operands(rng, mode, 3, 4, 5)
        where = layout(rng, mode, 3, 4, 5)
        for override in (dict(n=0), dict(k=129), dict(n=129), dict(m=0xFFFF)):
            await bench.gemm(mode, a, b, expect=ErrorCode.BAD_COMMAND, **override, **where)
    await good_command(bench, rng)


@cocotb.test()
async def misaligned(dut):
    """bf16 with an odd A_ADDR, LDA, B_ADDR or LDB, and either mode with C_ADDR or LDC not
    a multiple of 4: MISALIGNED with ERR_ADDR = the first offending register's value (in
    the order A_ADDR, LDA, B_ADDR, LDB, C_ADDR, LDC); odd int8 addresses are fine."""
    bench, rng = await new_bench(dut)
    m, k, n = 5, 6, 7
    for mode in (INT8, BF16):
        a, b = rand_operands(rng, mode, m, k, n)
        where = layout(rng, mode, m, k, n)
        cases = [dict(c_addr=where["c_addr"] + 2), dict(ldc=where["ldc"] + 1),
                 dict(c_addr=where["c_addr"] + 1, ldc=where["ldc"] + 3)]
        if mode == BF16:
            cases += [dict(a_addr=where["a_addr"] + 1), dict(lda=where["lda"] + 1),
                      dict(b_addr=where["b_addr"] + 1), dict(ldb=where["ldb"] + 3),
                      dict(ldb=where["ldb"] + 1, c_addr=where["c_addr"] + 2),
                      dict(lda=where["lda"] + 1, b_addr=where["b_addr"] + 1)]
        for case in cases:
            await bench.gemm(mode, a, b, expect=ErrorCode.MISALIGNED, **dict(where, **case))
            await good_command(bench, rng)
    a, b = rand_operands(rng, INT8, m, k, n)
    await bench.gemm(INT8, a, b, a_addr=0x40001, lda=k + 3, b_addr=0x41003, ldb=n + 1,
                     c_addr=0x42004, ldc=4 * n + 4)


# --- AXI errors ----------------------------------------------------------------------------

def error_range(bench, logical, nbytes, resp=AxiResp.SLVERR, *, reads=True, writes=True):
    """Make the memory refuse the physical bytes behind ``nbytes`` logical bytes."""
    phys = bench.translate(logical)
    bench.ram.error_ranges[:] = [ErrorRange(phys, phys + nbytes, resp, reads, writes)]


@cocotb.test()
async def axi_read_error(dut):
    """SLVERR/DECERR on reads of B, of A's second block, of the old C (ACCUMULATE), and on
    the second burst of an A row that crosses 4 KiB: AXI_READ_ERROR, ERR_ADDR = the
    logical first byte of the failing burst; a B error writes nothing; C bytes written
    before the error are right; the next good command works."""
    bench, rng = await new_bench(dut)
    m, k, n = 2 * P + 3, 20, P + 5
    for mode in (INT8, BF16):
        es = element_size(mode)
        a, b = rand_operands(rng, mode, m, k, n)
        where = layout(rng, mode, m, k, n, min_pad=2 * BUS_BYTES)
        row = rng.randrange(k)
        error_range(bench, where["b_addr"] + row * where["ldb"] + es, 1)
        writes = len(bench.ram.writes)
        await bench.gemm(mode, a, b, expect=ErrorCode.AXI_READ_ERROR, **where)
        assert len(bench.ram.writes) == writes, "C was written although B failed to load"
        await good_command(bench, rng)

        row = P + rng.randrange(P)
        error_range(bench, where["a_addr"] + row * where["lda"], k * es, AxiResp.DECERR)
        await bench.gemm(mode, a, b, expect=ErrorCode.AXI_READ_ERROR, **where)
        await good_command(bench, rng)

        # The old C of the first tile of the second block of rows: it is read while the
        # results of the first block's last tile are still on their way to memory.
        error_range(bench, where["c_addr"] + (P + rng.randrange(P)) * where["ldc"], 4)
        await bench.gemm(mode, a, b, accumulate=True, expect=ErrorCode.AXI_READ_ERROR,
                         **where)
        await good_command(bench, rng)

    # The second burst of a row: A's row 1 crosses a page; the page after is refused.
    a, b = rand_operands(rng, BF16, 3, 128, 4)
    page = 0x0070_0000
    where = dict(a_addr=page - 256 - 100, lda=256 + 64, b_addr=page + 0x2000,
                 c_addr=page + 0x3000)
    error_range(bench, page, 64)
    await bench.gemm(BF16, a, b, expect=ErrorCode.AXI_READ_ERROR, **where)
    await good_command(bench, rng)


@cocotb.test()
async def axi_write_error(dut):
    """SLVERR on a write of one C row, and on the part of a C row past a 4 KiB boundary:
    AXI_WRITE_ERROR, ERR_ADDR = the logical first byte of the failing burst; every byte
    written is right and inside C; the next good command works."""
    bench, rng = await new_bench(dut)
    m, k, n = 2 * P + 2, 9, 2 * P + 3
    for mode in (INT8, BF16):
        a, b = rand_operands(rng, mode, m, k, n)
        where = layout(rng, mode, m, k, n)
        row = rng.randrange(m)
        error_range(bench, where["c_addr"] + row * where["ldc"] + 4 * rng.randrange(n), 4,
                    reads=False)
        await bench.gemm(mode, a, b, expect=ErrorCode.AXI_WRITE_ERROR,
                         accumulate=rng.random() < 0.5, **where)
        await good_command(bench, rng)
    # C row 2 crosses a page; only the bytes after the boundary are refused.
    a, b = rand_operands(rng, INT8, 4, 5, 6)
    page = 0x0090_0000
    where = dict(a_addr=page + 0x2000, b_addr=page + 0x3000, c_addr=page - 2 * 32 - 8,
                 ldc=32)
    error_range(bench, page, 16)
    await bench.gemm(INT8, a, b, expect=ErrorCode.AXI_WRITE_ERROR, **where)
    await good_command(bench, rng)


# --- Command life cycle --------------------------------------------------------------------

@cocotb.test()
async def start_while_busy(dut):
    """A START while BUSY (after changing the command registers) is ignored: the running
    command's result is the original one, START_DROPPED is set and stays set until the
    next accepted START clears it."""
    bench, rng = await new_bench(dut)
    shape = (2 * P, 30, 2 * P) if ICARUS else (64, 100, 64)
    seen = {}

    async def interfere():
        status = await bench.regs.read_fields("STATUS")
        assert status["BUSY"], f"the command ended too soon to test START while BUSY: {status}"
        await bench.regs.write("M", 1)
        await bench.regs.write_fields("MODE", mode=BF16, accumulate=1)
        await bench.regs.write("A_ADDR", 0x1000)
        await bench.regs.write("START", 1)
        seen.update(await bench.regs.read_fields("STATUS"))

    outcome = await random_gemm(bench, rng, INT8, shape, accumulate=False, wait="poll",
                                during=interfere)
    assert seen["BUSY"] and seen["START_DROPPED"], seen
    assert outcome.status["START_DROPPED"], outcome.status
    outcome = await random_gemm(bench, rng, BF16, (3, 4, 5))
    assert not outcome.status["START_DROPPED"], outcome.status


@cocotb.test()
async def ctr_and_time(dut):
    """TIME_LO/TIME_HI give the timebase (a TIME_LO read latches the high word); CTR_LO
    is read-to-clear and latches CTR_HI, checked across 2^32 by loading the timebase;
    the CTR is the completion time; an accepted START clears an unread CTR."""
    bench, rng = await new_bench(dut)
    regs = bench.regs

    async def time64():
        before = bench.now()
        lo = await regs.read("TIME_LO")
        after = bench.now()
        hi = await regs.read("TIME_HI")
        value = hi << 32 | lo
        assert before < value < after, f"TIME {value} is not between {before} and {after}"
        return value

    await time64()
    # Cross 2^32: the latched TIME_HI changes only with a TIME_LO read.
    await bench.set_timebase((1 << 32) - 40)
    value = await time64()
    assert value < 1 << 32, value
    await bench.cycles(60)
    assert await regs.read("TIME_HI") == 0, "TIME_HI changed without a TIME_LO read"
    assert await time64() > 1 << 32

    # CTR across 2^32: wait on STATUS, not CTR_LO, to read the CTR words by hand.
    a, b = rand_operands(rng, INT8, 8, 16, 8)
    where = layout(rng, INT8, 8, 16, 8)
    bench.place(a, where["a_addr"], where["lda"])
    bench.place(b, where["b_addr"], where["ldb"])
    cmd = Command(INT8, 8, 16, 8, **where)
    expected = golden_gemm(INT8, a, b)
    await bench.set_timebase((5 << 32) - 20)
    start = await launch_checked(bench, cmd, expected)
    assert await regs.read("CTR_HI") == 0, "CTR_HI changed without a CTR_LO read"
    lo = await regs.read("CTR_LO")
    hi = await regs.read("CTR_HI")
    ctr = hi << 32 | lo
    assert hi == 5 and start < ctr < bench.now(), (hi, lo, start, bench.now())
    assert await regs.read("CTR_LO") == 0, "CTR_LO is not cleared by its read"
    assert await regs.read("CTR_HI") == 0, "CTR_HI does not latch the cleared CTR"
    assert (await regs.read_fields("STATUS"))["DONE"], "reading the CTR cleared DONE"

    # An accepted START clears an unread CTR (of a done command; here a refused START).
    await launch_checked(bench, cmd, expected)
    await bench.gemm(INT8, a, b, m=0, expect=ErrorCode.BAD_COMMAND, **where)
    assert await regs.read("CTR_LO") == 0, "a refused START left the CTR"
    # ... and so does an accepted one; the CTR then takes the new completion time.
    await launch_checked(bench, cmd, expected)

    async def ctr_cleared():
        assert await regs.read("CTR_LO") == 0, "an accepted START left the old CTR"

    start = await launch_checked(bench, cmd, expected, during=ctr_cleared)
    assert await regs.read("CTR_LO") > start & 0xFFFFFFFF


async def launch_checked(bench, cmd, expected, during=None, limit=100_000):
    """START ``cmd`` (operands already in memory), run ``during``, poll STATUS (not
    CTR_LO) until DONE, check memory against ``expected``; return the START time."""
    before = bench.ram.snapshot()
    writes = len(bench.ram.writes)
    start = await bench.launch(cmd)
    if during is not None:
        await during()
    deadline = bench.now() + limit
    while not (await bench.regs.read_fields("STATUS"))["DONE"]:
        assert bench.now() < deadline, "the command did not finish"
    bench.check_memory(cmd, expected, before, bench.ram.writes[writes:], done=True)
    return start


@cocotb.test()
async def interrupts(dut):
    """IRQ_STATUS latches done/error whatever IRQ_ENABLE says; ``interrupt`` = OR of
    (IRQ_STATUS & IRQ_ENABLE), at once when enabling; W1C clears only the bits written 1;
    commands waited for by interrupt, for done and for errors."""
    bench, rng = await new_bench(dut)
    regs = bench.regs

    def line():
        return int(dut.interrupt.value)

    await regs.write("IRQ_ENABLE", 0)
    await random_gemm(bench, rng, wait="poll")          # leaves IRQ_STATUS.DONE set
    assert await regs.read_fields("IRQ_STATUS") == {"DONE": 1, "ERROR": 0}
    assert not line(), "interrupt high with IRQ_ENABLE = 0"
    await regs.write_fields("IRQ_ENABLE", error=1)
    assert not line(), "interrupt high for DONE with only ERROR enabled"
    await regs.write_fields("IRQ_ENABLE", done=1)
    assert line(), "interrupt low with DONE latched and enabled"
    await regs.write("IRQ_STATUS", 0)
    await regs.write_fields("IRQ_STATUS", error=1)
    assert line() and (await regs.read_fields("IRQ_STATUS"))["DONE"], "W1C cleared DONE"
    await regs.write_fields("IRQ_STATUS", done=1)
    assert not line() and await regs.read("IRQ_STATUS") == 0

    # An error latches ERROR; with only DONE enabled the line stays low.
    a, b = rand_operands(rng, BF16, 2, 2, 2)
    where = layout(rng, BF16, 2, 2, 2, min_pad=2 * BUS_BYTES)
    await regs.write_fields("IRQ_ENABLE", done=1)
    await bench.launch(Command(BF16, 2, 2, 0, **where))
    await bench.cycles(3)
    assert await regs.read_fields("IRQ_STATUS") == {"DONE": 0, "ERROR": 1}
    assert not line()
    await regs.write_fields("IRQ_ENABLE", done=1, error=1)
    assert line()
    await regs.write_fields("IRQ_STATUS", done=1, error=1)
    assert not line()

    # Waiting by interrupt: a done command, a refused one, a TAT miss, an AXI error.
    await random_gemm(bench, rng, wait="interrupt")
    await bench.gemm(BF16, a, b, wait="interrupt", expect=ErrorCode.MISALIGNED,
                     **dict(where, lda=3))
    await bench.set_tat([])
    await bench.gemm(BF16, a, b, wait="interrupt", expect=ErrorCode.TAT_MISS, **where)
    await bench.set_tat(WIDE)
    error_range(bench, where["b_addr"], 2)
    await bench.gemm(BF16, a, b, wait="interrupt", expect=ErrorCode.AXI_READ_ERROR, **where)
    await good_command(bench, rng)


# --- Bus timing ----------------------------------------------------------------------------

@cocotb.test()
async def backpressure(dut):
    """Random idle and back-pressure cycles on every AXI4 and AXI4-Lite channel, with
    short, long and unequal memory latencies: results stay right."""
    bench, rng = await new_bench(dut)
    count, limit = (4, 20) if ICARUS else (10, 70)
    for probability in (0.3, 0.7):
        bench.set_pauses(probability)
        for shape in shapes(rng, count, limit):
            bench.ram.read_latency = rng.choice((2, 5, 37))
            bench.ram.write_latency = rng.choice((2, 9, 41))
            await random_gemm(bench, rng, shape=shape)
    bench.set_pauses(0)
    await random_gemm(bench, rng)


@cocotb.test()
async def backpressure_errors(dut):
    """Every error a command can end with, under random idle and back-pressure cycles on
    every AXI4 and AXI4-Lite channel, in each mode (B transposed too) and on whole tiles
    (M, K, N multiples of P): an AXI read error on B, an AXI write error on C, a TAT miss,
    a bad TAT entry, a misaligned C and a bad shape; each outcome, ERR_ADDR and memory as
    the bench predicts, and the next command under the same pauses works (the old C's
    read error: ``backpressure_old_c_error``).
    (The functional coverage's error × back-pressure bins: sim/fcov.py.)"""
    bench, rng = await new_bench(dut)
    bench.set_pauses(0.5)
    modes = (BF16_BT,) if ICARUS else (INT8, BF16, INT8_BT, BF16_BT)

    async def recover(mode, last=False):
        """good_command on a whole tile, in the mode of the error before (on Icarus, ten
        times slower, after the last error of a mode only)."""
        await bench.set_tat(WIDE)
        bench.ram.error_ranges.clear()
        if last or not ICARUS:
            assert (await random_gemm(bench, rng, mode, shape=(P, P, P))).done

    region = 0x0060_0000
    small_tat = [TatEntry(True, region, 2, 0x0000_5555_0000)]   # 16 KiB mapped
    for index, mode in enumerate(modes):
        es = element_size(mode)
        m, k, n = (P, P, P) if index % 2 or ICARUS else (2 * P, P, 2 * P)
        a, b = rand_operands(rng, mode, m, k, n)
        where = layout(rng, mode, m, k, n, min_pad=2 * BUS_BYTES)
        b_rows = n if b_transposed(mode) else k

        error_range(bench, where["b_addr"] + rng.randrange(b_rows) * where["ldb"] + es, 1)
        await bench.gemm(mode, a, b, expect=ErrorCode.AXI_READ_ERROR, **where)
        await recover(mode)

        error_range(bench, where["c_addr"] + rng.randrange(m) * where["ldc"]
                    + 4 * rng.randrange(n), 4, reads=False)
        await bench.gemm(mode, a, b, accumulate=rng.random() < 0.5,
                         expect=ErrorCode.AXI_WRITE_ERROR, **where)
        await recover(mode)

        await bench.set_tat(small_tat)
        inside = dict(a_addr=region + 2 * es, b_addr=region + 0x4000 + 64,
                      c_addr=region + 0x2000, lda=k * es, ldb=(k if b_transposed(mode) else n) * es,
                      ldc=n * 4)
        await bench.gemm(mode, a, b, expect=ErrorCode.TAT_MISS, **inside)
        await bench.set_tat(WIDE + [TatEntry(True, 0x4000_1000, 1, 0x2000)])  # base misaligned
        await bench.gemm(mode, a, b, expect=ErrorCode.BAD_TAT, **where)
        await recover(mode)

        await bench.gemm(mode, a, b, expect=ErrorCode.MISALIGNED,
                         **dict(where, c_addr=where["c_addr"] + 2))
        await bench.gemm(mode, a, b, expect=ErrorCode.BAD_COMMAND, m=0, **where)
        await recover(mode, last=True)
    bench.set_pauses(0)


@cocotb.test()
async def backpressure_old_c_error(dut):
    """An AXI read error on the old C of an ACCUMULATE command's second block of rows
    (read while the first block's results are on their way to memory) under random
    pauses on every channel: AXI_READ_ERROR, then the next command, under the same
    pauses, writes only its own C. docs/ma/README.md: after an error everything in flight
    is drained. (A row of the failed command left in the result path was once written
    during the next command; tests/test_ma_core.py has the same case.)"""
    bench, rng = await new_bench(dut)
    bench.set_pauses(0.5)
    for mode in (INT8, BF16):
        m, k, n = 2 * P, P, 2 * P
        a, b = rand_operands(rng, mode, m, k, n)
        where = layout(rng, mode, m, k, n, min_pad=2 * BUS_BYTES)
        error_range(bench, where["c_addr"] + (P + rng.randrange(P)) * where["ldc"], 4)
        await bench.gemm(mode, a, b, accumulate=True, expect=ErrorCode.AXI_READ_ERROR,
                         **where)
        bench.ram.error_ranges.clear()
        assert (await random_gemm(bench, rng, mode, shape=(P, P, P))).done
    bench.set_pauses(0)


@cocotb.test()
async def memory_latency(dut):
    """The memory model's latency is real: every read burst's first beat is taken at
    least L cycles after its AR (exactly L for some), every B at least L cycles after the
    burst's last W beat (exactly L for some); a longer latency makes a command longer."""
    results = {}
    bench, rng = await new_bench(dut, latency=24, write_latency=11)
    first_beats = []
    cocotb.start_soon(bench.ram.watch_reads(first_beats))
    shape = (P + 1, 20, 2 * P + 1)
    a, b = rand_operands(rng, INT8, *shape)
    where = layout(rng, INT8, *shape)
    writes = len(bench.ram.writes)
    acks = len(bench.ram.acks)
    outcome = await bench.gemm(INT8, a, b, **where)
    results[24] = outcome.cycles
    delays = [first - ar for ar, first in first_beats]
    assert delays and min(delays) == 24, delays
    new_writes = bench.ram.writes[writes:]
    new_acks = bench.ram.acks[acks:acks + len(new_writes)]
    assert len(new_acks) == len(new_writes), (len(new_acks), len(new_writes))
    ack_delays = [ack - w.edge for ack, w in zip(new_acks, new_writes, strict=True)]
    assert min(ack_delays) == 11, ack_delays
    for latency in (4, 60):
        bench.ram.read_latency = bench.ram.write_latency = latency
        outcome = await bench.gemm(INT8, a, b, **where)
        results[latency] = outcome.cycles
    assert results[4] < results[24] < results[60], results
    dut._log.info("cycles by memory latency: %s", results)
    perf.check_all("ma.memory_latency", {f"L{k}": v for k, v in results.items()})


async def load_long_command(bench, rng):
    """Command registers of a GEMM that runs for hundreds of cycles (K = 64) on the WIDE
    TAT, for ``tests/conformance_tb.py``'s START while busy; START is not written."""
    await bench.write_command(Command(mode=INT8, m=2 * P, k=64, n=2 * P, a_addr=0,
                                      b_addr=0x1_0000, c_addr=0x2_0000, lda=64, ldb=2 * P,
                                      ldc=4 * 2 * P))
