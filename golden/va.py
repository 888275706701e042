"""Bit-exact golden model of the vector accelerator (VA): arithmetic and every command.

This module *is* the arithmetic contract of docs/design.md's "Vector accelerator (VA)"; the
RTL reproduces it bit for bit. It models results, not cycles.

Number formats
--------------
bf16 in memory, binary32 inside. Values cross the API as bit patterns (``uint16`` bf16,
``uint32`` binary32). The rules of the MA (:mod:`golden.fp`) hold throughout: subnormal
inputs read as signed zeros, subnormal binary32 results flush to signed zeros, every NaN
is canonical (``0x7FC00000``, bf16 ``0x7FC0``). A binary32 result goes to memory as bf16
rounded to nearest even (:func:`f32_to_bf16`); a normal binary32 never rounds to a
subnormal bf16, so no second flush is needed.

IEEE operations: :func:`golden.fp.f32_add`, :func:`golden.fp.bf16_mul` (exact) and
:func:`f32_mul` (binary32 × binary32, round to nearest even).

Approximated functions (fixed-point inside; every intermediate is an integer, every
shift truncates toward zero; the tables are built by exact integer arithmetic in
:func:`exp2_table`, :func:`recip_table`, :func:`rsqrt_table`):

* :func:`exp_f32` — ``t = x·log2(e)`` as a fixed-point number with 30 fraction bits
  (the 24-bit significand times ``LOG2E_Q = round(log2(e)·2**30)``, shifted); ``n =
  floor(t)``, ``f = t - n``; ``2**f = T[f's top 8 bits] · (1 + r·ln2)`` with the 256-entry
  table ``T[i] = round(2**(i/256)·2**30)`` and ``r`` the remaining 22 bits (``r < 2**-8``,
  so the linear term's error is below ``(2**-8·ln2)**2/2 < 2**-17`` relative);
  the 31-bit result is truncated to 24 bits. ``|x| < 2**-24`` gives exactly 1.0;
  ``x >= 128`` gives +inf, ``x <= -128`` gives +0 (both saturated well before that).
* :func:`recip_f32` — 256-entry table of ``1/m`` at the interval midpoints (9 good
  bits), one Newton–Raphson step ``y·(2 - m·y)`` (about 17 good bits), truncated to 24
  bits; powers of two are exact.
* :func:`rsqrt_f32` — 2×128-entry table of ``1/sqrt(m)`` by exponent parity and the top
  7 fraction bits, one Newton step ``y·(3 - m·y²)/2``, truncated.
* :func:`silu_f32` — ``x · recip(1 + exp(-x))`` (one f32_add, one f32_mul); below -16
  ``x · e**x`` with a scaled exponent (see there); SiLU(-inf) is -0.
* :func:`ln_fixed` (inside SOFTPLUS only) — ``ln(s)`` of a positive normal binary32
  ``s = 2**E · M`` as a signed fixed-point number with 30 fraction bits: ``i`` = the top 8
  fraction bits of ``M``, ``R = recip_table()[i]`` (≈ 2**30 / the interval midpoint),
  ``r = (M·R >> 23) - 2**30`` (so ``r/2**30 = M·R/2**30 - 1``, ``|r| <= 2**-9·2**30``),
  ``ln(M) = ln(1 + r) + ln(2**30/R) ≈ r - (r² >> 31) + LN[i]`` with the 256-entry table
  ``LN[i] = round(ln(2**30 / R[i]) · 2**30)`` (:func:`ln_table`); the result is
  ``E·LN2_Q + that``. Signed shifts are arithmetic (floor). Absolute error below
  ``2**-27`` (the dropped ``r³/3`` is below ``2**-28.5``).
* :func:`softplus_f32` (extension, see below) — NaN stays NaN; ``x >= 16`` gives ``x``
  (``ln(1 + e**-x) < 2**-23`` of ``x`` there); ``x < -8`` gives ``exp(x)`` (``ln(1+u) =
  u·(1 - u/2 + …)`` with ``u < 2**-11.5``); otherwise ``ln(f32_add(1, exp(x)))`` by
  :func:`ln_fixed`, truncated to 24 bits. The two rounding points of the middle branch
  (``1 + u`` to binary32, the exp unit's error) stay below ``2**-12`` relative at -8.
* :func:`sqrt_f32` (extension) — ``f32_mul(x, rsqrt(x))`` for a positive normal ``x``;
  ``sqrt(±0) = ±0`` (subnormals read as zeros), ``sqrt(+inf) = +inf``, a negative ``x``
  or NaN gives NaN.
* CLAMP (extension) — ``y = lo`` if ``x < lo``, ``hi`` if ``x > hi``, else ``x``, compared
  by value (``-0 == +0``, so ``x = -0`` with ``lo = +0`` stays ``-0``); subnormal ``x``,
  ``lo`` and ``hi`` read as signed zeros; exact (no rounding). A NaN ``x`` gives the
  canonical NaN. ``lo`` (SCALAR bits 15:0) and ``hi`` (bits 31:16) are bf16; a NaN bound
  or ``lo > hi`` is refused with BAD_COMMAND (``lo = hi`` is allowed; ``lo = -inf`` or
  ``hi = +inf`` clamps one side only, so ReLU is CLAMP with ``[+0, +inf]``).

Error bounds in bf16 ulps (``|ordinal(result) - ordinal(correctly rounded float64)|``,
with the reference also flushing subnormals; checked exhaustively over all 65 536 bf16
inputs by ``tests/test_golden_va.py``): exp, SiLU, reciprocal, rsqrt, softplus and sqrt
``<= 1``; CLAMP exact (0).

Extension of docs/design.md's VA list: CLAMP (19), SOFTPLUS (20) and SQRT (21) are not in
docs/design.md's command list; they were added (project lead's decision) because the
``deepseek-v4`` MoE needs them on the hardware-exact path: its router score
``sqrt(softplus(x))`` needs a logarithm (SOFTPLUS) and a square root (SQRT), its
clamped SwiGLU a min / max (CLAMP). The RTL runs them in ``hdl/va/extfunc.py``.
Softmax and RMSNorm rows of 4096 are within 1 ulp of float64 (same test).

Reductions (order-independent where it matters, so L lanes may add in any order):

* SUM: binary32 in ``D·L`` interleaved partial sums, ``D = SUM_INTERLEAVE`` (8): the
  input is cut into vectors of L elements (vector v holds elements vL .. vL+L-1); partial
  s of lane j adds element j of the vectors v ≡ s (mod D) in increasing v, from +0, each
  add rounded (so element i goes to partial ``k = i mod D·L``, ``k = s·L + j``, and each
  partial is a sequential sum); then the D·L partials are added pairwise in a tree
  (partial 2k + partial 2k+1, level by level): the L lanes of each s first, then the D
  results. The interleave lets a lane start a vector every cycle although its adder's
  loop is several cycles long (the RTL keeps the D partials of a lane in a small memory
  read at v mod D). The result depends on L, which is a parameter here.
* MAX, TOP-K: by value, ``-0 == +0``, NaN below everything, ties to the lowest index;
  values are returned as the input bits (subnormals compared as they are).
* SOFTMAX (three passes): ``m = max``; ``e_i = exp(x_i - m)`` (the difference is one
  f32_add, <= 0, so ``e_i`` is in [0, 1]); the sum is exact in fixed point with 40
  fraction bits (``e_i`` truncated to that grid), converted to binary32 by truncation;
  ``y_i = bf16(e_i · recip(sum))``. A non-finite ``m`` or a NaN input makes the whole
  row NaN.
* RMSNORM (three passes): ``Emax`` = the largest biased exponent; the squares, scaled
  by ``2**-(2·(Emax-126))``, are summed exactly in fixed point with 40 fraction bits;
  ``ms = sum · recip(n)``; ``r = rsqrt(ms + eps)``; ``y_i = bf16((x_i · r) · gamma_i)``.
  A non-finite input makes the whole row NaN.
* QUANTIZE: ``absmax`` = the largest ``|x|`` (subnormals as 0), ``scale =
  f32_mul(absmax, RECIP_127)`` with ``RECIP_127`` the binary32 nearest 1/127,
  ``q_i = round-half-even(x_i · recip(scale))`` saturated to ±127 (NaN gives 0).
* DEQUANTIZE: ``bf16(f32(int32 v) · scale)`` (int32 → binary32 rounds to nearest even).
* RoPE: ``(a, b) → (a·c - b·s, a·s + b·c)``, each product exact (bf16 × bf16), one
  f32_add each; pairs adjacent ``(x[2i], x[2i+1])`` or split-half ``(x[i], x[i+n/2])``.
"""

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from spec.codes import ErrorCode, VaOpcode
from spec.va import (
    ADDRESS_LIMIT,
    BF16_NAN,
    F32_2M64,
    F32_NAN,
    F32_ONE,
    FIX,
    LN2_Q,
    LOG2E_Q,
    MAX_K,
    MAX_LENGTH,
    RECIP_127,
    SUM_FRAC,
    SUM_INTERLEAVE,
    exp2_table,
    ln_table,
    recip_table,
    rsqrt_table,
)

