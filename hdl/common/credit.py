"""The project's one credit protocol: :class:`CreditSignature`, and its two ends,
:class:`CreditSender` and :class:`CreditReceiver`.

A credit link has no ready: the sender only sends what the receiver's buffer has room
for, so nothing is ever held up on the link and nothing can be dropped. The memory
controller's client channels (``hdl.mc.channel``) are single-VC credit links; the Muon
NoC's router-to-router links (``hdl.muon.layouts.MuonLinkSignature``) are credit links
with one buffer, and one credit counter, per virtual channel.
"""

from amaranth.hdl import Assert, Cat, Module, Shape, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

__all__ = ["CreditSignature", "CreditSender", "CreditReceiver", "check", "check_depth",
           "MAX_DEPTH", "MAX_VCS"]

MAX_DEPTH = 256    # items per receiver buffer (per VC)
MAX_VCS = 8


def check(m, condition, message):
    """A run-time check for simulation and formal proofs: ``condition`` is registered at
    each clock edge and asserted from the register, so the check sees exactly the values
    of the cycle (a combinational assertion may see unsettled values, and a synchronous
    one in the Amaranth simulator the registers' new values) and fails one cycle later."""
    ok = Signal(init=1, name="check_ok")
    m.d.sync += ok.eq(condition)
    m.d.comb += Assert(ok, message)


def check_depth(name, depth):
    if not isinstance(depth, int) or isinstance(depth, bool):
        raise TypeError(f"{name} must be an integer, not {depth!r}")
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"{name} must be in 1..{MAX_DEPTH}, not {depth}")


def _check_vcs(vcs):
    if not isinstance(vcs, int) or isinstance(vcs, bool):
        raise TypeError(f"vcs must be an integer, not {vcs!r}")
    if not 1 <= vcs <= MAX_VCS:
        raise ValueError(f"vcs must be in 1..{MAX_VCS}, not {vcs}")


def _depths(depth, vcs):
    """``depth`` as a tuple of one depth per VC (an integer gives every VC that depth)."""
    _check_vcs(vcs)
    if vcs == 1 or isinstance(depth, int):
        check_depth("depth", depth)
        return (depth,) * vcs
    if not isinstance(depth, tuple) or len(depth) != vcs:
        raise TypeError(f"depth must be an integer or a tuple of {vcs} integers (one per "
                        f"VC), not {depth!r}")
    for vc, one in enumerate(depth):
        check_depth(f"depth of VC {vc}", one)
    return depth


def _check_vc_field(layout, vcs):
    """With several VCs the payload names its VC: an unsigned ``vc`` field just wide
    enough for ``vcs`` values."""
    want = ceil_log2(vcs)
    try:
        layout = data.Layout.cast(layout)
        field = layout["vc"]
    except (TypeError, KeyError):
        field = None
    if field is None or Shape.cast(field.shape) != Shape(want):
        raise TypeError(f"a payload of a {vcs}-VC credit link must be a layout with an "
                        f"unsigned({want}) field 'vc', not {layout!r}")


