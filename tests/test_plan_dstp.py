"""The DSTP planner (plan/dstp.py) against invariants checked here independently:
precedence and releases kept, no two ops on one block at once, every Muon window on its
own on each link and every RBR request granted at once when the plan's requests are
replayed through the golden reservation table, MC channels never double-booked, the
makespan at or above both lower bounds; with the command sequencer, its entries launched
one at a time, each its issue cycles after the one before, and every command's cycles
and the sequencer's between a launch and the next; determinism, class order, gap
filling, infeasibility."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from golden.muon import Reservation as GoldenReservation
from golden.muon import ReservationModel, path_links, window
from plan.dstp import Timeline, plan, plan_from_json
from plan.errors import IRError, IRFormatError, ScheduleInfeasible
from plan.ir import (
    BarrierOp,
    CacheMigrateOp,
    DecodeOp,
    Dependency,
    Graph,
    PrefillOp,
    Tensor,
    graph_from_json,
    graph_to_json,
)
from plan.machine import Block, LinearLatency, Machine, SequencerTiming
from plan.synthetic import random_graph
from sim.seed import test_seed

ROOT = Path(__file__).resolve().parent.parent


def _disjoint(intervals, what):
    intervals = sorted(intervals)
    for (s0, e0, a), (s1, e1, b) in zip(intervals, intervals[1:], strict=False):
        assert e0 <= s1, f"{what}: {a} [{s0}, {e0}) overlaps {b} [{s1}, {e1})"


def verify(result, graph, machine):
    """Every invariant of a plan, from the graph and the machine alone."""
    entries = {e.op: e for e in result.entries}
    assert [e.op for e in result.entries] == [op.name for op in graph.ops]
    blocks = {b.name: b for b in machine.blocks}
    mc = tuple(machine.mc_node)
    per_block, per_channel, per_link, requests = {}, {}, {}, []
    seq, launches = machine.sequencer, []
    kinds = len({b.kind for b in machine.blocks})
    for op in graph.ops:
        e = entries[op.name]
        if isinstance(op, BarrierOp):
            assert e.block is None and e.start == e.finish
            continue
        assert blocks[e.block].kind == machine.kind_of(op)
        cycles = machine.cycles(op, graph)
        assert cycles <= op.latency_bound
        if seq is None:
            assert e.finish - e.start == cycles
        else:
            # One entry per START (as plan.commands lists them), launched evenly over
            # the op's cycles (with the timing's extra: one after the other); each
            # command's share of the cycles, its extra and the sequencer's gap fit
            # before the next launch (or the finish).
            writes = seq.entry_writes(op, machine.kind_of(op))
            n = len(writes)
            even = tuple(e.start + k * (e.finish - e.start) // n for k in range(n))
            if seq.extra is None:
                assert e.launches == even, op.name
            assert len(e.launches) == n and e.launches[0] == e.start
            at = list(e.launches) + [e.finish]
            extra = (seq.extra or {}).get(op.name, (0,) * n)
            for k, w in enumerate(writes):
                assert at[k + 1] - at[k] >= -(-cycles // n) + extra[k] + seq.gap, (op.name, k)
                deps = kinds if k == 0 else 1
                launches.append((at[k], 7 + deps + seq.write_cycles
                                 * (w + seq.extra_writes - 1), op.name))
        assert e.start >= graph.stage_zero(op.stage) + max(
            [d.offset for d in op.dependency], default=0)
        per_block.setdefault(e.block, []).append((e.start, e.finish, op.name))
        node = tuple(blocks[e.block].node)
        tensors = graph.tensor
        read = sum(tensors[t].nbytes for t in op.inputs)
        written = sum(tensors[t].nbytes for t in op.outputs)
        if op.traffic is not None:          # the op touches part of its tensors
            read, written = op.traffic
        want = []
        if read:
            want.append(("in", mc, node, e.start, -(-read // machine.flit_bytes)))
        if written:
            # The outputs' last window, the MC's ejection port, closes at the finish.
            flits = -(-written // machine.flit_bytes)
            eject = path_links(node, mc)[-1]
            want.append(("out", node, mc, e.finish - window(0, flits, *eject)[1], flits))
        got = [(r.direction, r.src, r.dst, r.start, r.duration) for r in e.reservations]
        assert got == want, op.name
        # A channel is held while the flits pass the MC: inputs leave it from the start,
        # outputs reach it by the finish.
        at_mc = [(e.start, e.start + w[4]) if w[0] == "in" else (e.finish - w[4], e.finish)
                 for w in want]
        assert [(c[1], c[2]) for c in e.channels] == at_mc
        for (channel, s, end), r in zip(e.channels, e.reservations, strict=True):
            assert 0 <= channel < machine.mc_channels
            per_channel.setdefault(channel, []).append((s, end, op.name))
            assert r.request == r.start - machine.rbr_lead >= 0
            requests.append((r.request, r.start, op.name, r))
            for link, hop in path_links(r.src, r.dst):
                lo, hi = window(r.start, r.duration, link, hop)
                per_link.setdefault(link, []).append((lo, hi, op.name))
    for name, intervals in per_block.items():
        _disjoint(intervals, f"block {name}")
    # The sequencer launches in planned order, each entry its issue cycles after the
    # launch before it (the first its issue after cycle 0).
    launches.sort()
    for (prev, _, a), (launch, issue, b) in zip([(0, 0, "cycle 0")] + launches, launches,
                                                 strict=False):
        assert launch - prev >= issue, f"{b} launches {launch - prev} cycles after {a}"
    for channel, intervals in per_channel.items():
        _disjoint(intervals, f"MC channel {channel}")
    for link, intervals in per_link.items():
        _disjoint(intervals, f"Muon link {link}")
    # Replayed in request order through the golden table, every request is granted as
    # planned: no collision and no retry left for run time, and never more live
    # reservations than table slots.
    table = ReservationModel(*machine.mesh, slots=machine.rbr_slots)
    for now, _, name, r in sorted(requests, key=lambda q: q[:3]):
        answer = table.request(now, r.src, r.dst, r.start, r.duration, r.bandwidth)
        assert answer != "bad request" and answer.granted, (name, r, answer)
        assert GoldenReservation(0, r.src, r.dst, r.start, r.duration).end == r.end
        if r.direction == "out":
            assert r.end == entries[name].finish
    # Precedence: STDG edges, and barriers against everything before and after them.
    for src, dst, _ in graph.edges():
        assert entries[dst].start >= entries[src].finish, (src, dst)
    # Ordered tensors: any two accesses of one phase, one of them a write, in program
    # order.
    phase, accesses = 0, {}
    for op in graph.ops:
        if isinstance(op, BarrierOp):
            phase += 1
            continue
        for tensor, write in [(t, False) for t in op.inputs] + [(t, True) for t in op.outputs]:
            if graph.tensor[tensor].ordered:
                accesses.setdefault((phase, tensor), []).append((op.name, write))
    for seq in accesses.values():
        for i, (a, wa) in enumerate(seq):
            for b, wb in seq[i + 1:]:
                if a != b and (wa or wb):
                    assert entries[b].start >= entries[a].finish, (a, b)
    barrier_at = None
    for i, op in enumerate(graph.ops):
        if isinstance(op, BarrierOp):
            assert all(entries[o.name].finish <= entries[op.name].start
                       for o in graph.ops[:i])
            barrier_at = entries[op.name].start
        elif barrier_at is not None:
            assert entries[op.name].start >= barrier_at
    assert result.makespan == max((e.finish for e in result.entries), default=0)
    assert result.makespan >= result.critical_path and result.makespan >= result.busiest[1]
    assert result.makespan <= result.max_cycles


def test_random_graphs_keep_every_invariant():
    rng = test_seed()
    for _ in range(25):
        graph = random_graph(rng, rng.randrange(1, 80), barriers=rng.randrange(4),
                             accumulators=rng.randrange(3))
        # Two of an op's own transfers may be live at once: 2 channels and slots at least.
        machine = Machine(mc_channels=rng.choice([2, 4]), rbr_slots=rng.choice([2, 3, 8]),
                          sequencer=rng.choice([None, SequencerTiming(),
                                                SequencerTiming(decoder=0, extra_writes=1)]))
        verify(plan(graph, machine), graph, machine)
    # the sequencer's extra cycles on some entries (the tile's list reads): each entry
    # launched after the one before has had its share, its extra and the gap
    for _ in range(10):
        graph = random_graph(rng, rng.randrange(1, 60), barriers=rng.randrange(3))
        seq = SequencerTiming()
        extra = {}
        for op in graph.ops:
            if not isinstance(op, BarrierOp) and rng.random() < 0.5:
                n = len(seq.entry_writes(op, Machine().kind_of(op)))
                extra[op.name] = tuple(rng.choice([0, 0, 17]) for _ in range(n))
        machine = Machine(mc_channels=4, rbr_slots=8, sequencer=SequencerTiming(extra=extra))
        verify(plan(graph, machine), graph, machine)


def test_the_sequencer_spaces_the_launches():
    """Short ops back to back: the sequencer's issue, not the blocks, sets the pace; the
    plan is at or above its bound and names it."""
    tensors = [Tensor(f"t{i}", (8, 8), "bf16") for i in range(41)]
    ops = [DecodeOp(name=f"d{i}", op_type="elementwise", inputs=(f"t{i}",),
                    outputs=(f"t{i + 1}",), tile_shape=(1, 64), latency_bound=100_000)
           for i in range(0, 40, 2)]
    graph = Graph(tuple(tensors), tuple(ops))
    seq = SequencerTiming()
    machine = Machine(sequencer=seq)
    result = plan(graph, machine)
    verify(result, graph, machine)
    issue = seq.issue(19, 3)
    assert result.busiest == ("sequencer", 20 * issue)
    starts = sorted(e.start for e in result.entries)
    assert starts[0] == issue and all(b - a >= issue for a, b in zip(starts, starts[1:],
                                                                      strict=False))
    plain = plan(graph, Machine())
    assert result.makespan > plain.makespan


def test_two_instances_of_a_block():
    rng = test_seed()
    machine = Machine(blocks=(Block("ma0", "ma", (1, 0)), Block("ma1", "ma", (1, 1)),
                              Block("va0", "va", (0, 1)), Block("cme0", "cme", (2, 1))),
                      mesh=(3, 2))
    graph = random_graph(rng, 60, barriers=1)
    result = plan(graph, machine)
    verify(result, graph, machine)
    assert {e.block for e in result.entries if e.block and e.block.startswith("ma")} == {
        "ma0", "ma1"}


def test_deterministic():
    rng = test_seed()
    graph = random_graph(rng, 120, barriers=2)
    text = plan(graph, Machine()).to_json(graph)
    assert plan(graph, Machine()).to_json(graph) == text
    assert plan(graph_from_json(graph_to_json(graph)), Machine()).to_json(graph) == text
    stamped = json.loads(text)["graph"]
    assert [op["timestamp"] for op in stamped["ops"]] == [
        e["start"] for e in json.loads(text)["entries"]]


def test_deterministic_across_processes(tmp_path):
    """Another interpreter with another hash seed gives the same bytes."""
    path = tmp_path / "g.json"
    path.write_text(graph_to_json(random_graph(test_seed(), 150, barriers=2)))
    digests = set()
    for hash_seed in ("1", "2"):
        out = tmp_path / f"plan{hash_seed}.json"
        subprocess.run([sys.executable, "-m", "plan", str(path), "--json", str(out), "--quiet"],
                       cwd=ROOT, check=True, capture_output=True,
                       env=os.environ | {"PYTHONHASHSEED": hash_seed})
        digests.add(hashlib.sha256(out.read_bytes()).hexdigest())
    assert len(digests) == 1


def vop(cls, name, release=0, size=64, **kwargs):
    """A VA op reading its own input tensor of ``size`` bf16 elements."""
    return cls(name=name, op_type=kwargs.pop("op_type", "norm"), inputs=(f"{name}_in",),
               outputs=(f"{name}_out",), latency_bound=100_000,
               dependency=(Dependency(f"{name}_in", "read", release),) if release else (),
               **kwargs)


def graph_of(ops, size=64):
    tensors = []
    for op in ops:
        if not isinstance(op, BarrierOp):
            tensors += [Tensor(t, (size,), "bf16") for t in op.inputs + op.outputs
                        if t not in {x.name for x in tensors}]
    return Graph(tuple(tensors), tuple(ops))


def test_decode_before_prefill_before_cache_migrate():
    machine = Machine(op_blocks={"norm": "va", "migrate": "va"})
    ops = [vop(CacheMigrateOp, "m0", op_type="migrate"), vop(PrefillOp, "p0"),
           vop(DecodeOp, "d0"), vop(PrefillOp, "p1"), vop(CacheMigrateOp, "m1", op_type="migrate"),
           vop(DecodeOp, "d1")]
    graph = graph_of(ops)
    result = plan(graph, machine)
    verify(result, graph, machine)
    order = [e.op for e in sorted(result.entries, key=lambda e: e.start)]
    assert order == ["d0", "d1", "p0", "p1", "m0", "m1"]


def test_cache_migrate_fills_the_gaps():
    """d1 cannot start before cycle 3000 (its offset); the migrate op, placed after both
    decode ops, fits in the gap before d1, the longer prefill op does not."""
    machine = Machine(op_blocks={"norm": "va", "migrate": "va"})
    ops = [vop(DecodeOp, "d0"), vop(DecodeOp, "d1", release=3000),
           vop(PrefillOp, "p0", size=64 * 1024), vop(CacheMigrateOp, "m0", op_type="migrate")]
    tensors = [Tensor(t, (64 * 1024 if t.startswith("p0") else 64,), "bf16")
               for op in ops for t in op.inputs + op.outputs]
    graph = Graph(tuple(tensors), tuple(ops))
    result = plan(graph, machine)
    verify(result, graph, machine)
    d0, d1, p0, m0 = (result.entry(n) for n in ("d0", "d1", "p0", "m0"))
    assert d1.start == 3000
    assert p0.start >= d1.finish          # too long for the gap
    assert d0.finish <= m0.start and m0.finish <= d1.start


def test_rbr_windows_on_a_shared_link_are_folded_in():
    """An MA op and a VA op both read from the MC at once: their windows share the MC's
    injection port, so the second starts when the first's window has passed."""
    t = (Tensor("a", (16, 64), "int8"), Tensor("b", (64, 16), "int8"),
         Tensor("c", (16, 16), "fp32"), Tensor("x", (512,), "bf16"), Tensor("y", (512,), "bf16"))
    ops = (DecodeOp(name="gemm0", op_type="gemm", inputs=("a", "b"), outputs=("c",),
                    precision="int8", tile_shape=(16, 64, 16), latency_bound=10_000),
           DecodeOp(name="norm0", op_type="norm", inputs=("x",), outputs=("y",),
                    latency_bound=10_000))
    graph = Graph(t, ops)
    result = plan(graph, Machine())
    verify(result, graph, Machine())
    first, second = sorted(result.entries, key=lambda e: e.start)
    assert first.start == Machine().rbr_lead                   # its request at cycle 0
    assert second.start == first.start + first.reservations[0].duration


