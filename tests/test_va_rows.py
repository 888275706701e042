"""Amaranth-simulator tests of the VA's row units (hdl/va/rows.py) against golden.va.

The cocotb regression runs every row command through the whole top; these tests drive
:class:`RopeLanes` and :class:`RowUnit` directly with random words and back-pressure, so a
failure points at the unit. Seeds are in the test ids.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden import va as golden
from hdl.va.rows import RopeLanes, RowUnit
from spec.codes import VaOpcode

WIDTH = 128
LANES = WIDTH // 16


def bf16(rng, n, ties=False):
    if ties:
        pool = np.array([0x0000, 0x8000, 0x3F80, 0xBF80, 0x4000, 0x7FC0, 0xFF80], np.uint16)
        return pool[rng.integers(0, len(pool), n)]
    return (rng.standard_normal(n).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


@pytest.mark.parametrize("split", [False, True], ids=["adjacent", "split"])
@pytest.mark.parametrize("seed", range(2), ids=lambda s: f"seed{s}")
def test_rope_lanes(seed, split):
    """Random RoPE words (adjacent: both halves of the cos/sin word; split-half: both
    halves of the result), random output back-pressure, against golden.va.rope_bf16."""
    rng = np.random.default_rng(seed)
    words = 6
    n = words * LANES
    x, c, s = bf16(rng, n), bf16(rng, n // 2), bf16(rng, n // 2)
    half_words = words // 2
    if split:
        jobs = [(second, 0, x[w * LANES:(w + 1) * LANES],
                 x[n // 2 + w * LANES:n // 2 + (w + 1) * LANES],
                 c[w * LANES:(w + 1) * LANES], s[w * LANES:(w + 1) * LANES])
                for second in (0, 1) for w in range(half_words)]
    else:
        jobs = [(0, w % 2, x[w * LANES:(w + 1) * LANES], np.zeros(LANES, np.uint16),
                 c[(w // 2) * LANES:(w // 2 + 1) * LANES],
                 s[(w // 2) * LANES:(w // 2 + 1) * LANES])
                for w in range(words)]
    dut = RopeLanes(WIDTH)
    out = []

    async def bench(ctx):
        ctx.set(dut.split, split)
        pending = list(jobs)
        while len(out) < len(jobs):
            if pending:
                second, half, a, b, cc, ss = pending[0]
                ctx.set(dut.second, second)
                ctx.set(dut.half, half)
                for port, v in ((dut.i.payload.a, a), (dut.i.payload.b, b),
                                (dut.i.payload.c, cc), (dut.i.payload.s, ss)):
                    ctx.set(port, [int(e) for e in v])
            ctx.set(dut.i.valid, bool(pending) and rng.random() < 0.7)
            ctx.set(dut.o.ready, rng.random() < 0.6)
            took = ctx.get(dut.i.valid) and ctx.get(dut.i.ready)
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                out.append(ctx.get(dut.o.payload))
            await ctx.tick()
            if took:
                pending.pop(0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    got = np.frombuffer(b"".join(int(w).to_bytes(WIDTH // 8, "little") for w in out), np.uint16)
    assert np.array_equal(got, golden.rope_bf16(x, c, s, split))


def run_top(op, x, k, fn_lanes, rng):
    """One TOPK or MAX of ``x`` through RowUnit(WIDTH, fn_lanes), a word offered every
    cycle (the last padded with random bits); the words it writes and its ``second``
    pulses. Checks that it takes a word every DATA_WIDTH/(16·fn_lanes) cycles."""
    n = len(x)
    padded = np.concatenate([x, rng.integers(0, 1 << 16, -n % LANES).astype(np.uint16)])
    dut = RowUnit(WIDTH, fn_lanes)
    cycles_a_word = LANES // (fn_lanes or LANES)
    out, seconds = [], []

    async def bench(ctx):
        ctx.set(dut.op, op)
        ctx.set(dut.n, n)
        ctx.set(dut.k, k)
        ctx.set(dut.o.ready, 1)
        for w in range(len(padded) // LANES):
            word = int.from_bytes(padded[w * LANES:(w + 1) * LANES].tobytes(), "little")
            ctx.set(dut.x.payload, word)
            ctx.set(dut.x.valid, 1)
            waited = 0
            while not ctx.get(dut.x.ready):
                waited += 1
                await ctx.tick()
            assert waited == (cycles_a_word - 1 if w else 0)    # a word every cycles_a_word
            await ctx.tick()
        ctx.set(dut.x.valid, 0)
        for _ in range(200):
            if ctx.get(dut.o.valid):
                out.append(ctx.get(dut.o.payload))
            seconds.append(ctx.get(dut.second))
            ctx.set(dut.writer_done, len(out) >= 1)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out, seconds


@pytest.mark.parametrize("fn_lanes", [None, 2], ids=["bus", "fn2"])
@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
def test_topk(seed, fn_lanes):
    """RowUnit's TOPK (per-lane lists, then the merge): values and indices of golden.va
    topk_bf16 for every k on tie-heavy or random rows; with the bus's lanes (a word every
    cycle) and with two (FN_LANES=2: a word every four cycles)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    x = bf16(rng, n, ties=seed % 2 == 0)
    k = int(rng.integers(1, min(8, n) + 1))
    out, seconds = run_top(VaOpcode.TOPK, x, k, fn_lanes, rng)
    values, index = golden.topk_bf16(x, k)
    assert len(out) == 3 and sum(seconds) == 1, f"{len(out)} words"
    got_values = np.frombuffer(out[0].to_bytes(16, "little"), np.uint16)[:k]
    got_index = np.frombuffer(b"".join(w.to_bytes(16, "little") for w in out[1:]), np.int32)[:k]
    assert np.array_equal(got_values, values), f"values {got_values} vs {values}"
    assert np.array_equal(got_index, index), f"indices {got_index} vs {index}"


@pytest.mark.parametrize("fn_lanes", [None, 2], ids=["bus", "fn2"])
@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
def test_max(seed, fn_lanes):
    """MAX is TOPK's first value: one result word (lane 0 = golden.va.max_bf16, ties to
    the lowest index, so -0 or +0 and which NaN as golden), no second result."""
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 60))
    x = bf16(rng, n, ties=seed % 2 == 0)
    x[rng.random(n) < 0.2] = rng.choice([0x0000, 0x8000, 0x7FC1, 0xFFC0])
    out, seconds = run_top(VaOpcode.MAX, x, 0, fn_lanes, rng)
    assert len(out) == 1 and not any(seconds), f"{len(out)} words"
    assert out[0] & 0xFFFF == golden.max_bf16(x), f"{out[0] & 0xFFFF:#06x}"
