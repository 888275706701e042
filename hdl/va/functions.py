"""The VA's approximated functions: exp, reciprocal, SiLU, and a binary32 multiplier.

The algorithms are those of :mod:`golden.va` (its module docstring documents them and
their error bounds). Their tables and fixed-point constants are the golden model's
(:func:`golden.va.exp2_table`, ...), which ``tests/test_golden_va.py`` checks against
their mathematical definitions: the ROM contents are written once.
The helpers return Signals. Called without ``cut`` they are combinational; with a
:class:`Stages` that registers, they put a register at each of their cut points (the
partial products of every multiply, their sum, each shift, ...; about one multiplier
block or one carry chain per stage, aiming at 100 MHz on the ECP5), and the units run
them as pipelines that never stall (:func:`credit_pipeline`). Registers only delay: the
results are the same bit for bit.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.ma.fp import F32_CANONICAL_NAN, f32_add, f32_add_pipelined
from hdl.va.lanes import f32_to_bf16
from spec.codes import VaOpcode
from spec.va import F32_2M64, F32_ONE, FIX, LN2_Q, LOG2E_Q, exp2_table, recip_table, rsqrt_table

__all__ = ["Stages", "no_cut", "table_cut", "LUT_SLICE", "lut_product", "product",
           "f32_add_staged", "credit_pipeline", "f32_mul",
           "exp_f32", "recip_f32", "rsqrt_f32", "int32_to_f32", "f32_to_int8",
           "normalize_trunc", "UnaryUnit"]






class Stages:
    """The register boundaries of a datapath pipeline that never stalls.

    Helpers call ``cut(values)`` at their cut points: with ``registers`` the dict
    ``values``, and every value travelling in :attr:`carry`, pass through a register
    (reset-less: a pipeline's data needs no reset) and :attr:`depth` counts the boundary;
    without, ``cut`` changes nothing (the helper is combinational, ``depth`` stays 0).
    Values needed after a helper wait beside it: ``token = keep(name=value, ...)`` before,
    ``take(token)`` after, which delays them by the depth in between (registers for up to
    three cycles, else a small memory written and read every cycle: the pipeline never
    stalls). ``fork()`` starts a parallel branch at the same depth; ``join(branch,
    values)`` delays the values of the branch that is behind the other.
    ``lut_products``: :func:`product` forms its small partial products in logic.
    """

    def __init__(self, m, name, registers=True, lut_products=False):
        self.m, self.name, self.registers = m, name, registers
        self.lut_products = lut_products
        self.depth = 0
        self.carry = {}
        self._kept = {}
        self._count = 0
        self._ptr = None

    def __call__(self, values):
        if not self.registers:
            return dict(values)
        items = {**{f"v_{k}": v for k, v in values.items()},
                 **{f"c_{k}": v for k, v in self.carry.items()}}
        out = {}
        for key, value in items.items():
            out[key] = self._register(value, f"{self.name}_{self.depth}_{key}")
        self.carry = {k: out[f"c_{k}"] for k in self.carry}
        self.depth += 1
        return {k: out[f"v_{k}"] for k in values}

    def _register(self, value, name):
        value = Value.cast(value)
        reg = Signal(value.shape(), name=name, reset_less=True)
        self.m.d.sync += reg.eq(value)
        return reg

    def _delay(self, value, cycles, name):
        value = Value.cast(value)
        if cycles <= 3:
            for k in range(cycles):
                value = self._register(value, f"{name}_{k}")
            return value
        if self._ptr is None:
            self._ptr = Signal(8, name=f"{self.name}_ptr")
            self.m.d.sync += self._ptr.eq(self._ptr + 1)
        bits = max(4, (cycles - 1).bit_length())
        mem = memory.Memory(shape=value.shape(), depth=1 << bits, init=[])
        self.m.submodules[name] = mem
        wr = mem.write_port()
        rd = mem.read_port(transparent_for=())
        # written in cycle t at t; read in cycle t at t - cycles + 1, out in cycle t + 1
        self.m.d.comb += [wr.addr.eq(self._ptr[:bits]), wr.data.eq(value), wr.en.eq(1),
                          rd.addr.eq((self._ptr - (cycles - 1))[:bits])]
        return rd.data

    def keep(self, **values):
        self._count += 1
        token = f"k{self._count}"
        self._kept[token] = (self.depth, values)
        return token

    def take(self, token):
        depth, values = self._kept.pop(token)
        if not self.registers:
            return dict(values)
        return {k: self._delay(v, self.depth - depth, f"{self.name}_{token}_{k}")
                for k, v in values.items()}

    def fork(self):
        self._count += 1
        branch = Stages(self.m, f"{self.name}_b{self._count}", self.registers,
                        self.lut_products)
        branch.depth = self.depth
        return branch

    def join(self, branch, theirs, mine):
        """Bring this pipeline and ``branch`` to the same depth: returns the dicts
        ``theirs`` (the branch's values) and ``mine`` (this pipeline's), the one behind
        delayed to the other's depth."""
        theirs, mine = dict(theirs), dict(mine)
        while branch.depth < self.depth:
            theirs = branch(theirs)
        while self.depth < branch.depth:
            mine = self(mine)
        return theirs, mine


def table_cut(cut, values):
    """``cut`` after table look-ups (``values`` holds their outputs): two registers. A ROM
    of 256 or 512 words and the register after it become one ECP5 block RAM (DP16KD) with
    its output register, whose clock-to-output (5.8 ns) leaves too little of a 10 ns
    cycle for the MULT18X18D behind it (15.2 ns in UnaryUnit, tools/unit_timing.py); the
    second register moves the values into flip-flops first."""
    return cut(cut(values))


def no_cut(m, cut):
    """``cut``, or a :class:`Stages` without registers (a helper called combinationally)."""
    return cut if cut is not None else Stages(m, "", registers=False)


LUT_SLICE = 6
"""With ``lut_products``, partial products with a slice this narrow (or narrower) are
added up in logic, not given a multiplier block (the ECP5-85 has 156; see
:func:`product`). Only the narrowed units use it (:mod:`hdl.va.narrow`): a sum of shifted
copies simulates several times slower than one product on Icarus."""


def lut_product(a, b):
    """``a · b`` of unsigned values as a sum of shifted copies of ``a``, one per bit of
    the narrower ``b``, added in a balanced tree (carry chains, no multiplier block)."""
    a, b = Value.cast(a), Value.cast(b)
    if len(b) > len(a):
        a, b = b, a
    width = len(a) + len(b)
    terms = [Mux(b[k], a << k, 0) for k in range(len(b))]
    while len(terms) > 1:
        terms = [(terms[k] + terms[k + 1])[:width] if k + 1 < len(terms) else terms[k]
                 for k in range(0, len(terms), 2)]
    return terms[0][:width]


def product(m, x, y, cut, name, piece=18):
    """``x · y`` of unsigned values (``y`` may be an int): the partial products of
    ``piece``-bit slices (a multiplier block each; with a slice of :data:`LUT_SLICE` bits
    or fewer and ``cut.lut_products``, :func:`lut_product`), a cut, then their sum
    (combinational, returned)."""
    y = Const(y, max(1, int(y).bit_length())) if isinstance(y, int) else y
    x, y = Value.cast(x), Value.cast(y)
    width = len(x) + len(y)
    parts = {}
    for i in range(0, len(x), piece):
        for j in range(0, len(y), piece):
            a, b = x[i:i + piece], y[j:j + piece]
            small = cut.lut_products and min(len(a), len(b)) <= LUT_SLICE
            parts[f"p{i}_{j}"] = lut_product(a, b) if small else a * b
    parts = cut(parts)
    total = Signal(width, name=name)
    m.d.comb += total.eq(sum((Value.cast(v) << int(k[1:].split("_")[0]) + int(k.split("_")[1]))
                             for k, v in parts.items())[:width])
    return total


def _leading_one(m, value, width, name):
    """Index of the highest set bit of ``value`` (0 if none)."""
    index = Signal(range(width), name=name)
    for bit in range(width):          # the highest set bit is assigned last: wins
        with m.If(value[bit]):
            m.d.comb += index.eq(bit)
    return index


def normalize_trunc(m, value, width, scale, sign, name, cut=None):
    """binary32 bits of ``±value · 2**scale`` (``value`` unsigned, ``width`` bits;
    ``scale`` signed), truncated to 24 bits, flushed below 2**-126, inf from 2**128.
    Cuts: after the leading one and the exponent, after the shift."""
    cut = no_cut(m, cut)
    hb = _leading_one(m, value, width, f"{name}_hb")
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
        m.d.comb += out.eq(Cat(Const(0, 31), sign))
    with m.Elif(exp < 1):
        m.d.comb += out.eq(Cat(Const(0, 31), sign))
    with m.Elif(exp > 254):
        m.d.comb += out.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
    with m.Else():
        m.d.comb += out.eq(Cat(s["mant"][:23], exp[:8], sign))
    return out


def f32_mul(m, a, b, name, cut=None):
    """binary32 × binary32, round to nearest even, with the MA's rules: subnormal inputs
    read as zeros, a subnormal IEEE result flushes to a signed zero (one that rounds up
    to 2**-126 is kept), every NaN is 0x7FC00000. Cuts: after the partial products,
    after their sum, after the rounding."""
    cut = no_cut(m, cut)
    sa, ea, fa = a[31], a[23:31], a[:23]
    sb, eb, fb = b[31], b[23:31], b[:23]
    a_zero, b_zero = ea == 0, eb == 0
    a_inf, b_inf = (ea == 0xFF) & (fa == 0), (eb == 0xFF) & (fb == 0)
    a_nan, b_nan = (ea == 0xFF) & (fa != 0), (eb == 0xFF) & (fb != 0)
    kind = Signal(2, name=f"{name}_kind")        # 0 number, 1 NaN, 2 inf, 3 zero
    with m.If(a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf)):
        m.d.comb += kind.eq(1)
    with m.Elif(a_inf | b_inf):
        m.d.comb += kind.eq(2)
    with m.Elif(a_zero | b_zero):
        m.d.comb += kind.eq(3)
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
        with m.Case(1):
            m.d.comb += out.eq(F32_CANONICAL_NAN)
        with m.Case(2):
            m.d.comb += out.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
        with m.Case(3):
            m.d.comb += out.eq(Cat(Const(0, 31), sign))
        with m.Default():
            with m.If(exp_r > 254):
                m.d.comb += out.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
            with m.Elif(exp >= 1):
                m.d.comb += out.eq(Cat(frac, exp_r[:8], sign))
            with m.Elif((exp == 0) & s["ones"]):
                # 2**-127 · (2 - 2**-23) or more rounds, as a subnormal, up to 2**-126.
                m.d.comb += out.eq(Cat(Const(0, 23), Const(1, 8), sign))
            with m.Else():
                m.d.comb += out.eq(Cat(Const(0, 31), sign))
    return out


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
    sign, e, frac = x[31], x[23:31], x[:23]
    big_e = Signal(range(-128, 129), name=f"{name}_E")
    m.d.comb += big_e.eq(e - 127)
    shift = Signal(range(64), name=f"{name}_sh")
    m.d.comb += shift.eq(Mux(big_e > 23, 0, 23 - big_e))
    special = Signal(2, name=f"{name}_special")     # 0 none, 1 NaN, 2 big, 3 tiny
    with m.If((e == 0xFF) & (frac != 0)):
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
    return _special_or(m, s["special"], core, Mux(s["sign"], 0, 0x7F800000),
                       F32_ONE + (s["bias"] << 23), name)