from .fp import bf16_mul, f32_add, float_to_bf16_rne

__all__ = [
    "LOG2E_Q", "LN2_Q", "RECIP_127", "F32_ONE", "MAX_LENGTH", "MAX_K", "ADDRESS_LIMIT",
    "SUM_INTERLEAVE",
    "exp2_table", "recip_table", "rsqrt_table", "ln_table",
    "bf16_in", "f32_to_bf16", "f32_mul", "normalize_trunc",
    "exp_f32", "recip_f32", "rsqrt_f32", "silu_f32", "ln_fixed", "softplus_f32", "sqrt_f32",
    "exp_bf16", "silu_bf16", "add_bf16", "mul_bf16", "scale_bf16",
    "clamp_bf16", "softplus_bf16", "sqrt_bf16", "clamp_scalar",
    "sum_bf16", "max_bf16", "topk_bf16", "softmax_bf16", "rmsnorm_bf16", "rope_bf16",
    "quantize_bf16", "dequantize_int32", "bf16_ulp_distance",
    "VaCommand", "MemoryWindow", "execute",
    "PROGRAM_OPCODES", "PROPOSED_OPCODES", "ProposedVaOpcode", "PROPOSED_CONTRACTS",
    "recip_bf16", "mul_mem_bf16", "add_mem_bf16",
    "dequantize_mem_int32", "execute_proposed",
]

_I64 = np.int64


_EXP2 = np.array(exp2_table(), dtype=_I64)
_RECIP = np.array(recip_table(), dtype=_I64)
_RSQRT = np.array(rsqrt_table(), dtype=_I64)
_LN = np.array(ln_table(), dtype=_I64)


# ---------------------------------------------------------------------------------------
# Bits.

def _u32(x):
    return np.asarray(x).astype(np.uint32)


def _fields(bits):
    b = _u32(bits).astype(_I64)
    return (b >> 31) & 1, (b >> 23) & 0xFF, b & 0x7FFFFF


def _assemble(sign, exp, frac):
    return ((np.asarray(sign, _I64) << 31) | (np.asarray(exp, _I64) << 23)
            | np.asarray(frac, _I64)).astype(np.uint32)


def bf16_in(bits16):
    """bf16 bits → binary32 bits, subnormals read as signed zeros."""
    b = np.asarray(bits16).astype(np.uint32)
    b = np.where((b & 0x7F80) == 0, b & 0x8000, b)
    return (b << 16).astype(np.uint32)


def f32_to_bf16(bits):
    """binary32 bits (normal, zero, inf or NaN) → bf16 bits, nearest even; NaN 0x7FC0."""
    return float_to_bf16_rne(_u32(bits).view(np.float32))


def f32_mul(a_bits, b_bits):
    """binary32 × binary32, round to nearest even, under the MA's flush and NaN rules."""
    a, b = _flush(a_bits), _flush(b_bits)
    with np.errstate(all="ignore"):
        p = (a.view(np.float32) * b.view(np.float32)).view(np.uint32)
    return _canonical(_flush(p))