class CreditSignature(wiring.Signature):
    """A credit-flow-controlled link, from the sender's side.

    Members: ``payload`` (``Out(layout)``), ``valid`` (``Out(1)``), ``credit``
    (``In(vcs)``: one bit per virtual channel).

    Rules:

    1. The receiver has a buffer of ``depth[v]`` items per virtual channel ``v``. With
       several VCs, the payload's ``vc`` field says which buffer an item goes to.
    2. At reset the sender holds ``depth[v]`` credits of each VC.
    3. An item is transferred in every cycle where ``valid`` is high; there is no ready,
       the receiver takes it. Each item costs the sender one credit of its VC; the
       sender never sends on a VC of which it holds no credit.
    4. The receiver raises ``credit`` bit ``v`` for one cycle for each slot of VC ``v``'s
       buffer it frees, at most one per VC per cycle; the sender may spend that credit
       from the next cycle on.
    5. Hence no buffer overflows and, per VC, at every clock edge, the sender's credits
       + the items on their way (a sender with an output register) + the items in the
       receiver's buffer + the credit pulse on the link = ``depth[v]``: no credit is
       created or lost.
    6. Items of one VC are delivered in the order sent, each exactly once.

    Parameters
    ----------
    layout : data layout of the payload; with ``vcs`` > 1 it has an unsigned ``vc``
        field of ``ceil_log2(vcs)`` bits.
    depth : int, or a tuple of ``vcs`` ints
        The receiver's buffer depth per VC in items, 1..256 (an int: every VC's).
    vcs : int
        Virtual channels, 1..8.
    """

    def __init__(self, layout, depth, vcs=1):
        self.depths = _depths(depth, vcs)
        if vcs > 1:
            _check_vc_field(layout, vcs)
        self.layout, self.vcs = layout, vcs
        self.depth = self.depths[0] if vcs == 1 else self.depths
        super().__init__({"payload": Out(layout), "valid": Out(1), "credit": In(vcs)})

    def __eq__(self, other):
        return (isinstance(other, CreditSignature) and type(other) is type(self)
                and other.layout == self.layout and other.depths == self.depths
                and other.vcs == self.vcs)

    def __hash__(self):
        return hash((type(self), self.depths, self.vcs))

    def __repr__(self):
        vcs = f", vcs={self.vcs}" if self.vcs > 1 else ""
        return f"{type(self).__name__}({self.layout!r}, depth={self.depth!r}{vcs})"


def _per_vc(depths, bound):
    """The shape of a per-VC count: a plain ``range`` for one VC, otherwise a struct of
    one field ``vc<v>`` per VC, each as wide as that VC needs (its ``bound(depth)``)."""
    if len(depths) == 1:
        return bound(depths[0])
    return data.StructLayout({f"vc{v}": bound(d) for v, d in enumerate(depths)})


def _field(value, vcs, vc):
    return value if vcs == 1 else value[f"vc{vc}"]


class CreditSender(wiring.Component):
    """The sending end of a credit link: a ``lib.stream`` in, a credit link out.

    ``i.ready`` is high while the sender holds a credit of the offered item's VC (with
    several VCs, ``i.ready`` depends on ``i.payload.vc``), so a stream transfer on ``i``
    is the item sent on ``o`` — in the same cycle, or with ``registered`` in the next
    one, from an output register (the link then leaves a flip-flop; the credit is spent
    at the transfer on ``i``). ``credits``: the count held (one VC), or a struct of one
    count per VC, ``credits.vc<v>`` (:meth:`count`).

    ``take`` spends extra credits (0..``max_take``; one count per VC with several VCs)
    in a cycle without sending anything, for a user that reserves room for items it will
    send later through ``send_reserved`` (which then costs nothing); ``take`` must not
    exceed ``credits`` minus what ``i`` sends that cycle. With ``checks``, simulation
    assertions check the counters' range.
    """

    def __init__(self, layout, depth, *, vcs=1, max_take=0, registered=False, checks=False):
        depths = _depths(depth, vcs)
        if not isinstance(max_take, int) or isinstance(max_take, bool) or max_take < 0:
            raise ValueError(f"max_take must be a non-negative integer, not {max_take!r}")
        self._depths, self._vcs, self._max_take = depths, vcs, max_take
        self._registered, self._checks = bool(registered), checks
        take = range(max_take + 1)
        super().__init__({
            "i": In(stream.Signature(layout)),
            "o": Out(CreditSignature(layout, depth, vcs)),
            "credits": Out(_per_vc(depths, lambda d: range(d + 1)),
                           init=depths[0] if vcs == 1 else
                           {f"vc{v}": d for v, d in enumerate(depths)}),
            "take": In(take if vcs == 1 else data.ArrayLayout(take, vcs)),
            "send_reserved": In(1),
        })

    def count(self, vc=0):
        """The credits held of VC ``vc``."""
        return _field(self.credits, self._vcs, vc)

    def elaborate(self, platform):
        m = Module()
        if self._vcs == 1:
            self._single(m)
        else:
            self._multi(m)
        return m

    def _out(self, m, valid):
        domain = m.d.sync if self._registered else m.d.comb
        domain += [self.o.valid.eq(valid), self.o.payload.eq(self.i.payload)]

    def _single(self, m):
        spend = Signal.like(self.credits)
        m.d.comb += self.i.ready.eq(self.send_reserved | (self.credits != 0))
        sent = self.i.valid & self.i.ready
        self._out(m, sent)
        if not self._registered:
            sent = self.o.valid
        m.d.comb += spend.eq((sent & ~self.send_reserved) + self.take)
        m.d.sync += self.credits.eq(self.credits - spend + self.o.credit)
        if self._checks:
            check(m, spend <= self.credits, "credit spent that the sender does not hold")
            check(m, self.credits - spend + self.o.credit <= self._depths[0],
                  "credit returned beyond the receiver's depth")

    def _multi(self, m):
        vc = self.i.payload.vc
        held = Signal(self._vcs)
        m.d.comb += [held.eq(Cat(self.count(v) != 0 for v in range(self._vcs))),
                     self.i.ready.eq(self.send_reserved | held.bit_select(vc, 1))]
        sent = self.i.valid & self.i.ready
        self._out(m, sent)
        for v, depth in enumerate(self._depths):
            count = self.count(v)
            spend = Signal(range(depth + 1), name=f"spend{v}")
            # A 0-bit ``take`` (no reservations) is left out: Verilator refuses the 0-bit
            # wires of its elements.
            take = self.take[v] if self._max_take else 0
            m.d.comb += spend.eq((sent & ~self.send_reserved & (vc == v)) + take)
            m.d.sync += count.eq(count - spend + self.o.credit[v])
            if self._checks:
                check(m, spend <= count, f"credit of VC {v} spent that the sender does not hold")
                check(m, count - spend + self.o.credit[v] <= depth,
                      f"credit of VC {v} returned beyond the receiver's depth")


