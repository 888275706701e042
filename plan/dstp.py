"""DSTP: deterministic spatio-temporal planning of a CircuitFlow graph on a space-time
grid, in cycles.

Resources (each a timeline of busy half-open intervals):

1. **Blocks.** An op runs on one instance of its block kind for the cycles of the kind's
   latency model, ``[start, finish)``; the planner picks the instance (the one that lets
   it start first; the machine's order breaks ties). The blocks of an exclusive group
   (``machine.exclusive``) share one timeline: one of them runs at a time (the tile's
   MA and VA, whose memory traffic shares an unreserved path).
2. **Muon links (RBR).** An op's inputs come from the MC's node in one reservation of
   ``ceil(bytes read / flit_bytes)`` cycles opening at its start; its outputs go back in
   one reservation whose last window (the MC's ejection port) closes at its finish, so a
   consumer starting then finds them at the MC. A reservation's window on each link of its XY
   path is shifted by the link's hop (``golden.muon.window``); no two windows overlap on
   a link. Each reservation is requested ``rbr_lead`` cycles ahead of its start (the
   table's decision lead, so every request is at cycle >= 0) and holds one of the
   ``rbr_slots`` table entries from its request to its end. When a window collides, the
   planner's table answers ``retry_after`` (the earliest start that fits) and the op
   moves there: the collision is folded into the plan, so at run time every request is
   granted at once (``tests/test_plan_dstp.py`` replays them through
   ``golden.muon.ReservationModel``).
3. **MC channels.** Each transfer holds one of the MC's client channels while its flits
   pass the MC's node: the injection window of an input reservation, the ejection window
   of an output one.
4. **The command sequencer** (``machine.sequencer``, :class:`plan.machine.SequencerTiming`;
   none: the host launches). It launches an op's commands, one entry per START (a VA
   command's repetitions each), ``slot`` cycles apart from the op's start; entry k needs
   the sequencer for its issue cycles (its register writes after the launch before it)
   just before its launch, one entry at a time: ``[launch − issue, launch)`` windows on
   one timeline. The op holds its block ``slot`` × entries cycles: each command's model
   cycles and the sequencer's ``gap`` from a launch to the cycle a dependent can launch
   (or the longest issue of a repetition).

Order: ops are placed one at a time, each as early as its predecessors, its release
(stage zero + largest dependency offset) and every resource allow, into any gap
(insertion scheduling). The next op to place is the ready one of the highest class
(decode, then prefill, then cache-migrate), then the longest remaining path, then
program order; so decode work claims the grid first and cache-migrate work fills the
gaps left. Everything is integer arithmetic over ordered lists: the same graph and
machine give the same plan, bit for bit.

The plan reports its makespan beside two lower bounds: the critical path (precedence,
releases and the request lead alone) and the busiest resource (a block kind's cycles over
its instances, the MC's transfer cycles over its channels, a Muon link's window cycles,
the sequencer's issue cycles).
"""

import heapq
import json
from bisect import bisect_right
from dataclasses import dataclass

from golden.muon import path_links, window
from spec.codes import TrafficClass

from .checks import check_graph
from .errors import IRError, IRFormatError, ScheduleInfeasible
from .ir import BarrierOp, _Reader, _stamp, graph_from_obj, graph_to_obj
from .machine import op_bytes

__all__ = ["Timeline", "Reservation", "Entry", "Plan", "plan", "plan_from_json",
           "DEFAULT_MAX_CYCLES",
           "PLAN_FORMAT", "PLAN_VERSION"]

DEFAULT_MAX_CYCLES = 1_000_000      # the notes' default planning horizon
PLAN_FORMAT = "v4hw-dstp-plan"
PLAN_VERSION = 2                    # 2: each entry's sequencer launches
_CLASS_RANK = {TrafficClass.DECODE: 0, TrafficClass.PREFILL: 1, TrafficClass.CACHE_MIGRATE: 2}