def _flush(bits):
    b = _u32(bits)
    return np.where((b & 0x7F800000) == 0, b & 0x80000000, b).astype(np.uint32)


def _canonical(bits):
    b = _u32(bits)
    nan = ((b & 0x7F800000) == 0x7F800000) & ((b & 0x7FFFFF) != 0)
    return np.where(nan, np.uint32(F32_NAN), b).astype(np.uint32)


def _bit_length(v):
    """Index of the highest set bit of each positive int64 (0 for 0 and 1)."""
    v = np.asarray(v, _I64)
    hb = np.zeros(v.shape, _I64)
    for sh in (32, 16, 8, 4, 2, 1):
        step = (v >> np.minimum(hb + sh, 63)) != 0
        hb = hb + np.where(step & (hb + sh < 63), sh, 0)
    return hb


def normalize_trunc(value, scale, sign=0):
    """binary32 bits of ``±value · 2**scale`` (value a non-negative int64 < 2**62),
    truncated to 24 significant bits; flushed to ±0 below 2**-126, ±inf from 2**128."""
    v = np.asarray(value, _I64)
    s = np.asarray(scale, _I64)
    v, s = np.broadcast_arrays(v, s)
    hb = _bit_length(v)
    right = np.clip(hb - 23, 0, 62)
    left = np.clip(23 - hb, 0, 62)
    mant = np.where(hb >= 23, v >> right, v << left)
    exp = hb + s + 127
    out = np.where(exp < 1, 0, np.where(exp > 254, 0xFF << 23, (np.clip(exp, 0, 255) << 23)
                                        | (mant & 0x7FFFFF)))
    out = np.where(v == 0, 0, out)
    return (out | (np.asarray(sign, _I64) << 31)).astype(np.uint32)


# ---------------------------------------------------------------------------------------
# Approximated functions on binary32 bit patterns.

def exp_f32(bits, bias=0):
    """e**x · 2**bias for binary32 ``x`` (see the module docstring for the algorithm).

    ``bias`` shifts the result's exponent before the flush (SiLU uses 64 to keep
    ``x · e**x`` normal where ``e**x`` alone would be subnormal)."""
    sign, e, frac = _fields(bits)
    E = e - 127
    M = frac | (1 << 23)
    shift = np.clip(23 - E, 0, 62)
    T = (M * LOG2E_Q) >> shift                          # |t| · 2**30, truncated
    t = np.where(sign == 1, -T, T)
    n = t >> FIX
    f = t & ((1 << FIX) - 1)
    y = _EXP2[f >> (FIX - 8)]
    g = ((f & ((1 << (FIX - 8)) - 1)) * LN2_Q) >> FIX
    mant = y + ((y * g) >> FIX)
    out = normalize_trunc(mant, n - FIX + bias)
    nan = (e == 255) & (frac != 0)
    out = np.where(E < -24, F32_ONE + (bias << 23), out)              # zeros, subnormals, |x| < 2**-24
    out = np.where((E >= 7) & (sign == 0), 0x7F800000, out)
    out = np.where((E >= 7) & (sign == 1), 0, out)
    return np.where(nan, F32_NAN, out).astype(np.uint32)


def recip_f32(bits):
    """1/x for binary32 ``x``: table + one Newton step; exact for powers of two."""
    sign, e, frac = _fields(bits)
    E = e - 127
    M = frac | (1 << 23)
    y0 = _RECIP[frac >> 15]
    p = (M * y0) >> 23
    y1 = (y0 * ((1 << (FIX + 1)) - p)) >> FIX
    y1 = np.where(frac == 0, 1 << FIX, y1)
    out = normalize_trunc(y1, -FIX - E, sign)
    out = np.where(e == 0, _assemble(sign, 255, 0), out)         # 1/±0 = ±inf
    out = np.where((e == 255) & (frac == 0), sign << 31, out)    # 1/±inf = ±0
    out = np.where((e == 255) & (frac != 0), F32_NAN, out)
    return _u32(out)


def rsqrt_f32(bits):
    """1/sqrt(x) for binary32 ``x``: table by exponent parity + one Newton step."""
    sign, e, frac = _fields(bits)
    E = e - 127
    odd = E & 1
    even_e = E - odd
    M = (frac | (1 << 23)) << odd                        # 23 fraction bits, in [1, 4)
    y0 = _RSQRT[odd, frac >> 16]
    y2 = (y0 * y0) >> FIX
    q = (M * y2) >> 23
    y1 = (y0 * (3 * (1 << FIX) - q)) >> (FIX + 1)
    y1 = np.where((frac == 0) & (odd == 0), 1 << FIX, y1)
    out = normalize_trunc(y1, -FIX - (even_e >> 1))
    out = np.where(e == 0, _assemble(sign, 255, 0), out)         # 1/sqrt(±0) = ±inf
    out = np.where((e == 255) & (frac == 0) & (sign == 0), 0, out)
    out = np.where(((sign == 1) & (e != 0)) | ((e == 255) & (frac != 0)), F32_NAN, out)
    return _u32(out)


def silu_f32(bits):
    """x · sigmoid(x): ``x · recip(1 + exp(-x))`` for ``x >= -16``; below that
    ``(x · (e**x · 2**64)) · 2**-64`` (there 1 + e**-x rounds to e**-x within 2**-23, and
    the scaled form keeps results near 2**-126 that e**x alone would flush). SiLU(-inf)
    is -0; NaN stays NaN."""
    b = _u32(bits)
    low = (b >= 0xC1800000) & (b <= 0xFF800000)         # x < -16 (or -16 exactly)
    low = low & (b != 0xC1800000)
    e = exp_f32(np.where(low, b, b ^ np.uint32(0x80000000)), np.where(low, 64, 0))
    r = recip_f32(f32_add(np.uint32(F32_ONE), e))
    out = np.where(low, f32_mul(f32_mul(b, e), np.uint32(F32_2M64)), f32_mul(b, r))
    return np.where(b == 0xFF800000, np.uint32(0x80000000), out).astype(np.uint32)


