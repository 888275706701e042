"""The vector accelerator's numeric constants and function-unit tables.

The RTL (``hdl/va``) builds its lookup ROMs from these tables and the golden model
(``golden/va.py``) computes with the same integers, so both follow one definition.
:data:`VA_COMMANDS` says what each command needs (operand ranges, checks at START, the
unit that runs it); the RTL generates its checks, byte counts and opcode sets from it.
Pure integer arithmetic and the standard library only.
"""

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext
from enum import Enum

from .codes import VaOpcode
from .memory import ADDRESS_LIMIT

__all__ = [
    "LOG2E_Q", "LN2_Q", "RECIP_127", "F32_ONE", "F32_2M64", "F32_NAN", "BF16_NAN",
    "MAX_LENGTH", "MAX_K", "ADDRESS_LIMIT", "FIX", "SUM_FRAC", "SUM_INTERLEAVE",
    "exp2_table", "recip_table", "rsqrt_table", "ln_table",
    "VaUnit", "Count", "Operand", "VaCommandSpec", "VA_COMMANDS",
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


# ---------------------------------------------------------------------------------------
# What each command needs. The RTL generates from this one table its checks at START,
# its byte counts and the opcode sets of its units (hdl/va/opcodes.py); the golden model
# keeps its own reading of the contract (golden/va.py), and tests/test_va_opcodes.py
# checks the two against each other.

class VaUnit(Enum):
    """The path of :class:`hdl.va.core.VectorCore` that runs a command."""
    LANES = "lanes"         # LaneEngine: elementwise with a second operand, SUM
    ROWS = "rows"           # RowUnit: the element pipeline, reductions, passes
    EXT = "ext"             # ExtUnit: CLAMP, SOFTPLUS, SQRT
    GATHER = "gather"       # StridedGather
    SCATTER = "scatter"     # StridedScatter
    INDEXED = "indexed"     # IndexedMover


class Count(Enum):
    """How many items of an :class:`Operand` a command touches."""
    LENGTH = "LENGTH"
    K = "K"
    ROWS_1 = "ROWS + 1"     # the CSR row pointers
    ONE = "1"
    STRIDED = "strided"     # (LENGTH - 1) · STRIDE + the element size bytes, in all


@dataclass(frozen=True)
class Operand:
    """A range of memory a command reads or writes: from the address in register ``reg``
    (``"src"``, ``"src2"``, ``"src3"``, ``"dst"``, ``"dst2"``), ``count`` items of
    ``size`` bytes (None: the element size, ``1 << ESIZE``), aligned to ``align`` bytes
    (None: the element size). Sizes and alignments are 1, 2 or 4."""
    reg: str
    count: Count
    size: int | None = 2
    align: int | None = 2

    def nbytes(self, cmd):
        """Bytes of the range for ``cmd`` (any object with ``length``, ``k``, ``rows``,
        ``stride`` and ``esize``)."""
        es = 1 << cmd.esize
        if self.count is Count.STRIDED:
            return (cmd.length - 1) * cmd.stride + es
        items = {Count.LENGTH: cmd.length, Count.K: cmd.k, Count.ROWS_1: cmd.rows + 1,
                 Count.ONE: 1}[self.count]
        return items * (es if self.size is None else self.size)

    def alignment(self, cmd):
        """The range's alignment in bytes for ``cmd``."""
        return 1 << cmd.esize if self.align is None else self.align


@dataclass(frozen=True)
class VaCommandSpec:
    """What one command needs (the checks at START in the order ERROR reports them):

    1. BAD_COMMAND for LENGTH outside 1..MAX_LENGTH, and for ``elements``: ESIZE 3;
       ``k_max``: K outside 1..min(``k_max``, LENGTH); ``even``: an odd LENGTH;
       ``clamp``: a CLAMP bound in SCALAR that is NaN, or lo > hi;
    2. BAD_COMMAND (ERR_ADDR the address) for the first of ``operands`` whose range
       reaches :data:`ADDRESS_LIMIT`;
    3. MISALIGNED (ERR_ADDR the address) for the first of ``operands`` not aligned;
    4. MISALIGNED (ERR_ADDR the register's value) for the first register of ``aligned``
       that is not a multiple of the element size.

    ``unit`` runs it; ``operands`` are also what it reads (``src*``) and writes
    (``dst*``): the first result at DST, a second one at DST2.
    """
    unit: VaUnit
    operands: tuple[Operand, ...]
    elements: bool = False
    aligned: tuple[str, ...] = ()
    k_max: int | None = None
    even: bool = False
    clamp: bool = False

    def operand(self, reg):
        """The operand at register ``reg``, or None."""
        return next((o for o in self.operands if o.reg == reg), None)


def _spec(unit, *operands, **checks):
    return VaCommandSpec(unit, tuple(Operand(*o) for o in operands), **checks)


_L = Count.LENGTH
_X = ("src", _L)                        # a bf16 vector: LENGTH · 2 bytes, 2-aligned
_Y = ("src2", _L)
_D = ("dst", _L)
_MOVE = {"elements": True}

VA_COMMANDS = {
    VaOpcode.GATHER: _spec(VaUnit.GATHER, ("src", Count.STRIDED, None, None),
                           ("dst", _L, None, None), aligned=("stride",), **_MOVE),
    VaOpcode.SCATTER: _spec(VaUnit.SCATTER, ("src", _L, None, None),
                            ("dst", Count.STRIDED, None, None), aligned=("stride",), **_MOVE),
    VaOpcode.GATHER_IDX: _spec(VaUnit.INDEXED, ("src2", _L, 4, 4), ("dst", _L, None, None),
                               aligned=("stride", "src"), **_MOVE),
    VaOpcode.SCATTER_IDX: _spec(VaUnit.INDEXED, ("src2", _L, 4, 4), ("src", _L, None, None),
                                aligned=("stride", "dst"), **_MOVE),
    VaOpcode.GATHER_CSR: _spec(VaUnit.INDEXED, ("src2", Count.ROWS_1, 4, 4),
                               ("src3", _L, 4, 4), ("dst", _L, None, None),
                               aligned=("stride", "src", "row_stride"), **_MOVE),
    VaOpcode.QUANTIZE: _spec(VaUnit.ROWS, _X, ("dst", _L, 1, 1), ("dst2", Count.ONE, 4, 4)),
    VaOpcode.DEQUANTIZE: _spec(VaUnit.ROWS, ("src", _L, 4, 4), _D),
    VaOpcode.ADD: _spec(VaUnit.LANES, _X, _Y, _D),
    VaOpcode.MUL: _spec(VaUnit.LANES, _X, _Y, _D),
    VaOpcode.SCALE: _spec(VaUnit.LANES, _X, _D),
    VaOpcode.SILU: _spec(VaUnit.ROWS, _X, _D),
    VaOpcode.EXP: _spec(VaUnit.ROWS, _X, _D),
    VaOpcode.RMSNORM: _spec(VaUnit.ROWS, _X, _Y, _D),
    # cos and sin: LENGTH/2 bf16 each
    VaOpcode.ROPE: _spec(VaUnit.ROWS, _X, ("src2", _L, 1, 2), ("src3", _L, 1, 2), _D,
                         even=True),
    VaOpcode.SOFTMAX: _spec(VaUnit.ROWS, _X, _D),
    VaOpcode.SUM: _spec(VaUnit.LANES, _X, ("dst", Count.ONE, 4, 4)),
    VaOpcode.MAX: _spec(VaUnit.ROWS, _X, ("dst", Count.ONE, 2, 2)),
    VaOpcode.TOPK: _spec(VaUnit.ROWS, _X, ("dst", Count.K, 2, 2), ("dst2", Count.K, 4, 4),
                         k_max=MAX_K),
    VaOpcode.CLAMP: _spec(VaUnit.EXT, _X, _D, clamp=True),
    VaOpcode.SOFTPLUS: _spec(VaUnit.EXT, _X, _D),
    VaOpcode.SQRT: _spec(VaUnit.EXT, _X, _D),
    VaOpcode.RECIP: _spec(VaUnit.ROWS, _X, _D),
    VaOpcode.CVT_F32: _spec(VaUnit.ROWS, ("src", _L, 4, 4), _D),
    VaOpcode.MUL_MEM: _spec(VaUnit.LANES, _X, ("src2", Count.ONE, 2, 2), _D),
    VaOpcode.ADD_MEM: _spec(VaUnit.LANES, _X, ("src2", Count.ONE, 2, 2), _D),
    VaOpcode.DEQUANTIZE_MEM: _spec(VaUnit.ROWS, ("src", _L, 4, 4), ("src2", Count.ONE, 4, 4),
                                   _D),
    VaOpcode.TOPK_WIDE: _spec(VaUnit.ROWS, _X, ("dst", Count.K, 2, 2),
                              ("dst2", Count.K, 4, 4), k_max=MAX_LENGTH),
}
"""Every command the VA runs (an opcode not here is refused with BAD_COMMAND), in opcode
order, with what it needs (:class:`VaCommandSpec`)."""