class Timeline:
    """Busy intervals ``[start, end)`` of one resource, disjoint and sorted."""

    def __init__(self):
        self.starts, self.ends = [], []

    def fit(self, t, duration):
        """Least ``t' >= t`` with ``[t', t' + duration)`` free."""
        i = bisect_right(self.ends, t)
        while i < len(self.starts) and self.starts[i] < t + duration:
            t = self.ends[i]
            i += 1
        return t

    def add(self, start, duration):
        """Marks ``[start, start + duration)`` busy (it must be free). Touching intervals
        are merged, so a densely used resource stays a short list for :meth:`fit`."""
        end = start + duration
        i = bisect_right(self.starts, start)
        if i and self.ends[i - 1] == start:
            i -= 1
            self.ends[i] = end
        else:
            self.starts.insert(i, start)
            self.ends.insert(i, end)
        if i + 1 < len(self.starts) and self.starts[i + 1] == end:
            self.ends[i] = self.ends.pop(i + 1)
            self.starts.pop(i + 1)

    def intervals(self):
        return list(zip(self.starts, self.ends, strict=True))


def _fit_units(units, wants, t):
    """Place intervals ``(offset, duration)`` (relative to ``t``) on distinct-enough units
    (the lowest-numbered free one each). Returns ``(t, [unit, ...])`` if they all fit at
    ``t``, ``(later t, None)`` if not, ``(None, None)`` if they overlap one another on
    more units than there are (at any ``t``)."""
    taken = []
    for offset, duration in wants:
        s = t + offset
        best, later = None, None
        for index, unit in enumerate(units):
            if any(i == index and s < e and b < s + duration for i, b, e in taken):
                continue
            fit = unit.fit(s, duration)
            if fit == s:
                best = index
                break
            later = fit if later is None else min(later, fit)
        if best is None:
            return (None if later is None else t + later - s), None
        taken.append((best, s, s + duration))
    return t, [i for i, _, _ in taken]


@dataclass(frozen=True)
class Reservation:
    """An RBR reservation of the plan: ``direction`` ``in`` (MC to block) or ``out``;
    ``request`` is the cycle it is asked for, ``start``/``duration`` its window at the
    source's injection port, ``bandwidth`` its flits, ``slot`` the table entry the plan
    counts it against."""
    direction: str
    src: tuple
    dst: tuple
    request: int
    start: int
    duration: int
    bandwidth: int
    slot: int

    @property
    def end(self):
        """First cycle after its last window (the destination's ejection port)."""
        return window(self.start, self.duration, *path_links(self.src, self.dst)[-1])[1]


@dataclass(frozen=True)
class Entry:
    """One op of the plan. ``block`` is None for a barrier; ``channels`` are
    ``(channel, start, end)`` of its MC transfers; ``launches`` the planned cycles of
    its command sequencer entries (none without the sequencer)."""
    op: str
    kind: str
    block: str | None
    start: int
    finish: int
    bound: int | None
    reservations: tuple = ()
    channels: tuple = ()
    launches: tuple = ()


@dataclass(frozen=True)
class Plan:
    """Entries in program order, the makespan and its two lower bounds (cycles)."""
    entries: tuple
    makespan: int
    critical_path: int
    busiest: tuple          # (resource name, cycles)
    max_cycles: int

    @property
    def lower_bound(self):
        return max(self.critical_path, self.busiest[1])

    def entry(self, name):
        for e in self.entries:
            if e.op == name:
                return e
        raise KeyError(name)

    def stamped_graph(self, graph):
        """``graph`` with every op's timestamp set to its planned start."""
        start = {e.op: e.start for e in self.entries}
        return type(graph)(graph.tensors, tuple(_stamp(op, start[op.name]) for op in graph.ops),
                           dict(graph.stages))

    def summary(self):
        name, cycles = self.busiest
        return (f"makespan {self.makespan} cycles; lower bounds: critical path "
                f"{self.critical_path}, busiest resource {name} {cycles}")

    def table(self):
        """The schedule as text: op, kind, block, start, finish, bound."""
        rows = [("op", "kind", "block", "start", "finish", "bound")]
        for e in sorted(self.entries, key=lambda e: (e.start, e.finish, e.op)):
            rows.append((e.op, e.kind, e.block or "-", str(e.start), str(e.finish),
                         "-" if e.bound is None else str(e.bound)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) if i < 3 else c.rjust(w)
                           for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
                 for r in rows]
        return "\n".join(lines + [self.summary()]) + "\n"

    def to_json(self, graph):
        """The plan and the stamped graph as JSON text (stable bytes)."""
        obj = {
            "format": PLAN_FORMAT, "version": PLAN_VERSION, "max_cycles": self.max_cycles,
            "makespan": self.makespan,
            "lower_bounds": {"critical_path": self.critical_path,
                             "busiest_resource": {"name": self.busiest[0],
                                                  "cycles": self.busiest[1]}},
            "entries": [{
                "op": e.op, "kind": e.kind, "block": e.block, "start": e.start,
                "finish": e.finish, "bound": e.bound,
                "reservations": [{"direction": r.direction, "src": list(r.src),
                                  "dst": list(r.dst), "request": r.request, "start": r.start,
                                  "duration": r.duration, "bandwidth": r.bandwidth,
                                  "slot": r.slot} for r in e.reservations],
                "channels": [list(c) for c in e.channels],
                "launches": list(e.launches)} for e in self.entries],
            "graph": graph_to_obj(self.stamped_graph(graph)),
        }
        return json.dumps(obj, indent=1, sort_keys=True) + "\n"


