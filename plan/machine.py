"""The target of a plan: blocks on the Muon mesh, the MC's channels, and the latency
model of every block kind.

The design notes' scheduling contract (CSA) has every compute unit report its minimum
schedulable unit (MSU) and its latency; here that is a :class:`LatencyModel`, one per
block kind. The MA's is the RTL-fitted model of :mod:`golden.ma_latency`, the VA's
that of :mod:`golden.va_latency` (:class:`VaLatency`); :class:`LinearLatency` is the
interface's simplest implementation, for blocks whose fitted model is not written yet
(the cache-migrate engine's: its numbers are a placeholder, not a measurement).
"""

from dataclasses import dataclass, field

from golden.ma_latency import MaCommand, ma_cycles
from golden.muon import decision_lead
from golden.program import MA_MAX
from golden.va import VaCommand
from golden.va_latency import va_repeat_cycles
from spec.codes import VaOpcode
from spec.tile import DEFAULT_NODES

from .errors import IRError
from .ir import BarrierOp

__all__ = ["LatencyModel", "MaLatency", "VaLatency", "LinearLatency", "TableLatency", "Block",
           "Machine", "OP_BLOCKS", "MASKED_OP_TYPES", "op_bytes", "SequencerTiming",
           "MA_ENTRY_WRITES", "VA_ENTRY_WRITES", "VA_REPEAT_WRITES", "MemoryPath", "STANDALONE",
           "TilePathModel", "TILE_PATH", "TILE_MARGINS", "TILE_ERROR", "TILE_EXCLUSIVE",
           "tile_blocks", "TILE_MC_NODE"]

# What block kind runs an op of each op_type (one block command per IR node).
OP_BLOCKS = {
    "gemm": "ma",
    "attention": "va",      # the VA's masked gather of KV entries, softmax, weighted sum
    "gather": "va", "scatter": "va", "norm": "va", "rope": "va", "softmax": "va",
    "activation": "va", "elementwise": "va", "quantize": "va", "dequantize": "va",
    "reduce": "va", "topk": "va",
    "migrate": "cme",       # the cache-migrate engine: the notes' context-management path
}
# Op types whose block gathers through a sparsity mask (the VA's CSR gather).
MASKED_OP_TYPES = frozenset({"attention", "gather"})


def op_bytes(op, graph):
    """(bytes read, bytes written) of an op: its ``traffic`` if given, else the sizes of
    its input and output tensors."""
    if op.traffic is not None:
        return op.traffic
    tensors = graph.tensor
    return (sum(tensors[t].nbytes for t in op.inputs),
            sum(tensors[t].nbytes for t in op.outputs))


@dataclass(frozen=True)
class MemoryPath:
    """What a block's memory port sees of the way to memory, beyond the memory's own
    ``latency`` (the models' parameter: address to first word, last write word to the
    answer), in cycles: ``read`` more from a read burst's address to its first word,
    ``write`` more from a write burst's last word to its answer, ``burst_gap`` cycles the
    read channel loses after every burst's words (an answer packet's head flit),
    ``write_store`` cycles per word of a write burst beyond its first before its answer
    (the words are stored and forwarded on the way). :data:`STANDALONE` (all 0) is a
    standalone top's memory; :class:`TilePathModel` gives the tile's per block."""
    read: int = 0
    write: int = 0
    burst_gap: int = 0
    write_store: int = 0

    def __post_init__(self):
        if min(self.read, self.write, self.burst_gap, self.write_store) < 0:
            raise ValueError(f"a memory path's cycles are >= 0, not {self}")

    def kwargs(self, latency):
        """The golden models' keyword arguments for memory ``latency``."""
        return {"latency": latency + self.read, "write_latency": latency + self.write,
                "burst_gap": self.burst_gap, "write_store": self.write_store}


STANDALONE = MemoryPath()


@dataclass(frozen=True)
class TilePathModel:
    """The tile's memory path (``hdl/tile``: the block's requester NI, the Muon mesh, the
    memory NI at the MC's node, the MC's client channels, ``MemPortToAxi4``) as a
    :class:`MemoryPath` of a block ``hops`` mesh hops from the MC's node: a read pays
    ``read_base + hop·hops`` cycles more than on the standalone top (the request and the
    answer each cross ``hops`` links), a write ``write_base + hop·hops``; every read
    burst's answer packet has a head flit (``burst_gap``); a write burst's words are
    stored and forwarded twice before its answer (by the requester NI, which sends a chunk
    once it has its words, and by the memory NI, which sends an MC write run once it has
    its words: ``write_store``).

    Fitted on the tile's Verilator build (P=4, L=8, 128-bit bus, memory latency 9 at the
    AXI port, 8 at a core's port; docs/plan.md, "The tile machine model") against every
    command of the ``notes`` decode step run alone (``sim/tile_runtime.py``) and through
    the command sequencer: the VA (1 hop) exact on all 98 commands' 322 STARTs, the MA (2
    hops) within −2 .. +16 cycles."""
    read_base: int = 14
    write_base: int = 15
    hop: int = 4
    burst_gap: int = 1
    write_store: int = 2

    def path(self, hops):
        return MemoryPath(self.read_base + self.hop * hops, self.write_base + self.hop * hops,
                          self.burst_gap, self.write_store)


