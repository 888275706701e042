"""Reserved commands: the tile's memory path given to one command at a time, so that its
cycles do not depend on the background traffic (docs/tile/README.md, "Reserved
commands").

Every requester's memory traffic meets every other's on the way to memory: the memory
NI's ejection port, its one input queue, the MC's arbiter and prefetch buffer, the
memory bus. A command of a *reserved* class (the tile's RESERVE.CLASSES) therefore owns
that whole path from its START to its end (with sharing, RSV_SHARE, in its RESERVED
phases only, 4):

1. At the START of a reserved command (the MA's or the VA's, at a class whose bit is
   set in RESERVE.CLASSES), every other requester (the cache-migrate engine always, the
   MA or VA when its class is not reserved) stops issuing new bursts: a
   :class:`PortGate` in front of its NI holds ``rd_req`` and ``wr_req`` (a burst already
   taken completes, its write data included). They stay held until the reserved
   command ends (but for its BACKGROUND phases, 4).
2. The reserved command's own bursts are held for RSV_GUARD cycles from the cycle
   after its START (always the same number of cycles), while the background traffic
   already in flight drains: after the guard the path holds nothing but the reserved
   command's traffic. (The holds start a cycle after the launch, from registers: a
   burst the background issues in the launch cycle is one more to drain.)
3. While a reserved command runs the MC's prefetch buffer is off (its WINDOW reads as 0
   by the MC's core: no hit, no fill), so no line that background reads brought in, or
   evicted, changes the reserved command's reads.
4. With sharing (RSV_SHARE.BACKGROUND != 0) the command's time, counted from the cycle
   after its START (so the phases are the same whatever cycle the START came at),
   repeats until the command ends::

       guard | RESERVED | guard | BACKGROUND | guard | RESERVED | guard | ...

   each guard RSV_GUARD cycles, RESERVED and BACKGROUND RSV_SHARE's fields (RESERVED
   below :data:`MIN_RESERVED` reads as it, so the command issues in every period and
   always ends). Only the reserved command issues new bursts in RESERVED, only the
   others (the background) in BACKGROUND, nobody in a guard: the guard after RESERVED
   lets the command's own bursts complete, the guard after BACKGROUND the background's.
   The prefetch stays off throughout. The guard, RESERVED and BACKGROUND are taken at
   the START. Without sharing the first guard is followed by RESERVED to the end.

So each RESERVED phase starts on an idle memory path in the same state (every burst
answered, every NI's credits back, the MC idle, no packet in the mesh), and the command
between its phases sees nothing of the background: its cycles depend only on its own
requests (and the memory's latency). The state the background leaves behind is none
the command can see: the queues are empty; the arbiters between requesters (the
routers', the memory NI's input, the MC's between classes) see only the reserved
command's traffic in a RESERVED phase, and one command's read and write packets never
meet at a router's output (XY routes, opposite directions); the two one-bit turns its
reads and writes meet at (the MC's channel round robin, the memory NI's READ_DATA /
WRITE_DONE turn) are set by each grant, so the background's last one decides only a
tie at a RESERVED phase's first grant or first answer (on an idle path the command's
first request reaches the MC alone; clearing those two turns at each RESERVED phase
would need an input on the MC and the memory NI).

RSV_STARTS counts the reserved STARTs, RSV_LATE the guards (the START's and, with
sharing, each one between phases) that ended before the path had drained (a burst of
any requester unanswered, credits the memory NI still owes any requester, or the MC
busy: a guard too short for the traffic in flight, and the command may then jitter,
or the background see its bursts), RSV_DRAIN_MAX the longest drain seen (cycles from
the guard's start). A guard of 0 cycles is never late.

Two reserved commands that overlap in time are not isolated from each other (each
still is from the background, which then issues only while both are in BACKGROUND):
the routers' round-robin state between them is not reset. The decode program runs its
commands one at a time.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.common.memport import MemPortSignature
from hdl.muon.layouts import CLASS_BITS

__all__ = ["PortGate", "ReserveControl", "GUARD_BITS", "MIN_RESERVED", "OUTSTANDING_BITS"]

GUARD_BITS = 16
OUTSTANDING_BITS = 10      # bursts a port can have unanswered (its NI takes far fewer)
MIN_RESERVED = 1           # RSV_SHARE.RESERVED below this reads as it (while sharing)


class PortGate(wiring.Component):
    """A memory port passed through (``up``: the block's, served; ``down``: to its NI),
    whose new bursts are held while ``hold`` (``rd_req`` and ``wr_req`` neither offered
    nor taken; every other stream passes, so a burst already taken completes). A
    request already offered on ``down`` and not yet taken stays offered until it is
    (a stream's valid never falls before its ready: what is downstream may hold its
    choice, as :class:`~hdl.common.memport.MemPortArbiter` does), so it is one more
    burst for the guard to drain.
    ``idle``: no burst taken and unanswered (read bursts until their ``last`` word,
    write bursts until their response)."""

    def __init__(self, data_width):
        super().__init__({
            "up": In(MemPortSignature(data_width)),
            "down": Out(MemPortSignature(data_width)),
            "hold": In(1),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        up, down = self.up, self.down
        for name, held in (("rd_req", True), ("wr_req", True), ("wr_data", False),
                           ("rd_resp", False), ("wr_resp", False)):
            a, b = getattr(up, name), getattr(down, name)
            if name.endswith("resp"):       # memory to block
                a, b = b, a
            go = 1
            if held:
                offered = Signal(name=f"{name}_offered")
                m.d.sync += offered.eq(b.valid & ~b.ready)
                go = ~self.hold | offered
            m.d.comb += [b.payload.eq(a.payload), b.valid.eq(a.valid & go),
                         a.ready.eq(b.ready & go)]
        reads, writes = Signal(OUTSTANDING_BITS), Signal(OUTSTANDING_BITS)
        rd_in = down.rd_req.valid & down.rd_req.ready
        rd_out = down.rd_resp.valid & down.rd_resp.ready & down.rd_resp.payload.last
        wr_in = down.wr_req.valid & down.wr_req.ready
        wr_out = down.wr_resp.valid & down.wr_resp.ready
        m.d.sync += [reads.eq(reads + rd_in - rd_out), writes.eq(writes + wr_in - wr_out)]
        m.d.comb += self.idle.eq((reads == 0) & (writes == 0))
        return m


class ReserveControl(wiring.Component):
    """The policy of the module docstring, for the requesters ``reservable`` (blocks
    with a command: ``launch_<n>``, ``busy_<n>``, ``cls_<n>`` in) and ``background``
    (always background: the migrate engine).

    In: ``classes`` (RESERVE.CLASSES), ``guard`` (RSV_GUARD, cycles), ``reserved`` and
    ``shared`` (RSV_SHARE.RESERVED and .BACKGROUND, cycles), ``idle_<n>`` of every
    requester's :class:`PortGate`, ``owed_<n>`` (the memory NI owes requester n
    credits), ``mc_busy`` (the MC has a request or an answer in flight).
    Out: ``hold_<n>`` for every requester, ``prefetch_off``, ``starts``, ``late``
    (32-bit counts), ``drain_max`` (cycles, saturating).

    The guard and the schedule's lengths are taken at the START (a write while a
    reserved command runs applies to the next one).
    """

    def __init__(self, reservable=("ma", "va"), background=("migrate",)):
        self.reservable, self.background = tuple(reservable), tuple(background)
        members = {"classes": In(1 << CLASS_BITS), "guard": In(GUARD_BITS),
                   "reserved": In(GUARD_BITS), "shared": In(GUARD_BITS),
                   "mc_busy": In(1), "prefetch_off": Out(1), "starts": Out(32),
                   "late": Out(32), "drain_max": Out(GUARD_BITS)}
        for n in self.reservable:
            members.update({f"launch_{n}": In(1), f"busy_{n}": In(1),
                            f"cls_{n}": In(CLASS_BITS)})
        for n in self.reservable + self.background:
            members.update({f"idle_{n}": In(1), f"owed_{n}": In(1), f"hold_{n}": Out(1)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        every = self.reservable + self.background
        schedules = {}
        for n in self.reservable:
            launch, busy = getattr(self, f"launch_{n}"), getattr(self, f"busy_{n}")
            go = Signal(name=f"reserved_start_{n}")
            m.d.comb += go.eq(launch & self.classes.bit_select(getattr(self, f"cls_{n}"), 1))
            m.submodules[f"schedule_{n}"] = s = _Schedule()
            m.d.comb += [s.go.eq(go), s.busy.eq(busy), s.guard.eq(self.guard),
                         s.reserved.eq(self.reserved), s.shared.eq(self.shared)]
            schedules[n] = s
        active = Cat(s.running for s in schedules.values()).any()
        for n in every:
            # Held by the reserved commands of the others unless each is in its
            # BACKGROUND phase (a requester with no reserved command of its own).
            others = Cat(s.running & ~s.open for k, s in schedules.items() if k != n).any()
            own = schedules.get(n)
            if own is None:
                m.d.comb += getattr(self, f"hold_{n}").eq(others)
            else:
                m.d.comb += getattr(self, f"hold_{n}").eq(
                    own.guarding | (own.running & own.closed) | (~own.running & others))
        m.d.comb += self.prefetch_off.eq(active)
        self._monitor(m, every, schedules)
        return m

    def _monitor(self, m, every, schedules):
        """RSV_STARTS, RSV_LATE, RSV_DRAIN_MAX."""
        settled = Cat(~getattr(self, f"owed_{k}") for k in every).all()
        idle = Cat(getattr(self, f"idle_{k}") for k in every).all()
        for n, s in schedules.items():
            others = Cat(o.running for k, o in schedules.items() if k != n).any()
            drained = Signal(name=f"drained_{n}")
            # In a guard of n only the bursts taken before it (n's or the background's)
            # or another reserved command can keep the MC busy. Every requester's
            # credits back (n's too) leaves the memory NI nothing to send.
            m.d.comb += drained.eq(idle & settled & (~self.mc_busy | others))
            draining = Signal(name=f"draining_{n}")
            count = Signal(GUARD_BITS, name=f"drain_{n}")
            with m.If(s.begin):
                m.d.sync += [draining.eq(1), count.eq(0)]
            with m.Elif(draining):
                with m.If(drained):
                    m.d.sync += draining.eq(0)
                    with m.If(count > self.drain_max):
                        m.d.sync += self.drain_max.eq(count)
                with m.Elif(count != (1 << GUARD_BITS) - 1):
                    m.d.sync += count.eq(count + 1)
            in_guard = s.guarding | (s.running & s.between)
            was_guarding = Signal(name=f"was_guarding_{n}")
            m.d.sync += was_guarding.eq(in_guard)
            with m.If(was_guarding & ~in_guard & draining & ~drained):
                m.d.sync += self.late.eq(self.late + 1)
        m.d.sync += self.starts.eq(self.starts + sum(s.go for s in schedules.values()))


class _Schedule(wiring.Component):
    """One reservable requester's reserved command in time, from its START (``go``)
    until ``busy`` falls: ``running``; ``guarding``, the START's guard (RSV_GUARD
    cycles from the cycle after ``go``, whether or not the command still runs, as
    without sharing); and with sharing (``shared`` != 0) the repeating phases after it,
    meaningful while ``running``: ``closed`` (the command's new bursts held: every
    phase but RESERVED), ``open`` (its BACKGROUND phase: the others may issue),
    ``between`` (one of the later guards: the guard before BACKGROUND, and the guard
    before each RESERVED after the first). ``begin``: a guard starts next cycle.

    Position ``t`` counts the cycles from the cycle after ``go`` (0) and wraps at the
    period ``2 * guard + max(reserved, MIN_RESERVED) + shared`` (sharing), or stops at
    ``guard`` (no sharing: the command then owns the path to its end).
    """

    def __init__(self):
        super().__init__({
            "go": In(1), "busy": In(1),
            "guard": In(GUARD_BITS), "reserved": In(GUARD_BITS), "shared": In(GUARD_BITS),
            "running": Out(1), "guarding": Out(1), "closed": Out(1), "open": Out(1),
            "between": Out(1), "begin": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        bits = GUARD_BITS + 2
        t, first, share = Signal(bits), Signal(), Signal()
        # The phase boundaries, from the START's register values.
        g, r_end, own_end, period = (Signal(bits, name=x) for x in
                                     ("guard_end", "reserved_end", "own_end", "period"))
        with m.If(self.go):
            m.d.sync += self.running.eq(1)
        with m.Elif(~self.busy):
            m.d.sync += self.running.eq(0)
        r = Signal(GUARD_BITS)
        m.d.comb += r.eq(Mux(self.reserved < MIN_RESERVED, MIN_RESERVED, self.reserved))
        wrap = share & self.running & (t == period - 1)
        with m.If(self.go):
            m.d.sync += [t.eq(0), first.eq(1), share.eq(self.shared != 0), g.eq(self.guard),
                         r_end.eq(self.guard + r), own_end.eq(2 * self.guard + r),
                         period.eq(2 * self.guard + r + self.shared)]
        with m.Elif(wrap):
            m.d.sync += [t.eq(0), first.eq(0)]
        with m.Elif(Mux(share, t < period - 1, t < g)):
            m.d.sync += t.eq(t + 1)
        # Every hold is a function of registers only (from the cycle after the launch;
        # the core issues nothing before), so no launch reaches a ready combinationally.
        reserved_phase = (t >= g) & (t < r_end)
        m.d.comb += [
            self.guarding.eq(first & (t < g)),
            self.closed.eq(share & ~reserved_phase),
            self.open.eq(share & (t >= own_end)),
            self.between.eq(share & ((t < g) | ((t >= r_end) & (t < own_end)))),
            # A guard starts next cycle: the START's, the guard after RESERVED, the
            # guard after BACKGROUND (a guard of 0 cycles begins and ends at once).
            self.begin.eq(self.go | (self.running & share & ((t == r_end - 1) | wrap))),
        ]
        return m