def test_critical_path_and_busiest_bounds():
    """A chain on one block: makespan, critical path and the block's load agree."""
    names = [f"n{i}" for i in range(5)]
    t = tuple(Tensor(f"t{i}", (64,), "bf16") for i in range(6))
    ops = tuple(DecodeOp(name=n, op_type="norm", inputs=(f"t{i}",), outputs=(f"t{i + 1}",),
                         latency_bound=999) for i, n in enumerate(names))
    graph = Graph(t, ops)
    machine = Machine()
    result = plan(graph, machine)
    verify(result, graph, machine)
    total = sum(machine.cycles(op, graph) for op in ops)
    assert result.busiest == ("va", total)
    assert result.critical_path == machine.rbr_lead + total == result.makespan


def test_barrier_orders_phases():
    ops = [vop(DecodeOp, "a"), BarrierOp(name="sync"), vop(CacheMigrateOp, "m", op_type="migrate"),
           vop(DecodeOp, "b")]
    graph = graph_of(ops)
    result = plan(graph, Machine())
    verify(result, graph, Machine())
    assert result.entry("sync").start == result.entry("a").finish
    assert min(result.entry("m").start, result.entry("b").start) >= result.entry("a").finish


def test_infeasible_within_max_cycles():
    graph = random_graph(test_seed(), 40)
    result = plan(graph, Machine())
    assert plan(graph, Machine(), max_cycles=result.makespan).to_json(graph) == \
        result.to_json(graph).replace(f'"max_cycles": {result.max_cycles}',
                                      f'"max_cycles": {result.makespan}')
    with pytest.raises(ScheduleInfeasible) as info:
        plan(graph, Machine(), max_cycles=result.makespan - 1)
    assert str(info.value).startswith("ScheduleInfeasible: No feasible temporal mapping found "
                                      f"within max_cycles={result.makespan - 1}: op ")
    with pytest.raises(ValueError, match="max_cycles must be a positive integer"):
        plan(graph, Machine(), max_cycles=0)


