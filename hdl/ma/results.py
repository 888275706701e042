"""The result path: finished tile rows from the array to the row writer."""

from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.rowio import RowWriteLayout
from hdl.ma.layouts import INTERLEAVE, MAX_DIM, MaCommandLayout, clamp, group_count, tile_counts

__all__ = ["ResultPath"]


class ResultPath(wiring.Component):
    """Turns the array's result rows into row writes of C, through a FIFO of
    ``2·INTERLEAVE·P`` rows (two groups).

    The array gives no back-pressure, so places are promised ahead: a credit counter
    starts at the FIFO's depth, a group start (``reserve``) takes ``INTERLEAVE·P``, and a
    credit comes back when the writer takes a row or a row is dropped: rows past M
    (padding of the last block) and the rows of a group's slots past the last tile of a
    row. ``room`` says a group may start. ``drained_all`` stays high once the last tile's
    rows have left the array; ``empty`` when no row waits for the writer.
    """

    def __init__(self, p):
        self.p = p
        self.group_rows = INTERLEAVE * p
        self.depth = 2 * self.group_rows
        super().__init__({
            "run": In(1),
            "clear": In(1),
            "cmd": In(MaCommandLayout()),
            "row_valid": In(1),
            "row_index": In(range(p)),
            "row": In(data.ArrayLayout(32, p)),
            "reserve": In(1),
            "room": Out(1),
            "out": Out(stream.Signature(RowWriteLayout(4 * p))),
            "drained_all": Out(1),
            "empty": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p, log_p, cmd = self.p, exact_log2(self.p), self.cmd
        m_tiles, n_tiles = tile_counts(cmd, p)
        n_groups = group_count(n_tiles, INTERLEAVE)
        m.submodules.fifo = rows = ResetInserter(self.clear)(fifo.SyncFIFOBuffered(
            width=RowWriteLayout(4 * p).size, depth=self.depth))

        it = Signal(range(MAX_DIM // p + 1))
        jt = Signal(range(MAX_DIM // p + 1))
        row = Signal(range(MAX_DIM + p))
        m.d.comb += row.eq((it << log_p) + self.row_index)
        keep = Signal()
        m.d.comb += keep.eq((row < cmd.m) & (jt < n_tiles))
        entry = Signal(RowWriteLayout(4 * p))
        m.d.comb += [
            entry.data.eq(self.row),
            entry.addr.eq(cmd.c_addr + row * cmd.ldc + (jt << (log_p + 2))),
            entry.nbytes.eq(clamp(cmd.n - (jt << log_p), p) << 2),
            rows.w_data.eq(entry),
            # After the command (DONE), the rows of slots past the last tile may still
            # be leaving the array: nothing is written then.
            rows.w_en.eq(self.row_valid & keep & self.run),
        ]
        with m.If(self.row_valid & (self.row_index == p - 1)):
            m.d.sync += jt.eq(jt + 1)
            with m.If(jt == (n_groups << exact_log2(INTERLEAVE)) - 1):
                m.d.sync += [jt.eq(0), it.eq(it + 1)]
            # The last real tile is out (the slots after it carry nothing to write).
            with m.If((it == m_tiles - 1) & (jt == n_tiles - 1)):
                m.d.sync += self.drained_all.eq(1)
        with m.If(~self.run):
            m.d.sync += [it.eq(0), jt.eq(0), self.drained_all.eq(0)]

        m.d.comb += [self.out.valid.eq(rows.r_rdy), self.out.payload.eq(rows.r_data),
                     rows.r_en.eq(self.out.ready), self.empty.eq(~rows.r_rdy)]

        credits = Signal(range(self.depth + 1), init=self.depth)
        returned = (self.row_valid & ~keep) + (rows.r_en & rows.r_rdy)
        m.d.sync += credits.eq(credits - self.reserve * self.group_rows + returned)
        with m.If(self.clear):
            m.d.sync += credits.eq(self.depth)
        m.d.comb += self.room.eq(credits >= self.group_rows)
        return m