TILE_PATH = TilePathModel()
TILE_ERROR = {"ma": (-28, 16), "va": (-8, 2)}
"""The tile machine model's error on one START, ``(least, most)`` cycles of its measured
cycles (CTR − launch − 2) less the model's, measured on the tile over the ``notes`` and
``deepseek-v4`` steps (4606 STARTs; docs/plan.md): the MA −28 .. +16, the VA −8 .. +2
(exact on 3713 of its 4498 STARTs, +1 .. +2 when a completion log write meets it). The
command sequencer's own list reads are the model's too
(:func:`plan.commands.with_list_reads`: +17 on a START one may meet, 17 fewer when none
does)."""
TILE_MARGINS = {kind: most for kind, (_, most) in TILE_ERROR.items()}
TILE_EXCLUSIVE = (("ma", "va"),)
"""The tile's MA and VA share the memory path (the memory NI's ports, the MC's read and
write channels, the memory) unreserved: a command of one beside a command of the other
waits for the other's bursts (measured: up to +124 cycles on a VA START beside an MA
GEMV, +35 on an MA command), so the tile machine runs one at a time."""
"""Cycles the tile machine model adds to every START of a block kind's commands: the
most its error can be, so that no command ends after its planned cycle."""
TILE_MC_NODE = DEFAULT_NODES["mc"]


def tile_blocks():
    """The tile's blocks at their mesh nodes (``spec.tile.DEFAULT_NODES``)."""
    return (Block("ma0", "ma", DEFAULT_NODES["ma"]), Block("va0", "va", DEFAULT_NODES["va"]),
            Block("cme0", "cme", DEFAULT_NODES["migrate"]))


class LatencyModel:
    """A block kind's latency model: ``cycles(op, graph)`` is the cycles from the
    command's start to its completion (CTR), a positive integer; ``msu`` names the
    block's minimum schedulable unit. Subclasses plug other blocks in."""

    block = None
    msu = None

    def cycles(self, op, graph):
        raise NotImplementedError


@dataclass(frozen=True)
class MaLatency(LatencyModel):
    """The MA's model (:func:`golden.ma_latency.ma_cycles`) for an op of ``tile_shape``
    ``(m, k, n)``; ``accumulate`` when the op reads its own output. The IR carries no
    addresses yet, so operands are taken as bus-aligned and densely strided."""
    p: int = 8
    data_width: int = 128
    memory_latency: int = 6      # cycles, address to first word (the MA tests' memory)
    path: MemoryPath = STANDALONE
    block = "ma"

    @property
    def msu(self):
        return f"{self.p}x{self.p}x{self.p} tile"

    def cycles(self, op, graph):
        if len(op.tile_shape) != 3:
            raise IRError(f"op {op.name}: a gemm's tile_shape is (m, k, n), not "
                          f"{op.tile_shape}")
        m, k, n = op.tile_shape
        if max(m, k, n) > MA_MAX:
            raise IRError(f"op {op.name}: the MA takes M, K and N in 1..{MA_MAX}, not "
                          f"{op.tile_shape} (one IR node is one command; tile larger GEMMs)")
        es = 2 if op.precision == "bf16" else 1
        cmd = MaCommand(m=m, k=k, n=n, bf16=op.precision == "bf16",
                        accumulate=bool(set(op.inputs) & set(op.outputs)),
                        lda=k * es, ldb=n * es, ldc=n * 4,
                        b_addr=m * k * es, c_addr=m * k * es + k * n * es)
        return _ma_cycles_cached(cmd, self.p, self.data_width, self.memory_latency, self.path)


_MA_CACHE = {}


def _ma_cycles_cached(cmd, p, data_width, latency, path=STANDALONE):
    key = (cmd, p, data_width, latency, path)
    if key not in _MA_CACHE:
        _MA_CACHE[key] = ma_cycles(cmd, p=p, data_width=data_width, **path.kwargs(latency))
    return _MA_CACHE[key]


