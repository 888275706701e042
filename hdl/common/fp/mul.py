"""The multipliers: bf16 × bf16 → binary32 (exact where normal) and binary32 × binary32.

Why :func:`bf16_mul` needs no subnormal rounding (rule 2 of :mod:`hdl.common.fp`): a
product of two normal bf16 values has at most 16 significant bits, so where its exponent
is normal it is exact. Below ``2**-126`` its largest value is ``(2**16 - 1) * 2**-142 <
2**-126 - 2**-150``, the point from which round-to-nearest would carry it up to the
smallest normal; so every product under ``2**-126`` rounds to a subnormal (or zero) and is
flushed: the unit flushes whenever the normalised exponent is below 1. :func:`f32_mul`
rounds its 48-bit product and keeps the one value below ``2**-126`` that rounds up to it.
"""

from amaranth.hdl import Cat, Const, Mux, Signal

from hdl.common.fp.bits import (
    F32_CANONICAL_NAN,
    KIND_INF,
    KIND_NAN,
    KIND_ZERO,
    bf16_fields,
    classes,
    f32_fields,
    f32_inf,
    f32_zero,
)
from hdl.common.fp.stages import no_cut, product

__all__ = ["bf16_mul", "f32_mul"]


def bf16_mul(m, a, b, name="mul", product=None):
    """Product of two bf16 bit patterns as a binary32 bit pattern (a 32-bit Signal).

    ``product``, when given, is the 16-bit product of the two significands with their
    hidden bits (``(1.fa) × (1.fb)`` as 1.7 × 1.7 → 2.14 fixed point) computed elsewhere
    (the PE shares one multiplier between its modes); otherwise it is computed here.
    """
    sa, ea, fa = bf16_fields(a)
    sb, eb, fb = bf16_fields(b)
    sign = sa ^ sb
    a_zero, a_inf, a_nan = classes(ea, fa)
    b_zero, b_inf, b_nan = classes(eb, fb)

    prod = Signal(16, name=f"{name}_prod")          # 1.7 × 1.7 → 2.14 fixed point
    m.d.comb += prod.eq(Cat(fa, 1) * Cat(fb, 1) if product is None else product)
    top = prod[15]
    # Biased exponent of the product; signed, 10 bits covers -126 .. 382.
    exp = Signal(range(-256, 512), name=f"{name}_exp")
    m.d.comb += exp.eq(ea + eb - 127 + top)
    frac = Mux(top, Cat(Const(0, 8), prod[0:15]), Cat(Const(0, 9), prod[0:14]))

    result = Signal(32, name=name)
    with m.If(a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf)):
        m.d.comb += result.eq(F32_CANONICAL_NAN)
    with m.Elif(a_inf | b_inf):
        m.d.comb += result.eq(f32_inf(sign))
    with m.Elif(a_zero | b_zero | (exp < 1)):
        m.d.comb += result.eq(f32_zero(sign))
    with m.Elif(exp > 254):
        m.d.comb += result.eq(f32_inf(sign))
    with m.Else():
        m.d.comb += result.eq(Cat(frac, exp[0:8], sign))
    return result


def f32_mul(m, a, b, name, cut=None):
    """binary32 × binary32, round to nearest even, with the MA's rules: subnormal inputs
    read as zeros, a subnormal IEEE result flushes to a signed zero (one that rounds up
    to 2**-126 is kept), every NaN is 0x7FC00000. Cuts: after the partial products,
    after their sum, after the rounding."""
    cut = no_cut(m, cut)
    sa, ea, fa = f32_fields(a)
    sb, eb, fb = f32_fields(b)
    a_zero, a_inf, a_nan = classes(ea, fa)
    b_zero, b_inf, b_nan = classes(eb, fb)
    kind = Signal(2, name=f"{name}_kind")        # KIND_SUM (0) unless special
    with m.If(a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf)):
        m.d.comb += kind.eq(KIND_NAN)
    with m.Elif(a_inf | b_inf):
        m.d.comb += kind.eq(KIND_INF)
    with m.Elif(a_zero | b_zero):
        m.d.comb += kind.eq(KIND_ZERO)
    esum = Signal(range(-512, 512), name=f"{name}_esum")
    m.d.comb += esum.eq(ea + eb - 127)
    token = cut.keep(sign=sa ^ sb, kind=kind, esum=esum)
    prod = product(m, Cat(fa, 1), Cat(fb, 1), cut, f"{name}_prod")
    s = {"prod": prod, **cut.take(token)}
    s = cut(s)
    prod = s["prod"]
    top = prod[47]
    exp = Signal(range(-512, 512), name=f"{name}_exp")
    m.d.comb += exp.eq(s["esum"] + top)
    sig = Mux(top, prod[24:48], prod[23:47])
    guard = Mux(top, prod[23], prod[22])
    sticky = Mux(top, prod[:23] != 0, prod[:22] != 0)
    rounded = Signal(25, name=f"{name}_rnd")
    m.d.comb += rounded.eq(sig + (guard & (sticky | sig[0])))
    s = cut({"rounded": rounded, "exp": exp, "ones": sig[:23] == 0x7FFFFF,
             "sign": s["sign"], "kind": s["kind"]})
    rounded, exp, sign = s["rounded"], s["exp"], s["sign"]
    exp_r = Signal(range(-512, 512), name=f"{name}_expr")
    m.d.comb += exp_r.eq(exp + rounded[24])
    frac = Mux(rounded[24], 0, rounded[:23])
    out = Signal(32, name=name)
    with m.Switch(s["kind"]):
        with m.Case(KIND_NAN):
            m.d.comb += out.eq(F32_CANONICAL_NAN)
        with m.Case(KIND_INF):
            m.d.comb += out.eq(f32_inf(sign))
        with m.Case(KIND_ZERO):
            m.d.comb += out.eq(f32_zero(sign))
        with m.Default():
            with m.If(exp_r > 254):
                m.d.comb += out.eq(f32_inf(sign))
            with m.Elif(exp >= 1):
                m.d.comb += out.eq(Cat(frac, exp_r[:8], sign))
            with m.Elif((exp == 0) & s["ones"]):
                # 2**-127 · (2 - 2**-23) or more rounds, as a subnormal, up to 2**-126.
                m.d.comb += out.eq(Cat(Const(0, 23), Const(1, 8), sign))
            with m.Else():
                m.d.comb += out.eq(f32_zero(sign))
    return out
