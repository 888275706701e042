"""bf16 and binary32 bit patterns, and the bit-level circuits the units share.

The formats' fields and classes (zero, infinity, NaN) under the arithmetic contract
(:mod:`hdl.common.fp`: a zero exponent field reads as zero), the special results
(signed zero, signed infinity, canonical NaN), and the counting and shifting circuits of
normalisation and alignment. The class helpers build expressions, not Signals: each call
is the circuit at its place of use.
"""

from amaranth.hdl import Cat, Const, Mux, Signal

__all__ = ["F32_CANONICAL_NAN", "F32_INF", "F32_MINUS_ZERO", "KIND_SUM", "KIND_NAN",
           "KIND_INF", "KIND_ZERO", "f32_fields", "bf16_fields",
           "classes", "f32_is_nan", "bf16_is_nan", "bf16_flush", "f32_zero", "f32_inf",
           "wire", "leading_zeros", "trailing_zeros", "leading_one", "shift",
           "shift_right_sticky"]

F32_CANONICAL_NAN = 0x7FC00000
F32_INF = 0x7F800000
F32_MINUS_ZERO = 0x80000000

# The class of a result, decided from the operands' classes and carried beside the
# datapath to the final select (a 2-bit code): the datapath's number, or a special value
# (the canonical NaN, an infinity or a zero, of a sign carried with it).
KIND_SUM, KIND_NAN, KIND_INF, KIND_ZERO = range(4)


def f32_fields(x):
    """``(sign, exponent, fraction)`` of binary32 bits ``x`` (1, 8 and 23 bits)."""
    return x[31], x[23:31], x[0:23]


def bf16_fields(x):
    """``(sign, exponent, fraction)`` of bf16 bits ``x`` (1, 8 and 7 bits)."""
    return x[15], x[7:15], x[0:7]


def classes(exp, frac):
    """``(zero, inf, nan)`` of a value with these exponent and fraction fields (either
    format): a zero exponent is a zero (subnormals read as zeros), an all-ones exponent
    an infinity or a NaN."""
    return exp == 0, (exp == 0xFF) & (frac == 0), (exp == 0xFF) & (frac != 0)


def f32_is_nan(x):
    """Whether binary32 bits ``x`` are a NaN."""
    return (x[23:31] == 0xFF) & (x[:23] != 0)


def bf16_is_nan(x):
    """Whether bf16 bits ``x`` are a NaN."""
    return (x[7:15] == 0xFF) & (x[:7] != 0)


def bf16_flush(x):
    """bf16 bits ``x`` with a subnormal replaced by the zero of its sign."""
    return Mux(x[7:15] == 0, Cat(Const(0, 15), x[15]), x)


def f32_zero(sign):
    """The binary32 zero of ``sign``."""
    return Cat(Const(0, 31), sign)


def f32_inf(sign):
    """The binary32 infinity of ``sign``."""
    return Cat(Const(0, 23), Const(0xFF, 8), sign)


def wire(m, name, value):
    """A named combinational Signal of ``value``'s shape (keeps the netlist readable)."""
    sig = Signal(value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


def leading_zeros(m, value, width, name):
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


def trailing_zeros(m, value, width, none, name):
    """Number of trailing zeros of ``value`` (``width`` bits); ``none`` if it is zero."""
    reverse = Cat(*(value[bit] for bit in reversed(range(width))))
    count = leading_zeros(m, reverse, width, f"{name}_rev")
    result = Signal(range(max(width, none) + 1), name=name)
    m.d.comb += result.eq(Mux(count == width, none, count))
    return result


def leading_one(m, value, width, name):
    """Index of the highest set bit of ``value`` (0 if none).

    A priority chain, where :func:`leading_zeros` is a tree: the VA's function units
    (whose timing was closed with this circuit) use it, the adders the tree.
    """
    index = Signal(range(width), name=name)
    for bit in range(width):          # the highest set bit is assigned last: wins
        with m.If(value[bit]):
            m.d.comb += index.eq(bit)
    return index


def shift(m, value, amount, width, name, left):
    """``value`` shifted by ``amount`` (zeros in), ``width`` bits kept: one 2:1 multiplexer
    level per bit of ``amount``, the largest step first."""
    current = value
    for k in reversed(range(len(amount))):
        step = Signal(width, name=f"{name}_{k}")
        moved = (current << (1 << k)) if left else (current >> (1 << k))
        m.d.comb += step.eq(Mux(amount[k], moved[0:width], current[0:width]))
        current = step
    return current


def shift_right_sticky(m, value, amount, name):
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
