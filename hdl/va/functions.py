"""The VA's approximated functions: exp, reciprocal, SiLU, and a binary32 multiplier.

The algorithms are those of :mod:`golden.va` (its module docstring documents them and
their error bounds). Their tables and fixed-point constants are the golden model's
(:func:`golden.va.exp2_table`, ...), which ``tests/test_golden_va.py`` checks against
their mathematical definitions: the ROM contents are written once.
All helpers are combinational and return Signals.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from golden.va import F32_2M64, F32_ONE, FIX, LN2_Q, LOG2E_Q, exp2_table, recip_table, rsqrt_table
from hdl.codes import VaOpcode
from hdl.ma.fp import F32_CANONICAL_NAN, f32_add
from hdl.va.lanes import f32_to_bf16

__all__ = ["f32_mul",
           "exp_f32", "recip_f32", "rsqrt_f32", "int32_to_f32", "f32_to_int8",
           "normalize_trunc", "UnaryUnit"]






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



def rsqrt_f32(m, x, name):
    """1/sqrt(x) for binary32 ``x``: table by exponent parity, one Newton step."""
    sign, e, frac = x[31], x[23:31], x[:23]
    odd = ~e[0]                                  # the unbiased exponent e - 127 is odd
    table = Array(Const(v, 31) for v in _RSQRT[0] + _RSQRT[1])
    y0 = Signal(31, name=f"{name}_y0")
    m.d.comb += y0.eq(table[Cat(frac[16:], odd)])
    y2 = Signal(32, name=f"{name}_y2")
    m.d.comb += y2.eq((y0 * y0) >> FIX)
    big_m = Signal(25, name=f"{name}_M")
    m.d.comb += big_m.eq(Cat(frac, 1) << odd)
    q = Signal(34, name=f"{name}_q")
    m.d.comb += q.eq((big_m * y2) >> 23)
    y1 = Signal(33, name=f"{name}_y1")
    m.d.comb += y1.eq(Mux((frac == 0) & ~odd, 1 << FIX,
                          (y0 * (3 * (1 << FIX) - q)[:33]) >> (FIX + 1)))
    half_e = Signal(signed(9), name=f"{name}_he")
    m.d.comb += half_e.eq((e - 127 - odd).as_signed() >> 1)
    core = normalize_trunc(m, y1, 33, -FIX - half_e, 0, f"{name}_norm")
    out = Signal(32, name=name)
    with m.If((sign & (e != 0)) | ((e == 0xFF) & (frac != 0))):
        m.d.comb += out.eq(F32_CANONICAL_NAN)
    with m.Elif(e == 0xFF):
        m.d.comb += out.eq(0)
    with m.Elif(e == 0):
        m.d.comb += out.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
    with m.Else():
        m.d.comb += out.eq(core)
    return out


def int32_to_f32(m, v, name):
    """Signed 32-bit integer → binary32, round to nearest even."""
    sign = v[31]
    mag = Signal(32, name=f"{name}_mag")
    m.d.comb += mag.eq(Mux(sign, -v, v))
    hb = _leading_one(m, mag, 32, f"{name}_hb")
    wide = Signal(56, name=f"{name}_w")            # mag aligned so that bit hb is bit 55
    m.d.comb += wide.eq(mag << (31 - hb)[:5] << 24)
    sig = wide[32:56]
    guard = wide[31]
    sticky = wide[:31] != 0
    rounded = Signal(25, name=f"{name}_rnd")
    m.d.comb += rounded.eq(sig + (guard & (sticky | sig[0])))
    exp = Signal(9, name=f"{name}_exp")
    m.d.comb += exp.eq(hb + 127 + rounded[24])
    out = Signal(32, name=name)
    m.d.comb += out.eq(Mux(mag == 0, 0, Cat(Mux(rounded[24], 0, rounded[:23]), exp[:8], sign)))
    return out


def f32_to_int8(m, v, name):
    """binary32 → int8: round half to even, saturated to ±127; NaN gives 0."""
    sign, e, frac = v[31], v[23:31], v[:23]
    sig = Cat(frac, 1)
    shift = Signal(range(32), name=f"{name}_sh")   # 150 - e for 126 <= e <= 133
    m.d.comb += shift.eq((150 - e)[:5])
    kept = Signal(8, name=f"{name}_int")
    m.d.comb += kept.eq(sig >> shift)
    below = Signal(24, name=f"{name}_below")        # the bits shifted out, guard on top
    m.d.comb += below.eq((sig << (24 - shift)[:5])[:24])
    guard = below[23]
    sticky = below[:23] != 0
    mag = Signal(9, name=f"{name}_mag")
    m.d.comb += mag.eq(kept + (guard & (sticky | kept[0])))
    sat = Signal(7, name=f"{name}_sat")
    with m.If((e == 0xFF) & (frac != 0)):
        m.d.comb += sat.eq(0)
    with m.Elif(e >= 134):                          # |v| >= 128 (and infinities)
        m.d.comb += sat.eq(127)
    with m.Elif(e < 126):                           # |v| < 0.5
        m.d.comb += sat.eq(0)
    with m.Else():
        m.d.comb += sat.eq(Mux(mag > 127, 127, mag[:7]))
    out = Signal(8, name=name)
    m.d.comb += out.eq(Mux(sign, -sat, sat))
    return out


_EXP2 = exp2_table()
_RECIP = recip_table()
_RSQRT = rsqrt_table()


def lockstep_valids(m, i, o, stages):
    """The valid bits of a pipeline whose ``stages`` register stages advance together, from
    stream ``i`` to stream ``o`` (the last stage's register is ``o.valid``): every stage moves
    when the output is free. Returns that ``advance`` signal, which the pipeline's data
    registers use as their enable."""
    advance = ~o.valid | o.ready
    m.d.comb += i.ready.eq(advance)
    valid = [Signal(name=f"valid{k}") for k in range(stages - 1)]
    with m.If(advance):
        m.d.sync += [a.eq(b) for a, b in zip([*valid, o.valid], [i.valid, *valid], strict=True)]
    return advance


class UnaryUnit(wiring.Component):
    """The element pipeline of the function commands, ``data_width / 16`` bf16 lanes
    (golden.va): EXP, SILU, SOFTMAX's ``exp(x - m)`` and ``e · c``, RMSNORM's
    ``(x · c) · gamma``, QUANTIZE's int8 of ``x · c``, DEQUANTIZE's ``f32(v) · c``.

    ``i`` carries a word of x (``i.payload.x``) and, for RMSNORM, the word of gamma
    beside it (``i.payload.g``). ``m`` is SOFTMAX's row maximum (bf16), ``c`` the
    command's binary32 constant (reciprocal of the sum, rsqrt, 1/scale, scale).

    Word in, word out, in order, through five register stages that advance together
    when the output is free (0: x - m or int32 → binary32; 1: exp; 2: 1 + e, x · c;
    3: the reciprocal; 4: the last product and rounding). ``o.payload.word`` holds the
    bf16 results in their lanes, or for QUANTIZE the int8 results in the low bytes,
    for DEQUANTIZE the bf16 results of the word's four int32 (128-bit bus: half of the
    lanes) in the low lanes; ``o.payload.e`` holds each lane's binary32 exp (SOFTMAX's
    sum). Results are bit for bit those of :mod:`golden.va`.
    """

    def __init__(self, data_width):
        self.data_width = data_width
        lanes = data_width // 16
        super().__init__({
            "op": In(8),
            "m": In(16),
            "c": In(32),
            "i": In(stream.Signature(data.StructLayout({"x": data_width, "g": data_width}))),
            "o": Out(stream.Signature(data.StructLayout({
                "word": data_width, "e": data.ArrayLayout(32, lanes)}))),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.data_width // 16
        vec = data.ArrayLayout(16, lanes)
        advance = lockstep_valids(m, self.i, self.o, stages=5)
        op = self.op
        silu = op == VaOpcode.SILU
        softmax = op == VaOpcode.SOFTMAX
        rmsnorm = op == VaOpcode.RMSNORM
        quantize = op == VaOpcode.QUANTIZE
        dequantize = op == VaOpcode.DEQUANTIZE
        words_in = Signal(vec)
        gammas = Signal(vec)
        ints = Signal(data.ArrayLayout(32, lanes // 2))
        m.d.comb += [words_in.eq(self.i.payload.x), gammas.eq(self.i.payload.g),
                     ints.eq(self.i.payload.x)]
        neg_m = Signal(32)                  # bf16_in(m ^ 0x8000)
        m.d.comb += neg_m.eq(Cat(Const(0, 16), Mux(self.m[7:15] == 0, 0, self.m[:15]),
                                 ~self.m[15]))
        out = Signal(vec)
        e_out = Signal(data.ArrayLayout(32, lanes))
        stage = data.StructLayout({"x": 32, "g": 32, "e": 32, "d": 32, "r": 32, "xe": 32,
                                   "low": 1})
        q = []
        for lane in range(lanes):
            raw = words_in[lane]
            # Stage 0: the flushed input, x - m (SOFTMAX), int32 → binary32 (DEQUANTIZE).
            x16 = Mux(raw[7:15] == 0, Cat(Const(0, 15), raw[15]), raw)
            x = Cat(Const(0, 16), x16)
            g16 = gammas[lane]
            g = Cat(Const(0, 16), Mux(g16[7:15] == 0, Cat(Const(0, 15), g16[15]), g16))
            low = silu & x16[15] & (x16[:15] > 0x4180) & (x16[:15] <= 0x7F80)
            diff = f32_add(m, x, neg_m, name=f"sub{lane}")
            value = Mux(softmax, diff, x)
            if lane < lanes // 2:
                value = Mux(dequantize, int32_to_f32(m, ints[lane], f"cvt{lane}"), value)
            s0 = Signal(stage, name=f"s0_{lane}")
            with m.If(advance):
                m.d.sync += [s0.x.eq(value), s0.g.eq(g), s0.low.eq(low)]
            # Stage 1: the exp unit on x, -x (SILU) or x - m (SOFTMAX).
            arg = Mux(silu & ~s0.low, s0.x ^ 0x80000000, s0.x)
            e = exp_f32(m, arg, Mux(s0.low, 64, 0), f"exp{lane}")
            s1 = Signal(stage, name=f"s1_{lane}")
            with m.If(advance):
                m.d.sync += [s1.x.eq(s0.x), s1.g.eq(s0.g), s1.e.eq(e), s1.low.eq(s0.low)]
            # Stage 2: 1 + e; x·e (SILU's low branch) or x·c (RMSNORM).
            d = f32_add(m, Const(F32_ONE, 32), s1.e, name=f"den{lane}")
            xe = f32_mul(m, s1.x, Mux(rmsnorm, self.c, s1.e), f"xe{lane}")
            s2a = Signal(stage, name=f"s2a_{lane}")
            with m.If(advance):
                m.d.sync += [s2a.x.eq(s1.x), s2a.g.eq(s1.g), s2a.e.eq(s1.e), s2a.d.eq(d),
                             s2a.xe.eq(xe), s2a.low.eq(s1.low)]
            # Stage 3: the reciprocal of 1 + e.
            r = recip_f32(m, s2a.d, f"rcp{lane}")
            s2 = Signal(stage, name=f"s2_{lane}")
            with m.If(advance):
                m.d.sync += [s2.x.eq(s2a.x), s2.g.eq(s2a.g), s2.e.eq(s2a.e), s2.r.eq(r),
                             s2.xe.eq(s2a.xe), s2.low.eq(s2a.low)]
            # Stage 4: the last product and rounding to bf16 (int8 for QUANTIZE).
            y_low = f32_mul(m, s2.xe, Mux(rmsnorm, s2.g, Const(F32_2M64, 32)), f"ylow{lane}")
            y_high = f32_mul(m, Mux(softmax, s2.e, s2.x), Mux(silu, s2.r, self.c),
                             f"yhigh{lane}")
            y = Mux(s2.low | rmsnorm, y_low, y_high)
            y = Mux(silu & (s2.x == 0xFF800000), Const(0x80000000, 32), y)
            m.d.comb += [out[lane].eq(f32_to_bf16(Mux(op == VaOpcode.EXP, s2.e, y))),
                         e_out[lane].eq(s2.e)]
            q.append(f32_to_int8(m, y_high, f"q{lane}"))
        with m.If(quantize):
            m.d.comb += out.eq(Cat(*q))
        with m.Elif(dequantize):
            m.d.comb += out.as_value()[8 * lanes:].eq(0)
        with m.If(advance):
            m.d.sync += [self.o.payload.word.eq(out), self.o.payload.e.eq(e_out)]
        return m