# The VA opcode an op stands for when its name does not say (a graph not lowered from a
# program): one representative command per op_type.
VA_TYPE_OPCODES = {
    "attention": VaOpcode.GATHER_CSR, "gather": VaOpcode.GATHER, "scatter": VaOpcode.SCATTER,
    "norm": VaOpcode.RMSNORM, "rope": VaOpcode.ROPE, "softmax": VaOpcode.SOFTMAX,
    "activation": VaOpcode.SILU, "elementwise": VaOpcode.ADD,
    "quantize": VaOpcode.QUANTIZE, "dequantize": VaOpcode.DEQUANTIZE,
    "reduce": VaOpcode.SUM, "topk": VaOpcode.TOPK,
}
_VA_BASES = (0x10000, 0x1010000, 0x2020000, 0x3030000, 0x4040000)   # src … dst2


def va_opcode(op):
    """The VA opcode of an op: the name :func:`plan.lower.lower_program` gives it ends
    in ``.<opcode name>``; else the op_type's representative (:data:`VA_TYPE_OPCODES`)."""
    name = op.name.rsplit(".", 1)[-1].upper()
    if name in VaOpcode.__members__:
        return VaOpcode[name]
    if op.op_type not in VA_TYPE_OPCODES:
        raise IRError(f"op {op.name}: no VA command for op_type {op.op_type!r}")
    return VA_TYPE_OPCODES[op.op_type]


