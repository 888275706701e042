"""bf16 × bf16 → binary32 multiplier and binary32 adder of the MA (combinational or pipelined).

Both follow the MA arithmetic contract (docs/design.md, "bf16 mode"):

1. Subnormal inputs read as zero of the same sign.
2. Every result that IEEE binary32 (round-to-nearest-even, gradual underflow) would make
   subnormal is replaced by a zero of the same sign.
3. Every NaN result is the canonical ``0x7FC00000``; infinities follow IEEE.

Why rule 2 needs no subnormal rounding here:

* A product of two normal bf16 values has at most 16 significant bits, so where its
  exponent is normal it is exact. Below ``2**-126`` its largest value is
  ``(2**16 - 1) * 2**-142 < 2**-126 - 2**-150``, the point from which round-to-nearest
  would carry it up to the smallest normal; so every product under ``2**-126`` rounds to
  a subnormal (or zero) and is flushed.
* A sum of two normal binary32 values is a multiple of ``2**-149``; below ``2**-126`` it
  is therefore exactly a subnormal and is flushed; no rounding happens there.

So both units flush whenever the normalised exponent is below 1.

The adder is written as four stages (:data:`F32_ADD_STAGES`): operand classification and
swap; alignment and the significand sum; normalisation; rounding and the result select.
:func:`f32_add` chains them combinationally; :func:`f32_add_pipelined` puts a register
after each of the first three, so one add takes three cycles plus the caller's register
after the last stage (the MA's PE closes its accumulation loop with that register). The
arithmetic is the same in both: the registers only delay it.
"""

from amaranth.hdl import Cat, Const, Mux, Signal, signed
from amaranth.lib import data

__all__ = ["F32_CANONICAL_NAN", "F32_ADD_STAGES", "bf16_mul", "f32_add", "f32_add_pipelined",
           "int8_mac", "PE_PRODUCT_STAGES", "PeProductLayout", "pe_product", "pe_accumulate"]

F32_CANONICAL_NAN = 0x7FC00000
_F32_INF = 0x7F800000
F32_ADD_STAGES = 4

# What the first stage decided about the result, carried to the last: the datapath's
# sum, or a special value (canonical NaN, an infinity or a zero with ``special_sign``).
_SUM, _NAN, _INF, _ZERO = range(4)


