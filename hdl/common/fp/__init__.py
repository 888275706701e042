"""The floating-point library of the MA and the VA: bf16 and binary32 circuits.

Every unit follows the arithmetic contract (docs/design.md, "bf16 mode"), the rules of
:mod:`golden.fp`, which the units are tested against bit for bit:

1. Subnormal inputs read as zero of the same sign.
2. Every result that IEEE binary32 (round-to-nearest-even, gradual underflow) would make
   subnormal is replaced by a zero of the same sign.
3. Every NaN result is the canonical ``0x7FC00000``; infinities follow IEEE.

The helpers take a Module ``m`` and operand Values, add their circuit to ``m`` and return
the result (a Signal named after ``name``); they are building blocks, not components.

* :mod:`~hdl.common.fp.bits`: fields, classes and special values of the formats; the
  leading/trailing-zero counts, leading-one search and shifters.
* :mod:`~hdl.common.fp.stages`: where the registers of a pipeline go (:class:`Stages`,
  :func:`stage_registers`) and products split for multiplier blocks (:func:`product`).
* :mod:`~hdl.common.fp.add`: the binary32 adder (:func:`f32_add`, pipelined, staged).
* :mod:`~hdl.common.fp.mul`: :func:`bf16_mul` (bf16 × bf16 → binary32) and
  :func:`f32_mul`.
* :mod:`~hdl.common.fp.convert`: binary32 → bf16, int32 → binary32, binary32 → int8,
  the truncating normalisation of a fixed-point value.
* :mod:`~hdl.common.fp.compare`: order keys of bf16 values.

The block-specific compositions stay with their blocks: the MA's processing-element
product and accumulator in :mod:`hdl.ma.fp`, the VA's approximated functions (exp,
reciprocal, rsqrt, the logarithm) in :mod:`hdl.va.functions` and :mod:`hdl.va.extfunc`.
"""

from hdl.common.fp.add import F32_ADD_STAGES, f32_add, f32_add_pipelined, f32_add_staged
from hdl.common.fp.bits import (
    F32_CANONICAL_NAN,
    F32_INF,
    F32_MINUS_ZERO,
    KIND_INF,
    KIND_NAN,
    KIND_SUM,
    KIND_ZERO,
    bf16_fields,
    bf16_flush,
    bf16_is_nan,
    classes,
    f32_fields,
    f32_inf,
    f32_is_nan,
    f32_zero,
    leading_one,
    leading_zeros,
    shift,
    shift_right_sticky,
    trailing_zeros,
    wire,
)
from hdl.common.fp.compare import bf16_key, bf16_order_key
from hdl.common.fp.convert import f32_to_bf16, f32_to_int8, int32_to_f32, normalize_trunc
from hdl.common.fp.mul import bf16_mul, f32_mul
from hdl.common.fp.stages import (
    LUT_SLICE,
    Stages,
    lut_product,
    no_cut,
    product,
    stage_registers,
    table_cut,
)

__all__ = [
    "F32_ADD_STAGES", "f32_add", "f32_add_pipelined", "f32_add_staged",
    "F32_CANONICAL_NAN", "F32_INF", "F32_MINUS_ZERO",
    "KIND_SUM", "KIND_NAN", "KIND_INF", "KIND_ZERO",
    "bf16_fields", "bf16_flush", "bf16_is_nan", "classes", "f32_fields", "f32_inf",
    "f32_is_nan", "f32_zero", "leading_one", "leading_zeros", "shift",
    "shift_right_sticky", "trailing_zeros", "wire",
    "bf16_key", "bf16_order_key",
    "f32_to_bf16", "f32_to_int8", "int32_to_f32", "normalize_trunc",
    "bf16_mul", "f32_mul",
    "LUT_SLICE", "Stages", "lut_product", "no_cut", "product", "stage_registers",
    "table_cut",
]
