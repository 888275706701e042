"""Combinational bf16 × bf16 → binary32 multiplier and binary32 adder of the MA.

Both follow the MA arithmetic contract (DESIGN.md, "bf16 mode"):

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
"""

from amaranth.hdl import Cat, Const, Mux, Signal

__all__ = ["F32_CANONICAL_NAN", "bf16_mul", "f32_add", "int8_mac"]

F32_CANONICAL_NAN = 0x7FC00000
_F32_INF = 0x7F800000


def _leading_zeros(m, value, width, name):
    """Number of leading zeros of ``value`` (``width`` bits); ``width`` if it is zero."""
    count = Signal(range(width + 1), name=name)
    m.d.comb += count.eq(width)
    for bit in range(width):  # the highest set bit is assigned last, so it wins
        with m.If(value[bit]):
            m.d.comb += count.eq(width - 1 - bit)
    return count


def bf16_mul(m, a, b, name="mul"):
    """Product of two bf16 bit patterns as a binary32 bit pattern (a 32-bit Signal)."""
    sa, ea, fa = a[15], a[7:15], a[0:7]
    sb, eb, fb = b[15], b[7:15], b[0:7]
    sign = sa ^ sb
    a_zero, b_zero = ea == 0, eb == 0
    a_inf, b_inf = (ea == 0xFF) & (fa == 0), (eb == 0xFF) & (fb == 0)
    a_nan, b_nan = (ea == 0xFF) & (fa != 0), (eb == 0xFF) & (fb != 0)

    prod = Signal(16, name=f"{name}_prod")          # 1.7 × 1.7 → 2.14 fixed point
    m.d.comb += prod.eq(Cat(fa, 1) * Cat(fb, 1))
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


def f32_add(m, a, b, name="add"):
    """Sum of two binary32 bit patterns, rounded to nearest even (a 32-bit Signal)."""
    sa, ea, fa = a[31], a[23:31], a[0:23]
    sb, eb, fb = b[31], b[23:31], b[0:23]
    a_zero, b_zero = ea == 0, eb == 0
    a_inf, b_inf = (ea == 0xFF) & (fa == 0), (eb == 0xFF) & (fb == 0)
    a_nan, b_nan = (ea == 0xFF) & (fa != 0), (eb == 0xFF) & (fb != 0)

    # x is the operand of larger magnitude, y the other.
    swap = Signal(name=f"{name}_swap")
    m.d.comb += swap.eq(b[0:31] > a[0:31])
    sx, ex = Mux(swap, sb, sa), Mux(swap, eb, ea)
    mx, my = Mux(swap, Cat(fb, 1), Cat(fa, 1)), Mux(swap, Cat(fa, 1), Cat(fb, 1))
    diff = Signal(8, name=f"{name}_diff")
    m.d.comb += diff.eq(ex - Mux(swap, ea, eb))
    # Past a distance of 31 every bit of y is below the sticky position anyway.
    dist = Mux(diff > 31, 31, diff[0:5])

    # Significands with three extension bits (guard, round, sticky): 27 bits.
    x_ext = Cat(Const(0, 3), mx)
    y_wide = Signal(51, name=f"{name}_ywide")       # my·2**27 >> dist
    m.d.comb += y_wide.eq(Cat(Const(0, 27), my) >> dist)
    y_ext = Cat(y_wide[24] | (y_wide[0:24] != 0), y_wide[25:51])

    total = Signal(28, name=f"{name}_sum")
    m.d.comb += total.eq(Mux(sa == sb, x_ext + y_ext, x_ext - y_ext))

    # Normalise: a carry shifts right by one (keeping the sticky bit); a cancellation
    # shifts left. A left shift of more than one happens only when dist <= 1, and then
    # no bit was lost into the sticky position, so the shift is exact.
    lz = _leading_zeros(m, total[0:27], 27, f"{name}_lz")
    norm = Signal(27, name=f"{name}_norm")
    exp = Signal(range(-64, 512), name=f"{name}_exp")
    with m.If(total[27]):
        m.d.comb += [norm.eq(Cat(total[0] | total[1], total[2:28])), exp.eq(ex + 1)]
    with m.Else():
        m.d.comb += [norm.eq(total[0:27] << lz), exp.eq(ex - lz)]

    guard, rnd, sticky, lsb = norm[2], norm[1], norm[0], norm[3]
    rounded = Signal(25, name=f"{name}_rounded")
    m.d.comb += rounded.eq(norm[3:27] + (guard & (rnd | sticky | lsb)))
    exp_r = Signal(range(-64, 512), name=f"{name}_expr")
    frac_r = Mux(rounded[24], rounded[1:24], rounded[0:23])
    m.d.comb += exp_r.eq(exp + rounded[24])

    result = Signal(32, name=name)
    with m.If(a_nan | b_nan | (a_inf & b_inf & (sa != sb))):
        m.d.comb += result.eq(F32_CANONICAL_NAN)
    with m.Elif(a_inf):
        m.d.comb += result.eq(a)
    with m.Elif(b_inf):
        m.d.comb += result.eq(b)
    with m.Elif(a_zero & b_zero):
        m.d.comb += result.eq(Cat(Const(0, 31), sa & sb))   # -0 only from -0 + -0
    with m.Elif(a_zero):
        m.d.comb += result.eq(b)
    with m.Elif(b_zero):
        m.d.comb += result.eq(a)
    with m.Elif(total == 0):
        m.d.comb += result.eq(0)                            # x + (-x) = +0
    with m.Elif(exp_r < 1):
        m.d.comb += result.eq(Cat(Const(0, 31), sx))
    with m.Elif(exp_r > 254):
        m.d.comb += result.eq(Cat(Const(0, 23), Const(0xFF, 8), sx))
    with m.Else():
        m.d.comb += result.eq(Cat(frac_r, exp_r[0:8], sx))
    return result


def int8_mac(acc, a, b):
    """``acc + a·b`` for int8 ``a``, ``b`` (low bytes of the operands), wrapping to 32 bits."""
    return (acc + a[0:8].as_signed() * b[0:8].as_signed())[0:32]
