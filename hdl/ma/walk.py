"""The TAT walk: every row of A, B and C checked against the TAT before any access."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.common.codes import ErrorCode
from hdl.common.rowio import ADDR_BITS, ErrorReport
from hdl.common.tat import TatTableLayout, tat_covers, tat_masks
from hdl.ma.layouts import MAX_DIM, MaCommandLayout, b_rows, element_shift, mode_flags

__all__ = ["TatWalk"]


class TatWalk(wiring.Component):
    """Checks that every row of A, then B, then C lies in mapped TAT regions.

    B's rows are those stored: K rows of N elements, or with B transposed N rows of K.

    One row a cycle, after one cycle of set-up, while ``go`` is high: its first and last
    byte are translated (a row is at most 512 bytes, so it spans at most two pages), and
    the verdict on it is given the cycle after (the lookups are registered). Ends with
    one ``done`` pulse, or one ``fail`` report: TAT_MISS with the row's first byte if
    that is unmapped, else the start of the page of its last byte.
    """

    def __init__(self):
        super().__init__({
            "go": In(1),
            "cmd": In(MaCommandLayout()),
            "tat": In(TatTableLayout()),
            "done": Out(1),
            "fail": Out(ErrorReport()),
        })

    def elaborate(self, platform):
        m = Module()
        cmd = self.cmd
        bf16, b_t = mode_flags(m, cmd, "mode")
        shift = element_shift(bf16)
        bases = [cmd.a_addr, cmd.b_addr, cmd.c_addr]
        strides = [cmd.lda, cmd.ldb, cmd.ldc]
        b_count, b_length = b_rows(cmd, b_t)
        rows = [cmd.m, b_count, cmd.m]
        lengths = [cmd.k << shift, b_length << shift, cmd.n << 2]

        # Stage 1: the row being looked up (operand, row, its first and last byte).
        operand = Signal(range(3))
        row = Signal(range(MAX_DIM + 1))
        addr = Signal(ADDR_BITS)
        last = Signal(ADDR_BITS)                 # addr + the row's length - 1
        stepping = Signal()                      # a row is in stage 1
        # Per operand, registered from ``cmd`` (the core's copy, steady from the cycle
        # ``go`` rises, so these from the next cycle on): the last byte of its first row
        # and its last row's index. The set-up cycle computes operand A's directly.
        ends = [Signal(ADDR_BITS, name=f"end{i}") for i in range(3)]
        last_rows = [Signal(range(MAX_DIM), name=f"last_row{i}") for i in range(3)]
        for i in range(3):
            m.d.sync += [ends[i].eq(bases[i] + lengths[i] - 1), last_rows[i].eq(rows[i] - 1)]
        last_row = Signal(range(MAX_DIM))
        stride = Signal(32)
        started = Signal()
        with m.Switch(operand):
            for index in range(3):
                with m.Case(index):
                    m.d.comb += [last_row.eq(last_rows[index]), stride.eq(strides[index])]
        # (the page masks registered: the table is the core's copy, steady like ``cmd``)
        masks = tat_masks(m, self.tat, name="walk")
        first_hit = tat_covers(m, self.tat, addr, masks, name="first").any()
        last_hit = tat_covers(m, self.tat, last, masks, name="last").any()

        # Stage 2: the looked-up row, its lookups registered.
        checking = Signal()
        checked_addr, checked_last = Signal(ADDR_BITS), Signal(ADDR_BITS)
        checked_first_hit, checked_last_hit = Signal(), Signal()
        final = Signal()                         # the last row of C
        m.d.sync += [checking.eq(self.go & stepping), checked_addr.eq(addr),
                     checked_last.eq(last), checked_first_hit.eq(first_hit),
                     checked_last_hit.eq(last_hit),
                     final.eq((operand == 2) & (row == last_row))]

        with m.If(self.go & ~started):
            m.d.sync += [started.eq(1), stepping.eq(1), operand.eq(0), row.eq(0),
                         addr.eq(bases[0]), last.eq(bases[0] + lengths[0] - 1)]
        with m.Elif(self.go & stepping):
            with m.If(row == last_row):
                m.d.sync += row.eq(0)
                with m.Switch(operand):
                    for index in range(2):
                        with m.Case(index):
                            m.d.sync += [operand.eq(index + 1), addr.eq(bases[index + 1]),
                                         last.eq(ends[index + 1])]
                    with m.Case(2):
                        m.d.sync += stepping.eq(0)
            with m.Else():
                m.d.sync += [row.eq(row + 1), addr.eq(addr + stride), last.eq(last + stride)]

        with m.If(self.go & checking):
            with m.If(~checked_first_hit):
                m.d.comb += [self.fail.valid.eq(1), self.fail.code.eq(ErrorCode.TAT_MISS),
                             self.fail.addr.eq(checked_addr)]
            with m.Elif(~checked_last_hit):
                m.d.comb += [self.fail.valid.eq(1), self.fail.code.eq(ErrorCode.TAT_MISS),
                             self.fail.addr.eq(Cat(Const(0, 12), checked_last[12:]))]
            with m.Elif(final):
                m.d.comb += self.done.eq(1)
        with m.If(~self.go):
            m.d.sync += [started.eq(0), stepping.eq(0)]
        return m
