"""The VA latency model (golden/va_latency.py) against the RTL core's cycle counts.

The whole :class:`~hdl.va.core.VectorCore` runs in the Amaranth simulator against
:class:`sim.bfm.PortMemory` at a fixed latency (no back-pressure): random commands of
every opcode the RTL runs, one after the other on one core (the model is given what
each command leaves behind, :class:`golden.va_latency.VaState`), each timed from the
launch (START) to the finish pulse (DONE), as tests/test_ma_latency.py times the MA.
The model must be within 2 % of every command; it is exact on all of them in the runs
so far, and the test prints the largest and mean error per opcode. ``make test`` runs
one configuration; the ``regress`` marker adds a bus-wide one and a narrowed one with
longer vectors.
"""

import random
from collections import defaultdict

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden.va import MemoryWindow, VaCommand, execute
from golden.va_latency import VaState, va_cycles
from hdl.va.core import RTL_OPCODES, VectorCore
from sim.bfm.memport import PortMemory
from spec.codes import ErrorCode, VaOpcode
from tests import test_va_indexed

LATENCY = 6
ORIGIN = test_va_indexed.ORIGIN
SIZE = 1 << 18
INDEXED = (VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX, VaOpcode.GATHER_CSR)
META, META_SLOT = 0x10000, 0x1000   # the indexed commands' index regions
MODELLED = tuple(op for op in RTL_OPCODES)
# Element moves stay short: their writes then never reach the index vectors of the
# indexed commands (each in a region of its own from META).
MAX_MOVES = 64


def random_command(op, rng, image, max_n, slot=0):
    """A random command of ``op`` the START checks pass, operands inside the memory; an
    indexed command's indices (and CSR pointers) in region ``slot`` of its own, which no
    other command writes."""
    if op in (VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX, VaOpcode.GATHER_CSR):
        while True:         # a command the golden model runs to the end (no bad index)
            esize = rng.randrange(3)
            n = rng.randrange(1, min(max_n, MAX_MOVES) + 1)
            cmd = test_va_indexed.random_command(rng, image, op, n, esize,
                                                 rng.randrange(0, 16) << esize,
                                                 meta_at=META + slot * META_SLOT)
            code, _ = execute(cmd, MemoryWindow(ORIGIN, image.copy()))
            if code == ErrorCode.NONE:
                return cmd
    n = rng.randrange(1, max_n + 1)
    src = ORIGIN + 0x0100 + rng.randrange(0, 64)
    src2 = ORIGIN + 0x3000 + 2 * rng.randrange(0, 32)
    src3 = ORIGIN + 0x5000 + 2 * rng.randrange(0, 32)
    dst = ORIGIN + 0x8000 + rng.randrange(0, 64)
    dst2 = ORIGIN + 0xC000 + 4 * rng.randrange(0, 16)
    even = src & ~1
    if op in (VaOpcode.GATHER, VaOpcode.SCATTER):
        n = min(n, MAX_MOVES)
        esize = rng.randrange(3)
        stride = rng.randrange(0, 40) << esize
        return VaCommand(op, n, src=src >> esize << esize, dst=dst >> esize << esize,
                         esize=esize, stride=stride)
    if op == VaOpcode.DEQUANTIZE_MEM:
        return VaCommand(op, n, src=src & ~3, src2=src2 & ~3, dst=dst & ~1, scalar=0x3F800000)
    if op in (VaOpcode.DEQUANTIZE, VaOpcode.CVT_F32):
        return VaCommand(op, n, src=src & ~3, dst=dst & ~1, scalar=0x3F800000)
    if op == VaOpcode.QUANTIZE:
        return VaCommand(op, n, src=even, dst=dst, dst2=dst2)
    if op == VaOpcode.TOPK:
        return VaCommand(op, n, src=even, dst=dst & ~1, dst2=dst2, k=rng.randrange(1, min(n, 8) + 1))
    if op == VaOpcode.TOPK_WIDE:        # K kept small: a pass per 8 values
        return VaCommand(op, n, src=even, dst=dst & ~1, dst2=dst2, k=rng.randrange(1, min(n, 16) + 1))
    if op == VaOpcode.SUM:
        return VaCommand(op, n, src=even, dst=dst & ~3)
    if op == VaOpcode.ROPE:
        return VaCommand(op, n + n % 2, src=even, src2=src2, src3=src3, dst=dst & ~1,
                         split_half=rng.random() < 0.5)
    scalar = {VaOpcode.CLAMP: 0x4000_C000, VaOpcode.RMSNORM: 0x3727C5AC,
              VaOpcode.SCALE: 0x3FC0}.get(op, 0)
    return VaCommand(op, n, src=even, src2=src2, dst=dst & ~1, scalar=scalar)


