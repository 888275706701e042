"""The tile issuer: which k-step of which output tile enters the array, and when."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.ma.layouts import MAX_DIM, MaCommandLayout, StepRequestLayout, tile_counts

__all__ = ["TileIssuer"]


class TileIssuer(wiring.Component):
    """Walks the output tiles in row-major tile order, one k-step a cycle.

    A tile starts when B and its A block (and, with ACCUMULATE, its old-C tile) are
    loaded, the result path has ``room`` for P rows (the start pulses ``reserve``), and
    at least ``2·P`` cycles after the previous tile's start (the array's spacing rule);
    it then runs its K steps on consecutive cycles. After the last step of a block's last
    tile, ``a_freed`` gives that A half back. ``issued_all`` stays high once every tile
    has been issued, until ``run`` falls.
    """

    def __init__(self, p):
        self.p = p
        self.min_spacing = 2 * p
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
        m_tiles, n_tiles = tile_counts(cmd, p)
        it = Signal(range(MAX_DIM // p + 1))
        jt = Signal(range(MAX_DIM // p + 1))
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
        last_step = k == cmd.k - 1
        m.d.comb += [self.request.valid.eq(step), self.request.first.eq(start),
                     self.request.last.eq(last_step), self.request.k.eq(k),
                     self.request.jt.eq(jt), self.request.half.eq(half)]
        with m.If(start):
            m.d.sync += since.eq(1)
        with m.Elif(since != self.min_spacing):
            m.d.sync += since.eq(since + 1)

        with m.If(step):
            m.d.sync += k.eq(k + 1)
            with m.If(last_step):
                m.d.sync += [k.eq(0), issuing.eq(0), jt.eq(jt + 1)]
                with m.If(jt == n_tiles - 1):
                    m.d.sync += [jt.eq(0), it.eq(it + 1)]
                    m.d.comb += self.a_freed.eq(1 << half)
                    with m.If(it == m_tiles - 1):
                        m.d.sync += self.issued_all.eq(1)
            with m.Else():
                m.d.sync += issuing.eq(1)
        with m.If(~self.run):
            m.d.sync += [k.eq(0), issuing.eq(0), jt.eq(0), it.eq(0), self.issued_all.eq(0),
                         since.eq(self.min_spacing)]
        return m
