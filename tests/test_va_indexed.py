"""Amaranth-simulator tests of the VA's indexed forms (hdl/va/indexed.py).

:class:`~hdl.va.indexed.IndexedMover` runs GATHER_IDX, SCATTER_IDX and GATHER_CSR
against :class:`sim.bfm.PortMemory` on its port (in-order responses after a random
latency, random back-pressure on every channel); the memory afterwards, the outcome and ERR_ADDR must
equal :func:`golden.va.execute` (the START checks of the core are applied first: only
commands they pass reach the mover). :class:`~hdl.va.indexed.IndexLimits` is checked
against exact integer arithmetic. Seeds are in the test ids.
"""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden.va import MemoryWindow, VaCommand, execute
from hdl.va.core import VaCommandLayout, VectorCore
from hdl.va.indexed import IndexedMover, IndexLimits
from sim.bfm.memport import PortMemory
from spec.codes import ErrorCode, VaOpcode

WIDTH = 64
BB = WIDTH // 8
ORIGIN = 0x7F00_0000_0000
SIZE = 1 << 16
TOP = 1 << 48


def start_checks_pass(cmd, mem):
    """True when the golden outcome is not decided by the core's START checks (those
    are the core's, tested by the cocotb bench): ERR_ADDR then comes from the data."""
    probe = VaCommand(**{**cmd.__dict__})
    code, addr = execute(probe, MemoryWindow(ORIGIN, mem.copy()))
    return code in (ErrorCode.NONE, ErrorCode.BAD_COMMAND)


def run_mover(cmd, image, rng, *, latency=5, pause=0.2, core=False, errors=()):
    """Run one command on the mover (``core``: on the whole :class:`VectorCore`, START
    checks included); return (code, addr, memory after, access log)."""
    outcomes, memories, log = run_commands([cmd], image, rng, latency=latency, pause=pause,
                                           core=core, errors=errors)
    return *outcomes[0], memories[0], log


def run_commands(cmds, image, rng, *, latency=5, pause=0.2, core=False, errors=()):
    """Run ``cmds`` one after the other on one mover (or core); return the (code, addr)
    and the memory after each, and the access log. ``errors``: byte ranges the memory
    refuses during the first command."""
    dut = VectorCore(8, WIDTH) if core else IndexedMover(WIDTH, VaCommandLayout(), outstanding=8)
    mem = image.copy()
    log = []
    outcomes, memories = [], []
    refused = list(errors)

    async def run_one(ctx, cmd):
        outcome = {}
        for name in ("op", "esize", "length", "src", "src2", "src3", "dst", "stride",
                     "index_limit", "rows", "row_stride"):
            ctx.set(getattr(dut.cmd, name), int(getattr(cmd, name)))
        if core:
            await ctx.delay(1e-9)
            if ctx.get(dut.refuse_code):
                return ErrorCode(ctx.get(dut.refuse_code)), ctx.get(dut.refuse_addr)
        ctx.set(dut.launch if core else dut.start, 1)
        await ctx.tick()
        ctx.set(dut.launch if core else dut.start, 0)
        for _ in range(20000):
            if core:
                _, _, finish, fail, code, addr = await ctx.tick().sample(
                    dut.finish, dut.fail, dut.fail_code, dut.fail_addr)
                if fail:
                    outcome["code"], outcome["addr"] = ErrorCode(code), addr
                if finish or fail:
                    break
                continue
            _, _, error, done, idle = await ctx.tick().sample(dut.error, dut.done, dut.idle)
            if error.valid and "code" not in outcome:
                outcome["code"], outcome["addr"] = ErrorCode(error.code), error.addr
                ctx.set(dut.abort, 1)
            if ("code" in outcome or done) and idle:
                break
        else:
            raise AssertionError(f"no end within 20000 cycles ({cmd}); accesses: {log}")
        if not core:
            ctx.set(dut.abort, 0)
        await ctx.tick()
        return outcome.get("code", ErrorCode.NONE), outcome.get("addr", 0)

    async def bench(ctx):
        for cmd in cmds:
            outcomes.append(await run_one(ctx, cmd))
            memories.append(mem.copy())
            refused.clear()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    PortMemory(dut.mem, WIDTH, mem, origin=ORIGIN, latency=(latency, latency + 3), pause=pause,
               rng=rng, errors=refused, log=log, w_before_aw=True).add_to(sim)
    sim.run()
    return outcomes, memories, log