def _leading_zeros(m, value, width, name):
    """Number of leading zeros of ``value`` (``width`` bits); ``width`` if it is zero.

    A tree: each half of a field reports its count and whether it is all zero, the upper
    half's count wins unless it is all zero (a shallower, smaller circuit than a priority
    chain).
    """
    size = 1
    while size < width:
        size *= 2
    # On a wire: the tree reads its bits many times, and an expression would be copied
    # into the Verilog as often.
    padded = Signal(size, name=f"{name}_in")                 # low padding: counts unchanged
    m.d.comb += padded.eq(Cat(Const(0, size - width), value[0:width]))

    def tree(bits, w):
        if w == 1:
            return Const(0, 0), ~bits[0]
        hi_count, hi_zero = tree(bits[w // 2:w], w // 2)
        lo_count, lo_zero = tree(bits[0:w // 2], w // 2)
        return Mux(hi_zero, Cat(lo_count, 1), Cat(hi_count, 0)), hi_zero & lo_zero

    count, zero = tree(padded, size)
    result = Signal(range(width + 1), name=name)
    m.d.comb += result.eq(Mux(zero, width, count))
    return result


def _trailing_zeros(m, value, width, none, name):
    """Number of trailing zeros of ``value`` (``width`` bits); ``none`` if it is zero."""
    reverse = Cat(*(value[bit] for bit in reversed(range(width))))
    count = _leading_zeros(m, reverse, width, f"{name}_rev")
    result = Signal(range(max(width, none) + 1), name=name)
    m.d.comb += result.eq(Mux(count == width, none, count))
    return result


def _shift(m, value, amount, width, name, left):
    """``value`` shifted by ``amount`` (zeros in), ``width`` bits kept: one 2:1 multiplexer
    level per bit of ``amount``, the largest step first."""
    current = value
    for k in reversed(range(len(amount))):
        step = Signal(width, name=f"{name}_{k}")
        moved = (current << (1 << k)) if left else (current >> (1 << k))
        m.d.comb += step.eq(Mux(amount[k], moved[0:width], current[0:width]))
        current = step
    return current


def bf16_mul(m, a, b, name="mul", product=None):
    """Product of two bf16 bit patterns as a binary32 bit pattern (a 32-bit Signal).

    ``product``, when given, is the 16-bit product of the two significands with their
    hidden bits (``(1.fa) × (1.fb)`` as 1.7 × 1.7 → 2.14 fixed point) computed elsewhere
    (the PE shares one multiplier between its modes); otherwise it is computed here.
    """
    sa, ea, fa = a[15], a[7:15], a[0:7]
    sb, eb, fb = b[15], b[7:15], b[0:7]
    sign = sa ^ sb
    a_zero, b_zero = ea == 0, eb == 0
    a_inf, b_inf = (ea == 0xFF) & (fa == 0), (eb == 0xFF) & (fb == 0)
    a_nan, b_nan = (ea == 0xFF) & (fa != 0), (eb == 0xFF) & (fb != 0)

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
        m.d.comb += result.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
    with m.Elif(a_zero | b_zero | (exp < 1)):
        m.d.comb += result.eq(Cat(Const(0, 31), sign))
    with m.Elif(exp > 254):
        m.d.comb += result.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
    with m.Else():
        m.d.comb += result.eq(Cat(frac, exp[0:8], sign))
    return result


def _wire(m, name, value):
    """A named combinational Signal of ``value``'s shape (keeps the netlist readable)."""
    sig = Signal(value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


def _f32_add_stages(m, a, b, name, boundary, inner=None):
    """The adder's four stages; ``boundary(values, index)`` is applied to the values that
    cross from stage ``index`` to ``index + 1`` (a register, or nothing); ``inner`` (if
    given) likewise inside stages 2 and 3, after the alignment (index 12) and after the
    leading-zero count (index 13)."""
    if inner is None:
        def inner(values, index):
            return values
    # --- stage 1: classify, order by magnitude, exponent difference
    sa, ea, fa = a[31], a[23:31], a[0:23]
    sb, eb, fb = b[31], b[23:31], b[0:23]
    a_zero, b_zero = ea == 0, eb == 0
    a_inf, b_inf = (ea == 0xFF) & (fa == 0), (eb == 0xFF) & (fb == 0)
    a_nan, b_nan = (ea == 0xFF) & (fa != 0), (eb == 0xFF) & (fb != 0)
    kind = Signal(2, name=f"{name}_kind")
    special_sign = Signal(name=f"{name}_ssign")
    with m.If(a_nan | b_nan | (a_inf & b_inf & (sa != sb))):
        m.d.comb += kind.eq(_NAN)
    with m.Elif(a_inf):
        m.d.comb += [kind.eq(_INF), special_sign.eq(sa)]
    with m.Elif(b_inf):
        m.d.comb += [kind.eq(_INF), special_sign.eq(sb)]
    with m.Elif(a_zero & b_zero):
        m.d.comb += [kind.eq(_ZERO), special_sign.eq(sa & sb)]  # -0 only from -0 + -0
    with m.Else():
        m.d.comb += kind.eq(_SUM)
    # x is the operand of larger magnitude, y the other. A zero (or subnormal) operand is
    # the smaller one when the other is not; its significand becomes 0, so the datapath
    # returns x unchanged: x + 0 = x exactly.
    swap = _wire(m, f"{name}_swap", b[0:31] > a[0:31])
    s1 = {
        "sx": Mux(swap, sb, sa),
        "ex": Mux(swap, eb, ea),
        "mx": Mux(swap, Cat(fb, 1), Cat(fa, 1)),
        "my": Mux(a_zero | b_zero, 0, Mux(swap, Cat(fa, 1), Cat(fb, 1)))[0:24],
        "diff": Mux(swap, eb - ea, ea - eb)[0:8],
        "add": sa == sb,
        "kind": kind, "special_sign": special_sign,
    }
    s1 = boundary(s1, 1)

    # --- stage 2: align y to x (guard, round, sticky) and add
    dist = Mux(s1["diff"] > 31, 31, s1["diff"][0:5])
    # Past a distance of 31 every bit of y is below the sticky position anyway.
    # Significands with three extension bits (guard, round, sticky): 27 bits. The sticky
    # bit is the OR of the bits of y shifted below the round position: bit q of my lands
    # there when q <= dist - 3, i.e. when my has a set bit at or below dist - 3.
    tz = _trailing_zeros(m, s1["my"], 24, 31, f"{name}_tz")
    sticky = dist >= tz + 3
    y_top = _wire(m, f"{name}_yshift", (Cat(Const(0, 2), s1["my"]) >> dist)[0:26])
    s12 = inner({"y_top": y_top, "sticky": sticky, "mx": s1["mx"], "add": s1["add"],
                 "sx": s1["sx"], "ex": s1["ex"], "kind": s1["kind"],
                 "special_sign": s1["special_sign"]}, 12)
    s1 = s12
    x_ext = Cat(Const(0, 3), s1["mx"])
    y_ext = Cat(s12["sticky"], s12["y_top"])
    # x ± y with one adder: x - y = x + ~y + 1.
    y_wide = Cat(y_ext, Const(0, 1))                 # 28 bits, so that ~ is mod 2**28
    y_op = Mux(s1["add"], y_wide, ~y_wide)
    total = _wire(m, f"{name}_sum", (x_ext + y_op + ~s1["add"])[0:28])
    s2 = {"total": total, "sx": s1["sx"], "ex": s1["ex"],
          "kind": s1["kind"], "special_sign": s1["special_sign"]}
    s2 = boundary(s2, 2)

    # --- stage 3: normalise. A carry shifts right by one (keeping the sticky bit); a
    # cancellation shifts left. A left shift of more than one happens only when dist <= 1,
    # and then no bit was lost into the sticky position, so the shift is exact.
    total = s2["total"]
    lz = _leading_zeros(m, total[0:27], 27, f"{name}_lz")
    s2 = inner({**s2, "lz": lz}, 13)
    total, lz = s2["total"], s2["lz"]
    norm = Signal(27, name=f"{name}_norm")
    exp = Signal(range(-64, 512), name=f"{name}_exp")
    with m.If(total[27]):
        m.d.comb += [norm.eq(Cat(total[0] | total[1], total[2:28])), exp.eq(s2["ex"] + 1)]
    with m.Else():
        m.d.comb += [norm.eq(total[0:27] << lz), exp.eq(s2["ex"] - lz)]
    s3 = {"norm": norm, "exp": exp, "cancel": total == 0, "sx": s2["sx"],
          "kind": s2["kind"], "special_sign": s2["special_sign"]}
    s3 = boundary(s3, 3)

    # --- stage 4: round to nearest even, then pick the result
    norm, exp, sx = s3["norm"], s3["exp"], s3["sx"]
    guard, rnd, sticky, lsb = norm[2], norm[1], norm[0], norm[3]
    rounded = _wire(m, f"{name}_rounded", (norm[3:27] + (guard & (rnd | sticky | lsb)))[0:25])
    carry = rounded[24]
    frac_r = Mux(carry, rounded[1:24], rounded[0:23])
    exp_r = (exp + carry)[0:8]
    # exp + carry < 1 and exp + carry > 254, without waiting for the sum.
    under = (exp < 0) | ((exp == 0) & ~carry)
    over = (exp > 254) | ((exp == 254) & carry)

    result = Signal(32, name=name)
    with m.Switch(s3["kind"]):
        with m.Case(_NAN):
            m.d.comb += result.eq(F32_CANONICAL_NAN)
        with m.Case(_INF):
            m.d.comb += result.eq(Cat(Const(0, 23), Const(0xFF, 8), s3["special_sign"]))
        with m.Case(_ZERO):
            m.d.comb += result.eq(Cat(Const(0, 31), s3["special_sign"]))
        with m.Default():
            with m.If(s3["cancel"]):
                m.d.comb += result.eq(0)                            # x + (-x) = +0
            with m.Elif(under):
                m.d.comb += result.eq(Cat(Const(0, 31), sx))
            with m.Elif(over):
                m.d.comb += result.eq(Cat(Const(0, 23), Const(0xFF, 8), sx))
            with m.Else():
                m.d.comb += result.eq(Cat(frac_r, exp_r, sx))
    return result


def f32_add(m, a, b, name="add"):
    """Sum of two binary32 bit patterns, rounded to nearest even (a 32-bit Signal)."""
    return _f32_add_stages(m, a, b, name, lambda values, index: values)


def _stage_registers(m, name, carry, reset_less=False):
    """A ``boundary(values, index)`` for the staged adders: registers every value of the
    stage (``<name>_s<index>_<key>``) and, beside them, the values of ``carry`` (a dict,
    updated in place to the delayed copies); returns the registered values. With
    ``reset_less`` the registers have no reset."""
    def boundary(values, index):
        delayed = {}
        for key, value in {**values, **{f"carry_{k}": v for k, v in carry.items()}}.items():
            reg = Signal(value.shape(), name=f"{name}_s{index}_{key}", reset_less=reset_less)
            m.d.sync += reg.eq(value)
            delayed[key] = reg
        for key in list(carry):
            carry[key] = delayed.pop(f"carry_{key}")
        return delayed
    return boundary


def f32_add_pipelined(m, a, b, name="add", carry=None, deep=False):
    """:func:`f32_add` with a register after each of its first three stages (``deep``:
    also after the alignment and after the leading-zero count, five registers).

    The result (combinational out of the last stage) belongs to the operands of three
    (five) cycles earlier. ``carry`` maps names to values that travel alongside, delayed
    by the same registers; returns ``(result, carried)``.
    """
    carry = dict(carry or {})
    boundary = _stage_registers(m, name, carry)

    result = _f32_add_stages(m, a, b, name, boundary, boundary if deep else None)
    return result, carry


def int8_mac(acc, a, b):
    """``acc + a·b`` for int8 ``a``, ``b`` (low bytes of the operands), wrapping to 32 bits."""
    return (acc + a[0:8].as_signed() * b[0:8].as_signed())[0:32]


# --- The MA's processing element: a bf16 product added to a binary32 partial sum -----------
#
# The PE's adder adds a bf16 product (16 significant bits) to a binary32 partial sum, so it
# is written for that case rather than with :func:`f32_add`'s general operands:
#
# * The product arrives unpacked (:class:`PeProductLayout`): its significand, exponent and
#   class, never as a binary32 pattern to decode again. Its significand has 16 bits, so
#   the magnitude comparison looks at 23 bits, not 31.
# * The alignment shifter collects the sticky bit level by level (the bits each level
#   shifts out), and the sum is formed in the next stage, so the sticky bit never waits in
#   front of a carry chain.
# * The int8 sum is formed in the first stage and leaves through the last stage's
#   rounding adder (nothing added to it), so it needs no multiplexer of its own.
# * Normalisation has two paths. A sum with at most two leading zeros (of 28 bits: a carry,
#   none, or one) is normalised by a 3-way multiplexer and rounded; its exponent change
#   (+1, 0, -1) rides on the rounding adder. More leading zeros happen only on a
#   subtraction with exponents at most one apart; no bit was lost then, so the sum is
#   exact, only shifted left, and never rounded. The two paths run side by side in the
#   last stage.

PE_PRODUCT_STAGES = 2


class PeProductLayout(data.StructLayout):
    """A bf16 product as the PE's adder takes it (or, in int8 mode, the int8 product).

    ``sig``: bf16: the product of the two significands normalised to 1.15 (bit 15 set for
    a normal product); int8: ``a·b``, signed. ``exp``: the biased binary32 exponent of a
    normal product (meaningless otherwise). ``zero``, ``inf``, ``nan``: the product's class
    under the MA's rules (a product below ``2**-126`` is a zero; NaN is canonical later).
    """
    def __init__(self):
        super().__init__({"sig": 16, "exp": 8, "sign": 1, "zero": 1, "inf": 1, "nan": 1})


def pe_product(m, a, b, bf16, name="prod"):
    """The PE's two product stages; returns the registered :class:`PeProductLayout` value.

    ``a``, ``b``: 16-bit operands, bf16 patterns or (``bf16`` low) int8 values in the low
    byte. Stage 1: one 9×9 signed multiply shared by the modes (int8 × int8, or the bf16
    significands 1.7 × 1.7) and the bf16 operands' exponent sum and classes. Stage 2: the
    significand product normalised and the product's class (:func:`bf16_mul`'s rules).
    The registers have no reset (data only).
    """
    # --- stage 1
    x = Mux(bf16, Cat(a[0:7], 1, 0), a[0:8].as_signed())
    y = Mux(bf16, Cat(b[0:7], 1, 0), b[0:8].as_signed())
    mul = Signal(signed(18), name=f"{name}_mul", reset_less=True)
    ea, eb = a[7:15], b[7:15]
    a_zero, b_zero = ea == 0, eb == 0
    a_inf, b_inf = (ea == 0xFF) & (a[0:7] == 0), (eb == 0xFF) & (b[0:7] == 0)
    a_nan, b_nan = (ea == 0xFF) & (a[0:7] != 0), (eb == 0xFF) & (b[0:7] != 0)
    esum = Signal(9, name=f"{name}_esum", reset_less=True)
    sign, zero, inf, nan = (Signal(name=f"{name}_{n}1", reset_less=True)
                            for n in ("sign", "zero", "inf", "nan"))
    m.d.sync += [mul.eq(x.as_signed() * y.as_signed()), esum.eq(ea + eb),
                 sign.eq(a[15] ^ b[15]), zero.eq(a_zero | b_zero), inf.eq(a_inf | b_inf),
                 nan.eq(a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf))]

    # --- stage 2
    top = mul[15]                                   # the significand product is >= 2
    exp = _wire(m, f"{name}_exp", esum + top - 127)
    underflow, overflow = exp < 1, exp > 254
    out = Signal(PeProductLayout(), name=name, reset_less=True)
    m.d.sync += [
        out.sig.eq(Mux(bf16 & ~top, Cat(0, mul[0:15]), mul[0:16])),
        out.exp.eq(exp[0:8]),
        out.sign.eq(sign),
        out.nan.eq(nan),
        out.inf.eq(~nan & (inf | (~zero & overflow))),
        out.zero.eq(~nan & ~inf & (zero | underflow)),
    ]
    return out


def _shift_right_sticky(m, value, amount, name):
    """``value >> amount`` (same width) and the OR of every bit shifted out, gathered at
    each level of the shifter (the largest step first)."""
    width = len(value)
    current, lost = value, []
    for k in reversed(range(len(amount))):
        step = 1 << k
        lost.append(amount[k] & (current[0:min(step, width)] != 0))
        shifted = Signal(width, name=f"{name}_{k}")
        m.d.comb += shifted.eq(Mux(amount[k], current >> step, current))
        current = shifted
    sticky = Signal(name=f"{name}_sticky")
    m.d.comb += sticky.eq(Cat(*lost).any())
    return current, sticky


def pe_accumulate(m, base, p, int8, name="acc", carry=None):
    """The PE's adder in :data:`F32_ADD_STAGES` stages: ``base ⊕ p``, binary32 ``base`` plus
    the product ``p`` (:class:`PeProductLayout`), rounded to nearest even under the MA's
    rules (the same as ``f32_add(base, bf16_mul(a, b))``); with ``int8`` high, ``base +
    p.sig`` (signed), wrapping to 32 bits.

    A register follows each of the first three stages; the sum (combinational out of the
    last stage) belongs to the operands of three cycles earlier, and the caller's register
    after it closes the PE's accumulation loop. ``carry`` maps names to values delayed
    alongside by the same three registers (none of them has a reset). Returns
    ``(sum, carried)``.
    """
    carry = dict(carry or {})
    boundary = _stage_registers(m, name, carry, reset_less=True)

    # int8 mode: the wrapping 32-bit sum, formed here and taken out through the rounding
    # adder of the last stage (with nothing added).
    carry["int8"] = (base + p.sig.as_signed())[0:32]

    # --- stage 1: classify, order by magnitude, exponent difference
    sa, ea, fa = base[31], base[23:31], base[0:23]
    a_zero, a_max = ea == 0, ea == 0xFF
    a_inf, a_nan = a_max & (fa == 0), a_max & (fa != 0)
    kind = Signal(2, name=f"{name}_kind")
    special_sign = Signal(name=f"{name}_ssign")
    with m.If(a_nan | p.nan | (a_inf & p.inf & (sa != p.sign))):
        m.d.comb += kind.eq(_NAN)
    with m.Elif(a_inf):
        m.d.comb += [kind.eq(_INF), special_sign.eq(sa)]
    with m.Elif(p.inf):
        m.d.comb += [kind.eq(_INF), special_sign.eq(p.sign)]
    with m.Elif(a_zero & p.zero):
        m.d.comb += [kind.eq(_ZERO), special_sign.eq(sa & p.sign)]  # -0 only from -0 + -0
    with m.Else():
        m.d.comb += kind.eq(_SUM)
    # x is the operand of larger magnitude, y the other; a zero operand is the smaller one
    # and its significand becomes 0, so that x + 0 = x. The product's 8 low fraction bits
    # are zero, so it is larger exactly when its top 23 bits are.
    swap = _wire(m, f"{name}_swap",
                 ~p.zero & (Cat(p.sig[0:15], p.exp) > Cat(fa[8:23], ea)))
    p_sig = Cat(Const(0, 8), p.sig)
    s1 = boundary({
        "sx": Mux(swap, p.sign, sa),
        "ex": Mux(swap, p.exp, ea),
        "mx": Mux(swap, p_sig, Cat(fa, 1)),
        "my": Mux(a_zero | p.zero, 0, Mux(swap, Cat(fa, 1), p_sig))[0:24],
        "diff": Mux(swap, p.exp - ea, ea - p.exp)[0:8],
        "add": sa == p.sign,
        "kind": kind, "special_sign": special_sign,
    }, 1)

    # --- stage 2: align y to x; guard, round and sticky bits; y negated for x - y
    dist = Mux(s1["diff"][5:8] != 0, 31, s1["diff"][0:5])
    y_top, sticky = _shift_right_sticky(m, Cat(Const(0, 2), s1["my"]), dist, f"{name}_align")
    y_wide = Cat(sticky, y_top, Const(0, 1))          # 28 bits, so that ~ is mod 2**28
    s2 = boundary({"y": Mux(s1["add"], y_wide, ~y_wide), "mx": s1["mx"], "add": s1["add"],
                   "sx": s1["sx"], "ex": s1["ex"], "kind": s1["kind"],
                   "special_sign": s1["special_sign"]}, 2)

    # --- stage 3: x ± y with one adder (x - y = x + ~y + 1); leading zeros below bit 25
    total = _wire(m, f"{name}_sum", (Cat(Const(0, 3), s2["mx"]) + s2["y"] + ~s2["add"])[0:28])
    lz = _leading_zeros(m, total[2:25], 23, f"{name}_lz")
    s3 = boundary({"total": total, "lz": lz, "sx": s2["sx"], "ex": s2["ex"],
                   "ex_max": s2["ex"] == 254, "ex_min": s2["ex"] == 1,
                   "ex_m2": (s2["ex"] - 2)[0:8], "ex_lt2": s2["ex"] < 2, "ex_lt26": s2["ex"] < 26,
                   "kind": s2["kind"], "special_sign": s2["special_sign"]}, 3)

    # --- stage 4: normalise and round (two paths), then pick the result
    t, lz, ex, sx = s3["total"], s3["lz"], s3["ex"], s3["sx"]
    # Rounding path (a carry, or at most one leading zero): 27 bits with guard, round and
    # sticky at the bottom, and the exponent change on the rounding adder. In int8 mode
    # the adder passes the int8 sum through.
    s8 = carry.pop("int8")
    norm = Mux(t[27], Cat(t[0] | t[1], t[2:28]), Mux(t[26], t[0:27], Cat(0, t[0:26])))
    guard, rnd, stk, lsb = norm[2], norm[1], norm[0], norm[3]
    change = Mux(t[27], 1, Mux(t[26], 0, 0xFF))      # exponent +1, 0, -1 (mod 2**8)
    operand = Mux(int8, s8[0:31], Cat(norm[3:26], ex))
    increment = Mux(int8, 0, Cat(guard & (rnd | stk | lsb), Const(0, 22), change))
    rounded = _wire(m, f"{name}_rounded", (operand + increment)[0:31])
    # A rounding carry into the exponent leaves a zero fraction, so exponent 255 from it is
    # already the infinity; only a carry from exponent 254 is caught here.
    over = t[27] & s3["ex_max"]
    under = ~t[27] & ~t[26] & s3["ex_min"]
    # Shifting path (three or more leading zeros of 28): exact, only shifted.
    far = t[25:28] != 0
    frac = Cat(0, _shift(m, t[2:25], lz, 23, f"{name}_nshift", left=True)[0:22])
    exp = _wire(m, f"{name}_exp", (s3["ex_m2"] - lz)[0:8])
    under_shifted = s3["ex_lt2"] | s3["ex_lt26"] & (lz >= s3["ex_m2"][0:5])
    cancel = ~far & (lz == 23)

    result = Signal(32, name=name)
    with m.If(int8):
        m.d.comb += result.eq(Cat(rounded, s8[31]))
    with m.Elif(s3["kind"] == _NAN):
        m.d.comb += result.eq(F32_CANONICAL_NAN)
    with m.Elif(s3["kind"] == _INF):
        m.d.comb += result.eq(Cat(Const(0, 23), Const(0xFF, 8), s3["special_sign"]))
    with m.Elif(s3["kind"] == _ZERO):
        m.d.comb += result.eq(Cat(Const(0, 31), s3["special_sign"]))
    with m.Else():
        with m.If(cancel):
            m.d.comb += result.eq(0)                            # x + (-x) = +0
        with m.Elif(Mux(far, under, under_shifted)):
            m.d.comb += result.eq(Cat(Const(0, 31), sx))
        with m.Elif(far & over):
            m.d.comb += result.eq(Cat(Const(0, 23), Const(0xFF, 8), sx))
        with m.Elif(far):
            m.d.comb += result.eq(Cat(rounded, sx))
        with m.Else():
            m.d.comb += result.eq(Cat(frac, exp, sx))
    return result, carry
