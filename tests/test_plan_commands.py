"""The sequencer's command list made from a plan (plan/commands.py): the byte format both
ways, the register writes against the host runtime's, the dependencies against the
graph, every entry launched on time by the sequencer's rules, the completion log's
format, and ``v4hw plan --commands``."""

import pytest

from hdl.ma import regmap as ma_regmap
from hdl.tile import migrate_regmap
from hdl.va import regmap as va_regmap
from plan import cli_main
from plan.commands import (
    CommandListError,
    Entry,
    Record,
    command_list,
    decode_command_list,
    decode_log,
    encode_command_list,
    encode_log,
    preset_command_list,
    register_map,
)
from plan.ir import BarrierOp
from plan.lower import machine_for
from plan.machine import SequencerTiming
from sim import tile_runtime as rt
from sim.regs import Registers
from sim.seed import test_seed
from spec import sequencer as fmt
from spec.sequencer import RecordFlag
from spec.tile import TileBlock


@pytest.fixture(scope="module")
def notes():
    return preset_command_list("notes")


@pytest.fixture(scope="module")
def dsv4():
    return preset_command_list("deepseek-v4")


def test_json_maps_are_the_generated_ones():
    for target, module in ((TileBlock.MA, ma_regmap), (TileBlock.VA, va_regmap),
                           (TileBlock.MIGRATE, migrate_regmap)):
        regs = register_map(target)
        assert {r["name"]: r["offset"] for r in module.REGISTERS} == \
            {name: r["offset"] for name, r in regs.registers.items()}


def test_round_trip(notes):
    entries, *_ = notes
    data = encode_command_list(entries)
    assert decode_command_list(data) == entries
    words = len(data) // 4
    assert words == fmt.HEADER_WORDS + sum(2 + len(e.deps) + 2 * len(e.writes) for e in entries)


def _items(result, graph, programs):
    """``(planned cycle, op index, repetition)`` of every entry, in the list's order
    (planned cycle, program order, repetition): the plan's launches, or the op's cycles
    split evenly when it has none."""
    plans = {e.op: e for e in result.entries}
    ops = [op for op in graph.ops if not isinstance(op, BarrierOp)]
    cmds = [cmd for prog in programs for cmd in prog.commands]
    reps = [1 if c.block == "ma" else c.repeat for c in cmds]

    def launch(op, r, n):
        e = plans[op.name]
        if e.launches:
            assert len(e.launches) == n
            return e.launches[r]
        return e.start + r * (e.finish - e.start) // n

    items = sorted((launch(op, r, n), i, r)
                   for i, (op, n) in enumerate(zip(ops, reps, strict=True)) for r in range(n))
    return items, ops


def test_writes_are_the_host_runtimes(notes):
    """Replaying each target's writes gives, at every START, the register values the host
    runtime writes for that command and repetition (sim/tile_runtime.py's encoding)."""
    entries, result, graph, programs = notes
    ma, va = Registers(None, ma_regmap), Registers(None, va_regmap)
    cmds = [(prog, cmd) for prog in programs for cmd in prog.commands]
    lay = rt.layout(programs[-1])
    items, _ = _items(result, graph, programs)
    assert len(items) == len(entries)
    state = {TileBlock.MA: {}, TileBlock.VA: {}}
    for e, (_, i, r) in zip(entries, items, strict=True):
        prog, cmd = cmds[i]
        regs = ma if cmd.block == "ma" else va
        assert e.target == (TileBlock.MA if cmd.block == "ma" else TileBlock.VA)
        held = state[TileBlock(e.target)]
        if e.target == TileBlock.MA and not held:
            tat = rt.tat_register_writes(ma, rt.tat_entries(lay))
            assert [(ma.offset(n), v) for n, v in tat] == list(e.writes[:len(tat)])
        for offset, value in e.writes[:-1]:
            held[offset] = value
        assert e.writes[-1] == (regs.offset("START"), 1)
        if cmd.block == "ma":
            want = rt.ma_register_writes(ma, prog, cmd)
        else:
            want = rt.va_register_writes(va, rt.va_commands(prog, cmd, lay)[r])
        assert {regs.offset(n): held[regs.offset(n)] for n, _ in want} == \
            {regs.offset(n): v for n, v in want}, f"command {i} repetition {r}"


def _implied(entries):
    """For every entry, ``{target: the latest entry of it that has ended}`` at its
    launch (its dependencies, theirs, and every earlier entry of the same target)."""
    implied = []
    for e in entries:
        known = {}
        for index, target in e.deps:
            for t, i in list(implied[index].items()) + [(target, index)]:
                known[t] = max(known.get(t, -1), i)
        implied.append(known)
    return implied


