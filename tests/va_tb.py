"""cocotb tests of the ``v4hw_va`` top (L from V4HW_VA_LANES, 128-bit bus), Icarus and Verilator.

``tests/test_va_cocotb.py`` runs each test below on both simulators. Every test builds a
:class:`sim.va_driver.VaBench`, draws its random choices from :func:`sim.seed.test_seed`
(``V4HW_SEED=<n>`` reruns a case), and every command goes through ``VaBench.check``:
outcome and ERR_ADDR against :func:`golden.va.execute`, the whole memory window byte for
byte. Icarus is about 50 times slower, so lengths and counts are smaller there.
"""

import os
from collections import Counter

import cocotb
import numpy as np
from cocotbext.axi import AxiResp

from golden.va import SUM_INTERLEAVE, VaCommand, clamp_scalar
from golden.va_latency import va_cycles
from hdl.va.core import RTL_OPCODES
from sim import perf
from sim.bfm import ErrorRange
from sim.seed import test_seed
from sim.va_driver import VaBench
from spec.codes import ErrorCode, VaOpcode

ICARUS = cocotb.SIM_NAME.lower().startswith("icarus")
L = int(os.environ.get("V4HW_VA_LANES", "32"))     # the DUT's L (tests/test_va_cocotb.py)
FN_LANES = int(os.environ.get("V4HW_VA_FN_LANES", "0")) or None    # None: DATA_WIDTH/16
BUS = 16
ELEMENTWISE = (VaOpcode.ADD, VaOpcode.MUL, VaOpcode.SCALE, VaOpcode.EXP, VaOpcode.SILU,
               VaOpcode.SUM, VaOpcode.MAX)


async def new_bench(dut, **kwargs):
    rng = test_seed()
    bench = VaBench(dut, lanes=L, data_width=8 * BUS, fn_lanes=FN_LANES, rng=rng, **kwargs)
    await bench.start()
    return bench, rng


def elementwise(bench, rng, op, n, *, aligned=False):
    """A command on random operands at random (2-byte aligned) places in the window."""
    region = bench.size // 4
    def place(mask):
        return rng.randrange(0, region - 2 * n - 64) & ~(BUS - 1 if aligned else mask)
    src = bench.origin + place(1)
    src2 = bench.origin + region + place(1)
    dst = bench.origin + 2 * region + place(3 if op == VaOpcode.SUM else 1)
    return VaCommand(op, n, src=src, src2=src2, dst=dst, scalar=rng.getrandbits(16))


