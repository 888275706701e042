"""Amaranth-simulator tests of the VA's lane engine (hdl/va/lanes.py): elementwise ADD,
MUL and SCALE through its pipeline and output FIFO with random input gaps and output
back-pressure, and SUM (its loop through the pipelined adder, its tree), bit for bit
against golden.va (the cocotb regression covers the rest)."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden import va as golden
from golden.fp import float_to_bf16_rne
from hdl.va.lanes import LaneEngine, check_engine
from spec.codes import VaOpcode

LANES = 8


@pytest.mark.parametrize("width", [None, 4], ids=["full", "narrow"])
@pytest.mark.parametrize("op", [VaOpcode.ADD, VaOpcode.MUL, VaOpcode.SCALE],
                         ids=lambda op: op.name)
def test_elementwise_backpressure(op, width):
    rng = np.random.default_rng(int(op))
    dut = LaneEngine(LANES, width)
    vectors = 12
    x = rng.integers(0, 1 << 16, (vectors, dut.width)).astype(np.uint16)
    y = rng.integers(0, 1 << 16, (vectors, dut.width)).astype(np.uint16)
    scalar = int(rng.integers(0, 1 << 16))
    out = []

    async def bench(ctx):
        ctx.set(dut.op, op)
        ctx.set(dut.scalar, scalar)
        await ctx.tick()                 # op holds one cycle before the first vector
        sent = 0
        for _ in range(500):
            if len(out) == vectors:
                break
            if sent < vectors:
                ctx.set(dut.x.payload, [int(v) for v in x[sent]])
                ctx.set(dut.y.payload, [int(v) for v in y[sent]])
            ctx.set(dut.x.valid, sent < vectors and rng.random() < 0.7)
            ctx.set(dut.y.valid, sent < vectors and rng.random() < 0.8)
            ctx.set(dut.o.ready, rng.random() < 0.6)
            took = ctx.get(dut.x.valid) and ctx.get(dut.x.ready)
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                out.append([int(v) for v in ctx.get(dut.o.payload)])
            await ctx.tick()
            sent += bool(took)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    if op == VaOpcode.ADD:
        expect = golden.add_bf16(x, y)
    elif op == VaOpcode.MUL:
        expect = golden.mul_bf16(x, y)
    else:
        expect = golden.scale_bf16(x, scalar)
    assert np.array_equal(np.array(out, np.uint16), expect)


D = golden.SUM_INTERLEAVE


def run_reduction(op, bits, lanes, rng, gaps=0.3, width=None):
    """Feed ``bits`` to a LaneEngine(lanes, width) as one reduction (random input gaps, the
    last beat padded with random bits the engine must ignore); return its output beats."""
    count = len(bits)
    dut = LaneEngine(lanes, width)
    beat = dut.width
    beats = -(-count // beat)
    padded = rng.integers(0, 1 << 16, beats * beat).astype(np.uint16)
    padded[:count] = bits
    result = []

    async def bench(ctx):
        ctx.set(dut.op, op)
        ctx.set(dut.count, count)
        await ctx.tick()
        sent = 0
        ctx.set(dut.o.ready, 1)
        for _ in range(3 * beats + 40 * (lanes.bit_length() + D) + 100):
            if sent < beats:
                ctx.set(dut.x.payload, [int(v) for v in padded[sent * beat:(sent + 1) * beat]])
            ctx.set(dut.x.valid, sent < beats and rng.random() >= gaps)
            took = ctx.get(dut.x.valid) and ctx.get(dut.x.ready)
            if ctx.get(dut.o.valid):
                result.append([int(v) for v in ctx.get(dut.o.payload)])
            await ctx.tick()
            sent += bool(took)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return result


def sum_operands(rng, count):
    """bf16 values, half of them 2**8..2**14 times a normal value, half 2**-6..1 times
    one, random signs: the binary32 partial sums round (so the order shows) and a lost
    vector changes the sum (test_sum_order_is_visible)."""
    big = rng.random(count) < 0.5
    scale = np.where(big, 2.0 ** rng.integers(8, 15, count), 2.0 ** rng.integers(-6, 1, count))
    return float_to_bf16_rne(rng.standard_normal(count) * scale)


@pytest.mark.parametrize("width", [None, 2], ids=["full", "narrow"])
@pytest.mark.parametrize("count", [1, LANES - 1, 3 * LANES, 5 * LANES + 3])
def test_sum(count, width):
    """SUM with the lanes in hardware (width None) and two lanes a beat."""
    rng = np.random.default_rng(count * 100)
    bits = sum_operands(rng, count)
    result = run_reduction(VaOpcode.SUM, bits, LANES, rng, width=width)
    assert len(result) == 1
    assert result[0][0] | result[0][1] << 16 == golden.sum_bf16(bits, LANES)


SUM_CASES = [(4, 1, 0), (4, D - 1, 3), (4, D, 0), (4, D + 1, 0), (4, D + 1, 1), (4, 2 * D, 2),
             (8, D, 5), (8, 37, 0), (8, 300, 7), (16, 3 * D + 2, 9)]


def sum_case(lanes, vectors, tail):
    """The operands of a SUM of ``vectors`` vectors, the last one ``tail`` elements long
    (0: full)."""
    rng = np.random.default_rng(1000 * lanes + 10 * vectors + tail)
    return sum_operands(rng, (vectors - 1) * lanes + (tail or lanes)), rng


@pytest.mark.parametrize("lanes, vectors, tail", SUM_CASES)
def test_sum_interleave(lanes, vectors, tail):
    """SUM at counts around the interleave (fewer than D vectors, exactly D, D + 1, a
    partial last vector) and long runs, with and without input gaps, bit for bit against
    golden.va.sum_bf16 (D = SUM_INTERLEAVE partials a lane)."""
    bits, rng = sum_case(lanes, vectors, tail)
    expect = golden.sum_bf16(bits, lanes)
    for gaps in (0.0, 0.4):
        result = run_reduction(VaOpcode.SUM, bits, lanes, rng, gaps)
        assert len(result) == 1
        assert result[0][0] | result[0][1] << 16 == expect, f"gaps {gaps}"


# (L, width, vectors of L, tail): the bus-rate engines of the VA (L=32 on a 128-bit bus:
# 8 lanes a beat) around the interleave of D·L/width words and past it.
NARROW_SUM_CASES = [(32, 8, 1, 5), (32, 8, D - 1, 0), (32, 8, D, 31), (32, 8, D + 1, 1),
                    (32, 8, 40, 13), (32, 4, 2 * D + 1, 3), (16, 4, D + 1, 0), (8, 2, 3, 7)]


@pytest.mark.parametrize("lanes, width, vectors, tail", NARROW_SUM_CASES)
def test_sum_narrow(lanes, width, vectors, tail):
    """SUM of L lanes, ``width`` elements a beat: the golden model's order for L lanes
    (golden.va.sum_bf16(x, L)), with and without input gaps."""
    bits, rng = sum_case(lanes, vectors, tail)
    expect = golden.sum_bf16(bits, lanes)
    for gaps in (0.0, 0.4):
        result = run_reduction(VaOpcode.SUM, bits, lanes, rng, gaps, width)
        assert len(result) == 1
        assert result[0][0] | result[0][1] << 16 == expect, f"gaps {gaps}"


@pytest.mark.parametrize("lanes, vectors, tail", SUM_CASES)
def test_sum_drop_is_visible(lanes, vectors, tail):
    """test_sum_interleave's operands can fail it: leaving out any one vector (what a
    partial read before its last write would do) changes the sum."""
    bits, _ = sum_case(lanes, vectors, tail)
    expect = golden.sum_bf16(bits, lanes)
    for v in range(vectors):
        without = bits.copy()
        without[v * lanes:(v + 1) * lanes] = 0
        assert golden.sum_bf16(without, lanes) != expect, f"vector {v}"


@pytest.mark.parametrize("lanes, width", [(8, 1), (8, 3), (4, 8), (6, 2)])
def test_bad_parameters(lanes, width):
    with pytest.raises(ValueError):
        check_engine(lanes, width)       # what LaneEngine(lanes, width) checks first


def test_sum_order_is_visible():
    """Some long case of test_sum_interleave tells each other order apart (sum_bf16(x, L)
    keeps D·L partials, so L/D, L/2 and 2L stand for one partial a lane, half and twice
    the interleave)."""
    long_cases = [sum_case(*case)[0] for case in SUM_CASES if case[1] > 4 * D]
    lanes_of = [case[0] for case in SUM_CASES if case[1] > 4 * D]
    for other in (lambda lanes: lanes // D, lambda lanes: lanes // 2, lambda lanes: 2 * lanes):
        assert any(golden.sum_bf16(bits, other(lanes)) != golden.sum_bf16(bits, lanes)
                   for bits, lanes in zip(long_cases, lanes_of, strict=True))


@pytest.mark.parametrize("op, width, s", [
    (VaOpcode.MUL_MEM, None, 0x3FC0), (VaOpcode.MUL_MEM, 4, 0x7F80),
    (VaOpcode.MUL_MEM, None, 0x0040), (VaOpcode.ADD_MEM, None, 0x8000),
    (VaOpcode.ADD_MEM, 4, 0x7FC1), (VaOpcode.ADD_MEM, None, None)],
    ids=["MUL_MEM-1.5", "MUL_MEM-narrow-inf", "MUL_MEM-subnormal", "ADD_MEM--0",
         "ADD_MEM-narrow-nan", "ADD_MEM-random"])
def test_scalar_from_memory(op, width, s):
    """MUL_MEM / ADD_MEM: the one word on ``y`` (offered late, lane 0 the scalar, the
    other lanes random) is taken once, before the first beat of x; then x beats with
    random gaps and output back-pressure give golden.va mul_mem_bf16 / add_mem_bf16 of
    that lane-0 value; the SCALAR input (random) is not used."""
    rng = np.random.default_rng(int(op) * 7 + (s or 1))
    dut = LaneEngine(LANES, width)
    vectors = 10
    x = rng.integers(0, 1 << 16, (vectors, dut.width)).astype(np.uint16)
    y = rng.integers(0, 1 << 16, dut.width).astype(np.uint16)
    if s is not None:
        y[0] = s
    out, y_beats = [], []

    async def bench(ctx):
        ctx.set(dut.op, op)
        ctx.set(dut.scalar, int(rng.integers(0, 1 << 16)))
        await ctx.tick()
        sent = 0
        for cycle in range(500):
            if len(out) == vectors:
                break
            if sent < vectors:
                ctx.set(dut.x.payload, [int(v) for v in x[sent]])
            ctx.set(dut.x.valid, sent < vectors and rng.random() < 0.7)
            ctx.set(dut.y.payload, [int(v) for v in y])
            ctx.set(dut.y.valid, not y_beats and cycle >= 3)
            ctx.set(dut.o.ready, rng.random() < 0.6)
            took = ctx.get(dut.x.valid) and ctx.get(dut.x.ready)
            if cycle < 3:
                assert not took, "x taken before the scalar"
            if ctx.get(dut.y.valid) and ctx.get(dut.y.ready):
                y_beats.append(cycle)
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                out.append([int(v) for v in ctx.get(dut.o.payload)])
            await ctx.tick()
            sent += bool(took)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(y_beats) == 1
    fn = golden.mul_mem_bf16 if op == VaOpcode.MUL_MEM else golden.add_mem_bf16
    assert np.array_equal(np.array(out, np.uint16), fn(x, y[0]))
