"""The bf16 multiplier and binary32 adder (combinational and pipelined) of the
floating-point library (hdl/common/fp), and the MA's PE product and accumulator built from
them (hdl/ma/fp.py), against the golden model."""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from golden import fp
from golden import ma as golden_ma
from hdl.common.fp import F32_ADD_STAGES, bf16_mul, f32_add, f32_add_pipelined
from hdl.ma.array import INTERLEAVE, PE_LATENCY, ProcessingElement
from hdl.ma.fp import PE_PRODUCT_STAGES, pe_accumulate, pe_product

SPECIAL_F32 = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
               0x7F800001, 0x00000001, 0x807FFFFF, 0x00800000, 0x80800000, 0x00800001,
               0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000, 0x33800000, 0x4B800000]
SPECIAL_BF16 = [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFF81, 0x0001, 0x807F, 0x0080,
                0x8080, 0x7F7F, 0xFF7F, 0x3F80, 0xBF80, 0x1F80, 0x2000, 0x5F80, 0x6000]


def f32_operands(rng, count):
    a = rng.integers(0, 2**32, count, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, count, dtype=np.uint64).astype(np.uint32)
    quarter = count // 4
    # Near-cancellation: b ≈ −a, within a few ulps.
    b[:quarter] = (a[:quarter] ^ np.uint32(0x80000000)) + rng.integers(
        -3, 4, quarter).astype(np.int64).astype(np.uint32)
    # Close exponents: the alignment shifts of 0..40 that rounding depends on.
    shift = rng.integers(0, 40, quarter).astype(np.uint32)
    b[quarter:2 * quarter] = (a[quarter:2 * quarter] & np.uint32(0xFF800000)) - \
        (shift << np.uint32(23)) | rng.integers(0, 2**23, quarter).astype(np.uint32)
    special = np.array(SPECIAL_F32, dtype=np.uint32)
    pairs = np.array([(x, y) for x in special for y in special], dtype=np.uint32)
    return np.concatenate([a, pairs[:, 0]]), np.concatenate([b, pairs[:, 1]])


def run_unit(build, a_values, b_values, width):
    m = Module()
    a, b = Signal(width), Signal(width)
    out = build(m, a, b)
    results = []

    async def bench(ctx):
        for x, y in zip(a_values, b_values, strict=True):
            ctx.set(a, int(x))
            ctx.set(b, int(y))
            results.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return np.array(results, dtype=np.uint32)


@pytest.mark.parametrize("seed", [1, 2])
def test_f32_add_matches_golden(seed):
    rng = np.random.default_rng(seed)
    a, b = f32_operands(rng, 4000)
    got = run_unit(f32_add, a, b, 32)
    expected = fp.f32_add(a, b)
    bad = np.flatnonzero(got != expected)
    assert not bad.size, (f"seed={seed}: {bad.size} mismatches, first "
                          f"{a[bad[0]]:#010x} + {b[bad[0]]:#010x}: RTL {got[bad[0]]:#010x}, "
                          f"golden {expected[bad[0]]:#010x}")


@pytest.mark.parametrize("seed", [1, 2])
def test_bf16_mul_matches_golden(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**16, 4000).astype(np.uint16)
    b = rng.integers(0, 2**16, 4000).astype(np.uint16)
    special = np.array(SPECIAL_BF16, dtype=np.uint16)
    pairs = np.array([(x, y) for x in special for y in special], dtype=np.uint16)
    a, b = np.concatenate([a, pairs[:, 0]]), np.concatenate([b, pairs[:, 1]])
    got = run_unit(bf16_mul, a, b, 16)
    expected = fp.bf16_mul(a, b)
    bad = np.flatnonzero(got != expected)
    assert not bad.size, (f"seed={seed}: {bad.size} mismatches, first "
                          f"{a[bad[0]]:#06x} × {b[bad[0]]:#06x}: RTL {got[bad[0]]:#010x}, "
                          f"golden {expected[bad[0]]:#010x}")