def test_flits_beyond_the_model_are_an_error():
    graph = graph_of([vop(DecodeOp, "big")], size=4096)
    fast = Machine(flit_bytes=1)
    with pytest.raises(IRError, match="op big: its 8192 flits in do not fit in the"):
        plan(graph, fast)


def test_outputs_must_reach_the_mc_by_the_finish():
    """With no setup cycles an op that only writes lasts exactly its flits out, and the
    path back to the MC's ejection port does not fit."""
    t = (Tensor("y", (64,), "bf16"),)
    graph = Graph(t, (DecodeOp(name="fill", op_type="norm", outputs=("y",),
                               latency_bound=999),))
    short = Machine(models=Machine().models | {"va": LinearLatency("va", setup=0)})
    with pytest.raises(IRError, match="op fill: its 8 flits out, 3 cycles behind on the path "
                                      "to the MC, do not fit in its 8 cycles"):
        plan(graph, short)
    result = plan(graph, Machine())
    verify(result, graph, Machine())


def test_too_few_slots_or_channels_is_infeasible():
    """The input and output reservations of a short op are live at once: one RBR slot
    (or, when the transfers overlap, one MC channel) can never hold both."""
    graph = graph_of([vop(DecodeOp, "d0")], size=60)
    short = Machine().models | {"va": LinearLatency("va", setup=0)}
    with pytest.raises(ScheduleInfeasible, match="op d0's reservations are live at once and "
                                                 "the RBR table has 1 slot"):
        plan(graph, Machine(rbr_slots=1, models=short))
    with pytest.raises(ScheduleInfeasible, match="op d0's transfers overlap and the MC has 1 "
                                                 "channel"):
        plan(graph, Machine(mc_channels=1, models=short))
    two = Machine(mc_channels=2, rbr_slots=2, models=short)
    verify(plan(graph, two), graph, two)


