"""The VA's extension functions: CLAMP, SOFTPLUS and SQRT (opcodes 19, 20, 21).

These three commands extend docs/design.md's VA list (the project lead's decision, for the
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

from hdl.common.codes import VaOpcode, decode
from hdl.common.fp import (
    F32_CANONICAL_NAN,
    Stages,
    bf16_flush,
    bf16_is_nan,
    bf16_key,
    f32_add_staged,
    f32_fields,
    f32_is_nan,
    f32_mul,
    f32_to_bf16,
    no_cut,
    normalize_trunc,
    product,
    table_cut,
)
from hdl.va.functions import credit_pipeline, exp_f32, rsqrt_f32
from spec.va import BF16_NAN, F32_ONE, FIX, LN2_Q, ln_table, recip_table

__all__ = ["ln_fixed", "clamp_bounds_ok", "ExtUnit"]


_RECIP = recip_table()
_LN = ln_table()


def ln_fixed(m, s, name, cut=None):
    """ln(s) · 2**30 (signed) of a positive normal binary32 ``s``. Cuts: two after the
    table look-ups, the partial products and sum of M · recip, the residual r, r²'s partial
    products and sum, the first sums."""
    cut = no_cut(m, cut)
    e, frac = s[23:31], s[:23]
    i = frac[15:]
    recip = Array(Const(v, 31) for v in _RECIP)
    ln = Array(Const(v, 31) for v in _LN)
    v = table_cut(cut, {"M": Cat(frac, 1), "rec": recip[i], "ln": ln[i], "e": e})
    token = cut.keep(ln=v["ln"], e=v["e"])
    p = product(m, v["M"], v["rec"], cut, f"{name}_p")
    v = cut({"p": p, **cut.take(token)})
    r = Signal(signed(34), name=f"{name}_r")
    m.d.comb += r.eq((v["p"] >> 23) - (1 << FIX))
    elnq = Signal(signed(42), name=f"{name}_elnq")
    m.d.comb += elnq.eq((v["e"] - 127) * LN2_Q)
    v = cut({"r": r, "abs_r": Mux(r < 0, -r, r)[:34], "elnq": elnq, "ln": v["ln"]})
    token = cut.keep(part=v["elnq"] + v["r"] + v["ln"])
    r_sq = product(m, v["abs_r"], v["abs_r"], cut, f"{name}_rr")
    v = cut({"r2": (r_sq >> (FIX + 1))[:39], **cut.take(token)})
    total = Signal(signed(42), name=name)
    m.d.comb += total.eq(v["part"] - v["r2"])
    return total


def clamp_bounds_ok(scalar):
    """START check of CLAMP: neither bound NaN and lo <= hi (subnormals as zeros)."""
    lo, hi = bf16_flush(scalar[:16]), bf16_flush(scalar[16:32])
    return ~bf16_is_nan(lo) & ~bf16_is_nan(hi) & (bf16_key(lo) <= bf16_key(hi))


class ExtUnit(wiring.Component):
    """CLAMP, SOFTPLUS and SQRT on the bf16 elements of bus words (``data_width / 16`` per
    word), word in, word out, in order, through a pipeline that never stalls (a register
    at every cut of its helpers; parts: exp, rsqrt and the clamp | 1 + e, logarithm and
    the x · rsqrt product | selection and rounding) into an output FIFO taken on credit
    (:func:`hdl.va.functions.credit_pipeline`). Results are bit for bit those of
    ``golden.va.clamp_bf16`` / ``softplus_bf16`` / ``sqrt_bf16``. ``lut_products``: the
    small partial products in logic (:data:`hdl.common.fp.LUT_SLICE`).
    """

    def __init__(self, data_width, lut_products=False):
        self.data_width, self.lut_products = data_width, lut_products
        super().__init__({
            "op": In(VaOpcode),
            "scalar": In(32),
            "i": In(stream.Signature(data_width)),
            "o": Out(stream.Signature(data_width)),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.data_width // 16
        vec = data.ArrayLayout(16, lanes)
        op = decode(m, self.op, {"clamp": VaOpcode.CLAMP, "sqrt": VaOpcode.SQRT}, "op")
        lo, hi = bf16_flush(self.scalar[:16]), bf16_flush(self.scalar[16:32])
        words_in = Signal(vec)
        m.d.comb += words_in.eq(self.i.payload)
        out = Signal(vec)
        depths = set()
        for lane in range(lanes):
            st = Stages(m, f"x{lane}", lut_products=self.lut_products)
            raw = words_in[lane]
            x16 = bf16_flush(raw)
            x = Cat(Const(0, 16), x16)
            sign = x[31]
            nan = f32_is_nan(x)
            # Part 1: exp(x), rsqrt(x), the clamp.
            key = bf16_key(x16)
            clamped = Mux(bf16_is_nan(raw), BF16_NAN, Mux(key < bf16_key(lo), lo,
                                                     Mux(key > bf16_key(hi), hi, x16)))
            big = ~sign & (x >= 0x41800000)          # x >= 16, +inf (NaN overridden)
            low = sign & (x > 0xC1000000)            # x < -8, -inf
            token = st.keep(x=x, clamp=clamped, big=big, low=low, nan=nan)
            branch = st.fork()
            rsq = rsqrt_f32(m, x, f"rsq{lane}", branch)
            u = exp_f32(m, x, 0, f"exp{lane}", st)
            (rsq,), (u,) = (v.values() for v in st.join(branch, {"rsq": rsq}, {"u": u}))
            v = st({"u": u, "rsq": rsq, **st.take(token)})
            # Part 2: 1 + e and its logarithm; x · rsqrt(x).
            token = st.keep(x=v["x"], u=v["u"], clamp=v["clamp"], big=v["big"], low=v["low"],
                            nan=v["nan"])
            branch = st.fork()
            prod = f32_mul(m, v["x"], v["rsq"], f"sq{lane}", branch)
            sp1 = f32_add_staged(m, Const(F32_ONE, 32), v["u"], f"onep{lane}", st)
            w = st.take(token)
            token = st.keep(**w)
            ln = ln_fixed(m, Mux(w["low"] | w["big"] | w["nan"], F32_ONE, sp1), f"ln{lane}", st)
            # a register between the logarithm's last sum and the leading-one search
            # (together 16.4 ns, tools/unit_timing.py)
            ln = st({"ln": Mux(ln < 0, 0, ln)[:41]})["ln"]
            mid = normalize_trunc(m, ln, 41, -FIX, 0, f"lnn{lane}", st)
            (prod,), (mid,) = (v.values() for v in st.join(branch, {"prod": prod}, {"mid": mid}))
            w = st.take(token)
            sp = Mux(w["nan"], F32_CANONICAL_NAN, Mux(w["big"], w["x"], Mux(w["low"], w["u"], mid)))
            xs, xe, _ = f32_fields(w["x"])
            sq = Mux(f32_is_nan(w["x"]), F32_CANONICAL_NAN,
                     Mux(xe == 0, w["x"],
                         Mux(xs, F32_CANONICAL_NAN, Mux(xe == 0xFF, w["x"], prod))))
            v = st({"sp": sp, "sq": sq, "clamp": w["clamp"]})
            # Part 3: selection and rounding to bf16.
            m.d.comb += out[lane].eq(Mux(op["clamp"], v["clamp"], f32_to_bf16(
                Mux(op["sqrt"], v["sq"], v["sp"]))))
            depths.add(st.depth)
        assert len(depths) == 1
        credit_pipeline(m, self.i, self.o, out, depths.pop())
        return m
