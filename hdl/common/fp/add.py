"""The binary32 adder: combinational, pipelined (three or five registers) or staged.

The adder is written as four stages (:data:`F32_ADD_STAGES`): operand classification and
swap; alignment and the significand sum; normalisation; rounding and the result select.
:func:`f32_add` chains them combinationally; :func:`f32_add_pipelined` puts a register
after each of the first three, so one add takes three cycles plus the caller's register
after the last stage (the MA's PE closes its accumulation loop with that register);
``deep=True`` adds two more inside stages 2 and 3 (the VA's units and lane engine).
:func:`f32_add_staged` is the adder in a :class:`hdl.common.fp.stages.Stages` pipeline.
The arithmetic is the same in all: the registers only delay it.

A sum of two normal binary32 values is a multiple of ``2**-149``; below ``2**-126`` it is
therefore exactly a subnormal and is flushed (rule 2 of :mod:`hdl.common.fp`); no rounding
happens there, so the adder flushes whenever the normalised exponent is below 1.
"""

from amaranth.hdl import Cat, Const, Mux, Signal

from hdl.common.fp.bits import (
    F32_CANONICAL_NAN,
    KIND_INF,
    KIND_NAN,
    KIND_SUM,
    KIND_ZERO,
    classes,
    f32_fields,
    f32_inf,
    f32_zero,
    leading_zeros,
    trailing_zeros,
    wire,
)
from hdl.common.fp.stages import stage_registers

__all__ = ["F32_ADD_STAGES", "f32_add", "f32_add_pipelined", "f32_add_staged"]

F32_ADD_STAGES = 4


def _f32_add_stages(m, a, b, name, boundary, inner=None):
    """The adder's four stages; ``boundary(values, index)`` is applied to the values that
    cross from stage ``index`` to ``index + 1`` (a register, or nothing); ``inner`` (if
    given) likewise inside stages 2 and 3, after the alignment (index 12) and after the
    leading-zero count (index 13)."""
    if inner is None:
        def inner(values, index):
            return values
    # --- stage 1: classify, order by magnitude, exponent difference
    sa, ea, fa = f32_fields(a)
    sb, eb, fb = f32_fields(b)
    a_zero, a_inf, a_nan = classes(ea, fa)
    b_zero, b_inf, b_nan = classes(eb, fb)
    kind = Signal(2, name=f"{name}_kind")
    special_sign = Signal(name=f"{name}_ssign")
    with m.If(a_nan | b_nan | (a_inf & b_inf & (sa != sb))):
        m.d.comb += kind.eq(KIND_NAN)
    with m.Elif(a_inf):
        m.d.comb += [kind.eq(KIND_INF), special_sign.eq(sa)]
    with m.Elif(b_inf):
        m.d.comb += [kind.eq(KIND_INF), special_sign.eq(sb)]
    with m.Elif(a_zero & b_zero):
        m.d.comb += [kind.eq(KIND_ZERO), special_sign.eq(sa & sb)]  # -0 only from -0 + -0
    with m.Else():
        m.d.comb += kind.eq(KIND_SUM)
    # x is the operand of larger magnitude, y the other. A zero (or subnormal) operand is
    # the smaller one when the other is not; its significand becomes 0, so the datapath
    # returns x unchanged: x + 0 = x exactly.
    swap = wire(m, f"{name}_swap", b[0:31] > a[0:31])
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
    tz = trailing_zeros(m, s1["my"], 24, 31, f"{name}_tz")
    sticky = dist >= tz + 3
    y_top = wire(m, f"{name}_yshift", (Cat(Const(0, 2), s1["my"]) >> dist)[0:26])
    s12 = inner({"y_top": y_top, "sticky": sticky, "mx": s1["mx"], "add": s1["add"],
                 "sx": s1["sx"], "ex": s1["ex"], "kind": s1["kind"],
                 "special_sign": s1["special_sign"]}, 12)
    s1 = s12
    x_ext = Cat(Const(0, 3), s1["mx"])
    y_ext = Cat(s12["sticky"], s12["y_top"])
    # x ± y with one adder: x - y = x + ~y + 1.
    y_wide = Cat(y_ext, Const(0, 1))                 # 28 bits, so that ~ is mod 2**28
    y_op = Mux(s1["add"], y_wide, ~y_wide)
    total = wire(m, f"{name}_sum", (x_ext + y_op + ~s1["add"])[0:28])
    s2 = {"total": total, "sx": s1["sx"], "ex": s1["ex"],
          "kind": s1["kind"], "special_sign": s1["special_sign"]}
    s2 = boundary(s2, 2)

    # --- stage 3: normalise. A carry shifts right by one (keeping the sticky bit); a
    # cancellation shifts left. A left shift of more than one happens only when dist <= 1,
    # and then no bit was lost into the sticky position, so the shift is exact.
    total = s2["total"]
    lz = leading_zeros(m, total[0:27], 27, f"{name}_lz")
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
    rounded = wire(m, f"{name}_rounded", (norm[3:27] + (guard & (rnd | sticky | lsb)))[0:25])
    carry = rounded[24]
    frac_r = Mux(carry, rounded[1:24], rounded[0:23])
    exp_r = (exp + carry)[0:8]
    # exp + carry < 1 and exp + carry > 254, without waiting for the sum.
    under = (exp < 0) | ((exp == 0) & ~carry)
    over = (exp > 254) | ((exp == 254) & carry)

    result = Signal(32, name=name)
    with m.Switch(s3["kind"]):
        with m.Case(KIND_NAN):
            m.d.comb += result.eq(F32_CANONICAL_NAN)
        with m.Case(KIND_INF):
            m.d.comb += result.eq(f32_inf(s3["special_sign"]))
        with m.Case(KIND_ZERO):
            m.d.comb += result.eq(f32_zero(s3["special_sign"]))
        with m.Default():
            with m.If(s3["cancel"]):
                m.d.comb += result.eq(0)                            # x + (-x) = +0
            with m.Elif(under):
                m.d.comb += result.eq(f32_zero(sx))
            with m.Elif(over):
                m.d.comb += result.eq(f32_inf(sx))
            with m.Else():
                m.d.comb += result.eq(Cat(frac_r, exp_r, sx))
    return result


def f32_add(m, a, b, name="add"):
    """Sum of two binary32 bit patterns, rounded to nearest even (a 32-bit Signal)."""
    return _f32_add_stages(m, a, b, name, lambda values, index: values)


def f32_add_pipelined(m, a, b, name="add", carry=None, deep=False):
    """:func:`f32_add` with a register after each of its first three stages (``deep``:
    also after the alignment and after the leading-zero count, five registers).

    The result (combinational out of the last stage) belongs to the operands of three
    (five) cycles earlier. ``carry`` maps names to values that travel alongside, delayed
    by the same registers; returns ``(result, carried)``.
    """
    carry = dict(carry or {})
    boundary = stage_registers(m, name, carry)

    result = _f32_add_stages(m, a, b, name, boundary, boundary if deep else None)
    return result, carry


def f32_add_staged(m, a, b, name, cut=None):
    """:func:`f32_add`, with the registers of ``f32_add_pipelined(deep=True)``
    when ``cut`` registers (five boundaries; the result is combinational after them)."""
    if cut is None or not cut.registers:
        return f32_add(m, a, b, name=name)
    result, cut.carry = f32_add_pipelined(m, a, b, name=name, carry=cut.carry, deep=True)
    cut.depth += 5
    return result