def test_plan_json_and_table():
    graph = graph_of([vop(DecodeOp, "d0"), BarrierOp(name="sync"), vop(PrefillOp, "p0")])
    result = plan(graph, Machine())
    obj = json.loads(result.to_json(graph))
    assert obj["format"] == "v4hw-dstp-plan" and obj["version"] == 2
    assert obj["makespan"] == result.makespan
    assert graph_from_json(json.dumps(obj["graph"])) == result.stamped_graph(graph)
    lines = result.table().splitlines()
    assert lines[0].split() == ["op", "kind", "block", "start", "finish", "bound"]
    assert lines[1].split() == ["d0", "decode", "va0", str(result.entry("d0").start),
                                str(result.entry("d0").finish), "100000"]
    assert lines[-1] == result.summary()


@pytest.mark.parametrize("sequencer", [None, SequencerTiming(), SequencerTiming(extra={})],
                         ids=["host", "even", "one-after-the-other"])
def test_plan_json_round_trip(sequencer):
    rng = test_seed()
    graph = random_graph(rng, 50, barriers=2)
    result = plan(graph, Machine(sequencer=sequencer))
    assert all(bool(e.launches) == (sequencer is not None and e.block is not None)
               for e in result.entries)
    text = result.to_json(graph)
    back, stamped = plan_from_json(text)
    assert back == result and stamped == result.stamped_graph(graph)
    assert back.to_json(stamped) == text
    # a version 1 file (no launches) still reads
    old = json.loads(text)
    old["version"] = 1
    for e in old["entries"]:
        del e["launches"]
    assert plan_from_json(json.dumps(old))[0].entries[0].launches == ()


