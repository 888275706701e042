"""Bit-exact golden model of the matrix accelerator (MA): GEMM arithmetic, TAT, layout.

This module *is* the arithmetic contract of docs/design.md's "Matrix accelerator (MA)"; the RTL
matches it bit for bit. It models results, not cycles.

- :func:`gemm_int8`: C = A·B (or C + A·B) with int8 operands and int32 results wrapping
  mod 2**32.
- :func:`gemm_bf16`: bf16 operands, binary32 products and sums, accumulated sequentially
  in increasing k with the MA's flush-to-zero and canonical-NaN rules (see
  :mod:`golden.fp`).
- :func:`gemm`: either, chosen by :class:`spec.codes.MaMode`; with B transposed
  (``MaMode.INT8_BT`` / ``BF16_BT``, or ``b_transposed=True``) B is given as N×K, as the
  MA reads it then, and C = A·Bᵀ.
- TAT (tile address translation): :class:`TatEntry`, :func:`tat_check`,
  :func:`tat_translate`, :func:`tat_covers`.
- Memory layout of A, B and C (row-major, row stride in bytes, little-endian elements):
  :func:`pack_matrix`, :func:`unpack_matrix`, :func:`matrix_span`.

Shapes are not limited to the hardware's 1..128 here: the model computes any M×K×N with
K >= 1. Range checks on the command fields belong to the RTL's BAD_COMMAND check.
"""

from dataclasses import dataclass

import numpy as np

from spec.codes import MA_MODE_B_T, MA_MODE_BF16, ErrorCode, MaMode
from spec.memory import TAT_MAX_SIZE

from .fp import bf16_mul, f32_add

__all__ = [
    "gemm_int8", "gemm_bf16", "gemm",
    "TAT_ENTRIES", "TAT_MAX_SIZE", "TatEntry", "tat_check", "tat_translate",
    "tat_first_uncovered", "tat_covers",
    "matrix_span", "pack_matrix", "unpack_matrix",
]


