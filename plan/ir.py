"""CircuitFlow IR: the nodes of an inference step, with their timing contract in cycles.

A :class:`Graph` holds named tensors and an ordered list of ops. The node types follow
the design notes: :class:`PrefillOp`, :class:`DecodeOp` and :class:`CacheMigrateOp` each
compute one ``op_type`` (one block command: a whole GEMM, not its P×P tiles) and carry

- ``inputs`` / ``outputs``: tensor names;
- ``precision``: ``bf16`` or ``int8``;
- ``tile_shape``: the command's shape in elements (``(m, k, n)`` for a GEMM,
  ``(rows, length, dim)`` for a masked gather/attention, ...);
- ``latency_bound``: cycles the op may take at most, checked against the block's latency
  model (:mod:`plan.checks`);
- ``dependency``: the STDG entries ``(tensor, "read"|"write", offset)``, ``offset`` in
  cycles from the op's stage zero (``prefill_start``, ``decode_token_<n>_start``, and
  the project's ``cache_migrate_start``): the op accesses that tensor no earlier than
  that cycle; a tensor of ``inputs``/``outputs`` without an entry has offset 0;
- ``sparsity_mask``: a :class:`SparsityMask` (CSR only, checked by :mod:`plan.checks`);
- ``traffic``: ``(bytes read, bytes written)`` when the op touches only part of its
  tensors (a K tile of a weight); None: all of its inputs and outputs;
- ``timestamp``: the absolute start cycle. It is not a constructor argument: the planner
  sets it (:meth:`plan.dstp.Plan.stamped_graph`) and the JSON reader restores it.

The STDG's edges come from the tensors: within a *phase* an op that reads a tensor
depends on the op that writes it. A :class:`BarrierOp` ends a phase: it waits for every
op before it, every op after it waits for it, and a read after it never depends on a
write after it. That is how a cycle (``a`` reads ``x`` writes ``y``, ``b`` reads ``y``
writes ``x``) is broken. A tensor has at most one writer per phase, unless it is
``ordered``: then its accesses keep program order (a read after the last write before
it, a write after that write and every read since), as in a sequential program.

:func:`graph_to_json` and :func:`graph_from_json` round-trip a graph exactly; the reader
validates everything it reads and raises :class:`plan.errors.IRFormatError` naming the
field.
"""

import json
import re
from dataclasses import dataclass, field, replace
from functools import cached_property

from spec.codes import TrafficClass

from .errors import IRError, IRFormatError

__all__ = ["PRECISIONS", "DTYPES", "Tensor", "Dependency", "SparsityMask", "PrefillOp",
           "DecodeOp", "CacheMigrateOp", "BarrierOp", "Graph", "graph_to_json",
           "graph_from_json", "FORMAT", "VERSION"]

FORMAT = "v4hw-circuitflow"
# 2: tensors carry ``ordered``; 3: ops carry ``traffic``. Older files still read.
VERSION = 3
PRECISIONS = ("bf16", "int8")
DTYPES = {"int8": 1, "bf16": 2, "int32": 4, "fp32": 4}
ACCESSES = ("read", "write")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")


def _check_name(what, value):
    if not isinstance(value, str) or not _NAME.match(value):
        raise IRError(f"{what} must be a name (letters, digits, _ . -), not {value!r}")