class _Grid:
    """The planner's space-time grid: timelines of blocks, links, RBR slots, channels."""

    def __init__(self, machine):
        self.machine = machine
        # Blocks of one exclusive group share one timeline (machine.exclusive).
        shared = [Timeline() for _ in machine.exclusive]
        self.blocks = {b.name: next((shared[i] for i, group in enumerate(machine.exclusive)
                                     if b.kind in group), None) or Timeline()
                       for b in machine.blocks}
        self.links = {}
        self.slots = [Timeline() for _ in range(machine.rbr_slots)]
        self.channels = [Timeline() for _ in range(machine.mc_channels)]
        self.lead = machine.rbr_lead
        self.sequencer = Timeline()     # the command sequencer's issue windows
        self._paths = {}

    def path(self, src, dst):
        """``[(link timeline, shift)]`` of the XY path (each link's window opens
        ``shift`` cycles after the reservation's start) and the shift of its last link."""
        key = (src, dst)
        if key not in self._paths:
            shifts = [(self.links.setdefault(link, Timeline()), window(0, 0, link, hop)[0])
                      for link, hop in path_links(src, dst)]
            self._paths[key] = shifts, shifts[-1][1]
        return self._paths[key]

    def rbr_answer(self, src, dst, start, duration):
        """The table's answer to a request for ``start``: ``start`` if it fits every
        link, else retry_after, the earliest start that does."""
        shifts, _ = self.path(src, dst)
        t = start
        while True:
            before = t
            for line, shift in shifts:
                t = line.fit(t + shift, duration) - shift
            if t == before:
                return t

    def sequencer_answer(self, t, issues):
        """The earliest start from ``t`` at which every issue window of the op's entries
        (``[launch − issue, launch)``, launch = start + offset) is free."""
        while True:
            before = t
            for offset, issue in issues:
                t = self.sequencer.fit(t + offset - issue, issue) - offset + issue
            if t == before:
                return t

    def place(self, block, dur, rd, wr, release, max_cycles, name, issues=()):
        """Earliest start of an op on ``block``, and what it would hold there."""
        mc, node = tuple(self.machine.mc_node), tuple(block.node)
        # (direction, src, dst, offset of the reservation from the op's start, flits,
        # offset of the flits' cycles at the MC: injection for inputs, ejection for outputs)
        transfers = []
        if rd:
            transfers.append(("in", mc, node, 0, rd, 0))
        if wr:
            # The outputs are at the MC when the op completes: the window on the MC's
            # ejection port closes at the finish.
            offset = dur - wr - self.path(node, mc)[1]
            if offset < 0:
                raise IRError(f"op {name}: its {wr} flits out, {self.path(node, mc)[1]} "
                              f"cycles behind on the path to the MC, do not fit in its "
                              f"{dur} cycles")
            transfers.append(("out", node, mc, offset, wr, dur - wr))
        t = release
        for _, _, _, offset, _, _ in transfers:
            t = max(t, self.lead - offset)      # requests are made at cycle >= 0
        for offset, issue in issues:
            t = max(t, issue - offset)          # the sequencer starts issuing at cycle >= 0
        while True:
            if t + dur > max_cycles:
                raise ScheduleInfeasible(f"op {name} cannot finish before cycle {t + dur}",
                                         max_cycles)
            before = t
            t = self.blocks[block.name].fit(t, dur)
            for _, src, dst, offset, flits, _ in transfers:
                t = self.rbr_answer(src, dst, t + offset, flits) - offset
            slot_wants = [(offset - self.lead, self.lead + self.path(src, dst)[1] + flits)
                          for _, src, dst, offset, flits, _ in transfers]
            t, slots = _fit_units(self.slots, slot_wants, t)
            if t is None:
                raise ScheduleInfeasible(f"op {name}'s reservations are live at once and the "
                                         f"RBR table has {len(self.slots)} slot(s)", max_cycles)
            if slots is None:
                continue
            t, channels = _fit_units(self.channels,
                                     [(at_mc, flits) for *_, flits, at_mc in transfers], t)
            if t is None:
                raise ScheduleInfeasible(f"op {name}'s transfers overlap and the MC has "
                                         f"{len(self.channels)} channel(s)", max_cycles)
            if channels is None:
                continue
            if issues:
                t = self.sequencer_answer(t, issues)
            if t == before:
                return t, transfers, slots, channels

    def commit(self, block, t, dur, transfers, slots, channels, issues=()):
        self.blocks[block.name].add(t, dur)
        for offset, issue in issues:
            self.sequencer.add(t + offset - issue, issue)
        reservations, held = [], []
        for (direction, src, dst, offset, flits, at_mc), slot, channel in zip(
                transfers, slots, channels, strict=True):
            start = t + offset
            shifts, end_offset = self.path(src, dst)
            for line, shift in shifts:
                line.add(start + shift, flits)
            self.slots[slot].add(start - self.lead, self.lead + end_offset + flits)
            self.channels[channel].add(t + at_mc, flits)
            reservations.append(Reservation(direction, src, dst, start - self.lead, start,
                                            flits, flits, slot))
            held.append((channel, t + at_mc, t + at_mc + flits))
        return tuple(reservations), tuple(held)


