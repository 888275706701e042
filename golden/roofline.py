"""The memory-bound limit of a program: the bytes it must move at least, and the roofline
ratio of a run against it.

**The rule** (docs/tile/roofline.md). The program's commands run on the golden
interpreter with every memory access traced, byte by byte, in program order:

1. **Read once**: every byte of a tensor the program does not allocate for itself (role
   ``weight``, ``const``, ``input`` or ``state``: the weights and constants the commands
   use, the input row, the KV cache and the compressors' pending rows) whose first access
   in the program is a read. Its value was in memory before the program started.
2. **Written once**: every byte the program writes in a tensor whose value outlives it:
   the state tensors (role ``state``) and the tensors named as its outputs.
3. **Nothing else.** A value one command writes and a later one reads (an accumulator,
   a normalised row, an attention head's scores), or that is written and never read,
   could stay on chip under a perfect schedule, so it needs no memory traffic; nor does
   a program's own tensor (role ``act``) read before it is written, whose value is the
   zero it was allocated with (the first expert's add into the MoE's sum). A byte read
   twice, or written twice, counts once.

The counts are exact bytes of what the commands touch, not whole tensors: a decode step
reads the rows of the KV cache its attention reads and the experts its tokens picked,
and the gathers whose addresses come from memory (top-k indices) count the rows those
indices name, since the interpreter runs on the program's own data. Bytes are not rounded
up to bus words. The host's own traffic (loading the weights, reading the MoE's dispatch
back) is outside the program and is not counted.

:func:`traffic` returns the counts (:class:`Traffic`, by tensor and by part of the
program); :meth:`Traffic.bound_cycles` is the required bytes over the bus's bytes a
cycle, rounded up, and :func:`roofline_ratio` that over a run's measured cycles (1.0: the
run is as fast as its bytes allow on that bus). :func:`step_traffic` and
:func:`decode_step_traffic` apply it to one decode step of a tile preset, its layers as
the parts. Pure numpy over :mod:`golden.program`; no hardware or simulator imports.
"""

from dataclasses import dataclass
from math import ceil

import numpy as np

from .program import Machine, Program, decode_step_parts

__all__ = ["Traffic", "traffic", "roofline_ratio", "step_traffic", "decode_step_traffic",
           "DECODE_OUTPUTS", "READ_ROLES"]

READ_ROLES = ("weight", "const", "input", "state")
"""The tensor roles whose bytes a program reads from memory (rule 1)."""

DECODE_OUTPUTS = ("layer output", "layer output (all tokens)")
"""The stage names under which the decode-step generators return a layer's output
(:mod:`golden.program_notes`, :mod:`golden.program_dsv4`)."""

_UNTOUCHED, _READ_FIRST, _WRITTEN_FIRST = 0, 1, 2


@dataclass(frozen=True)
class Traffic:
    """What a program's commands must move, in bytes.

    ``read``: tensor name → bytes of it read once (rule 1); ``written``: tensor name →
    bytes of it written once (rule 2); ``parts``: ``(bytes read, bytes written)`` of each
    part of the program (:func:`traffic`'s ``parts``), a byte counted in the part that
    first read it or last wrote it; ``accessed``: the bytes of every load and every store
    of every command, each time (what a schedule that keeps nothing on chip moves, at
    least ``required``); ``roles``: tensor name → role.
    """
    read: dict
    written: dict
    parts: tuple
    accessed: int
    roles: dict

    @property
    def read_bytes(self):
        return sum(self.read.values())

    @property
    def written_bytes(self):
        return sum(self.written.values())

    @property
    def required(self):
        """The bytes the program must move at least: read once plus written once."""
        return self.read_bytes + self.written_bytes

    def bound_cycles(self, bus_bytes):
        """Cycles the required bytes take at ``bus_bytes`` a cycle, rounded up (one bus
        for reads and writes, as the tile's ``m_axi_gmem`` beats are counted)."""
        if bus_bytes < 1:
            raise ValueError(f"bus_bytes must be >= 1, not {bus_bytes}")
        return ceil(self.required / bus_bytes)

    def by_role(self):
        """``{role: (bytes read, bytes written)}`` (the roles of :class:`golden.program.Tensor`)."""
        out = {}
        for kind, counts in ((0, self.read), (1, self.written)):
            for name, n in counts.items():
                out.setdefault(self.roles[name], [0, 0])[kind] += n
        return {role: tuple(pair) for role, pair in sorted(out.items())}


