"""Amaranth-simulator tests of the layer program's TOPK_WIDE on the whole
:class:`~hdl.va.core.VectorCore`, against :func:`golden.va.execute`.

TOPK_WIDE repeats TOPK's pass (hdl/va/rows.py) once per 8 results and restarts the writer
twice a pass, so a unit test of RowUnit alone would not see the core's writer addresses;
these run the core on :class:`sim.bfm.PortMemory` (random latency and back-pressure) and
compare every byte of the memory. The cocotb benches (tests/va_tb.py) run the same
commands through the top on both simulators. Seeds are in the test ids.
"""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden.va import MemoryWindow, VaCommand, execute
from hdl.va.core import VectorCore
from sim.bfm.memport import PortMemory
from spec.codes import ErrorCode, VaOpcode

ORIGIN = 0x7F00_0000_0000
SIZE = 1 << 16
SEEDS = [pytest.param(0, id="seed0"), pytest.param(1, id="seed1", marks=pytest.mark.regress)]
"""seed1 of each random test runs in ``make regress`` only (each run is about a minute)."""
FIELDS = ("op", "esize", "length", "src", "src2", "src3", "dst", "dst2", "stride", "scalar",
          "k", "index_limit", "rows", "row_stride", "split_half")


def run_core(cmds, image, rng, *, width=64, fn_lanes=None, latency=5, pause=0.2):
    """Run ``cmds`` one after the other on one core; return each (code, addr), the
    memory after each and the cycles from launch to the end of each."""
    dut = VectorCore(8, width, fn_lanes)
    mem = image.copy()
    outcomes, memories, cycles = [], [], []

    async def run_one(ctx, cmd):
        for name in FIELDS:
            ctx.set(getattr(dut.cmd, name), int(getattr(cmd, name)))
        await ctx.delay(1e-9)
        if ctx.get(dut.refuse_code):
            return (ErrorCode(ctx.get(dut.refuse_code)), ctx.get(dut.refuse_addr)), 0
        ctx.set(dut.launch, 1)
        await ctx.tick()
        ctx.set(dut.launch, 0)
        for cycle in range(200_000):
            _, _, finish, fail, code, addr = await ctx.tick().sample(
                dut.finish, dut.fail, dut.fail_code, dut.fail_addr)
            if fail:
                return (ErrorCode(code), addr), cycle + 1
            if finish:
                return (ErrorCode.NONE, 0), cycle + 1
        raise AssertionError(f"no end ({cmd})")

    async def bench(ctx):
        for cmd in cmds:
            outcome, took = await run_one(ctx, cmd)
            outcomes.append(outcome)
            cycles.append(took)
            memories.append(mem.copy())
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    PortMemory(dut.mem, width, mem, origin=ORIGIN, latency=(latency, latency + 3), pause=pause,
               rng=rng).add_to(sim)
    sim.run()
    return outcomes, memories, cycles


def check_all(cmds, image, rng, **kwargs):
    """Run ``cmds`` on the core and on the golden model; every outcome and byte equal."""
    outcomes, memories, _ = run_core(cmds, image, rng, **kwargs)
    golden = image.copy()
    for cmd, got, after in zip(cmds, outcomes, memories, strict=True):
        code, addr = execute(cmd, MemoryWindow(ORIGIN, golden))
        assert got == (code, addr & 0xFFFFFFFF), f"{got}, expected {code.name} {addr:#x}: {cmd}"
        bad = np.nonzero(after != golden)[0]
        assert not len(bad), f"{len(bad)} bytes differ, first at {bad[0]:#x} ({cmd})"


