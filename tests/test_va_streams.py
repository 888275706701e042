"""Amaranth-simulator tests of the VA's stream units (hdl/va/streams.py).

Random byte streams at random offsets go through a reader-side realigner and back
through a writer-side one, with random valid and ready patterns; the bytes that come out
must be the bytes that went in (a stated invariant, independent of the RTL's formulas).
Seeds are in the test ids.
"""

import random

import pytest
from amaranth.sim import Simulator

from hdl.va.streams import Realign, words_for

WIDTH = 64
BB = WIDTH // 8


def words_of(data):
    """Little-endian bus words of a byte string padded with zeros."""
    data = data + bytes(-len(data) % BB)
    return [int.from_bytes(data[i:i + BB], "little") for i in range(0, len(data), BB)]


def bytes_of(words):
    return b"".join(w.to_bytes(BB, "little") for w in words)


async def feed(ctx, port, items, rng):
    for item in items:
        ctx.set(port.payload, item)
        ctx.set(port.valid, 1)
        await ctx.tick().until(port.ready)
        ctx.set(port.valid, 0)
        while rng.random() < 0.3:
            await ctx.tick()


async def drain(ctx, port, count, rng, out):
    while len(out) < count:
        ready = rng.random() < 0.7
        ctx.set(port.ready, ready)
        await ctx.delay(1e-9)
        if ready and ctx.get(port.valid):
            out.append(ctx.get(port.payload))
        await ctx.tick()
    ctx.set(port.ready, 0)


def run(dut, *benches):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    for bench in benches:
        sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("seed", range(12), ids=lambda s: f"seed{s}")
def test_reader_realign_drops_the_offset(seed):
    """Words read from an aligned address hold the stream from byte ``offset``: the
    realigner returns exactly the stream, from byte 0."""
    rng = random.Random(seed)
    offset, nbytes = rng.randrange(BB), rng.randrange(1, 80)
    stream = rng.randbytes(nbytes)
    raw = words_of(bytes(offset) + stream)
    dut = Realign(WIDTH)
    out = []

    async def source(ctx):
        ctx.set(dut.shift, offset or BB)
        ctx.set(dut.absorb, offset != 0)
        ctx.set(dut.words_in, words_for(offset, nbytes, BB))
        ctx.set(dut.words_out, words_for(0, nbytes, BB))
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await feed(ctx, dut.i, raw, rng)

    async def sink(ctx):
        await ctx.tick()
        await drain(ctx, dut.o, words_for(0, nbytes, BB), rng, out)

    run(dut, source, sink)
    assert bytes_of(out)[:nbytes] == stream, f"seed {seed}"


@pytest.mark.parametrize("seed", range(12), ids=lambda s: f"seed{s}")
def test_writer_realign_adds_the_offset(seed):
    rng = random.Random(seed)
    offset, nbytes = rng.randrange(BB), rng.randrange(1, 80)
    stream = rng.randbytes(nbytes)
    dut = Realign(WIDTH)
    out = []
    total = words_for(offset, nbytes, BB)

    async def source(ctx):
        ctx.set(dut.shift, BB - offset)
        ctx.set(dut.absorb, 0)
        ctx.set(dut.words_in, words_for(0, nbytes, BB))
        ctx.set(dut.words_out, total)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await feed(ctx, dut.i, words_of(stream), rng)

    async def sink(ctx):
        await ctx.tick()
        await drain(ctx, dut.o, total, rng, out)

    run(dut, source, sink)
    assert bytes_of(out)[offset:offset + nbytes] == stream, f"seed {seed}"