def _check_int(what, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise IRError(f"{what} must be an integer >= {minimum}, not {value!r}")


@dataclass(frozen=True)
class Tensor:
    """A tensor in memory: ``shape`` in elements, ``dtype`` one of :data:`DTYPES`.
    ``ordered``: its accesses keep program order (see :meth:`Graph.edges`), so several
    ops may write it in one phase, as a sequential program of commands does."""
    name: str
    shape: tuple
    dtype: str
    ordered: bool = False

    def __post_init__(self):
        _check_name("a tensor's name", self.name)
        if not isinstance(self.shape, tuple) or not self.shape:
            raise IRError(f"tensor {self.name}: shape must be a non-empty tuple")
        for extent in self.shape:
            _check_int(f"tensor {self.name}: each extent", extent, 1)
        if self.dtype not in DTYPES:
            raise IRError(f"tensor {self.name}: dtype must be one of {sorted(DTYPES)}, "
                          f"not {self.dtype!r}")
        if not isinstance(self.ordered, bool):
            raise IRError(f"tensor {self.name}: ordered must be True or False")

    @property
    def nbytes(self):
        total = DTYPES[self.dtype]
        for extent in self.shape:
            total *= extent
        return total


@dataclass(frozen=True)
class Dependency:
    """An STDG entry: the op accesses ``tensor`` (``read`` or ``write``) no earlier than
    ``offset`` cycles after its stage's zero."""
    tensor: str
    access: str
    offset: int = 0

    def __post_init__(self):
        _check_name("a dependency's tensor", self.tensor)
        if self.access not in ACCESSES:
            raise IRError(f"dependency on {self.tensor}: access must be read or write, "
                          f"not {self.access!r}")
        _check_int(f"dependency on {self.tensor}: offset", self.offset, 0)


@dataclass(frozen=True)
class SparsityMask:
    """A sparsity mask of shape ``(rows, cols)``. ``layout`` ``"csr"``: ``tensors`` are
    the row pointers (``rows + 1`` entries) and the column indices; ``"dense"``: one
    tensor of ``rows × cols`` flags (which the VA's gather cannot take)."""
    layout: str
    shape: tuple
    tensors: tuple

    def __post_init__(self):
        if not isinstance(self.layout, str):
            raise IRError(f"a sparsity mask's layout must be a string, not {self.layout!r}")
        if not isinstance(self.shape, tuple) or len(self.shape) != 2:
            raise IRError(f"a sparsity mask's shape must be (rows, cols), not {self.shape!r}")
        for extent in self.shape:
            _check_int("a sparsity mask's extent", extent, 1)
        if not isinstance(self.tensors, tuple) or not self.tensors:
            raise IRError("a sparsity mask names its tensors (a non-empty tuple)")
        for name in self.tensors:
            _check_name("a sparsity mask's tensor", name)


@dataclass(frozen=True, kw_only=True)
class _Op:
    name: str
    op_type: str
    inputs: tuple = ()
    outputs: tuple = ()
    precision: str = "bf16"
    tile_shape: tuple = ()
    latency_bound: int
    dependency: tuple = ()
    sparsity_mask: SparsityMask | None = None
    traffic: tuple | None = None
    timestamp: int | None = field(default=None, init=False)

    kind = None          # JSON tag
    traffic_class = None

    def __post_init__(self):
        _check_name("an op's name", self.name)
        _check_name(f"op {self.name}: op_type", self.op_type)
        for what in ("inputs", "outputs", "tile_shape", "dependency"):
            if not isinstance(getattr(self, what), tuple):
                raise IRError(f"op {self.name}: {what} must be a tuple")
        for tensor in self.inputs + self.outputs:
            _check_name(f"op {self.name}: a tensor", tensor)
        if len(set(self.inputs)) != len(self.inputs) or len(set(self.outputs)) != len(
                self.outputs):
            raise IRError(f"op {self.name}: a tensor is listed twice in inputs or outputs")
        if self.precision not in PRECISIONS:
            raise IRError(f"op {self.name}: precision must be one of {PRECISIONS}, not "
                          f"{self.precision!r}")
        for extent in self.tile_shape:
            _check_int(f"op {self.name}: each tile_shape extent", extent, 1)
        _check_int(f"op {self.name}: latency_bound (cycles)", self.latency_bound, 1)
        for dep in self.dependency:
            if not isinstance(dep, Dependency):
                raise IRError(f"op {self.name}: dependency entries must be Dependency")
            listed = self.inputs if dep.access == "read" else self.outputs
            if dep.tensor not in listed:
                where = "inputs" if dep.access == "read" else "outputs"
                raise IRError(f"op {self.name}: dependency ({dep.tensor}, {dep.access}) "
                              f"names a tensor not in its {where}")
        if self.traffic is not None:
            if not isinstance(self.traffic, tuple) or len(self.traffic) != 2:
                raise IRError(f"op {self.name}: traffic must be (bytes read, bytes written)")
            for what, value in zip(("bytes read", "bytes written"), self.traffic, strict=True):
                _check_int(f"op {self.name}: traffic's {what}", value, 0)
        if self.sparsity_mask is not None:
            if not isinstance(self.sparsity_mask, SparsityMask):
                raise IRError(f"op {self.name}: sparsity_mask must be a SparsityMask")
            for tensor in self.sparsity_mask.tensors:
                if tensor not in self.inputs:
                    raise IRError(f"op {self.name}: mask tensor {tensor} is not in its "
                                  "inputs")

    @property
    def stage(self):
        """Name of the stage whose zero the dependency offsets count from."""
        raise NotImplementedError

    def offset(self):
        """The largest dependency offset: the op starts no earlier than stage zero plus
        this (cycles)."""
        return max((dep.offset for dep in self.dependency), default=0)


@dataclass(frozen=True, kw_only=True)
class PrefillOp(_Op):
    """An op of the prefill path (traffic class prefill)."""
    kind = "prefill"
    traffic_class = TrafficClass.PREFILL

    @property
    def stage(self):
        return "prefill_start"


@dataclass(frozen=True, kw_only=True)
class DecodeOp(_Op):
    """An op of the decode path for token ``token`` (traffic class decode)."""
    token: int = 0
    kind = "decode"
    traffic_class = TrafficClass.DECODE

    def __post_init__(self):
        super().__post_init__()
        _check_int(f"op {self.name}: token", self.token, 0)

    @property
    def stage(self):
        return f"decode_token_{self.token}_start"


@dataclass(frozen=True, kw_only=True)
class CacheMigrateOp(_Op):
    """An op of the context-management path (KV-cache moves, traffic class
    cache-migrate); its stage zero ``cache_migrate_start`` is the project's name (the
    notes name only the other two)."""
    kind = "cache_migrate"
    traffic_class = TrafficClass.CACHE_MIGRATE

    @property
    def stage(self):
        return "cache_migrate_start"


@dataclass(frozen=True, kw_only=True)
class BarrierOp:
    """Ends a phase of the graph: starts when every op before it has finished, and every
    op after it starts no earlier (0 cycles, no block)."""
    name: str
    timestamp: int | None = field(default=None, init=False)
    kind = "barrier"

    def __post_init__(self):
        _check_name("a barrier's name", self.name)


OP_KINDS = {cls.kind: cls for cls in (PrefillOp, DecodeOp, CacheMigrateOp, BarrierOp)}
_STAGE = re.compile(r"(prefill_start|cache_migrate_start|decode_token_[0-9]+_start)\Z")


def _stamp(op, timestamp):
    """A copy of ``op`` with its timestamp set (the planner's and the reader's path)."""
    new = replace(op)
    object.__setattr__(new, "timestamp", timestamp)
    return new


@dataclass(frozen=True)
class Graph:
    """Tensors (a tuple of :class:`Tensor`), ops in program order and the stage zeros
    (``{stage name: absolute cycle}``, 0 for a stage not listed)."""
    tensors: tuple
    ops: tuple
    stages: tuple = ()      # ((stage, cycle), ...), sorted by name

    def __post_init__(self):
        if isinstance(self.stages, dict):
            object.__setattr__(self, "stages", tuple(sorted(self.stages.items())))
        object.__setattr__(self, "tensors", tuple(self.tensors))
        object.__setattr__(self, "ops", tuple(self.ops))
        self._validate()

    def _validate(self):
        names = {}
        for tensor in self.tensors:
            if not isinstance(tensor, Tensor):
                raise IRError("graph tensors must be Tensor")
            if tensor.name in names:
                raise IRError(f"tensor {tensor.name} is declared twice")
            names[tensor.name] = tensor
        seen = set()
        for op in self.ops:
            if not isinstance(op, (_Op, BarrierOp)):
                raise IRError(f"graph ops must be IR nodes, not {type(op).__name__}")
            if op.name in seen:
                raise IRError(f"op name {op.name} is used twice")
            seen.add(op.name)
            if isinstance(op, BarrierOp):
                continue
            for tensor in op.inputs + op.outputs:
                if tensor not in names:
                    raise IRError(f"op {op.name}: tensor {tensor} is not declared")
        for stage, cycle in self.stages:
            if not isinstance(stage, str) or not _STAGE.match(stage):
                raise IRError(f"stage {stage!r} is not prefill_start, cache_migrate_start "
                              "or decode_token_<n>_start")
            _check_int(f"stage {stage}: zero cycle", cycle, 0)
        if len({stage for stage, _ in self.stages}) != len(self.stages):
            raise IRError("a stage is listed twice")
        writer = {}
        for phase, ops in enumerate(self.phases()):
            for op in ops:
                for tensor in op.outputs:
                    if names[tensor].ordered:
                        continue
                    if (phase, tensor) in writer:
                        raise IRError(f"tensor {tensor} is written by {writer[phase, tensor]} "
                                      f"and {op.name} in one phase; a BarrierOp between "
                                      "them orders the writes")
                    writer[phase, tensor] = op.name

    @cached_property
    def tensor(self):
        """``{name: Tensor}``."""
        return {t.name: t for t in self.tensors}

    def op(self, name):
        for op in self.ops:
            if op.name == name:
                return op
        raise KeyError(name)

    def stage_zero(self, stage):
        return dict(self.stages).get(stage, 0)

    def phases(self):
        """The compute ops (no barriers) between barriers: a list of lists."""
        phases = [[]]
        for op in self.ops:
            if isinstance(op, BarrierOp):
                phases.append([])
            else:
                phases[-1].append(op)
        return phases

    def edges(self):
        """STDG edges ``(earlier, later, tensor)`` within each phase, in a fixed order
        (the later op's program order, then its inputs', then its outputs').

        A tensor that is not ``ordered`` has one writer per phase, and every op of the
        phase that reads it depends on that writer, wherever it stands in the list.
        An ``ordered`` tensor keeps program order: a read depends on the last write
        before it, a write on the last write and on every read since (an op that reads
        and writes it reads first)."""
        tensors = self.tensor
        found = []
        for ops in self.phases():
            writer = {t: op.name for op in ops for t in op.outputs if not tensors[t].ordered}
            last, readers = {}, {}
            for op in ops:
                for tensor in op.inputs:
                    src = last.get(tensor) if tensors[tensor].ordered else writer.get(tensor)
                    if src is not None and src != op.name:
                        found.append((src, op.name, tensor))
                    if tensors[tensor].ordered:
                        readers.setdefault(tensor, []).append(op.name)
                for tensor in op.outputs:
                    if not tensors[tensor].ordered:
                        continue
                    before = ([last[tensor]] if tensor in last else []) + readers.pop(tensor, [])
                    for src in dict.fromkeys(before):
                        if src != op.name:
                            found.append((src, op.name, tensor))
                    last[tensor] = op.name
        return found


# ---- JSON ------------------------------------------------------------------------------

def _op_to_obj(op):
    obj = {"kind": op.kind, "name": op.name, "timestamp": op.timestamp}
    if isinstance(op, BarrierOp):
        return obj
    obj.update({
        "op_type": op.op_type, "inputs": list(op.inputs), "outputs": list(op.outputs),
        "precision": op.precision, "tile_shape": list(op.tile_shape),
        "latency_bound": op.latency_bound,
        "dependency": [[d.tensor, d.access, d.offset] for d in op.dependency],
        "sparsity_mask": None if op.sparsity_mask is None else {
            "layout": op.sparsity_mask.layout, "shape": list(op.sparsity_mask.shape),
            "tensors": list(op.sparsity_mask.tensors)},
        "traffic": None if op.traffic is None else list(op.traffic),
    })
    if isinstance(op, DecodeOp):
        obj["token"] = op.token
    return obj


def graph_to_obj(graph):
    return {
        "format": FORMAT, "version": VERSION,
        "tensors": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype,
                     "ordered": t.ordered} for t in graph.tensors],
        "stages": {stage: cycle for stage, cycle in graph.stages},
        "ops": [_op_to_obj(op) for op in graph.ops],
    }


