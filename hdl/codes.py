"""Numeric codes shared by the RTL (``hdl``) and the golden model (``golden``).

This module imports nothing, so the golden model can use it without depending on
Amaranth. The RTL wraps these values in ``amaranth.lib.enum`` shapes where it needs them.
"""

from enum import IntEnum

__all__ = ["ErrorCode", "MaMode", "BlockId"]


class ErrorCode(IntEnum):
    """Value of the ERROR register, shared by every block (DESIGN.md)."""
    NONE = 0
    BAD_COMMAND = 1      # shape, length, opcode or field out of range
    MISALIGNED = 2       # an address or stride not a multiple of its element size
    TAT_MISS = 3         # an access that no valid TAT entry covers
    BAD_TAT = 4          # a valid entry whose base is not aligned to its region, or SIZE > 19
    AXI_READ_ERROR = 5   # SLVERR / DECERR on a read
    AXI_WRITE_ERROR = 6  # SLVERR / DECERR on a write


class MaMode(IntEnum):
    """MODE.MODE field of the matrix accelerator."""
    INT8 = 0
    BF16 = 1


class BlockId(IntEnum):
    """High half of the ID register: which block answers (low half: version)."""
    MA = 0x4D41  # "MA"
    VA = 0x5641  # "VA"
    MC = 0x4D43  # "MC"
    MUON = 0x4D55  # "MU"
