"""The vector accelerator's numeric constants and function-unit tables.

The RTL (``hdl/va``) builds its lookup ROMs from these tables and the golden model
(``golden/va.py``) computes with the same integers, so both follow one definition.
Pure integer arithmetic and the standard library only.
"""

import math
from decimal import ROUND_HALF_UP, Decimal, localcontext

from .memory import ADDRESS_LIMIT

__all__ = [
    "LOG2E_Q", "LN2_Q", "RECIP_127", "F32_ONE", "F32_2M64", "F32_NAN", "BF16_NAN",
    "MAX_LENGTH", "MAX_K", "ADDRESS_LIMIT", "FIX", "SUM_FRAC", "SUM_INTERLEAVE",
    "exp2_table", "recip_table", "rsqrt_table", "ln_table",
]

LOG2E_Q = 1549082005        # round(log2(e) · 2**30)
LN2_Q = 744261118           # round(ln(2) · 2**30)
RECIP_127 = 0x3C010204      # binary32 nearest 1/127
F32_ONE = 0x3F800000
F32_2M64 = 0x1F800000       # 2**-64
F32_NAN = 0x7FC00000
BF16_NAN = 0x7FC0
MAX_LENGTH = 65536
MAX_K = 8
FIX = 30                    # fraction bits of the function units' fixed point
SUM_FRAC = 40               # fraction bits of the exact softmax / RMSNorm sums
SUM_INTERLEAVE = 8          # SUM: partial sums per lane (a power of 2, >= the RTL's loop)

# ---------------------------------------------------------------------------------------
# Tables, by exact integer arithmetic (no libm: every platform gets the same bits).

def _round_half_up(twice):
    return (twice + 1) >> 1


def exp2_table():
    """``T[i] = round(2**(i/256) · 2**30)``, i = 0..255 (exact: the largest y with
    ``y**256 <= 2**(31·256 + i)`` is ``floor(2·2**(30 + i/256))``)."""
    table = []
    for i in range(256):
        target = 1 << (31 * 256 + i)
        lo, hi = 1 << 31, 1 << 32
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if mid ** 256 <= target:
                lo = mid
            else:
                hi = mid
        table.append(_round_half_up(lo))
    return table


def recip_table():
    """``R[i] = round(2**30 / (1 + (i + 0.5)/256))``, i = 0..255."""
    return [_round_half_up((1 << 40) // (513 + 2 * i)) for i in range(256)]


def rsqrt_table():
    """``S[odd][j] = round(2**30 / sqrt((1 + (j + 0.5)/128) · (1 + odd)))``, j = 0..127."""
    return [[_round_half_up(math.isqrt((1 << 70) // ((257 + 2 * j) * (1 + odd))))
             for j in range(128)] for odd in (0, 1)]


def ln_table():
    """``LN[i] = round(ln(2**30 / R[i]) · 2**30)`` for ``R = recip_table()``, i = 0..255.

    Computed with :mod:`decimal` at 60 digits (its ``ln`` is correctly rounded, so every
    platform gets the same integers; no value is within 2**-100 of a rounding tie)."""
    with localcontext() as ctx:
        ctx.prec = 60
        one = Decimal(1 << FIX)
        return [int((-(Decimal(r) / one).ln() * one).to_integral_value(ROUND_HALF_UP))
                for r in recip_table()]
