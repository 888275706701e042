"""The RTL TAT lookup (hdl/common/tat.py) against golden/ma.py's tat_translate: the
combinational ``tat_translate`` and the registered split the row reader and writer use
(``tat_masks`` and ``tat_covers`` registered, then ``tat_select``)."""

import random

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from golden.ma import TatEntry, tat_check
from golden.ma import tat_translate as golden_translate
from hdl.common.rowio import ADDR_BITS
from hdl.common.tat import (
    TAT_ENTRIES,
    TatTableLayout,
    tat_covers,
    tat_masks,
    tat_select,
    tat_translate,
)
from spec.codes import ErrorCode


class Lookup(wiring.Component):
    def __init__(self):
        super().__init__({
            "tat": In(TatTableLayout()), "addr": In(ADDR_BITS),
            "hit": Out(1), "phys": Out(48),                  # combinational
            "hit_q": Out(1), "phys_q": Out(48),              # split: one cycle later
        })

    def elaborate(self, platform):
        m = Module()
        hit, phys = tat_translate(m, self.tat, self.addr)
        m.d.comb += [self.hit.eq(hit), self.phys.eq(phys)]
        masks = tat_masks(m, self.tat)
        covers, addr = Signal(TAT_ENTRIES), Signal(ADDR_BITS)
        m.d.sync += [covers.eq(tat_covers(m, self.tat, self.addr, masks)), addr.eq(self.addr)]
        hit_q, phys_q = tat_select(m, self.tat, covers, addr, masks, name="split")
        m.d.comb += [self.hit_q.eq(hit_q), self.phys_q.eq(phys_q)]
        return m


def random_table(rng):
    while True:
        entries = []
        for _ in range(TAT_ENTRIES):
            size = rng.choice([0, 0, 1, 3, 5, 8, 19])
            region = 4096 << size
            logical = rng.randrange(0, 1 << 32, region)
            phys = rng.randrange(0, 1 << 48, region)
            entries.append(TatEntry(rng.random() < 0.8, logical, size, phys))
        if tat_check(entries) is ErrorCode.NONE:
            return entries


def addresses(rng, entries, count):
    out = []
    for _ in range(count):
        e = rng.choice(entries)
        base = e.logical_base + rng.choice([0, e.region_bytes - 1, e.region_bytes,
                                            -1, rng.randrange(e.region_bytes)])
        out.append(base % (1 << ADDR_BITS) if rng.random() < 0.95
                   else rng.randrange(1 << 32, 1 << ADDR_BITS))
    return out


def test_lookups_match_the_golden_model():
    rng = random.Random(11)
    dut = Lookup()
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    checked = {"hits": 0, "misses": 0}

    async def bench(ctx):
        for _ in range(12):
            entries = random_table(rng)
            ctx.set(dut.tat, [{"valid": int(e.valid), "size": e.size,
                               "logical_page": e.logical_base >> 12,
                               "physical_page": e.phys_base >> 12} for e in entries])
            await ctx.tick()                           # the registered masks follow
            for addr in addresses(rng, entries, 40):
                expected = golden_translate(entries, addr) if addr < 1 << 32 else None
                ctx.set(dut.addr, addr)
                hit, phys = ctx.get(dut.hit), ctx.get(dut.phys)
                await ctx.tick()
                hit_q, phys_q = ctx.get(dut.hit_q), ctx.get(dut.phys_q)
                for got_hit, got_phys in ((hit, phys), (hit_q, phys_q)):
                    assert bool(got_hit) == (expected is not None), hex(addr)
                    if expected is not None:
                        assert got_phys == expected, (hex(addr), hex(got_phys), hex(expected))
                checked["hits" if expected is not None else "misses"] += 1

    sim.add_testbench(bench)
    sim.run()
    assert checked["hits"] > 100 and checked["misses"] > 50, checked