def random_command(rng, image, op, n, esize, stride, *, skip=0.2, rows=None, meta_at=0xB000):
    limit = rng.randrange(1, 2 * n + 2)
    if stride:
        limit = max(1, min(limit, 8192 // stride))
    rows = rows or rng.randrange(1, 9)
    row_stride = rng.randrange(0, 4096 // rows) >> esize << esize
    base = ORIGIN + (rng.randrange(0, 16384) >> esize << esize)
    dense = ORIGIN + 0x8000 + (rng.randrange(0, 0x2000) >> esize << esize)
    meta = ORIGIN + meta_at + 4 * rng.randrange(0, 256)
    values = np.array([-1 if rng.random() < skip else rng.randrange(limit) for _ in range(n)],
                      np.int32)
    if op == VaOpcode.GATHER_CSR:
        cuts = sorted(rng.randrange(n + 1) for _ in range(rows - 1))
        pointers = np.array([0, *cuts, n], np.int32)
        cols = meta + 4 * (rows + 1) + 4 * rng.randrange(4)
        image[meta - ORIGIN:][:4 * (rows + 1)] = pointers.view(np.uint8)
        image[cols - ORIGIN:][:4 * n] = np.maximum(values, 0).view(np.uint8)
        return VaCommand(op, n, src=base, src2=meta, src3=cols, dst=dense, esize=esize,
                         stride=stride, index_limit=limit, rows=rows, row_stride=row_stride)
    image[meta - ORIGIN:][:4 * n] = values.view(np.uint8)
    if op == VaOpcode.SCATTER_IDX:
        return VaCommand(op, n, src=dense, src2=meta, dst=base, esize=esize, stride=stride,
                         index_limit=limit)
    return VaCommand(op, n, src=base, src2=meta, dst=dense, esize=esize, stride=stride,
                     index_limit=limit)


def check(cmd, image, rng, **kwargs):
    golden = image.copy()
    code, addr = execute(cmd, MemoryWindow(ORIGIN, golden))
    got_code, got_addr, after, log = run_mover(cmd, image, rng, **kwargs)
    assert (got_code, got_addr) == (code, addr & 0xFFFFFFFF), (
        f"{got_code.name} {got_addr:#x}, expected {ErrorCode(code).name} {addr:#x} ({cmd})")
    if code == ErrorCode.NONE:
        bad = np.nonzero(after != golden)[0]
        assert not len(bad), f"{len(bad)} bytes differ, first at {bad[0]:#x} ({cmd})"
    else:
        assert not [a for a in log if a[0] == "write"], f"writes before {code.name} ({cmd})"
        assert np.array_equal(after, image)


@pytest.mark.parametrize("seed", range(18), ids=lambda s: f"seed{s}")
def test_indexed_against_golden(seed):
    """Random commands of each indexed form, size and stride against the golden model."""
    rng = random.Random(seed)
    image = np.frombuffer(rng.randbytes(SIZE), np.uint8).copy()
    op = (VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX, VaOpcode.GATHER_CSR)[seed % 3]
    esize = (seed // 3) % 3
    size = 1 << esize
    stride = rng.choice((0, size, 2048, size * rng.randrange(1, 50), 1 + 2 * rng.randrange(40)))
    stride = stride >> esize << esize
    n = rng.choice((1, 7, 8, 9, rng.randrange(2, 70)))
    cmd = random_command(rng, image, op, n, esize, stride, rows=rng.randrange(1, 12))
    check(cmd, image, rng, latency=rng.randrange(1, 12), pause=rng.choice((0.0, 0.3)))


@pytest.mark.parametrize("seed", range(3), ids=lambda s: f"seed{s}")
def test_core_runs_indexed(seed):
    """The same through the whole core (its START checks, port muxes and end of command;
    L=8), two commands of one form on one core: a good one with an unaligned destination,
    then one with a bad index (BAD_COMMAND, nothing written)."""
    rng = random.Random(200 + seed)
    image = np.frombuffer(rng.randbytes(SIZE), np.uint8).copy()
    op = (VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX, VaOpcode.GATHER_CSR)[seed]
    esize = rng.randrange(3)
    good = random_command(rng, image, op, rng.randrange(1, 40), esize,
                          rng.randrange(0, 300) >> esize << esize)
    bad = random_command(rng, image, op, rng.randrange(1, 40), esize,
                         rng.randrange(0, 300) >> esize << esize, meta_at=0xD000)
    at = (bad.src3 if op == VaOpcode.GATHER_CSR else bad.src2) - ORIGIN
    image[at:at + 4 * bad.length].view(np.int32)[rng.randrange(bad.length)] = -5
    outcomes, memories, _ = run_commands([good, bad], image, rng, latency=rng.randrange(1, 8),
                                         pause=0.2, core=True)
    golden = image.copy()
    assert execute(good, MemoryWindow(ORIGIN, golden)) == (ErrorCode.NONE, 0)
    assert outcomes[0] == (ErrorCode.NONE, 0), f"{outcomes[0]} ({good})"
    differ = np.nonzero(memories[0] != golden)[0]
    assert not len(differ), f"{len(differ)} bytes differ, first at {differ[0]:#x} ({good})"
    code, addr = execute(bad, MemoryWindow(ORIGIN, golden))
    assert code == ErrorCode.BAD_COMMAND
    assert outcomes[1] == (code, addr & 0xFFFFFFFF), f"{outcomes[1]}, expected {addr:#x} ({bad})"
    assert np.array_equal(memories[1], memories[0]), "a refused command wrote"


@pytest.mark.parametrize("seed", range(9), ids=lambda s: f"seed{s}")
def test_indexed_errors(seed):
    """Bad indices, bad row pointers, an address reaching 2**48, a CSR matrix beyond it:
    BAD_COMMAND with the golden ERR_ADDR, nothing written."""
    rng = random.Random(100 + seed)
    image = np.frombuffer(rng.randbytes(SIZE), np.uint8).copy()
    op = (VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX, VaOpcode.GATHER_CSR)[seed % 3]
    n = rng.randrange(4, 40)
    cmd = random_command(rng, image, op, n, 1, 2 * rng.randrange(1, 20), skip=0.1)
    at = (cmd.src3 if op == VaOpcode.GATHER_CSR else cmd.src2) - ORIGIN
    values = image[at:at + 4 * n].view(np.int32)
    kind = seed // 3
    if kind == 0:
        for i in rng.sample(range(n), 2):
            values[i] = rng.choice((cmd.index_limit, -2, -(1 << 31), (1 << 31) - 1))
    elif kind == 1 and op == VaOpcode.GATHER_CSR:
        pointers = image[cmd.src2 - ORIGIN:][:4 * (cmd.rows + 1)].view(np.int32)
        pointers[rng.randrange(cmd.rows + 1)] += rng.choice((-1, 1))
    elif kind == 1:
        cmd.index_limit, cmd.stride = 1 << 20, 4096
        values[:] = np.where(values < 0, -1, 0)
        values[rng.randrange(n)] = 0x10000
        if op == VaOpcode.GATHER_IDX:
            cmd.src = TOP - 0x10000 * 4096 + 2 * rng.randrange(3)
        else:
            cmd.dst = TOP - 0x10000 * 4096 + 2 * rng.randrange(3)
        if rng.random() < 0.5:
            values[rng.randrange(n)] = 1 << 20
    elif op == VaOpcode.GATHER_CSR:
        cmd.src = TOP - (cmd.rows - 1) * cmd.row_stride - (cmd.index_limit - 1) * cmd.stride
    else:
        values[rng.randrange(n)] = cmd.index_limit + rng.randrange(5)
    assert start_checks_pass(cmd, image)
    check(cmd, image, rng, latency=3)


@pytest.mark.parametrize("seed", range(6), ids=lambda s: f"seed{s}")
def test_index_limits(seed):
    """``qmax``, ``none_ok`` and ``extent_bad`` equal exact integer arithmetic."""
    rng = random.Random(seed)
    dut = IndexLimits()
    cases = []
    for _ in range(12):
        esize = rng.randrange(3)
        base = rng.choice((rng.randrange(TOP), TOP - rng.randrange(1, 9), rng.randrange(1 << 20)))
        stride = rng.choice((0, 1, rng.randrange(1 << 32), rng.randrange(1 << 12)))
        rows, row_stride = rng.randrange(1 << 32), rng.randrange(1 << 32)
        limit = rng.choice((0, 1, rng.randrange(1 << 32)))
        cases.append((base, esize, stride, rows, row_stride, limit))

    async def bench(ctx):
        for base, esize, stride, rows, row_stride, limit in cases:
            for name, value in (("base", base), ("esize", esize), ("stride", stride),
                                ("rows", rows), ("row_stride", row_stride), ("limit", limit)):
                ctx.set(getattr(dut, name), value)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            await ctx.tick().until(dut.done)
            size = 1 << esize
            room = TOP - size - base
            assert ctx.get(dut.none_ok) == (room < 0)
            if room >= 0:
                expect = room // stride if stride else TOP - 1
                assert ctx.get(dut.qmax) == min(expect, TOP - 1)
            extent = base + max(rows - 1, 0) * row_stride + max(limit - 1, 0) * stride + size
            assert ctx.get(dut.extent_bad) == (extent > TOP)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()



def element_addresses(cmd, image):
    """The element addresses of an indexed command in element order (-1 entries left out)."""
    def int32s(addr, count):
        return image[addr - ORIGIN:][:4 * count].view(np.int32)
    if cmd.op == VaOpcode.GATHER_CSR:
        pointers = int32s(cmd.src2, cmd.rows + 1)
        columns = int32s(cmd.src3, cmd.length)
        return [cmd.src + r * cmd.row_stride + int(columns[j]) * cmd.stride
                for r in range(cmd.rows) for j in range(pointers[r], pointers[r + 1])]
    base = cmd.dst if cmd.op == VaOpcode.SCATTER_IDX else cmd.src
    return [base + int(v) * cmd.stride for v in int32s(cmd.src2, cmd.length) if v >= 0]


@pytest.mark.parametrize("seed", range(6), ids=lambda s: f"seed{s}")
def test_command_after_axi_error(seed):
    """An AXI error stops a command in its RUN pass (a read error at a gathered element, a
    write error at a scattered one: ERR_ADDR = the first element in order that touches the
    refused byte; every byte written before equals the golden result); the next command on
    the same mover then runs as the golden model says (nothing of the stopped command's
    addresses or elements may reach it). Random back-pressure on every channel."""
    rng = random.Random(300 + seed)
    image = np.frombuffer(rng.randbytes(SIZE), np.uint8).copy()
    ops = (VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX, VaOpcode.GATHER_CSR)
    op = ops[seed % 3]
    esize = rng.randrange(3)
    size = 1 << esize
    n = rng.randrange(12, 40)
    first = random_command(rng, image, op, n, esize, size * rng.randrange(1, 60), skip=0.0,
                           rows=3)
    if op == VaOpcode.SCATTER_IDX:       # distinct elements, so the golden image is clear
        first.index_limit = max(first.index_limit, n)
        values = np.array(rng.sample(range(first.index_limit), n), np.int32)
        image[first.src2 - ORIGIN:][:4 * n] = values.view(np.uint8)
    golden = image.copy()
    assert execute(first, MemoryWindow(ORIGIN, golden)) == (ErrorCode.NONE, 0)
    addresses = element_addresses(first, image)
    victim = addresses[rng.randrange(len(addresses) // 2, len(addresses))]
    if op == VaOpcode.SCATTER_IDX:
        hit = next(a for a in addresses if a <= victim < a + size)
        code = ErrorCode.AXI_WRITE_ERROR
    else:
        hit = next(a for a in addresses if a // BB == victim // BB)
        code = ErrorCode.AXI_READ_ERROR
    second = random_command(rng, image, rng.choice(ops), rng.randrange(1, 30), esize,
                            size * rng.randrange(0, 40), meta_at=0xD000)
    outcomes, memories, _ = run_commands([first, second], image, rng, pause=0.3,
                                         latency=rng.randrange(2, 9),
                                         errors=[(victim, victim + 1)])
    assert outcomes[0] == (code, hit & 0xFFFFFFFF), f"{outcomes[0]}, expected {code.name} {hit:#x}"
    changed = np.nonzero(memories[0] != image)[0]
    assert np.array_equal(memories[0][changed], golden[changed]), "a write differs from golden"
    expect = memories[0].copy()
    assert execute(second, MemoryWindow(ORIGIN, expect)) == (ErrorCode.NONE, 0)
    assert outcomes[1] == (ErrorCode.NONE, 0), f"second command: {outcomes[1]} ({second})"
    bad = np.nonzero(memories[1] != expect)[0]
    assert not len(bad), f"{len(bad)} bytes differ after the second command, first at {bad[0]:#x}"
