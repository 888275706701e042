"""Lowering the op program of a layer (:mod:`golden.program`) into a CircuitFlow graph.

One IR node per program command, in program order:

- a :class:`golden.program.MaCmd` becomes an op of ``op_type`` ``gemm``, ``tile_shape``
  ``(m, k, n)``, precision its mode's (``bf16`` or ``int8``), inputs A and B (and C when
  it accumulates), output C;
- a :class:`golden.program.VaCmd` becomes an op of the VA's ``op_type`` for its opcode
  (:data:`VA_OP_TYPES`), ``tile_shape`` ``(repeat, length)`` (``(rows, index_limit,
  length)`` for GATHER_CSR, which carries its CSR ``sparsity_mask``: row pointers at
  SRC2, column indices at SRC3), inputs the tensors of SRC, SRC2, SRC3, outputs those of
  DST, DST2.

Each node's ``traffic`` is the bytes its command moves (:func:`va_traffic`,
:func:`ma_traffic`: from the command's shape, ``length`` and ``repeat``, with the element
sizes of its tensors), and its ``latency_bound`` the cycles the machine's latency model
gives it: the bound a planned command is held to. Every tensor a command touches is an
``ordered`` tensor of the graph, so the STDG keeps the program's order of reads and
writes of each tensor (RAW, WAR, WAW; :meth:`plan.ir.Graph.edges`), as memory does under
the sequential program. Tensor names outside the IR's alphabet have ``#`` (and any other
such character) replaced by ``-``.

A decode step's commands become :class:`plan.ir.DecodeOp` of token ``t`` (stage zero
``decode_token_<t>_start``), a prefill's :class:`plan.ir.PrefillOp` (``prefill_start``);
every access has dependency offset 0 from the stage's zero (the state and the inputs are
in memory when the stage starts). The programs of a preset's layers are generated with
independent inputs (:func:`golden.program.decode_steps`), so nothing in their tensors
links layer i to layer i + 1: a :class:`plan.ir.BarrierOp` between the layers stands for
that dependence (layer i + 1 reads layer i's output).

:func:`machine_for` is the planner's machine for a program's
:class:`golden.program.BlockConfig`: the MA's model is :class:`plan.machine.MaLatency`
with the configuration's P, bus width and memory latency; the VA's is
:class:`plan.machine.VaLatency` (:mod:`golden.va_latency`) with its lanes, bus width and
memory latency (:data:`VA_MODEL_NOTE`).
"""

import re
from dataclasses import replace

from golden.ma_latency import MaCommand, ma_cycles
from golden.program import BlockConfig, MaCmd, VaCmd, decode_steps
from golden.va import ProposedVaOpcode, VaCommand
from golden.va_latency import VaState, va_cycles
from spec.codes import MaMode, VaOpcode

from .errors import IRError
from .ir import BarrierOp, DecodeOp, Dependency, Graph, PrefillOp, SparsityMask, Tensor
from .machine import (
    MA_ENTRY_WRITES,
    STANDALONE,
    TILE_EXCLUSIVE,
    TILE_MC_NODE,
    TILE_PATH,
    VA_ENTRY_WRITES,
    LinearLatency,
    Machine,
    MaLatency,
    SequencerTiming,
    TableLatency,
    VaLatency,
    tile_blocks,
)

__all__ = ["VA_OP_TYPES", "VA_MODEL_NOTE", "DTYPE_NAMES", "machine_for", "va_traffic",
           "ma_traffic", "lower_program", "lower_programs", "lower_decode", "lower_prefill",
           "prefill_programs", "ir_name", "sequencer_writes", "with_sequencer", "with_tile",
           "command_cycles", "model_note"]

