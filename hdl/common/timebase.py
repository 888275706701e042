"""The 64-bit free-running cycle counter every block reads (docs/design.md, Timebase)."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

__all__ = ["Timebase"]


class Timebase(wiring.Component):
    """``now`` counts clock cycles: 0 in the first cycle after reset, +1 every cycle.

    ``time_hi`` is the high word latched by the last ``read_lo`` (the read strobe of a
    TIME_LO register), so software reading TIME_LO then TIME_HI gets one 64-bit value.
    """

    def __init__(self):
        super().__init__({"now": Out(64), "read_lo": wiring.In(1), "time_hi": Out(32)})

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.now.eq(self.now + 1)
        with m.If(self.read_lo):
            m.d.sync += self.time_hi.eq(self.now[32:])
        return m