def gather(bench, rng, n, esize, stride, op=VaOpcode.GATHER):
    """A strided GATHER (or SCATTER) at random element-aligned places in the window."""
    span = (n - 1) * stride + (1 << esize)
    strided = bench.origin + (rng.randrange(0, bench.size // 2 - span) >> esize << esize)
    dense = bench.origin + bench.size // 2 + (rng.randrange(0, bench.size // 4) >> esize << esize)
    if op == VaOpcode.SCATTER:
        return VaCommand(op, n, src=dense, dst=strided, esize=esize, stride=stride)
    return VaCommand(op, n, src=strided, dst=dense, esize=esize, stride=stride)


@cocotb.test()
async def elementwise_lengths(dut):
    """ADD, MUL, SCALE, EXP, SILU, SUM, MAX at lengths 1, L-1, L, L+1, a few random ones,
    random alignments;
    random bits include NaNs, infinities and subnormals (Icarus: random lengths below 200,
    and the longest SUM at five interleaves of L)."""
    bench, rng = await new_bench(dut)
    lengths = [1, L - 1, L, L + 1, 2 * L + 3] + [rng.randrange(2, 200 if ICARUS else 700)
                                                 for _ in range(2)]
    for op in ELEMENTWISE:
        for n in lengths:
            await bench.check(elementwise(bench, rng, op, n, aligned=n == L))
    # Ties: MAX between -0 and +0, repeated values and NaNs (lowest index wins); SUM of zeros.
    for pool in ([0x0000, 0x8000], [0x3F80, 0x8000, 0x7FC0, 0x3F80], [0xFFC0, 0x7FC1]):
        for op in (VaOpcode.MAX, VaOpcode.SUM):
            n = rng.randrange(1, 3 * L)
            cmd = elementwise(bench, rng, op, n)
            bench.place(cmd.src, np.array([rng.choice(pool) for _ in range(n)], np.uint16))
            await bench.check(cmd)
    # SUM of finite values around its interleave: one element short of D vectors, D
    # vectors, one element more, and many.
    d = SUM_INTERLEAVE
    many = rng.randrange(4 * d * L, 5 * d * L if ICARUS else 8 * d * L)
    for n in (d * L - 1, d * L, d * L + 1, many):
        cmd = elementwise(bench, rng, VaOpcode.SUM, n)
        bench.place(cmd.src, bf16_values(rng, n))
        await bench.check(cmd)


@cocotb.test()
async def strided_moves(dut):
    """Strided gather and scatter: element sizes 1, 2, 4; strides 0 (a scatter's last
    element wins), one element, odd (bytes), 2048, random; lengths 1, L-1, L+1 and
    random at each stride (Icarus: one length a stride, one of the three and a random one
    by turns); random alignments."""
    bench, rng = await new_bench(dut, window=(0x7F00_0000_0000, 1 << 22))
    for op in (VaOpcode.GATHER, VaOpcode.SCATTER):
        for esize in (0, 1, 2):
            size = 1 << esize
            strides = [0, size, 2048, 3 * size, size * rng.randrange(1, 700)]
            if esize == 0:
                strides.append(rng.randrange(1, 200) | 1)
            for k, stride in enumerate(strides):
                edges = (1, L - 1, L + 1)
                last = rng.randrange(2, 100 if ICARUS else 300)
                if ICARUS:
                    lengths = (rng.choice(edges) if (k + esize) % 2 else last,)
                else:
                    lengths = (*edges, last)
                for n in lengths:
                    await bench.check(gather(bench, rng, n, esize, stride, op))


@cocotb.test()
async def backpressure(dut):
    """Random idle and back-pressure cycles on every memory channel, random commands
    (moves, lane-engine and row commands)."""
    bench, rng = await new_bench(dut)
    bench.set_pauses(0.3)
    for _ in range(8 if ICARUS else 30):
        if rng.random() < 0.4:
            cmd = row_command(bench, rng, rng.choice(ROWS), rng.randrange(1, 300))
        elif rng.random() < 0.4:
            esize = rng.randrange(3)
            cmd = gather(bench, rng, rng.randrange(1, 100), esize,
                         rng.randrange(0, 3000) >> esize << esize,
                         rng.choice((VaOpcode.GATHER, VaOpcode.SCATTER)))
        else:
            cmd = elementwise(bench, rng, rng.choice(ELEMENTWISE), rng.randrange(1, 300))
        await bench.check(cmd)


@cocotb.test()
async def large(dut):
    """65 536-element ADD, SCALE, SUM, MAX, SOFTMAX, RMSNORM, TOPK and GATHER_IDX, a
    2048-element gather at stride 2048 and a scatter (Verilator; on Icarus 1024 elements
    and a 256-element gather and scatter)."""
    bench, rng = await new_bench(dut, window=(0x7F00_0000_0000, 1 << 23))
    n = 1024 if ICARUS else 65536
    await bench.check(elementwise(bench, rng, VaOpcode.ADD, n))
    await bench.check(elementwise(bench, rng, VaOpcode.SCALE, n))
    await bench.check(elementwise(bench, rng, VaOpcode.SUM, n))
    await bench.check(elementwise(bench, rng, VaOpcode.MAX, n))
    for op in (VaOpcode.SOFTMAX, VaOpcode.RMSNORM, VaOpcode.TOPK):
        await bench.check(row_command(bench, rng, op, n))
    await bench.check(gather(bench, rng, 256 if ICARUS else 2048, 1, 2048))
    await bench.check(gather(bench, rng, 256 if ICARUS else 1500, 2, 2052, VaOpcode.SCATTER))
    # An indexed gather at the longest length, most indices -1 (the 65 536 indices cross
    # the bus twice; a few hundred elements move, so the run stays short).
    m = 256 if ICARUS else 65536
    await bench.check(indexed(bench, rng, VaOpcode.GATHER_IDX, m, 1, 2 * rng.randrange(1, 64),
                              skip=0.2 if ICARUS else 0.99))


@cocotb.test()
async def bad_commands(dut):
    """Each is refused at START with the golden model's code and ERR_ADDR, raises the
    interrupt, makes no memory access and writes nothing; a good command follows."""
    bench, rng = await new_bench(dut)
    o = bench.origin
    top = (1 << 48) - 64
    good = VaCommand(VaOpcode.ADD, 8, src=o, src2=o + 4096, dst=o + 8192)
    cases = [
        VaCommand(0, 8, src=o, dst=o + 64),                              # unknown opcode
        VaCommand(0xFF, 8, src=o, dst=o + 64),
        VaCommand(VaOpcode.ADD, 0, src=o, src2=o, dst=o + 64),          # length 0
        VaCommand(VaOpcode.SCALE, 65537, src=o, dst=o + 64),            # too long
        VaCommand(VaOpcode.GATHER, 4, src=o, dst=o + 64, esize=3),      # element size
        VaCommand(VaOpcode.ADD, 8, src=o + 1, src2=o, dst=o + 64),      # misaligned
        VaCommand(VaOpcode.MUL, 8, src=o, src2=o + 3, dst=o + 64),
        VaCommand(VaOpcode.SCALE, 8, src=o, dst=o + 65),
        VaCommand(VaOpcode.GATHER, 8, src=o + 2, dst=o + 64, esize=2, stride=4),
        VaCommand(VaOpcode.GATHER, 8, src=o, dst=o + 66, esize=2, stride=4),
        VaCommand(VaOpcode.GATHER, 8, src=o, dst=o + 64, esize=1, stride=3),
        VaCommand(VaOpcode.SCATTER, 8, src=o + 1, dst=o + 64, esize=1, stride=2),
        VaCommand(VaOpcode.SCATTER, 8, src=o, dst=o + 64, esize=2, stride=6),
        VaCommand(VaOpcode.SCATTER, 2, src=o, dst=top, esize=2, stride=64),
        VaCommand(VaOpcode.SCALE, 64, src=top, dst=o),                  # wraps past 2**48
        VaCommand(VaOpcode.ADD, 8, src=o, src2=o, dst=top + 62),
        VaCommand(VaOpcode.GATHER, 65536, src=top, dst=o + 64, esize=0, stride=1),
        VaCommand(VaOpcode.GATHER, 65536, src=o, dst=o + 64, esize=2, stride=0xFFFFFFFC),
    ]
    # Opcodes the golden model knows but this RTL does not run are refused too.
    unsupported = [op for op in VaOpcode if op not in RTL_OPCODES]
    for cmd in cases:
        await bench.check(cmd)
    for op in unsupported:
        outcome = await bench.run(VaCommand(op, 8, src=o, src2=o, src3=o, dst=o + 64, k=1))
        assert outcome.code == ErrorCode.BAD_COMMAND, f"{op.name}: {outcome.code.name}"
    await bench.check(good)


async def memory_error_cases(bench):
    """The AXI errors of an elementwise ADD and of the strided moves, each with the failing
    burst's first byte (a gather's or scatter's element address): a read error in the
    second operand's second burst, at a gather's element, a write error in the result's
    third burst and at a scatter's element. Returns the ADD and the SCATTER, to rerun."""
    o = bench.origin
    cmd = VaCommand(VaOpcode.ADD, 300, src=o + 6, src2=o + 0x10000 + 2, dst=o + 0x20000 + 10)
    # Second operand, second burst (16 words of 16 bytes each from the aligned start).
    bad = (o + 0x10000) + 16 * BUS + 5
    bench.ram.error_ranges = [ErrorRange(bad, bad + 1)]
    await bench.check(cmd, expect=ErrorCode.AXI_READ_ERROR,
                      err_addr=(o + 0x10000 + 16 * BUS) & 0xFFFFFFFF)
    g = VaCommand(VaOpcode.GATHER, 50, src=o + 0x30000 + 3, dst=o + 0x40000, esize=0,
                  stride=2049)
    element = g.src + 17 * g.stride
    bench.ram.error_ranges = [ErrorRange(element, element + 1)]
    await bench.check(g, expect=ErrorCode.AXI_READ_ERROR, err_addr=element & 0xFFFFFFFF)
    # Write error: the burst that holds result byte 550 (the writer's third burst).
    bench.ram.error_ranges = [ErrorRange(cmd.dst + 550, cmd.dst + 551, reads=False)]
    first = ((cmd.dst & ~(BUS - 1)) + 2 * 16 * BUS) & 0xFFFFFFFF
    await bench.check(cmd, expect=ErrorCode.AXI_WRITE_ERROR, err_addr=first)
    sc = VaCommand(VaOpcode.SCATTER, 40, src=o + 0x50000 + 2, dst=o + 0x60000 + 6, esize=1,
                   stride=1030)
    element = sc.dst + 9 * sc.stride
    bench.ram.error_ranges = [ErrorRange(element, element + 1, reads=False)]
    await bench.check(sc, expect=ErrorCode.AXI_WRITE_ERROR, err_addr=element & 0xFFFFFFFF)
    return cmd, sc


@cocotb.test()
async def axi_errors(dut):
    """A read error inside an operand, at a strided gather's element, in a SOFTMAX, a
    write error inside the result, at a scatter's element and at QUANTIZE's scale:
    AXI_READ/WRITE_ERROR with the failing burst's first byte (a gather's or scatter's
    element address), only golden bytes written before it, and the next command runs."""
    bench, rng = await new_bench(dut)
    o = bench.origin
    cmd, sc = await memory_error_cases(bench)
    # The first burst of an operand reports the operand's own first byte.
    bench.ram.error_ranges = [ErrorRange(o + 8, o + 9)]
    await bench.check(cmd, expect=ErrorCode.AXI_READ_ERROR, err_addr=(o + 6) & 0xFFFFFFFF)
    # Row commands: a read error in SOFTMAX's first pass (in its first burst of x: the
    # operand's own address), a write error at QUANTIZE's scale (the second result, DST2).
    sm = row_command(bench, rng, VaOpcode.SOFTMAX, 600)
    bench.ram.error_ranges = [ErrorRange(sm.src + 1, sm.src + 2)]
    await bench.check(sm, expect=ErrorCode.AXI_READ_ERROR, err_addr=sm.src & 0xFFFFFFFF)
    qt = row_command(bench, rng, VaOpcode.QUANTIZE, 100)
    bench.ram.error_ranges = [ErrorRange(qt.dst2, qt.dst2 + 1, reads=False)]
    await bench.check(qt, expect=ErrorCode.AXI_WRITE_ERROR, err_addr=qt.dst2 & 0xFFFFFFFF)
    bench.ram.error_ranges = []
    await bench.check(cmd)
    await bench.check(sc)
    await bench.check(sm)


@cocotb.test()
async def axi_errors_under_pauses(dut):
    """The AXI error paths of ``axi_errors`` and two refusals with random idle and
    back-pressure cycles on every memory channel: a read error in an operand's second
    burst, at a gather's element and in SOFTMAX's first pass, a write error in a result
    and at a scatter's element; MISALIGNED and BAD_COMMAND; each with the failing burst's
    first byte, only golden bytes written, and the next command runs under the same
    pauses. (The functional coverage's error × back-pressure bins: sim/fcov.py.)"""
    bench, rng = await new_bench(dut)
    bench.set_pauses(0.5)
    o = bench.origin
    cmd, sc = await memory_error_cases(bench)
    if not ICARUS:   # ten times slower there: the row command and one recheck less
        sm = row_command(bench, rng, VaOpcode.SOFTMAX, 600)
        bench.ram.error_ranges = [ErrorRange(sm.src + 1, sm.src + 2)]
        await bench.check(sm, expect=ErrorCode.AXI_READ_ERROR, err_addr=sm.src & 0xFFFFFFFF)
    bench.ram.error_ranges = []
    await bench.check(VaCommand(VaOpcode.MUL, 8, src=o, src2=o + 3, dst=o + 64))
    await bench.check(VaCommand(VaOpcode.ADD, 0, src=o, src2=o, dst=o + 64))
    await bench.check(sc)
    if not ICARUS:
        await bench.check(cmd)
    bench.set_pauses(0)


@cocotb.test()
async def start_while_busy(dut):
    """A START during a command is dropped (STATUS.START_DROPPED), the command finishes
    with the golden result; the next START clears START_DROPPED."""
    bench, rng = await new_bench(dut)
    cmd = elementwise(bench, rng, VaOpcode.MUL, 2000 if ICARUS else 8000)
    await bench.write_command(cmd)
    await bench.regs.write("START", 1)
    await bench.regs.write("START", 1)
    status = await bench.regs.read_fields("STATUS")
    assert status["BUSY"] and status["START_DROPPED"], f"STATUS {status}"
    while not (await bench.regs.read_fields("STATUS"))["DONE"]:
        await bench.cycles(100)
    golden_image = bench.image.copy()
    from golden.va import MemoryWindow, execute
    execute(cmd, MemoryWindow(bench.origin, golden_image), lanes=L)
    assert np.array_equal(bench.window_bytes(), golden_image), "result differs from golden"
    bench.image = golden_image
    await bench.check(elementwise(bench, rng, VaOpcode.ADD, 40))
    status = await bench.regs.read_fields("STATUS")
    assert not status["START_DROPPED"], f"STATUS {status}"


SUM_GOAL = {65536: 0.9, 1024: 0.5}     # SUM: share of the bus limit to reach, by length


@cocotb.test()
async def performance(dut):
    """Throughput against the bus limit (memory latency 20 cycles, 128-bit bus), checked
    bit for bit like every command: SILU, SCALE and ADD over 65 536 bf16 elements
    (limits: 8, 8 and 4 elements a cycle, as ADD reads two operands), a gather of 2048 four-byte
    elements at a 2048-byte stride (limit: one read, so one element, a cycle). Goals:
    >= 90 % of the limit for the streaming ops, >= 0.9 elements a cycle for the gather.
    SUM of 65 536 and of 1024 bf16 (limit 8 a cycle; goals in SUM_GOAL: the short one
    pays the memory latency and the tree once). Verilator only (the runs are 10 000 to
    40 000 cycles)."""
    bench, rng = await new_bench(dut, window=(0x7F00_0000_0000, 1 << 24))
    n = 65536
    for op, limit in ((VaOpcode.SILU, BUS // 2), (VaOpcode.SCALE, BUS // 2),
                      (VaOpcode.ADD, BUS // 4)):
        outcome = await bench.check(elementwise(bench, rng, op, n, aligned=True))
        rate = n / outcome.cycles
        print(f"VA perf: {op.name} n={n}: {outcome.cycles} cycles, {rate:.3f} elements/cycle, "
              f"{100 * rate / limit:.1f} % of the bus limit ({limit}/cycle)")
        perf.check(f"va.performance.l{L}.{op.name}.n{n}", outcome.cycles)
        assert rate >= 0.9 * limit, f"{op.name}: {rate:.3f} elements/cycle"
    g = gather(bench, rng, 2048, 2, 2048)
    outcome = await bench.check(g)
    rate = g.length / outcome.cycles
    print(f"VA perf: GATHER n={g.length} stride=2048 esize=4: {outcome.cycles} cycles, "
          f"{rate:.3f} elements/cycle")
    perf.check(f"va.performance.l{L}.GATHER.n{g.length}", outcome.cycles)
    assert rate >= 0.9, f"gather: {rate:.3f} elements/cycle"
    # SOFTMAX and RMSNORM over 4096 bf16: the bus-limited minimum is the read beats of
    # their passes (x three times; RMSNORM also gamma once); results are written on the
    # write channel meanwhile.
    n = 4096
    beats = 2 * n // BUS
    for op, reads in ((VaOpcode.SOFTMAX, 3), (VaOpcode.RMSNORM, 4)):
        outcome = await bench.check(row_command(bench, rng, op, n, aligned=True))
        floor = reads * beats
        print(f"VA perf: {op.name} n={n}: {outcome.cycles} cycles; bus-limited minimum of "
              f"its {reads} operand reads: {floor} cycles ({100 * floor / outcome.cycles:.1f} %)")
        perf.check(f"va.performance.l{L}.{op.name}.n{n}", outcome.cycles)
        assert outcome.cycles <= floor / 0.8, f"{op.name}: {outcome.cycles} cycles"
    # TOPK_WIDE of 1024 bf16, K = 16: two passes of the row (one per 8 values), each
    # TOPK's merge and two writer restarts; printed beside golden.va_latency's figure
    # for the core at the bench's memory latency (the top adds its AXI adapter).
    for n, k in ((1024, 16),):
        cmd = row_command(bench, rng, VaOpcode.TOPK_WIDE, n, k=k, aligned=True)
        outcome = await bench.check(cmd)
        model = va_cycles(cmd, lanes=L, data_width=8 * BUS, fn_lanes=FN_LANES,
                          latency=bench.ram.read_latency)
        print(f"VA perf: TOPK_WIDE n={n} k={k}: {outcome.cycles} cycles "
              f"({-(-k // 8)} passes, {2 * n // BUS} read beats each); "
              f"golden.va_latency: {model}")
        perf.check(f"va.performance.l{L}.TOPK_WIDE.n{n}.k{k}", outcome.cycles)
    # DEQUANTIZE_MEM of 65 536 int32 (the bus limit: 4 int32 a cycle, so 16 384 cycles):
    # DEQUANTIZE after the scale word at SRC2 and one binary32 product.
    n = 65536
    cmd = program_command(bench, rng, VaOpcode.DEQUANTIZE_MEM, n, aligned=True)
    outcome = await bench.check(cmd)
    model = va_cycles(cmd, lanes=L, data_width=8 * BUS, fn_lanes=FN_LANES,
                      latency=bench.ram.read_latency)
    floor = 4 * n // BUS
    print(f"VA perf: DEQUANTIZE_MEM n={n}: {outcome.cycles} cycles, bus-limited minimum "
          f"{floor} ({100 * floor / outcome.cycles:.1f} %); golden.va_latency: {model}")
    perf.check(f"va.performance.l{L}.DEQUANTIZE_MEM.n{n}", outcome.cycles)
    assert outcome.cycles <= floor / 0.9, f"DEQUANTIZE_MEM: {outcome.cycles} cycles"
    # SUM reads one operand (limit: 8 elements a cycle) and writes one word; a long and a
    # short run (the short one shows the fixed cost: memory latency, the lane tree).
    limit, cycles = BUS // 2, {}
    for n in SUM_GOAL:
        cycles[n] = (await bench.check(elementwise(bench, rng, VaOpcode.SUM, n,
                                                   aligned=True))).cycles
        print(f"VA perf: SUM n={n}: {cycles[n]} cycles, {n / cycles[n]:.3f} elements/cycle, "
              f"{100 * n / cycles[n] / limit:.1f} % of the bus limit ({limit}/cycle)")
        perf.check(f"va.performance.l{L}.SUM.n{n}", cycles[n])
    for n, goal in SUM_GOAL.items():
        assert n / cycles[n] >= goal * limit, f"SUM n={n}: {cycles[n]} cycles"


@cocotb.test()
async def functions_exhaustive(dut):
    """EXP, SILU and RECIP over every bf16 bit pattern (one 65 536-element command each) on
    Verilator, bit for bit against the golden model whose bounds are checked
    exhaustively in tests/test_golden_va.py; on Icarus a random 2048-pattern vector."""
    bench, rng = await new_bench(dut, window=(0x7F00_0000_0000, 1 << 19))
    patterns = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    if ICARUS:
        patterns = np.array(rng.sample(range(65536), 2048), np.uint16)
    n = len(patterns)
    for op in (VaOpcode.EXP, VaOpcode.SILU, VaOpcode.RECIP):
        src = bench.origin + 2 * rng.randrange(0, 1000)
        dst = bench.origin + (1 << 18) + 2 * rng.randrange(0, 1000)
        bench.place(src, patterns[rng.sample(range(n), n)] if rng.random() < 0.5 else patterns)
        await bench.check(VaCommand(op, n, src=src, dst=dst))


ROWS = (VaOpcode.SOFTMAX, VaOpcode.RMSNORM, VaOpcode.QUANTIZE, VaOpcode.DEQUANTIZE,
        VaOpcode.TOPK, VaOpcode.ROPE)
WIDE_K = 12 if ICARUS else 40
"""TOPK_WIDE's random K: at most this (a pass of the row per 8 values; Icarus: two)."""


def bf16_values(rng, n, kind="normal"):
    """bf16 bits: ``normal`` values (scale 10**-3..10**3), ``bits`` (any pattern, NaNs,
    infinities, subnormals), or ``ties`` (a few repeated values, ±0, a NaN)."""
    gen = np.random.default_rng(rng.getrandbits(32))
    if kind == "bits":
        return gen.integers(0, 1 << 16, n).astype(np.uint16)
    if kind == "ties":
        pool = np.array([0x0000, 0x8000, 0x3F80, 0x3F80, 0xBF80, 0x4000, 0x7FC0, 0xFF80,
                         0x4000, 0x3F81][:rng.randrange(2, 11)], np.uint16)
        return pool[gen.integers(0, len(pool), n)]
    f = (gen.standard_normal(n) * 10.0 ** rng.uniform(-3, 3)).astype(np.float32)
    return (f.view(np.uint32) >> 16).astype(np.uint16)


def row_command(bench, rng, op, n, kind="normal", k=None, aligned=False, split=None):
    """A row command on fresh operands at random (element-aligned) places (ROPE: an odd
    length is made even; adjacent or split-half pairs at random unless ``split``)."""
    if op == VaOpcode.ROPE:
        n += n % 2
    region = bench.size // 4
    def place(mask, nbytes):
        return bench.origin + (rng.randrange(0, region - nbytes - 64)
                               & ~(BUS - 1 if aligned else mask))
    src_bytes = 4 * n if op == VaOpcode.DEQUANTIZE else 2 * n
    cmd = VaCommand(op, n, src=place(3 if op == VaOpcode.DEQUANTIZE else 1, src_bytes),
                    src2=region + place(1, 2 * n), dst=2 * region + place(1, 2 * n),
                    dst2=3 * region + place(3, (4 if op == VaOpcode.TOPK_WIDE else 2) * n))
    if op == VaOpcode.DEQUANTIZE:
        gen = np.random.default_rng(rng.getrandbits(32))
        ints = gen.integers(-(1 << 31), 1 << 31, n, dtype=np.int64)
        small = gen.integers(-300, 300, n)
        bench.place(cmd.src, np.where(gen.random(n) < 0.5, ints, small).astype(np.int32))
        cmd.scalar = int(np.float32(10.0 ** rng.uniform(-8, 3)).view(np.uint32))
        if kind == "bits":
            cmd.scalar = rng.getrandbits(32)
        return cmd
    bench.place(cmd.src, bf16_values(rng, n, kind))
    if op == VaOpcode.RMSNORM:
        bench.place(cmd.src2, bf16_values(rng, n, "normal" if kind != "bits" else "bits"))
        cmd.scalar = rng.choice([0, 0x358637BD, int(np.float32(10.0 ** rng.uniform(-9, -1))
                                                     .view(np.uint32))])
    if op == VaOpcode.TOPK:
        cmd.k = k if k is not None else rng.randrange(1, min(8, n) + 1)
    if op == VaOpcode.TOPK_WIDE:
        cmd.k = k if k is not None else rng.randrange(1, min(WIDE_K, n) + 1)
    if op == VaOpcode.ROPE:
        cmd.split_half = rng.random() < 0.5 if split is None else split
        cmd.src3 = cmd.dst2
        angles = np.random.default_rng(rng.getrandbits(32)).uniform(-4, 4, n // 2)
        for addr, f in ((cmd.src2, np.cos), (cmd.src3, np.sin)):
            values = (f(angles).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
            bench.place(addr, bf16_values(rng, n // 2, kind) if kind != "normal" else values)
    return cmd


@cocotb.test()
async def row_commands(dut):
    """SOFTMAX, RMSNORM, QUANTIZE, DEQUANTIZE, TOPK at lengths 1, L-1, L, L+1 and random
    ones, normal values, random bits (NaN/inf/subnormal rows) and tie-heavy rows (TOPK
    with every k = 1..8: ties to the lowest index, NaN lowest), random alignments
    (Icarus: lengths 1, L and a random one below 120; TOPK's ties at k = 1, 3 and 8; RoPE
    at two lengths)."""
    bench, rng = await new_bench(dut)
    lengths = [1, L - 1, L, L + 1, rng.randrange(2, 120 if ICARUS else 1500)]
    if ICARUS:
        lengths = [1, L, lengths[-1]]
    for op in ROWS:
        for n in lengths:
            await bench.check(row_command(bench, rng, op, n, aligned=n == L))
        for kind in ("bits", "ties"):
            await bench.check(row_command(bench, rng, op, rng.randrange(1, 3 * L), kind))
    for k in (1, 3, 8) if ICARUS else range(1, 9):
        n = rng.randrange(k, 4 * L)
        await bench.check(row_command(bench, rng, VaOpcode.TOPK, n, "ties", k=k))
    # RoPE: both pairings at lengths 2, L, 2L + 2 and a random one (Icarus: 2L + 2 and a
    # random one).
    for split in (False, True):
        for n in ((2 * L + 2, rng.randrange(2, 100)) if ICARUS
                  else (2, L, 2 * L + 2, rng.randrange(2, 400))):
            await bench.check(row_command(bench, rng, VaOpcode.ROPE, n, split=split))
    # Whole-row NaN: an infinity or NaN in SOFTMAX's and RMSNORM's input.
    for op in (VaOpcode.SOFTMAX, VaOpcode.RMSNORM):
        for special in (0x7F80, 0xFF80, 0x7FC1):
            cmd = row_command(bench, rng, op, rng.randrange(2, 2 * L))
            bench.place(cmd.src + 2 * rng.randrange(cmd.length), np.array([special], np.uint16))
            await bench.check(cmd)


@cocotb.test()
async def topk_wide(dut):
    """TOPK_WIDE (a pass of the row per 8 values) at lengths 1, L-1, L, L+1 and a random
    one with random K up to WIDE_K, rows of random bits (NaN/inf/subnormal) and tie-heavy
    rows (ties to the lowest index, NaN last), K = 8, 9, 16, 17 and K = LENGTH (every
    entry, the NaNs last in index order), random alignments; then random ones under
    random idle and back-pressure cycles on every memory channel (Icarus: fewer, K up to
    12)."""
    bench, rng = await new_bench(dut)
    w = VaOpcode.TOPK_WIDE
    for n in (1, L - 1, L, L + 1, rng.randrange(2, 300 if ICARUS else 1500)):
        await bench.check(row_command(bench, rng, w, n, aligned=n == L))
    for kind in ("bits", "ties"):
        await bench.check(row_command(bench, rng, w, rng.randrange(1, 3 * L), kind))
    for k in (9, 0) if ICARUS else (8, 9, 16, 17, 0):   # 0: K = LENGTH
        n = rng.randrange(max(k, 2), 3 * L if ICARUS else 6 * L)
        kind = rng.choice(("ties", "bits"))
        await bench.check(row_command(bench, rng, w, n, kind, k=k or n))
    bench.set_pauses(0.3)
    for _ in range(2 if ICARUS else 6):
        kind = rng.choice(("normal", "bits", "ties"))
        await bench.check(row_command(bench, rng, w, rng.randrange(1, 300), kind))
    bench.set_pauses(0)


def words_read(bursts):
    """How many times each bus word address was read by ``bursts`` (ReadBurst)."""
    counts = Counter()
    for burst in bursts:
        counts.update(burst.addr + BUS * beat for beat in range(burst.beats))
    return counts


def words_of(addr, nbytes):
    """The bus word addresses that bytes ``[addr, addr + nbytes)`` touch."""
    return range(addr & ~(BUS - 1), addr + nbytes, BUS)


@cocotb.test()
async def rmsnorm_row_passes(dut):
    """An RMSNORM right after an RMSNORM or a SOFTMAX (their last pass is pass 2, where
    RMSNORM reads gamma) reads x once a pass and gamma only in its last pass: every word
    of SRC three times, of SRC2 once, nothing else; bit for bit against the golden model.
    The RMSNORM before the second one has gamma across a 4 KiB page (a burst more than
    x, the last of its last pass), so the second one's first pass asks for x first:
    a gamma read in that pass would still be answering when the reader restarts for the
    second pass (lengths 90, the back-pressure seed's, and 250). No pauses: the
    schedule is the same on every run (the values do not change it)."""
    bench, rng = await new_bench(dut, window=(0x7F00_0000_0000, 1 << 17))
    page = 4096
    for first in (VaOpcode.RMSNORM, VaOpcode.SOFTMAX):
        for n in (90, 250):
            cmds = []
            for op, at in ((first, bench.origin), (VaOpcode.RMSNORM, bench.origin + 8 * page)):
                cmd = VaCommand(op, n, src=at + 2, src2=at + 3 * page - 6 * BUS + 14,
                                dst=at + 5 * page + 6, scalar=0x358637BD)
                bench.place(cmd.src, bf16_values(rng, n))
                bench.place(cmd.src2, bf16_values(rng, n))
                cmds.append(cmd)
            await bench.check(cmds[0], max_cycles=50_000)
            before = len(bench.ram.reads)
            cmd = cmds[1]
            await bench.check(cmd, max_cycles=50_000)
            expected = Counter({a: 3 for a in words_of(cmd.src, 2 * n)})
            expected.update(words_of(cmd.src2, 2 * n))
            got = words_read(bench.ram.reads[before:])
            extra = sorted((hex(a), c) for a, c in (got - expected).items())
            missing = sorted((hex(a), c) for a, c in (expected - got).items())
            assert got == expected, (f"RMSNORM n={n} after {first.name}: words read other than "
                                     f"once a pass, extra {extra}, missing {missing}")


@cocotb.test()
async def row_refusals(dut):
    """TOPK (and TOPK_WIDE) with k = 0, k > 8 (TOPK), k > LENGTH; misaligned DST2
    (QUANTIZE, TOPK, TOPK_WIDE: after SRC and DST), DEQUANTIZE's
    int32 source, a range past 2**48: the golden model's code and ERR_ADDR, no access,
    nothing written."""
    bench, rng = await new_bench(dut)
    o = bench.origin
    top = (1 << 48) - 64
    cases = [
        VaCommand(VaOpcode.TOPK, 8, src=o, dst=o + 64, dst2=o + 128, k=0),
        VaCommand(VaOpcode.TOPK, 20, src=o, dst=o + 64, dst2=o + 128, k=9),
        VaCommand(VaOpcode.TOPK, 3, src=o, dst=o + 64, dst2=o + 128, k=4),
        VaCommand(VaOpcode.TOPK, 8, src=o, dst=o + 64, dst2=o + 130, k=2),
        VaCommand(VaOpcode.TOPK, 8, src=o, dst=o + 65, dst2=o + 128, k=2),
        VaCommand(VaOpcode.TOPK, 8, src=o, dst=o + 64, dst2=top + 40, k=8),
        VaCommand(VaOpcode.TOPK_WIDE, 8, src=o, dst=o + 64, dst2=o + 128, k=0),
        VaCommand(VaOpcode.TOPK_WIDE, 20, src=o, dst=o + 64, dst2=o + 128, k=21),
        VaCommand(VaOpcode.TOPK_WIDE, 65537, src=o, dst=o + 64, dst2=o + 128, k=9),
        VaCommand(VaOpcode.TOPK_WIDE, 20, src=o, dst=o + 64, dst2=o + 130, k=12),
        VaCommand(VaOpcode.TOPK_WIDE, 20, src=o, dst=o + 65, dst2=o + 130, k=12),
        VaCommand(VaOpcode.TOPK_WIDE, 20, src=o + 1, dst=o + 65, dst2=o + 128, k=12),
        VaCommand(VaOpcode.TOPK_WIDE, 20, src=o, dst=top + 44, dst2=o + 128, k=12),
        VaCommand(VaOpcode.TOPK_WIDE, 20, src=o, dst=o + 64, dst2=top + 20, k=12),
        VaCommand(VaOpcode.QUANTIZE, 8, src=o, dst=o + 65, dst2=o + 130),
        VaCommand(VaOpcode.QUANTIZE, 8, src=o + 1, dst=o + 65, dst2=o + 128),
        VaCommand(VaOpcode.QUANTIZE, 8, src=o, dst=top + 60, dst2=o + 128),
        VaCommand(VaOpcode.DEQUANTIZE, 8, src=o + 2, dst=o + 64),
        VaCommand(VaOpcode.DEQUANTIZE, 16, src=top + 8, dst=o + 64),
        VaCommand(VaOpcode.RMSNORM, 8, src=o, src2=o + 3, dst=o + 64),
        VaCommand(VaOpcode.SOFTMAX, 0, src=o, dst=o + 64),
        VaCommand(VaOpcode.SOFTMAX, 40, src=o, dst=top + 2),
        VaCommand(VaOpcode.ROPE, 7, src=o, src2=o, src3=o, dst=o + 64),      # odd length
        VaCommand(VaOpcode.ROPE, 8, src=o, src2=o, src3=o + 1, dst=o + 64),
        VaCommand(VaOpcode.ROPE, 8, src=o, src2=o, src3=top + 60, dst=o + 64),
    ]
    for cmd in cases:
        await bench.check(cmd)
    await bench.check(row_command(bench, rng, VaOpcode.TOPK, 50))
    await bench.check(row_command(bench, rng, VaOpcode.TOPK_WIDE, 50, k=20))


# The layer program's commands: RECIP (its exhaustive run is in functions_exhaustive),
# CVT_F32, MUL_MEM, ADD_MEM, DEQUANTIZE_MEM (TOPK_WIDE is with the row commands).
PROGRAM_OPS = (VaOpcode.RECIP, VaOpcode.CVT_F32, VaOpcode.MUL_MEM, VaOpcode.ADD_MEM,
               VaOpcode.DEQUANTIZE_MEM)
F32_EDGES = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF,
             0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF,
             0x3F808000, 0x3F818000, 0x3F808001, 0xBF80FFFF, 0x007FFFFF, 0x7F7F8000]
"""binary32 edges for CVT_F32: zeros, subnormals, the largest finite (rounding to inf),
infinities, NaNs, halfway cases to even (down and up), just above a half."""


def f32_scale(rng):
    """A binary32 scale for DEQUANTIZE_MEM: a normal value, random bits or an edge."""
    kind = rng.random()
    if kind < 0.5:
        return int(np.float32(10.0 ** rng.uniform(-8, 3)).view(np.uint32))
    return rng.getrandbits(32) if kind < 0.75 else rng.choice(F32_EDGES)


def program_command(bench, rng, op, n, *, aligned=False, scalar=None):
    """A CVT_F32 (binary32 source: random bits with edges, or normal values), MUL_MEM /
    ADD_MEM (the scalar at SRC2: random bits unless ``scalar``), DEQUANTIZE_MEM (random
    int32, large and small; the binary32 at SRC2 ``scalar`` or :func:`f32_scale`, as is
    SCALAR) or RECIP (random bits) at random element-aligned places."""
    region = bench.size // 4
    cvt = op == VaOpcode.CVT_F32
    dqm = op == VaOpcode.DEQUANTIZE_MEM
    def place(mask, nbytes):
        return bench.origin + (rng.randrange(0, region - nbytes - 64)
                               & ~(BUS - 1 if aligned else mask))
    cmd = VaCommand(op, n, src=place(3 if cvt or dqm else 1, 4 * n),
                    src2=region + place(3 if dqm else 1, 4 if dqm else 2),
                    dst=2 * region + place(1, 2 * n))
    gen = np.random.default_rng(rng.getrandbits(32))
    if dqm:
        ints = gen.integers(-(1 << 31), 1 << 31, n, dtype=np.int64)
        small = gen.integers(-300, 300, n)
        bench.place(cmd.src, np.where(gen.random(n) < 0.5, ints, small).astype(np.int32))
        bench.place(cmd.src2, np.array([f32_scale(rng) if scalar is None else scalar],
                                       np.uint32))
        cmd.scalar = f32_scale(rng)
        return cmd
    if cvt:
        bits = gen.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
        normal = (gen.standard_normal(n) * 10.0 ** rng.uniform(-3, 3)).astype(np.float32)
        values = np.where(gen.random(n) < 0.5, bits, normal.view(np.uint32))
        edges = np.array(F32_EDGES, np.uint32)[gen.integers(0, len(F32_EDGES), n)]
        bench.place(cmd.src, np.where(gen.random(n) < 0.2, edges, values).astype(np.uint32))
    else:
        bench.place(cmd.src, bf16_values(rng, n, rng.choice(("normal", "bits", "ties"))))
    if scalar is not None:
        bench.place(cmd.src2, np.array([scalar], np.uint16))
    return cmd


@cocotb.test()
async def program_commands(dut):
    """CVT_F32, MUL_MEM, ADD_MEM, DEQUANTIZE_MEM and RECIP at lengths 1, L-1, L, L+1 and
    random ones, random alignments (SRC2 anywhere in its bus word), random bits and
    normal values; MUL_MEM / ADD_MEM by ±0, ±inf, NaN, a subnormal and 1.5 too,
    DEQUANTIZE_MEM with binary32 edges at SRC2 (zeros, subnormals, infinities, NaNs, the
    largest finite: inf · 0, flushes and overflows of the scale product); then the refusals
    (bad LENGTH, misaligned SRC / SRC2 / DST, a range reaching 2**48, and the order of
    the checks: a range past 2**48 before a misaligned address, SRC before SRC2 before
    DST): the golden model's code and ERR_ADDR, no access, nothing written. Icarus: two
    of the edge lengths and a random one, three of the scalars."""
    bench, rng = await new_bench(dut)
    lengths = [1, L - 1, L, L + 1, 2 * L + 3, rng.randrange(2, 1500)]
    scalars = [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC1, 0x0040, 0x3FC0]
    if ICARUS:      # a third of the runs: two of the edge lengths, a short random one
        lengths = [*rng.sample(lengths[:5], 2), rng.randrange(2, 100)]
        scalars = rng.sample(scalars, 3)
    for op in PROGRAM_OPS:
        for n in lengths:
            await bench.check(program_command(bench, rng, op, n, aligned=n == L))
    for op in (VaOpcode.MUL_MEM, VaOpcode.ADD_MEM):
        for s in scalars:
            await bench.check(program_command(bench, rng, op, rng.randrange(1, 3 * L), scalar=s))
    for s in rng.sample(F32_EDGES, 4) if ICARUS else F32_EDGES:
        await bench.check(program_command(bench, rng, VaOpcode.DEQUANTIZE_MEM,
                                          rng.randrange(1, 3 * L), scalar=s))
    o = bench.origin
    top = 1 << 48
    cases = []
    for op in PROGRAM_OPS:
        two = op in (VaOpcode.MUL_MEM, VaOpcode.ADD_MEM, VaOpcode.DEQUANTIZE_MEM)
        wide = 4 if op in (VaOpcode.CVT_F32, VaOpcode.DEQUANTIZE_MEM) else 2
        s2 = 4 if op == VaOpcode.DEQUANTIZE_MEM else 2       # SRC2's bytes
        odd = wide // 2                         # an address not a multiple of the element
        cases += [
            VaCommand(op, 0, src=o, src2=o + 512, dst=o + 1024),
            VaCommand(op, 65537, src=o, src2=o + 512, dst=o + 1024),
            VaCommand(op, 8, src=o + odd, src2=o + 512, dst=o + 1024),
            VaCommand(op, 8, src=o, src2=o + 512, dst=o + 1025),
            VaCommand(op, 8, src=top - 8 * wide + 2, src2=o + 512, dst=o + 1024),
            VaCommand(op, 8, src=o, src2=o + 512, dst=top - 14),
            VaCommand(op, 8, src=o + odd, src2=o + 512, dst=top - 14),    # range first
            VaCommand(op, 8, src=o + odd, src2=o + 513, dst=o + 1025),    # SRC first
        ]
        if two:
            cases += [
                VaCommand(op, 8, src=o, src2=o + 513, dst=o + 1024),
                VaCommand(op, 8, src=o, src2=o + 513, dst=o + 1025),      # SRC2 before DST
                VaCommand(op, 8, src=o, src2=top - 1, dst=o + 1024),
                VaCommand(op, 8, src=o + 1, src2=top - 1, dst=o + 1024),  # range first
                VaCommand(op, 8, src=o, src2=top - s2, dst=top - 14),     # SRC2 fits, DST not
                VaCommand(op, 8, src=o, src2=o + 512 + s2 // 2, dst=o + 1024),
            ]
    for cmd in cases:
        await bench.check(cmd)
    await bench.check(program_command(bench, rng, VaOpcode.MUL_MEM, 50))


# ---------------------------------------------------------------------------------------
# Indexed forms: GATHER_IDX, SCATTER_IDX, GATHER_CSR.

INDEXED = (VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX, VaOpcode.GATHER_CSR)


def index_vector(rng, n, limit, *, skip=0.0, repeats=0):
    """``n`` int32 indices in [0, limit), -1 with probability ``skip``; drawn from
    ``repeats`` values (so most repeat) when not 0."""
    pool = [rng.randrange(limit) for _ in range(repeats)]
    values = [rng.choice(pool) if pool else rng.randrange(limit) for _ in range(n)]
    return np.array([-1 if rng.random() < skip else v for v in values], np.int32)


def indexed(bench, rng, op, n, esize, stride, *, limit=None, skip=0.1, repeats=0, rows=None,
            empty=0.2):
    """An indexed command with random indices (CSR: ``rows`` rows, a share ``empty`` of
    them empty) placed in the window: the table in its first half, the dense vector in
    the third quarter, the index data in the last."""
    size = 1 << esize
    quarter = bench.size // 4
    if op == VaOpcode.GATHER_CSR:
        rows = rows or rng.randrange(1, 12)
    if limit is None:
        limit = rng.randrange(1, 2 * n + 2)
    row_stride = 0
    table = 2 * quarter - 4096
    if op == VaOpcode.GATHER_CSR and rows > 1:
        row_stride = rng.randrange(0, table // (4 * rows)) >> esize << esize
    if stride:
        limit = max(1, min(limit, (table // 4) // stride))
    span = max(rows or 1, 1) * row_stride + limit * stride + size
    base = bench.origin + (rng.randrange(0, table - span) >> esize << esize)
    dense = bench.origin + 2 * quarter + (rng.randrange(0, quarter - size * n) >> esize << esize)
    meta = bench.origin + 3 * quarter + 4 * rng.randrange(0, (quarter - 8 * n - 8 * (rows or 0)) // 8)
    if op == VaOpcode.GATHER_CSR:
        cuts = sorted(rng.randrange(n + 1) for _ in range(rows - 1))
        for i in range(len(cuts)):
            if rng.random() < empty and i:
                cuts[i] = cuts[i - 1]                        # an empty row
        pointers = np.array([0, *cuts, n], np.int32)
        columns = index_vector(rng, n, limit, repeats=repeats)
        cols_at = meta + 4 * (rows + 1) + 4 * rng.randrange(0, 8)
        bench.place(meta, pointers)
        bench.place(cols_at, columns)
        return VaCommand(op, n, src=base, src2=meta, src3=cols_at, dst=dense, esize=esize,
                         stride=stride, index_limit=limit, rows=rows, row_stride=row_stride)
    bench.place(meta, index_vector(rng, n, limit, skip=skip, repeats=repeats))
    if op == VaOpcode.SCATTER_IDX:
        return VaCommand(op, n, src=dense, src2=meta, dst=base, esize=esize, stride=stride,
                         index_limit=limit)
    return VaCommand(op, n, src=base, src2=meta, dst=dense, esize=esize, stride=stride,
                     index_limit=limit)


@cocotb.test()
async def indexed_moves(dut):
    """GATHER_IDX, SCATTER_IDX and GATHER_CSR: element sizes 1, 2, 4; lengths 1, L-1, L,
    L+1 and random; strides 0, one element, odd (bytes), 2048 and random; random,
    repeated (a scatter's last write wins) and -1 indices; CSR rows with empty ones.
    Each form and size takes every length at a random stride and two lengths at each
    other stride (Icarus: one length a stride, 1 and a random one by turns)."""
    bench, rng = await new_bench(dut, window=(0x7F00_0000_0000, 1 << 22))
    for op in INDEXED:
        for esize in (0, 1, 2):
            size = 1 << esize
            strides = [size * rng.randrange(1, 300), 0, size, 2048]
            if esize == 0:
                strides.append(rng.randrange(1, 200) | 1)
            for k, stride in enumerate(strides):
                last = rng.randrange(2, 80 if ICARUS else 400)
                if ICARUS:
                    lengths = (1,) if (k + esize) % 2 else (last,)
                elif k == 0:
                    lengths = (1, L - 1, L, L + 1, last)
                else:
                    lengths = (rng.choice((1, L - 1, L, L + 1)), last)
                for n in lengths:
                    repeats = 3 if rng.random() < 0.3 else 0
                    cmd = indexed(bench, rng, op, n, esize, stride, repeats=repeats,
                                  skip=rng.choice((0.0, 0.1, 0.5)))
                    await bench.check(cmd)
    # All skipped; CSR: every row empty but the last, and many rows.
    await bench.check(indexed(bench, rng, VaOpcode.GATHER_IDX, 40, 1, 6, skip=1.0))
    await bench.check(indexed(bench, rng, VaOpcode.SCATTER_IDX, 40, 2, 12, skip=1.0))
    await bench.check(indexed(bench, rng, VaOpcode.GATHER_CSR, 50, 1, 2, rows=64, empty=0.9))


@cocotb.test()
async def indexed_errors(dut):
    """Out-of-range indices (at or above INDEX_LIMIT, below -1; CSR columns below 0),
    indexed addresses reaching 2**48, bad CSR row pointers and a CSR matrix reaching
    2**48: BAD_COMMAND with the golden ERR_ADDR (the first bad index's address; a range
    error wins over an earlier address error), nothing written (the index data is read).
    Misaligned and too-long indexed commands are refused at START without any access."""
    bench, rng = await new_bench(dut)
    top = 1 << 48
    for op in INDEXED:
        n = rng.randrange(L, 3 * L)
        below = -1 if op == VaOpcode.GATHER_CSR else -2
        for bad in (lambda c: c.index_limit, lambda c: c.index_limit + rng.randrange(1, 99),
                    lambda c, below=below: below, lambda c: -(1 << 31), lambda c: (1 << 31) - 1):
            cmd = indexed(bench, rng, op, n, 1, 2 * rng.randrange(1, 50), skip=0.1)
            at = cmd.src3 if op == VaOpcode.GATHER_CSR else cmd.src2
            values = bench.image[at - bench.origin:at - bench.origin + 4 * n].view(np.int32).copy()
            for i in sorted(rng.sample(range(n), rng.randrange(1, 3))):
                values[i] = bad(cmd)
            bench.place(at, values)
            await bench.check(cmd, reads_first=True)
    # An index whose element would reach 2**48, and a range error after it that wins.
    for op in (VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX):
        n = 20
        cmd = indexed(bench, rng, op, n, 2, 4096, skip=0.3)
        values = index_vector(rng, n, 1, skip=0.5)
        values[7] = 0x10000
        base = top - 0x10000 * 4096 + rng.choice((0, 4))
        cmd.index_limit = 1 << 20
        if op == VaOpcode.GATHER_IDX:
            cmd.src = base
        else:
            cmd.dst = base
        bench.place(cmd.src2, values)
        await bench.check(cmd, reads_first=True)
        values[12] = 1 << 20
        bench.place(cmd.src2, values)
        await bench.check(cmd, reads_first=True)
    # CSR row pointers: not starting at 0, falling, not ending at LENGTH; the matrix.
    for change in ((0, 1), (3, -1), (-1, -1), (-1, 1)):
        cmd = indexed(bench, rng, VaOpcode.GATHER_CSR, 40, 0, 3, rows=8)
        pointers = bench.image[cmd.src2 - bench.origin:][:4 * 9].view(np.int32).copy()
        pointers[change[0]] += change[1]
        bench.place(cmd.src2, pointers)
        await bench.check(cmd, reads_first=True)
    cmd = indexed(bench, rng, VaOpcode.GATHER_CSR, 40, 2, 8, rows=4)
    cmd.src = top - 3 * cmd.row_stride - (cmd.index_limit - 1) * cmd.stride
    await bench.check(cmd)
    # Refused at START: misaligned index data, base, row stride; beyond 2**48.
    o = bench.origin
    for cmd in (
        VaCommand(VaOpcode.GATHER_IDX, 8, src=o, src2=o + 2, dst=o + 64, esize=1, index_limit=9),
        VaCommand(VaOpcode.GATHER_IDX, 8, src=o + 1, src2=o, dst=o + 64, esize=1, index_limit=9),
        VaCommand(VaOpcode.SCATTER_IDX, 8, src=o, src2=o, dst=o + 2, esize=2, index_limit=9),
        VaCommand(VaOpcode.SCATTER_IDX, 8, src=o + 2, src2=o, dst=o, esize=2, index_limit=9),
        VaCommand(VaOpcode.GATHER_CSR, 8, src=o, src2=o, src3=o + 1, dst=o + 64, rows=2,
                  index_limit=9),
        VaCommand(VaOpcode.GATHER_CSR, 8, src=o, src2=o, src3=o, dst=o + 64, esize=2,
                  rows=2, row_stride=6, index_limit=9),
        VaCommand(VaOpcode.GATHER_CSR, 8, src=o, src2=top - 8, src3=o, dst=o + 64, rows=2,
                  index_limit=9),
        VaCommand(VaOpcode.GATHER_IDX, 8, src=o, src2=top - 16, dst=o + 64, index_limit=9),
        VaCommand(VaOpcode.SCATTER_IDX, 8, src=o, src2=o, dst=o, esize=3, index_limit=9),
        VaCommand(VaOpcode.GATHER_CSR, 0, src=o, src2=o, src3=o, dst=o + 64, rows=1,
                  index_limit=9),
        VaCommand(VaOpcode.SCATTER_IDX, 65537, src=o, src2=o, dst=o, esize=1, index_limit=9),
        VaCommand(VaOpcode.GATHER_IDX, 8, src=o, src2=o, dst=top - 14, esize=1, index_limit=9),
        VaCommand(VaOpcode.SCATTER_IDX, 8, src=top - 28, src2=o, dst=o, esize=2, index_limit=9),
        VaCommand(VaOpcode.GATHER_CSR, 8, src=o, src2=o, src3=top - 28, dst=o + 64, rows=1,
                  index_limit=9),
    ):
        await bench.check(cmd)
    await bench.check(indexed(bench, rng, VaOpcode.GATHER_CSR, 30, 1, 2, rows=5))


@cocotb.test()
async def indexed_pauses(dut):
    """Random idle and back-pressure cycles on every memory channel, random indexed
    commands; an AXI read error at a gathered element and a write error at a scattered
    one (ERR_ADDR = the element's address; only golden bytes written before it), a read
    error in the index data and in the CSR row pointers; after each error the next
    command runs as the golden model says."""
    bench, rng = await new_bench(dut, window=(0x7F00_0000_0000, 1 << 21))
    bench.set_pauses(0.3)
    for _ in range(4 if ICARUS else 16):
        esize = rng.randrange(3)
        cmd = indexed(bench, rng, rng.choice(INDEXED), rng.randrange(1, 60 if ICARUS else 300),
                      esize, rng.randrange(0, 3000) >> esize << esize, skip=0.2)
        await bench.check(cmd)
    bench.set_pauses(0)
    g = indexed(bench, rng, VaOpcode.GATHER_IDX, 50, 1, 1030, skip=0.0)
    idx = bench.image[g.src2 - bench.origin:][:4 * 50].view(np.int32)
    element = g.src + int(idx[17]) * g.stride
    bench.ram.error_ranges = [ErrorRange(element, element + 1)]
    await bench.check(g, expect=ErrorCode.AXI_READ_ERROR, err_addr=element & 0xFFFFFFFF)
    s = indexed(bench, rng, VaOpcode.SCATTER_IDX, 50, 2, 1028, skip=0.0, limit=1000)
    bench.place(s.src2, np.arange(50, dtype=np.int32) * 3)
    element = s.dst + 9 * 3 * s.stride
    bench.ram.error_ranges = [ErrorRange(element, element + 1, reads=False)]
    await bench.check(s, expect=ErrorCode.AXI_WRITE_ERROR, err_addr=element & 0xFFFFFFFF)
    # A read error in the index data (CHECK pass) and in the CSR row pointers: ERR_ADDR =
    # the failing burst's first byte, here the first of the vector; nothing written.
    for op in (VaOpcode.GATHER_IDX, VaOpcode.GATHER_CSR):
        cmd = indexed(bench, rng, op, 40, 1, 6, skip=0.0, rows=4)
        if op == VaOpcode.GATHER_CSR:       # the columns 4 bus words past the pointers
            columns = bench.image[cmd.src3 - bench.origin:][:4 * cmd.length].copy()
            cmd.src3 = cmd.src2 + 4 * (cmd.rows + 1) + 4 * BUS
            bench.place(cmd.src3, columns)
        bench.ram.error_ranges = [ErrorRange(cmd.src2, cmd.src2 + 1)]
        await bench.check(cmd, expect=ErrorCode.AXI_READ_ERROR, err_addr=cmd.src2 & 0xFFFFFFFF)
    bench.ram.error_ranges = []
    await bench.check(g)


@cocotb.test()
async def indexed_throughput(dut):
    """GATHER_IDX throughput, index fetch and check included: 4096 four-byte elements at
    random indices (stride 2048, so every element is its own bus word), memory latency
    20 cycles, checked bit for bit. The golden contract checks every index before the
    first write, so the index vector is read twice (CHECK and RUN passes): with one read
    beat a cycle the bound of a gather is 1 / (1 + 2·4/BUS) elements a cycle (2/3 on a
    128-bit bus); a scatter's RUN pass is bound by one write a cycle, so 1 / (1 + 4/BUS).
    The goal is 90 % of the bound. GATHER_CSR and SCATTER_IDX likewise. Verilator only
    (about 6500 cycles each)."""
    bench, rng = await new_bench(dut, window=(0x7F00_0000_0000, 1 << 24))
    n = 4096
    for op in (VaOpcode.GATHER_IDX, VaOpcode.GATHER_CSR, VaOpcode.SCATTER_IDX):
        bound = 1 / (1 + (4 if op == VaOpcode.SCATTER_IDX else 8) / BUS)
        cmd = indexed(bench, rng, op, n, 2, 2048, limit=1024, skip=0.0, rows=64, empty=0.0)
        outcome = await bench.check(cmd)
        rate = n / outcome.cycles
        print(f"VA perf: {op.name} n={n} stride=2048 esize=4: {outcome.cycles} cycles, "
              f"{rate:.3f} elements/cycle, {100 * rate / bound:.1f} % of the two-pass bound "
              f"({bound:.3f}/cycle)")
        perf.check(f"va.indexed_throughput.{op.name}.n{n}", outcome.cycles)
        assert rate >= 0.9 * bound, f"{op.name}: {rate:.3f} elements/cycle"


async def load_long_command(bench, rng):
    """Command registers of a MUL of 2000 elements (500 on Icarus; hundreds of cycles
    either way), for ``tests/conformance_tb.py``'s START while busy; START is not
    written."""
    await bench.write_command(elementwise(bench, rng, VaOpcode.MUL, 500 if ICARUS else 2000))


EXT_OPS = (VaOpcode.CLAMP, VaOpcode.SOFTPLUS, VaOpcode.SQRT)


def any_command(bench, rng, op, n, *, distinct=False):
    """A valid command of any opcode the VA runs, on random operands at random places:
    through the makers above (strided moves at random element sizes and strides that fit
    the window, indexed forms without skipped indices, CLAMP with bounds -10 and 10).
    ``distinct``: a SCATTER_IDX's indices all differ (after an error, the writes already
    under way may land; with a repeated index, one of them may be a place's last word
    only for the part of the command that ran)."""
    if op in (VaOpcode.GATHER, VaOpcode.SCATTER):
        esize = rng.randrange(3)
        most = (bench.size // 2 - 64) // max(n, 1)
        return gather(bench, rng, n, esize, rng.randrange(0, min(3000, most)) >> esize << esize,
                      op)
    if op in INDEXED:
        esize = rng.randrange(3)
        cmd = indexed(bench, rng, op, n, esize, rng.randrange(1, 300) >> esize << esize
                      or 1 << esize, skip=0.0, limit=2 * n + 2)
        if distinct and op == VaOpcode.SCATTER_IDX:
            bench.place(cmd.src2, np.array(rng.sample(range(cmd.index_limit), n), np.int32))
        return cmd
    if op in ROWS or op == VaOpcode.TOPK_WIDE:
        return row_command(bench, rng, op, n)
    if op in PROGRAM_OPS:
        return program_command(bench, rng, op, n)
    cmd = elementwise(bench, rng, op, n)
    if op == VaOpcode.CLAMP:
        cmd.scalar = clamp_scalar(0xC120, 0x4120)
    return cmd


def first_read_and_write(bench, cmd):
    """The first byte of ``cmd``'s data that every run of it reads and the first byte it
    writes, each the first byte of its burst: SRC (the indexed forms: their index data at
    SRC2, read before any element) and DST (SCATTER_IDX: its first element's place)."""
    read = cmd.src2 if cmd.op in INDEXED else cmd.src
    write = cmd.dst
    if cmd.op == VaOpcode.SCATTER_IDX:
        first = int(bench.image[cmd.src2 - bench.origin:][:4].view(np.int32)[0])
        write = cmd.dst + first * cmd.stride
    return read, write


@cocotb.test()
async def errors_of_every_opcode(dut):
    """Every opcode under random idle and back-pressure cycles on every memory channel: a
    command that runs (Verilator: a random length, then one of 4 097 to 6 000 elements
    without pauses), an AXI read error at the first byte it reads and a write error at
    the first byte it writes (SLVERR or DECERR at random): AXI_READ/WRITE_ERROR with that
    byte in ERR_ADDR, only golden bytes written before it (lengths 1, L or random); the
    refusals of LENGTH 0, of 65 537 and of odd addresses; after the last error a clean
    command runs (Icarus: lengths below 40, no long run)."""
    bench, rng = await new_bench(dut, window=(0x7F00_0000_0000, 1 << 21))
    for op in RTL_OPCODES:
        bench.set_pauses(0.3)
        await bench.check(any_command(bench, rng, op, rng.randrange(1, 40 if ICARUS else 300)))
        n = rng.choice((1, L, rng.randrange(2, 40 if ICARUS else 300)))
        if op == VaOpcode.ROPE:
            # 16 or more: a split-half x's second half (SRC + LENGTH bytes) starts in a
            # later bus word than SRC; in the same word, its burst fails too, and the
            # reader, which takes its operands in turn, may report it first.
            n = max(n, 16)
        cmd = any_command(bench, rng, op, n, distinct=True)
        read, write = first_read_and_write(bench, cmd)
        for addr, code, reads in ((read, ErrorCode.AXI_READ_ERROR, True),
                                  (write, ErrorCode.AXI_WRITE_ERROR, False)):
            resp = rng.choice((AxiResp.SLVERR, AxiResp.DECERR))
            bench.ram.error_ranges = [ErrorRange(addr, addr + 1, resp=resp, reads=reads,
                                                 writes=not reads)]
            await bench.check(cmd, expect=code, err_addr=addr & 0xFFFFFFFF)
        bench.ram.error_ranges = []
        # Refusals: LENGTH 0 and 65 537, every address odd (the golden model's code).
        o = bench.origin
        for length, odd in ((0, 0), (65537, 0), (8, 1)):
            await bench.check(VaCommand(op, length, src=o + odd, src2=o + 512 + odd,
                                        src3=o + 768 + odd, dst=o + 1024 + odd,
                                        dst2=o + 1536 + odd, k=1, index_limit=8, rows=1))
        if not ICARUS:
            bench.set_pauses(0)
            await bench.check(any_command(bench, rng, op, rng.randrange(4097, 6001)))
    bench.set_pauses(0)
    await bench.check(any_command(bench, rng, VaOpcode.ADD, 40))