def ln_fixed(bits):
    """``ln(s) · 2**30`` (int64, truncated as in the module docstring) of a positive normal
    binary32 ``s``; the caller handles every other input."""
    _, e, frac = _fields(bits)
    M = frac | (1 << 23)
    i = frac >> 15
    r = ((M * _RECIP[i]) >> 23) - (1 << FIX)
    return (e - 127) * LN2_Q + r - ((r * r) >> (FIX + 1)) + _LN[i]


F32_16 = 0x41800000         # 16.0
F32_M8 = 0xC1000000         # -8.0


def softplus_f32(bits):
    """``ln(1 + e**x)`` for binary32 ``x`` (algorithm in the module docstring)."""
    b = _u32(bits)
    _, e, frac = _fields(b)
    nan = (e == 255) & (frac != 0)
    neg = b >= 0x80000000
    big = ~neg & (b >= F32_16)                          # x >= 16, +inf
    low = neg & (b > F32_M8)                             # x < -8, -inf
    u = exp_f32(b)
    s = f32_add(np.uint32(F32_ONE), u)
    ln = ln_fixed(np.where(low | big | nan, np.uint32(F32_ONE), s))
    mid = normalize_trunc(np.maximum(ln, 0), -FIX)
    out = np.where(big, _flush(b), np.where(low, u, mid))
    return np.where(nan, np.uint32(F32_NAN), out).astype(np.uint32)


def sqrt_f32(bits):
    """``sqrt(x)`` for binary32 ``x``: ``x · rsqrt(x)`` (special cases in the docstring)."""
    b = _flush(bits)
    out = f32_mul(b, rsqrt_f32(b))
    out = np.where((b & 0x7FFFFFFF) == 0, b, out)                 # ±0 (and subnormals)
    out = np.where(b == 0x7F800000, np.uint32(0x7F800000), out)   # +inf
    return _u32(out)


# ---------------------------------------------------------------------------------------
# Elementwise commands on bf16 bits.

def exp_bf16(x):
    return f32_to_bf16(exp_f32(bf16_in(x)))


def silu_bf16(x):
    return f32_to_bf16(silu_f32(bf16_in(x)))


def add_bf16(a, b):
    return f32_to_bf16(f32_add(bf16_in(a), bf16_in(b)))


def mul_bf16(a, b):
    return f32_to_bf16(bf16_mul(np.asarray(a, np.uint16), np.asarray(b, np.uint16)))


def softplus_bf16(x):
    return f32_to_bf16(softplus_f32(bf16_in(x)))


def sqrt_bf16(x):
    return f32_to_bf16(sqrt_f32(bf16_in(x)))


def clamp_scalar(lo, hi):
    """SCALAR register value of CLAMP: bf16 ``lo`` in bits 15:0, ``hi`` in bits 31:16."""
    return (int(hi) & 0xFFFF) << 16 | (int(lo) & 0xFFFF)


def _clamp_ok(scalar):
    lo, hi = scalar & 0xFFFF, scalar >> 16 & 0xFFFF
    if any((v & 0x7F80) == 0x7F80 and (v & 0x7F) != 0 for v in (lo, hi)):
        return False                                     # a NaN bound
    return int(_order_key(lo)) <= int(_order_key(hi))


def clamp_bf16(x, lo, hi):
    """``x`` clamped to ``[lo, hi]`` (bf16 bits; exact, rules in the module docstring).
    The caller checks that neither bound is NaN and ``lo <= hi`` (``execute`` refuses
    such a command)."""
    x = np.asarray(x, np.uint16)
    flush = lambda v: np.where((np.asarray(v, np.uint16) & 0x7F80) == 0,
                               np.asarray(v, np.uint16) & 0x8000, v).astype(np.uint16)
    xf, lo, hi = flush(x), flush(np.uint16(lo)), flush(np.uint16(hi))
    k = _order_key(xf)
    out = np.where(k < _order_key(lo), lo, np.where(k > _order_key(hi), hi, xf))
    nan = ((x & 0x7F80) == 0x7F80) & ((x & 0x7F) != 0)
    return np.where(nan, np.uint16(BF16_NAN), out).astype(np.uint16)


def scale_bf16(x, s):
    """x · s for a bf16 scalar ``s`` (the product is exact in binary32: one rounding)."""
    return mul_bf16(x, np.full(np.shape(x), s, np.uint16))


# ---------------------------------------------------------------------------------------
# Reductions.

def sum_bf16(x, lanes):
    """binary32 sum in the order of the module docstring (``SUM_INTERLEAVE · lanes``
    interleaved partial sums, then a pairwise tree); ``lanes`` a power of 2."""
    if lanes < 1 or lanes & (lanes - 1):
        raise ValueError(f"lanes must be a power of two, not {lanes!r}")
    x = bf16_in(x)
    width = SUM_INTERLEAVE * lanes
    acc = np.zeros(width, np.uint32)
    for start in range(0, len(x), width):
        chunk = x[start:start + width]
        acc[:len(chunk)] = f32_add(acc[:len(chunk)], chunk)
    while len(acc) > 1:
        acc = f32_add(acc[0::2], acc[1::2])
    return int(acc[0])


def _order_key(x):
    """Sort key of bf16 bits by value: -0 == +0, NaN below everything."""
    b = np.asarray(x, np.int64)
    b = np.where(b == 0x8000, 0, b)
    key = np.where(b & 0x8000, 0x7FFF - (b & 0x7FFF), 0x8000 + b)
    nan = ((b & 0x7F80) == 0x7F80) & ((b & 0x7F) != 0)
    return np.where(nan, -1, key)


def topk_bf16(x, k):
    """The k largest values (bits) and their indices (int32), ties to the lowest index."""
    x = np.asarray(x, np.uint16)
    order = np.argsort(-_order_key(x), kind="stable")[:k]
    return x[order], order.astype(np.int32)


def max_bf16(x):
    """The largest value, as its bits; NaN only if every element is NaN."""
    return int(topk_bf16(x, 1)[0][0])