def recip_f32(m, x, name, cut=None):
    """1/x for binary32 ``x``: table + one Newton step; exact for powers of two."""
    cut = no_cut(m, cut)
    sign, e, frac = x[31], x[23:31], x[:23]
    table = Array(Const(v, 31) for v in _RECIP)
    y0 = Signal(31, name=f"{name}_y0")
    m.d.comb += y0.eq(table[frac[15:]])
    special = Signal(2, name=f"{name}_special")     # 0 none, 1 NaN, 2 inf → 0, 3 zero → inf
    with m.If((e == 0xFF) & (frac != 0)):
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
    return _special_or(m, s["special"], core, Cat(Const(0, 31), s["sign"]),
                       Cat(Const(0, 23), Const(0xFF, 8), s["sign"]), name)


def rsqrt_f32(m, x, name, cut=None):
    """1/sqrt(x) for binary32 ``x``: table by exponent parity, one Newton step."""
    cut = no_cut(m, cut)
    sign, e, frac = x[31], x[23:31], x[:23]
    odd = ~e[0]                                  # the unbiased exponent e - 127 is odd
    table = Array(Const(v, 31) for v in _RSQRT[0] + _RSQRT[1])
    y0 = Signal(31, name=f"{name}_y0")
    m.d.comb += y0.eq(table[Cat(frac[16:], odd)])
    special = Signal(2, name=f"{name}_special")     # 0 none, 1 NaN, 2 +inf → 0, 3 zero → inf
    with m.If((sign & (e != 0)) | ((e == 0xFF) & (frac != 0))):
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
                       Cat(Const(0, 23), Const(0xFF, 8), s["sign"]), name)