P = ProposedVaOpcode
# The IR's op_type (plan.machine.OP_BLOCKS) of every VA opcode a program may issue.
VA_OP_TYPES = {
    VaOpcode.GATHER: "gather", VaOpcode.GATHER_IDX: "gather", VaOpcode.GATHER_CSR: "gather",
    VaOpcode.SCATTER: "scatter", VaOpcode.SCATTER_IDX: "scatter",
    VaOpcode.QUANTIZE: "quantize", VaOpcode.DEQUANTIZE: "dequantize",
    P.DEQUANTIZE_MEM: "dequantize",
    VaOpcode.ADD: "elementwise", VaOpcode.MUL: "elementwise", VaOpcode.SCALE: "elementwise",
    VaOpcode.CLAMP: "elementwise", P.ADD_MEM: "elementwise", P.MUL_MEM: "elementwise",
    P.CVT_F32: "elementwise",
    VaOpcode.SILU: "activation", VaOpcode.EXP: "activation", VaOpcode.SOFTPLUS: "activation",
    VaOpcode.SQRT: "activation", P.RECIP: "activation",
    VaOpcode.RMSNORM: "norm", VaOpcode.ROPE: "rope", VaOpcode.SOFTMAX: "softmax",
    VaOpcode.SUM: "reduce", VaOpcode.MAX: "reduce",
    VaOpcode.TOPK: "topk", P.TOPK_WIDE: "topk",
}
_INT8_VA = frozenset({VaOpcode.QUANTIZE, VaOpcode.DEQUANTIZE, P.DEQUANTIZE_MEM})
# golden.program dtypes -> plan.ir dtypes
DTYPE_NAMES = {"bf16": "bf16", "binary32": "fp32", "int8": "int8", "int32": "int32"}
VA_MODEL_NOTE = "VA cycles: golden/va_latency.py (each command from reset, operands aligned)"
_BAD = re.compile(r"[^A-Za-z0-9_.\-]")


def ir_name(name):
    """A program tensor's name in the IR's alphabet (``#`` and other characters -> ``-``)."""
    out = _BAD.sub("-", name)
    return out if re.match(r"[A-Za-z_]", out) else "_" + out


def sequencer_writes(programs, graph):
    """``{op name: register writes of each of its command-list entries}`` (START
    included; :mod:`plan.commands`): an MA command :data:`plan.machine.MA_ENTRY_WRITES`
    (its TAT counted), a VA command's first repetition
    :data:`plan.machine.VA_ENTRY_WRITES`, each later one START and the LO and HI
    address registers of every operand that steps (the others hold their value). Upper
    bounds: the list leaves out a register that already holds its value."""
    ops = [op for op in graph.ops if not isinstance(op, BarrierOp)]
    commands = [cmd for prog in programs for cmd in prog.commands]
    if len(ops) != len(commands):
        raise ValueError(f"the graph has {len(ops)} ops for {len(commands)} commands")
    out = {}
    for op, cmd in zip(ops, commands, strict=True):
        if isinstance(cmd, MaCmd):
            out[op.name] = (MA_ENTRY_WRITES,)
        else:
            stepping = sum(1 for o in (cmd.src, cmd.src2, cmd.src3, cmd.dst, cmd.dst2)
                           if o is not None and o.step)
            out[op.name] = (VA_ENTRY_WRITES,) + (1 + 2 * stepping,) * (cmd.repeat - 1)
    return out


def with_sequencer(machine, programs, graph, timing=None):
    """``machine`` with the command sequencer (``timing``, by default the machine's or
    the tile's :class:`plan.machine.SequencerTiming`) counting ``programs``' entries."""
    timing = timing or machine.sequencer or SequencerTiming()
    return replace(machine, sequencer=replace(timing, writes=sequencer_writes(programs, graph)))


def machine_for(config=None, *, tile=False, path=TILE_PATH, **kwargs):
    """The planner's :class:`plan.machine.Machine` for a :class:`BlockConfig`: the MA's
    model from its ``p``, ``bus_bits`` and memory ``latency``, the VA's from its
    ``lanes``, ``bus_bits`` and ``latency``; the cache-migrate engine's
    :class:`LinearLatency` placeholder (``kwargs`` go to Machine). ``tile``: the blocks
    at the tile's mesh nodes, each model with the tile's memory path from its node to the
    MC's (``path``, a :class:`plan.machine.TilePathModel`), the standalone tops' memory
    otherwise."""
    cfg = config or BlockConfig()
    if tile:
        kwargs = {"blocks": tile_blocks(), "mc_node": TILE_MC_NODE,
                  "exclusive": TILE_EXCLUSIVE} | kwargs
    blocks = {b.kind: b.node for b in kwargs.get("blocks", Machine().blocks)}
    mc = kwargs.get("mc_node", Machine().mc_node)

    def memory(kind):
        if not tile:
            return STANDALONE
        x, y = blocks[kind]
        return path.path(abs(x - mc[0]) + abs(y - mc[1]))

    models = {"ma": MaLatency(p=cfg.p, data_width=cfg.bus_bits, memory_latency=cfg.latency,
                              path=memory("ma")),
              "va": VaLatency(lanes=cfg.lanes, data_width=cfg.bus_bits,
                              memory_latency=cfg.latency, path=memory("va")),
              "cme": LinearLatency("cme", setup=8)}
    return Machine(models=models, **kwargs)


