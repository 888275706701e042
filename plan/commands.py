"""The sequencer's command list from a plan, and its completion log
(docs/tile/sequencer.md; the word layout is :mod:`spec.sequencer`'s).

A plan (:mod:`plan.dstp`) says when each command of an op program starts; the tile's
command sequencer (``hdl.tile.sequencer``) reads a *command list* from memory and
launches each entry at its planned cycle. :func:`command_list` makes that list from the
programs, their graph and the plan:

- one entry per START: an MA command is one, a VA command of ``repeat`` r is r,
  repetition k at the plan's launch for it (:attr:`plan.dstp.Entry.launches`; a plan
  without them spreads the repetitions evenly, ``start + k·(finish − start) // r``);
- the entry's register writes are the ones the host runtime makes for the command (the
  same encoding, from the blocks' register maps), less the registers that already hold
  the value from an earlier entry on the same target, then START; the first MA entry
  also programs the MA's TAT (one entry mapping the programs' logical 0.. to
  ``phys_base``, as the host runtime does; the VA gets physical addresses);
- entries are in planned order (ties: program order), and each depends on the latest
  entry of every target that must have ended before it: its STDG predecessors', the
  ops' before the last barrier, and its target's previous entry, one dependency per
  target at most (a target ends its commands in list order, so the latest implies the
  others).

Register offsets and fields come from the JSON register maps generated from each block's
SystemRDL (``docs/<block>/regmap.json``; ``plan`` may not import ``hdl``), read by
:class:`RegisterMap`. :func:`encode_command_list` / :func:`decode_command_list` and
:func:`encode_log` / :func:`decode_log` are the byte formats; the decoders check
everything and raise :class:`CommandListError` (a ValueError, one line).
"""

import json
from bisect import bisect_right
from dataclasses import dataclass, replace
from pathlib import Path

from spec import sequencer as fmt
from spec.memory import PAGE_BYTES as _PAGE
from spec.memory import tat_region_size as _region_size
from spec.sequencer import RecordFlag
from spec.tile import TileBlock

from .ir import BarrierOp

__all__ = ["CommandListError", "RegisterMap", "register_map", "Entry", "Record",
           "encode_command_list", "decode_command_list", "encode_log", "decode_log",
           "ma_register_writes", "va_register_writes", "tat_register_writes",
           "command_list", "entry_commands", "preset_command_list", "PHYS_BASE",
           "REGMAP_JSON", "list_read_entries", "with_list_reads", "LIST_BURST_BEATS",
           "LIST_READ_CYCLES"]

PHYS_BASE = 1 << 32
"""Physical byte address of the programs' address 0 (the host runtime's default)."""
REGMAP_JSON = {TileBlock.MA: "docs/ma/regmap.json", TileBlock.VA: "docs/va/regmap.json",
               TileBlock.MIGRATE: "docs/tile/migrate/regmap.json"}
"""The generated JSON register map of every block a command list may target."""
_ROOT = Path(__file__).resolve().parent.parent


class CommandListError(ValueError):
    """A command list or a completion log that does not follow the format."""


class RegisterMap:
    """A block's registers by name, from its generated JSON map: ``offset(name)`` and
    ``encode(name, **fields)`` (the other fields at their reset value; a value that does
    not fit is a ValueError)."""

    def __init__(self, registers):
        self.registers = {r["name"]: r for r in registers}

    def register(self, name):
        try:
            return self.registers[name]
        except KeyError:
            raise KeyError(f"no register named {name!r}") from None

    def offset(self, name):
        return self.register(name)["offset"]

    def encode(self, name, **fields):
        reg = self.register(name)
        values = {f["name"]: f["reset"] or 0 for f in reg["fields"]}
        for key, value in fields.items():
            desc = next((f for f in reg["fields"] if f["name"] == key.upper()), None)
            if desc is None:
                raise KeyError(f"register {name} has no field {key!r}")
            if not 0 <= int(value) < 1 << desc["width"]:
                raise ValueError(f"{name}.{desc['name']} is {desc['width']} bits wide; "
                                 f"{value} does not fit")
            values[desc["name"]] = int(value)
        word = 0
        for f in reg["fields"]:
            word |= values[f["name"]] << f["lsb"]
        return word


