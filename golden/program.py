"""A layer as a program of block commands, and its bit-exact golden interpreter.

A :class:`Program` is a flat memory (every tensor at a byte address, 64-byte aligned) and
a list of commands, each a frozen dataclass: :class:`VaCmd` (one VA opcode of
:class:`spec.codes.VaOpcode`, the proposed ones of :data:`golden.va.PROPOSED_OPCODES`
included), issued ``repeat``
times with its operands advanced by fixed steps) or :class:`MaCmd` (one MA GEMM, shapes
within the MA's 1..128, operands with row strides). :func:`run` executes the list on a
fresh memory image with the golden blocks (:func:`golden.va.execute_proposed`,
:func:`golden.ma.gemm`), so the interpreter *is* the hardware-exact path: the tensors it
leaves are the bits :mod:`golden.hwpath` computes (tested in
``tests/test_golden_program.py``).

Generators (:mod:`golden.program_notes`, :mod:`golden.program_dsv4`) emit the prefill
of ``S`` tokens of a ``notes`` or ``deepseek-v4`` layer, and one decode step from a state
held in the program's memory, for a :class:`BlockConfig` (MA array size P, VA lanes L,
bus width). A program is made for one input: the MoE's dispatch (which token rows each
expert's GEMMs take) is read back from the routing commands' results while the program
is generated (the :class:`Builder` runs each command as it is emitted), as the
tile runtime will read them back. The program format is documented in
``docs/golden/program.md``.
"""

import hashlib
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from spec.codes import ErrorCode, MaMode, VaOpcode

from . import va
from .fp import float_to_bf16_rne
from .ma import gemm
from .ma_latency import MaCommand, ma_cycles
from .va_latency import va_repeat_cycles

__all__ = ["DTYPES", "MA_MAX", "BlockConfig", "Tensor", "Operand", "VaCmd", "MaCmd", "Program",
           "Builder", "Machine", "run", "count_commands", "program_summary",
           "decode_steps", "decode_step_parts", "summary"]

DTYPES = {"bf16": np.uint16, "binary32": np.uint32, "int8": np.int8, "int32": np.int32}
MA_MAX = 128          # the MA's M, K and N are 1..128 (docs/design.md); larger products are tiled
ALIGN = 64            # every tensor starts on a 64-byte boundary


@dataclass(frozen=True)
class BlockConfig:
    """The blocks a program is made for: MA array size ``p``, VA lanes ``lanes`` (a
    power of two; SUM's bits depend on it), bus width ``bus_bits`` and memory
    ``latency`` (cycles, for the MA's latency model)."""
    p: int = 8
    lanes: int = 32
    bus_bits: int = 128
    latency: int = 8

    def __post_init__(self):
        if self.p < 1:
            raise ValueError(f"p must be >= 1, got {self.p}")
        if self.lanes < 1 or self.lanes & (self.lanes - 1):
            raise ValueError(f"lanes must be a power of two, got {self.lanes}")
        if self.bus_bits < 16 or self.bus_bits & (self.bus_bits - 1):
            raise ValueError(f"bus_bits must be a power of two >= 16, got {self.bus_bits}")


@dataclass(frozen=True)
class Tensor:
    """A tensor of the program's memory: ``shape`` (elements, row-major), ``dtype`` one of
    :data:`DTYPES`, byte address ``addr``; ``role``: "input" (written by the host per
    run), "weight" / "const" (written by the host once), "act" (written by commands)."""
    name: str
    shape: tuple
    dtype: str
    addr: int
    role: str

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def itemsize(self):
        return np.dtype(DTYPES[self.dtype]).itemsize

    @property
    def nbytes(self):
        return self.size * self.itemsize


@dataclass(frozen=True)
class Operand:
    """Element ``offset`` of tensor ``tensor``; repetition r of a command uses element
    ``offset + r·step``."""
    tensor: str
    offset: int = 0
    step: int = 0


