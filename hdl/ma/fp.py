"""The arithmetic of the MA's processing element: a bf16 product added to a binary32
partial sum (or, in int8 mode, an int8 product to an int32 one), built from the
floating-point library :mod:`hdl.common.fp` under its arithmetic contract.

:func:`pe_product` and :func:`pe_accumulate` together compute ``f32_add(base,
bf16_mul(a, b))`` of :mod:`hdl.common.fp` (which ``tests/test_ma_fp.py`` checks), in a
circuit shaped for the PE's accumulation loop.
"""

from amaranth.hdl import Cat, Const, Mux, Signal, signed
from amaranth.lib import data

from hdl.common.fp import (
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
    shift,
    shift_right_sticky,
    stage_registers,
    wire,
)

__all__ = ["PE_PRODUCT_STAGES", "PeProductLayout", "pe_product", "pe_accumulate"]


# --- The MA's processing element: a bf16 product added to a binary32 partial sum -----------
#
# The PE's adder adds a bf16 product (16 significant bits) to a binary32 partial sum, so it
# is written for that case rather than with :func:`hdl.common.fp.f32_add`'s general
# operands:
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
    a_zero, a_inf, a_nan = classes(ea, a[0:7])
    b_zero, b_inf, b_nan = classes(eb, b[0:7])
    esum = Signal(9, name=f"{name}_esum", reset_less=True)
    sign, zero, inf, nan = (Signal(name=f"{name}_{n}1", reset_less=True)
                            for n in ("sign", "zero", "inf", "nan"))
    m.d.sync += [mul.eq(x.as_signed() * y.as_signed()), esum.eq(ea + eb),
                 sign.eq(a[15] ^ b[15]), zero.eq(a_zero | b_zero), inf.eq(a_inf | b_inf),
                 nan.eq(a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf))]

    # --- stage 2
    top = mul[15]                                   # the significand product is >= 2
    exp = wire(m, f"{name}_exp", esum + top - 127)
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


def pe_accumulate(m, base, p, int8, name="acc", carry=None):
    """The PE's adder in :data:`hdl.common.fp.F32_ADD_STAGES` stages: ``base ⊕ p``, binary32 ``base`` plus
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
    boundary = stage_registers(m, name, carry, reset_less=True)

    # int8 mode: the wrapping 32-bit sum, formed here and taken out through the rounding
    # adder of the last stage (with nothing added).
    carry["int8"] = (base + p.sig.as_signed())[0:32]

    # --- stage 1: classify, order by magnitude, exponent difference
    sa, ea, fa = f32_fields(base)
    a_zero, a_max = ea == 0, ea == 0xFF
    a_inf, a_nan = a_max & (fa == 0), a_max & (fa != 0)
    kind = Signal(2, name=f"{name}_kind")
    special_sign = Signal(name=f"{name}_ssign")
    with m.If(a_nan | p.nan | (a_inf & p.inf & (sa != p.sign))):
        m.d.comb += kind.eq(KIND_NAN)
    with m.Elif(a_inf):
        m.d.comb += [kind.eq(KIND_INF), special_sign.eq(sa)]
    with m.Elif(p.inf):
        m.d.comb += [kind.eq(KIND_INF), special_sign.eq(p.sign)]
    with m.Elif(a_zero & p.zero):
        m.d.comb += [kind.eq(KIND_ZERO), special_sign.eq(sa & p.sign)]  # -0 only from -0 + -0
    with m.Else():
        m.d.comb += kind.eq(KIND_SUM)
    # x is the operand of larger magnitude, y the other; a zero operand is the smaller one
    # and its significand becomes 0, so that x + 0 = x. The product's 8 low fraction bits
    # are zero, so it is larger exactly when its top 23 bits are.
    swap = wire(m, f"{name}_swap",
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
    y_top, sticky = shift_right_sticky(m, Cat(Const(0, 2), s1["my"]), dist, f"{name}_align")
    y_wide = Cat(sticky, y_top, Const(0, 1))          # 28 bits, so that ~ is mod 2**28
    s2 = boundary({"y": Mux(s1["add"], y_wide, ~y_wide), "mx": s1["mx"], "add": s1["add"],
                   "sx": s1["sx"], "ex": s1["ex"], "kind": s1["kind"],
                   "special_sign": s1["special_sign"]}, 2)

    # --- stage 3: x ± y with one adder (x - y = x + ~y + 1); leading zeros below bit 25
    total = wire(m, f"{name}_sum", (Cat(Const(0, 3), s2["mx"]) + s2["y"] + ~s2["add"])[0:28])
    lz = leading_zeros(m, total[2:25], 23, f"{name}_lz")
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
    rounded = wire(m, f"{name}_rounded", (operand + increment)[0:31])
    # A rounding carry into the exponent leaves a zero fraction, so exponent 255 from it is
    # already the infinity; only a carry from exponent 254 is caught here.
    over = t[27] & s3["ex_max"]
    under = ~t[27] & ~t[26] & s3["ex_min"]
    # Shifting path (three or more leading zeros of 28): exact, only shifted.
    far = t[25:28] != 0
    frac = Cat(0, shift(m, t[2:25], lz, 23, f"{name}_nshift", left=True)[0:22])
    exp = wire(m, f"{name}_exp", (s3["ex_m2"] - lz)[0:8])
    under_shifted = s3["ex_lt2"] | s3["ex_lt26"] & (lz >= s3["ex_m2"][0:5])
    cancel = ~far & (lz == 23)

    result = Signal(32, name=name)
    with m.If(int8):
        m.d.comb += result.eq(Cat(rounded, s8[31]))
    with m.Elif(s3["kind"] == KIND_NAN):
        m.d.comb += result.eq(F32_CANONICAL_NAN)
    with m.Elif(s3["kind"] == KIND_INF):
        m.d.comb += result.eq(f32_inf(s3["special_sign"]))
    with m.Elif(s3["kind"] == KIND_ZERO):
        m.d.comb += result.eq(f32_zero(s3["special_sign"]))
    with m.Else():
        with m.If(cancel):
            m.d.comb += result.eq(0)                            # x + (-x) = +0
        with m.Elif(Mux(far, under, under_shifted)):
            m.d.comb += result.eq(f32_zero(sx))
        with m.Elif(far & over):
            m.d.comb += result.eq(f32_inf(sx))
        with m.Elif(far):
            m.d.comb += result.eq(Cat(rounded, sx))
        with m.Else():
            m.d.comb += result.eq(Cat(frac, exp, sx))
    return result, carry