def roofline_ratio(required_bytes, bus_bytes, cycles):
    """(``required_bytes`` ÷ ``bus_bytes`` a cycle) ÷ ``cycles``: a run's memory-bound
    limit over the cycles it took (at most 1 for a run whose bytes went over that bus)."""
    if bus_bytes < 1 or cycles < 1:
        raise ValueError(f"bus_bytes and cycles must be >= 1, not {bus_bytes} and {cycles}")
    return required_bytes / bus_bytes / cycles


class _Trace:
    """Per byte of the memory: untouched, read first or written first, the part of the
    program that touched it first, whether it was written and the part that wrote it last."""

    def __init__(self, size):
        self.first = np.zeros(size, np.uint8)
        self.first_part = np.zeros(size, np.int32)
        self.written = np.zeros(size, bool)
        self.write_part = np.zeros(size, np.int32)
        self.part = 0
        self.accessed = 0

    def touch(self, where, write):
        """Bytes ``where`` (a slice or an index array) read or written."""
        stop = where.stop if isinstance(where, slice) else int(where.max()) + 1
        if stop > self.first.size:
            raise ValueError(f"an access reaches byte {stop - 1}, beyond the program's memory")
        first = self.first[where]
        self.accessed += first.size
        new = first == _UNTOUCHED
        first[new] = _WRITTEN_FIRST if write else _READ_FIRST
        self.first[where] = first
        part = self.first_part[where]
        part[new] = self.part
        self.first_part[where] = part
        if write:
            self.written[where] = True
            self.write_part[where] = self.part


class _TracedMemory:
    """The interpreter's memory as the VA's golden model uses it (byte slices and nothing
    else: ``golden.va._load`` / ``_store``), every slice traced."""

    def __init__(self, data, trace):
        self.data, self.trace = data, trace

    def __getitem__(self, key):
        self.trace.touch(_byte_slice(key), write=False)
        return self.data[key]

    def __setitem__(self, key, value):
        self.data[key] = value
        self.trace.touch(_byte_slice(key), write=True)


def _byte_slice(key):
    if not isinstance(key, slice) or key.step not in (None, 1) or key.start is None:
        raise TypeError(f"the traced memory takes byte slices, not {key!r}")
    return key


class _TracingMachine(Machine):
    """:class:`golden.program.Machine` with every command's memory accesses traced."""

    def __init__(self, config, tensors, size):
        super().__init__(config, tensors, size)
        self.trace = _Trace(size)

    def _va(self, cmd):
        mem = self.mem
        self.mem = _TracedMemory(mem, self.trace)
        try:
            super()._va(cmd)
        finally:
            self.mem = mem

    def _bytes(self, opd, rows, cols, ld):
        """Byte addresses of a ``rows × cols`` operand with row stride ``ld`` (elements)."""
        t = self.tensors[opd.tensor]
        s = t.itemsize
        elem = opd.offset + np.arange(rows)[:, None] * ld + np.arange(cols)[None, :]
        return (t.addr + elem.ravel()[:, None] * s + np.arange(s)[None, :]).ravel()

    def _ma(self, cmd):
        a = self._bytes(cmd.a, cmd.m, cmd.k, cmd.lda)
        b = (self._bytes(cmd.b, cmd.n, cmd.k, cmd.ldb) if cmd.b_transposed
             else self._bytes(cmd.b, cmd.k, cmd.n, cmd.ldb))
        c = self._bytes(cmd.c, cmd.m, cmd.n, cmd.ldc)
        for where in (a, b, c) if cmd.accumulate else (a, b):
            self.trace.touch(where, write=False)
        super()._ma(cmd)
        self.trace.touch(c, write=True)


def _mask(program, size, names):
    mask = np.zeros(size, bool)
    for name in names:
        t = program.tensors[name]
        mask[t.addr:t.addr + t.nbytes] = True
    return mask


