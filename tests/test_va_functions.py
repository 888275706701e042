"""Amaranth-simulator tests of the VA's function helpers (hdl/va/functions.py, and the
multiplier and conversions of hdl/common/fp they are built from) against
the golden model (golden.va) on random binary32 inputs and edge cases.

The cocotb regression checks EXP and SILU over every bf16 input; these tests reach the
binary32 inputs bf16 cannot express (24-bit significands, the flush boundary, results
that round up from the subnormal range). Seeds are in the test ids.
"""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from golden import va as golden
from hdl.common import fp
from hdl.va import functions
from spec.codes import VaOpcode

EDGES = [0x00000000, 0x80000000, 0x00800000, 0x80800000, 0x007FFFFF, 0x7F7FFFFF, 0xFF7FFFFF,
         0x7F800000, 0xFF800000, 0x7FC00000, 0xFF800001, 0x3F800000, 0xBF800000, 0x3FFFFFFF,
         0x20000000, 0x1FFFFFFF, 0x1F800000, 0x00FFFFFF, 0x42B17218, 0xC2B17218, 0x42FE0000,
         0xC3000000, 0x33800000, 0xB3000000, 0x33000001]


def inputs(seed, count=400):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)
    # many around the flush boundary and the range where exp is finite
    near = rng.integers(0x00000000, 0x01800000, count // 4, dtype=np.uint64).astype(np.uint32)
    small = (rng.normal(0, 30, count // 4).astype(np.float32)).view(np.uint32)
    sign = rng.integers(0, 2, count // 4).astype(np.uint32) << 31
    return np.concatenate([np.array(EDGES, np.uint32), x, near | sign, small])


def simulate(build, a_values, b_values=None):
    """Outputs of the combinational helper ``build(m, a, b)`` for each input."""
    m = Module()
    a, b = Signal(32), Signal(32)
    out = build(m, a, b)
    results = []

    async def bench(ctx):
        for i, value in enumerate(a_values):
            ctx.set(a, int(value))
            if b_values is not None:
                ctx.set(b, int(b_values[i]))
            results.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return np.array(results, np.uint32)


def simulate_pipelined(build, a_values, b_values=None, lut_products=False):
    """Outputs of ``build(m, a, b, cut)`` with every cut a register (fp.Stages):
    one input a cycle, each result ``cut.depth`` cycles later."""
    m = Module()
    a, b = Signal(32), Signal(32)
    cut = fp.Stages(m, "t", lut_products=lut_products)
    out = build(m, a, b, cut)
    assert cut.depth > 0
    results = []

    async def bench(ctx):
        for i in range(len(a_values) + cut.depth):
            if i < len(a_values):
                ctx.set(a, int(a_values[i]))
                if b_values is not None:
                    ctx.set(b, int(b_values[i]))
            if i >= cut.depth:
                results.append(ctx.get(out))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return np.array(results, np.uint32)


def check(name, got, expect, *operands):
    bad = np.nonzero(got != expect)[0]
    assert not len(bad), (
        f"{name}: {len(bad)} mismatches, first for "
        + ", ".join(f"{int(o[bad[0]]):#010x}" for o in operands)
        + f": {int(got[bad[0]]):#010x}, golden {int(expect[bad[0]]):#010x}")


@pytest.mark.parametrize("seed", range(3), ids=lambda s: f"seed{s}")
def test_f32_mul(seed):
    a = inputs(seed)
    b = np.roll(inputs(seed + 100), 7)[:len(a)]
    # products that land just below 2**-126: the subnormal rounding boundary
    a = np.concatenate([a, np.full(4, 0x3FFFFFFF, np.uint32), [0x00FFFFFF, 0x3F7FFFFF]])
    b = np.concatenate([b, [0x00800000, 0x00800001, 0x80FFFFFE, 0x007FFFFF, 0x3F000000,
                            0x00800001]]).astype(np.uint32)
    got = simulate(lambda m, x, y: fp.f32_mul(m, x, y, "mul"), a, b)
    check("f32_mul", got, golden.f32_mul(a, b), a, b)


@pytest.mark.parametrize("seed", range(3), ids=lambda s: f"seed{s}")
def test_recip(seed):
    x = inputs(seed)
    got = simulate(lambda m, a, _: functions.recip_f32(m, a, "rcp"), x)
    check("recip_f32", got, golden.recip_f32(x), x)


@pytest.mark.parametrize("bias", [0, 64])
@pytest.mark.parametrize("seed", range(3), ids=lambda s: f"seed{s}")
def test_exp(seed, bias):
    x = inputs(seed)
    got = simulate(lambda m, a, _: functions.exp_f32(m, a, bias, "exp"), x)
    check("exp_f32", got, golden.exp_f32(x, bias), x)


@pytest.mark.parametrize("seed", range(3), ids=lambda s: f"seed{s}")
def test_rsqrt(seed):
    x = inputs(seed)
    got = simulate(lambda m, a, _: functions.rsqrt_f32(m, a, "rs"), x)
    check("rsqrt_f32", got, golden.rsqrt_f32(x), x)


@pytest.mark.parametrize("seed", range(2), ids=lambda s: f"seed{s}")
def test_int32_to_f32(seed):
    """DEQUANTIZE's conversion: nearest even, as numpy's int32 → float32."""
    rng = np.random.default_rng(seed)
    v = np.concatenate([
        np.array([0, 1, -1, 2**31 - 1, -2**31, 2**24 + 1, 2**24 + 3, -(2**25 + 2), 16777217],
                 np.int64),
        rng.integers(-2**31, 2**31, 300), rng.integers(-2**12, 2**12, 100)]).astype(np.int32)
    got = simulate(lambda m, a, _: fp.int32_to_f32(m, a, "cvt"), v.view(np.uint32))
    check("int32_to_f32", got, v.astype(np.float32).view(np.uint32), v.view(np.uint32))


@pytest.mark.parametrize("seed", range(2), ids=lambda s: f"seed{s}")
def test_f32_to_int8(seed):
    """QUANTIZE's rounding: half to even, saturated to ±127, NaN 0 (golden.va.quantize_bf16)."""
    rng = np.random.default_rng(seed)
    halves = (np.arange(-260, 261) / 2).astype(np.float32).view(np.uint32)
    x = np.concatenate([inputs(seed), halves,
                        (rng.normal(0, 60, 300).astype(np.float32)).view(np.uint32)])
    got = simulate(lambda m, a, _: fp.f32_to_int8(m, a, "q"), x)
    with np.errstate(all="ignore"):
        v = np.nan_to_num(x.view(np.float32), nan=0.0, posinf=127, neginf=-127)
        expect = np.clip(np.rint(v), -127, 127).astype(np.int8).view(np.uint8)
    check("f32_to_int8", got & 0xFF, expect.astype(np.uint32), x)


@pytest.mark.parametrize("lut_products", [False, True], ids=["dsp", "lut"])
def test_pipelined_helpers(lut_products):
    """The helpers with a register at every cut point compute the same results (and with
    their small partial products in logic, as the narrowed units build them)."""
    a = inputs(7, 200)
    b = np.roll(inputs(8, 200), 3)[:len(a)]
    got = simulate_pipelined(lambda m, x, y, cut: fp.f32_mul(m, x, y, "mul", cut), a, b,
                             lut_products=lut_products)
    check("f32_mul pipelined", got, golden.f32_mul(a, b), a, b)
    got = simulate_pipelined(lambda m, x, _, cut: functions.recip_f32(m, x, "rcp", cut), a,
                             lut_products=lut_products)
    check("recip_f32 pipelined", got, golden.recip_f32(a), a)
    got = simulate_pipelined(lambda m, x, _, cut: functions.rsqrt_f32(m, x, "rs", cut), a,
                             lut_products=lut_products)
    check("rsqrt_f32 pipelined", got, golden.rsqrt_f32(a), a)
    got = simulate_pipelined(lambda m, x, _, cut: fp.f32_to_int8(m, x, "q", cut), a,
                             lut_products=lut_products)
    expect = simulate(lambda m, x, _: fp.f32_to_int8(m, x, "q"), a)
    check("f32_to_int8 pipelined", got, expect, a)
    for bias in (0, 64):
        got = simulate_pipelined(
            lambda m, x, _, cut, bias=bias: functions.exp_f32(m, x, bias, "exp", cut), a,
            lut_products=lut_products)
        check("exp_f32 pipelined", got, golden.exp_f32(a, bias), a)


def stream_words(dut, words, setup, put, take, gap=lambda cycle: False,
                 stall=lambda cycle: False):
    """Simulate a unit with ``i``/``o`` streams: ``setup(ctx)``, then each row of 16-bit
    elements in ``words``, packed into an integer, offered through ``put(ctx, packed)``
    (no offer on cycles where ``gap``), the output not ready on cycles where ``stall``;
    returns ``take(ctx)`` of every output taken, in order."""
    out = []

    async def bench(ctx):
        setup(ctx)
        sent = 0
        cycle = 0
        while len(out) < len(words):
            ctx.set(dut.o.ready, not stall(cycle))
            ctx.set(dut.i.valid, sent < len(words) and not gap(cycle))
            if sent < len(words):
                put(ctx, sum(int(v) << (16 * k) for k, v in enumerate(words[sent])))
            took = ctx.get(dut.i.valid) and ctx.get(dut.i.ready)
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                out.append(take(ctx))
            await ctx.tick()
            sent += bool(took)
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def unpack(word, lanes):
    """The 16-bit elements of a ``lanes``-element word, lowest first."""
    return [(word >> (16 * k)) & 0xFFFF for k in range(lanes)]


def run_unary(op, words16, data_width=64):
    """Push bf16 elements through UnaryUnit (input gaps and output stalls now and then);
    the bf16 results and each element's binary32 exp (``o.payload.e``)."""
    lanes = data_width // 16
    dut = functions.UnaryUnit(data_width)
    out = stream_words(
        dut, words16.reshape(-1, lanes),
        setup=lambda ctx: ctx.set(dut.op, op),
        put=lambda ctx, word: ctx.set(dut.i.payload.x, word),
        take=lambda ctx: (unpack(ctx.get(dut.o.payload.word), lanes),
                          [int(v) for v in ctx.get(dut.o.payload.e)]),
        gap=lambda cycle: cycle % 5 == 2, stall=lambda cycle: cycle % 7 in (3, 4))
    return (np.array([w for w, _ in out], np.uint16).ravel(),
            np.array([e for _, e in out], np.uint32).ravel())


@pytest.mark.parametrize("op", [VaOpcode.EXP, VaOpcode.SILU], ids=lambda o: o.name)
def test_unary_unit_under_backpressure(op):
    """UnaryUnit's pipeline (registers at every cut, output FIFO taken on credit) gives
    golden.va's results in order, with input gaps and output stalls."""
    rng = np.random.default_rng(int(op))
    x = rng.integers(0, 65536, 160).astype(np.uint16)
    x[:8] = [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xC1A0, 0x3F80, 0xC2C8]
    got, exps = run_unary(op, x)
    expect = golden.exp_bf16(x) if op == VaOpcode.EXP else golden.silu_bf16(x)
    check(op.name, got.astype(np.uint32), expect.astype(np.uint32), x)
    if op == VaOpcode.EXP:
        e = golden.exp_f32(golden.bf16_in(x))
        check("EXP e", exps, e, x)


def test_unary_unit_recip():
    """RECIP through UnaryUnit (the reciprocal after the adder's x + -0): golden.va
    recip_bf16 on random bf16 patterns and the edges (±0, ±inf, NaN, subnormals, the
    largest exponents, powers of two), with input gaps and output stalls (the cocotb
    regression runs all 65 536 patterns)."""
    rng = np.random.default_rng(22)
    edges = [0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x3F80,
             0xBF80, 0x7F00, 0x7F7F, 0xFEFF, 0x7E80, 0x4000, 0x3F81, 0x00FF]
    x = np.concatenate([np.array(edges, np.uint16),
                        rng.integers(0, 65536, 142).astype(np.uint16)])
    got, _ = run_unary(VaOpcode.RECIP, x)
    check("RECIP", got.astype(np.uint32), golden.recip_bf16(x).astype(np.uint32), x)


def test_unary_unit_cvt_f32():
    """CVT_F32 through UnaryUnit: a word of binary32 in, their bf16 in the low half of
    the word out (the upper half zero), bit for bit golden.va.f32_to_bf16: nearest even
    on the bits (subnormals included), NaN 0x7FC0; input gaps and output stalls."""
    rng = np.random.default_rng(23)
    f = np.concatenate([np.array(EDGES, np.uint32),
                        np.array([0x3F808000, 0x3F818000, 0x3F808001, 0x7F7F8000, 0x00007FFF,
                                  0x80018000, 0x7F800001, 0xFFFFFFFF], np.uint32),
                        rng.integers(0, 1 << 32, 207, dtype=np.uint64).astype(np.uint32)])
    f = f[:len(f) // 2 * 2]
    words = f.view(np.uint16)           # two bf16 slots per binary32, as the bus carries it
    got, _ = run_unary(VaOpcode.CVT_F32, words)
    got = got.reshape(-1, 4)
    assert not got[:, 2:].any(), "the upper half of a CVT_F32 word is not zero"
    expect = golden.f32_to_bf16(f)
    check("CVT_F32", got[:, :2].ravel().astype(np.uint32), expect.astype(np.uint32), f)
