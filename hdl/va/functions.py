"""The VA's approximated functions (exp, reciprocal, rsqrt) and its function unit.

The algorithms are those of :mod:`golden.va` (its module docstring documents them and
their error bounds). Their tables and fixed-point constants are the golden model's
(:func:`golden.va.exp2_table`, ...), which ``tests/test_golden_va.py`` checks against
their mathematical definitions: the ROM contents are written once.
They are built from the floating-point library :mod:`hdl.common.fp` (its
multiplier, adder, conversions and :class:`~hdl.common.fp.Stages`). The helpers return
Signals. Called without ``cut`` they are combinational; with a
:class:`Stages` that registers, they put a register at each of their cut points (the
partial products of every multiply, their sum, each shift, ...; about one multiplier
block or one carry chain per stage, aiming at 100 MHz on the ECP5), and the units run
them as pipelines that never stall (:func:`credit_pipeline`). Registers only delay: the
results are the same bit for bit.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.common.codes import VaOpcode, decode
from hdl.common.fp import (
    F32_CANONICAL_NAN,
    F32_INF,
    F32_MINUS_ZERO,
    Stages,
    bf16_flush,
    f32_add_staged,
    f32_fields,
    f32_inf,
    f32_is_nan,
    f32_mul,
    f32_to_bf16,
    f32_to_int8,
    f32_zero,
    int32_to_f32,
    no_cut,
    normalize_trunc,
    product,
    table_cut,
)
from spec.va import F32_2M64, F32_ONE, FIX, LN2_Q, LOG2E_Q, exp2_table, recip_table, rsqrt_table

__all__ = ["credit_pipeline", "exp_f32", "recip_f32", "rsqrt_f32", "UnaryUnit"]


def _special_or(m, special, core, value2, value3, name):
    """A unary function's binary32 result: ``core``, or for a special operand the value
    its ``special`` code names (1 the canonical NaN, 2 ``value2``, 3 ``value3``)."""
    out = Signal(32, name=name)
    with m.Switch(special):
        with m.Case(1):
            m.d.comb += out.eq(F32_CANONICAL_NAN)
        with m.Case(2):
            m.d.comb += out.eq(value2)
        with m.Case(3):
            m.d.comb += out.eq(value3)
        with m.Default():
            m.d.comb += out.eq(core)
    return out


def exp_f32(m, x, bias, name, cut=None):
    """e**x · 2**bias for binary32 ``x`` (``bias`` a small signed value)."""
    cut = no_cut(m, cut)
    sign, e, frac = f32_fields(x)
    big_e = Signal(range(-128, 129), name=f"{name}_E")
    m.d.comb += big_e.eq(e - 127)
    shift = Signal(range(64), name=f"{name}_sh")
    m.d.comb += shift.eq(Mux(big_e > 23, 0, 23 - big_e))
    special = Signal(2, name=f"{name}_special")     # 0 none, 1 NaN, 2 big, 3 tiny
    with m.If(f32_is_nan(x)):
        m.d.comb += special.eq(1)
    with m.Elif(big_e >= 7):
        m.d.comb += special.eq(2)
    with m.Elif(big_e < -24):
        m.d.comb += special.eq(3)
    token = cut.keep(sign=sign, shift=shift, special=special, bias=bias)
    prod = product(m, Cat(frac, 1), LOG2E_Q, cut, f"{name}_p")
    s = cut({"prod": prod, **cut.take(token)})
    mag = Signal(40, name=f"{name}_T")
    m.d.comb += mag.eq(s["prod"] >> s["shift"])
    s = cut({"mag": mag, "sign": s["sign"], "special": s["special"], "bias": s["bias"]})
    t = Signal(signed(41), name=f"{name}_t")
    m.d.comb += t.eq(Mux(s["sign"], -s["mag"], s["mag"]))
    s = cut({"t": t, "sign": s["sign"], "special": s["special"], "bias": s["bias"]})
    t = s["t"]
    n = Signal(signed(11), name=f"{name}_n")
    m.d.comb += n.eq(t >> FIX)
    f = t[:FIX]
    table = Array(Const(v, 32) for v in _EXP2)
    y = Signal(32, name=f"{name}_y")
    m.d.comb += y.eq(table[f[FIX - 8:]])
    token = cut.keep(y=y, scale=n - FIX + s["bias"], sign=s["sign"], special=s["special"],
                     bias=s["bias"])
    g = product(m, f[:FIX - 8], LN2_Q, cut, f"{name}_gp")
    s = {"g": (g >> FIX)[:24], **cut.take(token)}
    s = cut(s)
    token = cut.keep(y=s["y"], scale=s["scale"], sign=s["sign"], special=s["special"],
                     bias=s["bias"])
    yg = product(m, s["y"], s["g"], cut, f"{name}_yg")
    s = cut({"yg": yg >> FIX, **cut.take(token)})
    mant = Signal(33, name=f"{name}_mant")
    m.d.comb += mant.eq(s["y"] + s["yg"])
    s = cut({"mant": mant, "scale": s["scale"], "sign": s["sign"], "special": s["special"],
             "bias": s["bias"]})
    token = cut.keep(sign=s["sign"], special=s["special"], bias=s["bias"])
    core = normalize_trunc(m, s["mant"], 33, s["scale"], 0, f"{name}_norm", cut)
    s = cut.take(token)
    return _special_or(m, s["special"], core, Mux(s["sign"], 0, F32_INF),
                       F32_ONE + (s["bias"] << 23), name)


def recip_f32(m, x, name, cut=None):
    """1/x for binary32 ``x``: table + one Newton step; exact for powers of two."""
    cut = no_cut(m, cut)
    sign, e, frac = f32_fields(x)
    table = Array(Const(v, 31) for v in _RECIP)
    y0 = Signal(31, name=f"{name}_y0")
    m.d.comb += y0.eq(table[frac[15:]])
    special = Signal(2, name=f"{name}_special")     # 0 none, 1 NaN, 2 inf → 0, 3 zero → inf
    with m.If(f32_is_nan(x)):
        m.d.comb += special.eq(1)
    with m.Elif(e == 0xFF):
        m.d.comb += special.eq(2)
    with m.Elif(e == 0):
        m.d.comb += special.eq(3)
    s = table_cut(cut, {"y0": y0, "frac": frac, "sign": sign, "special": special,
                        "scale": -FIX - (e - 127)})
    token = cut.keep(y0=s["y0"], one=s["frac"] == 0, sign=s["sign"], special=s["special"],
                     scale=s["scale"])
    p = product(m, Cat(s["frac"], 1), s["y0"], cut, f"{name}_p")
    s = cut({"p": p >> 23, **cut.take(token)})
    d = Signal(32, name=f"{name}_d")
    m.d.comb += d.eq(((1 << (FIX + 1)) - s["p"])[:32])
    s = cut({"d": d, **s})
    token = cut.keep(one=s["one"], sign=s["sign"], special=s["special"], scale=s["scale"])
    yd = product(m, s["y0"], s["d"], cut, f"{name}_yd")
    s = {"yd": yd >> FIX, **cut.take(token)}
    s = cut(s)
    y1 = Signal(32, name=f"{name}_y1")
    m.d.comb += y1.eq(Mux(s["one"], 1 << FIX, s["yd"]))
    token = cut.keep(special=s["special"], sign=s["sign"])
    core = normalize_trunc(m, y1, 32, s["scale"], s["sign"], f"{name}_norm", cut)
    s = cut.take(token)
    return _special_or(m, s["special"], core, f32_zero(s["sign"]),
                       f32_inf(s["sign"]), name)


def rsqrt_f32(m, x, name, cut=None):
    """1/sqrt(x) for binary32 ``x``: table by exponent parity, one Newton step."""
    cut = no_cut(m, cut)
    sign, e, frac = f32_fields(x)
    odd = ~e[0]                                  # the unbiased exponent e - 127 is odd
    table = Array(Const(v, 31) for v in _RSQRT[0] + _RSQRT[1])
    y0 = Signal(31, name=f"{name}_y0")
    m.d.comb += y0.eq(table[Cat(frac[16:], odd)])
    special = Signal(2, name=f"{name}_special")     # 0 none, 1 NaN, 2 +inf → 0, 3 zero → inf
    with m.If((sign & (e != 0)) | f32_is_nan(x)):
        m.d.comb += special.eq(1)
    with m.Elif(e == 0xFF):
        m.d.comb += special.eq(2)
    with m.Elif(e == 0):
        m.d.comb += special.eq(3)
    half_e = Signal(signed(9), name=f"{name}_he")
    m.d.comb += half_e.eq((e - 127 - odd).as_signed() >> 1)
    big_m = Signal(25, name=f"{name}_M")
    m.d.comb += big_m.eq(Cat(frac, 1) << odd)
    s = table_cut(cut, {"y0": y0, "big_m": big_m, "one": (frac == 0) & ~odd, "sign": sign,
                        "special": special, "scale": -FIX - half_e})
    token = cut.keep(y0=s["y0"], big_m=s["big_m"], one=s["one"], sign=s["sign"],
                     special=s["special"], scale=s["scale"])
    y2 = product(m, s["y0"], s["y0"], cut, f"{name}_y2")
    s = cut({"y2": y2 >> FIX, **cut.take(token)})
    token = cut.keep(y0=s["y0"], one=s["one"], sign=s["sign"], special=s["special"],
                     scale=s["scale"])
    q = product(m, s["big_m"], s["y2"][:32], cut, f"{name}_q")
    s = cut({"q": q >> 23, **cut.take(token)})
    d = Signal(33, name=f"{name}_d")
    m.d.comb += d.eq((3 * (1 << FIX) - s["q"])[:33])
    s = cut({"d": d, **s})
    token = cut.keep(one=s["one"], sign=s["sign"], special=s["special"], scale=s["scale"])
    yd = product(m, s["y0"], s["d"], cut, f"{name}_yd")
    s = cut({"yd": yd >> (FIX + 1), **cut.take(token)})
    y1 = Signal(33, name=f"{name}_y1")
    m.d.comb += y1.eq(Mux(s["one"], 1 << FIX, s["yd"]))
    token = cut.keep(special=s["special"], sign=s["sign"])
    core = normalize_trunc(m, y1, 33, s["scale"], 0, f"{name}_norm", cut)
    s = cut.take(token)
    return _special_or(m, s["special"], core, 0,
                       f32_inf(s["sign"]), name)


_EXP2 = exp2_table()
_RECIP = recip_table()
_RSQRT = rsqrt_table()


def credit_pipeline(m, i, o, data, latency, name="pipe"):
    """Stream ``i`` → a datapath of ``latency`` register stages that never stalls → an
    output FIFO → stream ``o``. ``data`` is the datapath's output (combinational after
    its last register); ``i`` is taken only while the FIFO has room for it beside every
    element in flight, so back-pressure on ``o`` needs no enable on the datapath's
    registers. Full throughput while ``o`` is ready."""
    depth = latency + 4
    m.submodules[f"{name}_fifo"] = out = fifo.SyncFIFOBuffered(width=len(Value.cast(data)),
                                                               depth=depth)
    free = Signal(range(depth + 1), init=depth, name=f"{name}_free")
    m.d.comb += i.ready.eq(free != 0)
    taken = i.valid & i.ready
    read = out.r_rdy & o.ready
    with m.If(taken & ~read):
        m.d.sync += free.eq(free - 1)
    with m.Elif(~taken & read):
        m.d.sync += free.eq(free + 1)
    valid = Signal(latency, name=f"{name}_valid")
    m.d.sync += valid.eq(Cat(taken, valid[:-1]))
    m.d.comb += [out.w_en.eq(valid[-1]), out.w_data.eq(data)]
    wiring.connect(m, out.r_stream, wiring.flipped(o))


class UnaryUnit(wiring.Component):
    """The element pipeline of the function commands, ``data_width / 16`` bf16 lanes
    (golden.va): EXP, SILU, SOFTMAX's ``exp(x - m)`` and ``e · c``, RMSNORM's
    ``(x · c) · gamma``, QUANTIZE's int8 of ``x · c``, DEQUANTIZE's ``f32(v) · c``.

    ``i`` carries a word of x (``i.payload.x``) and, for RMSNORM, the word of gamma
    beside it (``i.payload.g``). ``m`` is SOFTMAX's row maximum (bf16), ``c`` the
    command's binary32 constant (reciprocal of the sum, rsqrt, 1/scale, scale).

    Word in, word out, in order, through a pipeline that never stalls (a register at
    every cut of its helpers; parts: x - m or int32 → binary32 | exp | 1 + e, x · c |
    the reciprocal | the last products and rounding) into an output FIFO taken on credit
    (:func:`credit_pipeline`). ``o.payload.word`` holds the
    bf16 results in their lanes, or for QUANTIZE the int8 results in the low bytes,
    for DEQUANTIZE the bf16 results of the word's four int32 (128-bit bus: half of the
    lanes) in the low lanes; ``o.payload.e`` holds each lane's binary32 exp (SOFTMAX's
    sum). Results are bit for bit those of :mod:`golden.va`. ``lut_products``: the small
    partial products in logic (:data:`hdl.common.fp.LUT_SLICE`).
    """

    def __init__(self, data_width, lut_products=False):
        self.data_width, self.lut_products = data_width, lut_products
        wide_in, wide_out = self.layouts(data_width)
        super().__init__({
            "op": In(VaOpcode),
            "m": In(16),
            "c": In(32),
            "i": In(stream.Signature(wide_in)),
            "o": Out(stream.Signature(wide_out)),
        })

    @staticmethod
    def layouts(data_width):
        """The payload layouts of ``i`` and ``o``."""
        return (data.StructLayout({"x": data_width, "g": data_width}),
                data.StructLayout({"word": data_width,
                                   "e": data.ArrayLayout(32, data_width // 16)}))

    def elaborate(self, platform):
        m = Module()
        lanes = self.data_width // 16
        vec = data.ArrayLayout(16, lanes)
        op = decode(m, self.op, {
            "silu": VaOpcode.SILU, "softmax": VaOpcode.SOFTMAX, "rmsnorm": VaOpcode.RMSNORM,
            "quantize": VaOpcode.QUANTIZE, "dequantize": VaOpcode.DEQUANTIZE,
            "recip": VaOpcode.RECIP, "cvt_f32": VaOpcode.CVT_F32, "exp": VaOpcode.EXP}, "op")
        silu, softmax, rmsnorm = op["silu"], op["softmax"], op["rmsnorm"]
        quantize, dequantize = op["quantize"], op["dequantize"]
        recip, cvt_f32 = op["recip"], op["cvt_f32"]
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
        q = []
        depths = set()
        for lane in range(lanes):
            st = Stages(m, f"u{lane}", lut_products=self.lut_products)
            raw = words_in[lane]
            # Part 0: the flushed input, x - m (SOFTMAX), int32 → binary32 (DEQUANTIZE).
            x16 = bf16_flush(raw)
            x = Cat(Const(0, 16), x16)
            g16 = gammas[lane]
            g16 = bf16_flush(g16)
            low = silu & x16[15] & (x16[:15] > 0x4180) & (x16[:15] <= 0x7F80)
            # CVT_F32: the binary32 as it is, a NaN made canonical
            kept = {"x": x, "g": g16, "low": low}
            if lane < lanes // 2:
                f = Value.cast(ints[lane])
                kept["f"] = Mux(f32_is_nan(f), F32_CANONICAL_NAN, f)
            token = st.keep(**kept)
            branch = st.fork()
            cvt = int32_to_f32(m, ints[lane], f"cvt{lane}", branch) if lane < lanes // 2 else 0
            diff = f32_add_staged(m, x, neg_m, f"sub{lane}", st)
            (cvt,), (diff,) = (d.values() for d in st.join(branch, {"cvt": cvt}, {"diff": diff}))
            v = st.take(token)
            value = Mux(softmax, diff, v["x"])
            if lane < lanes // 2:
                value = Mux(dequantize, cvt, Mux(cvt_f32, v["f"], value))
            v = st({"x": value, "g": v["g"], "low": v["low"]})
            # Part 1: the exp unit on x, -x (SILU) or x - m (SOFTMAX).
            arg = Mux(silu & ~v["low"], v["x"] ^ 0x80000000, v["x"])
            token = st.keep(**v)
            e = exp_f32(m, arg, Mux(v["low"], 64, 0), f"exp{lane}", st)
            # The multipliers' operands are chosen before the register in front of them:
            # the opcode's decode and a multiplexer in front of a MULT18X18D (and the
            # small products in logic) took 14–15 ns (tools/unit_timing.py).
            w = st.take(token)
            # RECIP: the adder passes x (x + -0 = x) to the reciprocal
            v = st({"e": e, "xe_b": Mux(rmsnorm, self.c, e),
                    "da": Mux(recip, w["x"], F32_ONE), "db": Mux(recip, F32_MINUS_ZERO, e), **w})
            # Part 2: 1 + e (RECIP: x); x·e (SILU's low branch) or x·c (RMSNORM).
            token = st.keep(x=v["x"], g=v["g"], low=v["low"], e=v["e"])
            branch = st.fork()
            xe = f32_mul(m, v["x"], v["xe_b"], f"xe{lane}", branch)
            d = f32_add_staged(m, v["da"], v["db"], f"den{lane}", st)
            (xe,), (d,) = (v.values() for v in st.join(branch, {"xe": xe}, {"d": d}))
            v = st({"d": d, "xe": xe, **st.take(token)})
            # Part 3: the reciprocal of 1 + e (RECIP: of x; 1 · r is r, never subnormal).
            token = st.keep(x=v["x"], g=v["g"], e=v["e"], xe=v["xe"], low=v["low"])
            r = recip_f32(m, v["d"], f"rcp{lane}", st)
            w = st.take(token)
            v = st({"ya": Mux(softmax, w["e"], Mux(recip, F32_ONE, w["x"])),
                    "yb": Mux(silu | recip, r, self.c),
                    "lb": Mux(rmsnorm, Cat(Const(0, 16), w["g"]), Const(F32_2M64, 32)), **w})
            # Part 4: the last products, rounding to bf16 (int8 for QUANTIZE).
            token = st.keep(x=v["x"], e=v["e"], low=v["low"])
            branch = st.fork()
            y_low = f32_mul(m, v["xe"], v["lb"], f"ylow{lane}", branch)
            y_high = f32_mul(m, v["ya"], v["yb"], f"yhigh{lane}", st)
            (y_low,), (y_high,) = (v.values() for v in st.join(branch, {"y": y_low},
                                                                 {"y": y_high}))
            v = st({"y_low": y_low, "y_high": y_high, **st.take(token)})
            y = Mux(v["low"] | rmsnorm, v["y_low"], v["y_high"])
            y = Mux(silu & (v["x"] == 0xFF800000), Const(F32_MINUS_ZERO, 32), y)
            branch = st.fork()
            quant = f32_to_int8(m, v["y_high"], f"q{lane}", branch)
            # EXP: e; CVT_F32: x (rounded on its bits, not flushed by a product)
            v = st({"y": Mux(op["exp"] | cvt_f32, Mux(cvt_f32, v["x"], v["e"]), y),
                    "e": v["e"]})
            theirs, v = st.join(branch, {"q": quant}, v)
            v = {**v, "q": theirs["q"]}
            m.d.comb += [out[lane].eq(f32_to_bf16(v["y"])), e_out[lane].eq(v["e"])]
            q.append(v["q"])
            depths.add(st.depth)
        assert len(depths) == 1
        with m.If(quantize):
            m.d.comb += out.eq(Cat(*q))
        with m.Elif(dequantize | cvt_f32):
            m.d.comb += out.as_value()[8 * lanes:].eq(0)
        credit_pipeline(m, self.i, self.o, Cat(out, e_out), depths.pop())
        return m