def test_dependencies_follow_the_graph(notes):
    entries, result, graph, programs = notes
    items, ops = _items(result, graph, programs)
    assert [e.planned for e in entries] == [p for p, _, _ in items]
    first, last = {}, {}
    for index, (_, i, _) in enumerate(items):
        first.setdefault(ops[i].name, index)
        last[ops[i].name] = index
    implied = _implied(entries)
    previous = {}
    for index, e in enumerate(entries):
        assert all(i < index for i, _ in e.deps)
        assert len({t for _, t in e.deps}) == len(e.deps)      # one per target
        if e.target in previous:
            assert (previous[e.target], e.target) in e.deps
        previous[e.target] = index
    edges = graph.edges()
    assert edges
    for src, dst, _ in edges:
        p, s = last[src], first[dst]
        assert implied[s].get(entries[p].target, -1) >= p, (src, dst)


def test_barriers_order_the_layers(dsv4):
    """deepseek-v4's three layers: every op after a barrier waits (through its
    dependencies) for every op before it."""
    entries, result, graph, programs = dsv4
    items, ops = _items(result, graph, programs)
    first, last = {}, {}
    for index, (_, i, _) in enumerate(items):
        first.setdefault(ops[i].name, index)
        last[ops[i].name] = index
    implied = _implied(entries)
    before, barriers = [], 0
    for op in graph.ops:
        if isinstance(op, BarrierOp):
            barriers += 1
            ends = {}
            for name in before:
                t = entries[last[name]].target
                ends[t] = max(ends.get(t, -1), last[name])
            continue
        if barriers:
            for t, index in ends.items():
                assert implied[first[op.name]].get(t, -1) >= index, op.name
        before.append(op.name)
    assert barriers == 2
    assert decode_command_list(encode_command_list(entries)) == entries


def replay(entries, result, graph, programs, timing):
    """Launch cycles of the list by the sequencer's rules (docs/tile/sequencer.md), each
    command taking its share of its op's model cycles: entry i is armed at the latest of
    its planned cycle and its issue (7 + deps + write cycles · (writes − 1)) after the
    launch of entry i − 1, and launches once every dependency's and its target's previous
    command's end has been seen (2 + decoder + d cycles after their launch) a cycle
    earlier. Also checks each entry's writes and dependencies within the planner's
    count."""
    items, ops = _items(result, graph, programs)
    machine = machine_for()
    kinds = len({b.kind for b in machine.blocks})
    seen, last_on, launches, previous = [], {}, [], None
    for e, (_, i, r) in zip(entries, items, strict=True):
        op = ops[i]
        bound = timing.entry_writes(op, machine.kind_of(op))
        assert len(e.writes) <= bound[r] and len(e.deps) <= (kinds if r == 0 else 1)
        issue = 7 + len(e.deps) + timing.write_cycles * (len(e.writes) + timing.extra_writes
                                                         - 1)
        armed = e.planned if previous is None else max(e.planned, previous + issue)
        waits = [seen[j] + 1 for j, _ in e.deps]
        if e.target in last_on:
            waits.append(seen[last_on[e.target]] + 1)
        launch = max([armed] + waits)
        d = -(-machine.cycles(op, graph) // len(bound))
        seen.append(launch + 2 + timing.decoder + d)
        last_on[e.target], previous = len(launches), launch
        launches.append(launch)
    return launches


@pytest.mark.parametrize("timing", [None, SequencerTiming(decoder=0, extra_writes=1)],
                         ids=["tile", "unit-bench"])
def test_every_entry_launches_on_time(notes, timing):
    """Planned with the sequencer's timing (the tile's: through the control decoder; the
    unit bench's: no decoder, a DURATION write in every entry), every entry of the
    notes step's list can launch at its planned cycle."""
    entries, result, graph, programs = (notes if timing is None else
                                        preset_command_list("notes", sequencer=timing))
    launches = replay(entries, result, graph, programs, timing or SequencerTiming())
    assert launches == [e.planned for e in entries]
    assert result.makespan >= max(result.critical_path, result.busiest[1])


def test_every_deepseek_v4_entry_launches_on_time(dsv4):
    entries, result, graph, programs = dsv4
    launches = replay(entries, result, graph, programs, SequencerTiming())
    late = sum(1 for a, e in zip(launches, entries, strict=True) if a != e.planned)
    assert late == 0, f"{late} of {len(entries)} entries late"


def test_origin_shifts_every_planned_cycle(notes):
    entries, result, graph, programs = notes
    shifted = command_list(programs, graph, result, origin=100)
    assert [e.planned for e in shifted] == [e.planned + 100 for e in entries]
    assert [e.writes for e in shifted] == [e.writes for e in entries]


def _entry(target=TileBlock.VA, planned=0, deps=(), writes=((0x200C, 1),)):
    return Entry(int(target), planned, deps, writes)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: b"\0" * 4 + d[4:], "not a command list"),
    (lambda d: d[:4] + (2).to_bytes(4, "little") + d[8:], "version 2"),
    (lambda d: d[:-4], "whole words|entry words"),
    (lambda d: d[:12] + (99).to_bytes(4, "little") + d[16:], "entry words"),
    (lambda d: d[:16] + (0x80000002).to_bytes(4, "little") + d[20:], "reserved bits"),
])
def test_reader_refuses_a_bad_list(mutate, message):
    data = encode_command_list([_entry(), _entry(planned=5, deps=((0, TileBlock.VA),))])
    assert decode_command_list(data)
    with pytest.raises(CommandListError, match=message):
        decode_command_list(mutate(data))