class CreditReceiver(wiring.Component):
    """The receiving end of a credit link: a buffer of ``depth`` items per VC, a
    ``lib.stream`` out per VC (one VC: ``o``; several: ``o[v]``), and a ``credit`` pulse
    of a VC in the cycle after each item taken from its stream. ``level``: items
    buffered (one VC), or a struct of one count per VC, ``level.vc<v>``
    (:meth:`occupancy`). With ``checks``, a simulation assertion fails if an item
    arrives at a full buffer.
    """

    def __init__(self, layout, depth, *, vcs=1, checks=False):
        depths = _depths(depth, vcs)
        self._layout, self._depths, self._vcs, self._checks = layout, depths, vcs, checks
        out = Out(stream.Signature(layout))
        super().__init__({
            "i": In(CreditSignature(layout, depth, vcs)),
            "o": out if vcs == 1 else out.array(vcs),
            "level": Out(_per_vc(depths, lambda d: range(d + 1))),
        })

    def occupancy(self, vc=0):
        """The items held in VC ``vc``'s buffer."""
        return _field(self.level, self._vcs, vc)

    def elaborate(self, platform):
        m = Module()
        width = Shape.cast(self._layout).width
        for v, depth in enumerate(self._depths):
            # SyncFIFO accepts a write whenever fewer than ``depth`` items are held; the
            # buffered variant may refuse one while an item moves to its output register
            # (depth 2, back-to-back writes), which would break the credit contract. At
            # depth 1 the buffered one is a plain register (SyncFIFO's memory would have
            # a 0-bit address, which Verilator and yosys' SMT back end refuse).
            fifo_type = SyncFIFOBuffered if depth == 1 else SyncFIFO
            fifo = fifo_type(width=width, depth=depth)
            if self._vcs == 1:
                m.submodules.fifo = fifo
                out, arrive = self.o, self.i.valid
            else:
                m.submodules[f"fifo{v}"] = fifo
                out, arrive = self.o[v], self.i.valid & (self.i.payload.vc == v)
            m.d.comb += [
                fifo.w_data.eq(Value.cast(self.i.payload)),
                fifo.w_en.eq(arrive),
                out.payload.eq(fifo.r_data),
                out.valid.eq(fifo.r_rdy),
                fifo.r_en.eq(out.ready),
                self.occupancy(v).eq(fifo.level),
            ]
            credit = self.i.credit if self._vcs == 1 else self.i.credit[v]
            m.d.sync += credit.eq(out.valid & out.ready)
            if self._checks:
                check(m, ~arrive | fifo.w_rdy, f"item sent to a full buffer of VC {v}"
                      if self._vcs > 1 else "item sent to a full buffer")
        return m
