"""A layer as a program of block commands, and its bit-exact golden interpreter.

A :class:`Program` is a flat memory (every tensor at a byte address, 64-byte aligned) and
a list of commands, each a frozen dataclass: :class:`VaCmd` (one VA opcode of
:class:`spec.codes.VaOpcode` or :class:`golden.va.ProposedVaOpcode`, issued ``repeat``
times with its operands advanced by fixed steps) or :class:`MaCmd` (one MA GEMM, shapes
within the MA's 1..128, operands with row strides). :func:`run` executes the list on a
fresh memory image with the golden blocks (:func:`golden.va.execute_proposed`,
:func:`golden.ma.gemm`), so the interpreter *is* the hardware-exact path: the tensors it
leaves are the bits :mod:`golden.hwpath` computes (tested in
``tests/test_golden_program.py``).

Generators: :func:`notes_prefill` (and :func:`golden.program_dsv4.dsv4_layer_prefill`
for a ``deepseek-v4`` layer) emits the prefill of ``S`` tokens of a
:class:`golden.presets.notes.NotesLayer` for a :class:`BlockConfig` (MA array size P,
VA lanes L, bus width). A program is made for one input: the MoE's dispatch (which token
rows each expert's GEMMs take) is read back from the routing commands' results while the
program is generated (the :class:`Builder` runs each command as it is emitted), as the
tile runtime will read them back. The program format is documented in
``docs/golden/program.md``.
"""

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from spec.codes import ErrorCode, MaMode, VaOpcode

from . import va
from .fp import float_to_bf16_rne
from .ma import gemm
from .ma_latency import MaCommand, ma_cycles

__all__ = ["DTYPES", "MA_MAX", "BlockConfig", "Tensor", "Operand", "VaCmd", "MaCmd", "Program",
           "Builder", "Machine", "run", "notes_prefill", "notes_stage_bits", "count_commands",
           "summary"]