def test_writer_refuses_a_bad_entry():
    with pytest.raises(CommandListError, match="not an earlier one"):
        encode_command_list([_entry(deps=((0, TileBlock.VA),))])
    with pytest.raises(CommandListError, match="names target"):
        encode_command_list([_entry(), _entry(deps=((0, TileBlock.MA),))])
    with pytest.raises(CommandListError, match="writes"):
        encode_command_list([_entry(writes=())])


def test_log_round_trip():
    rng = test_seed()
    records = {}
    for i in rng.sample(range(40), 25):
        records[i] = Record(i, RecordFlag(RecordFlag.VALID | rng.choice([0, 2, 6, 10, 16, 32])),
                            rng.randrange(256), rng.randrange(1 << 32), rng.randrange(1 << 64),
                            rng.randrange(1 << 64), rng.randrange(1 << 64))
    data = encode_log(records, 40)
    assert len(data) == 40 * fmt.RECORD_BYTES
    assert decode_log(data, 40) == records
    with pytest.raises(CommandListError, match="holds the record of entry"):
        decode_log(data[fmt.RECORD_BYTES:] + bytes(fmt.RECORD_BYTES), 40)


def test_cli_writes_the_list(tmp_path, notes, capsys):
    out = tmp_path / "notes.bin"
    assert cli_main(["--preset", "notes", "--quiet", "--commands", str(out)]) == 0
    assert decode_command_list(out.read_bytes()) == notes[0]
    assert f"command list: {len(notes[0])} entries" in capsys.readouterr().out
    assert cli_main(["--synthetic", "4", "--commands", str(out)]) == 2
    assert "--commands needs --preset" in capsys.readouterr().err


def test_cli_plans_for_the_small_tile(tmp_path, capsys):
    """``--ma-p`` / ``--va-lanes``: the list of the tile the tests build (P=4, L=8)."""
    from golden.program import BlockConfig

    out = tmp_path / "small.bin"
    assert cli_main(["--preset", "notes", "--quiet", "--commands", str(out), "--origin", "400",
                     "--ma-p", "4", "--va-lanes", "8"]) == 0
    small = preset_command_list("notes", BlockConfig(p=4, lanes=8), origin=400)[0]
    assert out.read_bytes() == encode_command_list(small)
    assert small != preset_command_list("notes", origin=400)[0]
    capsys.readouterr()
    assert cli_main(["--preset", "notes", "--va-lanes", "6"]) == 2
    assert "power of two" in capsys.readouterr().err


def test_a_list_of_the_first_commands(notes):
    """``commands=N``: the first N commands of the step planned alone; their entries are
    the whole list's for those commands (the same START values)."""
    entries, plan, graph, programs = preset_command_list("notes", commands=12)
    assert sum(len(p.commands) for p in programs) == 12
    assert list(programs[0].commands) == list(notes[3][0].commands[:12])
    full = notes[0]
    reps = sum(1 if c.block == "ma" else c.repeat for c in programs[0].commands)
    assert len(entries) == reps and len(entries) < len(full)
    assert {e.target for e in entries} <= {e.target for e in full}
    with pytest.raises(ValueError, match="commands must be a count >= 1"):
        preset_command_list("notes", commands=0)
