"""Numeric codes shared by the RTL (``hdl``) and the golden model (``golden``).

This module imports nothing, so the golden model can use it without depending on
Amaranth. The RTL wraps these values in ``amaranth.lib.enum`` shapes where it needs them.
"""

from enum import IntEnum

__all__ = ["ErrorCode", "MaMode", "MA_MODE_BF16", "MA_MODE_B_T", "BlockId", "VaOpcode", "McOp",
           "TrafficClass", "MuonPort", "MuonVc", "MUON_HOP_CYCLES", "MUON_INJECT_CYCLES"]


class ErrorCode(IntEnum):
    """Value of the ERROR register, shared by every block (docs/design.md)."""
    NONE = 0
    BAD_COMMAND = 1      # shape, length, opcode or field out of range
    MISALIGNED = 2       # an address or stride not a multiple of its element size
    TAT_MISS = 3         # an access that no valid TAT entry covers
    BAD_TAT = 4          # a valid entry whose base is not aligned to its region, or SIZE > 19
    AXI_READ_ERROR = 5   # SLVERR / DECERR on a read
    AXI_WRITE_ERROR = 6  # SLVERR / DECERR on a write


class MaMode(IntEnum):
    """MODE.MODE field of the matrix accelerator: bit 0 the operand type (int8 or bf16),
    bit 1 (:data:`MA_MODE_B_T`) B transposed, stored as N rows of K (C = A·Bᵀ)."""
    INT8 = 0
    BF16 = 1
    INT8_BT = 2        # int8, B stored as N rows of K: C = A x B^T
    BF16_BT = 3        # bf16, B stored as N rows of K: C = A x B^T


MA_MODE_BF16 = 1       # MaMode bit: bf16 operands (binary32 C); clear: int8 (int32 C)
MA_MODE_B_T = 2        # MaMode bit: B transposed (N rows of K elements at LDB)


class BlockId(IntEnum):
    """High half of the ID register: which block answers (low half: version)."""
    MA = 0x4D41  # "MA"
    VA = 0x5641  # "VA"
    MC = 0x4D43  # "MC"
    MUON = 0x4D55  # "MU"
    TILE = 0x5449  # "TI": the integrated tile's own registers
    MIGRATE = 0x434D  # "CM": the tile's cache-migrate engine
    SEQUENCER = 0x5351  # "SQ": the tile's command sequencer


class VaOpcode(IntEnum):
    """OPCODE.OP field of the vector accelerator: which command START runs."""
    GATHER = 1         # dst[i] = src[base + i*stride] (strided; any byte stride)
    SCATTER = 2        # dst[base + i*stride] = src[i]
    GATHER_IDX = 3     # dst[i] = src[base + idx[i]*stride], idx -1 skips
    SCATTER_IDX = 4    # dst[base + idx[i]*stride] = src[i], idx -1 skips
    GATHER_CSR = 5     # rows of a CSR mask: dst[j] = src[base + r*row_stride + col[j]*stride]
    QUANTIZE = 6       # absmax -> scale = absmax/127 -> int8, scale beside
    DEQUANTIZE = 7     # int32 * scale -> bf16
    ADD = 8
    MUL = 9
    SCALE = 10         # x * scalar
    SILU = 11
    EXP = 12
    RMSNORM = 13
    ROPE = 14
    SOFTMAX = 15
    SUM = 16           # binary32 sum
    MAX = 17           # bf16 max
    TOPK = 18          # k <= 8 largest: values and indices
    CLAMP = 19         # x clamped to [lo, hi] (SCALAR: lo bits 15:0, hi bits 31:16), exact
    SOFTPLUS = 20      # log(1 + e**x)
    SQRT = 21          # x · rsqrt(x)
    # For the layer program (golden/program.py); golden contracts in golden/va.py
    # (PROPOSED_CONTRACTS); the RTL runs all of them.
    RECIP = 22         # bf16 1/x (the reciprocal unit of SOFTMAX / SILU)
    CVT_F32 = 23       # binary32 (SRC, 4-byte aligned) -> bf16, nearest even
    MUL_MEM = 24       # x * s, s the bf16 at SRC2 (SCALE by a scalar from memory)
    ADD_MEM = 25       # x + s, s the bf16 at SRC2
    DEQUANTIZE_MEM = 26  # int32 * (binary32 at SRC2 * SCALAR) -> bf16
    TOPK_WIDE = 27     # TOPK with 1 <= K <= LENGTH (a pass of the row per 8 values)


class McOp(IntEnum):
    """Operation of a memory-controller client request."""
    READ = 0
    WRITE = 1


class TrafficClass(IntEnum):
    """Traffic class of a memory request or a Muon packet: the design notes' priority
    mapping (decode 7 > prefill 5 > cache-migrate 3); a larger value wins arbitration."""
    CACHE_MIGRATE = 3
    PREFILL = 5
    DECODE = 7


class MuonPort(IntEnum):
    """The five ports of a Muon router. North is row y - 1, south row y + 1, west
    column x - 1, east column x + 1."""
    LOCAL = 0
    NORTH = 1
    EAST = 2
    SOUTH = 3
    WEST = 4


class MuonVc(IntEnum):
    """Virtual channel of a Muon flit: best effort, or traffic of a granted reservation."""
    BEST_EFFORT = 0
    RESERVED = 1


# Muon timing contract (cycles), which the reservation arbiter plans with: a flit that
# crosses a router's switch in cycle t crosses the next router's switch in cycle t + 2;
# a flit accepted on an injection port in cycle t crosses its first switch in t + 1.
MUON_HOP_CYCLES = 2
MUON_INJECT_CYCLES = 1