def test_f32_add_pipelined_matches_golden():
    """One pair a cycle into the pipelined adder; each sum comes out three cycles later
    (the caller's register is the fourth stage), with a value carried alongside."""
    rng = np.random.default_rng(3)
    a_values, b_values = f32_operands(rng, 1500)
    m = Module()
    a, b, tag = Signal(32), Signal(32), Signal(16)
    out, carried = f32_add_pipelined(m, a, b, carry={"tag": tag})
    delay = F32_ADD_STAGES - 1
    got, tags = [], []

    async def bench(ctx):
        for n in range(len(a_values) + delay):
            if n < len(a_values):
                ctx.set(a, int(a_values[n]))
                ctx.set(b, int(b_values[n]))
                ctx.set(tag, n & 0xFFFF)
            if n >= delay:
                got.append(ctx.get(out))
                tags.append(ctx.get(carried["tag"]))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert tags == [n & 0xFFFF for n in range(len(a_values))]
    got = np.array(got, dtype=np.uint32)
    expected = fp.f32_add(a_values, b_values)
    bad = np.flatnonzero(got != expected)
    assert not bad.size, (f"{bad.size} mismatches, first {a_values[bad[0]]:#010x} + "
                          f"{b_values[bad[0]]:#010x}: RTL {got[bad[0]]:#010x}, "
                          f"golden {expected[bad[0]]:#010x}")


