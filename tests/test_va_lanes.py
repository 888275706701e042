"""Amaranth-simulator tests of the VA's lane engine (hdl/va/lanes.py): elementwise ADD,
MUL and SCALE through its pipeline and output FIFO with random input gaps and output
back-pressure, and the reductions SUM and MAX (the SUM loop through the pipelined adder),
bit for bit against golden.va (the cocotb regression covers the rest)."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden import va as golden
from hdl.codes import VaOpcode
from hdl.va.lanes import LaneEngine

LANES = 8


@pytest.mark.parametrize("op", [VaOpcode.ADD, VaOpcode.MUL, VaOpcode.SCALE],
                         ids=lambda op: op.name)
def test_elementwise_backpressure(op):
    rng = np.random.default_rng(int(op))
    vectors = 12
    x = rng.integers(0, 1 << 16, (vectors, LANES)).astype(np.uint16)
    y = rng.integers(0, 1 << 16, (vectors, LANES)).astype(np.uint16)
    scalar = int(rng.integers(0, 1 << 16))
    dut = LaneEngine(LANES)
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


@pytest.mark.parametrize("count", [1, LANES - 1, 3 * LANES, 5 * LANES + 3])
@pytest.mark.parametrize("op", [VaOpcode.SUM, VaOpcode.MAX], ids=lambda op: op.name)
def test_reductions(op, count):
    rng = np.random.default_rng(count * 100 + int(op))
    bits = rng.integers(0, 1 << 16, count).astype(np.uint16)
    if op == VaOpcode.SUM:          # finite values of mixed magnitudes (roundings matter)
        bits = golden.f32_to_bf16(golden.bf16_in(bits)) & 0xBFFF
        bits[rng.random(count) < 0.3] ^= 0x0080
    else:                           # ties, -0/+0 and a NaN or two
        bits[rng.random(count) < 0.3] = bits[0]
        bits[rng.random(count) < 0.1] = rng.choice([0x0000, 0x8000, 0x7FC1])
    vectors = -(-count // LANES)
    padded = np.zeros(vectors * LANES, np.uint16)
    padded[:count] = bits
    dut = LaneEngine(LANES)
    result = []

    async def bench(ctx):
        ctx.set(dut.op, op)
        ctx.set(dut.count, count)
        await ctx.tick()
        sent = 0
        ctx.set(dut.o.ready, 1)
        for _ in range(40 * vectors + 100):
            if sent < vectors:
                ctx.set(dut.x.payload, [int(v) for v in padded[sent * LANES:(sent + 1) * LANES]])
            ctx.set(dut.x.valid, sent < vectors and rng.random() < 0.7)
            took = ctx.get(dut.x.valid) and ctx.get(dut.x.ready)
            if ctx.get(dut.o.valid):
                result.append([int(v) for v in ctx.get(dut.o.payload)])
            await ctx.tick()
            sent += bool(took)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(result) == 1
    if op == VaOpcode.SUM:
        assert result[0][0] | result[0][1] << 16 == golden.sum_bf16(bits, LANES)
    else:
        assert result[0][0] == golden.max_bf16(bits)