@dataclass(frozen=True)
class VaCmd:
    """A VA command (the registers of :class:`golden.va.VaCommand`, operands as
    :class:`Operand`), issued ``repeat`` times (repetition r: each operand at
    ``offset + r·step``). ``stride`` is in elements of the source (gather family)."""
    op: int
    length: int
    src: Operand | None = None
    src2: Operand | None = None
    src3: Operand | None = None
    dst: Operand | None = None
    dst2: Operand | None = None
    stride: int = 0
    scalar: int = 0
    k: int = 1
    index_limit: int = 0
    split_half: bool = False
    repeat: int = 1
    stage: str = ""
    block: str = field(default="va", init=False)

    @property
    def opname(self):
        return _opname(self.op)


@dataclass(frozen=True)
class MaCmd:
    """An MA GEMM ``C (M×N) = A (M×K) · B (K×N)`` (or ``C + A·B`` with ``accumulate``).
    ``mode`` a :class:`spec.codes.MaMode`: bf16 operands with binary32 C, or int8 with
    int32 C. Row strides ``lda``, ``ldb``, ``ldc`` in elements. ``b_transposed`` (MODE
    bit 1, ``MaMode.BF16_BT`` / ``INT8_BT``): B is read as N×K, ``B[k][n] = b[n·ldb + k]``,
    the transposed operand of q·Kᵀ."""
    mode: MaMode
    m: int
    k: int
    n: int
    a: Operand
    b: Operand
    c: Operand
    lda: int
    ldb: int
    ldc: int
    accumulate: bool = False
    b_transposed: bool = False
    stage: str = ""
    block: str = field(default="ma", init=False)

    def __post_init__(self):
        for name in ("m", "k", "n"):
            if not 1 <= getattr(self, name) <= MA_MAX:
                raise ValueError(f"MA {name} = {getattr(self, name)} outside 1..{MA_MAX}")

    @property
    def opname(self):
        return f"GEMM_{MaMode(self.mode).name}" + ("_BT" if self.b_transposed else "")


def _opname(op):
    return VaOpcode(op).name


@dataclass(frozen=True)
class Program:
    """Tensors (by name), the command list, the host's initial data (tensor name →
    array: inputs, weights, constants) and the configuration it was made for."""
    config: BlockConfig
    tensors: dict
    commands: tuple
    init: dict

    @property
    def memory_bytes(self):
        return max((t.addr + t.nbytes for t in self.tensors.values()), default=0)


class Machine:
    """A flat memory image and the golden blocks that run commands on it."""

    def __init__(self, config, tensors, size=0):
        self.config, self.tensors = config, tensors
        self.mem = np.zeros(size, np.uint8)

    def grow(self, size):
        if size > self.mem.size:
            self.mem = np.concatenate([self.mem, np.zeros(max(size, 2 * self.mem.size) - self.mem.size,
                                                          np.uint8)])

    def view(self, name):
        t = self.tensors[name]
        return self.mem[t.addr: t.addr + t.nbytes].view(DTYPES[t.dtype])

    def read(self, name):
        """A copy of tensor ``name``, in its shape."""
        return self.view(name).reshape(self.tensors[name].shape).copy()

    def write(self, name, data):
        t = self.tensors[name]
        data = np.asarray(data)
        if data.dtype != DTYPES[t.dtype] or data.size != t.size:
            raise ValueError(f"{name}: expected {t.size} {t.dtype} elements, got {data.size} {data.dtype}")
        self.view(name)[:] = data.ravel()

    def _addr(self, opd, r):
        if opd is None:
            return 0
        t = self.tensors[opd.tensor]
        return t.addr + (opd.offset + r * opd.step) * t.itemsize

    def execute(self, cmd):
        if cmd.block == "va":
            self._va(cmd)
        else:
            self._ma(cmd)

    def _va(self, cmd):
        es = self.tensors[cmd.src.tensor].itemsize if cmd.src is not None else 2
        for r in range(cmd.repeat):
            c = va.VaCommand(
                cmd.op, cmd.length, src=self._addr(cmd.src, r), src2=self._addr(cmd.src2, r),
                src3=self._addr(cmd.src3, r), dst=self._addr(cmd.dst, r), dst2=self._addr(cmd.dst2, r),
                stride=cmd.stride * es, esize=es.bit_length() - 1, scalar=cmd.scalar, k=cmd.k,
                index_limit=cmd.index_limit, split_half=cmd.split_half,
            )
            code, addr = va.execute_proposed(c, self.mem, self.config.lanes)
            if code != ErrorCode.NONE:
                raise RuntimeError(f"VA {cmd.opname} ({cmd.stage}) refused: "
                                   f"{ErrorCode(code).name} at {addr:#x}")

    def _matrix(self, opd, rows, cols, ld):
        flat = self.view(opd.tensor)
        idx = opd.offset + np.arange(rows)[:, None] * ld + np.arange(cols)[None, :]
        return flat[idx]

    def _ma(self, cmd):
        a = self._matrix(cmd.a, cmd.m, cmd.k, cmd.lda)
        b = self._matrix(cmd.b, cmd.n, cmd.k, cmd.ldb).T if cmd.b_transposed else self._matrix(
            cmd.b, cmd.k, cmd.n, cmd.ldb)
        old = self._matrix(cmd.c, cmd.m, cmd.n, cmd.ldc) if cmd.accumulate else None
        if MaMode(cmd.mode) is MaMode.BF16:
            out = gemm(MaMode.BF16, a, np.ascontiguousarray(b), old)
        else:
            out = gemm(MaMode.INT8, a.view(np.int8), np.ascontiguousarray(b).view(np.int8),
                       None if old is None else old.view(np.int32)).view(np.int32)
        flat = self.view(cmd.c.tensor)
        idx = cmd.c.offset + np.arange(cmd.m)[:, None] * cmd.ldc + np.arange(cmd.n)[None, :]
        flat[idx] = out


