"""The VA's approximated functions: exp, reciprocal, SiLU, and a binary32 multiplier.

The algorithms are those of :mod:`golden.va` (its module docstring documents them and
their error bounds); the tables are computed here again, by the same exact integer
formulas, so the RTL does not inherit a table from the model it is checked against.
All helpers are combinational and return Signals.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.codes import VaOpcode
from hdl.ma.fp import F32_CANONICAL_NAN, f32_add
from hdl.va.lanes import f32_to_bf16

__all__ = ["LOG2E_Q", "LN2_Q", "exp2_table", "recip_table", "f32_mul", "exp_f32",
           "recip_f32", "normalize_trunc", "UnaryUnit"]

LOG2E_Q = 1549082005        # round(log2(e) · 2**30)
LN2_Q = 744261118           # round(ln(2) · 2**30)
FIX = 30
F32_ONE = 0x3F800000
F32_2M64 = 0x1F800000       # 2**-64


def exp2_table():
    """round(2**(i/256) · 2**30), i = 0..255, by integer 256th roots."""
    return [(_root256(31 * 256 + i) + 1) >> 1 for i in range(256)]


def _root256(power):
    """floor(2**(power/256)) for 31·256 <= power < 32·256: the largest y with
    y**256 <= 2**power."""
    lo, hi = 1 << 31, 1 << 32
    target = 1 << power
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid ** 256 <= target:
            lo = mid
        else:
            hi = mid
    return lo


def recip_table():
    """round(2**30 / (1 + (i + 0.5)/256)), i = 0..255."""
    return [(((1 << 40) // (513 + 2 * i)) + 1) >> 1 for i in range(256)]


def _leading_one(m, value, width, name):
    """Index of the highest set bit of ``value`` (0 if none)."""
    index = Signal(range(width), name=name)
    for bit in range(width):          # the highest set bit is assigned last: wins
        with m.If(value[bit]):
            m.d.comb += index.eq(bit)
    return index


def normalize_trunc(m, value, width, scale, sign, name):
    """binary32 bits of ``±value · 2**scale`` (``value`` unsigned, ``width`` bits;
    ``scale`` signed), truncated to 24 bits, flushed below 2**-126, inf from 2**128."""
    hb = _leading_one(m, value, width, f"{name}_hb")
    mant = Signal(24, name=f"{name}_mant")
    right = (hb - 23)[:6]          # each is used only where it is not negative
    left = (23 - hb)[:5]
    m.d.comb += mant.eq(Mux(hb >= 23, value >> right, value << left))
    exp = Signal(range(-1024, 1024), name=f"{name}_exp")
    m.d.comb += exp.eq(hb + scale + 127)
    out = Signal(32, name=name)
    with m.If(value == 0):
        m.d.comb += out.eq(Cat(Const(0, 31), sign))
    with m.Elif(exp < 1):
        m.d.comb += out.eq(Cat(Const(0, 31), sign))
    with m.Elif(exp > 254):
        m.d.comb += out.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
    with m.Else():
        m.d.comb += out.eq(Cat(mant[:23], exp[:8], sign))
    return out


def f32_mul(m, a, b, name):
    """binary32 × binary32, round to nearest even, with the MA's rules: subnormal inputs
    read as zeros, a subnormal IEEE result flushes to a signed zero (one that rounds up
    to 2**-126 is kept), every NaN is 0x7FC00000."""
    sa, ea, fa = a[31], a[23:31], a[:23]
    sb, eb, fb = b[31], b[23:31], b[:23]
    sign = sa ^ sb
    a_zero, b_zero = ea == 0, eb == 0
    a_inf, b_inf = (ea == 0xFF) & (fa == 0), (eb == 0xFF) & (fb == 0)
    a_nan, b_nan = (ea == 0xFF) & (fa != 0), (eb == 0xFF) & (fb != 0)
    prod = Signal(48, name=f"{name}_prod")
    m.d.comb += prod.eq(Cat(fa, 1) * Cat(fb, 1))
    top = prod[47]
    exp = Signal(range(-512, 512), name=f"{name}_exp")
    m.d.comb += exp.eq(ea + eb - 127 + top)
    sig = Mux(top, prod[24:48], prod[23:47])
    guard = Mux(top, prod[23], prod[22])
    sticky = Mux(top, prod[:23] != 0, prod[:22] != 0)
    rounded = Signal(25, name=f"{name}_rnd")
    m.d.comb += rounded.eq(sig + (guard & (sticky | sig[0])))
    exp_r = Signal(range(-512, 512), name=f"{name}_expr")
    m.d.comb += exp_r.eq(exp + rounded[24])
    frac = Mux(rounded[24], 0, rounded[:23])
    out = Signal(32, name=name)
    with m.If(a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf)):
        m.d.comb += out.eq(F32_CANONICAL_NAN)
    with m.Elif(a_inf | b_inf):
        m.d.comb += out.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
    with m.Elif(a_zero | b_zero):
        m.d.comb += out.eq(Cat(Const(0, 31), sign))
    with m.Elif(exp_r > 254):
        m.d.comb += out.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
    with m.Elif(exp >= 1):
        m.d.comb += out.eq(Cat(frac, exp_r[:8], sign))
    with m.Elif((exp == 0) & (sig[:23] == 0x7FFFFF)):
        # 2**-127 · (2 - 2**-23) or more rounds, as a subnormal, up to 2**-126.
        m.d.comb += out.eq(Cat(Const(0, 23), Const(1, 8), sign))
    with m.Else():
        m.d.comb += out.eq(Cat(Const(0, 31), sign))
    return out


def exp_f32(m, x, bias, name):
    """e**x · 2**bias for binary32 ``x`` (``bias`` a small signed value)."""
    sign, e, frac = x[31], x[23:31], x[:23]
    big_e = Signal(range(-128, 129), name=f"{name}_E")
    m.d.comb += big_e.eq(e - 127)
    M = Cat(frac, 1)
    prod = Signal(55, name=f"{name}_p")
    m.d.comb += prod.eq(M * LOG2E_Q)
    shift = Signal(range(64), name=f"{name}_sh")
    m.d.comb += shift.eq(Mux(big_e > 23, 0, 23 - big_e))
    mag = Signal(40, name=f"{name}_T")
    m.d.comb += mag.eq(prod >> shift)
    t = Signal(signed(41), name=f"{name}_t")
    m.d.comb += t.eq(Mux(sign, -mag, mag))
    n = Signal(signed(11), name=f"{name}_n")
    m.d.comb += n.eq(t >> FIX)
    f = t[:FIX]
    table = Array(Const(v, 32) for v in _EXP2)
    y = Signal(32, name=f"{name}_y")
    m.d.comb += y.eq(table[f[FIX - 8:]])
    g = Signal(24, name=f"{name}_g")
    m.d.comb += g.eq((f[:FIX - 8] * LN2_Q) >> FIX)
    mant = Signal(33, name=f"{name}_mant")
    m.d.comb += mant.eq(y + ((y * g) >> FIX))
    core = normalize_trunc(m, mant, 33, n - FIX + bias, 0, f"{name}_norm")
    out = Signal(32, name=name)
    with m.If((e == 0xFF) & (frac != 0)):
        m.d.comb += out.eq(F32_CANONICAL_NAN)
    with m.Elif(big_e >= 7):
        m.d.comb += out.eq(Mux(sign, 0, 0x7F800000))
    with m.Elif(big_e < -24):
        m.d.comb += out.eq(F32_ONE + (bias << 23))
    with m.Else():
        m.d.comb += out.eq(core)
    return out


def recip_f32(m, x, name):
    """1/x for binary32 ``x``: table + one Newton step; exact for powers of two."""
    sign, e, frac = x[31], x[23:31], x[:23]
    M = Cat(frac, 1)
    table = Array(Const(v, 31) for v in _RECIP)
    y0 = Signal(31, name=f"{name}_y0")
    m.d.comb += y0.eq(table[frac[15:]])
    p = Signal(32, name=f"{name}_p")
    m.d.comb += p.eq((M * y0) >> 23)
    y1 = Signal(32, name=f"{name}_y1")
    m.d.comb += y1.eq(Mux(frac == 0, 1 << FIX, (y0 * ((1 << (FIX + 1)) - p)[:32]) >> FIX))
    core = normalize_trunc(m, y1, 32, -FIX - (e - 127), sign, f"{name}_norm")
    out = Signal(32, name=name)
    with m.If((e == 0xFF) & (frac != 0)):
        m.d.comb += out.eq(F32_CANONICAL_NAN)
    with m.Elif(e == 0xFF):
        m.d.comb += out.eq(Cat(Const(0, 31), sign))
    with m.Elif(e == 0):
        m.d.comb += out.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
    with m.Else():
        m.d.comb += out.eq(core)
    return out


_EXP2 = exp2_table()
_RECIP = recip_table()


class UnaryUnit(wiring.Component):
    """EXP and SILU on the bf16 elements of bus words (``data_width / 16`` per word).

    Word in, word out, in order, through three register stages that advance together
    when the output is free (exp core | normalise, 1 + e, reciprocal | products and
    rounding). Results are bit for bit those of ``golden.va.exp_bf16`` / ``silu_bf16``.
    """

    def __init__(self, data_width):
        self.data_width = data_width
        super().__init__({
            "op": In(8),
            "i": In(stream.Signature(data_width)),
            "o": Out(stream.Signature(data_width)),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.data_width // 16
        vec = data.ArrayLayout(16, lanes)
        advance = ~self.o.valid | self.o.ready
        m.d.comb += self.i.ready.eq(advance)
        valid = [Signal(name=f"valid{k}") for k in range(2)]
        with m.If(advance):
            m.d.sync += [valid[0].eq(self.i.valid), valid[1].eq(valid[0]),
                         self.o.valid.eq(valid[1])]
        silu = self.op == VaOpcode.SILU
        words_in = Signal(vec)
        m.d.comb += words_in.eq(self.i.payload)
        out = Signal(vec)
        for lane in range(lanes):
            raw = words_in[lane]
            # Stage 1: input, the exp argument (x or -x) and the exp unit.
            x16 = Mux(raw[7:15] == 0, Cat(Const(0, 15), raw[15]), raw)
            x = Cat(Const(0, 16), x16)
            low = silu & x16[15] & (x16[:15] > 0x4180) & (x16[:15] <= 0x7F80)
            arg = Mux(silu & ~low, x ^ 0x80000000, x)
            e = exp_f32(m, arg, Mux(low, 64, 0), f"exp{lane}")
            s1 = Signal(data.StructLayout({"x": 32, "e": 32, "low": 1}), name=f"s1_{lane}")
            with m.If(advance):
                m.d.sync += [s1.x.eq(x), s1.e.eq(e), s1.low.eq(low)]
            # Stage 2: 1 + e and its reciprocal; x·e for the low branch.
            d = f32_add(m, Const(F32_ONE, 32), s1.e, name=f"den{lane}")
            r = recip_f32(m, d, f"rcp{lane}")
            xe = f32_mul(m, s1.x, s1.e, f"xe{lane}")
            s2 = Signal(data.StructLayout({"x": 32, "e": 32, "r": 32, "xe": 32, "low": 1}),
                        name=f"s2_{lane}")
            with m.If(advance):
                m.d.sync += [s2.x.eq(s1.x), s2.e.eq(s1.e), s2.r.eq(r), s2.xe.eq(xe),
                             s2.low.eq(s1.low)]
            # Stage 3: the products and rounding to bf16.
            y_low = f32_mul(m, s2.xe, Const(F32_2M64, 32), f"ylow{lane}")
            y_high = f32_mul(m, s2.x, s2.r, f"yhigh{lane}")
            y = Mux(s2.low, y_low, y_high)
            y = Mux(s2.x == 0xFF800000, Const(0x80000000, 32), y)
            m.d.comb += out[lane].eq(f32_to_bf16(Mux(silu, y, s2.e)))
        with m.If(advance):
            m.d.sync += self.o.payload.eq(out)
        return m