@dataclass(frozen=True)
class VaLatency(LatencyModel):
    """The VA's model (:func:`golden.va_latency.va_cycles`) for an op of ``tile_shape``
    ``(repeat, length)`` (``(rows, index_limit, length)`` for GATHER_CSR): ``repeat``
    commands one after the other from reset. The IR carries no addresses, so operands are
    taken as aligned and apart (each its own 16 MiB region); TOPK's K comes from the op's
    traffic (6·K bytes written a command), the gathers' element is 2 bytes, stride one
    element, and no index is skipped."""
    lanes: int = 32
    data_width: int = 128
    fn_lanes: int | None = None
    memory_latency: int = 8
    path: MemoryPath = STANDALONE
    block = "va"

    @property
    def msu(self):
        return f"one VA command ({self.data_width // 16} bf16 elements a cycle)"

    def command(self, op):
        """(the VaCommand an op stands for, its repeat count)."""
        opcode = va_opcode(op)
        shape = tuple(op.tile_shape)
        if opcode == VaOpcode.GATHER_CSR:
            if len(shape) != 3:
                raise IRError(f"op {op.name}: a CSR gather's tile_shape is (rows, "
                              f"index_limit, length), not {shape}")
            (rows, limit, n), repeat = shape, 1
        else:
            if len(shape) != 2:
                raise IRError(f"op {op.name}: a VA op's tile_shape is (repeat, length), not "
                              f"{shape}")
            (repeat, n), rows, limit = shape, 0, 0
        if not (isinstance(n, int) and 1 <= n <= 65536 and isinstance(repeat, int)
                and repeat >= 1):
            raise IRError(f"op {op.name}: a VA command has 1..65536 elements and a repeat "
                          f"of at least 1, not tile_shape {shape}")
        k = 8
        if opcode in (VaOpcode.TOPK, VaOpcode.TOPK_WIDE) and op.traffic is not None:
            k = max(1, op.traffic[1] // (6 * repeat))
        if opcode == VaOpcode.ROPE:
            n += n % 2
        src, src2, src3, dst, dst2 = _VA_BASES
        cmd = VaCommand(opcode, n, src=src, src2=src2, src3=src3, dst=dst, dst2=dst2,
                        stride=2, esize=1, k=min(k, n), index_limit=max(limit, 1), rows=rows)
        return cmd, repeat

    def cycles(self, op, graph):
        cmd, repeat = self.command(op)
        return va_repeat_cycles([cmd] * repeat, lanes=self.lanes, data_width=self.data_width,
                                fn_lanes=self.fn_lanes, **self.path.kwargs(self.memory_latency))


@dataclass(frozen=True)
class LinearLatency(LatencyModel):
    """``setup + ceil((bytes read + bytes written) / bytes_per_cycle)`` cycles: a block
    that streams its operands at a fixed rate. A placeholder until the block's model is
    fitted on its RTL, as the MA's is."""
    block: str = "va"
    setup: int = 16
    bytes_per_cycle: int = 16

    def __post_init__(self):
        if self.setup < 0 or self.bytes_per_cycle < 1:
            raise ValueError("setup must be >= 0 and bytes_per_cycle >= 1")

    @property
    def msu(self):
        return f"{self.bytes_per_cycle} bytes a cycle"

    def cycles(self, op, graph):
        read, written = op_bytes(op, graph)
        return self.setup + -(-(read + written) // self.bytes_per_cycle)


@dataclass(frozen=True)
class TableLatency(LatencyModel):
    """Cycles looked up by op name: ``table`` maps a name to the cycles of each of its
    commands (one per START; :func:`plan.lower.with_tile` fills it from the program's
    commands with their addresses), ``margin`` cycles added to each; an op not in it is
    ``base``'s. A repeated command's cycles are its repetitions', each at the longest
    repetition's (the sequencer's list launches them evenly over the op)."""
    base: LatencyModel
    table: dict = field(default_factory=dict)
    margin: int = 0

    @property
    def block(self):
        return self.base.block

    @property
    def msu(self):
        return self.base.msu

    def cycles(self, op, graph):
        per = self.table.get(op.name)
        if per is None:
            return self.base.cycles(op, graph)
        return len(per) * (max(per) + self.margin)


# Register writes of a command-list entry, START included, at most (docs/tile/sequencer.md):
# the MA's 10 command registers and its TAT (4 entries of 3 registers, written by the first
# MA entry of a list: every MA op is counted with them, the planner does not know which
# one runs first), the VA's 18 command registers; a VA repetition after the first
# rewrites only the address registers of its stepping operands (LO and HI, 2 each).
MA_ENTRY_WRITES = 10 + 12 + 1
VA_ENTRY_WRITES = 18 + 1
VA_REPEAT_WRITES = 5 * 2 + 1


@dataclass(frozen=True)
class SequencerTiming:
    """The tile's command sequencer as a planner resource (``hdl/tile/sequencer.py``,
    docs/tile/sequencer.md): it launches one entry at a time, and an entry can launch
    ``7 + deps + write_cycles · (writes − 1)`` cycles after the entry before it launched
    (its issue), where ``write_cycles`` is 3 with a slave answering a write two cycles
    later, plus ``decoder`` cycles through the tile's control decoder; a command of d
    cycles launched at L has its end seen at L + 2 + decoder + d, and a dependent (or the
    target's next entry) can launch a cycle later: ``gap`` = 3 + decoder cycles of every
    command are the sequencer's.

    ``writes`` maps an op name to the register writes of each of its entries (START
    included, an upper bound; :func:`plan.lower.sequencer_writes` for a lowered program);
    an op not in it counts by its block kind (:data:`MA_ENTRY_WRITES`, the VA's
    :data:`VA_ENTRY_WRITES` then :data:`VA_REPEAT_WRITES` a repetition, ``repeat`` its
    ``tile_shape[0]``; one entry of :data:`VA_ENTRY_WRITES` for any other kind).
    ``extra_writes`` are writes every entry carries beyond its command's (a test bench's
    model blocks take their duration in one). An entry's dependencies are at most one
    per block kind (its first), one (its target's previous entry) for a repetition.

    ``extra``: None, an op's entries evenly ``slot`` cycles apart; a dict (the tile
    machine model's, :func:`plan.commands.with_list_reads`): each entry launches once
    the one before has had its cycles, its ``extra[op name][k]`` cycles (the
    sequencer's own list reads meeting that command) and the ``gap``, so the op's last
    command has exactly its cycles before the op's finish."""
    decoder: int = 1
    extra_writes: int = 0
    writes: dict | None = None
    extra: dict | None = None

    def __post_init__(self):
        if self.decoder < 0 or self.extra_writes < 0:
            raise ValueError("decoder and extra_writes must be >= 0")

    @property
    def write_cycles(self):
        return 3 + self.decoder

    @property
    def gap(self):
        return 3 + self.decoder

    def issue(self, writes, deps):
        """Cycles from the launch of the entry before to the first cycle this can launch."""
        return 7 + deps + self.write_cycles * (writes + self.extra_writes - 1)

    def entry_writes(self, op, kind):
        """The register writes of each entry of ``op`` (one entry per START)."""
        if self.writes is not None and op.name in self.writes:
            return tuple(self.writes[op.name])
        if kind == "ma":
            return (MA_ENTRY_WRITES,)
        shape = tuple(op.tile_shape)
        repeat = shape[0] if kind == "va" and len(shape) == 2 else 1
        return (VA_ENTRY_WRITES,) + (VA_REPEAT_WRITES,) * (repeat - 1)

    def entries(self, op, kind, cycles, kinds):
        """``(held, [(launch offset from the op's start, issue cycles)])``: the op holds
        its block ``held`` cycles. Without ``extra`` its entries launch ``slot`` cycles
        apart and ``held`` is ``slot · entries`` (each command's cycles, ``cycles`` over
        its entries, and the ``gap``, or the longest issue of a repetition if longer);
        with it, see the class."""
        writes = self.entry_writes(op, kind)
        n = len(writes)
        issues = [self.issue(w, kinds if k == 0 else 1) for k, w in enumerate(writes)]
        each = -(-cycles // n)
        if self.extra is None:
            slot = max([each + self.gap] + issues[1:])
            return n * slot, [(k * slot, issue) for k, issue in enumerate(issues)]
        extra = self.extra.get(op.name, (0,) * n)
        at, out = 0, []
        for k, issue in enumerate(issues):
            if k:
                at += max(each + extra[k - 1] + self.gap, issue)
            out.append((at, issue))
        return at + each + extra[-1] + self.gap, out


@dataclass(frozen=True)
class Block:
    """One block instance: its ``name``, ``kind`` (ma, va, cme) and mesh node (x, y)."""
    name: str
    kind: str
    node: tuple


def _default_blocks():
    return (Block("ma0", "ma", (1, 0)), Block("va0", "va", (0, 1)),
            Block("cme0", "cme", (1, 1)))


def _default_models():
    return {"ma": MaLatency(), "va": LinearLatency("va"),
            "cme": LinearLatency("cme", setup=8)}


@dataclass(frozen=True)
class Machine:
    """The tile as the planner sees it. ``mesh`` is (cols, rows); the MC sits at
    ``mc_node`` with ``mc_channels`` client channels; a Muon link moves ``flit_bytes``
    a cycle; the RBR table has ``rbr_slots`` entries. The default placement is the
    planner's assumption until the integrated tile fixes it. ``sequencer``: the tile's
    command sequencer launches the ops (:class:`SequencerTiming`), or None (the host
    does, at no cost the planner counts). ``exclusive``: groups of block kinds of which
    one block runs at a time (their ops share one timeline)."""
    blocks: tuple = field(default_factory=_default_blocks)
    models: dict = field(default_factory=_default_models)
    mesh: tuple = (2, 2)
    mc_node: tuple = (0, 0)
    mc_channels: int = 4
    flit_bytes: int = 16
    rbr_slots: int = 8
    op_blocks: dict = field(default_factory=lambda: dict(OP_BLOCKS))
    sequencer: SequencerTiming | None = None
    exclusive: tuple = ()

    def __post_init__(self):
        cols, rows = self.mesh
        nodes = [b.node for b in self.blocks] + [tuple(self.mc_node)]
        for node in nodes:
            if not (0 <= node[0] < cols and 0 <= node[1] < rows):
                raise ValueError(f"node {node} is outside the {cols}x{rows} mesh")
        if len(set(nodes)) != len(nodes):
            raise ValueError("two blocks (or a block and the MC) share a mesh node")
        if len({b.name for b in self.blocks}) != len(self.blocks):
            raise ValueError("two blocks share a name")
        for kind in {b.kind for b in self.blocks}:
            if kind not in self.models:
                raise ValueError(f"no latency model for block kind {kind}")
        kinds = [k for group in self.exclusive for k in group]
        if len(set(kinds)) != len(kinds):
            raise ValueError("a block kind is in two exclusive groups")
        if self.mc_channels < 1 or self.flit_bytes < 1 or self.rbr_slots < 1:
            raise ValueError("mc_channels, flit_bytes and rbr_slots must be at least 1")

    @property
    def rbr_lead(self):
        """Cycles from an RBR request to the earliest start it can be granted."""
        return decision_lead(self.rbr_slots, *self.mesh)

    def kind_of(self, op):
        if isinstance(op, BarrierOp):
            return None
        kind = self.op_blocks.get(op.op_type)
        if kind is None:
            raise IRError(f"op {op.name}: no block runs op_type {op.op_type!r} (known: "
                          f"{', '.join(sorted(self.op_blocks))})")
        if not any(b.kind == kind for b in self.blocks):
            raise IRError(f"op {op.name}: op_type {op.op_type} runs on a {kind}, and the "
                          "machine has none")
        return kind

    def instances(self, kind):
        return [b for b in self.blocks if b.kind == kind]

    def cycles(self, op, graph):
        """The latency model's cycles for ``op`` on its block kind."""
        cycles = self.models[self.kind_of(op)].cycles(op, graph)
        if isinstance(cycles, bool) or not isinstance(cycles, int) or cycles < 1:
            raise IRError(f"op {op.name}: the {self.kind_of(op)} latency model gave "
                          f"{cycles!r}, not a positive number of cycles")
        return cycles

    def flits(self, nbytes):
        return -(-nbytes // self.flit_bytes)
