"""RBR: the reservation table and arbiter of the Muon mesh.

A reservation asks for a flow from ``src`` to ``dst`` that injects its flits in cycles
``[start, start + duration)``; ``bandwidth`` is the number of flits it will send there
(1..duration). Each link of the XY path carries the flow one hop later than the one
before: the injection port in ``[start, start + duration)``, and the output of the k-th
router on the path (k = 0 at the source, the last one the ejection port) in switch
cycles ``[start + 1 + 2k, start + 1 + 2k + duration)`` (``MUON_INJECT_CYCLES``,
``MUON_HOP_CYCLES``). These are the reservation's *windows*; a granted reservation owns
its windows alone: no other reservation's window overlaps one on the same link, and no
best-effort flit crosses a link inside one (routers get ``block``).

A request is decided against the table as it is when the request starts (cycle
``now``): a slot whose last window has ended (``now >= end``) is free; expiry needs no
action, and a slot's id changes each time it is reused (generation count), so an old id
never names a new reservation. The candidate start is ``T = max(start, now + lead)``
(``lead`` covers the longest decision, so a window never opens before its grant);
the arbiter walks the request's path link by link, one link a cycle, comparing the
shifted window with every slot's window on that link; after a pass with collisions,
``T`` becomes the latest end among them, shifted back to the request's hop, and the
walk starts again. Each pass moves ``T`` past at least one slot for good, so at most
``slots + 1`` passes. The answer is a grant (id) when the final ``T`` is the requested
start, else ``retry_after = T``: the earliest start at which every shifted window is
free. With no free slot the answer is ``full`` and ``retry_after`` is the earliest
cycle a slot frees.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from spec.codes import MUON_HOP_CYCLES, MUON_INJECT_CYCLES, MuonPort

from .layouts import COORD_BITS, RSV_ID_BITS
from .router import at_least, xy_port

__all__ = ["SlotLayout", "RequestLayout", "ResultLayout", "ReservationTable", "INJECT_LINK",
           "hop_on_path", "router_on_path", "decision_lead", "check_rbr_parameters"]

INJECT_LINK = len(MuonPort)     # pseudo output number of a source's injection port
DURATION_BITS = 16
MAX_SLOTS = 32


class SlotLayout(data.Struct):
    """One granted reservation, as the table holds it and broadcasts it to the mesh."""
    valid: 1
    src_x: COORD_BITS
    src_y: COORD_BITS
    dst_x: COORD_BITS
    dst_y: COORD_BITS
    start: 64
    duration: DURATION_BITS
    end: 64              # first cycle after its last window: the slot is then free
    id: RSV_ID_BITS


class RequestLayout(data.Struct):
    src_x: COORD_BITS
    src_y: COORD_BITS
    dst_x: COORD_BITS
    dst_y: COORD_BITS
    start: 64
    duration: DURATION_BITS
    bandwidth: DURATION_BITS


class ResultLayout(data.Struct):
    granted: 1
    full: 1
    id: RSV_ID_BITS
    retry_after: 64


def check_rbr_parameters(slots):
    if not isinstance(slots, int) or isinstance(slots, bool):
        raise TypeError(f"RBR slots must be an integer, not {slots!r}")
    if not 1 <= slots <= MAX_SLOTS:
        raise ValueError(f"RBR slots must be in 1..{MAX_SLOTS}, not {slots}")


def decision_lead(slots, cols, rows):
    """Cycles from a request to the earliest start it can be granted: more than the
    longest decision ((slots + 1) passes of at most cols + rows links, plus 2)."""
    return (slots + 1) * (cols + rows) + 4


def _between(v, a, b):
    return Mux(at_least(b, a), at_least(v, a) & at_least(b, v),
               at_least(v, b) & at_least(a, v))


def _absdiff(a, b):
    return Mux(at_least(a, b), a - b, b - a)


def router_on_path(m, x, y, slot, name):
    """Whether router (x, y) is on the XY path of ``slot`` (anything with src_/dst_
    fields), its hop number k (0 at the source) and the output the path takes there.
    ``x`` and ``y`` may be constants or signals."""
    on = Signal(name=f"{name}_on")
    hop = Signal(COORD_BITS + 1, name=f"{name}_hop")
    horizontal = (y == slot.src_y) & _between(x, slot.src_x, slot.dst_x)
    vertical = (x == slot.dst_x) & _between(y, slot.src_y, slot.dst_y)
    route = xy_port(m, x, y, slot.dst_x, slot.dst_y, f"{name}_route")
    m.d.comb += [on.eq(horizontal | vertical),
                 hop.eq(_absdiff(x, slot.src_x) + _absdiff(y, slot.src_y))]
    return on, hop, route


def hop_on_path(m, x, y, port, slot, name):
    """Whether link (router (x, y), output ``port``; ``INJECT_LINK`` for its injection
    port) is on the XY path of ``slot``, and at which hop k (0 at the source)."""
    on_router, hop, route = router_on_path(m, x, y, slot, name)
    at_source = (x == slot.src_x) & (y == slot.src_y)
    on = Signal(name=f"{name}_link_on")
    m.d.comb += on.eq(Mux(port == INJECT_LINK, at_source, on_router & (route == port)))
    return on, hop


class ReservationTable(wiring.Component):
    """The reservation arbiter (see the module docstring for the rules).

    ``launch`` (one cycle, with ``request`` valid) starts a decision; ``done`` pulses
    once with ``result``; ``busy`` in between. ``refuse`` is combinational: the request
    has a coordinate outside the mesh, a zero duration, or a bandwidth of 0 or more
    than its duration (a BAD_COMMAND at START). ``slots`` shows the table to the mesh.
    """

    def __init__(self, cols, rows, slots=8):
        check_rbr_parameters(slots)
        self._cols, self._rows, self._n = cols, rows, slots
        self.lead = decision_lead(slots, cols, rows)
        super().__init__({
            "now": In(64), "launch": In(1), "request": In(RequestLayout),
            "refuse": Out(1), "busy": Out(1), "done": Out(1), "result": Out(ResultLayout),
            "slots": Out(data.ArrayLayout(SlotLayout, slots)),
        })

    def elaborate(self, platform):
        m = Module()
        n, cols, rows = self._n, self._cols, self._rows
        rq = self.request
        m.d.comb += self.refuse.eq((rq.src_x >= cols) | (rq.src_y >= rows) | (rq.dst_x >= cols)
                                   | (rq.dst_y >= rows) | (rq.duration == 0) | (rq.bandwidth == 0)
                                   | (rq.bandwidth > rq.duration))
        req = Signal(RequestLayout)
        now_req = Signal(64)
        cand = Signal(64)          # T
        bump = Signal(64)          # latest conflicting end seen in this pass
        conflict = Signal()        # a collision seen in this pass
        x, y = Signal(COORD_BITS), Signal(COORD_BITS)
        port = Signal(range(INJECT_LINK + 1))
        hop = Signal(COORD_BITS + 1)
        slot_bits = max(ceil_log2(n), 0)
        gens = [Signal(RSV_ID_BITS - slot_bits, name=f"gen{e}") for e in range(n)]

        free = Cat(~s.valid | (now_req >= s.end) for s in self.slots)
        first_free = Signal(range(max(n, 2)))
        for e in reversed(range(n)):
            with m.If(free[e]):
                m.d.comb += first_free.eq(e)
        earliest_end = Signal(64)
        value = self.slots[0].end
        for e, s in enumerate(self.slots[1:]):
            smaller = Signal(64, name=f"min_end{e}")
            m.d.comb += smaller.eq(Mux(s.end < value, s.end, value))
            value = smaller
        m.d.comb += earliest_end.eq(value)

        # Collisions of the request's window on the current link with every slot's.
        route = xy_port(m, x, y, req.dst_x, req.dst_y, "walk_route")
        link_port = Signal(range(INJECT_LINK + 1))
        m.d.comb += link_port.eq(port)
        step_conflict, step_bump = Const(0), Const(0, 64)
        for e, s in enumerate(self.slots):
            on, k = hop_on_path(m, x, y, link_port, s, f"slot{e}")
            s_open = s.start + 2 * k          # both windows shifted by the same 1 + ...
            r_open = cand + 2 * hop
            hit = s.valid & on & (r_open < s_open + s.duration) & (s_open < r_open + req.duration)
            nxt = Signal(64, name=f"slot{e}_next")
            m.d.comb += nxt.eq(s_open + s.duration - 2 * hop)
            bumped = Signal(64, name=f"slot{e}_bump")
            m.d.comb += bumped.eq(Mux(hit & (nxt > step_bump), nxt, step_bump))
            step_bump = bumped
            step_conflict = step_conflict | hit
        last_link = (port != INJECT_LINK) & (route == MuonPort.LOCAL)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.launch):
                    lead = self.now + self.lead
                    m.d.sync += [req.eq(rq), now_req.eq(self.now),
                                 cand.eq(Mux(rq.start > lead, rq.start, lead))]
                    m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += self.busy.eq(1)
                with m.If(~free.any()):
                    m.d.sync += [self.result.eq(0), self.result.full.eq(1),
                                 self.result.retry_after.eq(earliest_end)]
                    m.next = "DONE"
                with m.Else():
                    m.d.sync += [x.eq(req.src_x), y.eq(req.src_y), port.eq(INJECT_LINK),
                                 hop.eq(0), conflict.eq(0), bump.eq(0)]
                    m.next = "WALK"
            with m.State("WALK"):
                m.d.comb += self.busy.eq(1)
                pass_conflict = conflict | step_conflict
                pass_bump = Mux(step_bump > bump, step_bump, bump)
                m.d.sync += [conflict.eq(pass_conflict), bump.eq(pass_bump)]
                with m.If(port == INJECT_LINK):
                    m.d.sync += port.eq(route)
                with m.Elif(~last_link):
                    self._advance(m, x, y, route)
                    m.d.sync += hop.eq(hop + 1)
                    nxt_route = xy_port(m, Mux(route == MuonPort.EAST, x + 1,
                                               Mux(route == MuonPort.WEST, x - 1, x)),
                                        Mux(route == MuonPort.SOUTH, y + 1,
                                            Mux(route == MuonPort.NORTH, y - 1, y)),
                                        req.dst_x, req.dst_y, "next_route")
                    m.d.sync += port.eq(nxt_route)
                with m.Else():
                    with m.If(pass_conflict):
                        m.d.sync += [cand.eq(pass_bump), x.eq(req.src_x), y.eq(req.src_y),
                                     port.eq(INJECT_LINK), hop.eq(0), conflict.eq(0), bump.eq(0)]
                    with m.Else():
                        m.next = "DECIDE"
            with m.State("DECIDE"):
                m.d.comb += self.busy.eq(1)
                granted = cand == req.start
                hops = _absdiff(req.src_x, req.dst_x) + _absdiff(req.src_y, req.dst_y)
                m.d.sync += [self.result.granted.eq(granted), self.result.full.eq(0),
                             self.result.retry_after.eq(Mux(granted, 0, cand)),
                             self.result.id.eq(0)]
                with m.If(granted):
                    with m.Switch(first_free):
                        for e in range(n):
                            with m.Case(e):
                                s = self.slots[e]
                                ident = Cat(Const(e, slot_bits), gens[e]) if slot_bits else gens[e]
                                m.d.sync += [
                                    s.valid.eq(1), s.src_x.eq(req.src_x), s.src_y.eq(req.src_y),
                                    s.dst_x.eq(req.dst_x), s.dst_y.eq(req.dst_y),
                                    s.start.eq(req.start), s.duration.eq(req.duration),
                                    s.end.eq(req.start + MUON_INJECT_CYCLES
                                             + MUON_HOP_CYCLES * hops + req.duration),
                                    s.id.eq(ident), gens[e].eq(gens[e] + 1),
                                    self.result.id.eq(ident),
                                ]
                m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += [self.done.eq(1), self.busy.eq(1)]
                m.next = "IDLE"
        return m

    @staticmethod
    def _advance(m, x, y, route):
        with m.Switch(route):
            with m.Case(MuonPort.EAST):
                m.d.sync += x.eq(x + 1)
            with m.Case(MuonPort.WEST):
                m.d.sync += x.eq(x - 1)
            with m.Case(MuonPort.SOUTH):
                m.d.sync += y.eq(y + 1)
            with m.Case(MuonPort.NORTH):
                m.d.sync += y.eq(y - 1)