def graph_to_json(graph):
    """The graph as JSON text (stable: same graph, same bytes)."""
    return json.dumps(graph_to_obj(graph), indent=1, sort_keys=True) + "\n"


class _Reader:
    """Typed access to parsed JSON; every failure names the field's path."""

    @staticmethod
    def fail(path, message):
        raise IRFormatError(f"{path}: {message}")

    def obj(self, value, path, required, optional=()):
        if not isinstance(value, dict):
            self.fail(path, f"expected an object, got {type(value).__name__}")
        missing = [k for k in required if k not in value]
        if missing:
            self.fail(path, f"missing field {missing[0]!r}")
        unknown = sorted(set(value) - set(required) - set(optional))
        if unknown:
            self.fail(path, f"unknown field {unknown[0]!r}")
        return value

    def int(self, value, path, minimum=0, none=False):
        if value is None and none:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(path, f"expected an integer >= {minimum}, got {value!r}")
        return value

    def str(self, value, path):
        if not isinstance(value, str):
            self.fail(path, f"expected a string, got {value!r}")
        return value

    def list(self, value, path):
        if not isinstance(value, list):
            self.fail(path, f"expected a list, got {type(value).__name__}")
        return value

    def strs(self, value, path):
        return tuple(self.str(v, f"{path}[{i}]") for i, v in enumerate(self.list(value, path)))

    def ints(self, value, path, minimum=1):
        return tuple(self.int(v, f"{path}[{i}]", minimum)
                     for i, v in enumerate(self.list(value, path)))


