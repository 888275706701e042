"""The VA's extension functions: CLAMP, SOFTPLUS and SQRT (opcodes 19, 20, 21).

These three commands extend DESIGN.md's VA list (the project lead's decision, for the
``deepseek-v4`` MoE: sqrt-softplus router scores, clamped SwiGLU). The algorithms are
those of :mod:`golden.va` (its module docstring documents them and their error bounds):
SOFTPLUS is the exp unit, one binary32 add and a table + quadratic fixed-point logarithm;
SQRT is ``x · rsqrt(x)`` with :func:`hdl.va.functions.rsqrt_f32`; CLAMP compares bf16
values. The logarithm's table and the constants are the golden model's
(:func:`golden.va.ln_table`, checked in ``tests/test_golden_va.py`` against its definition).
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from golden.va import BF16_NAN, F32_ONE, FIX, LN2_Q, ln_table, recip_table
from hdl.codes import VaOpcode
from hdl.ma.fp import F32_CANONICAL_NAN, f32_add
from hdl.va.functions import exp_f32, f32_mul, lockstep_valids, normalize_trunc, rsqrt_f32
from hdl.va.lanes import f32_to_bf16

__all__ = ["EXT_OPCODES", "ln_fixed", "bf16_key", "clamp_bounds_ok", "ExtUnit"]

EXT_OPCODES = (VaOpcode.CLAMP, VaOpcode.SOFTPLUS, VaOpcode.SQRT)



_RECIP = recip_table()
_LN = ln_table()


def ln_fixed(m, s, name):
    """ln(s) · 2**30 (signed) of a positive normal binary32 ``s``."""
    e, frac = s[23:31], s[:23]
    M = Cat(frac, 1)
    i = frac[15:]
    recip = Array(Const(v, 31) for v in _RECIP)
    ln = Array(Const(v, 31) for v in _LN)
    p = Signal(55, name=f"{name}_p")
    m.d.comb += p.eq(M * recip[i])
    r = Signal(signed(34), name=f"{name}_r")
    m.d.comb += r.eq((p >> 23) - (1 << FIX))
    r2 = Signal(signed(40), name=f"{name}_r2")
    m.d.comb += r2.eq((r * r) >> (FIX + 1))
    total = Signal(signed(42), name=name)
    m.d.comb += total.eq((e - 127) * LN2_Q + r - r2 + ln[i])
    return total


def bf16_key(v):
    """Order key of flushed bf16 bits (-0 == +0); not for NaNs."""
    mag = v[:15]
    return Mux(mag == 0, 0x8000, Mux(v[15], 0x7FFF - mag, 0x8000 + mag))


def _flush16(v):
    return Mux(v[7:15] == 0, Cat(Const(0, 15), v[15]), v)


def _nan16(v):
    return (v[7:15] == 0xFF) & (v[:7] != 0)


def clamp_bounds_ok(scalar):
    """START check of CLAMP: neither bound NaN and lo <= hi (subnormals as zeros)."""
    lo, hi = _flush16(scalar[:16]), _flush16(scalar[16:32])
    return ~_nan16(lo) & ~_nan16(hi) & (bf16_key(lo) <= bf16_key(hi))


class ExtUnit(wiring.Component):
    """CLAMP, SOFTPLUS and SQRT on the bf16 elements of bus words (``data_width / 16`` per
    word), word in, word out, in order, through three register stages that advance
    together when the output is free (exp, rsqrt and the clamp | 1 + e, logarithm and the
    x · rsqrt product | selection and rounding). Results are bit for bit those of
    ``golden.va.clamp_bf16`` / ``softplus_bf16`` / ``sqrt_bf16``.
    """

    def __init__(self, data_width):
        self.data_width = data_width
        super().__init__({
            "op": In(8),
            "scalar": In(32),
            "i": In(stream.Signature(data_width)),
            "o": Out(stream.Signature(data_width)),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.data_width // 16
        vec = data.ArrayLayout(16, lanes)
        advance = lockstep_valids(m, self.i, self.o, stages=3)
        lo, hi = _flush16(self.scalar[:16]), _flush16(self.scalar[16:32])
        words_in = Signal(vec)
        m.d.comb += words_in.eq(self.i.payload)
        out = Signal(vec)
        for lane in range(lanes):
            raw = words_in[lane]
            x16 = _flush16(raw)
            x = Cat(Const(0, 16), x16)
            sign, e, frac = x[31], x[23:31], x[:23]
            nan = (e == 0xFF) & (frac != 0)
            # Stage 1: exp(x), rsqrt(x), the clamp.
            u = exp_f32(m, x, 0, f"exp{lane}")
            rsq = rsqrt_f32(m, x, f"rsq{lane}")
            key = bf16_key(x16)
            clamped = Mux(_nan16(raw), BF16_NAN, Mux(key < bf16_key(lo), lo,
                                                     Mux(key > bf16_key(hi), hi, x16)))
            big = ~sign & (x >= 0x41800000)          # x >= 16, +inf (NaN overridden)
            low = sign & (x > 0xC1000000)            # x < -8, -inf
            s1 = Signal(data.StructLayout({"x": 32, "u": 32, "rsq": 32, "clamp": 16,
                                           "big": 1, "low": 1, "nan": 1}), name=f"s1_{lane}")
            with m.If(advance):
                m.d.sync += [s1.x.eq(x), s1.u.eq(u), s1.rsq.eq(rsq), s1.clamp.eq(clamped),
                             s1.big.eq(big), s1.low.eq(low), s1.nan.eq(nan)]
            # Stage 2: 1 + e and its logarithm; x · rsqrt(x).
            s = f32_add(m, Const(F32_ONE, 32), s1.u, name=f"onep{lane}")
            ln = ln_fixed(m, Mux(s1.low | s1.big | s1.nan, F32_ONE, s), f"ln{lane}")
            mid = normalize_trunc(m, Mux(ln < 0, 0, ln)[:41], 41, -FIX, 0, f"lnn{lane}")
            sp = Mux(s1.nan, F32_CANONICAL_NAN, Mux(s1.big, s1.x, Mux(s1.low, s1.u, mid)))
            xs, xe, xf = s1.x[31], s1.x[23:31], s1.x[:23]
            prod = f32_mul(m, s1.x, s1.rsq, f"sq{lane}")
            sq = Mux((xe == 0xFF) & (xf != 0), F32_CANONICAL_NAN,
                     Mux(xe == 0, s1.x,
                         Mux(xs, F32_CANONICAL_NAN, Mux(xe == 0xFF, s1.x, prod))))
            s2 = Signal(data.StructLayout({"sp": 32, "sq": 32, "clamp": 16}), name=f"s2_{lane}")
            with m.If(advance):
                m.d.sync += [s2.sp.eq(sp), s2.sq.eq(sq), s2.clamp.eq(s1.clamp)]
            # Stage 3: selection and rounding to bf16.
            m.d.comb += out[lane].eq(Mux(self.op == VaOpcode.CLAMP, s2.clamp, f32_to_bf16(
                Mux(self.op == VaOpcode.SQRT, s2.sq, s2.sp))))
        with m.If(advance):
            m.d.sync += self.o.payload.eq(out)
        return m