def row(rng, n, kind):
    """bf16 bits: normal values, any bits, or tie-heavy (±0, repeats, NaN, ±inf)."""
    gen = np.random.default_rng(rng.getrandbits(32))
    if kind == "bits":
        return gen.integers(0, 1 << 16, n).astype(np.uint16)
    if kind == "ties":
        pool = np.array([0x0000, 0x8000, 0x3F80, 0xBF80, 0x4000, 0x7FC0, 0xFF80, 0x7F80,
                         0xFFC1][:rng.randrange(2, 10)], np.uint16)
        return pool[gen.integers(0, len(pool), n)]
    return (gen.standard_normal(n).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def topk_wide(rng, image, n, k, kind):
    src = ORIGIN + 2 * rng.randrange(0, 2048)
    dst = ORIGIN + 0x2000 + 2 * rng.randrange(0, 1024)
    dst2 = ORIGIN + 0x4000 + 4 * rng.randrange(0, 512)
    image[src - ORIGIN:][:2 * n] = row(rng, n, kind).view(np.uint8)
    return VaCommand(VaOpcode.TOPK_WIDE, n, src=src, dst=dst, dst2=dst2, k=k)


@pytest.mark.parametrize("width, fn_lanes", [(64, None), (128, None), (64, 2)],
                         ids=["dw64", "dw128", "dw64-fn2"])
@pytest.mark.parametrize("seed", SEEDS)
def test_topk_wide(seed, width, fn_lanes):
    """TOPK_WIDE with K = 1, 8, 9, 16, 17, LENGTH and random K up to 40 on rows of normal
    values, random bits (NaN, inf, subnormals) and ties (the lowest index first, NaN
    last, the picks past the last non-NaN entry NaNs in index order); random addresses
    in their bus words; a TOPK and a MAX after it (the per-pass state is reset); back to
    back, random memory latency and back-pressure."""
    rng = random.Random(seed)
    image = np.frombuffer(rng.randbytes(SIZE), np.uint8).copy()
    cmds = []
    for k, n in ((1, 1), (8, 8), (9, 9), (16, 40), (17, 17), (3, 50)):
        cmds.append(topk_wide(rng, image, n, k, rng.choice(("normal", "bits", "ties"))))
    for kind in ("normal", "bits", "ties"):
        n = rng.randrange(1, 120)
        cmds.append(topk_wide(rng, image, n, rng.randrange(1, min(n, 40) + 1), kind))
    top = topk_wide(rng, image, 30, 5, "ties")
    cmds += [VaCommand(VaOpcode.TOPK, 30, src=top.src, dst=top.dst, dst2=top.dst2, k=5),
             VaCommand(VaOpcode.MAX, 30, src=top.src, dst=top.dst)]
    check_all(cmds, image, rng, width=width, fn_lanes=fn_lanes)


def test_topk_wide_refusals():
    """K = 0, K > LENGTH, LENGTH 0 or > 65 536, misaligned DST / DST2, a result range past
    2**48 (the value range first): the golden model's code and ERR_ADDR at START."""
    rng = random.Random(7)
    image = np.zeros(SIZE, np.uint8)
    o, top = ORIGIN, 1 << 48
    w = VaOpcode.TOPK_WIDE
    cmds = [
        VaCommand(w, 8, src=o, dst=o + 64, dst2=o + 128, k=0),
        VaCommand(w, 8, src=o, dst=o + 64, dst2=o + 128, k=9),
        VaCommand(w, 0, src=o, dst=o + 64, dst2=o + 128, k=1),
        VaCommand(w, 65537, src=o, dst=o + 64, dst2=o + 128, k=9),
        VaCommand(w, 20, src=o, dst=o + 64, dst2=o + 130, k=12),
        VaCommand(w, 20, src=o, dst=o + 65, dst2=o + 130, k=12),
        VaCommand(w, 20, src=o + 1, dst=o + 65, dst2=o + 128, k=12),
        VaCommand(w, 20, src=o, dst=top - 20, dst2=o + 128, k=12),
        VaCommand(w, 20, src=o, dst=o + 64, dst2=top - 44, k=12),
        VaCommand(w, 20, src=o, dst=top - 24, dst2=top - 40, k=12),
        VaCommand(w, 1 << 16, src=o, dst=o + 64, dst2=o + 128, k=1 << 17),
    ]
    outcomes, _, _ = run_core(cmds, image, rng)
    for cmd, got in zip(cmds, outcomes, strict=True):
        code, addr = execute(cmd, MemoryWindow(ORIGIN, image.copy()))
        assert code != ErrorCode.NONE and got == (code, addr & 0xFFFFFFFF), f"{got}: {cmd}"


F32_EDGES = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF,
             0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x3F800000,
             0x3F808000, 0x0C000000, 0x73000000, 0x3C010204]
"""binary32 scales for DEQUANTIZE_MEM: zeros, subnormals (read as zeros), the largest
finite, infinities, NaNs, 1, a product near the bottom (2**-103 · 2**-103 flushes)
and the top (2**103 · 2**103 overflows)."""