_MAPS = {}


def register_map(target):
    """The :class:`RegisterMap` of window ``target`` (:data:`REGMAP_JSON`)."""
    target = TileBlock(target)
    if target not in _MAPS:
        path = _ROOT / REGMAP_JSON[target]
        try:
            _MAPS[target] = RegisterMap(json.loads(path.read_text(encoding="utf-8"))["registers"])
        except OSError:
            raise OSError(f"the register map {REGMAP_JSON[target]} is not there (the command "
                          "list needs the repository's generated maps)") from None
    return _MAPS[target]


# ---- the byte formats ----------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One command of the list: ``target`` (a ``spec.tile.TileBlock`` window),
    ``planned`` (cycles after the run's T0), ``deps`` (``(index, target)`` of earlier
    entries), ``writes`` (``(offset, value)``, the last one START)."""
    target: int
    planned: int
    deps: tuple
    writes: tuple


def encode_command_list(entries):
    """The list as bytes (header and entries, little-endian words)."""
    words = []
    for i, e in enumerate(entries):
        _check_entry(i, e, entries)
        words += [fmt.entry_word(e.target, len(e.deps), len(e.writes)), e.planned]
        words += [fmt.dep_word(index, target) for index, target in e.deps]
        for offset, value in e.writes:
            words += [offset, value]
    header = [fmt.MAGIC, fmt.VERSION, len(entries), len(words)]
    return b"".join(w.to_bytes(4, "little") for w in header + words)


def _check_entry(i, e, entries):
    where = f"entry {i}"
    if e.target not in range(1 << fmt.TARGET_BITS):
        raise CommandListError(f"{where}: target {e.target} is not a window")
    if not 0 <= e.planned < 1 << 32:
        raise CommandListError(f"{where}: planned cycle {e.planned} is not a 32-bit count")
    if not 1 <= len(e.writes) <= fmt.MAX_WRITES:
        raise CommandListError(f"{where}: {len(e.writes)} writes, not 1..{fmt.MAX_WRITES}")
    if len(e.deps) > fmt.MAX_NDEPS:
        raise CommandListError(f"{where}: {len(e.deps)} dependencies, more than "
                               f"{fmt.MAX_NDEPS}")
    for index, target in e.deps:
        if not 0 <= index < i:
            raise CommandListError(f"{where}: dependency on entry {index}, not an earlier one")
        if entries[index].target != target:
            raise CommandListError(f"{where}: dependency on entry {index} names target "
                                   f"{target}, and that entry's is {entries[index].target}")
    for offset, value in e.writes:
        if not (0 <= offset < 1 << 16 and offset % 4 == 0 and 0 <= value < 1 << 32):
            raise CommandListError(f"{where}: write ({offset:#x}, {value:#x}) is not an "
                                   "aligned 16-bit offset and a 32-bit value")


def decode_command_list(data):
    """The entries of a list (:func:`encode_command_list`'s bytes), every field checked."""
    if len(data) % 4 or len(data) < 4 * fmt.HEADER_WORDS:
        raise CommandListError(f"a command list is whole words and a {fmt.HEADER_WORDS}-word "
                               f"header, not {len(data)} bytes")
    words = [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]
    magic, version, count, total = words[:fmt.HEADER_WORDS]
    if magic != fmt.MAGIC:
        raise CommandListError(f"not a command list (magic {magic:#010x})")
    if version != fmt.VERSION:
        raise CommandListError(f"command list version {version}; this reader knows "
                               f"{fmt.VERSION}")
    body = words[fmt.HEADER_WORDS:]
    if total != len(body):
        raise CommandListError(f"the header says {total} entry words, the list has "
                               f"{len(body)}")
    if count > fmt.MAX_ENTRIES - 1:
        raise CommandListError(f"{count} entries, more than {fmt.MAX_ENTRIES - 1}")
    entries, at = [], 0
    for i in range(count):
        if at + fmt.ENTRY_FIXED_WORDS > len(body):
            raise CommandListError(f"entry {i} is cut short")
        target, ndeps, nwrites, reserved = fmt.split_entry_word(body[at])
        if reserved:
            raise CommandListError(f"entry {i}: reserved bits {reserved:#x} are set")
        planned = body[at + 1]
        at += fmt.ENTRY_FIXED_WORDS
        if at + ndeps + 2 * nwrites > len(body):
            raise CommandListError(f"entry {i} is cut short")
        deps = []
        for w in body[at:at + ndeps]:
            index, dtarget, reserved = fmt.split_dep_word(w)
            if reserved:
                raise CommandListError(f"entry {i}: a dependency's reserved bits are set")
            deps.append((index, dtarget))
        at += ndeps
        writes = tuple((body[at + 2 * k], body[at + 2 * k + 1]) for k in range(nwrites))
        at += 2 * nwrites
        entries.append(Entry(target, planned, tuple(deps), writes))
        _check_entry(i, entries[-1], entries)
    if at != len(body):
        raise CommandListError(f"{len(body) - at} words after the last entry")
    return entries


@dataclass(frozen=True)
class Record:
    """A completion record: ``flags`` (:class:`spec.sequencer.RecordFlag`), ``code``
    (the target's ERROR code), ``late`` cycles, ``launch``, ``done`` and ``ctr``
    (timebase values)."""
    index: int
    flags: RecordFlag
    code: int
    late: int
    launch: int
    done: int
    ctr: int


def encode_log(records, count):
    """A log of ``count`` slots with ``records`` (a dict index -> Record, or a list) in
    theirs; the other slots zero."""
    out = bytearray(fmt.RECORD_BYTES * count)
    for r in (records.values() if isinstance(records, dict) else records):
        words = [fmt.record_word0(r.index, r.flags, r.code), r.late,
                 r.launch & 0xFFFFFFFF, r.launch >> 32, r.done & 0xFFFFFFFF, r.done >> 32,
                 r.ctr & 0xFFFFFFFF, r.ctr >> 32]
        at = fmt.RECORD_BYTES * r.index
        out[at:at + fmt.RECORD_BYTES] = b"".join(w.to_bytes(4, "little") for w in words)
    return bytes(out)


def decode_log(data, count):
    """``{index: Record}`` of the written slots (FLAGS.VALID) of a log of ``count``."""
    if len(data) < fmt.RECORD_BYTES * count:
        raise CommandListError(f"a log of {count} records is {fmt.RECORD_BYTES * count} "
                               f"bytes, not {len(data)}")
    records = {}
    for i in range(count):
        at = fmt.RECORD_BYTES * i
        w = [int.from_bytes(data[at + 4 * k:at + 4 * k + 4], "little")
             for k in range(fmt.RECORD_WORDS)]
        index, flags, code = fmt.split_record_word0(w[0])
        if not flags & RecordFlag.VALID:
            if any(w):
                raise CommandListError(f"log slot {i} is not VALID but not zero")
            continue
        if index != i:
            raise CommandListError(f"log slot {i} holds the record of entry {index}")
        records[i] = Record(index, RecordFlag(flags), code, w[1], w[2] | w[3] << 32,
                            w[4] | w[5] << 32, w[6] | w[7] << 32)
    return records


# ---- register writes of a command (the host runtime's encoding) -----------------------------


def _addr(program, opd, r=0):
    t = program.tensors[opd.tensor]
    return t.addr + (opd.offset + r * opd.step) * t.itemsize


def ma_register_writes(regs, program, cmd):
    """``[(register, value)]`` of MA command ``cmd`` (logical addresses = the program's),
    START excluded."""
    t = program.tensors
    es = {k: t[getattr(cmd, k).tensor].itemsize for k in "abc"}
    mode = int(cmd.mode) | (2 if cmd.b_transposed else 0)
    return [("M", regs.encode("M", value=cmd.m)), ("K", regs.encode("K", value=cmd.k)),
            ("N", regs.encode("N", value=cmd.n)),
            ("MODE", regs.encode("MODE", mode=mode, accumulate=int(cmd.accumulate))),
            ("A_ADDR", regs.encode("A_ADDR", addr=_addr(program, cmd.a))),
            ("B_ADDR", regs.encode("B_ADDR", addr=_addr(program, cmd.b))),
            ("C_ADDR", regs.encode("C_ADDR", addr=_addr(program, cmd.c))),
            ("LDA", regs.encode("LDA", stride=cmd.lda * es["a"])),
            ("LDB", regs.encode("LDB", stride=cmd.ldb * es["b"])),
            ("LDC", regs.encode("LDC", stride=cmd.ldc * es["c"]))]


_VA_ADDRS = ("SRC", "SRC2", "SRC3", "DST", "DST2")


def va_register_writes(regs, program, cmd, r, phys_base):
    """``[(register, value)]`` of repetition ``r`` of VA command ``cmd`` (physical
    addresses: ``phys_base`` + the program's), START excluded."""
    es = program.tensors[cmd.src.tensor].itemsize if cmd.src is not None else 2
    writes = [("OPCODE", regs.encode("OPCODE", op=cmd.op, esize=es.bit_length() - 1,
                                     split_half=int(bool(cmd.split_half)))),
              ("LENGTH", regs.encode("LENGTH", value=cmd.length))]
    for name in _VA_ADDRS:
        opd = getattr(cmd, name.lower())
        a = 0 if opd is None else phys_base + _addr(program, opd, r)
        writes += [(f"{name}_LO", regs.encode(f"{name}_LO", addr=a & 0xFFFFFFFF)),
                   (f"{name}_HI", regs.encode(f"{name}_HI", addr=a >> 32))]
    values = {"STRIDE": cmd.stride * es, "SCALAR": cmd.scalar, "K": cmd.k,
              "INDEX_LIMIT": cmd.index_limit, "ROWS": 0, "ROW_STRIDE": 0}
    return writes + [(name, regs.encode(name, value=v)) for name, v in values.items()]



def tat_register_writes(regs, nbytes, phys_base):
    """The MA's TAT: entry 0 maps logical ``[0, region)`` (the smallest region holding
    ``nbytes``) to ``phys_base``, entries 1..3 invalid."""
    size = _region_size(nbytes)
    if phys_base % (_PAGE << size):
        raise ValueError(f"phys_base {phys_base:#x} is not aligned to the TAT region of "
                         f"{_PAGE << size} bytes")
    writes = []
    for i in range(4):
        valid, base = (1, phys_base) if i == 0 else (0, 0)
        writes += [(f"TAT_LOGIC_{i}", regs.encode(f"TAT_LOGIC_{i}", valid=valid,
                                                   size=size if valid else 0, base=0)),
                   (f"TAT_PHYS_LO_{i}", regs.encode(f"TAT_PHYS_LO_{i}",
                                                     base=(base >> 12) & 0xFFFFF)),
                   (f"TAT_PHYS_HI_{i}", regs.encode(f"TAT_PHYS_HI_{i}", base=base >> 32))]
    return writes


# ---- from a plan ---------------------------------------------------------------------------


def _predecessors(graph):
    """``{op name: [earlier op names it waits for]}`` (STDG edges; an op after a barrier
    waits for every op before it, given as the barrier's name)."""
    preds = {op.name: [] for op in graph.ops}
    for src, dst, _ in graph.edges():
        preds[dst].append(src)
    last_barrier = None
    for op in graph.ops:
        if isinstance(op, BarrierOp):
            last_barrier = op.name
        elif last_barrier is not None:
            preds[op.name].append(last_barrier)
    return preds


def _planned_items(ops, commands, result, origin):
    """One item per START, in the list's order: (planned, program order, repetition, op)."""
    timing = {e.op: (e.start, e.finish, e.launches) for e in result.entries}
    items = []
    for order, (op, (_, cmd)) in enumerate(zip(ops, commands, strict=True)):
        start, finish, launches = timing[op.name]
        reps = 1 if cmd.block == "ma" else cmd.repeat
        for r in range(reps):
            at = launches[r] if launches else start + r * (finish - start) // reps
            items.append((origin + at, order, r, op))
    items.sort(key=lambda it: it[:3])
    return items


def entry_commands(programs, graph, result):
    """``(command index, repetition, op)`` of each entry of :func:`command_list`'s list,
    in its order (the index counts the commands of every program in turn)."""
    commands = [(prog, cmd) for prog in programs for cmd in prog.commands]
    ops = [op for op in graph.ops if not isinstance(op, BarrierOp)]
    return [(order, r, op) for _, order, r, op in _planned_items(ops, commands, result, 0)]


def command_list(programs, graph, result, *, phys_base=PHYS_BASE, origin=0):
    """The :class:`Entry` list of ``programs`` (a preset's layers, in order; the graph's
    non-barrier ops are their commands in order, :func:`plan.lower.lower_programs`) as
    planned by ``result`` (:class:`plan.dstp.Plan`); ``origin`` (cycles) is added to
    every planned cycle."""
    commands = [(prog, cmd) for prog in programs for cmd in prog.commands]
    ops = [op for op in graph.ops if not isinstance(op, BarrierOp)]
    if len(ops) != len(commands):
        raise ValueError(f"the graph has {len(ops)} ops for {len(commands)} commands")
    if [e.op for e in result.entries] != [op.name for op in graph.ops]:
        raise ValueError("the plan is not of this graph")
    items = [(planned, order, r, op.name, *commands[order])
             for planned, order, r, op in _planned_items(ops, commands, result, origin)]
    nbytes = max(prog.memory_bytes for prog in programs)
    reps_left = {op.name: (1 if cmd.block == "ma" else cmd.repeat)
                 for op, (_, cmd) in zip(ops, commands, strict=True)}
    # a barrier is passed once every op before it has all its entries in the list
    pending, after = {}, {}
    seen = []
    for op in graph.ops:
        if isinstance(op, BarrierOp):
            pending[op.name] = len(seen)
            for name in seen:
                after.setdefault(name, []).append(op.name)
        else:
            seen.append(op.name)
    shadow = {TileBlock.MA: {}, TileBlock.VA: {}}
    last_of_op, last_on, passed = {}, {}, {}
    for b, n in pending.items():
        if n == 0:
            passed[b] = {}
    preds = _predecessors(graph)
    entries = []
    for planned, _, r, name, prog, cmd in items:
        target = TileBlock.MA if cmd.block == "ma" else TileBlock.VA
        regs = register_map(target)
        if cmd.block == "ma":
            named = ma_register_writes(regs, prog, cmd)
            if not shadow[target]:
                named = tat_register_writes(regs, nbytes, phys_base) + named
        else:
            named = va_register_writes(regs, prog, cmd, r, phys_base)
        writes = []
        for reg, value in named:
            offset = regs.offset(reg)
            if shadow[target].get(offset) != value:
                writes.append((offset, value))
                shadow[target][offset] = value
        writes.append((regs.offset("START"), regs.encode("START", start=1)))
        need = {target: last_on[target]} if target in last_on else {}
        if r == 0:
            for p in preds[name]:
                if p in passed:
                    found = passed[p]
                elif p in last_of_op and reps_left[p] == 0:
                    found = {entries[last_of_op[p]].target: last_of_op[p]}
                else:
                    raise ValueError(f"op {name} is planned before its predecessor {p} ends")
                for t, index in found.items():
                    need[t] = max(need.get(t, -1), index)
        index = len(entries)
        entries.append(Entry(int(target), planned,
                             tuple(sorted((i, int(t)) for t, i in need.items())), tuple(writes)))
        last_of_op[name] = index
        last_on[target] = index
        reps_left[name] -= 1
        if reps_left[name] == 0:
            for b in after.get(name, ()):
                pending[b] -= 1
                if pending[b] == 0:
                    passed[b] = dict(last_on)
    return entries


# ---- the sequencer's own list reads on the tile --------------------------------------------

LIST_BURST_BEATS = 16
"""The sequencer reads its list in bursts of 16 beats into a buffer of 32
(``hdl/tile/sequencer.py``, ``_ListReader``): two at START, then one whenever 16 beats of
the buffer are free."""
LIST_READ_CYCLES = LIST_BURST_BEATS + 1
"""What a list read costs a command whose reads it meets on the tile's memory path: its
16 beats and its answer's head flit."""


def list_read_entries(entries, bus_bytes):
    """Indices of the entries whose command a list read may meet on the tile: the
    sequencer asks for burst j + 2 (j >= 1) once it has taken beat 16·j − 1 of the list,
    which it does while it reads the entry holding that beat's last word, after it
    launched the entry before; the read meets the command of one of those two (measured:
    every list read that met a command met one of them)."""
    offsets, at = [], 4 * fmt.HEADER_WORDS
    for e in entries:
        offsets.append(at)
        at += 4 * (fmt.ENTRY_FIXED_WORDS + len(e.deps) + 2 * len(e.writes))
    beats = -(-at // bus_bytes)
    out, j = set(), 1
    while LIST_BURST_BEATS * (j + 1) < beats:
        i = bisect_right(offsets, LIST_BURST_BEATS * j * bus_bytes - 4) - 1
        out |= {i - 1, i} - {-1}
        j += 1
    return sorted(out)


def with_list_reads(programs, graph, machine, *, max_cycles=None, rounds=32):
    """``machine`` with its sequencer timing's ``extra`` giving :data:`LIST_READ_CYCLES`
    to every entry a list read may meet (:func:`list_read_entries`) in the list of its
    own plan: planned, listed and marked until the marks do not change (each round only
    adds marks, so it ends; a ValueError after ``rounds``)."""
    from .dstp import DEFAULT_MAX_CYCLES, plan

    seq = machine.sequencer
    bus = programs[0].config.bus_bits // 8
    counts = {op.name: len(seq.entry_writes(op, machine.kind_of(op)))
              for op in graph.ops if not isinstance(op, BarrierOp)}
    extra = {}
    for _ in range(rounds):
        timed = replace(machine, sequencer=replace(seq, extra=extra))
        result = plan(graph, timed, max_cycles=max_cycles or DEFAULT_MAX_CYCLES)
        items = entry_commands(programs, graph, result)
        marks = {name: list(cycles) for name, cycles in extra.items()}
        for i in list_read_entries(command_list(programs, graph, result), bus):
            _, r, op = items[i]
            marks.setdefault(op.name, [0] * counts[op.name])[r] = LIST_READ_CYCLES
        marks = {name: tuple(cycles) for name, cycles in sorted(marks.items())}
        if marks == extra:
            return timed
        extra = marks
    raise ValueError(f"the list reads' marks still changed after {rounds} plans")


def preset_command_list(preset, config=None, *, origin=0, phys_base=PHYS_BASE,
                        max_cycles=None, sequencer=None, commands=None, tile=True,
                        margins=None):
    """One planned decode step of tile preset ``preset``, planned with the command
    sequencer's timing ``sequencer`` (a :class:`plan.machine.SequencerTiming`, default
    the tile's): ``(entries, plan, graph, programs)``. ``commands``: plan only the step's
    first that many commands (counted over its layers in turn), a shorter list.
    ``tile``: with the tile machine model (:func:`plan.lower.with_tile`; with the tile's
    sequencer timing, the default, its list reads too: :func:`with_list_reads`), else
    the standalone blocks' models. ``margins``: cycles the tile machine model adds to
    every START of a block kind (:func:`plan.lower.with_tile`; default
    :data:`plan.machine.TILE_MARGINS`), e.g. with a reserved command's guard added."""
    from golden.program import BlockConfig, decode_steps

    from .dstp import DEFAULT_MAX_CYCLES, plan
    from .lower import lower_programs, machine_for, with_sequencer, with_tile

    cfg = config or BlockConfig()
    from golden.presets.tile import PRESETS
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; expected one of {sorted(PRESETS)}")
    t = PRESETS[preset].position
    programs = [step for _, step in decode_steps(preset, t, cfg)]
    if commands is not None:
        if not isinstance(commands, int) or commands < 1:
            raise ValueError(f"commands must be a count >= 1, not {commands!r}")
        cut, left = [], commands
        for prog in programs:
            if left > 0:
                cut.append(replace(prog, commands=tuple(prog.commands[:left])))
                left -= len(prog.commands)
        programs = cut
    machine = machine_for(cfg, tile=tile)
    graph = lower_programs(programs, machine, token=t)
    if tile:
        graph, machine = with_tile(machine, programs, graph, margins)
    machine = with_sequencer(machine, programs, graph, sequencer)
    if tile and sequencer is None:
        machine = with_list_reads(programs, graph, machine, max_cycles=max_cycles)
    result = plan(graph, machine, max_cycles=max_cycles or DEFAULT_MAX_CYCLES)
    return command_list(programs, graph, result, phys_base=phys_base, origin=origin), \
        result, graph, programs