def int32_to_f32(m, v, name, cut=None):
    """Signed 32-bit integer → binary32, round to nearest even. Cuts: after the magnitude,
    after the alignment."""
    cut = no_cut(m, cut)
    sign = v[31]
    mag = Signal(32, name=f"{name}_mag")
    m.d.comb += mag.eq(Mux(sign, -v, v))
    s = cut({"mag": mag, "sign": sign})
    mag = s["mag"]
    hb = _leading_one(m, mag, 32, f"{name}_hb")
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
    sign, e, frac = v[31], v[23:31], v[:23]
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


_EXP2 = exp2_table()
_RECIP = recip_table()
_RSQRT = rsqrt_table()


def f32_add_staged(m, a, b, name, cut=None):
    """:func:`hdl.ma.fp.f32_add`, with the registers of ``f32_add_pipelined(deep=True)``
    when ``cut`` registers (five boundaries; the result is combinational after them)."""
    if cut is None or not cut.registers:
        return f32_add(m, a, b, name=name)
    result, cut.carry = f32_add_pipelined(m, a, b, name=name, carry=cut.carry, deep=True)
    cut.depth += 5
    return result


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
    m.d.comb += [out.w_en.eq(valid[-1]), out.w_data.eq(data),
                 o.payload.eq(out.r_data), o.valid.eq(out.r_rdy), out.r_en.eq(o.ready)]


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
    partial products in logic (:data:`LUT_SLICE`).
    """

    def __init__(self, data_width, lut_products=False):
        self.data_width, self.lut_products = data_width, lut_products
        wide_in, wide_out = self.layouts(data_width)
        super().__init__({
            "op": In(8),
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
        op = self.op
        silu = op == VaOpcode.SILU
        softmax = op == VaOpcode.SOFTMAX
        rmsnorm = op == VaOpcode.RMSNORM
        quantize = op == VaOpcode.QUANTIZE
        dequantize = op == VaOpcode.DEQUANTIZE
        recip, cvt_f32 = op == VaOpcode.RECIP, op == VaOpcode.CVT_F32
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
            x16 = Mux(raw[7:15] == 0, Cat(Const(0, 15), raw[15]), raw)
            x = Cat(Const(0, 16), x16)
            g16 = gammas[lane]
            g16 = Mux(g16[7:15] == 0, Cat(Const(0, 15), g16[15]), g16)
            low = silu & x16[15] & (x16[:15] > 0x4180) & (x16[:15] <= 0x7F80)
            # CVT_F32: the binary32 as it is, a NaN made canonical
            kept = {"x": x, "g": g16, "low": low}
            if lane < lanes // 2:
                f = Value.cast(ints[lane])
                kept["f"] = Mux((f[23:31] == 0xFF) & (f[:23] != 0), F32_CANONICAL_NAN, f)
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
                    "da": Mux(recip, w["x"], F32_ONE), "db": Mux(recip, 0x80000000, e), **w})
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
            y = Mux(silu & (v["x"] == 0xFF800000), Const(0x80000000, 32), y)
            branch = st.fork()
            quant = f32_to_int8(m, v["y_high"], f"q{lane}", branch)
            # EXP: e; CVT_F32: x (rounded on its bits, not flushed by a product)
            v = st({"y": Mux((op == VaOpcode.EXP) | cvt_f32, Mux(cvt_f32, v["x"], v["e"]), y),
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