def run_core(cmds, lanes, data_width, fn_lanes, image):
    """Run ``cmds`` back to back; returns the cycles of each (launch → finish) and the
    memory each indexed command started from (its timing depends on its indices)."""
    dut = VectorCore(lanes, data_width, fn_lanes)
    cycles, before = [], []

    async def bench(ctx):
        for cmd in cmds:
            for name in ("op", "esize", "length", "src", "src2", "src3", "dst", "dst2",
                         "stride", "scalar", "k", "index_limit", "rows", "row_stride",
                         "split_half"):
                ctx.set(getattr(dut.cmd, name), int(getattr(cmd, name)))
            await ctx.tick().repeat(3)
            assert not ctx.get(dut.refuse_code), f"START refused {cmd}"
            before.append(image.copy() if cmd.op in INDEXED else None)
            ctx.set(dut.launch, 1)
            await ctx.tick()
            ctx.set(dut.launch, 0)
            for cycle in range(100_000):
                if ctx.get(dut.finish) or ctx.get(dut.fail):
                    assert ctx.get(dut.finish), f"{cmd} failed"
                    cycles.append(cycle + 1)
                    break
                await ctx.tick()
            else:
                raise AssertionError(f"{cmd} never ended")
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    PortMemory(dut.mem, data_width, image, origin=ORIGIN, latency=LATENCY).add_to(sim)
    sim.run()
    return cycles, before


def check(seed, lanes, data_width, fn_lanes, per_op, max_n):
    rng = random.Random(seed)
    image = np.frombuffer(rng.randbytes(SIZE), np.uint8).copy()
    ops = [op for op in MODELLED for _ in range(per_op)]
    slots = [sum(o in INDEXED for o in ops[:i]) for i in range(len(ops))]
    cmds = [random_command(op, rng, image, max_n, slot) for op, slot in zip(ops, slots, strict=True)]
    rng.shuffle(cmds)
    measured, memories = run_core(cmds, lanes, data_width, fn_lanes, image)
    state, errors, worst = VaState(), defaultdict(list), []
    for cmd, rtl, memory in zip(cmds, measured, memories, strict=True):
        model = va_cycles(cmd, lanes=lanes, data_width=data_width, fn_lanes=fn_lanes,
                          latency=LATENCY, state=state, memory=memory, origin=ORIGIN)
        error = abs(model - rtl) / rtl
        errors[VaOpcode(cmd.op).name].append(error)
        if error > 0.02:
            worst.append(f"{VaOpcode(cmd.op).name} n={cmd.length}: RTL {rtl}, model {model}"
                         f" ({100 * error:.2f} %): {cmd}")
    for name, errs in sorted(errors.items()):
        print(f"L={lanes} bus={data_width} fn={fn_lanes}: {name:12} {len(errs):3} commands, "
              f"max {100 * max(errs):.2f} %, mean {100 * sum(errs) / len(errs):.2f} %")
    assert not worst, "\n".join(worst)


def test_model_within_two_percent():
    check(1, 8, 64, None, per_op=1, max_n=40)


@pytest.mark.regress
@pytest.mark.parametrize("seed, lanes, data_width, fn_lanes", [(2, 32, 128, None),
                                                               (3, 16, 128, 2)])
def test_model_within_two_percent_regress(seed, lanes, data_width, fn_lanes):
    check(seed, lanes, data_width, fn_lanes, per_op=4, max_n=300)


def test_model_constants_follow_the_rtl():
    """The model's view of the RTL's sizes (it may not import the RTL) is the RTL's own."""
    import inspect

    from golden import mc_latency, va_latency
    from hdl.mc import core as mc_core
    from hdl.mc import frontend
    from hdl.va import gather, lanes, streams
    assert va_latency.MAX_BURST == streams.MAX_BURST
    assert va_latency.READ_FIFO == inspect.signature(streams.OperandReader).parameters[
        "depth"].default
    assert va_latency.ELEMENTS_IN_FLIGHT == inspect.signature(
        gather.ElementReader).parameters["outstanding"].default
    assert va_latency.SUM_LOOP == lanes._SUM_LOOP
    assert mc_latency.MAX_BURST == frontend.MAX_BURST
    assert mc_latency.OUTSTANDING == mc_core.OUTSTANDING
