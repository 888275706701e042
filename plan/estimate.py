"""One decode step of a ``deepseek-v4`` model on N tiles, estimated from the latency
models: ``v4hw plan --preset deepseek-v4 [--config config.json] --tiles N --bus-bytes B
--clock-mhz F`` (docs/plan.md, "The multi-tile estimate").

For configurations too large to simulate. The steps:

1. **The op program of every layer**, from the configuration alone:
   :func:`golden.program_dsv4.dsv4_decode_step` (the generator of the tile's programs),
   run on a :class:`_ShapeBuilder` that allocates and emits as
   :class:`golden.program.Builder` does but runs no command and holds no data, with
   weights that are shapes only. The MoE reads its dispatch back from memory: the
   builder answers experts ``0..k-1`` (at one token every routed expert's commands have
   the same shapes, so which k does not change the cycles). Layers of one kind (attention
   type and routing) have the same commands, so one program is made and planned per kind.
2. **Cycles of every command on the tile**: the fitted models
   (:func:`golden.ma_latency.ma_cycles`, :func:`golden.va_latency.va_repeat_cycles`, with
   the program's addresses) at the standalone tops' ``memory_latency`` at the core's port
   through the tile's memory path from the block's node to the MC's: the planner's tile
   machine model (:func:`plan.lower.machine_for` with ``tile=True``,
   :data:`plan.machine.TILE_PATH`), one model of the tile for the planner and the
   estimate.
3. **The layer's cycles**: ``planned``, the DSTP planner (:func:`plan.dstp.plan`) on a
   graph of one node per VA command and one per GEMM (its MA commands, the K and N tiles
   of at most 128, back to back), launched by the tile's command sequencer
   (:class:`plan.machine.SequencerTiming`); or ``sequential``, the commands one after
   another as the host runtime runs them, the host's own register accesses not counted.
4. **The partition**: whole layers on tiles, consecutive layers together
   (:func:`partition_layers`, the split whose busiest tile has the fewest cycles), one
   token through the tiles in turn. Between two tiles the token's residual streams
   (``hc_mult`` × ``hidden_size`` bf16) cross one link.

Every number the estimate rests on is in :class:`Estimate` and printed by
:meth:`Estimate.report`.
"""

import json
import pathlib
import re
import time
from dataclasses import dataclass

import numpy as np

from golden import program as gprogram
from golden.ma_latency import ma_cycles
from golden.muon import zero_load_latency
from golden.presets.deepseek_v4 import DeepseekV4Config, DeepseekV4Layer, weight_shapes
from golden.presets.tile import PRESETS
from golden.program import BlockConfig, Builder, MaCmd
from golden.program_dsv4 import dsv4_decode_step, dsv4_state
from golden.va import ProposedVaOpcode
from golden.va_latency import va_repeat_cycles
from spec.codes import VaOpcode

from .dstp import plan
from .ir import DecodeOp, Graph
from .ir import Tensor as IrTensor
from .lower import (
    DTYPE_NAMES,
    VA_OP_TYPES,
    _ma_command,
    _va_commands,
    ir_name,
    ma_traffic,
    machine_for,
    va_traffic,
)
from .machine import (
    MA_ENTRY_WRITES,
    TILE_PATH,
    VA_ENTRY_WRITES,
    LatencyModel,
    LinearLatency,
    Machine,
    SequencerTiming,
    TilePathModel,
)

__all__ = ["DEFAULT_POSITION", "DEFAULT_CLOCK_MHZ", "SCHEDULES", "PARTITIONS",
           "TileParams", "command_cycles", "read_config", "layer_programs", "LayerKind", "ExpertSplit",
           "moe_split", "Estimate", "estimate", "partition_layers"]

# The decode position of an estimate from a configuration file (a 4096-token context).
DEFAULT_POSITION = 4095
# The clock of an estimate that names none: the FPGA flow's design clock (docs/fpga.md).
DEFAULT_CLOCK_MHZ = 100.0
SCHEDULES = ("planned", "sequential")
PARTITIONS = ("layers", "experts")
BUS_BYTES = (8, 16, 32, 64)        # the tile's DATA_WIDTH 64..512 (docs/tile/README.md)
_NO_HORIZON = 1 << 62              # plan without a cycle limit: a layer is tens of millions


def _pow2(value):
    return isinstance(value, int) and value >= 1 and value & (value - 1) == 0