def traffic(program, outputs=(), memory=None, parts=None):
    """Run ``program`` on the golden interpreter with its accesses traced and count what
    it must move (the module's rule): a :class:`Traffic`.

    ``outputs``: the tensors whose values outlive the program besides the state tensors
    (a decode step's layer output). ``parts``: the number of commands of each part of the
    program, in order (the layers of a step; they must add up to all the commands), for
    :attr:`Traffic.parts`; by default the program is one part. The memory starts as
    :func:`golden.program.run` starts it (zeros, then ``program.init``), or as ``memory``
    (a ``uint8`` image, copied) when given; the counts depend on it only through
    data-dependent addresses (indexed gathers).
    """
    if not isinstance(program, Program):
        raise TypeError(f"traffic wants a golden.program.Program, not {type(program).__name__}")
    unknown = sorted(set(outputs) - set(program.tensors))
    if unknown:
        raise ValueError(f"outputs {unknown} are not tensors of the program")
    parts = [len(program.commands)] if parts is None else [int(n) for n in parts]
    if any(n < 0 for n in parts) or sum(parts) != len(program.commands):
        raise ValueError(f"parts {parts} do not divide the program's {len(program.commands)} "
                         "commands")
    size = program.memory_bytes
    m = _TracingMachine(program.config, program.tensors, size)
    if memory is None:
        for name, data in program.init.items():
            m.write(name, data)
    else:
        image = np.asarray(memory, np.uint8)[:size]
        m.mem[:image.size] = image
    commands = iter(program.commands)
    for part, n in enumerate(parts):
        m.trace.part = part
        for _ in range(n):
            m.execute(next(commands))
    tr = m.trace
    tensors = program.tensors
    counted = _mask(program, size, [n for n, t in tensors.items() if t.role in READ_ROLES])
    kept = _mask(program, size, {n for n, t in tensors.items() if t.role == "state"} | set(outputs))
    read_at = (tr.first == _READ_FIRST) & counted
    written_at = tr.written & kept
    read, written = {}, {}
    for name, t in tensors.items():
        span = slice(t.addr, t.addr + t.nbytes)
        for counts, at in ((read, read_at), (written, written_at)):
            n = int(np.count_nonzero(at[span]))
            if n:
                counts[name] = n
    by_part = tuple((int(np.count_nonzero(read_at & (tr.first_part == p))),
                     int(np.count_nonzero(written_at & (tr.write_part == p))))
                    for p in range(len(parts)))
    roles = {name: tensors[name].role for name in {*read, *written}}
    return Traffic(read, written, by_part, tr.accessed, roles)


def step_traffic(builder, steps, limit=None):
    """:func:`traffic` of a decode step as :func:`golden.program.decode_step_parts`
    returns it (``builder, [(layer, step program, stage names)]``): the layers' commands
    run one after the other from the memory they were generated on (``builder.init``, as
    the tile runtime runs them), each layer a part, each layer's output an output;
    ``limit``: only the first ``limit`` commands (all layers counted, as ``v4hw demo
    --limit``). Returns a :class:`Traffic`."""
    outputs, parts = [], []
    for i, (_, step, names) in enumerate(steps):
        output = next((names[key] for key in DECODE_OUTPUTS if key in names), None)
        if output is None:
            raise ValueError(f"layer {i}'s step names no output {DECODE_OUTPUTS}")
        outputs.append(output)
        parts.append(len(step.commands))
    commands = tuple(cmd for _, step, _ in steps for cmd in step.commands)
    if limit is not None:
        if limit < 0:
            raise ValueError(f"limit must be >= 0, not {limit}")
        commands = commands[:limit]
    program = Program(builder.config, dict(builder.tensors), commands, dict(builder.init))
    return traffic(program, outputs, parts=_cut(parts, len(commands)))


def _cut(parts, n):
    """``parts`` (command counts) truncated to their first ``n`` commands."""
    out = []
    for size in parts:
        out.append(min(size, n))
        n -= out[-1]
    return out


def decode_step_traffic(preset, position=None, config=None, mode="bf16", limit=None):
    """:func:`step_traffic` of one decode step of tile preset ``preset`` (the step of
    :func:`golden.program.decode_step_parts` with these arguments). Returns
    ``(Traffic, bus bytes a cycle)``."""
    builder, steps = decode_step_parts(preset, position, config, mode)
    return step_traffic(builder, steps, limit), builder.config.bus_bits // 8