def _ma_command(program, cmd):
    """The :class:`golden.ma_latency.MaCommand` of program command ``cmd`` (its byte
    addresses and strides; as :func:`golden.program.ma_command_cycles`)."""
    t = program.tensors
    ae = t[cmd.a.tensor].itemsize
    ce = t[cmd.c.tensor].itemsize
    return MaCommand(cmd.m, cmd.k, cmd.n, MaMode(cmd.mode) is MaMode.BF16, cmd.accumulate,
                     t[cmd.a.tensor].addr + cmd.a.offset * ae,
                     t[cmd.b.tensor].addr + cmd.b.offset * ae,
                     t[cmd.c.tensor].addr + cmd.c.offset * ce, cmd.lda * ae, cmd.ldb * ae,
                     cmd.ldc * ce, cmd.b_transposed)


def _va_commands(program, cmd):
    """The :class:`golden.va.VaCommand` of each repetition of ``cmd`` (as
    :func:`golden.program.va_command_cycles`)."""
    t = program.tensors

    def addr(o, r):
        return 0 if o is None else (t[o.tensor].addr
                                    + (o.offset + r * o.step) * t[o.tensor].itemsize)

    es = t[cmd.src.tensor].itemsize if cmd.src is not None else 2
    return [VaCommand(cmd.op, cmd.length, src=addr(cmd.src, r), src2=addr(cmd.src2, r),
                      src3=addr(cmd.src3, r), dst=addr(cmd.dst, r), dst2=addr(cmd.dst2, r),
                      stride=cmd.stride * es, esize={1: 0, 2: 1, 4: 2}.get(es, 1),
                      scalar=cmd.scalar, k=cmd.k, index_limit=cmd.index_limit,
                      rows=getattr(cmd, "rows", 0) or 0, split_half=cmd.split_half)
            for r in range(cmd.repeat)]


def command_cycles(machine, programs):
    """``[cycles of each START]`` of every command of ``programs`` in program order, by
    ``machine``'s MA and VA models (their configuration and memory path) on the commands'
    own addresses, the VA's state (:class:`golden.va_latency.VaState`) carried from one
    VA command to the next in program order, as the tile runs them."""
    ma, va = machine.models["ma"], machine.models["va"]
    ma = getattr(ma, "base", ma)
    va = getattr(va, "base", va)
    state, out = VaState(), []
    for prog in programs:
        for cmd in prog.commands:
            if isinstance(cmd, MaCmd):
                out.append((ma_cycles(_ma_command(prog, cmd), p=ma.p, data_width=ma.data_width,
                                      **ma.path.kwargs(ma.memory_latency)),))
            else:
                out.append(tuple(va_cycles(vc, lanes=va.lanes, data_width=va.data_width,
                                           fn_lanes=va.fn_lanes, state=state,
                                           **va.path.kwargs(va.memory_latency))
                                 for vc in _va_commands(prog, cmd)))
    return out


def with_tile(machine, programs, graph, margins=None):
    """``(graph, machine)`` with the MA's and VA's models looking up each op's cycles
    from its command (:func:`command_cycles`: its addresses, each repetition) plus
    ``margins`` (``{kind: cycles}`` added to every START; default
    :data:`plan.machine.TILE_MARGINS`), and every op's ``latency_bound`` those cycles."""
    from .machine import TILE_MARGINS

    margins = TILE_MARGINS if margins is None else margins
    ops = [op for op in graph.ops if not isinstance(op, BarrierOp)]
    per = command_cycles(machine, programs)
    if len(ops) != len(per):
        raise ValueError(f"the graph has {len(ops)} ops for {len(per)} commands")
    models = dict(machine.models)
    for kind in ("ma", "va"):
        base = getattr(models[kind], "base", models[kind])
        table = {op.name: cycles for op, cycles in zip(ops, per, strict=True)
                 if machine.kind_of(op) == kind}
        models[kind] = TableLatency(base, table, margins.get(kind, 0))
    machine = replace(machine, models=models)
    ops = tuple(op if isinstance(op, BarrierOp)
                else replace(op, latency_bound=machine.cycles(op, graph)) for op in graph.ops)
    return Graph(graph.tensors, ops, dict(graph.stages)), machine