@dataclass(frozen=True)
class TileParams:
    """One tile as the estimate sees it: the MA's array ``p``, the VA's ``lanes``, the
    memory bus of ``bus_bytes`` a cycle, the memory latency at a block's port on the
    standalone tops (cycles, the programs' ``latency``) and the tile's memory path
    (``path``, a :class:`plan.machine.TilePathModel`, the planner's
    :data:`plan.machine.TILE_PATH` by default; None: the standalone tops' memory)."""
    p: int = 8
    lanes: int = 32
    bus_bytes: int = 16
    memory_latency: int = 8
    path: TilePathModel | None = TILE_PATH

    def __post_init__(self):
        if not (_pow2(self.p) and 2 <= self.p <= 32):
            raise ValueError(f"the MA's P must be a power of two in 2..32, not {self.p}")
        if not (_pow2(self.bus_bytes) and self.bus_bytes in BUS_BYTES):
            raise ValueError(f"the bus must be a power of two of {BUS_BYTES[0]}.."
                             f"{BUS_BYTES[-1]} bytes (DATA_WIDTH 64..512), not {self.bus_bytes}")
        if not (_pow2(self.lanes) and 4 <= self.lanes <= 64
                and self.lanes >= self.bus_bytes // 2):
            raise ValueError(f"the VA's lanes must be a power of two in 4..64 and at least "
                             f"the bus's bf16 elements ({self.bus_bytes // 2}), not {self.lanes}")
        if self.memory_latency < 1:
            raise ValueError("the memory latency must be >= 1 cycles")
        if self.path is not None and not isinstance(self.path, TilePathModel):
            raise TypeError(f"the tile's path is a TilePathModel or None, not {self.path!r}")

    def block_config(self):
        return BlockConfig(p=self.p, lanes=self.lanes, bus_bits=8 * self.bus_bytes,
                           latency=self.memory_latency)

    def models(self):
        """``(MA model, VA model)``: the planner's (:func:`plan.lower.machine_for`) for
        this tile, each with the memory path from its block's node to the MC's."""
        machine = machine_for(self.block_config(), tile=self.path is not None,
                              path=self.path or TILE_PATH)
        return machine.models["ma"], machine.models["va"]


def read_config(path):
    """A :class:`DeepseekV4Config` from a Hugging Face ``config.json``; ValueError (one
    line, naming the file) when it is missing, not JSON or not a DeepSeek-V4 config."""
    p = pathlib.Path(path)
    if not p.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        raw = json.loads(p.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a JSON file ({error})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: not a config.json (a JSON object)")
    model = raw.get("model_type")
    missing = [k for k in ("num_hidden_layers", "hidden_size") if k not in raw]
    if (model is not None and model != "deepseek_v4") or missing:
        why = f"no {' or '.join(missing)}" if missing else f"model_type {model!r}"
        raise ValueError(f"{path}: not a DeepSeek-V4 config.json ({why})")
    try:
        return DeepseekV4Config.from_hf(raw)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: {str(error).splitlines()[0]}") from None


# --- the op program from the shapes --------------------------------------------------------


class _ShapeBuilder(Builder):
    """A :class:`golden.program.Builder` that allocates tensors (same names, shapes and
    addresses) and records commands, but keeps no data and runs nothing. ``read`` (the
    MoE's dispatch, the only value a generator reads back) answers ``0, 1, 2, ...``."""

    def _store(self, name, shape, dtype, data):
        """Nothing: the builder keeps no memory (:meth:`Builder.tensor` allocates)."""

    def weight(self, name, w, mode):
        """The B operand's tensor ``(K, N)`` without its values (:meth:`Builder.weight`
        rounds every weight to bf16 and keeps it: about 30 s and 1.2 GB for a V4-Flash
        layer, against 0.3 s and 50 MB here)."""
        key = ("weight", name, mode, w.shape)
        if key not in self.cache:
            self.cache[key] = (self.tensor(self.shared_name(f"w.{name}"),
                                           (w.shape[1], w.shape[0]), "bf16", "weight",
                                           shared=True), None)
        return self.cache[key]

    def emit(self, cmd):
        self.commands.append(cmd)

    def read(self, name):
        t = self.tensors[name]
        return np.arange(t.size, dtype=np.int64).reshape(t.shape)


class _Shapes(dict):
    """Weights by name, each a read-only zero of its shape (no memory)."""

    def __init__(self, cfg):
        super().__init__()
        self.shapes = weight_shapes(cfg)

    def __missing__(self, name):
        return np.broadcast_to(np.float64(0.0), self.shapes[name])


def layer_programs(cfg, position, block, layers=None):
    """``{layer index: step program}`` of one decode step at ``position`` of the layers
    ``layers`` (default all) of ``cfg``, made in one memory as
    :func:`golden.program.decode_step_parts` makes a tile preset's (each layer's state of
    ``position + 1`` tokens, prefix ``l<i>.``), from shapes alone (:class:`_ShapeBuilder`)."""
    if isinstance(position, bool) or not isinstance(position, int) or position < 0:
        raise ValueError(f"the decode position must be an integer >= 0, not {position!r}")
    b = _ShapeBuilder(block)
    weights = _Shapes(cfg)
    out = {}
    for i in range(cfg.num_hidden_layers) if layers is None else layers:
        layer = DeepseekV4Layer(cfg, weights, i)
        b.prefix = f"l{i}."
        state = dsv4_state(b, layer, position + 1)
        row = np.zeros((cfg.hc_mult, cfg.hidden_size))
        out[i], _ = dsv4_decode_step(layer, state, row, 0, position, b)
    b.prefix = ""
    return out


# --- cycles of a layer ----------------------------------------------------------------------


class _Listed(LatencyModel):
    """Cycles given per op name (the estimate computes them per command beforehand)."""

    def __init__(self, block, cycles, msu):
        self.block, self.table, self.msu = block, cycles, msu

    def cycles(self, op, graph):
        return self.table[op.name]


def _gemm_runs(commands):
    """Commands grouped: ``(first index, [commands])``, each run the MA commands of one
    GEMM (consecutive, same C and B tensors; :meth:`Builder.gemm`'s tiles) or one VA
    command."""
    runs = []
    for i, cmd in enumerate(commands):
        prev = runs[-1][1][-1] if runs else None
        if (isinstance(cmd, MaCmd) and isinstance(prev, MaCmd) and cmd.c.tensor == prev.c.tensor
                and cmd.b.tensor == prev.b.tensor and cmd.mode == prev.mode):
            runs[-1][1].append(cmd)
        else:
            runs.append((i, [cmd]))
    return runs


def _va_opcode(op):
    try:
        return VaOpcode(op)
    except ValueError:
        return ProposedVaOpcode(op)


def _crosses(addr, rows, row_bytes, stride):
    """Whether a row of an operand crosses a 4 KiB page (where a burst is split)."""
    return any((addr + r * stride) % 4096 + row_bytes > 4096 for r in range(rows))


def command_cycles(program, cmd, models):
    """A command's cycles by ``models`` (:meth:`TileParams.models`) on its own addresses,
    a repeated VA command's repetitions one after the other from reset."""
    ma, va = models
    if isinstance(cmd, MaCmd):
        return ma_cycles(_ma_command(program, cmd), p=ma.p, data_width=ma.data_width,
                         **ma.path.kwargs(ma.memory_latency))
    return va_repeat_cycles(_va_commands(program, cmd), lanes=va.lanes, data_width=va.data_width,
                            fn_lanes=va.fn_lanes, **va.path.kwargs(va.memory_latency))


def _cycles(program, cmd, cache, models):
    """:func:`command_cycles`, cached by what they depend on: the models, its registers and, for
    each operand, its step, element size and address, the address within its 4 KiB page
    (a burst never crosses one) or, for an MA command none of whose rows crosses a page,
    within a 64-byte bus word (the MA's model then depends on nothing else); not the
    tensors' names (layers of one kind, and two kinds, share commands of one shape)."""
    t = program.tensors

    def addr(o):
        return t[o.tensor].addr + o.offset * t[o.tensor].itemsize

    def where(o, page=4096):
        if o is None:
            return None
        size = t[o.tensor].itemsize
        return (addr(o) % page, o.step * size, size)

    if isinstance(cmd, MaCmd):
        ea, ec = t[cmd.a.tensor].itemsize, t[cmd.c.tensor].itemsize
        b_rows = (cmd.n, cmd.k) if cmd.b_transposed else (cmd.k, cmd.n)
        crossing = (_crosses(addr(cmd.a), cmd.m, cmd.k * ea, cmd.lda * ea)
                    or _crosses(addr(cmd.b), b_rows[0], b_rows[1] * ea, cmd.ldb * ea)
                    or _crosses(addr(cmd.c), cmd.m, cmd.n * ec, cmd.ldc * ec))
        page = 4096 if crossing else 64
        key = ("ma", cmd.mode, cmd.m, cmd.k, cmd.n, cmd.lda, cmd.ldb, cmd.ldc, cmd.accumulate,
               cmd.b_transposed, crossing, where(cmd.a, page), where(cmd.b, page),
               where(cmd.c, page))
    else:
        key = ("va", cmd.op, cmd.length, cmd.stride, cmd.scalar, cmd.k, cmd.index_limit,
               cmd.split_half, cmd.repeat) + tuple(
            where(o) for o in (cmd.src, cmd.src2, cmd.src3, cmd.dst, cmd.dst2))
    key = (models,) + key
    if key not in cache:
        cache[key] = command_cycles(program, cmd, models)
    return cache[key]


def _layer_graph(program, position, cache, models):
    """``(graph, command cycles by op, sequencer writes by op, MA commands by op)`` of
    ``program``'s commands (one node per VA command, one per GEMM's run of MA commands;
    their cycles by ``models``, :meth:`TileParams.models`), every tensor ``ordered`` as
    :func:`plan.lower.lower_program` makes them."""
    tensors, ops, cycles, writes, tiles, names = {}, [], {}, {}, {}, {}

    def touch(name):
        new = ir_name(name)
        if names.setdefault(new, name) != name:
            raise ValueError(f"tensors {names[new]!r} and {name!r} have one IR name {new!r}")
        if new not in tensors:
            t = program.tensors[name]
            tensors[new] = IrTensor(new, tuple(int(s) for s in t.shape), DTYPE_NAMES[t.dtype],
                                    ordered=True)
        return new

    width = len(str(len(program.commands)))
    for first, run in _gemm_runs(program.commands):
        head = run[0]
        name = f"c{first:0{width}d}.{head.opname.lower()}"
        cycles[name] = sum(_cycles(program, cmd, cache, models) for cmd in run)
        tiles[name] = len(run)
        # the bound: the node as the planner holds its block (see _layer_figures)
        bound = cycles[name] + (len(run) - 1) * SequencerTiming().gap
        if isinstance(head, MaCmd):
            reads = [head.a.tensor, head.b.tensor] + ([head.c.tensor] if head.accumulate else [])
            rd = wr = 0
            for cmd in run:
                r, w = ma_traffic(cmd, program.tensors)
                rd, wr = rd + r, wr + w
            # (M, K, N) of the whole GEMM: the tiles of its first column of tiles (B's
            # first), of its first output tile (C's) and of its first rows (A's)
            shape = (sum(c.m for c in run if c.b.offset == head.b.offset),
                     sum(c.k for c in run if c.c.offset == head.c.offset),
                     sum(c.n for c in run if c.a.offset == head.a.offset))
            op = DecodeOp(name=name, op_type="gemm", token=position,
                          inputs=tuple(dict.fromkeys(map(touch, reads))),
                          outputs=(touch(head.c.tensor),), precision="bf16",
                          tile_shape=shape,
                          latency_bound=bound, traffic=(rd, wr))
            writes[name] = (MA_ENTRY_WRITES,)
        else:
            code = _va_opcode(head.op)
            reads = [o.tensor for o in (head.src, head.src2, head.src3) if o is not None]
            outs = [o.tensor for o in (head.dst, head.dst2) if o is not None]
            op = DecodeOp(name=name, op_type=VA_OP_TYPES[code], token=position,
                          inputs=tuple(dict.fromkeys(map(touch, reads))),
                          outputs=tuple(dict.fromkeys(map(touch, outs))), precision="bf16",
                          tile_shape=(head.repeat, head.length), latency_bound=bound,
                          traffic=va_traffic(head, program.tensors))
            stepping = sum(1 for o in (head.src, head.src2, head.src3, head.dst, head.dst2)
                           if o is not None and o.step)
            writes[name] = (VA_ENTRY_WRITES,) + (1 + 2 * stepping,) * (head.repeat - 1)
        ops.append(op)
    graph = Graph(tuple(tensors.values()), tuple(ops), {f"decode_token_{position}_start": 0})
    return graph, cycles, writes, tiles


def _machine(tile, cycles, writes):
    models = {"ma": _Listed("ma", cycles, "one GEMM (its MA commands back to back)"),
              "va": _Listed("va", cycles, "one VA command"),
              "cme": LinearLatency("cme", setup=8)}
    return Machine(models=models, flit_bytes=tile.bus_bytes,
                   sequencer=SequencerTiming(writes=writes))


@dataclass(frozen=True)
class ExpertSplit:
    """A layer's step with its token's routed experts on other tiles (``--partition
    experts``): cycles of the commands before the first routed expert (``pre``: the
    hyper-connections, the attention, the router, the shared expert), of each routed
    expert's commands (gather of the token's row, SwiGLU, weighting), of the commands after
    them (``post``: the sum of the experts' rows, the merge), each scheduled on its own;
    ``tiles`` the token's experts on each tile (tile 0, the layer's, first) and the
    experts' phase, hand-overs included (``phase``)."""
    pre: int
    experts: tuple
    post: int
    tiles: tuple
    phase: int
    sent: int                    # bytes over the links, a layer
    link_cycles: int             # of those, cycles on the layer tile's link


@dataclass(frozen=True)
class LayerKind:
    """The layers of one kind (attention type, routing), their common step's figures:
    commands (MA, VA), graph nodes, cycles (the schedule's), the MA's and VA's command
    cycles, the planner's seconds and the kind's in all, and with the experts partition
    its split."""
    kind: str
    layers: tuple
    ma_commands: int
    va_commands: int
    va_starts: int
    nodes: int
    cycles: int
    ma_cycles: int
    va_cycles: int
    plan_seconds: float          # in the planner
    seconds: float               # in all: the command cycles (latency models), the planner
    plan_summary: str
    split: ExpertSplit | None = None


def _kind_name(cfg, i):
    routing = "hash MoE" if cfg.mlp_layer_types[i] == "hash_moe" else "top-k MoE"
    return f"{cfg.layer_types[i]} + {routing}"


def _schedule(program, commands, position, tile, schedule, cache):
    """``(cycles, summary, nodes, MA command cycles, VA command cycles, planner
    seconds)`` of ``commands`` (of ``program``) as one graph, planned or one after
    another."""
    part = gprogram.Program(program.config, program.tensors, tuple(commands), {})
    graph, cycles, writes, tiles = _layer_graph(part, position, cache, tile.models())
    is_ma = {op.name: op.op_type == "gemm" for op in graph.ops}
    ma = sum(c for n, c in cycles.items() if is_ma[n])
    va = sum(c for n, c in cycles.items() if not is_ma[n])
    if schedule == "sequential":
        return ma + va, "commands one after another (no planner)", len(graph.ops), ma, va, 0.0
    # A GEMM's MA commands are one sequencer entry here, their sequencer gap (the
    # cycles from a command's end to the next launch) added to its cycles: each
    # command's launch (its issue, about 100 cycles) hides behind the command before
    # (thousands of cycles at full size), and a list of one entry per MA command
    # makes the planner's sequencer timeline quadratic (18 832 MA commands a layer).
    gap = SequencerTiming().gap
    held = {n: c + (tiles[n] - 1) * gap for n, c in cycles.items()}
    began = time.perf_counter()
    result = plan(graph, _machine(tile, held, writes), max_cycles=_NO_HORIZON)
    took = time.perf_counter() - began
    return result.makespan, result.summary(), len(graph.ops), ma, va, took


_EXPERT = re.compile(r"(?:^|\.)e(\d+)\.")


def _expert_of(cmd):
    """The routed expert whose tensors a command touches (``e<i>.`` in a name), or None."""
    ops = (cmd.a, cmd.b, cmd.c) if isinstance(cmd, MaCmd) else (
        cmd.src, cmd.src2, cmd.src3, cmd.dst, cmd.dst2)
    found = {int(m.group(1)) for o in ops if o is not None
             for m in [_EXPERT.search(o.tensor)] if m}
    return found.pop() if len(found) == 1 else None


def moe_split(program):
    """``(pre, [each routed expert's commands], post)`` of a layer's step: the routed
    experts' commands are those touching an ``e<i>.`` tensor (golden's MoE names each
    expert's rows and weights so), consecutive per expert."""
    marks = [_expert_of(c) for c in program.commands]
    idx = [i for i, e in enumerate(marks) if e is not None]
    if not idx:
        raise ValueError("the layer's step has no routed expert commands")
    first, last = idx[0], idx[-1]
    experts = []
    for i in range(first, last + 1):
        if marks[i] is None:
            raise ValueError(f"command {i} between the routed experts' touches none of them")
        if not experts or marks[i] != marks[i - 1]:
            experts.append([])
        experts[-1].append(program.commands[i])
    return program.commands[:first], experts, program.commands[last + 1:]


def _layer_figures(kind, layers, program, position, tile, schedule, cache, expert_tiles=None,
                   link=None):
    """A layer kind's :class:`LayerKind`; with ``expert_tiles`` (the experts partition's
    N) and ``link`` ((bytes a cycle, latency, bytes of a token's row)), its routed
    experts on the tiles round robin, their rows sent and returned over the layer tile's
    link one after another."""
    cmds = program.commands
    began = time.perf_counter()
    total, summary, nodes, ma, va, took = _schedule(program, cmds, position, tile, schedule,
                                                    cache)
    split = None
    if expert_tiles is not None:
        pre, experts, post = moe_split(program)
        parts = [_schedule(program, part, position, tile, schedule, cache)
                 for part in [pre, post] + experts]
        took += sum(p[-1] for p in parts)
        pre_c, post_c = parts[0][0], parts[1][0]
        each = tuple(p[0] for p in parts[2:])
        load = [[] for _ in range(min(expert_tiles, len(each)))]
        for j, c in enumerate(each):
            load[j % len(load)].append(c)
        per_bytes, latency, row = link
        flits = -(-row // per_bytes)
        # the layer's tile sends the token's row to each other tile with experts, one
        # after the other, and takes each remote expert's output row back in turn
        finish, sent, cycles_out = sum(load[0]), 0, 0
        for m, mine in enumerate(load[1:], start=1):
            arrive = latency + m * flits
            finish = max(finish, arrive + sum(mine) + latency + len(mine) * flits)
            sent += row * (1 + len(mine))
            cycles_out += flits * (1 + len(mine))
        split = ExpertSplit(pre_c, each, post_c, tuple(len(x) for x in load), finish, sent,
                            cycles_out)
        total = pre_c + finish + post_c
        summary = (f"pre {pre_c} + experts {finish} + post {post_c}; the whole layer on one "
                   f"tile: {summary}")
    return LayerKind(kind, tuple(layers), sum(isinstance(c, MaCmd) for c in cmds),
                     sum(not isinstance(c, MaCmd) for c in cmds),
                     sum(c.repeat for c in cmds if not isinstance(c, MaCmd)), nodes,
                     total, ma, va, took, time.perf_counter() - began, summary, split)


# --- the partition ----------------------------------------------------------------------


def partition_layers(cycles, tiles):
    """Consecutive layers on ``tiles`` tiles, every tile at least one layer: the split
    whose busiest tile has the fewest cycles (ties: the earlier cut). Returns the
    ``[(first layer, last layer)]`` of each tile."""
    n = len(cycles)
    if not 1 <= tiles <= n:
        raise ValueError(f"{tiles} tiles for {n} layers: whole layers go on tiles, so 1.."
                         f"{n} tiles")
    pre = [0]
    for c in cycles:
        pre.append(pre[-1] + c)
    inf = float("inf")
    # best[j][i]: the busiest of j tiles over layers 0..i-1; cut[j][i]: where the last begins
    best = [[inf] * (n + 1) for _ in range(tiles + 1)]
    cut = [[0] * (n + 1) for _ in range(tiles + 1)]
    best[0][0] = 0
    for j in range(1, tiles + 1):
        for i in range(j, n - (tiles - j) + 1):
            for s in range(j - 1, i):
                v = max(best[j - 1][s], pre[i] - pre[s])
                if v < best[j][i]:
                    best[j][i], cut[j][i] = v, s
    spans, i = [], n
    for j in range(tiles, 0, -1):
        s = cut[j][i]
        spans.append((s, i - 1))
        i = s
    return spans[::-1]


# --- the estimate -----------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """One decode step on ``tiles`` tiles (cycles at the tile's clock). ``partition``
    "layers": ``spans`` the layers of each tile; "experts": every layer on tile 0, its
    token's routed experts spread over the tiles (:class:`ExpertSplit` per kind)."""
    source: str
    cfg: object
    position: int
    tile: TileParams
    tiles: int
    clock_mhz: float
    schedule: str
    partition: str
    link_bytes: int
    link_latency: int
    kinds: tuple                 # LayerKind
    layer_cycles: tuple          # per layer
    spans: tuple                 # per tile (first, last); the experts partition: all on 0
    handoff_bytes: int           # a token's residual streams (layers) or its row (experts)
    generate_seconds: float
    plan_seconds: float          # the planner's, all layer kinds
    seconds: float               # the whole estimate's

    def _kind_of(self, layer):
        return next(k for k in self.kinds if layer in k.layers)

    @property
    def tile_cycles(self):
        """Cycles each tile is busy in a step (the experts partition: tile 0 its layers'
        own commands and its share of the experts, tile j > 0 its experts)."""
        if self.partition == "layers":
            return tuple(sum(self.layer_cycles[a:b + 1]) for a, b in self.spans)
        busy = [0] * self.tiles
        for i in range(self.cfg.num_hidden_layers):
            sp = self._kind_of(i).split
            busy[0] += sp.pre + sp.post
            for j, e in enumerate(sp.experts):
                busy[j % len(sp.tiles)] += e
        return tuple(busy)

    @property
    def handoff_cycles(self):
        """Cycles of one hand-over of ``handoff_bytes``: the link's latency and the flits."""
        return self.link_latency + -(-self.handoff_bytes // self.link_bytes)

    @property
    def link_bytes_per_step(self):
        if self.partition == "layers":
            return (self.tiles - 1) * self.handoff_bytes
        return sum(self._kind_of(i).split.sent for i in range(self.cfg.num_hidden_layers))

    @property
    def step_cycles(self):
        """One token through every layer: the layers' cycles (the experts partition: the
        hand-overs inside them), and the layer partition's hand-overs between tiles."""
        if self.partition == "layers":
            return sum(self.tile_cycles) + (self.tiles - 1) * self.handoff_cycles
        return sum(self.layer_cycles)

    @property
    def stage_cycles(self):
        """The busiest pipeline stage (the layer partition: a tile or a hand-over); the
        experts partition runs one token at a time: the step."""
        if self.partition == "experts":
            return self.step_cycles
        return max(self.tile_cycles + ((self.handoff_cycles,) if self.tiles > 1 else ()))

    def tokens_per_second(self, cycles):
        return self.clock_mhz * 1e6 / cycles

    def _partition_lines(self, shapes):
        c = self.cfg
        if self.partition == "layers":
            lines = ["partition:"]
            for i, ((a, b), cyc) in enumerate(zip(self.spans, self.tile_cycles, strict=True)):
                held = 2 * sum(int(np.prod(s)) for n, s in shapes.items()
                               if n.startswith("layers.") and a <= int(n.split(".")[1]) <= b)
                lines.append(f"  tile {i}: layers {a}..{b} ({b - a + 1}), {cyc} cycles, "
                             f"weights {held / 2**30:.2f} GiB in bf16")
            hops = self.tiles - 1
            lines.append(
                f"inter-tile traffic a step: {hops} hand-over(s) x {self.handoff_bytes} bytes "
                f"= {hops * self.handoff_bytes} bytes; {self.handoff_cycles} cycles each "
                f"({self.link_latency} + {self.handoff_bytes} / {self.link_bytes}), "
                f"{hops * self.handoff_cycles} in all")
            return lines
        experts = 2 * sum(int(np.prod(s)) for n, s in shapes.items() if ".mlp.experts." in n)
        dense = 2 * sum(int(np.prod(s)) for s in shapes.values()) - experts
        held = experts * -(-c.n_routed_experts // self.tiles) / c.n_routed_experts
        lines = [f"partition: every layer on tile 0; routed expert e of every layer on tile "
                 f"e mod {self.tiles} (weights: tile 0 {(dense + held) / 2**30:.2f} GiB, "
                 f"the others up to {held / 2**30:.2f} GiB in bf16)"]
        for k in self.kinds:
            sp = k.split
            lines.append(f"  {k.kind}: the token's {len(sp.experts)} experts on tiles "
                         + ", ".join(f"{j}: {n}" for j, n in enumerate(sp.tiles) if n)
                         + f"; {sp.pre} before them, {sp.phase} for them (one expert "
                         f"{max(sp.experts)}), {sp.post} after; {sp.sent} bytes over the "
                         f"links, {sp.link_cycles} cycles on tile 0's link")
        lines.append(f"inter-tile traffic a step: {self.link_bytes_per_step} bytes (the "
                     f"token's row, {self.handoff_bytes} bytes, to each other tile with "
                     "experts and each remote expert's row back, every layer)")
        return lines

    def report(self):
        """The estimate and every assumption it rests on, as text."""
        c, t = self.cfg, self.tile
        shapes = weight_shapes(c)
        weights = 2 * sum(int(np.prod(s)) for s in shapes.values())
        if self.partition == "layers":
            why = (f"  partition: whole layers on tiles, consecutive layers together, the split "
                   f"whose busiest tile has the fewest cycles; why: a layer reads the one before "
                   f"only through the token's residual streams ({c.hc_mult} x {c.hidden_size} bf16 "
                   f"= {self.handoff_bytes} bytes), the smallest cut of the step; each tile's "
                   f"memory holds its layers' weights and state")
        else:
            why = ("  partition: experts spread across tiles: each layer's own commands on tile 0, "
                   "its routed experts round robin over the tiles (the token's j-th on tile j mod "
                   f"N: an even dispatch); why: at one token the {c.num_experts_per_tok} routed "
                   "experts are independent GEMMs that run at once on other tiles, for a "
                   f"{c.hidden_size}-element bf16 row ({self.handoff_bytes} bytes) each way; "
                   "the layer's commands before the routed experts, each expert's and those "
                   "after them are scheduled apart (no overlap between the three)")
        lines = [
            f"estimate: one decode step of deepseek-v4 ({self.source}: {c.num_hidden_layers} "
            f"layers, hidden {c.hidden_size}, {c.num_attention_heads} heads of {c.head_dim}, "
            f"{c.n_routed_experts} routed experts, {c.num_experts_per_tok} a token) at position "
            f"{self.position} on {self.tiles} tile(s), {self.schedule}, partition "
            f"{self.partition}",
            "assumptions:",
            f"  tile: MA P={t.p}, VA L={t.lanes}, memory bus {t.bus_bytes} bytes a cycle, "
            f"clock {self.clock_mhz:g} MHz; the MA, the VA and an MC on a 2x2 Muon mesh "
            "(the tile's placement)",
            f"  command cycles: {_path_note(t)}",
            "  op program: golden/program_dsv4.py's decode step of each layer, bf16 GEMMs "
            "(weights in bf16, not the published FP8 / FP4), made from the shapes; the MoE's "
            f"{c.num_experts_per_tok} experts are 0..{c.num_experts_per_tok - 1} (at one token "
            "every expert's commands are alike)",
            "  schedule: " + ("the DSTP planner (plan/dstp.py) per layer, one node per VA "
                              "command and one per GEMM (its MA commands back to back), "
                              "launched by the tile's command sequencer; a layer starts when "
                              "the one before has ended (a barrier)" if self.schedule == "planned"
                              else "the commands one after another, as the host runtime runs "
                              "them; the host's register accesses not counted"),
            why,
            f"  inter-tile link: tiles one hop apart on a Muon mesh, {self.link_bytes} bytes "
            f"a cycle, {self.link_latency} cycles zero-load latency (golden/muon.py); "
            "a tile's transfers one after another on its link, no other contention",
            "  not counted: the host (writing the token id and the step's constants, "
            "reading the output), the embedding, the output head and the next-token "
            "prediction layers, the weights' loading, prefill",
            f"layer kinds ({self.generate_seconds:.2f} s to make the programs, "
            f"{sum(k.seconds for k in self.kinds):.2f} s to time them, of which "
            f"{self.plan_seconds:.2f} s in the planner; {self.seconds:.2f} s in all):",
        ]
        for k in self.kinds:
            lines.append(
                f"  {k.kind}: layers {_ranges(k.layers)}; {k.ma_commands} MA + {k.va_commands} "
                f"VA commands ({k.va_starts} VA STARTs), {k.nodes} nodes; MA {k.ma_cycles}, VA "
                f"{k.va_cycles} command cycles; {k.cycles} cycles a layer "
                f"({k.seconds:.2f} s, the planner {k.plan_seconds:.2f} s; {k.plan_summary})")
        lines += self._partition_lines(shapes)
        step, stage = self.step_cycles, self.stage_cycles
        lines.append(f"step: {step} cycles = {step / self.clock_mhz / 1e3:.3f} ms at "
                     f"{self.clock_mhz:g} MHz: {self.tokens_per_second(step):.3f} tokens/s for "
                     "one sequence")
        if self.partition == "layers" and self.tiles > 1:
            lines.append(f"pipelined: {self.tiles} sequences in flight, one token every "
                         f"{stage} cycles (the busiest stage): "
                         f"{self.tokens_per_second(stage):.3f} tokens/s in all")
        lines.append(f"weights of the model in bf16: {weights / 2**30:.2f} GiB")
        return "\n".join(lines)


def _path_note(tile):
    """The estimate's command cycles, one line: the models and the memory path."""
    ma, va = tile.models()
    where = "a standalone top's memory (no tile path)" if tile.path is None else (
        "the tile's memory path from the block's node (plan.machine.TILE_PATH, the planner's "
        f"tile machine model: MA +{ma.path.read} read, +{ma.path.write} write; VA "
        f"+{va.path.read} read, +{va.path.write} write; +{ma.path.burst_gap} a read burst, "
        f"+{ma.path.write_store} a written word beyond a burst's first)")
    return ("golden/ma_latency.py and golden/va_latency.py per command (the program's "
            f"addresses) at a memory latency of {tile.memory_latency} at the core's port, "
            f"through {where}")


def _ranges(layers):
    out, start = [], layers[0]
    for prev, cur in zip(layers, layers[1:] + (None,), strict=True):
        if cur != prev + 1:
            out.append(f"{start}" if start == prev else f"{start}..{prev}")
            start = cur
    return ", ".join(out)


def estimate(cfg=None, *, source="the tile preset", position=None, tiles=1, tile=None,
             clock_mhz=DEFAULT_CLOCK_MHZ, schedule="planned", partition="layers",
             link_bytes=None, link_latency=None):
    """The :class:`Estimate` of one decode step of ``cfg`` (default the tile's
    ``deepseek-v4`` preset, at its position 63; a configuration at
    :data:`DEFAULT_POSITION`) on ``tiles`` tiles of ``tile`` (:class:`TileParams`) at
    ``clock_mhz``, whole layers on tiles (``partition`` "layers") or each layer's routed
    experts spread over them ("experts"). ``link_bytes`` (default the bus's) and
    ``link_latency`` (default one Muon hop's zero-load latency) describe the link between
    two tiles."""
    started = time.perf_counter()
    tile = tile or TileParams()
    if cfg is None:
        cfg = PRESETS["deepseek-v4"].config
        position = PRESETS["deepseek-v4"].position if position is None else position
    position = DEFAULT_POSITION if position is None else position
    if isinstance(tiles, bool) or not isinstance(tiles, int) or tiles < 1:
        raise ValueError(f"the number of tiles must be an integer >= 1, not {tiles!r}")
    if not (isinstance(clock_mhz, (int, float)) and np.isfinite(clock_mhz) and clock_mhz > 0):
        raise ValueError(f"the clock must be a positive number of MHz, not {clock_mhz!r}")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, not {schedule!r}")
    if partition not in PARTITIONS:
        raise ValueError(f"partition must be one of {PARTITIONS}, not {partition!r}")
    link_bytes = tile.bus_bytes if link_bytes is None else link_bytes
    link_latency = zero_load_latency((0, 0), (1, 0)) if link_latency is None else link_latency
    if not _pow2(link_bytes):
        raise ValueError(f"the link's bytes a cycle must be a power of two, not {link_bytes}")
    if isinstance(link_latency, bool) or not isinstance(link_latency, int) or link_latency < 0:
        raise ValueError(f"the link's latency must be an integer >= 0 cycles, not {link_latency!r}")
    n = cfg.num_hidden_layers
    if partition == "layers" and tiles > n:
        raise ValueError(f"{tiles} tiles for {n} layers: whole layers go on tiles, so at "
                         f"most {n} tiles")
    if partition == "experts" and tiles > cfg.n_routed_experts:
        raise ValueError(f"{tiles} tiles for {cfg.n_routed_experts} routed experts: at most "
                         f"{cfg.n_routed_experts} tiles")
    handoff = 2 * (cfg.hc_mult if partition == "layers" else 1) * cfg.hidden_size
    groups = {}
    for i in range(n):
        groups.setdefault(_kind_name(cfg, i), []).append(i)
    began = time.perf_counter()
    programs = layer_programs(cfg, position, tile.block_config(), [g[0] for g in groups.values()])
    made = time.perf_counter() - began
    cache = {}
    split = None if partition == "layers" else tiles
    kinds = tuple(_layer_figures(kind, layers, programs[layers[0]], position, tile, schedule,
                                 cache, split, (link_bytes, link_latency, handoff))
                  for kind, layers in groups.items())
    per_layer = [0] * n
    for k in kinds:
        for i in k.layers:
            per_layer[i] = k.cycles
    spans = partition_layers(per_layer, tiles) if partition == "layers" else [(0, n - 1)]
    return Estimate(source, cfg, position, tile, tiles, float(clock_mhz), schedule, partition,
                    link_bytes, link_latency, kinds, tuple(per_layer), tuple(spans), handoff,
                    made, sum(k.plan_seconds for k in kinds), time.perf_counter() - started)