def _is_finite_bf16(x):
    return (np.asarray(x, np.uint16) & 0x7F80) != 0x7F80


def softmax_bf16(x):
    x = np.asarray(x, np.uint16)
    m = max_bf16(x)
    nan = ((x & 0x7F80) == 0x7F80) & ((x & 0x7F) != 0)
    if not _is_finite_bf16(m) or nan.any():
        return np.full(len(x), BF16_NAN, np.uint16)
    diff = f32_add(bf16_in(x), bf16_in(np.uint16(m ^ 0x8000)))
    e = exp_f32(diff)
    _, ee, ef = _fields(e)
    sh = ee - (150 - SUM_FRAC)                          # e = (ef|1<<23) · 2**(ee - 150)
    mant = np.where(ee == 0, 0, ef | (1 << 23))
    fixed = np.where(sh >= 0, mant << np.clip(sh, 0, 40), mant >> np.clip(-sh, 0, 63))
    total = int(fixed.sum())
    r = recip_f32(normalize_trunc(total, -SUM_FRAC))
    return f32_to_bf16(f32_mul(e, r))


def rmsnorm_bf16(x, gamma, eps_bits):
    """y = x · rsqrt(mean(x²) + eps) · gamma; ``eps_bits`` binary32."""
    x = np.asarray(x, np.uint16)
    xf = bf16_in(x)
    if not np.all(_is_finite_bf16(x)):
        return np.full(len(x), BF16_NAN, np.uint16)
    _, e, frac = _fields(xf)
    emax = int(e.max())
    M = np.where(e == 0, 0, (frac >> 16) | (1 << 7))
    sh = np.clip(2 * (emax - e), 0, 63)
    fixed = ((M * M) << (SUM_FRAC - 16)) >> sh           # x² / 2**(2·(emax-126)), exact sum
    total = int(fixed.sum())
    s = normalize_trunc(total, 2 * (emax - 126) - SUM_FRAC)
    ms = f32_mul(s, recip_f32(np.float32(len(x)).view(np.uint32)))
    r = rsqrt_f32(f32_add(ms, np.uint32(eps_bits)))
    return f32_to_bf16(f32_mul(f32_mul(xf, r), bf16_in(gamma)))


def rope_bf16(x, cos, sin, split_half):
    x = np.asarray(x, np.uint16)
    half = len(x) // 2
    if split_half:
        a, b = x[:half], x[half:]
    else:
        a, b = x[0::2], x[1::2]
    c, s = np.asarray(cos, np.uint16), np.asarray(sin, np.uint16)
    ya = f32_to_bf16(f32_add(bf16_mul(a, c), bf16_mul(b, s) ^ np.uint32(0x80000000)))
    yb = f32_to_bf16(f32_add(bf16_mul(a, s), bf16_mul(b, c)))
    out = np.empty_like(x)
    if split_half:
        out[:half], out[half:] = ya, yb
    else:
        out[0::2], out[1::2] = ya, yb
    return out


def quantize_bf16(x):
    """(int8 values, binary32 scale bits) of the dynamic range scaler."""
    x = np.asarray(x, np.uint16)
    mag = np.where((x & 0x7F80) == 0, 0, x & 0x7FFF)
    absmax = np.uint16(mag.max())
    scale = f32_mul(bf16_in(absmax), np.uint32(RECIP_127))
    v = f32_mul(bf16_in(x), recip_f32(scale)).view(np.float32)
    with np.errstate(all="ignore"):
        q = np.clip(np.rint(np.nan_to_num(v, nan=0.0, posinf=127, neginf=-127)), -127, 127)
    return q.astype(np.int8), int(scale)


def dequantize_int32(v, scale_bits):
    f = np.asarray(v, np.int32).astype(np.float32).view(np.uint32)
    return f32_to_bf16(f32_mul(f, np.uint32(scale_bits)))


def bf16_ulp_distance(a, b):
    """Number of bf16 steps between bit patterns ``a`` and ``b`` (±0 are 0 apart)."""
    def ordinal(x):
        x = np.asarray(x, np.int64)
        return np.where(x & 0x8000, -(x & 0x7FFF), x)
    return np.abs(ordinal(a) - ordinal(b))


# ---------------------------------------------------------------------------------------
# Commands on a memory image.

@dataclass
class VaCommand:
    """One VA command: the register values at START (see docs/va/regmap.md).

    Addresses are physical byte addresses (48 bits). ``esize`` is log2 of the element
    size for the gather/scatter family (0, 1, 2). ``scalar``: bf16 in bits 15:0 for
    SCALE, binary32 ε for RMSNORM, binary32 scale for DEQUANTIZE (DEQUANTIZE_MEM: the
    weight scale, times the binary32 at SRC2), bf16 ``lo`` (15:0) and
    ``hi`` (31:16) for CLAMP.
    """
    op: int
    length: int
    src: int = 0
    src2: int = 0
    src3: int = 0
    dst: int = 0
    dst2: int = 0
    stride: int = 0
    esize: int = 1
    scalar: int = 0
    k: int = 1
    index_limit: int = 0
    rows: int = 0
    row_stride: int = 0
    split_half: bool = False


class MemoryWindow:
    """Bytes ``[origin, origin + len(data))`` of the physical space, for :func:`execute`
    when the interesting memory sits at a high address: slices take physical addresses."""

    def __init__(self, origin, data):
        self.origin, self.data = origin, data

    def _slice(self, key):
        start, stop = key.start - self.origin, key.stop - self.origin
        if start < 0 or stop > len(self.data):
            raise IndexError(f"[{key.start:#x}, {key.stop:#x}) is outside the window")
        return slice(start, stop)

    def __getitem__(self, key):
        return self.data[self._slice(key)]

    def __setitem__(self, key, value):
        self.data[self._slice(key)] = value


def _load(mem, addr, n, dtype):
    size = np.dtype(dtype).itemsize
    return mem[addr:addr + n * size].view(dtype).copy()


def _store(mem, addr, values):
    raw = np.ascontiguousarray(values).view(np.uint8)
    mem[addr:addr + raw.size] = raw


