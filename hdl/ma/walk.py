"""The TAT walk: every row of A, B and C checked against the TAT before any access."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.codes import ErrorCode
from hdl.common.rowio import ADDR_BITS, ErrorReport
from hdl.common.tat import TatTableLayout, tat_translate
from hdl.ma.layouts import MAX_DIM, MaCommandLayout, element_shift

__all__ = ["TatWalk"]


class TatWalk(wiring.Component):
    """Checks that every row of A, then B, then C lies in mapped TAT regions.

    One row a cycle, after one cycle of set-up, while ``go`` is high: its first and last
    byte are translated (a row is at most 512 bytes, so it spans at most two pages).
    Ends with one ``done`` pulse, or one ``fail`` report: TAT_MISS with the row's first
    byte if that is unmapped, else the start of the page of its last byte.
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
        shift = element_shift(cmd)
        bases = [cmd.a_addr, cmd.b_addr, cmd.c_addr]
        strides = [cmd.lda, cmd.ldb, cmd.ldc]
        rows = [cmd.m, cmd.k, cmd.m]
        lengths = [cmd.k << shift, cmd.n << shift, cmd.n << 2]

        operand = Signal(range(3))
        row = Signal(range(MAX_DIM + 1))
        addr = Signal(ADDR_BITS)
        last = Signal(ADDR_BITS)
        nrows = Signal(range(MAX_DIM + 1))
        started = Signal()
        with m.Switch(operand):
            for index in range(3):
                with m.Case(index):
                    m.d.comb += [last.eq(addr + lengths[index] - 1), nrows.eq(rows[index])]
        first_hit, _ = tat_translate(m, self.tat, addr, name="first")
        last_hit, _ = tat_translate(m, self.tat, last, name="last")

        with m.If(self.go & ~started):
            m.d.sync += [started.eq(1), operand.eq(0), row.eq(0), addr.eq(bases[0])]
        with m.Elif(self.go):
            with m.If(~first_hit):
                m.d.comb += [self.fail.valid.eq(1), self.fail.code.eq(ErrorCode.TAT_MISS),
                             self.fail.addr.eq(addr)]
            with m.Elif(~last_hit):
                m.d.comb += [self.fail.valid.eq(1), self.fail.code.eq(ErrorCode.TAT_MISS),
                             self.fail.addr.eq(Cat(Const(0, 12), last[12:]))]
            with m.Elif(row == nrows - 1):
                m.d.sync += row.eq(0)
                with m.Switch(operand):
                    for index in range(2):
                        with m.Case(index):
                            m.d.sync += [operand.eq(index + 1), addr.eq(bases[index + 1])]
                    with m.Case(2):
                        m.d.comb += self.done.eq(1)
            with m.Else():
                m.d.sync += row.eq(row + 1)
                with m.Switch(operand):
                    for index in range(3):
                        with m.Case(index):
                            m.d.sync += addr.eq(addr + strides[index])
        with m.If(~self.go):
            m.d.sync += started.eq(0)
        return m