def _edit_plan(edit):
    graph = graph_of([vop(DecodeOp, "d0"), BarrierOp(name="sync"), vop(PrefillOp, "p0")])
    obj = json.loads(plan(graph, Machine()).to_json(graph))
    edit(obj)
    return json.dumps(obj)


@pytest.mark.parametrize("edit, message", [
    (lambda o: o.update(format="gantt"), "plan.format: expected 'v4hw-dstp-plan'"),
    (lambda o: o.update(version=0), "plan.version: this reader knows versions 1 and 2"),
    (lambda o: o["entries"][0].update(launches=[o["entries"][0]["finish"]]),
     "plan.entries[0].launches: a launch at or after the finish"),
    (lambda o: o["entries"][0].update(launches=[-1]), "plan.entries[0].launches"),
    (lambda o: o["entries"].pop(), "plan.entries: the entries' ops are not the graph's ops"),
    (lambda o: o["entries"][0].update(start=o["entries"][0]["start"] + 1),
     "plan.entries[0].start: "),
    (lambda o: o["entries"][2].update(bound=7), "plan.entries[2].bound: 7 but the graph's op p0"),
    (lambda o: o["entries"][0].update(finish=0), "plan.entries[0].finish: expected an integer"),
    (lambda o: o.update(makespan=1), "plan.makespan: 1 is not the latest finish"),
    (lambda o: o["entries"][0]["reservations"][0].update(direction="up"),
     "plan.entries[0].reservations[0].direction: expected 'in' or 'out'"),
    (lambda o: o["entries"][0]["reservations"][0].update(src=[0]),
     "plan.entries[0].reservations[0].src: expected [x, y]"),
    (lambda o: o["entries"][0]["channels"][0].__setitem__(2, 0),
     "plan.entries[0].channels[0]: expected [channel, start, end]"),
    (lambda o: o["graph"]["ops"][0].update(precision="fp4"), "plan.graph: op d0: precision"),
    (lambda o: o["lower_bounds"].pop("critical_path"),
     "plan.lower_bounds: missing field 'critical_path'"),
])
def test_plan_reader_rejects_malformed_input(edit, message):
    with pytest.raises(IRFormatError) as info:
        plan_from_json(_edit_plan(edit))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_timeline_against_a_cycle_set():
    """Timeline.fit / add against a plain set of busy cycles, on random intervals."""
    rng = test_seed()
    line, busy = Timeline(), set()
    for _ in range(300):
        t, d = rng.randrange(400), rng.randrange(1, 12)
        fit = line.fit(t, d)
        want = t
        while any(c in busy for c in range(want, want + d)):
            want += 1
        assert fit == want
        if rng.random() < 0.7:
            line.add(fit, d)
            busy.update(range(fit, fit + d))
    covered = {c for s, e in line.intervals() for c in range(s, e)}
    assert covered == busy
    # Touching intervals are merged: no interval ends where the next starts.
    assert all(e < s for (_, e), (s, _) in zip(line.intervals(), line.intervals()[1:],
                                              strict=False))