DTYPES = {"bf16": np.uint16, "binary32": np.uint32, "int8": np.int8, "int32": np.int32}
MA_MAX = 128          # the MA's M, K and N are 1..128 (DESIGN.md); larger products are tiled
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
    int32 C. Row strides ``lda``, ``ldb``, ``ldc`` in elements. ``b_transposed`` (a
    proposed MODE bit, no RTL yet): B is read as N×K, ``B[k][n] = b[n·ldb + k]``, the
    transposed operand of q·Kᵀ."""
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
    try:
        return VaOpcode(op).name
    except ValueError:
        return va.ProposedVaOpcode(op).name


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
        self.m.grow(self._top)
        if data is not None:
            data = np.ascontiguousarray(data, DTYPES[dtype])
            self.init[name] = data.reshape(shape)
            self.m.write(name, data)
        return name

    def const(self, name, data, dtype="bf16", role="const", shared=False):
        data = np.asarray(data)
        return self.tensor(name, data.shape if data.ndim else (1,), dtype, role, data, shared)

    def cached(self, key, data, dtype="bf16", role="const"):
        """A host constant shared by every step that asks for ``key`` (one tensor)."""
        if key not in self.cache:
            self.cache[key] = self.const(f"c.{key}", data, dtype, role, shared=True)
        return self.cache[key]

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
        """Weight ``w`` (float64, ``(N, K)`` as stored by the model) as the MA's B operand
        ``(K, N)``: bf16, or (int8 mode) int8 with one binary32 scale per tensor, both
        prepared by the host (the scale is the VA's QUANTIZE of the whole tensor)."""
        key = ("weight", name, mode)
        cache = self.b.cache
        if key not in cache:
            wb = to_bf16(w)
            if mode == "bf16":
                cache[key] = (self.b.const(f"w.{name}", wb.T.copy(), "bf16", "weight", shared=True), None)
            else:
                qw, sw = va.quantize_bf16(wb.ravel())
                t = self.b.const(f"w8.{name}", qw.reshape(w.shape).T.copy(), "int8", "weight", shared=True)
                cache[key] = (t, sw)
        return cache[key]

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
            b.elementwise(va.ProposedVaOpcode.CVT_F32, acc, out, stage=stage)
            return out
        if x not in self._quant:
            q, s = b.tensor(f"{x}.q8", (m, k), "int8"), b.tensor(f"{x}.qs", (m,), "binary32")
            b.va(VaOpcode.QUANTIZE, k, src=Operand(x, 0, k), dst=Operand(q, 0, k), dst2=Operand(s, 0, 1),
                 repeat=m, stage=stage)
            self._quant[x] = (q, s)
        q, s = self._quant[x]
        acc = b.tensor(f"{out}.acc", (m, n), "int32")
        b.gemm(MaMode.INT8, Operand(q), Operand(wt), Operand(acc), m, k, n, k, n, n, stage=stage)
        b.va(va.ProposedVaOpcode.DEQUANTIZE_MEM, n, src=Operand(acc, 0, n), src2=Operand(s, 0, 1),
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


# --- the notes layer ----------------------------------------------------------------------


def notes_prefill(layer, x, config=None, mode="bf16", builder=None):
    """The program of ``layer`` (a :class:`golden.presets.notes.NotesLayer`) on ``x``
    ``(S, D)`` float64 (positions 0..S-1, empty cache), the sequence of
    :func:`golden.hwpath.run_notes_layer`, for ``config`` (a :class:`BlockConfig`, the
    default one if None), emitted into ``builder`` (a new :class:`Builder` if None; its
    machine then holds every result). Returns ``(program, names)``: ``names`` maps each
    result of the layer to its tensor (see :func:`notes_stage_bits`)."""
    from .attn.primitives import rope_angles
    from .presets.notes import sinusoid, tier_ranges

    c = layer.cfg
    s, dm = x.shape
    h, hk, d = c.num_heads, c.num_kv_heads, c.head_dim
    g = h // hk
    eps = c.rms_norm_eps
    b = Builder(config or BlockConfig()) if builder is None else builder
    L = _Layer(b, mode)
    p = layer.p
    P = VaOpcode
    X = va.ProposedVaOpcode
    names = {"x": b.const("x", to_bf16(x), role="input")}

    n = L.rmsnorm("x", p("input_layernorm.weight"), eps, b.tensor("n", (s, dm), "bf16"), dm, "input RMSNorm")
    proj = {}
    for name, heads in (("q", h), ("k", hk), ("v", hk)):
        proj[name] = L.matmul(n, p(f"attn.{name}_proj.weight"), f"{name}_proj",
                              b.tensor(name, (s, heads * d), "bf16"), f"{name} projection")
    ang = rope_angles(np.arange(s), layer.inv)
    cos_t, sin_t = b.const("rope.cos", to_bf16(np.cos(ang))), b.const("rope.sin", to_bf16(np.sin(ang)))
    for name, heads in (("q", h), ("k", hk)):
        out = b.tensor(f"{name}r", (s, heads * d), "bf16")
        for t in range(s):
            b.va(P.ROPE, d, src=(name, t * heads * d, d), src2=(cos_t, t * (d // 2)),
                 src3=(sin_t, t * (d // 2)),
                 dst=(out, t * heads * d, d), split_half=True, repeat=heads, stage=f"RoPE {name}")
    qr, kr, v = "qr", "kr", "v"
    kvw = hk * d

    summaries = {}

    def summary(lo, hi):
        """Column means of rows lo..hi of the keys and values: GATHER each column, SUM,
        CVT_F32, SCALE by bf16(1/n) (``hwpath.va_mean_rows``)."""
        if (lo, hi) not in summaries:
            cnt = hi - lo
            inv = int(to_bf16(1.0 / cnt))
            out = []
            for src in (kr, v):
                col = b.tensor(f"hca.{src}.{lo}.{hi}.cols", (kvw, cnt), "bf16")
                acc = b.tensor(f"hca.{src}.{lo}.{hi}.sum", (kvw,), "binary32")
                tmp = b.tensor(f"hca.{src}.{lo}.{hi}.sum16", (kvw,), "bf16")
                res = b.tensor(f"hca.{src}.{lo}.{hi}", (kvw,), "bf16")
                b.va(P.GATHER, cnt, src=(src, lo * kvw, 1), dst=(col, 0, cnt), stride=kvw, repeat=kvw,
                     stage="HCA summaries")
                b.va(P.SUM, cnt, src=(col, 0, cnt), dst=(acc, 0, 1), repeat=kvw, stage="HCA summaries")
                b.elementwise(X.CVT_F32, acc, tmp, stage="HCA summaries")
                b.elementwise(P.SCALE, tmp, res, scalar=inv, stage="HCA summaries")
                out.append(res)
            summaries[lo, hi] = tuple(out)
        return summaries[lo, hi]

    scale = int(to_bf16(d**-0.5))
    attn = b.tensor("attn", (s, h * d), "bf16")
    stage_lists = {"summaries": [], "scores": [], "softmax": []}
    for t in range(s):
        windows, chunks, csa = tier_ranges(t, c)
        sums = [summary(lo, hi) for lo, hi in chunks]
        if chunks:
            stage_lists["summaries"].append([sk for sk, _ in sums] + [sv for _, sv in sums])
        # key pieces in order: (tensor for keys, tensor for values, first row, rows, row stride)
        pieces = [(kr, v, lo, hi - lo, kvw) for lo, hi in windows]
        pieces += [(sk, sv, 0, 1, kvw) for sk, sv in sums]
        pieces.append((kr, v, csa[0][0], csa[0][1] - csa[0][0], kvw))
        nk = sum(pc[3] for pc in pieces)
        lens = np.array([hi - lo for lo, hi in chunks], np.float64)
        n_swa = sum(hi - lo for lo, hi in windows)
        bias = b.const(f"bias.{t}", to_bf16(np.concatenate([np.zeros(n_swa), np.log(lens),
                                                            np.zeros(nk - n_swa - len(chunks))])))
        for j in range(hk):
            tag = f"{t}.{j}"
            acc = b.tensor(f"sc.{tag}.acc", (g, nk), "binary32")
            col = 0
            for kt, _, r0, rows, ld in pieces:
                b.gemm(MaMode.BF16, Operand(qr, (t * h + j * g) * d), Operand(kt, r0 * ld + j * d),
                       Operand(acc, col), g, d, rows, d, ld, nk, b_transposed=True, stage="attention scores")
                col += rows
            sc16 = b.tensor(f"sc.{tag}.raw", (g, nk), "bf16")
            b.elementwise(X.CVT_F32, acc, sc16, stage="attention scores")
            scl = b.tensor(f"sc.{tag}.scaled", (g, nk), "bf16")
            b.elementwise(P.SCALE, sc16, scl, scalar=scale, stage="attention scores")
            sc = b.tensor(f"sc.{tag}", (g, nk), "bf16")
            b.rows(P.ADD, scl, sc, nk, "attention scores", src2=Operand(bias))
            pb = b.tensor(f"p.{tag}", (g, nk), "bf16")
            b.rows(P.SOFTMAX, sc, pb, nk, "attention softmax")
            stage_lists["scores"].append(sc)
            stage_lists["softmax"].append(pb)
            oacc = b.tensor(f"pv.{tag}.acc", (g, d), "binary32")
            col = 0
            for i, (_, vt, r0, rows, ld) in enumerate(pieces):
                b.gemm(MaMode.BF16, Operand(pb, col), Operand(vt, r0 * ld + j * d), Operand(oacc), g, rows, d,
                       nk, ld, d, accumulate=i > 0, stage="attention P·V")
                col += rows
            b.va(X.CVT_F32, g * d, src=oacc, dst=(attn, (t * h + j * g) * d), stage="attention P·V")
    names.update({f"list.{k}": v for k, v in stage_lists.items()})
    o = L.matmul(attn, p("attn.o_proj.weight"), "o_proj", b.tensor("o", (s, dm), "bf16"), "output projection")
    h1 = b.tensor("h1", (s, dm), "bf16")
    b.elementwise(P.ADD, "x", h1, o, stage="attention residual")

    # MoE
    mb = L.rmsnorm(h1, p("post_attention_layernorm.weight"), eps, b.tensor("m", (s, dm), "bf16"), dm,
                   "post-attention RMSNorm")
    ne, k1, k2 = c.n_experts, c.primary_topk, c.final_topk
    lg = L.matmul(mb, p("mlp.gate.weight"), "gate", b.tensor("logits", (s, ne), "bf16"), "router logits")
    sb = b.tensor("router", (s, ne), "bf16")
    b.rows(P.SOFTMAX, lg, sb, ne, "router softmax + top-k")
    cand_v, cand = b.tensor("cand.v", (s, k1), "bf16"), b.tensor("cand", (s, k1), "int32")
    b.va(P.TOPK, ne, src=(sb, 0, ne), dst=(cand_v, 0, k1), dst2=(cand, 0, k1), k=k1, repeat=s,
         stage="router softmax + top-k")
    first = p("mlp.experts.gate_up_proj")[:, 0, :]
    code = b.const("poscode", to_bf16(sinusoid(np.arange(s), dm)))
    sec = L.matmul(code, first, "first", b.tensor("secondary", (s, ne), "bf16"),
                   "secondary score + final top-k", mode="bf16")
    st = "secondary score + final top-k"
    csel = b.tensor("cand.sec", (s, k1), "bf16")
    b.va(P.GATHER_IDX, k1, src=(sec, 0, ne), src2=(cand, 0, k1), dst=(csel, 0, k1), stride=1,
         index_limit=ne, repeat=s, stage=st)
    fv, fpos = b.tensor("final.v", (s, k2), "bf16"), b.tensor("final.pos", (s, k2), "int32")
    b.va(P.TOPK, k1, src=(csel, 0, k1), dst=(fv, 0, k2), dst2=(fpos, 0, k2), k=k2, repeat=s, stage=st)
    fin = b.tensor("final", (s, k2), "int32")
    b.va(P.GATHER_IDX, k2, src=(cand, 0, k1), src2=(fpos, 0, k2), dst=(fin, 0, k2), stride=1,
         index_limit=k1, repeat=s, stage=st)
    wsel = b.tensor("wsel", (s, k2), "bf16")
    b.va(P.GATHER_IDX, k2, src=(sb, 0, ne), src2=(fin, 0, k2), dst=(wsel, 0, k2), stride=1,
         index_limit=ne, repeat=s, stage="final weights")
    tot, tot16, inv = (b.tensor("wsum", (s,), "binary32"), b.tensor("wsum16", (s,), "bf16"),
                       b.tensor("wsum.inv", (s,), "bf16"))
    b.va(P.SUM, k2, src=(wsel, 0, k2), dst=(tot, 0, 1), repeat=s, stage="final weights")
    b.elementwise(X.CVT_F32, tot, tot16, stage="final weights")
    b.elementwise(X.RECIP, tot16, inv, stage="final weights")
    wts = b.tensor("weights", (s, k2), "bf16")
    b.va(X.MUL_MEM, k2, src=(wsel, 0, k2), src2=(inv, 0, 1), dst=(wts, 0, k2), repeat=s,
         stage="final weights")

    i = c.moe_intermediate_size
    gu, dn = p("mlp.experts.gate_up_proj"), p("mlp.experts.down_proj")
    moe = b.tensor("moe", (s, dm), "bf16")       # zero in the image: the experts ADD into it
    routes = b.read(fin)
    for e in np.unique(routes):
        tok, slot = np.nonzero(routes == e)
        ne_t = tok.size
        xe = b.tensor(f"e{e}.x", (ne_t, dm), "bf16")
        for r, tk in enumerate(tok):
            b.va(P.GATHER, dm, src=(mb, int(tk) * dm), dst=(xe, r * dm), stride=1, stage="experts")
        gt = L.matmul(xe, gu[e][:i], f"e{e}.gate", b.tensor(f"e{e}.g", (ne_t, i), "bf16"), "experts")
        up = L.matmul(xe, gu[e][i:], f"e{e}.up", b.tensor(f"e{e}.u", (ne_t, i), "bf16"), "experts")
        sl = b.tensor(f"e{e}.silu", (ne_t, i), "bf16")
        b.elementwise(P.SILU, gt, sl, stage="experts")
        act = b.tensor(f"e{e}.act", (ne_t, i), "bf16")
        b.elementwise(P.MUL, sl, act, up, stage="experts")
        y = L.matmul(act, dn[e], f"e{e}.down", b.tensor(f"e{e}.y", (ne_t, dm), "bf16"), "experts")
        yw = b.tensor(f"e{e}.yw", (ne_t, dm), "bf16")
        for r, (tk, sk) in enumerate(zip(tok, slot, strict=True)):
            b.va(X.MUL_MEM, dm, src=(y, r * dm), src2=(wts, int(tk) * k2 + int(sk)), dst=(yw, r * dm),
                 stage="experts")
            b.va(P.ADD, dm, src=(moe, int(tk) * dm), src2=(yw, r * dm), dst=(moe, int(tk) * dm),
                 stage="experts")
    out = b.tensor("out", (s, dm), "bf16")
    b.elementwise(P.ADD, h1, out, moe, stage="layer output")
    return b.program(), names


def notes_stage_bits(machine, names=None):
    """The stages :func:`golden.hwpath.run_notes_layer` records, as the bits the
    interpreter left in ``machine`` (the MoE rows unmasked: every token)."""
    r = machine.read

    def cat(tensors):
        return np.concatenate([r(t).ravel() for t in tensors]) if tensors else np.zeros(0, np.uint16)

    lists = {k[5:]: v for k, v in (names or {}).items() if k.startswith("list.")}
    return {
        "input RMSNorm": r("n"), "q projection": r("q"), "k projection": r("k"), "v projection": r("v"),
        "RoPE q": r("qr"), "RoPE k": r("kr"),
        "HCA summaries": np.concatenate([cat(x) for x in lists.get("summaries", [])])
        if lists.get("summaries") else None,
        "attention scores": cat(lists.get("scores", [])), "attention softmax": cat(lists.get("softmax", [])),
        "attention P·V": r("attn"), "output projection": r("o"), "attention residual": r("h1"),
        "post-attention RMSNorm": r("m"), "router logits": r("logits"), "router softmax + top-k": r("router"),
        "secondary score + final top-k": r("secondary"),
        "MoE output (tokens routed alike)": r("moe"), "layer output (tokens routed alike)": r("out"),
    }


# --- counts and cycles --------------------------------------------------------------------


def count_commands(program):
    """Commands issued, by (block, opcode name): a repeated VA command counts ``repeat``."""
    n = Counter()
    for cmd in program.commands:
        n[cmd.block, cmd.opname] += cmd.repeat if cmd.block == "va" else 1
    return n


def ma_command_cycles(program, cmd):
    """The MA latency model's cycles for ``cmd`` (byte addresses from the program's
    layout; ``b_transposed`` is not modelled, its B rows are timed as K rows of N)."""
    t = program.tensors
    es = {"bf16": 2, "int8": 1}
    ae = es[t[cmd.a.tensor].dtype]
    ce = t[cmd.c.tensor].itemsize
    mc = MaCommand(cmd.m, cmd.k, cmd.n, MaMode(cmd.mode) is MaMode.BF16, cmd.accumulate,
                   t[cmd.a.tensor].addr + cmd.a.offset * ae, t[cmd.b.tensor].addr + cmd.b.offset * ae,
                   t[cmd.c.tensor].addr + cmd.c.offset * ce, cmd.lda * ae, cmd.ldb * ae, cmd.ldc * ce)
    cfg = program.config
    return ma_cycles(mc, p=cfg.p, data_width=cfg.bus_bits, latency=cfg.latency)


def summary(program):
    """Commands of ``program`` per block and opcode, and the MA's predicted cycles (the
    VA has no latency model yet), as text."""
    counts = count_commands(program)
    ma = sum(ma_command_cycles(program, cmd) for cmd in program.commands if cmd.block == "ma")
    lines = [f"{'block':5} {'opcode':16} {'commands':>9}"]
    for (blk, op), cnt in sorted(counts.items()):
        lines.append(f"{blk:5} {op:16} {cnt:9d}")
    total = {blk: sum(v for (bk, _), v in counts.items() if bk == blk) for blk in ("ma", "va")}
    lines.append(f"total: {total['ma']} MA commands, {total['va']} VA commands")
    lines.append(f"predicted cycles: MA {ma} (sum of the commands, one after another; "
                 f"P={program.config.p}, bus {program.config.bus_bits} bits, latency "
                 f"{program.config.latency}); VA: no model yet")
    return "\n".join(lines)