def dequantize_mem(rng, image, n, row_scale, scale):
    src = ORIGIN + 4 * rng.randrange(0, 1024)
    src2 = ORIGIN + 0x1800 + 4 * rng.randrange(0, 64)
    dst = ORIGIN + 0x2000 + 2 * rng.randrange(0, 1024)
    gen = np.random.default_rng(rng.getrandbits(32))
    ints = gen.integers(-(1 << 31), 1 << 31, n, dtype=np.int64)
    small = gen.integers(-300, 300, n)
    image[src - ORIGIN:][:4 * n] = np.where(gen.random(n) < 0.5, ints, small).astype(
        np.int32).view(np.uint8)
    image[src2 - ORIGIN:][:4] = np.array([row_scale], np.uint32).view(np.uint8)
    return VaCommand(VaOpcode.DEQUANTIZE_MEM, n, src=src, src2=src2, dst=dst, scalar=scale)


@pytest.mark.parametrize("width, fn_lanes", [(64, None), (128, None), (64, 2)],
                         ids=["dw64", "dw128", "dw64-fn2"])
@pytest.mark.parametrize("seed", SEEDS)
def test_dequantize_mem(seed, width, fn_lanes):
    """DEQUANTIZE_MEM at lengths 1, 2, 3, 9 and random ones with random row scales at
    SRC2 (anywhere in its bus word) times random SCALARs, and the binary32 edges on
    either side (NaN, inf × 0, flush, overflow); a DEQUANTIZE after it (its scale the
    SCALAR register again)."""
    rng = random.Random(seed)
    image = np.frombuffer(rng.randbytes(SIZE), np.uint8).copy()
    normal = lambda: int(np.float32(10.0 ** rng.uniform(-6, 3)).view(np.uint32))
    cmds = [dequantize_mem(rng, image, n, normal(), normal()) for n in (1, 2, 3, 9)]
    cmds += [dequantize_mem(rng, image, rng.randrange(1, 200), rng.getrandbits(32),
                            rng.getrandbits(32)) for _ in range(2)]
    for _ in range(6):
        a, b = rng.choice(F32_EDGES), rng.choice(F32_EDGES + [normal()])
        cmds.append(dequantize_mem(rng, image, rng.randrange(1, 20), *rng.sample((a, b), 2)))
    last = cmds[-1]
    cmds.append(VaCommand(VaOpcode.DEQUANTIZE, last.length, src=last.src, dst=last.dst,
                          scalar=normal()))
    check_all(cmds, image, rng, width=width, fn_lanes=fn_lanes)


def test_dequantize_mem_refusals():
    """LENGTH 0 or > 65 536, a misaligned SRC / SRC2 / DST (in that order), a range past
    2**48 (before any misaligned address): the golden model's code and ERR_ADDR."""
    rng = random.Random(8)
    image = np.zeros(SIZE, np.uint8)
    o, top = ORIGIN, 1 << 48
    d = VaOpcode.DEQUANTIZE_MEM
    cmds = [
        VaCommand(d, 0, src=o, src2=o + 512, dst=o + 1024),
        VaCommand(d, 65537, src=o, src2=o + 512, dst=o + 1024),
        VaCommand(d, 8, src=o + 2, src2=o + 512, dst=o + 1024),
        VaCommand(d, 8, src=o, src2=o + 514, dst=o + 1024),
        VaCommand(d, 8, src=o, src2=o + 512, dst=o + 1025),
        VaCommand(d, 8, src=o, src2=o + 513, dst=o + 1025),       # SRC2 before DST
        VaCommand(d, 8, src=o + 2, src2=o + 513, dst=o + 1025),   # SRC first
        VaCommand(d, 8, src=top - 30, src2=o + 512, dst=o + 1024),
        VaCommand(d, 8, src=o, src2=top - 2, dst=o + 1024),
        VaCommand(d, 8, src=o + 2, src2=top - 2, dst=o + 1024),   # range first
        VaCommand(d, 8, src=o, src2=top - 4, dst=top - 14),       # SRC2 fits, DST not
    ]
    outcomes, _, _ = run_core(cmds, image, rng)
    for cmd, got in zip(cmds, outcomes, strict=True):
        code, addr = execute(cmd, MemoryWindow(ORIGIN, image.copy()))
        assert code != ErrorCode.NONE and got == (code, addr & 0xFFFFFFFF), f"{got}: {cmd}"
