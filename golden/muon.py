"""Golden model of the Muon network-on-chip: XY paths, zero-load timing, TSP and the
RBR reservation table.

Numbers only (no Amaranth): routes are lists of links, windows are cycle intervals.
The reservation table is modelled link by link (every link of the request's path
against every granted window on that link, as explicit forbidden intervals of the start
cycle), an algorithm independent of the RTL's walk; the tests compare every answer.
"""

from dataclasses import dataclass

from spec.codes import MUON_HOP_CYCLES, MUON_INJECT_CYCLES, MuonPort

__all__ = ["INJECT", "Link", "xy_route", "path_links", "hops", "zero_load_latency",
           "is_stale", "Answer", "Reservation", "ReservationModel", "decision_lead",
           "BAD_REQUEST"]

INJECT = "inject"   # the injection port of a router, as a link name
EJECT_CYCLES = 1    # switch cycle to the flit on the ejection port


@dataclass(frozen=True)
class Link:
    """A link: output ``port`` (a MuonPort, or INJECT) of router (x, y)."""
    x: int
    y: int
    port: object


def xy_route(x, y, dst):
    dx, dy = dst
    if dx > x:
        return MuonPort.EAST
    if dx < x:
        return MuonPort.WEST
    if dy > y:
        return MuonPort.SOUTH
    if dy < y:
        return MuonPort.NORTH
    return MuonPort.LOCAL


_STEP = {MuonPort.EAST: (1, 0), MuonPort.WEST: (-1, 0), MuonPort.SOUTH: (0, 1),
         MuonPort.NORTH: (0, -1)}


def path_links(src, dst):
    """``[(link, hop), ...]`` of the XY path: the injection port (hop 0), then each
    router's output, hop 0 at the source, the destination's ejection port last."""
    x, y = src
    links = [(Link(x, y, INJECT), 0)]
    hop = 0
    while True:
        port = xy_route(x, y, dst)
        links.append((Link(x, y, port), hop))
        if port == MuonPort.LOCAL:
            return links
        sx, sy = _STEP[port]
        x, y, hop = x + sx, y + sy, hop + 1


def hops(src, dst):
    return abs(src[0] - dst[0]) + abs(src[1] - dst[1])


def zero_load_latency(src, dst):
    """Cycles from a head's injection (its time stamp) to its first cycle on the
    ejection port, when nothing else is in the network."""
    return MUON_INJECT_CYCLES + MUON_HOP_CYCLES * hops(src, dst) + EJECT_CYCLES


def is_stale(ts, now, max_age):
    """TSP: a best-effort head is dropped at its destination when older than max_age."""
    return now - ts > max_age


def decision_lead(slots, cols, rows):
    """Earliest start after a request, in cycles (the RTL's contract, RSV_LEAD)."""
    return (slots + 1) * (cols + rows) + 4


def window(start, duration, link, hop):
    """Cycles in which a reservation's flits use ``link``: the injection port in
    [start, start + duration), router k's output at switch cycles shifted by 1 + 2k."""
    if link.port == INJECT:
        return start, start + duration
    opens = start + MUON_INJECT_CYCLES + MUON_HOP_CYCLES * hop
    return opens, opens + duration


@dataclass(frozen=True)
class Reservation:
    id: int
    src: tuple
    dst: tuple
    start: int
    duration: int

    @property
    def end(self):
        """First cycle after its last window (the ejection port's)."""
        _, close = window(self.start, self.duration, *path_links(self.src, self.dst)[-1])
        return close

    def windows(self):
        return {link: window(self.start, self.duration, link, hop)
                for link, hop in path_links(self.src, self.dst)}


@dataclass(frozen=True)
class Answer:
    granted: bool
    full: bool
    id: int
    retry_after: int


BAD_REQUEST = "bad request"


class ReservationModel:
    """The reservation table: the same answers as ``hdl.muon.rbr.ReservationTable``."""

    ID_BITS = 8

    def __init__(self, cols, rows, slots=8):
        self.cols, self.rows, self.n_slots = cols, rows, slots
        self.lead = decision_lead(slots, cols, rows)
        self.slots = [None] * slots
        self.generation = [0] * slots
        self.slot_bits = (slots - 1).bit_length()

    def refused(self, src, dst, duration, bandwidth):
        inside = all(0 <= v < lim for v, lim in ((src[0], self.cols), (src[1], self.rows),
                                                 (dst[0], self.cols), (dst[1], self.rows)))
        return not inside or duration == 0 or not 1 <= bandwidth <= duration

    def live(self, now):
        return [r for r in self.slots if r is not None and now < r.end]

    def earliest_fit(self, src, dst, duration, earliest):
        """Least T >= earliest such that no shifted window of a flow (src, dst,
        duration) starting at T overlaps a live reservation's window on the same link."""
        forbidden = []
        mine = path_links(src, dst)
        for other in (r for r in self.slots if r is not None):
            theirs = other.windows()
            for link, hop in mine:
                if link in theirs:
                    lo, hi = theirs[link]
                    # window(T) overlaps [lo, hi) iff lo - len < T + shift < hi
                    shift = window(0, duration, link, hop)[0]
                    forbidden.append((lo - duration - shift + 1, hi - shift))
        t = earliest
        for lo, hi in sorted(forbidden):
            if lo <= t < hi:
                t = hi
        # One sorted sweep can miss an interval that starts before an earlier jump's
        # end and ends after it; repeat until nothing forbids t.
        while any(lo <= t < hi for lo, hi in forbidden):
            t = max(hi for lo, hi in forbidden if lo <= t < hi)
        return t

    def request(self, now, src, dst, start, duration, bandwidth):
        """Answer to a request taken in cycle ``now``; BAD_REQUEST if refused at START."""
        if self.refused(src, dst, duration, bandwidth):
            return BAD_REQUEST
        free = [e for e, r in enumerate(self.slots) if r is None or now >= r.end]
        if not free:
            return Answer(False, True, 0, min(r.end for r in self.slots))
        t = self.earliest_fit(src, dst, duration, max(start, now + self.lead))
        if t != start:
            return Answer(False, False, 0, t)
        e = free[0]
        ident = (self.generation[e] << self.slot_bits | e) & ((1 << self.ID_BITS) - 1)
        self.generation[e] += 1
        self.slots[e] = Reservation(ident, tuple(src), tuple(dst), start, duration)
        return Answer(True, False, ident, 0)
