"""Amaranth-simulator tests of RowUnit's parts (hdl/va/row_*.py) on their own: the pass
handshake (hdl.va.row_common.PassSignature) as each unit speaks it, the top-k lists' merge
and the scalar sequencer's QUANTIZE chain against golden.va. The whole RowUnit is
tested in test_va_rows.py and test_va_wide.py. Seeds are in the test ids.
"""

import numpy as np
import pytest
from amaranth.lib import wiring
from amaranth.sim import Simulator

from golden import va as golden
from hdl.va.row_common import PassSignature
from hdl.va.row_reduce import ExactSum, MaxTree, TopkLists
from hdl.va.row_scalar import ScalarSequencer
from spec.va import MAX_K, RECIP_127

WIDTH = 128
LANES = WIDTH // 16


def simulate(dut, bench):
    """Runs ``bench`` on ``dut``, a unit that speaks the pass handshake: its ``passes`` is
    the unit's side of PassSignature (``start`` in, ``busy`` and ``done`` out)."""
    member = dut.signature.members["passes"]
    assert member.flow == wiring.In and isinstance(member.signature.flip(), PassSignature)
    assert dict(member.signature.flip().members) == dict(PassSignature().members)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("make", [lambda: MaxTree(2, LANES), lambda: ExactSum(2, LANES)],
                         ids=["max_tree", "exact_sum"])
def test_a_unit_without_work_between_passes_is_done_at_start(make):
    """Rule 4: ``done`` in ``start``'s cycle, and not busy when no piece came."""
    dut = make()

    async def bench(ctx):
        await ctx.tick()
        assert not ctx.get(dut.passes.busy)
        assert not ctx.get(dut.passes.done)
        ctx.set(dut.passes.start, 1)
        assert ctx.get(dut.passes.done)

    simulate(dut, bench)


@pytest.mark.parametrize("fn_lanes", [1, 2, 8])
@pytest.mark.parametrize("seed", range(2), ids=lambda s: f"seed{s}")
def test_topk_lists_merge(seed, fn_lanes):
    """Random candidates (some none: key -2) into the lanes' lists, then the merge from
    ``passes.start``: ``done`` once, fn_lanes · MAX_K cycles after ``start``; ``final``
    is the best MAX_K (a larger key, then a lower index), the rest empty."""
    rng = np.random.default_rng(seed)
    dut = TopkLists(fn_lanes)
    cycles = int(rng.integers(1, 12))
    cands = []
    for c in range(cycles):
        cands.append([(int(rng.choice([-2, *rng.integers(0, 1 << 16, 3)])),
                       int(rng.integers(0, 1 << 16)), c * fn_lanes + lane)
                      for lane in range(fn_lanes)])
    real = sorted((e for row in cands for e in row if e[0] != -2), key=lambda e: (-e[0], e[2]))
    want = real[:MAX_K]
    dones = []

    async def bench(ctx):
        for row in cands:
            for lane, (key, value, index) in enumerate(row):
                ctx.set(dut.cands[lane], {"key": key, "value": value, "index": index})
            ctx.set(dut.insert, 1)
            await ctx.tick()
        ctx.set(dut.insert, 0)
        ctx.set(dut.passes.start, 1)
        assert not ctx.get(dut.passes.done) and not ctx.get(dut.passes.busy)
        await ctx.tick()
        ctx.set(dut.passes.start, 0)
        for cycle in range(1, fn_lanes * MAX_K + 4):
            if ctx.get(dut.passes.done):
                dones.append(cycle)
            await ctx.tick()
        final = [ctx.get(dut.final[i]) for i in range(MAX_K)]
        got = [(e.key, e.value, e.index) for e in final if e.key != -2]
        assert got == want, f"{got} vs {want}"
        assert all(e.key == -2 for e in final[len(want):])

    simulate(dut, bench)
    assert dones == [fn_lanes * MAX_K]


@pytest.mark.parametrize("seed", range(3), ids=lambda s: f"seed{s}")
def test_scalar_sequencer_quantize(seed):
    """QUANTIZE's chain from ``passes.start``: ``scale`` = f32_mul(absmax, RECIP_127) and
    ``c`` = recip(scale) as golden.va.quantize_bf16 forms them, ``done`` once, never
    ``busy``."""
    rng = np.random.default_rng(seed)
    absmax = int(rng.integers(0x0080, 0x7F80))        # a normal, positive bf16 magnitude
    dut = ScalarSequencer(WIDTH)
    scale = int(golden.f32_mul(golden.bf16_in(np.uint16(absmax)), np.uint32(RECIP_127)))
    recip = int(golden.recip_f32(np.uint32(scale)))
    dones = []

    async def bench(ctx):
        ctx.set(dut.quantize, 1)
        ctx.set(dut.best, {"key": absmax, "value": absmax | int(rng.integers(0, 2)) << 15,
                           "index": 0})
        ctx.set(dut.passes.start, 1)
        await ctx.tick()
        ctx.set(dut.passes.start, 0)
        for cycle in range(1, 200):
            assert not ctx.get(dut.passes.busy)
            if ctx.get(dut.passes.done):
                dones.append(cycle)
            await ctx.tick()
        assert ctx.get(dut.scale) == scale, f"{ctx.get(dut.scale):#010x} vs {scale:#010x}"
        assert ctx.get(dut.c) == recip, f"{ctx.get(dut.c):#010x} vs {recip:#010x}"

    simulate(dut, bench)
    assert len(dones) == 1, dones