def model_note(machine):
    """One line: the models the machine's MA and VA use."""
    ma, va = machine.models["ma"], machine.models["va"]
    table = isinstance(ma, TableLatency)
    ma, va = getattr(ma, "base", ma), getattr(va, "base", va)
    where = ("the tile's memory path (plan.machine.TILE_PATH: MA " + _path(ma.path) + ", VA "
             + _path(va.path) + ")" if ma.path.read or va.path.read else "a standalone memory")
    return (f"MA cycles: golden/ma_latency.py (P={ma.p}, bus {ma.data_width} bits); VA cycles: "
            f"golden/va_latency.py ({va.lanes} lanes); memory latency {ma.memory_latency} "
            f"cycles at the core's port, through {where}; "
            + ("each command on its own addresses" if table else "operands taken as dense"))


def _path(p):
    return f"+{p.read} read, +{p.write} write"


def _opcode(cmd):
    try:
        return VaOpcode(cmd.op)
    except ValueError:
        try:
            return ProposedVaOpcode(cmd.op)
        except ValueError:
            raise IRError(f"VA opcode {cmd.op} is not a VA command") from None


def va_traffic(cmd, tensors):
    """``(bytes read, bytes written)`` of VA command ``cmd`` over all its repetitions,
    from its opcode, ``length`` (and ``k``) and its tensors' element sizes (the gather
    family's element is the source tensor's)."""
    op, n = _opcode(cmd), cmd.length
    es = tensors[cmd.src.tensor].itemsize if cmd.src is not None else 2
    if op in (VaOpcode.GATHER, VaOpcode.SCATTER):
        rd, wr = n * es, n * es
    elif op in (VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX):
        rd, wr = 4 * n + n * es, n * es
    elif op == VaOpcode.GATHER_CSR:
        rd, wr = 4 * (_csr_rows(cmd) + 1) + 4 * n + n * es, n * es
    elif op == VaOpcode.QUANTIZE:
        rd, wr = 2 * n, n + 4
    elif op == VaOpcode.DEQUANTIZE:
        rd, wr = 4 * n, 2 * n
    elif op == P.DEQUANTIZE_MEM:
        rd, wr = 4 * n + 4, 2 * n
    elif op in (VaOpcode.ADD, VaOpcode.MUL, VaOpcode.RMSNORM):
        rd, wr = 4 * n, 2 * n
    elif op == VaOpcode.ROPE:
        rd, wr = 2 * n + n + n, 2 * n          # x, and cos / sin of n/2 elements each
    elif op == VaOpcode.SUM:
        rd, wr = 2 * n, 4
    elif op == VaOpcode.MAX:
        rd, wr = 2 * n, 2
    elif op in (VaOpcode.TOPK, P.TOPK_WIDE):
        rd, wr = 2 * n, 6 * cmd.k                # bf16 values, int32 indices
    elif op == P.CVT_F32:
        rd, wr = 4 * n, 2 * n
    elif op in (P.MUL_MEM, P.ADD_MEM):
        rd, wr = 2 * n + 2, 2 * n
    else:                                        # SCALE, SILU, EXP, SOFTMAX, CLAMP, ...
        rd, wr = 2 * n, 2 * n
    return rd * cmd.repeat, wr * cmd.repeat


def ma_traffic(cmd, tensors):
    """``(bytes read, bytes written)`` of MA command ``cmd``: A (M×K), B (K×N), C (M×N)
    read too when it accumulates, C written."""
    ea = tensors[cmd.a.tensor].itemsize
    eb = tensors[cmd.b.tensor].itemsize
    ec = tensors[cmd.c.tensor].itemsize
    c = cmd.m * cmd.n * ec
    return cmd.m * cmd.k * ea + cmd.k * cmd.n * eb + (c if cmd.accumulate else 0), c


def _csr_rows(cmd):
    rows = getattr(cmd, "rows", None)
    if rows is None:
        raise IRError("a GATHER_CSR command needs its ROWS register (the program's VaCmd "
                      "has none)")
    return rows


