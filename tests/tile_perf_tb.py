"""cocotb: the tile's streaming figures beside the standalone tops' (docs/tile/README.md,
"Figures"), run by ``tests/test_tile_cocotb.py``'s ``regress`` tests ``test_tile_perf``
and ``test_tile_vs_standalone``.

The same commands, seeds and memory latency (20 cycles) on the small tile (MA P=4,
VA L=8, 128-bit bus) and on the standalone ``v4hw_ma`` / ``v4hw_va`` of the same
parameters: the streaming ones (an int8 GEMM of 128³, SILU and ADD of 65 536 bf16), the
short ones (int8 and bf16 GEMMs of 32³, SILU of 1000) and the strided moves (a GATHER
and a SCATTER of 2048 four-byte elements at a 2048-byte stride: every element its own
bus word). Every command is checked bit for bit by its block's bench (``MaBench``,
``VaBench``) against the golden model. Each figure is printed as ``PERF <where>
<command> <cycles>`` and goes through :func:`sim.perf.check` as
``tile.perf.<where>.<command>``; on the tile, the streaming VA commands must reach 90 %
of the standalone top's speed (its figure in the baseline).
"""

import random

import cocotb
import numpy as np

from golden.va import VaCommand
from sim import perf
from sim.ma_driver import MaBench
from sim.seed import test_seed
from sim.tile_driver import TileBench
from sim.va_driver import VaBench
from spec.codes import ErrorCode, MaMode, VaOpcode
from tests.tile_tb import BUS, LATENCY, L, P, _wide, operands, silu

STREAM_GEMM = 128
STREAM_LENGTH = 65536
SHORT_GEMM = 32
SHORT_SILU = 1000
MOVE_LENGTH = 2048          # elements of the strided GATHER and SCATTER
MOVE_STRIDE = 2048          # bytes: each element in its own bus word
GOAL = 0.9                  # the tile's streaming VA commands: of the standalone speed
STREAMING = ("va_silu_65536", "va_add_65536")
WINDOW = (0x7F00_0000_0000, 1 << 24)  # the VA's: room for a 4 MiB strided span


def _rngs():
    """The test seed's draws for the MA's and the VA's commands, apart, so that the tile
    (both blocks) and each standalone top (one) draw the same operands."""
    rng = test_seed()
    return rng, random.Random(rng.getrandbits(64)), random.Random(rng.getrandbits(64))


def _record(where, name, cycles):
    print(f"PERF {where} {name} {cycles}")
    perf.check(f"tile.perf.{where}.{name}", cycles)
    return cycles


async def ma_commands(ma, rng, where):
    """The MA's streaming GEMM and the short ones; returns {name: cycles}."""
    await ma.set_tat(_wide())
    got = {}
    n = STREAM_GEMM
    a, b = operands(rng, MaMode.INT8, n, n, n)
    outcome = await ma.gemm(MaMode.INT8, a, b, a_addr=0x100000, b_addr=0x200000,
                            c_addr=0x400000, max_cycles=2_000_000)
    assert outcome.done, outcome
    got[f"ma_int8_{n}x{n}x{n}"] = outcome.cycles
    n = SHORT_GEMM
    for mode in (MaMode.INT8, MaMode.BF16):
        a, b = operands(rng, mode, n, n, n)
        es = 2 if mode == MaMode.BF16 else 1
        outcome = await ma.gemm(mode, a, b, a_addr=0x10000, b_addr=0x20000, c_addr=0x40000,
                                lda=n * es, ldb=n * es)
        assert outcome.done, outcome
        got[f"ma_{mode.name.lower()}_{n}x{n}x{n}"] = outcome.cycles
    for name, cycles in got.items():
        _record(where, name, cycles)
    return got


def strided(va, rng, op):
    """A GATHER (strided source) or SCATTER (strided destination) of MOVE_LENGTH
    four-byte elements inside the VA's window."""
    span = (MOVE_LENGTH - 1) * MOVE_STRIDE + 4
    far = va.origin + va.size // 2
    spread, dense = va.origin + 4 * rng.randrange(1024), far + 4 * rng.randrange(1024)
    assert spread + span <= far and dense + 4 * MOVE_LENGTH <= va.origin + va.size
    g = np.random.default_rng(rng.getrandbits(64))
    if op == VaOpcode.GATHER:
        va.place(spread, g.integers(0, 1 << 32, (span + 3) // 4, dtype=np.uint32))
        return VaCommand(op, MOVE_LENGTH, src=spread, dst=dense, esize=2, stride=MOVE_STRIDE)
    va.place(dense, g.integers(0, 1 << 32, MOVE_LENGTH, dtype=np.uint32))
    return VaCommand(op, MOVE_LENGTH, src=dense, dst=spread, esize=2, stride=MOVE_STRIDE)


async def va_commands(va, rng, where):
    """The VA's streaming SILU and ADD, the short SILU and the strided moves."""
    got = {}

    async def run(name, cmd):
        outcome = await va.check(cmd)
        assert outcome.code == ErrorCode.NONE, (name, outcome)
        got[name] = _record(where, name, outcome.cycles)

    cmd = silu(va, rng, STREAM_LENGTH)
    await run(f"va_silu_{STREAM_LENGTH}", cmd)
    cmd = silu(va, rng, STREAM_LENGTH)
    await run(f"va_add_{STREAM_LENGTH}", VaCommand(VaOpcode.ADD, STREAM_LENGTH, src=cmd.src,
                                                   src2=cmd.dst, dst=cmd.dst))
    await run(f"va_silu_{SHORT_SILU}", silu(va, rng, SHORT_SILU))
    for op in (VaOpcode.GATHER, VaOpcode.SCATTER):
        await run(f"va_{op.name.lower()}_{MOVE_LENGTH}_s{MOVE_STRIDE}", strided(va, rng, op))
    return got


@cocotb.test()
async def tile_streams(dut):
    """Every command through the small tile; the streaming VA commands against GOAL."""
    rng, ma_rng, va_rng = _rngs()
    bench = TileBench(dut, p=P, lanes=L, rng=rng, latency=LATENCY, va_window=WINDOW)
    await bench.start()
    got = await va_commands(bench.va, va_rng, "tile")
    await ma_commands(bench.ma, ma_rng, "tile")
    baseline = perf.load_baseline()
    for name in STREAMING:
        key = f"tile.perf.standalone.{name}@verilator"
        if key in baseline:
            ratio = baseline[key]["value"] / got[name]
            print(f"PERF ratio {name} {ratio:.3f}")
            assert ratio >= GOAL, f"{name}: {ratio:.1%} of the standalone top's speed"


@cocotb.test()
async def standalone_streams(dut):
    """The same commands on the standalone ``v4hw_va`` or ``v4hw_ma``, whichever ``dut``
    is, same seed, latency and window."""
    rng, ma_rng, va_rng = _rngs()
    if dut._name == "v4hw_ma":
        bench = MaBench(dut, p=P, rng=rng, latency=LATENCY)
        await bench.start()
        await ma_commands(bench, ma_rng, "standalone")
        return
    bench = VaBench(dut, lanes=L, data_width=8 * BUS, rng=rng, latency=LATENCY, window=WINDOW)
    await bench.start()
    await va_commands(bench, va_rng, "standalone")