def _structure(graph):
    """Predecessors of every node (STDG edges, barriers) and a topological order."""
    preds = {op.name: [] for op in graph.ops}
    for src, dst, _ in graph.edges():
        if src not in preds[dst]:
            preds[dst].append(src)
    previous, since = None, []
    for op in graph.ops:
        if isinstance(op, BarrierOp):
            preds[op.name].extend(since + ([previous] if previous else []))
            previous, since = op.name, []
        else:
            if previous:
                preds[op.name].append(previous)
            since.append(op.name)
    index = {op.name: i for i, op in enumerate(graph.ops)}
    succ = {name: [] for name in preds}
    for name, ps in preds.items():
        for p in ps:
            succ[p].append(name)
    indegree = {name: len(ps) for name, ps in preds.items()}
    ready = [index[n] for n, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        name = graph.ops[heapq.heappop(ready)].name
        order.append(name)
        for s in succ[name]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(ready, index[s])
    return preds, succ, order, index


def plan(graph, machine, *, max_cycles=DEFAULT_MAX_CYCLES):
    """Check ``graph`` (:func:`plan.checks.check_graph`) and plan it on ``machine``.
    Raises the IR's errors, or :class:`ScheduleInfeasible` when some op cannot finish
    by ``max_cycles``."""
    if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1:
        raise ValueError(f"max_cycles must be a positive integer, not {max_cycles!r}")
    cycles = check_graph(graph, machine)
    ops = {op.name: op for op in graph.ops}
    preds, succ, order, index = _structure(graph)
    lead = machine.rbr_lead

    info = {}           # name -> (dur, rd, wr, release)
    issues = {}         # name -> [(launch offset, issue cycles)] of its sequencer entries
    seq = machine.sequencer
    kinds = len({b.kind for b in machine.blocks})
    for op in graph.ops:
        if isinstance(op, BarrierOp):
            info[op.name] = (0, 0, 0, 0)
            continue
        dur = cycles[op.name]
        if seq is not None:
            dur, issues[op.name] = seq.entries(op, machine.kind_of(op), dur, kinds)
        read, written = op_bytes(op, graph)
        rd, wr = machine.flits(read), machine.flits(written)
        for what, flits in (("in", rd), ("out", wr)):
            if flits > dur:
                raise IRError(f"op {op.name}: its {flits} flits {what} do not fit in the "
                              f"{dur} cycles its {machine.kind_of(op)} model gives")
        info[op.name] = (dur, rd, wr, graph.stage_zero(op.stage) + op.offset())

    grid = _Grid(machine)
    # Lower bound 1: the critical path (precedence, releases, the RBR request lead).
    finish_lb, tail = {}, {}
    for name in order:
        dur, rd, wr, release = info[name]
        start = max([release] + [finish_lb[p] for p in preds[name]]
                    + [issue - offset for offset, issue in issues.get(name, ())])
        if rd:
            start = max(start, lead)
        if wr:
            shift = min(grid.path(tuple(b.node), tuple(machine.mc_node))[1]
                        for b in machine.instances(machine.kind_of(ops[name])))
            start = max(start, lead - (dur - wr - shift))
        finish_lb[name] = start + dur
    for name in reversed(order):
        tail[name] = info[name][0] + max((tail[s] for s in succ[name]), default=0)
    critical_path = max(finish_lb.values(), default=0)

    # Lower bound 2: the busiest resource.
    loads = {}
    for b in machine.blocks:
        loads.setdefault(b.kind, 0)
    link_load, link_shift = {}, {}
    single = all(len(machine.instances(b.kind)) == 1 for b in machine.blocks)
    mc_load = 0
    for op in graph.ops:
        if isinstance(op, BarrierOp):
            continue
        dur, rd, wr, _ = info[op.name]
        kind = machine.kind_of(op)
        loads[kind] += dur
        mc_load += rd + wr
        if single:
            node = tuple(machine.instances(kind)[0].node)
            for src, dst, flits in ((tuple(machine.mc_node), node, rd),
                                    (node, tuple(machine.mc_node), wr)):
                if flits:
                    for link, hop in path_links(src, dst):
                        shift = window(0, 0, link, hop)[0]
                        link_load[link] = link_load.get(link, 0) + flits
                        link_shift[link] = max(link_shift.get(link, 0), shift)
    candidates = [(kind, -(-load // len(machine.instances(kind)))) for kind, load in loads.items()]
    candidates += [("+".join(group), sum(loads[k] for k in group))
                   for group in machine.exclusive]
    candidates.append(("mc channels", -(-mc_load // machine.mc_channels)))
    if seq is not None:
        candidates.append(("sequencer", sum(i for ws in issues.values() for _, i in ws)))
    for link, load in link_load.items():
        port = getattr(link.port, "name", link.port).lower()
        candidates.append((f"muon ({link.x},{link.y}) {port}", load - link_shift[link]))
    busiest = max(candidates, key=lambda c: c[1])

    # Serial placement in priority order.
    def rank(name):
        op = ops[name]
        cls = -1 if isinstance(op, BarrierOp) else _CLASS_RANK[op.traffic_class]
        return (cls, -tail[name], index[name])

    indegree = {name: len(ps) for name, ps in preds.items()}
    ready = [rank(n) for n, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    placed = {}
    while ready:
        name = graph.ops[heapq.heappop(ready)[2]].name
        op = ops[name]
        dur, rd, wr, release = info[name]
        earliest = max([release] + [placed[p].finish for p in preds[name]])
        if isinstance(op, BarrierOp):
            placed[name] = Entry(name, op.kind, None, earliest, earliest, None)
        else:
            best, failure = None, None
            for block in machine.instances(machine.kind_of(op)):
                try:
                    t, *held = grid.place(block, dur, rd, wr, earliest, max_cycles, name,
                                          issues.get(name, ()))
                except ScheduleInfeasible as error:     # another instance may still fit
                    failure = failure or error
                    continue
                if best is None or t < best[1]:
                    best = (block, t, held)
            if best is None:
                raise failure
            block, t, (transfers, slots, channels) = best
            reservations, held = grid.commit(block, t, dur, transfers, slots, channels,
                                             issues.get(name, ()))
            placed[name] = Entry(name, op.kind, block.name, t, t + dur, op.latency_bound,
                                 reservations, held,
                                 tuple(t + offset for offset, _ in issues.get(name, ())))
        for s in succ[name]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(ready, rank(s))
    entries = tuple(placed[op.name] for op in graph.ops)
    makespan = max((e.finish for e in entries), default=0)
    return Plan(entries, makespan, critical_path, busiest, max_cycles)


def _entry_from_obj(r, obj, path):
    r.obj(obj, path, ("op", "kind", "block", "start", "finish", "bound", "reservations",
                      "channels"), ("launches",))
    block = obj["block"]
    if block is not None:
        r.str(block, f"{path}.block")
    bound = r.int(obj["bound"], f"{path}.bound", 1, none=True)
    start = r.int(obj["start"], f"{path}.start")
    finish = r.int(obj["finish"], f"{path}.finish", start)
    reservations = []
    for i, res in enumerate(r.list(obj["reservations"], f"{path}.reservations")):
        where = f"{path}.reservations[{i}]"
        r.obj(res, where, ("direction", "src", "dst", "request", "start", "duration",
                           "bandwidth", "slot"))
        if res["direction"] not in ("in", "out"):
            r.fail(f"{where}.direction", f"expected 'in' or 'out', got {res['direction']!r}")
        ends = []
        for end in ("src", "dst"):
            node = r.ints(res[end], f"{where}.{end}", 0)
            if len(node) != 2:
                r.fail(f"{where}.{end}", "expected [x, y]")
            ends.append(node)
        reservations.append(Reservation(
            res["direction"], *ends, r.int(res["request"], f"{where}.request"),
            r.int(res["start"], f"{where}.start"), r.int(res["duration"], f"{where}.duration", 1),
            r.int(res["bandwidth"], f"{where}.bandwidth", 1), r.int(res["slot"], f"{where}.slot")))
    channels = []
    for i, held in enumerate(r.list(obj["channels"], f"{path}.channels")):
        held = r.ints(held, f"{path}.channels[{i}]", 0)
        if len(held) != 3 or held[1] > held[2]:
            r.fail(f"{path}.channels[{i}]", "expected [channel, start, end], start <= end")
        channels.append(held)
    launches = r.ints(obj.get("launches", []), f"{path}.launches", start)
    if any(t >= finish for t in launches):
        r.fail(f"{path}.launches", f"a launch at or after the finish {finish}")
    return Entry(r.str(obj["op"], f"{path}.op"), r.str(obj["kind"], f"{path}.kind"), block,
                 start, finish, bound, tuple(reservations), tuple(channels), tuple(launches))


def plan_from_json(text):
    """Reads :meth:`Plan.to_json`'s output back as ``(plan, stamped graph)``, checking
    every field and that the entries agree with the graph (same ops in order, kinds,
    bounds, timestamps, makespan); raises :class:`IRFormatError` naming the field."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as error:
        raise IRFormatError(f"not JSON: {error}") from None
    r = _Reader()
    r.obj(obj, "plan", ("format", "version", "max_cycles", "makespan", "lower_bounds",
                        "entries", "graph"))
    if obj["format"] != PLAN_FORMAT:
        r.fail("plan.format", f"expected {PLAN_FORMAT!r}, got {obj['format']!r}")
    if obj["version"] not in (1, PLAN_VERSION):     # version 1: no launches
        r.fail("plan.version", f"this reader knows versions 1 and {PLAN_VERSION}, got "
               f"{obj['version']!r}")
    graph = graph_from_obj(obj["graph"], "plan.graph")
    bounds = r.obj(obj["lower_bounds"], "plan.lower_bounds",
                   ("critical_path", "busiest_resource"))
    busiest = r.obj(bounds["busiest_resource"], "plan.lower_bounds.busiest_resource",
                    ("name", "cycles"))
    entries = tuple(_entry_from_obj(r, e, f"plan.entries[{i}]")
                    for i, e in enumerate(r.list(obj["entries"], "plan.entries")))
    if [e.op for e in entries] != [op.name for op in graph.ops]:
        r.fail("plan.entries", "the entries' ops are not the graph's ops in order")
    for i, (e, op) in enumerate(zip(entries, graph.ops, strict=True)):
        bound = None if isinstance(op, BarrierOp) else op.latency_bound
        for field, got, want in (("kind", e.kind, op.kind), ("start", e.start, op.timestamp),
                                 ("bound", e.bound, bound)):
            if got != want:
                r.fail(f"plan.entries[{i}].{field}", f"{got!r} but the graph's op {op.name} "
                       f"has {want!r}")
    makespan = r.int(obj["makespan"], "plan.makespan")
    if makespan != max((e.finish for e in entries), default=0):
        r.fail("plan.makespan", f"{makespan} is not the latest finish")
    result = Plan(entries, makespan, r.int(bounds["critical_path"],
                                           "plan.lower_bounds.critical_path"),
                  (r.str(busiest["name"], "plan.lower_bounds.busiest_resource.name"),
                   r.int(busiest["cycles"], "plan.lower_bounds.busiest_resource.cycles")),
                  r.int(obj["max_cycles"], "plan.max_cycles", 1))
    return result, graph
