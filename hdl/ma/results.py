"""The result path: finished tile rows from the array to the row writer."""

from amaranth.hdl import Module, Mux, ResetInserter, Signal, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.rowio import ADDR_BITS, RowWriteLayout
from hdl.ma.layouts import INTERLEAVE, MAX_DIM, MaCommandLayout, group_count, tile_counts

__all__ = ["RESULT_STAGES", "ResultPath"]

RESULT_STAGES = 1         # cycles from a row leaving the array to its FIFO write


class ResultPath(wiring.Component):
    """Turns the array's result rows into row writes of C, through a FIFO of
    ``2·INTERLEAVE·P`` rows (two groups).

    The array gives no back-pressure, so places are promised ahead: a credit counter
    starts at the FIFO's depth, a group start (``reserve``) takes ``INTERLEAVE·P``, and a
    credit comes back when the writer takes a row or a row is dropped: rows past M
    (padding of the last block) and the rows of a group's slots past the last tile of a
    row. ``room`` says a group may start. ``drained_all`` stays high once the last tile's
    rows have left the array; ``empty`` when no row waits for the writer.

    A row is registered (with its address, length and whether it is kept) before it is
    written into the FIFO, ``RESULT_STAGES`` cycles after it left the array.
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
        m.submodules.fifo = rows = ResetInserter(self.clear)(fifo.SyncFIFOBuffered(
            width=RowWriteLayout(4 * p).size, depth=self.depth))

        # The command's derived bounds, registered (``cmd`` is steady long before ``run``).
        last_it = Signal(range(MAX_DIM // p + 1))
        last_jt = Signal(range(MAX_DIM // p + 1))
        last_slot_jt = Signal(range(MAX_DIM // p + INTERLEAVE))   # last slot of the last group
        m.d.sync += [last_it.eq(m_tiles - 1), last_jt.eq(n_tiles - 1),
                     last_slot_jt.eq((group_count(n_tiles, INTERLEAVE)
                                      << exact_log2(INTERLEAVE)) - 1)]

        # Rows leave the array in order: rows 0..P-1 of slot 0, of slot 1, ..., group by
        # group along N, then the next block of rows. The next row's C address and the
        # tile's columns left are kept in registers, stepped as rows go by (no multiply).
        it = Signal(range(MAX_DIM // p + 1))
        jt = Signal(range(MAX_DIM // p + INTERLEAVE))
        block_addr = Signal(ADDR_BITS)            # c_addr + it·P·ldc
        tile_addr = Signal(ADDR_BITS)             # block_addr + jt·4P
        row_addr = Signal(ADDR_BITS)              # tile_addr + row_index·ldc
        cols_left = Signal(signed(18))            # n - jt·P (≤ 0 past the last tile)
        # Rows of block `it` below M: all P of them, or the first `block_rows`.
        rows_left = Signal(signed(18))            # m - it·P
        full_block = Signal()
        block_rows = Signal(log_p)
        m.d.sync += [full_block.eq(rows_left >= p), block_rows.eq(rows_left[:log_p])]
        keep = Signal()
        m.d.comb += keep.eq((full_block | (self.row_index < block_rows)) & (cols_left > 0))
        entry = Signal(RowWriteLayout(4 * p))
        write, drop = Signal(), Signal()
        m.d.sync += [
            entry.data.eq(self.row),
            entry.addr.eq(row_addr),
            entry.nbytes.eq(Mux(cols_left < p, cols_left, p) << 2),
            # After the command (DONE), the rows of slots past the last tile may still
            # be leaving the array: nothing is written then.
            write.eq(self.row_valid & keep & self.run),
            drop.eq(self.row_valid & ~keep),
        ]
        m.d.comb += [rows.w_data.eq(entry), rows.w_en.eq(write)]
        # Registered a cycle ahead of use (a tile's P rows take P cycles at least): the
        # next block's address, and whether `jt` is the last slot of the last group.
        next_block = Signal(ADDR_BITS)
        jt_last = Signal()
        m.d.sync += [next_block.eq(block_addr + (cmd.ldc << log_p)),
                     jt_last.eq(jt == last_slot_jt)]
        with m.If(self.row_valid):
            m.d.sync += row_addr.eq(row_addr + cmd.ldc)
            with m.If(self.row_index == p - 1):
                m.d.sync += [jt.eq(jt + 1), tile_addr.eq(tile_addr + 4 * p),
                             row_addr.eq(tile_addr + 4 * p), cols_left.eq(cols_left - p)]
                with m.If(jt_last):
                    m.d.sync += [jt.eq(0), it.eq(it + 1), block_addr.eq(next_block),
                                 tile_addr.eq(next_block), row_addr.eq(next_block),
                                 cols_left.eq(cmd.n), rows_left.eq(rows_left - p)]
                # The last real tile is out (the slots after it carry nothing to write).
                with m.If((it == last_it) & (jt == last_jt)):
                    m.d.sync += self.drained_all.eq(1)
        with m.If(~self.run):
            m.d.sync += [it.eq(0), jt.eq(0), self.drained_all.eq(0),
                         block_addr.eq(cmd.c_addr), tile_addr.eq(cmd.c_addr),
                         row_addr.eq(cmd.c_addr), cols_left.eq(cmd.n), rows_left.eq(cmd.m)]

        # ``empty`` counts the FIFO's level, not its output: a row written in cycle t is
        # in the buffered FIFO's inner memory in t + 1 and at its output only in t + 2.
        # (With P = 2 and M = 1 the last kept row is followed by one dropped row, which
        # ended the command in t + 1 with that row never written.)
        m.d.comb += [self.out.valid.eq(rows.r_rdy), self.out.payload.eq(rows.r_data),
                     rows.r_en.eq(self.out.ready),
                     self.empty.eq((rows.level == 0) & ~write)]

        credits = Signal(range(self.depth + 1), init=self.depth)
        returned = drop + (rows.r_en & rows.r_rdy)
        m.d.sync += credits.eq(credits - self.reserve * self.group_rows + returned)
        with m.If(self.clear):
            m.d.sync += [credits.eq(self.depth), write.eq(0), drop.eq(0)]
        m.d.comb += self.room.eq(credits >= self.group_rows)
        return m