def _unique(names):
    return tuple(dict.fromkeys(names))


def _node(cmd, tensors, rename):
    """(op_type, inputs, outputs, precision, tile_shape, sparsity_mask, traffic)."""
    if isinstance(cmd, MaCmd):
        mode = MaMode(cmd.mode)
        reads = [cmd.a.tensor, cmd.b.tensor] + ([cmd.c.tensor] if cmd.accumulate else [])
        return ("gemm", _unique(map(rename, reads)), (rename(cmd.c.tensor),),
                "bf16" if mode is MaMode.BF16 else "int8", (cmd.m, cmd.k, cmd.n), None,
                ma_traffic(cmd, tensors))
    if not isinstance(cmd, VaCmd):
        raise IRError(f"a program command must be a VaCmd or an MaCmd, not "
                      f"{type(cmd).__name__}")
    op = _opcode(cmd)
    if op not in VA_OP_TYPES:
        raise IRError(f"VA opcode {op.name} has no op_type in the IR")
    reads = [o.tensor for o in (cmd.src, cmd.src2, cmd.src3) if o is not None]
    writes = [o.tensor for o in (cmd.dst, cmd.dst2) if o is not None]
    shape, mask = (cmd.repeat, cmd.length), None
    if op == VaOpcode.GATHER_CSR:
        if cmd.src2 is None or cmd.src3 is None:
            raise IRError("a GATHER_CSR command needs its row pointers (SRC2) and column "
                          "indices (SRC3)")
        shape = (_csr_rows(cmd), cmd.index_limit, cmd.length)
        mask = SparsityMask("csr", shape[:2], (rename(cmd.src2.tensor), rename(cmd.src3.tensor)))
    return (VA_OP_TYPES[op], _unique(map(rename, reads)), _unique(map(rename, writes)),
            "int8" if op in _INT8_VA else "bf16", shape, mask, va_traffic(cmd, tensors))


def lower_program(program, machine, *, phase="decode", token=0, prefix=""):
    """The nodes of ``program``'s commands and the tensors they touch: ``(tensors, ops)``,
    ``tensors`` a dict name -> :class:`plan.ir.Tensor` (``ordered``), ``ops`` in program
    order, named ``<prefix>c<index>.<opcode>``. ``phase`` "decode" (a
    :class:`DecodeOp` of ``token``) or "prefill"; ``machine`` gives the bounds."""
    if phase not in ("decode", "prefill"):
        raise ValueError(f"phase must be 'decode' or 'prefill', not {phase!r}")
    names = {}

    def rename(name):
        if name not in names:
            if name not in program.tensors:
                raise IRError(f"a command names tensor {name!r}, which the program does not "
                              "declare")
            names[name] = prefix + ir_name(name)
        return names[name]

    cls, extra = (DecodeOp, {"token": token}) if phase == "decode" else (PrefillOp, {})
    ops = []
    width = len(str(max(len(program.commands) - 1, 0)))
    for i, cmd in enumerate(program.commands):
        op_type, ins, outs, precision, shape, mask, traffic = _node(cmd, program.tensors, rename)
        deps = tuple(Dependency(t, "read", 0) for t in ins) + tuple(
            Dependency(t, "write", 0) for t in outs)
        ops.append(cls(name=f"{prefix}c{i:0{width}d}.{cmd.opname.lower()}", op_type=op_type,
                       inputs=ins, outputs=outs, precision=precision, tile_shape=shape,
                       latency_bound=1, dependency=deps, sparsity_mask=mask,
                       traffic=traffic, **extra))
    if len(set(names.values())) != len(names):
        raise IRError("two program tensors have the same IR name after renaming")
    tensors = {}
    for old, new in names.items():
        t = program.tensors[old]
        tensors[new] = Tensor(new, tuple(int(s) for s in t.shape), DTYPE_NAMES[t.dtype],
                              ordered=True)
    probe = Graph(tuple(tensors.values()), ())
    ops = [replace(op, latency_bound=machine.cycles(op, probe)) for op in ops]
    return tensors, ops