def test_empty_graph():
    result = plan(Graph((), ()), Machine())
    assert result.entries == () and result.makespan == 0 == result.lower_bound


def test_a_busy_instance_does_not_make_the_plan_infeasible():
    """Two GEMMs and two MAs: with max_cycles = the makespan, the second GEMM does not fit
    on the first MA but does on the second."""
    machine = Machine(blocks=(Block("ma0", "ma", (1, 0)), Block("ma1", "ma", (0, 1)),
                              Block("va0", "va", (1, 1))), mesh=(2, 2))
    t, ops = [], []
    for i in range(2):
        t += [Tensor(f"a{i}", (16, 64), "int8"), Tensor(f"b{i}", (64, 16), "int8"),
              Tensor(f"c{i}", (16, 16), "fp32")]
        ops.append(DecodeOp(name=f"g{i}", op_type="gemm", inputs=(f"a{i}", f"b{i}"),
                            outputs=(f"c{i}",), precision="int8", tile_shape=(16, 64, 16),
                            latency_bound=10_000))
    graph = Graph(tuple(t), tuple(ops))
    result = plan(graph, machine)
    assert {result.entry("g0").block, result.entry("g1").block} == {"ma0", "ma1"}
    tight = plan(graph, machine, max_cycles=result.makespan)
    verify(tight, graph, machine)
    assert tight.makespan == result.makespan


def test_traffic_sizes_the_transfers():
    """A GEMM on a 16x64 and a 64x16 corner of larger int8 tensors: its transfers are
    its traffic, not the tensors' sizes (which would not fit in the MA's cycles)."""
    t = (Tensor("a", (128, 128), "int8"), Tensor("b", (128, 128), "int8"),
         Tensor("c", (128, 128), "fp32"))
    kwargs = dict(name="corner", op_type="gemm", inputs=("a", "b"), outputs=("c",),
                  precision="int8", tile_shape=(16, 64, 16), latency_bound=10_000)
    with pytest.raises(IRError, match="op corner: its 2048 flits in do not fit"):
        plan(Graph(t, (DecodeOp(**kwargs),)), Machine())
    graph = Graph(t, (DecodeOp(**kwargs, traffic=(16 * 64 + 64 * 16, 16 * 16 * 4)),))
    result = plan(graph, Machine())
    verify(result, graph, Machine())
    assert [r.duration for r in result.entry("corner").reservations] == [128, 64]
