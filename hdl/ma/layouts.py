"""Shapes, limits and layouts shared by the MA's sub-components."""

from amaranth.hdl import Mux
from amaranth.lib import data
from amaranth.utils import exact_log2

from hdl.common.codes import MaMode, decode
from hdl.common.fp import F32_ADD_STAGES

__all__ = ["MAX_DIM", "INTERLEAVE", "ROW_BYTES", "DEST_A", "DEST_B", "DEST_C", "MaCommandLayout",
           "RowTag", "StepRequestLayout", "check_parameters", "element_shift", "tile_counts",
           "group_count", "mode_flags", "b_rows", "clamp"]

MAX_DIM = 128                    # the largest M, K, N
# Output tiles that go through the array together, their k-steps interleaved: the PE's
# accumulation loop (the binary32 adder) is this many registers long, and each tile's
# partial sum comes round once every INTERLEAVE cycles.
INTERLEAVE = F32_ADD_STAGES
ROW_BYTES = 2 * MAX_DIM          # the longest A or B row: 128 bf16 elements
VALID_P = (2, 4, 8, 16, 32)
VALID_DATA_WIDTH = (64, 128, 256, 512)

DEST_A, DEST_B, DEST_C = 0, 1, 2   # which buffer a row read fills


def check_parameters(p, data_width):
    """Raise ValueError unless (P, DATA_WIDTH) is a configuration the MA supports."""
    if not isinstance(p, int) or p not in VALID_P:
        raise ValueError(f"P must be a power of two in 2..32 (2, 4, 8, 16 or 32), not {p!r}")
    if not isinstance(data_width, int) or data_width not in VALID_DATA_WIDTH:
        raise ValueError(f"DATA_WIDTH must be 64, 128, 256 or 512, not {data_width!r}")


class MaCommandLayout(data.StructLayout):
    """The command registers of the MA, as the core sees them (bytes and elements)."""
    def __init__(self):
        super().__init__({
            "mode": MaMode, "accumulate": 1,
            "a_addr": 32, "b_addr": 32, "c_addr": 32,
            "lda": 32, "ldb": 32, "ldc": 32,
            "m": 16, "k": 16, "n": 16,
        })


class RowTag(data.StructLayout):
    """What the row reader hands back with a row's data: where the row goes (``slot``:
    an old-C tile's place in its group of interleaved tiles)."""
    def __init__(self):
        super().__init__({"dest": 2, "row": 7, "half": 1, "slot": range(INTERLEAVE), "group_last": 1})


class StepRequestLayout(data.StructLayout):
    """One k-step of a tile, as the issuer asks the operand buffers for it."""
    def __init__(self, p):
        super().__init__({"valid": 1, "first": 1, "last": 1, "k": range(MAX_DIM),
                          "jt": range(MAX_DIM // p + 1), "slot": range(INTERLEAVE), "half": 1})


def mode_flags(m, cmd, name):
    """``(bf16, b_t)``, ``cmd.mode`` (a :class:`~hdl.common.codes.MaMode`) decoded by one
    ``m.Switch`` into Signals ``<name>_bf16`` and ``<name>_b_t``: bf16 operands (binary32
    C; else int8, int32 C), and B transposed, stored as N rows of K elements (C = A·Bᵀ)."""
    flags = decode(m, cmd.mode, {"bf16": (MaMode.BF16, MaMode.BF16_BT),
                                 "b_t": (MaMode.INT8_BT, MaMode.BF16_BT)}, name)
    return flags["bf16"], flags["b_t"]


def element_shift(bf16):
    """log2 of the A/B element size in bytes: 1 in bf16 mode, 0 in int8 mode."""
    return Mux(bf16, 1, 0)


def b_rows(cmd, b_t):
    """(rows, elements per row) of B as stored: K rows of N, or with B transposed
    (``b_t``) N rows of K."""
    return Mux(b_t, cmd.n, cmd.k), Mux(b_t, cmd.k, cmd.n)


def tile_counts(cmd, p):
    """Tiles along M and along N: ceil(M / P), ceil(N / P)."""
    log_p = exact_log2(p)
    return (cmd.m + p - 1) >> log_p, (cmd.n + p - 1) >> log_p


def group_count(n_tiles, interleave):
    """Groups of ``interleave`` tiles along N: ceil(n_tiles / interleave)."""
    log_r = exact_log2(interleave)
    return (n_tiles + interleave - 1) >> log_r


def clamp(value, limit):
    """min(value, limit)."""
    return Mux(value < limit, value, limit)
