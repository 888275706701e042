"""A UART (8 data bits, no parity, 1 stop bit) as two stream components."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["UartRx", "UartTx", "check_divisor"]


def check_divisor(divisor):
    if not isinstance(divisor, int) or isinstance(divisor, bool):
        raise TypeError(f"UART divisor must be an integer, not {divisor!r}")
    if divisor < 4:
        raise ValueError(f"UART divisor (clock cycles per bit) must be at least 4, not {divisor}")


class UartRx(wiring.Component):
    """Receives 8N1 frames on ``rx`` (idle high) and offers each byte on ``data``.

    ``divisor`` is the number of clock cycles per bit. The line is sampled in the middle
    of each bit, after a two-flop synchroniser. A frame whose stop bit is low is dropped
    (a framing error, counted nowhere: the bridge's protocol resynchronises on idle).
    A byte not taken before the next one arrives is overwritten; the bridge always takes
    a byte within a cycle, so this never happens on the board.
    """

    def __init__(self, divisor):
        check_divisor(divisor)
        self.divisor = divisor
        super().__init__({"rx": In(1, init=1), "data": Out(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        sync1, line = Signal(init=1), Signal(init=1)
        m.d.sync += [sync1.eq(self.rx), line.eq(sync1)]   # the pin is asynchronous

        timer = Signal(range(self.divisor))
        bit = Signal(range(9))
        shift = Signal(8)
        with m.If(self.data.ready):
            m.d.sync += self.data.valid.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += timer.eq(self.divisor // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(line):                          # a glitch, not a start bit
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += [timer.eq(self.divisor - 1), bit.eq(0)]
                    m.next = "DATA"
            with m.State("DATA"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    m.d.sync += [timer.eq(self.divisor - 1), bit.eq(bit + 1),
                                 shift.eq(shift >> 1 | line << 7)]   # LSB first
                    with m.If(bit == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    with m.If(line):
                        m.d.sync += [self.data.payload.eq(shift), self.data.valid.eq(1)]
                    m.next = "IDLE"
        return m


class UartTx(wiring.Component):
    """Sends each byte taken from ``data`` as an 8N1 frame on ``tx`` (idle high)."""

    def __init__(self, divisor):
        check_divisor(divisor)
        self.divisor = divisor
        super().__init__({"data": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        timer = Signal(range(self.divisor))
        bits = Signal(range(11))
        frame = Signal(10, init=0x3FF)                      # stop, data (LSB first), start
        m.d.comb += [self.tx.eq(frame[0]), self.data.ready.eq(bits == 0)]
        with m.If(self.data.valid & self.data.ready):
            m.d.sync += [frame.eq(self.data.payload << 1 | 1 << 9), bits.eq(10),
                         timer.eq(self.divisor - 1)]
        with m.Elif(bits != 0):
            with m.If(timer != 0):
                m.d.sync += timer.eq(timer - 1)
            with m.Else():
                m.d.sync += [timer.eq(self.divisor - 1), bits.eq(bits - 1),
                             frame.eq(frame >> 1 | 1 << 9)]
        return m
