"""Read ``.safetensors`` files with numpy alone: the header parsed, the data memory-mapped.

The format: an 8-byte little-endian header length, a JSON header ``{name: {"dtype",
"shape", "data_offsets": [begin, end]}}`` (plus an optional ``__metadata__``), then the
tensors' bytes, little-endian, row-major, offsets relative to the end of the header.
:class:`SafetensorsFile` checks the header (every tensor's byte count matches its dtype and
shape, the offsets lie in the file and do not overlap) and hands out a tensor's *stored*
form as a read-only view of the memory map, so nothing is read from disk until it is used:
numpy dtypes where numpy has one, the raw codes where it has none (bf16 as ``uint16``; FP8
E4M3 / E5M2 and the E8M0 scales as ``uint8``). The value decoders for those codes are
below, each from its format's definition (OCP 8-bit floating point and microscaling
formats); ``tests/test_golden_checkpoint.py`` checks them against torch's own dtypes.
"""

import json
import mmap
import pathlib
import struct

import numpy as np

from .fp import bf16_to_f32

__all__ = ["SafetensorsFile", "decode", "e4m3fn_to_f32", "e5m2_to_f32", "e8m0_to_f32",
           "e2m1_unpack", "E2M1_VALUES", "NUMPY_DTYPES", "CODE_DTYPES"]

# safetensors dtype -> numpy dtype of the stored form (little-endian)
NUMPY_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}
# dtypes numpy has no type for: stored codes of this many bytes per element
CODE_DTYPES = {"BF16": "<u2", "F8_E4M3": "u1", "F8_E5M2": "u1", "F8_E8M0": "u1"}

MAX_HEADER = 100 * 1024 * 1024


class SafetensorsFile:
    """One ``.safetensors`` file: ``names``, :meth:`info` and :meth:`raw` (lazy, memory-mapped)."""

    def __init__(self, path):
        self.path = pathlib.Path(path)
        with open(self.path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ValueError(f"{self.path}: not a safetensors file (shorter than 8 bytes)")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER:
                raise ValueError(f"{self.path}: header length {n} is implausible (not a safetensors file?)")
            try:
                header = json.loads(f.read(n))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise ValueError(f"{self.path}: the header is not JSON ({e})") from None
        size = self.path.stat().st_size
        self.data_start = 8 + n
        self.metadata = header.pop("__metadata__", None) or {}
        self._info = {}
        spans = []
        for name, h in header.items():
            dtype, shape, (a, b) = h["dtype"], tuple(h["shape"]), h["data_offsets"]
            if dtype not in NUMPY_DTYPES and dtype not in CODE_DTYPES:
                raise ValueError(f"{self.path}: tensor {name!r} has dtype {dtype}: not decoded here")
            width = np.dtype(NUMPY_DTYPES.get(dtype) or CODE_DTYPES[dtype]).itemsize
            if b - a != width * int(np.prod(shape, dtype=np.int64)):
                raise ValueError(f"{self.path}: tensor {name!r} ({dtype}, {list(shape)}) has {b - a} bytes")
            if not 0 <= a <= b <= size - self.data_start:
                raise ValueError(f"{self.path}: tensor {name!r} lies outside the file")
            self._info[name] = (dtype, shape, a, b)
            spans.append((a, b, name))
        spans.sort()
        for (_, b0, n0), (a1, _, n1) in zip(spans, spans[1:], strict=False):
            if a1 < b0:
                raise ValueError(f"{self.path}: tensors {n0!r} and {n1!r} overlap")
        self._map = None

    @property
    def names(self):
        return list(self._info)

    def info(self, name):
        """``(dtype, shape, nbytes)`` of a tensor as stored."""
        dtype, shape, a, b = self._info[name]
        return dtype, shape, b - a

    def raw(self, name):
        """The stored form of tensor ``name``: a read-only view of the memory map."""
        dtype, shape, a, b = self._info[name]
        if self._map is None:
            with open(self.path, "rb") as f:
                empty = self.path.stat().st_size == 0
                self._map = b"" if empty else mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        np_dtype = np.dtype(NUMPY_DTYPES.get(dtype) or CODE_DTYPES[dtype])
        count = (b - a) // np_dtype.itemsize
        return np.frombuffer(self._map, np_dtype, count, self.data_start + a).reshape(shape)


def _table(decode_one):
    return np.array([decode_one(c) for c in range(256)], np.float32)


def _e4m3fn(c):
    """OCP FP8 E4M3 ("fn": no infinities): 1 sign, 4 exponent (bias 7), 3 mantissa bits;
    S.1111.111 is NaN, the other all-ones exponents are normal numbers (max 448)."""
    s, e, m = c >> 7, (c >> 3) & 0xF, c & 7
    if e == 0xF and m == 7:
        v = np.nan
    else:
        v = (m / 8) * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if s else v


def _e5m2(c):
    """OCP FP8 E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE infinities and NaNs."""
    s, e, m = c >> 7, (c >> 2) & 0x1F, c & 3
    if e == 0x1F:
        v = np.inf if m == 0 else np.nan
    else:
        v = (m / 4) * 2.0**-14 if e == 0 else (1 + m / 4) * 2.0 ** (e - 15)
    return -v if s else v


_E4M3 = _table(_e4m3fn)
_E5M2 = _table(_e5m2)
# OCP microscaling E8M0 scale: 2^(code - 127), 0xFF is NaN
_E8M0 = np.array([np.nan if c == 255 else 2.0 ** (c - 127) for c in range(256)], np.float32)
# OCP FP4 E2M1: 1 sign, 2 exponent (bias 1), 1 mantissa bit
E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], np.float32)
_E2M1 = np.concatenate([E2M1_VALUES, -E2M1_VALUES]).astype(np.float32)


def e4m3fn_to_f32(codes):
    return _E4M3[np.asarray(codes, np.uint8)]


def e5m2_to_f32(codes):
    return _E5M2[np.asarray(codes, np.uint8)]


def e8m0_to_f32(codes):
    return _E8M0[np.asarray(codes, np.uint8)]


def e2m1_unpack(packed):
    """Two FP4 E2M1 codes per byte (the even element in the low nibble) → float32, the
    last axis twice as long."""
    u8 = np.asarray(packed).view(np.uint8)
    out = np.empty(u8.shape[:-1] + (2 * u8.shape[-1],), np.float32)
    out[..., 0::2] = _E2M1[u8 & 0xF]
    out[..., 1::2] = _E2M1[u8 >> 4]
    return out


def decode(dtype, raw):
    """Stored form → values: float32 for the float formats (bf16 / FP8 / E8M0 exactly),
    the integer and float64 dtypes as they are."""
    if dtype == "BF16":
        return bf16_to_f32(raw)
    if dtype == "F8_E4M3":
        return e4m3fn_to_f32(raw)
    if dtype == "F8_E5M2":
        return e5m2_to_f32(raw)
    if dtype == "F8_E8M0":
        return e8m0_to_f32(raw)
    if dtype in ("F16", "F32"):
        return np.asarray(raw, np.float32)
    return np.asarray(raw)
