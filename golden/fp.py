"""Floating-point helpers for the golden model: bf16 and binary32 as the MA computes them.

The matrix accelerator's bf16 arithmetic (docs/design.md, "Matrix accelerator") differs from
plain IEEE 754 in three ways, and every function here that computes applies all three:

1. Subnormal inputs read as a zero of the same sign.
2. A result whose IEEE binary32 value -- rounded to nearest even *with* gradual
   underflow -- is subnormal is replaced by a zero of the same sign. A result that rounds
   up out of the subnormal range to the smallest normal (2**-126) is kept.
3. Every NaN result is the canonical quiet NaN ``0x7FC00000``. Signalling NaN inputs are
   not distinguished from quiet ones: they are NaNs, and the result is canonical.

Everything else is IEEE 754 binary32 with round-to-nearest-even: overflow goes to
infinity, ``inf * 0`` and ``inf + -inf`` are NaN, an exact zero sum is ``+0`` unless both
addends are ``-0``.

Values cross the API as *bit patterns* (``uint16`` for bf16, ``uint32`` for binary32),
because that is what memory holds and what the RTL is compared against; NaN payloads and
the sign of zero survive only as bits. Internally the work is done with numpy
``float32`` arithmetic, which is IEEE binary32 with round-to-nearest-even and gradual
underflow in the FPU's default mode (SSE on x86), then rules 2 and 3 are applied on the
bits.
All functions are elementwise and broadcast like numpy ufuncs; floating-point warnings
(overflow, invalid, underflow) never escape.
"""

import numpy as np

__all__ = [
    "F32_CANONICAL_NAN", "BF16_CANONICAL_NAN", "F32_MIN_NORMAL",
    "bf16_to_f32", "f32_bits", "f32_from_bits",
    "flush_subnormal_f32", "canonical_nan",
    "f32_add", "bf16_mul", "float_to_bf16_rne",
]

F32_CANONICAL_NAN = 0x7FC0_0000
"""The only NaN the MA ever writes (binary32 bits)."""

BF16_CANONICAL_NAN = 0x7FC0
"""The NaN :func:`float_to_bf16_rne` produces (bf16 bits)."""

F32_MIN_NORMAL = np.float32(2.0 ** -126)
"""Smallest positive normal binary32; anything smaller in magnitude (but non-zero) is
subnormal and flushed by the MA."""

_SIGN = np.uint32(0x8000_0000)
_EXP = np.uint32(0x7F80_0000)
_MANT = np.uint32(0x007F_FFFF)


def _as_uint_bits(bits, dtype, what):
    """``bits`` as an array of ``dtype``; integer values outside its range are refused."""
    arr = np.asarray(bits)
    if arr.dtype == dtype:
        return arr
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{what} must be an integer array of bit patterns, not {arr.dtype}")
    info = np.iinfo(dtype)
    if arr.size and (arr.min() < info.min or arr.max() > info.max):
        raise ValueError(f"{what} has values outside 0..{info.max:#x}")
    return arr.astype(dtype)


