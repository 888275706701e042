"""The tile issuer: which k-step of which output tile enters the array, and when."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.ma.layouts import (
    INTERLEAVE,
    MAX_DIM,
    MaCommandLayout,
    StepRequestLayout,
    group_count,
    tile_counts,
)

__all__ = ["TileIssuer"]


class TileIssuer(wiring.Component):
    """Walks the output tiles in groups of ``INTERLEAVE`` (row-major: the groups of tile
    row 0, then of tile row 1, …), one k-step a cycle, the group's tiles interleaved.

    Group (it, g) holds tiles jt = g·INTERLEAVE + s, s = 0..INTERLEAVE-1 (slots); a slot
    past the last tile of a row still runs (its results are dropped on the way out), so
    the steps of a group are always ``K·INTERLEAVE`` consecutive cycles: k-major, step k
    of slot 0, 1, …, then step k + 1. A group starts when B and its A block (and, with
    ACCUMULATE, its old-C tiles) are loaded, the result path has ``room`` for the group's
    rows (the start pulses ``reserve``), and at least ``min_spacing`` cycles after the
    previous group's start (the array's spacing rule). After the last step of a block's
    last group, ``a_freed`` gives that A half back. ``issued_all`` stays high once every
    group has been issued, until ``run`` falls.
    """

    def __init__(self, p, min_spacing):
        self.p = p
        self.min_spacing = min_spacing
        super().__init__({
            "run": In(1),
            "cmd": In(MaCommandLayout()),
            "a_full": In(2),
            "b_full": In(1),
            "c_full": In(1),
            "room": In(1),
            "reserve": Out(1),
            "request": Out(StepRequestLayout(p)),
            "a_freed": Out(2),
            "issued_all": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p, cmd = self.p, self.cmd
        # The command's derived bounds, registered: they follow ``cmd`` (copied while the
        # core is idle) a cycle later, long before ``run`` rises after the TAT walk.
        m_tiles, n_tiles = tile_counts(cmd, p)
        last_it = Signal(range(MAX_DIM // p + 1))
        last_g = Signal(range(MAX_DIM // p + 1))
        last_k_index = Signal(range(MAX_DIM))
        m.d.sync += [last_it.eq(m_tiles - 1), last_g.eq(group_count(n_tiles, INTERLEAVE) - 1),
                     last_k_index.eq(cmd.k - 1)]
        it = Signal(range(MAX_DIM // p + 1))
        g = Signal(range(MAX_DIM // p + 1))
        slot = Signal(range(INTERLEAVE))
        k = Signal(range(MAX_DIM))
        issuing = Signal()
        since = Signal(range(self.min_spacing + 1), init=self.min_spacing)
        half = it[0]

        start = self.reserve
        m.d.comb += start.eq(self.run & ~issuing & ~self.issued_all & self.b_full
                             & self.a_full.bit_select(half, 1)
                             & (~cmd.accumulate | self.c_full) & self.room
                             & (since == self.min_spacing))
        step = start | issuing
        last_k = k == last_k_index
        last_slot = slot == INTERLEAVE - 1
        m.d.comb += [self.request.valid.eq(step), self.request.first.eq(step & (k == 0)),
                     self.request.last.eq(last_k), self.request.k.eq(k),
                     self.request.jt.eq(Cat(slot, g)[:len(self.request.jt)]),
                     self.request.slot.eq(slot), self.request.half.eq(half)]
        assert INTERLEAVE > 1 and INTERLEAVE == 1 << exact_log2(INTERLEAVE)
        with m.If(start):
            m.d.sync += since.eq(1)
        with m.Elif(since != self.min_spacing):
            m.d.sync += since.eq(since + 1)

        with m.If(step):
            m.d.sync += [slot.eq(slot + 1), issuing.eq(1)]
        # A group's first step is slot 0's (never the last slot's), so what follows the
        # last slot of a k-step depends on registers only, not on ``start``.
        with m.If(issuing):
            with m.If(last_slot):
                m.d.sync += k.eq(k + 1)
                with m.If(last_k):
                    m.d.sync += [k.eq(0), issuing.eq(0), g.eq(g + 1)]
                    with m.If(g == last_g):
                        m.d.sync += [g.eq(0), it.eq(it + 1)]
                        m.d.comb += self.a_freed.eq(1 << half)
                        with m.If(it == last_it):
                            m.d.sync += self.issued_all.eq(1)
        with m.If(~self.run):
            m.d.sync += [k.eq(0), slot.eq(0), issuing.eq(0), g.eq(0), it.eq(0),
                         self.issued_all.eq(0), since.eq(self.min_spacing)]
        return m