def _op_from_obj(r, obj, path, version):
    if not isinstance(obj, dict) or "kind" not in obj:
        r.fail(path, "expected an object with a field 'kind'")
    kind = r.str(obj["kind"], f"{path}.kind")
    if kind not in OP_KINDS:
        r.fail(f"{path}.kind", f"expected one of {sorted(OP_KINDS)}, got {kind!r}")
    cls = OP_KINDS[kind]
    if cls is BarrierOp:
        r.obj(obj, path, ("kind", "name", "timestamp"))
        op = BarrierOp(name=r.str(obj["name"], f"{path}.name"))
    else:
        keys = ["kind", "name", "timestamp", "op_type", "inputs", "outputs", "precision",
                "tile_shape", "latency_bound", "dependency", "sparsity_mask"]
        keys += ["traffic"] if version >= 3 else []
        r.obj(obj, path, keys + (["token"] if cls is DecodeOp else []))
        traffic = obj.get("traffic")
        if traffic is not None:
            traffic = r.ints(traffic, f"{path}.traffic", 0)
            if len(traffic) != 2:
                r.fail(f"{path}.traffic", "expected [bytes read, bytes written]")
        deps = []
        for i, entry in enumerate(r.list(obj["dependency"], f"{path}.dependency")):
            where = f"{path}.dependency[{i}]"
            if not isinstance(entry, list) or len(entry) != 3:
                r.fail(where, "expected [tensor, access, offset]")
            deps.append(Dependency(r.str(entry[0], where + "[0]"), r.str(entry[1], where + "[1]"),
                                   r.int(entry[2], where + "[2]")))
        mask = obj["sparsity_mask"]
        if mask is not None:
            where = f"{path}.sparsity_mask"
            r.obj(mask, where, ("layout", "shape", "tensors"))
            mask = SparsityMask(r.str(mask["layout"], where + ".layout"),
                                r.ints(mask["shape"], where + ".shape"),
                                r.strs(mask["tensors"], where + ".tensors"))
        extra = {"token": r.int(obj["token"], f"{path}.token")} if cls is DecodeOp else {}
        op = cls(name=r.str(obj["name"], f"{path}.name"),
                 op_type=r.str(obj["op_type"], f"{path}.op_type"),
                 inputs=r.strs(obj["inputs"], f"{path}.inputs"),
                 outputs=r.strs(obj["outputs"], f"{path}.outputs"),
                 precision=r.str(obj["precision"], f"{path}.precision"),
                 tile_shape=r.ints(obj["tile_shape"], f"{path}.tile_shape"),
                 latency_bound=r.int(obj["latency_bound"], f"{path}.latency_bound", 1),
                 dependency=tuple(deps), sparsity_mask=mask, traffic=traffic, **extra)
    timestamp = r.int(obj["timestamp"], f"{path}.timestamp", none=True)
    return op if timestamp is None else _stamp(op, timestamp)