def bf16_to_f32(bits_u16):
    """Widen bf16 bit patterns to ``float32`` values, exactly.

    bf16 is the top half of binary32, so this is a 16-bit left shift of the bits: no
    rounding, no flushing (subnormals stay subnormal), NaN payloads preserved.

    ``bits_u16``: integer array (or scalar) of bf16 bit patterns, 0..0xFFFF.
    Returns a ``float32`` array of the same shape.
    """
    u16 = _as_uint_bits(bits_u16, np.uint16, "bf16 bits")
    return (u16.astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_bits(x):
    """Bit patterns (``uint32``) of ``float32`` values; NaN payloads and -0 preserved.

    ``x`` must already be ``float32`` (converting wider floats would round; do that
    explicitly with ``astype`` first if that is what you want).
    """
    arr = np.asarray(x)
    if arr.dtype != np.float32:
        raise TypeError(f"f32_bits needs float32 values, not {arr.dtype}")
    return arr.view(np.uint32)


def f32_from_bits(u32):
    """``float32`` values with the given binary32 bit patterns (``uint32``, 0..2**32-1).

    A pure reinterpretation: NaN payloads, signalling NaNs and -0 are preserved.
    """
    return _as_uint_bits(u32, np.uint32, "binary32 bits").view(np.float32)


def _is_nan_bits(u):
    return ((u & _EXP) == _EXP) & ((u & _MANT) != 0)


def flush_subnormal_f32(x):
    """Replace every subnormal ``float32`` in ``x`` by a zero of the same sign.

    ``x``: ``float32`` array. Returns a new ``float32`` array; normals, zeros, infinities
    and NaNs (payload included) are unchanged.
    """
    u = f32_bits(x)
    subnormal = (u & _EXP) == 0
    return np.where(subnormal, u & _SIGN, u).astype(np.uint32).view(np.float32)


def canonical_nan(x):
    """Replace every NaN in ``x`` (``float32`` array) by the canonical NaN ``0x7FC00000``.

    Returns a new ``float32`` array; non-NaN values are unchanged.
    """
    u = f32_bits(x)
    return np.where(_is_nan_bits(u), np.uint32(F32_CANONICAL_NAN), u).astype(np.uint32).view(np.float32)


def _ma_result(x):
    """Apply the MA's rules 2 and 3 to ``float32`` results; return their bits."""
    return f32_bits(canonical_nan(flush_subnormal_f32(x)))


def f32_add(a_bits, b_bits):
    """One step of the MA's binary32 accumulator: ``a + b`` under the MA's rules.

    ``a_bits``, ``b_bits``: binary32 bit patterns (``uint32``), broadcast together.
    Subnormal operands read as signed zeros; the IEEE RNE sum is flushed if subnormal;
    NaNs come out canonical. Returns ``uint32`` bit patterns.
    """
    a = flush_subnormal_f32(f32_from_bits(a_bits))
    b = flush_subnormal_f32(f32_from_bits(b_bits))
    with np.errstate(all="ignore"):
        s = a + b
    return _ma_result(s)


def bf16_mul(a_bits16, b_bits16):
    """One MA multiplier: the product of two bf16 values rounded to binary32.

    ``a_bits16``, ``b_bits16``: bf16 bit patterns (``uint16``), broadcast together.
    Subnormal operands read as signed zeros; the IEEE RNE product is flushed if
    subnormal; NaNs come out canonical. Returns ``uint32`` binary32 bit patterns.

    Two 8-bit significands give an exact 16-bit product, so the only rounding is on
    overflow (to infinity) and below 2**-134 (where the result is flushed anyway).
    """
    a = flush_subnormal_f32(bf16_to_f32(a_bits16))
    b = flush_subnormal_f32(bf16_to_f32(b_bits16))
    with np.errstate(all="ignore"):
        p = a * b
    return _ma_result(p)


def float_to_bf16_rne(x):
    """Round real values to bf16 bit patterns, nearest-even, with gradual underflow.

    For generating test data. ``x``: array (or scalar) of real values; ``float32`` is
    used as is, anything else is converted to ``float64`` first. Returns ``uint16`` bf16
    bits: correctly rounded in one step (no double rounding through binary32),
    overflowing to +-inf, subnormal bf16 results kept (flushing is the MA's business, not
    the data's), every NaN mapped to ``0x7FC0``.
    """
    arr = np.asarray(x)
    if arr.dtype != np.float32:
        arr = arr.astype(np.float64)
        with np.errstate(all="ignore"):
            f = arr.astype(np.float32)
            # Round-to-odd from float64 to float32: where the nearest-even result is
            # inexact and even, take its other neighbour around x, which is odd. A
            # round-to-odd value with 16 spare bits rounds to bf16 exactly as x itself
            # would, so the bf16 step below is one correct rounding, not two.
            wide = f.astype(np.float64)
            fix = (wide != arr) & ~np.isnan(arr) & ((f.view(np.uint32) & np.uint32(1)) == 0)
            toward = np.where(arr > wide, np.float32(np.inf), np.float32(-np.inf))
            arr = np.where(fix, np.nextafter(f, toward), f).astype(np.float32)
    u = arr.view(np.uint32)
    nan = _is_nan_bits(u)
    u = np.where(nan, np.uint32(0), u).astype(np.uint32)  # keeps the add below from wrapping
    # Adding 0x7FFF plus the LSB of the kept half rounds to nearest, ties to even;
    # a carry out of the mantissa bumps the exponent, up to infinity, as it should.
    lsb = (u >> np.uint32(16)) & np.uint32(1)
    rounded = ((u + np.uint32(0x7FFF) + lsb) >> np.uint32(16)).astype(np.uint16)
    return np.where(nan, np.uint16(BF16_CANONICAL_NAN), rounded).astype(np.uint16)