_ESIZE_DTYPE = {0: np.uint8, 1: np.uint16, 2: np.uint32}


def _shape_ok(cmd, proposed=False):
    try:
        op = VaOpcode(cmd.op)
    except ValueError:
        return False
    if op in PROPOSED_OPCODES and not proposed:   # golden only (execute_proposed)
        return False
    if not 1 <= cmd.length <= MAX_LENGTH:
        return False
    if op in (VaOpcode.GATHER, VaOpcode.SCATTER, VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX,
              VaOpcode.GATHER_CSR) and cmd.esize not in _ESIZE_DTYPE:
        return False
    if op == VaOpcode.TOPK and not 1 <= cmd.k <= min(MAX_K, cmd.length):
        return False
    if op == VaOpcode.TOPK_WIDE and not 1 <= cmd.k <= cmd.length:
        return False
    if op == VaOpcode.ROPE and cmd.length % 2:
        return False
    if op == VaOpcode.CLAMP and not _clamp_ok(cmd.scalar):
        return False
    return True


def _ranges(cmd):
    """(address, bytes, alignment) of every operand range the command touches, in the
    order MISALIGNED reports them; indexed ranges are checked per element later."""
    op, n = VaOpcode(cmd.op), cmd.length
    es = 1 << cmd.esize
    strided = (cmd.src, (n - 1) * cmd.stride + es, es)
    if op == VaOpcode.GATHER:
        return [strided, (cmd.dst, n * es, es)]
    if op == VaOpcode.SCATTER:
        return [(cmd.src, n * es, es), (cmd.dst, (n - 1) * cmd.stride + es, es)]
    if op in (VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX):
        data = (cmd.dst, n * es, es) if op == VaOpcode.GATHER_IDX else (cmd.src, n * es, es)
        return [(cmd.src2, 4 * n, 4), data]
    if op == VaOpcode.GATHER_CSR:
        return [(cmd.src2, 4 * (cmd.rows + 1), 4), (cmd.src3, 4 * n, 4), (cmd.dst, n * es, es)]
    if op == VaOpcode.QUANTIZE:
        return [(cmd.src, 2 * n, 2), (cmd.dst, n, 1), (cmd.dst2, 4, 4)]
    if op in (VaOpcode.DEQUANTIZE, VaOpcode.CVT_F32):
        return [(cmd.src, 4 * n, 4), (cmd.dst, 2 * n, 2)]
    if op == VaOpcode.DEQUANTIZE_MEM:
        return [(cmd.src, 4 * n, 4), (cmd.src2, 4, 4), (cmd.dst, 2 * n, 2)]
    if op in (VaOpcode.MUL_MEM, VaOpcode.ADD_MEM):
        return [(cmd.src, 2 * n, 2), (cmd.src2, 2, 2), (cmd.dst, 2 * n, 2)]
    if op in (VaOpcode.ADD, VaOpcode.MUL, VaOpcode.RMSNORM):
        return [(cmd.src, 2 * n, 2), (cmd.src2, 2 * n, 2), (cmd.dst, 2 * n, 2)]
    if op == VaOpcode.ROPE:
        return [(cmd.src, 2 * n, 2), (cmd.src2, n, 2), (cmd.src3, n, 2), (cmd.dst, 2 * n, 2)]
    if op == VaOpcode.SUM:
        return [(cmd.src, 2 * n, 2), (cmd.dst, 4, 4)]
    if op == VaOpcode.MAX:
        return [(cmd.src, 2 * n, 2), (cmd.dst, 2, 2)]
    if op in (VaOpcode.TOPK, VaOpcode.TOPK_WIDE):
        return [(cmd.src, 2 * n, 2), (cmd.dst, 2 * cmd.k, 2), (cmd.dst2, 4 * cmd.k, 4)]
    return [(cmd.src, 2 * n, 2), (cmd.dst, 2 * n, 2)]      # SCALE, SILU, EXP, SOFTMAX, CLAMP, ...


def _index_ranges(cmd, mem):
    """Per-element source/destination addresses of the indexed forms, or an error."""
    n, es = cmd.length, 1 << cmd.esize
    op = VaOpcode(cmd.op)
    if op == VaOpcode.GATHER_CSR:
        # The source matrix (ROWS rows of INDEX_LIMIT columns) must lie below 2**48.
        span = (max(cmd.rows - 1, 0) * cmd.row_stride
                + max(cmd.index_limit - 1, 0) * cmd.stride + es)
        if cmd.src + span > ADDRESS_LIMIT:
            return None, (ErrorCode.BAD_COMMAND, cmd.src)
        rp = _load(mem, cmd.src2, cmd.rows + 1, np.int32).astype(np.int64)
        col = _load(mem, cmd.src3, n, np.int32).astype(np.int64)
        if np.any(np.diff(rp) < 0) or rp[0] != 0 or rp[-1] != n:
            return None, (ErrorCode.BAD_COMMAND, cmd.src2)
        bad = np.nonzero((col < 0) | (col >= cmd.index_limit))[0]
        if len(bad):
            return None, (ErrorCode.BAD_COMMAND, cmd.src3 + 4 * int(bad[0]))
        row = np.repeat(np.arange(cmd.rows), np.diff(rp))
        return cmd.src + row * cmd.row_stride + col * cmd.stride, None
    idx = _load(mem, cmd.src2, n, np.int32).astype(np.int64)
    bad = np.nonzero((idx < -1) | (idx >= cmd.index_limit))[0]
    if len(bad):
        return None, (ErrorCode.BAD_COMMAND, cmd.src2 + 4 * int(bad[0]))
    base = cmd.src if op == VaOpcode.GATHER_IDX else cmd.dst
    addr = np.where(idx < 0, -1, base + idx * cmd.stride)
    if np.any(addr + es > ADDRESS_LIMIT):
        return None, (ErrorCode.BAD_COMMAND, cmd.src2 + 4 * int(np.argmax(addr + es > ADDRESS_LIMIT)))
    return addr, None