def _check_operands(a, b, c, ab_dtype, c_dtype, what):
    """Shape- and dtype-check A (M×K), B (K×N) and optional C (M×N); return arrays."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"A and B must be 2-D, got shapes {a.shape} and {b.shape}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"A is {a.shape[0]}x{a.shape[1]} but B is {b.shape[0]}x{b.shape[1]}: "
                         "A's columns must equal B's rows (K)")
    for name, arr in (("A", a), ("B", b)):
        if arr.dtype != ab_dtype:
            raise TypeError(f"{what}: {name} must have dtype {np.dtype(ab_dtype)}, not {arr.dtype}")
    if a.shape[1] == 0:
        # The MA's K is 1..128; with no product the accumulator would never apply its
        # rules to the old C, so a zero-length reduction is left undefined.
        raise ValueError("K must be at least 1")
    shape = (a.shape[0], b.shape[1])
    if c is not None:
        c = np.asarray(c)
        if c.shape != shape:
            raise ValueError(f"C must be {shape[0]}x{shape[1]} (M×N), got shape {c.shape}")
        if c.dtype != c_dtype:
            raise TypeError(f"{what}: C must have dtype {np.dtype(c_dtype)}, not {c.dtype}")
    return a, b, c


def gemm_int8(a, b, c=None):
    """int8 GEMM: A·B, or C + A·B, exact and wrapping mod 2**32.

    ``a``: ``int8`` array M×K; ``b``: ``int8`` array K×N; ``c``: ``int32`` array M×N (the
    old C, for ACCUMULATE) or ``None`` (plain A·B). Returns a new ``int32`` array M×N.

    Accumulates in 32-bit two's complement, one k at a time, as the array does; since
    arithmetic mod 2**32 is associative, that equals the exact sum reduced mod 2**32.
    """
    a, b, c = _check_operands(a, b, c, np.int8, np.int32, "int8 GEMM")
    # uint32 so that the wrap-around is defined behaviour, not an overflow.
    acc = np.zeros((a.shape[0], b.shape[1]), np.uint32) if c is None else c.view(np.uint32).copy()
    a32 = a.astype(np.int32).view(np.uint32)
    b32 = b.astype(np.int32).view(np.uint32)
    for k in range(a.shape[1]):
        acc += a32[:, k, None] * b32[None, k, :]
    return acc.view(np.int32)


def gemm_bf16(a_bits, b_bits, c_bits=None):
    """bf16 GEMM with binary32 accumulation, under the MA's rounding rules.

    ``a_bits``: ``uint16`` bf16 bit patterns, M×K; ``b_bits``: ``uint16``, K×N;
    ``c_bits``: ``uint32`` binary32 bit patterns M×N (the old C, for ACCUMULATE) or
    ``None``. Returns a new ``uint32`` array M×N of binary32 bit patterns.

    For every (i, j): start from +0.0 (or the old C, a subnormal one read as a signed
    zero), then for k = 0, 1, ..., K-1 in that order add the product a[i,k]·b[k,j]
    rounded to binary32 (:func:`golden.fp.bf16_mul`), rounding the sum to binary32
    (:func:`golden.fp.f32_add`). Every product and every partial sum that is subnormal
    becomes a zero of the same sign; every NaN is ``0x7FC00000``.
    """
    a, b, c = _check_operands(a_bits, b_bits, c_bits, np.uint16, np.uint32, "bf16 GEMM")
    # The old C goes in raw: f32_add reads a subnormal one as a signed zero, exactly the
    # input rule the contract gives for it.
    acc = np.zeros((a.shape[0], b.shape[1]), np.uint32) if c is None else c.copy()  # 0 = +0.0
    for k in range(a.shape[1]):
        acc = f32_add(acc, bf16_mul(a[:, k, None], b[None, k, :]))
    return acc


def gemm(mode, a, b, c=None, *, b_transposed=False):
    """GEMM in the given MODE: ``MaMode.INT8`` -> :func:`gemm_int8`, ``MaMode.BF16`` ->
    :func:`gemm_bf16` (same arguments and results as those).

    With B transposed (MODE bit 1, ``MaMode.INT8_BT`` / ``MaMode.BF16_BT``, or
    ``b_transposed``) ``b`` is N×K, B as stored (row j holds column j of the product's
    B), and the result is A·bᵀ (or C + A·bᵀ): the same sums, in the same order, as
    ``gemm`` of the non-transposed mode on ``b.T``."""
    mode = MaMode(mode)
    if b_transposed or mode & MA_MODE_B_T:
        b = np.asarray(b).T
    if mode & MA_MODE_BF16:
        return gemm_bf16(a, b, c)
    return gemm_int8(a, b, c)


TAT_ENTRIES = 4
"""Number of TAT entries in the MA."""

"""Largest valid SIZE field: a region of 4 KiB << 19 = 2 GiB."""

_LOGICAL_BITS = 32
_PHYS_BITS = 48


@dataclass(frozen=True)
class TatEntry:
    """One TAT entry, as the registers TAT_LOGIC_i / TAT_PHYS_LO_i / TAT_PHYS_HI_i hold it.

    - ``valid``: the entry takes part in translation.
    - ``logical_base``: logical byte address of the region's first byte, 0..2**32-1.
    - ``size``: SIZE field, 0..31 (only 0..19 are legal for a valid entry); the region is
      ``4096 << size`` bytes.
    - ``phys_base``: physical byte address the region maps to, 0..2**48-1.

    Field ranges are those of the registers; alignment and SIZE legality are what
    :func:`tat_check` judges.
    """

    valid: bool
    logical_base: int
    size: int
    phys_base: int

    def __post_init__(self):
        if not 0 <= self.logical_base < 1 << _LOGICAL_BITS:
            raise ValueError(f"logical_base {self.logical_base:#x} is outside 0..2**32-1")
        if not 0 <= self.size < 32:
            raise ValueError(f"size {self.size} is outside the 5-bit SIZE field (0..31)")
        if not 0 <= self.phys_base < 1 << _PHYS_BITS:
            raise ValueError(f"phys_base {self.phys_base:#x} is outside 0..2**48-1")

    @property
    def region_bytes(self):
        """Size of the mapped region in bytes: ``4096 << size``."""
        return 4096 << self.size

    def covers(self, logical_addr):
        """Whether this entry is valid and its region holds byte ``logical_addr``."""
        return self.valid and self.logical_base <= logical_addr < self.logical_base + self.region_bytes


def tat_check(entries):
    """The START-time TAT check: ``ErrorCode.BAD_TAT`` or ``ErrorCode.NONE``.

    BAD_TAT if any *valid* entry has SIZE > 19, or a logical or physical base that is
    not a multiple of its region size. Invalid entries are never judged.
    """
    for e in entries:
        if not e.valid:
            continue
        if e.size > TAT_MAX_SIZE:
            return ErrorCode.BAD_TAT
        if e.logical_base % e.region_bytes or e.phys_base % e.region_bytes:
            return ErrorCode.BAD_TAT
    return ErrorCode.NONE


def _require_good_table(entries):
    if tat_check(entries) is not ErrorCode.NONE:
        # The MA refuses such a table at START, so no translation through it exists.
        raise ValueError("TAT fails tat_check (BAD_TAT): it translates nothing")


def tat_translate(entries, logical_addr):
    """Physical address of logical byte ``logical_addr``, or ``None`` on a TAT miss.

    The lowest-index valid entry whose region covers the address wins; the result is its
    physical base plus the offset into the region. ``entries`` must pass
    :func:`tat_check` (else ``ValueError``).
    """
    _require_good_table(entries)
    for e in entries:
        if e.covers(logical_addr):
            return e.phys_base + (logical_addr - e.logical_base)
    return None


def tat_first_uncovered(entries, addr, nbytes):
    """Lowest logical address in ``[addr, addr + nbytes)`` that no valid entry covers,
    or ``None`` if all of it is covered (always so for ``nbytes == 0``).

    The bytes may be covered by several entries. ``entries`` must pass
    :func:`tat_check` (else ``ValueError``).
    """
    _require_good_table(entries)
    end = addr + nbytes
    while addr < end:
        ends = [e.logical_base + e.region_bytes for e in entries if e.covers(addr)]
        if not ends:
            return addr
        addr = max(ends)
    return None


def tat_covers(entries, addr, nbytes):
    """Whether every byte of ``[addr, addr + nbytes)`` is covered by a valid entry."""
    return tat_first_uncovered(entries, addr, nbytes) is None


def matrix_span(rows, cols, itemsize, ld):
    """Bytes from a row-major matrix's first byte to just past its last one.

    ``rows``, ``cols``: elements; ``itemsize``: bytes per element; ``ld``: row stride in
    bytes. The last row ends after ``cols * itemsize`` bytes, not after a full stride.
    0 for an empty matrix.
    """
    if rows == 0 or cols == 0:
        return 0
    return (rows - 1) * ld + cols * itemsize


def pack_matrix(arr, ld, fill=0):
    """Byte image of a row-major matrix with a row stride of ``ld`` bytes.

    ``arr``: 2-D array; its dtype decides the element size (``int8``, ``uint16`` bf16
    bits, ``int32``, ``uint32`` binary32 bits, ...). Elements are little-endian, as on
    the AXI bus. Row r starts at byte ``r * ld``; the gap between rows is ``fill``
    (a byte value). The image is :func:`matrix_span` bytes long. ``ld`` must be at least
    a row's size, so that rows do not overlap.
    """
    arr = np.asarray(arr)
    if arr.ndim != 2:
        raise ValueError(f"pack_matrix needs a 2-D array, got shape {arr.shape}")
    rows, cols = arr.shape
    row_bytes = cols * arr.dtype.itemsize
    if ld < row_bytes:
        raise ValueError(f"row stride {ld} bytes is less than a row ({row_bytes} bytes)")
    buf = bytearray([fill]) * matrix_span(rows, cols, arr.dtype.itemsize, ld)
    le = arr.astype(arr.dtype.newbyteorder("<"))
    for r in range(rows):
        buf[r * ld:r * ld + row_bytes] = le[r].tobytes()
    return bytes(buf)


def unpack_matrix(buf, rows, cols, dtype, ld):
    """Read a row-major ``rows``×``cols`` matrix of ``dtype`` from a byte image.

    Row r starts at byte ``r * ld`` of ``buf`` (bytes-like, at least
    :func:`matrix_span` long); elements are little-endian. Rows may overlap (a stride
    smaller than a row, even 0, just reads the same bytes again). Returns a new array.
    """
    dtype = np.dtype(dtype)
    span = matrix_span(rows, cols, dtype.itemsize, ld)
    if len(buf) < span:
        raise ValueError(f"buffer of {len(buf)} bytes is shorter than the matrix ({span} bytes)")
    out = np.empty((rows, cols), dtype)
    if out.size:
        for r in range(rows):
            out[r] = np.frombuffer(buf, dtype.newbyteorder("<"), cols, r * ld)
    return out
