"""Conversions: binary32 → bf16, int32 → binary32, binary32 → int8, and the truncating
normalisation of a fixed-point value to binary32 (the VA's approximated functions)."""

from amaranth.hdl import Cat, Mux, Signal

from hdl.common.fp.bits import f32_fields, f32_inf, f32_zero, leading_one
from hdl.common.fp.stages import no_cut

__all__ = ["f32_to_bf16", "normalize_trunc", "int32_to_f32", "f32_to_int8"]


def f32_to_bf16(value):
    """binary32 bits → bf16 bits, nearest even. Correct for every value the MA's units
    produce: normals, zeros, infinities and the canonical NaN (which stays 0x7FC0)."""
    return (value + 0x7FFF + value[16])[16:32]


def normalize_trunc(m, value, width, scale, sign, name, cut=None):
    """binary32 bits of ``±value · 2**scale`` (``value`` unsigned, ``width`` bits;
    ``scale`` signed), truncated to 24 bits, flushed below 2**-126, inf from 2**128.
    Cuts: after the leading one and the exponent, after the shift."""
    cut = no_cut(m, cut)
    hb = leading_one(m, value, width, f"{name}_hb")
    exp = Signal(range(-1024, 1024), name=f"{name}_exp")
    m.d.comb += exp.eq(hb + scale + 127)
    s = cut({"value": value, "hb": hb, "exp": exp, "sign": sign})
    hb = s["hb"]
    mant = Signal(24, name=f"{name}_mant")
    right = (hb - 23)[:6]          # each is used only where it is not negative
    left = (23 - hb)[:5]
    m.d.comb += mant.eq(Mux(hb >= 23, s["value"] >> right, s["value"] << left))
    s = cut({"zero": s["value"] == 0, "mant": mant, "exp": s["exp"], "sign": s["sign"]})
    exp, sign = s["exp"], s["sign"]
    out = Signal(32, name=name)
    with m.If(s["zero"]):
        m.d.comb += out.eq(f32_zero(sign))
    with m.Elif(exp < 1):
        m.d.comb += out.eq(f32_zero(sign))
    with m.Elif(exp > 254):
        m.d.comb += out.eq(f32_inf(sign))
    with m.Else():
        m.d.comb += out.eq(Cat(s["mant"][:23], exp[:8], sign))
    return out


def int32_to_f32(m, v, name, cut=None):
    """Signed 32-bit integer → binary32, round to nearest even. Cuts: after the magnitude,
    after the alignment."""
    cut = no_cut(m, cut)
    sign = v[31]
    mag = Signal(32, name=f"{name}_mag")
    m.d.comb += mag.eq(Mux(sign, -v, v))
    s = cut({"mag": mag, "sign": sign})
    mag = s["mag"]
    hb = leading_one(m, mag, 32, f"{name}_hb")
    wide = Signal(56, name=f"{name}_w")            # mag aligned so that bit hb is bit 55
    m.d.comb += wide.eq(mag << (31 - hb)[:5] << 24)
    s = cut({"wide": wide, "hb": hb, "zero": mag == 0, "sign": s["sign"]})
    wide, hb = s["wide"], s["hb"]
    sig = wide[32:56]
    guard = wide[31]
    sticky = wide[:31] != 0
    rounded = Signal(25, name=f"{name}_rnd")
    m.d.comb += rounded.eq(sig + (guard & (sticky | sig[0])))
    exp = Signal(9, name=f"{name}_exp")
    m.d.comb += exp.eq(hb + 127 + rounded[24])
    out = Signal(32, name=name)
    m.d.comb += out.eq(Mux(s["zero"], 0, Cat(Mux(rounded[24], 0, rounded[:23]), exp[:8],
                                             s["sign"])))
    return out


def f32_to_int8(m, v, name, cut=None):
    """binary32 → int8: round half to even, saturated to ±127; NaN gives 0. Cuts: after
    the shift, after the rounding."""
    cut = no_cut(m, cut)
    sign, e, frac = f32_fields(v)
    sig = Cat(frac, 1)
    shift = Signal(range(32), name=f"{name}_sh")   # 150 - e for 126 <= e <= 133
    m.d.comb += shift.eq((150 - e)[:5])
    kept = Signal(8, name=f"{name}_int")
    m.d.comb += kept.eq(sig >> shift)
    below = Signal(24, name=f"{name}_below")        # the bits shifted out, guard on top
    m.d.comb += below.eq((sig << (24 - shift)[:5])[:24])
    case = Signal(2, name=f"{name}_case")           # 0 in range, 1 zero, 2 saturated
    with m.If((e == 0xFF) & (frac != 0)):
        m.d.comb += case.eq(1)
    with m.Elif(e >= 134):                          # |v| >= 128 (and infinities)
        m.d.comb += case.eq(2)
    with m.Elif(e < 126):                           # |v| < 0.5
        m.d.comb += case.eq(1)
    s = cut({"kept": kept, "guard": below[23], "sticky": below[:23] != 0, "case": case,
             "sign": sign})
    kept = s["kept"]
    mag = Signal(9, name=f"{name}_mag")
    m.d.comb += mag.eq(kept + (s["guard"] & (s["sticky"] | kept[0])))
    s = cut({"mag": mag, "case": s["case"], "sign": s["sign"]})
    mag = s["mag"]
    sat = Signal(7, name=f"{name}_sat")
    with m.Switch(s["case"]):
        with m.Case(1):
            m.d.comb += sat.eq(0)
        with m.Case(2):
            m.d.comb += sat.eq(127)
        with m.Default():
            m.d.comb += sat.eq(Mux(mag > 127, 127, mag[:7]))
    out = Signal(8, name=name)
    m.d.comb += out.eq(Mux(s["sign"], -sat, sat))
    return out