def execute(cmd, mem, lanes=32, *, proposed=False):
    """Run ``cmd`` on ``mem`` (a flat ``uint8`` array, physical address = index).

    Returns ``(ErrorCode, err_addr)``. On an error ``mem`` is unchanged. Checks, in order:
    BAD_COMMAND (opcode, a proposed one included, length, k, element size, odd RoPE
    length, a CLAMP bound NaN or ``lo > hi``; a range reaching 2**48), MISALIGNED (an address or stride not a
    multiple of its element size, then the indexed forms' base and the CSR row stride;
    ERR_ADDR = that register's value), then the indexed forms' data: BAD_COMMAND for the
    CSR source matrix reaching 2**48 (ERR_ADDR = SRC), a CSR row pointer sequence not
    rising from 0 to ``length`` (SRC2), an index below -1 (CSR: 0) or at/above
    ``index_limit``, then an indexed address reaching 2**48 (the first such index's
    address). ``proposed``: run the :data:`PROPOSED_OPCODES` commands too
    (:func:`execute_proposed`) instead of refusing them as the RTL does.
    """
    if not _shape_ok(cmd, proposed):
        return ErrorCode.BAD_COMMAND, 0
    ranges = _ranges(cmd)
    for addr, nbytes, _ in ranges:
        if addr < 0 or addr + nbytes > ADDRESS_LIMIT:
            return ErrorCode.BAD_COMMAND, addr & 0xFFFFFFFF
    op = VaOpcode(cmd.op)
    for addr, _, align in ranges:
        if addr % align:
            return ErrorCode.MISALIGNED, addr & 0xFFFFFFFF
    es = 1 << cmd.esize
    if op in (VaOpcode.GATHER, VaOpcode.SCATTER, VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX,
              VaOpcode.GATHER_CSR) and cmd.stride % es:
        return ErrorCode.MISALIGNED, cmd.stride
    if op in (VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX, VaOpcode.GATHER_CSR):
        base = cmd.dst if op == VaOpcode.SCATTER_IDX else cmd.src
        if base % es:       # elements at base + idx·stride would straddle bus words
            return ErrorCode.MISALIGNED, base & 0xFFFFFFFF
        if op == VaOpcode.GATHER_CSR and cmd.row_stride % es:
            return ErrorCode.MISALIGNED, cmd.row_stride
    if op in (VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX, VaOpcode.GATHER_CSR):
        addrs, err = _index_ranges(cmd, mem)
        if err:
            return err[0], err[1] & 0xFFFFFFFF
    _run(cmd, mem, lanes, addrs if op in (VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX,
                                          VaOpcode.GATHER_CSR) else None)
    return ErrorCode.NONE, 0