def lower_programs(programs, machine, *, phase="decode", token=0, prefixes=None):
    """One graph of ``programs`` (a preset's layers, in order) with a :class:`BarrierOp`
    between consecutive programs (layer i + 1 reads layer i's output). Tensors of the
    same name in two programs are one tensor (the programs share a memory). ``prefixes``:
    one per program, prepended to its op and tensor names (default ``l<i>.`` for ops,
    none for tensors)."""
    tensors, ops = {}, []
    for i, prog in enumerate(programs):
        tprefix = "" if prefixes is None else prefixes[i]
        if i:
            ops.append(BarrierOp(name=f"{tprefix}layer{i}.barrier"))
        ts, layer_ops = lower_program(prog, machine, phase=phase, token=token, prefix=tprefix)
        for name, t in ts.items():
            if tensors.setdefault(name, t) != t:
                raise IRError(f"tensor {name} has two shapes in the programs")
        if prefixes is None:     # op names still need the layer, tensor names have it
            layer_ops = [replace(op, name=f"l{i}.{op.name}") for op in layer_ops]
        ops.extend(layer_ops)
    stage = f"decode_token_{token}_start" if phase == "decode" else "prefill_start"
    return Graph(tuple(tensors.values()), tuple(ops), {stage: 0})


def lower_decode(preset, position=None, config=None, mode="bf16", machine=None,
                 sequencer=None, tile=True):
    """One decode step of tile preset ``preset`` (every layer,
    :func:`golden.program.decode_steps`) as a graph of :class:`DecodeOp` of token
    ``position`` (the preset's by default); returns ``(graph, machine)``, the machine
    with the command sequencer (``sequencer``, default the tile's
    :class:`plan.machine.SequencerTiming`) counting the step's entries. ``tile`` (with
    no ``machine``): the tile machine model (:func:`machine_for` with ``tile``, each
    command's cycles from its addresses, :func:`with_tile`; with the tile's sequencer
    timing, the default, its list reads: :func:`plan.commands.with_list_reads`); else
    the standalone blocks' models."""
    from golden.presets.tile import PRESETS

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; expected one of {sorted(PRESETS)}")
    cfg = config or BlockConfig()
    tile = tile and machine is None
    machine = machine or machine_for(cfg, tile=tile)
    t = PRESETS[preset].position if position is None else position
    programs = [step for _, step in decode_steps(preset, t, cfg, mode)]
    graph = lower_programs(programs, machine, token=t)
    if tile:
        graph, machine = with_tile(machine, programs, graph)
    machine = with_sequencer(machine, programs, graph, sequencer)
    if tile and sequencer is None:
        from .commands import with_list_reads

        machine = with_list_reads(programs, graph, machine)
    return graph, machine


def prefill_programs(preset, tokens, config=None, mode="bf16"):
    """The prefill of ``tokens`` tokens of every layer of tile preset ``preset`` (random
    inputs, the preset's seed), each layer a program of its own builder."""
    import numpy as np

    from golden.presets.tile import PRESETS
    from golden.program_dsv4 import dsv4_layer_prefill
    from golden.program_notes import notes_prefill

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; expected one of {sorted(PRESETS)}")
    if tokens < 1:
        raise ValueError(f"a prefill needs at least 1 token, not {tokens}")
    pre = PRESETS[preset]
    cfg, c = config or BlockConfig(), pre.config
    rng = np.random.default_rng(pre.seed)
    programs = []
    for layer in pre.model().layers:
        if pre.kind == "deepseek-v4":
            streams = rng.standard_normal((tokens, c.hc_mult, c.hidden_size))
            ids = rng.integers(c.vocab_size, size=tokens)
            prog, _ = dsv4_layer_prefill(layer, streams, ids, cfg)
        else:
            prog, _ = notes_prefill(layer, rng.standard_normal((tokens, c.hidden_size)), cfg,
                                    mode)
        programs.append(prog)
    return programs


def lower_prefill(preset, tokens, config=None, mode="bf16", machine=None):
    """The prefill of ``tokens`` tokens of tile preset ``preset`` as a graph of
    :class:`PrefillOp` (each layer's tensors prefixed ``l<i>.``: the layers' programs
    are made in separate memories); returns ``(graph, machine)``."""
    cfg = config or BlockConfig()
    machine = machine or machine_for(cfg)
    programs = prefill_programs(preset, tokens, cfg, mode)
    graph = lower_programs(programs, machine, phase="prefill",
                           prefixes=[f"l{i}." for i in range(len(programs))])
    return graph, machine