def run(program):
    """Execute ``program`` on a fresh memory image (the host's initial data written
    first); returns the :class:`Machine` (read tensors with ``machine.read(name)``)."""
    m = Machine(program.config, program.tensors, program.memory_bytes)
    for name, data in program.init.items():
        m.write(name, data)
    for cmd in program.commands:
        m.execute(cmd)
    return m


# --- building programs --------------------------------------------------------------------


def to_bf16(x):
    return float_to_bf16_rne(np.asarray(x, np.float64))


def _digest(data):
    """A digest of an array's bytes (the shared tensors' cache keys)."""
    return hashlib.blake2b(np.ascontiguousarray(data).tobytes(), digest_size=16).digest()


class Builder:
    """Allocates tensors and emits commands, running each at once on its own memory (so a
    generator can read a result back, as the runtime does for the MoE's dispatch)."""

    def __init__(self, config):
        self.config = config
        self.tensors = {}
        self.commands = []
        self.init = {}
        self.m = Machine(config, self.tensors)
        self._top = 0
        self.prefix = ""      # prepended to the name of every tensor not shared
        self.cache = {}       # key -> name of a shared tensor (weights, host constants)

    # tensors
    def tensor(self, name, shape, dtype, role="act", data=None, shared=False):
        """Allocate tensor ``name`` (``prefix + name`` unless ``shared``); returns its name."""
        name = name if shared else self.prefix + name
        if name in self.tensors:
            raise ValueError(f"tensor {name!r} already exists")
        shape = tuple(int(s) for s in np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
        t = Tensor(name, shape, dtype, self._top, role)
        self._top = t.addr + t.nbytes + (-(t.addr + t.nbytes)) % ALIGN
        self.tensors[name] = t
        self._store(name, shape, dtype, data)
        return name

    def _store(self, name, shape, dtype, data):
        """Grow the memory to the new top and write tensor ``name``'s initial ``data``
        there (None: no initial value)."""
        self.m.grow(self._top)
        if data is not None:
            data = np.ascontiguousarray(data, DTYPES[dtype])
            self.init[name] = data.reshape(shape)
            self.m.write(name, data)

    def weight(self, name, w, mode):
        """Weight ``w`` (float64, ``(N, K)`` as stored by the model) as the MA's B operand
        ``(K, N)``, a shared tensor: bf16, or (int8 mode) int8 with one binary32 scale per
        tensor, both prepared by the host (the scale is the VA's QUANTIZE of the whole
        tensor). Returns ``(name, scale)``, the scale None in bf16 mode."""
        wb = to_bf16(w)
        # Keyed by the values too: the layers of a step share one builder, and each layer's
        # weight of a name is its own tensor (the same values: the same tensor).
        key = ("weight", name, mode, wb.shape, _digest(wb))
        if key not in self.cache:
            if mode == "bf16":
                self.cache[key] = (self.const(self.shared_name(f"w.{name}"), wb.T.copy(),
                                              "bf16", "weight", shared=True), None)
            else:
                qw, sw = va.quantize_bf16(wb.ravel())
                t = self.const(self.shared_name(f"w8.{name}"), qw.reshape(w.shape).T.copy(),
                               "int8", "weight", shared=True)
                self.cache[key] = (t, sw)
        return self.cache[key]

    def const(self, name, data, dtype="bf16", role="const", shared=False):
        data = np.asarray(data)
        return self.tensor(name, data.shape if data.ndim else (1,), dtype, role, data, shared)

    def cached(self, key, data, dtype="bf16", role="const"):
        """A host constant shared by every step that asks for ``key`` with the same values
        (one tensor); other values under the same key (another layer's) are another tensor."""
        data = np.ascontiguousarray(data, DTYPES[dtype])
        full = ("const", key, dtype, role, data.shape, _digest(data))
        if full not in self.cache:
            self.cache[full] = self.const(self.shared_name(f"c.{key}"), data, dtype, role,
                                          shared=True)
        return self.cache[full]

    def shared_name(self, name):
        """``name``, or the first of ``name#2``, ``name#3``, ... that no tensor has: a shared
        tensor's name when another one (another layer's weight) already has it."""
        n, candidate = 1, name
        while candidate in self.tensors:
            n += 1
            candidate = f"{name}#{n}"
        return candidate

    def read(self, name):
        return self.m.read(name)

    def shape(self, name):
        return self.tensors[name].shape

    def size(self, name):
        return self.tensors[name].size

    def program(self):
        return Program(self.config, dict(self.tensors), tuple(self.commands), dict(self.init))

    def emit(self, cmd):
        self.commands.append(cmd)
        self.m.execute(cmd)

    # VA commands
    def va(self, op, length, *, src=None, src2=None, src3=None, dst=None, dst2=None, repeat=1,
           stage="", **regs):
        def opd(x):
            if x is None or isinstance(x, Operand):
                return x
            return Operand(*x) if isinstance(x, tuple) else Operand(x)
        self.emit(VaCmd(op, length, opd(src), opd(src2), opd(src3), opd(dst), opd(dst2),
                        repeat=repeat, stage=stage, **regs))

    def elementwise(self, op, a, dst, b=None, stage="", **regs):
        """One command over the whole of ``a`` (and ``b``), contiguous, into ``dst``."""
        n = self.size(a)
        for lo in range(0, n, va.MAX_LENGTH):     # LENGTH is at most MAX_LENGTH
            self.va(op, min(va.MAX_LENGTH, n - lo), src=(a, lo), src2=None if b is None else (b, lo),
                    dst=(dst, lo), stage=stage, **regs)

    def rows(self, op, x, dst, width, stage="", src2=None, **regs):
        """``op`` on every row of ``width`` elements of ``x`` into ``dst``; ``src2`` an
        Operand (its own step) or None."""
        n = self.size(x) // width
        self.va(op, width, src=Operand(x, 0, width), src2=src2, dst=Operand(dst, 0, width), repeat=n,
                stage=stage, **regs)

    # MA commands
    def gemm(self, mode, a, b, c, m, k, n, lda, ldb, ldc, accumulate=False, b_transposed=False, stage=""):
        """``C = A·B`` (operands as :class:`Operand`), tiled into MA commands of at most
        :data:`MA_MAX` per dimension; K-tiles after the first accumulate (the MA's
        sequential sum in k continues across them, so the bits equal one product)."""
        for i0 in range(0, m, MA_MAX):
            for j0 in range(0, n, MA_MAX):
                for k0 in range(0, k, MA_MAX):
                    mm, nn, kk = min(MA_MAX, m - i0), min(MA_MAX, n - j0), min(MA_MAX, k - k0)
                    boff = (j0 * ldb + k0) if b_transposed else (k0 * ldb + j0)
                    self.emit(MaCmd(
                        mode, mm, kk, nn,
                        Operand(a.tensor, a.offset + i0 * lda + k0), Operand(b.tensor, b.offset + boff),
                        Operand(c.tensor, c.offset + i0 * ldc + j0), lda, ldb, ldc,
                        accumulate or k0 > 0, b_transposed, stage))


# --- shared pieces -------------------------------------------------------------------------


class _Layer:
    """Helpers over a :class:`Builder` shared by the layer generators."""

    def __init__(self, b, mode="bf16"):
        if mode not in ("bf16", "int8"):
            raise ValueError(f"mode must be 'bf16' or 'int8', got {mode!r}")
        self.b, self.mode = b, mode
        self._quant = {}

    def weight(self, name, w, mode):
        """Weight ``w`` as the MA's B operand: :meth:`Builder.weight`."""
        return self.b.weight(name, w, mode)

    def matmul(self, x, w, wname, out, stage, mode=None):
        """``out (M, N) = bf16(x (M, K) @ wᵀ)`` on the MA (``hwpath.ma_matmul``)."""
        b = self.b
        mode = mode or self.mode
        m, k = b.shape(x)[0], b.size(x) // b.shape(x)[0]
        n = w.shape[0]
        wt, sw = self.weight(wname, w, mode)
        if mode == "bf16":
            acc = b.tensor(f"{out}.acc", (m, n), "binary32")
            b.gemm(MaMode.BF16, Operand(x), Operand(wt), Operand(acc), m, k, n, k, n, n, stage=stage)
            b.elementwise(VaOpcode.CVT_F32, acc, out, stage=stage)
            return out
        if x not in self._quant:
            q, s = b.tensor(f"{x}.q8", (m, k), "int8"), b.tensor(f"{x}.qs", (m,), "binary32")
            b.va(VaOpcode.QUANTIZE, k, src=Operand(x, 0, k), dst=Operand(q, 0, k), dst2=Operand(s, 0, 1),
                 repeat=m, stage=stage)
            self._quant[x] = (q, s)
        q, s = self._quant[x]
        acc = b.tensor(f"{out}.acc", (m, n), "int32")
        b.gemm(MaMode.INT8, Operand(q), Operand(wt), Operand(acc), m, k, n, k, n, n, stage=stage)
        b.va(VaOpcode.DEQUANTIZE_MEM, n, src=Operand(acc, 0, n), src2=Operand(s, 0, 1),
             dst=Operand(out, 0, n), scalar=sw, repeat=m, stage=stage)
        return out

    def rmsnorm(self, x, gamma, eps, out, width, stage):
        gb = to_bf16(gamma)
        key = ("gamma", gb.tobytes())
        if key not in self.b.cache:
            self.b.cache[key] = self.b.const(f"c.gamma{len(self.b.cache)}", gb, shared=True)
        g = self.b.cache[key]
        self.b.rows(VaOpcode.RMSNORM, x, out, width, stage, src2=Operand(g),
                    scalar=int(np.float32(eps).view(np.uint32)))
        return out


# --- counts and cycles --------------------------------------------------------------------


def count_commands(program):
    """Commands issued, by (block, opcode name): a repeated VA command counts ``repeat``."""
    n = Counter()
    for cmd in program.commands:
        n[cmd.block, cmd.opname] += cmd.repeat if cmd.block == "va" else 1
    return n


def ma_command_cycles(program, cmd):
    """The MA latency model's cycles for ``cmd`` (byte addresses from the program's
    layout; with ``b_transposed`` B is loaded as N rows of K, as the MA reads it)."""
    t = program.tensors
    es = {"bf16": 2, "int8": 1}
    ae = es[t[cmd.a.tensor].dtype]
    ce = t[cmd.c.tensor].itemsize
    mc = MaCommand(cmd.m, cmd.k, cmd.n, MaMode(cmd.mode) is MaMode.BF16, cmd.accumulate,
                   t[cmd.a.tensor].addr + cmd.a.offset * ae, t[cmd.b.tensor].addr + cmd.b.offset * ae,
                   t[cmd.c.tensor].addr + cmd.c.offset * ce, cmd.lda * ae, cmd.ldb * ae, cmd.ldc * ce,
                   cmd.b_transposed)
    cfg = program.config
    return ma_cycles(mc, p=cfg.p, data_width=cfg.bus_bits, latency=cfg.latency)


def va_command_cycles(program, cmd):
    """The VA latency model's cycles for ``cmd``, its ``repeat`` repetitions one after
    the other (byte addresses from the program's layout, repetition r's operands at
    ``offset + r·step``; indexed forms as if no index were -1)."""
    t = program.tensors

    def addr(o, r):
        return 0 if o is None else t[o.tensor].addr + (o.offset + r * o.step) * t[o.tensor].itemsize

    es = t[cmd.src.tensor].itemsize if cmd.src is not None else 2
    esize = {1: 0, 2: 1, 4: 2}.get(es, 1)
    cmds = [va.VaCommand(cmd.op, cmd.length, src=addr(cmd.src, r), src2=addr(cmd.src2, r),
                         src3=addr(cmd.src3, r), dst=addr(cmd.dst, r), dst2=addr(cmd.dst2, r),
                         stride=cmd.stride * es, esize=esize, scalar=cmd.scalar, k=cmd.k,
                         index_limit=cmd.index_limit, rows=getattr(cmd, "rows", 0) or 0,
                         split_half=cmd.split_half)
            for r in range(cmd.repeat)]
    cfg = program.config
    return va_repeat_cycles(cmds, lanes=cfg.lanes, data_width=cfg.bus_bits, latency=cfg.latency)


def program_summary(program):
    """Commands of ``program`` per block and opcode, and the MA's and the VA's predicted
    cycles, as text."""
    counts = count_commands(program)
    ma = sum(ma_command_cycles(program, cmd) for cmd in program.commands if cmd.block == "ma")
    vac = sum(va_command_cycles(program, cmd) for cmd in program.commands if cmd.block == "va")
    lines = [f"{'block':5} {'opcode':16} {'commands':>9}"]
    for (blk, op), cnt in sorted(counts.items()):
        lines.append(f"{blk:5} {op:16} {cnt:9d}")
    total = {blk: sum(v for (bk, _), v in counts.items() if bk == blk) for blk in ("ma", "va")}
    lines.append(f"total: {total['ma']} MA commands, {total['va']} VA commands")
    lines.append(f"predicted cycles: MA {ma} (sum of the commands, one after another; "
                 f"P={program.config.p}, bus {program.config.bus_bits} bits, latency "
                 f"{program.config.latency}); VA {vac} (golden/va_latency.py, the same way)")
    return "\n".join(lines)


def decode_steps(preset, position=None, config=None, mode="bf16"):
    """One decode step of every layer of tile preset ``preset`` (a name of
    :data:`golden.presets.tile.PRESETS`) at ``position`` (the preset's by default), each
    from a state of zeros (the command list does not depend on the state's values, only
    the MoE's dispatch does, through the experts a token picks), with random inputs.
    Returns a list of ``(layer, step program)``."""
    _, steps = decode_step_parts(preset, position, config, mode)
    return [(layer, step) for layer, step, _ in steps]


def decode_step_parts(preset, position=None, config=None, mode="bf16"):
    """What :func:`decode_steps` makes, with what a host needs to run it: returns
    ``(builder, [(layer, step program, stage names)])``; ``builder.init`` holds the host's
    tensors (weights, constants, inputs, the state's initial image) of every layer."""
    from .presets.tile import PRESETS
    from .program_dsv4 import dsv4_decode_step, dsv4_state
    from .program_notes import notes_decode_step, notes_state

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; expected one of {sorted(PRESETS)}")
    pre = PRESETS[preset]
    t = pre.position if position is None else position
    if t < 0:
        raise ValueError(f"position must be >= 0, got {t}")
    model = pre.model()
    b = Builder(config or BlockConfig())
    rng = np.random.default_rng(pre.seed)
    c = pre.config
    steps = []
    for i, layer in enumerate(model.layers):
        b.prefix = f"l{i}."     # the layers' states and steps side by side in one memory
        if pre.kind == "deepseek-v4":
            st = dsv4_state(b, layer, t + 1)
            row = rng.standard_normal((c.hc_mult, c.hidden_size))
            step, names = dsv4_decode_step(layer, st, row, int(rng.integers(c.vocab_size)), t, b)
        else:
            st = notes_state(b, layer, t + 1)
            step, names = notes_decode_step(layer, st, rng.standard_normal(c.hidden_size), t, b, mode)
        steps.append((layer, step, names))
    b.prefix = ""
    return b, steps


def summary(preset, position=None, config=None, mode="bf16"):
    """The commands of one decode step of tile preset ``preset`` (see
    :func:`decode_steps`) per block and opcode, layer by layer, the MA and VA latency
    models' predicted cycles (commands one after another) and the step's memory-bound
    limit (:mod:`golden.roofline`: the bytes it must move, read and written, and the
    cycles they take on the bus); text, for ``v4hw program --preset X --summary``."""
    from .presets.tile import PRESETS
    from .roofline import step_traffic

    cfg = config or BlockConfig()
    builder, parts = decode_step_parts(preset, position, cfg, mode)
    steps = [(layer, step) for layer, step, _ in parts]

    t = PRESETS[preset].position if position is None else position
    counts = [count_commands(step) for _, step in steps]
    keys = sorted(set().union(*counts))
    heads = [f"layer {i}" for i in range(len(steps))]
    kinds = [getattr(layer, "type", "notes") + ("" if not hasattr(layer, "hash") else
                                                 (" + hash MoE" if layer.hash else " + top-k MoE"))
             for layer, _ in steps]
    lines = [f"preset {preset}: one decode step at position {t} (P={cfg.p}, L={cfg.lanes}, "
             f"bus {cfg.bus_bits} bits, memory latency {cfg.latency} cycles)"]
    lines += [f"  layer {i}: {k}" for i, k in enumerate(kinds)]
    lines.append(f"{'block':5} {'opcode':16} " + " ".join(f"{h:>8}" for h in heads) + f" {'total':>8}")
    for key in keys:
        row = [cnt.get(key, 0) for cnt in counts]
        lines.append(f"{key[0]:5} {key[1]:16} " + " ".join(f"{v:8d}" for v in row) + f" {sum(row):8d}")
    for blk in ("ma", "va"):
        row = [sum(v for (bk, _), v in cnt.items() if bk == blk) for cnt in counts]
        lines.append(f"{blk:5} {'(all)':16} " + " ".join(f"{v:8d}" for v in row) + f" {sum(row):8d}")
    cyc = [sum(ma_command_cycles(step, cmd) for cmd in step.commands if cmd.block == "ma")
           for _, step in steps]
    lines.append(f"{'ma':5} {'cycles':16} " + " ".join(f"{v:8d}" for v in cyc) + f" {sum(cyc):8d}")
    vcyc = [sum(va_command_cycles(step, cmd) for cmd in step.commands if cmd.block == "va")
            for _, step in steps]
    lines.append(f"{'va':5} {'cycles':16} " + " ".join(f"{v:8d}" for v in vcyc) + f" {sum(vcyc):8d}")
    lines.append("MA cycles: golden/ma_latency.py per command, the commands one after another "
                 "(b_transposed: B loaded as N rows of K); VA cycles: golden/va_latency.py per "
                 "command, the same way")
    traffic, bus = step_traffic(builder, parts), cfg.bus_bits // 8
    rows = {"bytes read": [r for r, _ in traffic.parts], "bytes written": [w for _, w in traffic.parts]}
    for name, row in rows.items():
        lines.append(f"{'step':5} {name:16} " + " ".join(f"{v:8d}" for v in row) + f" {sum(row):8d}")
    bound = [-(-(r + w) // bus) for r, w in traffic.parts]
    lines.append(f"{'step':5} {'bound cycles':16} " + " ".join(f"{v:8d}" for v in bound)
                 + f" {traffic.bound_cycles(bus):8d}")
    lines.append(f"bound: the memory-bound limit, the bytes the step must move ({traffic.required}: "
                 f"each weight, constant, input and state byte it reads, once, and each state and "
                 f"output byte it writes, once; golden/roofline.py) at {bus} bytes a cycle; the "
                 "step's roofline ratio is that over its measured cycles")
    return "\n".join(lines)