def _run(cmd, mem, lanes, addrs):
    op, n = VaOpcode(cmd.op), cmd.length
    es = 1 << cmd.esize
    dt = _ESIZE_DTYPE.get(cmd.esize, np.uint16)
    bf = lambda addr, count=n: _load(mem, addr, count, np.uint16)
    if op == VaOpcode.GATHER:
        vals = [_load(mem, cmd.src + i * cmd.stride, 1, dt)[0] for i in range(n)]
        _store(mem, cmd.dst, np.array(vals, dt))
    elif op == VaOpcode.SCATTER:
        vals = _load(mem, cmd.src, n, dt)
        for i in range(n):
            _store(mem, cmd.dst + i * cmd.stride, vals[i:i + 1])
    elif op in (VaOpcode.GATHER_IDX, VaOpcode.GATHER_CSR):
        for i, a in enumerate(addrs):
            if a >= 0:
                _store(mem, cmd.dst + i * es, _load(mem, int(a), 1, dt))
    elif op == VaOpcode.SCATTER_IDX:
        vals = _load(mem, cmd.src, n, dt)
        for i, a in enumerate(addrs):
            if a >= 0:
                _store(mem, int(a), vals[i:i + 1])
    elif op == VaOpcode.QUANTIZE:
        q, scale = quantize_bf16(bf(cmd.src))
        _store(mem, cmd.dst, q)
        _store(mem, cmd.dst2, np.array([scale], np.uint32))
    elif op == VaOpcode.DEQUANTIZE:
        _store(mem, cmd.dst, dequantize_int32(_load(mem, cmd.src, n, np.int32), cmd.scalar))
    elif op == VaOpcode.ADD:
        _store(mem, cmd.dst, add_bf16(bf(cmd.src), bf(cmd.src2)))
    elif op == VaOpcode.MUL:
        _store(mem, cmd.dst, mul_bf16(bf(cmd.src), bf(cmd.src2)))
    elif op == VaOpcode.SCALE:
        _store(mem, cmd.dst, scale_bf16(bf(cmd.src), cmd.scalar & 0xFFFF))
    elif op == VaOpcode.SILU:
        _store(mem, cmd.dst, silu_bf16(bf(cmd.src)))
    elif op == VaOpcode.EXP:
        _store(mem, cmd.dst, exp_bf16(bf(cmd.src)))
    elif op == VaOpcode.CLAMP:
        _store(mem, cmd.dst, clamp_bf16(bf(cmd.src), cmd.scalar & 0xFFFF, cmd.scalar >> 16 & 0xFFFF))
    elif op == VaOpcode.SOFTPLUS:
        _store(mem, cmd.dst, softplus_bf16(bf(cmd.src)))
    elif op == VaOpcode.SQRT:
        _store(mem, cmd.dst, sqrt_bf16(bf(cmd.src)))
    elif op == VaOpcode.RECIP:
        _store(mem, cmd.dst, recip_bf16(bf(cmd.src)))
    elif op == VaOpcode.CVT_F32:
        _store(mem, cmd.dst, f32_to_bf16(_load(mem, cmd.src, n, np.uint32)))
    elif op == VaOpcode.MUL_MEM:
        _store(mem, cmd.dst, mul_mem_bf16(bf(cmd.src), bf(cmd.src2, 1)[0]))
    elif op == VaOpcode.ADD_MEM:
        _store(mem, cmd.dst, add_mem_bf16(bf(cmd.src), bf(cmd.src2, 1)[0]))
    elif op == VaOpcode.RMSNORM:
        _store(mem, cmd.dst, rmsnorm_bf16(bf(cmd.src), bf(cmd.src2), cmd.scalar))
    elif op == VaOpcode.ROPE:
        _store(mem, cmd.dst, rope_bf16(bf(cmd.src), bf(cmd.src2, n // 2), bf(cmd.src3, n // 2),
                                       cmd.split_half))
    elif op == VaOpcode.SOFTMAX:
        _store(mem, cmd.dst, softmax_bf16(bf(cmd.src)))
    elif op == VaOpcode.SUM:
        _store(mem, cmd.dst, np.array([sum_bf16(bf(cmd.src), lanes)], np.uint32))
    elif op == VaOpcode.MAX:
        _store(mem, cmd.dst, np.array([max_bf16(bf(cmd.src))], np.uint16))
    elif op in (VaOpcode.TOPK, VaOpcode.TOPK_WIDE):
        values, index = topk_bf16(bf(cmd.src), cmd.k)
        _store(mem, cmd.dst, values)
        _store(mem, cmd.dst2, index)
    elif op == VaOpcode.DEQUANTIZE_MEM:
        _store(mem, cmd.dst, dequantize_mem_int32(_load(mem, cmd.src, n, np.int32),
                                                  _load(mem, cmd.src2, 1, np.uint32)[0], cmd.scalar))


# ---------------------------------------------------------------------------------------
# The layer program's commands beyond SQRT = 21 (golden/program.py needs them; opcodes
# 22..27 of spec.codes.VaOpcode). All six are built: the RTL runs them and so does
# :func:`execute` (above). :data:`PROPOSED_OPCODES` (commands with a golden contract and
# no RTL yet, refused by the RTL and by :func:`execute`, run by :func:`execute_proposed`)
# is empty. Each contract is on its member below; registers as in :class:`VaCommand`
# (LENGTH elements, byte addresses, SCALAR).

PROGRAM_OPCODES = (VaOpcode.RECIP, VaOpcode.CVT_F32, VaOpcode.MUL_MEM, VaOpcode.ADD_MEM,
                   VaOpcode.DEQUANTIZE_MEM, VaOpcode.TOPK_WIDE)
"""The layer program's commands 22..27 (their contracts: :data:`PROPOSED_CONTRACTS`)."""

PROPOSED_OPCODES = ()
"""The commands of :data:`PROGRAM_OPCODES` with no RTL yet (none now: DEQUANTIZE_MEM and
TOPK_WIDE, the last two, are built), run by :func:`execute_proposed` only."""

ProposedVaOpcode = IntEnum("ProposedVaOpcode", [(op.name, int(op)) for op in PROGRAM_OPCODES])
"""The opcodes of :data:`PROGRAM_OPCODES` as an enum of their own (for users that name
them apart from the RTL's; its members equal the VaOpcode ones)."""


PROPOSED_CONTRACTS = {
    VaOpcode.RECIP: (
        "RECIP: for i < LENGTH, dst[i] = f32_to_bf16(recip_f32(bf16_in(src[i]))) (bf16 in "
        "and out, the reciprocal unit of SOFTMAX / RMSNORM; <= 1 bf16 ulp; 1/±0 = ±inf, "
        "1/±inf = ±0, NaN canonical). SRC, DST 2-byte aligned."),
    VaOpcode.CVT_F32: (
        "CVT_F32: dst[i] = f32_to_bf16(src[i]) for i < LENGTH: binary32 at SRC (4-byte "
        "aligned, LENGTH·4 bytes) to bf16 at DST, nearest even on the bits (a subnormal "
        "binary32 rounds to a bf16 subnormal or the smallest normal, as it is), NaN 0x7FC0 "
        "(the VA's write rounding). The conversion of every MA binary32 result and every "
        "SUM output."),
    VaOpcode.MUL_MEM: (
        "MUL_MEM: s = the bf16 at SRC2 (2 bytes, read once per command); dst[i] = "
        "bf16(src[i] · s), the product exact in binary32 then one rounding (as SCALE, the "
        "scalar from memory instead of the SCALAR register)."),
    VaOpcode.ADD_MEM: (
        "ADD_MEM: s = the bf16 at SRC2; dst[i] = f32_to_bf16(f32_add(bf16_in(src[i]), "
        "bf16_in(s))) (as ADD with a broadcast second operand)."),
    VaOpcode.DEQUANTIZE_MEM: (
        "DEQUANTIZE_MEM: S = the binary32 at SRC2 (4-byte aligned; a row scale QUANTIZE "
        "wrote), t = f32_mul(S, SCALAR); dst[i] = f32_to_bf16(f32_mul(f32(int32 src[i]), "
        "t)) (DEQUANTIZE with the scale product of a row and a weight scale)."),
    VaOpcode.TOPK_WIDE: (
        "TOPK_WIDE: as TOPK (by value, -0 == +0, NaN below everything, ties to the lowest "
        "index; values as the input bits) with 1 <= K <= LENGTH; K values at DST (bf16), "
        "K int32 indices at DST2. Equal to repeated TOP-K(8) passes where each pass "
        "overwrites the picked entries with NaN, while K <= the number of non-NaN inputs."),
}


def recip_bf16(x):
    """RECIP: the bf16 reciprocal of bf16 bits."""
    return f32_to_bf16(recip_f32(bf16_in(x)))


def mul_mem_bf16(x, s):
    return scale_bf16(x, s)


def add_mem_bf16(x, s):
    return add_bf16(x, np.full(np.shape(x), s, np.uint16))


def dequantize_mem_int32(v, row_scale_bits, scale_bits):
    return dequantize_int32(v, int(f32_mul(np.uint32(row_scale_bits), np.uint32(scale_bits))))


def execute_proposed(cmd, mem, lanes=32):
    """:func:`execute`, extended by the :data:`PROPOSED_OPCODES` commands (the same
    checks: BAD_COMMAND for LENGTH or K out of range or a range reaching 2**48, then
    MISALIGNED)."""
    return execute(cmd, mem, lanes, proposed=True)