def graph_from_obj(obj, path="graph"):
    r = _Reader()
    r.obj(obj, path, ("format", "version", "tensors", "stages", "ops"))
    if obj["format"] != FORMAT:
        r.fail(f"{path}.format", f"expected {FORMAT!r}, got {obj['format']!r}")
    version = obj["version"]
    if isinstance(version, bool) or version not in range(1, VERSION + 1):
        r.fail(f"{path}.version", f"this reader knows versions 1 to {VERSION}, got "
               f"{version!r}")
    fields = ("name", "shape", "dtype") + (("ordered",) if version >= 2 else ())
    try:
        tensors = []
        for i, t in enumerate(r.list(obj["tensors"], f"{path}.tensors")):
            where = f"{path}.tensors[{i}]"
            r.obj(t, where, fields)
            ordered = t.get("ordered", False)
            if not isinstance(ordered, bool):
                r.fail(where + ".ordered", f"expected true or false, got {ordered!r}")
            tensors.append(Tensor(r.str(t["name"], where + ".name"),
                                  r.ints(t["shape"], where + ".shape"),
                                  r.str(t["dtype"], where + ".dtype"), ordered))
        stages = obj["stages"]
        if not isinstance(stages, dict):
            r.fail(f"{path}.stages", f"expected an object, got {type(stages).__name__}")
        for stage, cycle in stages.items():
            r.int(cycle, f"{path}.stages.{stage}")
        ops = [_op_from_obj(r, o, f"{path}.ops[{i}]", version)
               for i, o in enumerate(r.list(obj["ops"], f"{path}.ops"))]
        return Graph(tuple(tensors), tuple(ops), stages)
    except IRFormatError:
        raise
    except IRError as error:
        raise IRFormatError(f"{path}: {error}") from None


def graph_from_json(text):
    """Reads :func:`graph_to_json`'s output; raises :class:`IRFormatError` (one line,
    naming the field) on anything else."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as error:
        raise IRFormatError(f"not JSON: {error}") from None
    return graph_from_obj(obj)
