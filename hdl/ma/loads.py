"""The load sequencer: which rows the row reader fetches, and when."""

from contextlib import contextmanager

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.rowio import ADDR_BITS, RowCommandLayout
from hdl.ma.layouts import (
    DEST_A,
    DEST_B,
    DEST_C,
    INTERLEAVE,
    MAX_DIM,
    ROW_BYTES,
    MaCommandLayout,
    RowTag,
    b_rows,
    clamp,
    element_shift,
    mode_flags,
    tile_counts,
)

__all__ = ["LoadSequencer"]


class LoadSequencer(wiring.Component):
    """Asks for all of B (K rows of N, or with B transposed N rows of K: the buffers
    hold either), then each A block and (with ACCUMULATE) the old-C tiles of each
    group of interleaved tiles, in the order the groups are issued, each as soon as its
    buffer is free.

    ``request`` is the row reader's command stream. An A half is in use from its first
    row request until ``a_freed`` names it (its last group issued); the old-C register
    from its first row request until ``c_taken``. Everything returns to idle when
    ``run`` falls.
    """

    def __init__(self, p):
        self.p = p
        super().__init__({
            "run": In(1),
            "cmd": In(MaCommandLayout()),
            "a_freed": In(2),
            "c_taken": In(1),
            "request": Out(stream.Signature(RowCommandLayout(RowTag()))),
        })

    def elaborate(self, platform):
        m = Module()
        p, log_p, cmd = self.p, exact_log2(self.p), self.cmd
        m_tiles, n_tiles = tile_counts(cmd, p)
        bf16, b_t = mode_flags(m, cmd, "mode")
        shift = element_shift(bf16)
        # The command's derived bounds, registered (``cmd`` is steady long before ``run``).
        last_it = Signal(range(MAX_DIM // p + 1))
        last_jt = Signal(range(MAX_DIM // p + 1))
        last_b_row = Signal(range(MAX_DIM))
        b_bytes, a_bytes = Signal(range(ROW_BYTES + 1)), Signal(range(ROW_BYTES + 1))
        b_count, b_length = b_rows(cmd, b_t)
        m.d.sync += [last_it.eq(m_tiles - 1), last_jt.eq(n_tiles - 1),
                     last_b_row.eq(b_count - 1),
                     b_bytes.eq(b_length << shift), a_bytes.eq(cmd.k << shift)]
        it = Signal(range(MAX_DIM // p + 1))
        jt = Signal(range(MAX_DIM // p + 1))
        row = Signal(range(MAX_DIM))
        b_row_addr, a_row_addr = Signal(ADDR_BITS), Signal(ADDR_BITS)
        c_block_addr, c_row_addr = Signal(ADDR_BITS), Signal(ADDR_BITS)
        a_used = Signal(2)
        c_used = Signal()
        # The last row of A block `it` (below M), registered: `it` changes only on the way
        # to A_WAIT, which lasts a cycle at least.
        block_last_row = Signal(range(p))
        m.d.sync += block_last_row.eq(clamp(cmd.m - (it << log_p), p) - 1)
        # Columns of tile `jt` left of N, stepped with `jt` (the next tile's row may be
        # asked for the cycle after `jt` moves).
        cols_left = Signal(range(MAX_DIM + 1))
        tile_bytes = Mux(cols_left < p, cols_left, p) << 2
        half = it[0]
        last_block = it == last_it
        last_row = row == block_last_row
        # An old-C group is the tiles of one group of interleaved tiles (the issuer's).
        log_r = exact_log2(INTERLEAVE)
        group_end = (jt[:log_r] == INTERLEAVE - 1) | (jt == last_jt)

        req, tag = self.request, Signal(RowTag())
        m.d.comb += req.payload.tag.eq(tag)
        accepted = req.valid & req.ready

        def ask(dest, addr, nbytes, group_last, row_half=0, slot=0):
            m.d.comb += [req.valid.eq(1), req.payload.addr.eq(addr),
                         req.payload.nbytes.eq(nbytes), tag.dest.eq(dest), tag.row.eq(row),
                         tag.half.eq(row_half), tag.slot.eq(slot),
                         tag.group_last.eq(group_last)]

        @contextmanager
        def state(name):
            # Leaving RUN (done, or an error) returns every state to IDLE.
            with m.State(name):
                yield
                with m.If(~self.run):
                    m.next = "IDLE"

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.run):
                    m.d.sync += [row.eq(0), it.eq(0), jt.eq(0), cols_left.eq(cmd.n),
                                 b_row_addr.eq(cmd.b_addr), a_row_addr.eq(cmd.a_addr),
                                 c_block_addr.eq(cmd.c_addr)]
                    m.next = "B"
            with state("B"):
                ask(DEST_B, b_row_addr, b_bytes, row == last_b_row)
                with m.If(accepted):
                    m.d.sync += [row.eq(row + 1), b_row_addr.eq(b_row_addr + cmd.ldb)]
                    with m.If(row == last_b_row):
                        m.d.sync += row.eq(0)
                        m.next = "A_WAIT"
            with state("A_WAIT"):
                with m.If(~a_used.bit_select(half, 1)):
                    m.next = "A"
            with state("A"):
                ask(DEST_A, a_row_addr, a_bytes, last_row, half)
                with m.If(accepted):
                    m.d.sync += [row.eq(row + 1), a_row_addr.eq(a_row_addr + cmd.lda)]
                    with m.If(last_row):
                        m.d.sync += row.eq(0)
                        with m.If(cmd.accumulate):
                            m.next = "C_WAIT"
                        with m.Elif(last_block):
                            m.next = "DONE"
                        with m.Else():
                            m.d.sync += it.eq(it + 1)
                            m.next = "A_WAIT"
            with state("C_WAIT"):
                with m.If(~c_used):
                    m.d.sync += c_row_addr.eq(c_block_addr + (jt << (log_p + 2)))
                    m.next = "C"
            with state("C"):
                ask(DEST_C, c_row_addr, tile_bytes, last_row & group_end, slot=jt[:log_r])
                with m.If(accepted):
                    m.d.sync += [row.eq(row + 1), c_row_addr.eq(c_row_addr + cmd.ldc)]
                    with m.If(last_row):
                        m.d.sync += [row.eq(0), jt.eq(jt + 1), cols_left.eq(cols_left - p)]
                        with m.If(~group_end):
                            # the group's next tile, at once
                            m.d.sync += c_row_addr.eq(c_block_addr + ((jt + 1) << (log_p + 2)))
                        with m.Elif(jt != last_jt):
                            m.next = "C_WAIT"
                        with m.Elif(last_block):
                            m.next = "DONE"
                        with m.Else():
                            m.d.sync += [jt.eq(0), it.eq(it + 1), cols_left.eq(cmd.n),
                                         c_block_addr.eq(c_block_addr + (cmd.ldc << log_p))]
                            m.next = "A_WAIT"
            with state("DONE"):
                pass

        starting = accepted & (row == 0)
        m.d.sync += [
            a_used.eq((a_used | Mux(starting & (tag.dest == DEST_A), 1 << half, 0))
                      & ~self.a_freed),
            c_used.eq(Mux(starting & (tag.dest == DEST_C), 1, Mux(self.c_taken, 0, c_used))),
        ]
        with m.If(~self.run):
            m.d.sync += [a_used.eq(0), c_used.eq(0)]
        return m
