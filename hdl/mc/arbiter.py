"""Arbitration of the MC's channels by traffic class, with an age limit."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hdl.common.credit import check

from .channel import CLASS_BITS

__all__ = ["ClassArbiter", "grant_bound"]


def grant_bound(channels, age_limit):
    """Grants to other channels that a channel holding its request can see before its
    own: ``age_limit`` before it is urgent, then at most ``channels - 2`` urgent ones
    (the channel granted last is not urgent: its age has just restarted)."""
    return 0 if channels == 1 else age_limit + channels - 2


class ClassArbiter(wiring.Component):
    """Picks one of ``channels`` requesters per grant: highest traffic class first,
    round-robin within a class, and an age limit that bounds every wait.

    Members: ``request`` (``In(channels)``), ``cls`` (``In`` array of 3-bit classes),
    ``advance`` (``In(1)``: the grant is taken this cycle), ``grant`` (``Out(channels)``,
    one-hot or 0, combinational), ``index`` (``Out``: the granted channel's number).

    Rules:

    1. ``grant`` is one-hot while any request is high, else 0, and only a requesting
       channel is granted.
    2. A requester must hold ``request`` (and its ``cls``) until it is granted in a cycle
       where ``advance`` is high.
    3. A requesting channel's *age* counts the grants taken by others since it began to
       wait; a channel whose age has reached ``age_limit`` is *urgent*. Urgent channels
       are granted before any class, round-robin among themselves; otherwise the highest
       class present wins, round-robin within the class (the pointer is the last channel
       granted).
    4. So a requesting channel is granted after at most :func:`grant_bound` grants to
       others (``tests/test_mc_formal.py`` proves it for the default parameters).

    ``age_limit`` trades class priority against latency: a decode channel can lose at most
    one grant in ``age_limit + 1`` to waiting lower classes.
    """

    def __init__(self, channels, age_limit, *, checks=False):
        if not isinstance(channels, int) or not 1 <= channels <= 16:
            raise ValueError(f"channels must be an integer in 1..16, not {channels!r}")
        if not isinstance(age_limit, int) or not 1 <= age_limit <= 255:
            raise ValueError(f"age_limit must be an integer in 1..255, not {age_limit!r}")
        self._n, self._age_limit, self._checks = channels, age_limit, checks
        super().__init__({
            "request": In(channels),
            "cls": In(data.ArrayLayout(CLASS_BITS, channels)),
            "advance": In(1),
            "grant": Out(channels),
            "index": Out(_index_shape(channels)),
        })

    def _round_robin(self, m, mask, last, name):
        """One-hot pick from ``mask``: the first set bit after ``last``, wrapping."""
        n = self._n
        pick = Signal(n, name=name)
        with m.Switch(last):
            for start in range(n):
                with m.Case(start):
                    order = [(start + 1 + k) % n for k in range(n)]
                    for position, index in enumerate(order):
                        earlier = [mask[j] for j in order[:position]]
                        m.d.comb += pick[index].eq(mask[index] & ~_any(earlier))
        return pick

    def elaborate(self, platform):
        m = Module()
        n = self._n
        last = Signal(_index_shape(n), init=n - 1)
        ages = [Signal(range(self._age_limit + 1), name=f"age{i}") for i in range(n)]

        urgent = Signal(n)
        m.d.comb += urgent.eq(_cat(self.request[i] & (ages[i] == self._age_limit)
                                   for i in range(n)))
        # The highest class present: a mask of the requesters holding it.
        top = Signal(n)
        with m.If(urgent != 0):
            m.d.comb += top.eq(urgent)
        with m.Else():
            found = Signal(1 << CLASS_BITS, name="class_present")
            for c in range(1 << CLASS_BITS):
                m.d.comb += found[c].eq(_any(self.request[i] & (self.cls[i] == c)
                                             for i in range(n)))
            with m.Switch(found):
                for c in reversed(range(1 << CLASS_BITS)):
                    with m.Case("0" * ((1 << CLASS_BITS) - 1 - c) + "1" + "-" * c):
                        m.d.comb += top.eq(_cat(self.request[i] & (self.cls[i] == c)
                                                for i in range(n)))
        m.d.comb += self.grant.eq(self._round_robin(m, top, last, "pick"))
        for i in range(n):
            with m.If(self.grant[i]):
                m.d.comb += self.index.eq(i)

        with m.If(self.advance & (self.grant != 0)):
            m.d.sync += last.eq(self.index)
            for i in range(n):
                with m.If(self.grant[i] | ~self.request[i]):
                    m.d.sync += ages[i].eq(0)
                with m.Elif(ages[i] != self._age_limit):
                    m.d.sync += ages[i].eq(ages[i] + 1)
        for i in range(n):
            with m.If(~self.request[i]):
                m.d.sync += ages[i].eq(0)
        if self._checks:
            check(m, (self.grant & (self.grant - 1)) == 0, "one grant at a time")
            check(m, (self.grant & ~self.request) == 0, "grant only to a requester")
            check(m, (self.request == 0) | (self.grant != 0), "a request is served")
        return m


def _index_shape(count):
    """A channel number's shape, at least one bit (a 0-bit signal becomes a ``[-1:0]``
    vector in the Verilog, which Verilator refuses)."""
    return range(max(count, 2))


def _any(bits):
    return Cat(*bits).any()


def _cat(bits):
    return Cat(*bits)