def pe_operands(rng, count):
    """Partial sums and bf16 operand pairs for the PE's adder: random, near-cancellation
    (the sum within a few ulps of minus the product), close exponents (alignment shifts of
    0..30 either way), differences near the smallest normal (flushed or not), and every
    pair of special values with special partial sums."""
    a = rng.integers(0, 2**16, count).astype(np.uint16)
    b = rng.integers(0, 2**16, count).astype(np.uint16)
    # Keep most products normal: exponents near the bias.
    tame = rng.random(count) < 0.7
    for x in (a, b):
        e = rng.integers(100, 155, count).astype(np.uint16)
        x[tame] = (x[tame] & np.uint16(0x807F)) | (e[tame] << np.uint16(7))
    prod = fp.bf16_mul(a, b)
    acc = rng.integers(0, 2**32, count, dtype=np.uint64).astype(np.uint32)
    third = count // 3
    acc[:third] = (prod[:third] ^ np.uint32(0x80000000)) + rng.integers(
        -300, 301, third).astype(np.int64).astype(np.uint32)
    shift = rng.integers(-30, 31, third).astype(np.int64)
    exp = ((prod[third:2 * third] >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int64) + shift
    acc[third:2 * third] = ((acc[third:2 * third] & np.uint32(0x807FFFFF))
                            | (np.clip(exp, 0, 255).astype(np.uint32) << np.uint32(23)))
    # Near the smallest normal: products and sums of exponent 1..2, opposite signs, so
    # that differences fall below 2**-126 (flushed) or just stay above it.
    tiny = slice(2 * third, 2 * third + third // 2)
    n = third // 2
    ea = rng.integers(60, 68, n).astype(np.uint16)
    a[tiny] = (a[tiny] & np.uint16(0x807F)) | (ea << np.uint16(7))
    b[tiny] = (b[tiny] & np.uint16(0x007F)) | ((128 - ea + rng.integers(0, 2, n)).astype(
        np.uint16) << np.uint16(7))
    prod[tiny] = fp.bf16_mul(a[tiny], b[tiny])
    acc[tiny] = ((prod[tiny] ^ np.uint32(0x80000000)) & np.uint32(0x80000000)) | (
        rng.integers(1, 3, n).astype(np.uint32) << np.uint32(23)) | rng.integers(
        0, 2**23, n).astype(np.uint32)
    special_acc = np.array(SPECIAL_F32, dtype=np.uint32)
    special_bf16 = np.array(SPECIAL_BF16, dtype=np.uint16)
    triples = np.array([(c, x, y) for c in special_acc for x in special_bf16[::2]
                        for y in special_bf16[1::2]], dtype=np.uint32)
    return (np.concatenate([acc, triples[:, 0]]),
            np.concatenate([a, triples[:, 1].astype(np.uint16)]),
            np.concatenate([b, triples[:, 2].astype(np.uint16)]))


def run_pe_stages(acc_values, a_values, b_values, bf16):
    """The PE's product stages and adder fed one (sum, a, b) a cycle (the sum delayed to
    meet its product); returns each result as it leaves the last stage. int8 operands
    are given as signed integers."""
    m = Module()
    a, b, acc = Signal(16), Signal(16), Signal(32)
    mode = Signal(init=int(bf16))
    product = pe_product(m, a, b, mode)
    base = acc
    for _ in range(PE_PRODUCT_STAGES):          # the sum meets its product
        delayed = Signal(32)
        m.d.sync += delayed.eq(base)
        base = delayed
    out, _ = pe_accumulate(m, base, product, ~mode)
    delay = PE_PRODUCT_STAGES + F32_ADD_STAGES - 1
    count = len(a_values)
    mask = 0xFFFF if bf16 else 0xFF             # int8: the value in the low byte
    got = []

    async def bench(ctx):
        for n in range(count + delay):
            if n < count:
                ctx.set(a, int(a_values[n]) & mask)
                ctx.set(b, int(b_values[n]) & mask)
                ctx.set(acc, int(acc_values[n]) & 0xFFFFFFFF)
            if n >= delay:
                got.append(ctx.get(out))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return got


def test_pe_product_and_accumulate_match_golden():
    """The PE's product stages and adder, one (sum, a, b) a cycle: each result equals
    ``f32_add(sum, bf16_mul(a, b))`` of the golden model, five cycles later."""
    rng = np.random.default_rng(4)
    acc_values, a_values, b_values = pe_operands(rng, 20000)
    got = np.array(run_pe_stages(acc_values, a_values, b_values, bf16=True), dtype=np.uint32)
    expected = fp.f32_add(acc_values, fp.bf16_mul(a_values, b_values))
    bad = np.flatnonzero(got != expected)
    assert not bad.size, (f"{bad.size} mismatches, first {acc_values[bad[0]]:#010x} + "
                          f"{a_values[bad[0]]:#06x} × {b_values[bad[0]]:#06x}: "
                          f"RTL {got[bad[0]]:#010x}, golden {expected[bad[0]]:#010x}")


def test_pe_int8_mode_wraps_like_golden():
    """int8 mode of the same stages: ``sum + a·b`` wrapping to 32 bits, five cycles later,
    with sums near the wrap-around and the extreme products."""
    rng = np.random.default_rng(5)
    count = 3000
    a_values = rng.integers(-128, 128, count)
    b_values = rng.integers(-128, 128, count)
    a_values[:8] = [-128, -128, 127, -128, 127, 0, -1, 1]
    b_values[:8] = [-128, 127, 127, 0, -128, 5, -1, -1]
    acc_values = rng.integers(-2**31, 2**31, count)
    acc_values[8:200] = rng.choice([2**31 - 1, -2**31, 2**31 - 16384, -2**31 + 16384], 192)
    got = run_pe_stages(acc_values, a_values, b_values, bf16=False)
    # docs/design.md: int8 × int8 summed exactly in 32-bit two's complement, wrapping.
    expected = [(int(c) + int(x) * int(y)) & 0xFFFFFFFF
                for c, x, y in zip(acc_values, a_values, b_values, strict=True)]
    bad = [n for n in range(count) if got[n] != expected[n]]
    assert not bad, (f"{len(bad)} mismatches, first {acc_values[bad[0]]} + {a_values[bad[0]]}·"
                     f"{b_values[bad[0]]}: RTL {got[bad[0]]:#010x}, expected {expected[bad[0]]:#010x}")


@pytest.mark.parametrize("bf16", [True, False], ids=["bf16", "int8"])
def test_processing_element_matches_golden(bf16):
    """A whole ProcessingElement against golden/ma.py: groups of INTERLEAVE tiles (slots),
    their k-steps interleaved k-major, random K, with and without ACCUMULATE (each slot's
    old C written into the PE's memory first); bf16 operands and old C drawn partly from special values
    (zeros, subnormals, infinities, NaNs, the largest normals: overflow) and partly near
    cancellation. Each slot's result must equal the golden 1×K×1 GEMM."""
    rng = np.random.default_rng(6 if bf16 else 7)
    dut = ProcessingElement()
    special_bf16 = np.array(SPECIAL_BF16, dtype=np.uint16)
    special_f32 = np.array(SPECIAL_F32, dtype=np.uint32)
    groups = []
    for _ in range(40):
        k = int(rng.integers(1, 10))
        accumulate = bool(rng.integers(0, 2))
        if bf16:
            a = rng.integers(0x3C00, 0x4300, (INTERLEAVE, k)).astype(np.uint16)
            a |= (rng.integers(0, 2, a.shape) << 15).astype(np.uint16)
            b = rng.integers(0x3C00, 0x4300, (INTERLEAVE, k)).astype(np.uint16)
            pick = rng.random(a.shape) < 0.15
            a[pick] = rng.choice(special_bf16, pick.sum())
            c = rng.integers(0, 2**32, INTERLEAVE, dtype=np.uint64).astype(np.uint32)
            c[rng.random(INTERLEAVE) < 0.4] = rng.choice(special_f32)
            # One slot cancels its own old C with its first product.
            c[0] = fp.bf16_mul(a[0, 0], b[0, 0]) ^ np.uint32(0x80000000)
            expected = [golden_ma.gemm_bf16(a[s][None, :], b[s][:, None],
                                            c[s:s + 1, None] if accumulate else None)[0, 0]
                        for s in range(INTERLEAVE)]
        else:
            a = rng.integers(-128, 128, (INTERLEAVE, k)).astype(np.int8)
            b = rng.integers(-128, 128, (INTERLEAVE, k)).astype(np.int8)
            c = rng.integers(-2**31, 2**31, INTERLEAVE).astype(np.int32)
            expected = [golden_ma.gemm_int8(a[s][None, :], b[s][:, None],
                                            c[s:s + 1, None] if accumulate else None)[0, 0]
                        for s in range(INTERLEAVE)]
        groups.append((k, accumulate, a, b, c, [int(v) & 0xFFFFFFFF for v in expected]))

    async def bench(ctx):
        mode = {"bf16": bf16}
        for k, accumulate, a, b, c, expected in groups:
            # The mode comes with the flags; the PE takes it a cycle before the steps.
            mode["accumulate"] = accumulate
            ctx.set(dut.flags, {"valid": 0, **mode})
            # Each slot's old C into the PE's memory, a word a cycle.
            for s in range(INTERLEAVE):
                ctx.set(dut.init_we, 1)
                ctx.set(dut.init_slot, s)
                ctx.set(dut.init_data, int(c[s]) & 0xFFFFFFFF)
                await ctx.tick()
            ctx.set(dut.init_we, 0)
            for step in range(k):
                for s in range(INTERLEAVE):
                    ctx.set(dut.a, int(a[s, step]) & 0xFFFF)
                    ctx.set(dut.b, int(b[s, step]) & 0xFFFF)
                    ctx.set(dut.flags, {"valid": 1, "first": step == 0, "last": step == k - 1,
                                        "slot": s, **mode})
                    await ctx.tick()
            ctx.set(dut.flags, {"valid": 0, "first": 0, "last": 0, "slot": 0, **mode})
            await ctx.tick().repeat(PE_LATENCY + 1)
            got = [ctx.get(dut.result[s]) for s in range(INTERLEAVE)]
            assert got == expected, (
                f"K={k} accumulate={accumulate}: RTL {[hex(v) for v in got]}, golden "
                f"{[hex(v) for v in expected]}; a={a.tolist()} b={b.tolist()} c={c.tolist()}")

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
