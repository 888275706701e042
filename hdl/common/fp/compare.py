"""Order keys of bf16 values: integers that compare as the values do."""

from amaranth.hdl import Mux

from hdl.common.fp.bits import bf16_is_nan

__all__ = ["bf16_key", "bf16_order_key"]


def bf16_key(v):
    """Unsigned 16-bit order key of flushed bf16 bits (-0 == +0); not for NaNs (CLAMP)."""
    mag = v[:15]
    return Mux(mag == 0, 0x8000, Mux(v[15], 0x7FFF - mag, 0x8000 + mag))


def bf16_order_key(bits):
    """Signed key that orders bf16 values: -0 == +0, NaN (key -1) below everything
    (subnormals keep their order; MAX and TOPK)."""
    b = Mux(bits == 0x8000, 0, bits)
    nan = bf16_is_nan(b)
    key = Mux(b[15], 0x7FFF - b[:15], 0x8000 + b)
    return Mux(nan, -1, key.as_signed())
