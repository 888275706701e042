"""The VA's per-command table (:data:`spec.va.VA_COMMANDS`) as logic.

What each command needs is written once, in :mod:`spec.va`: the unit that runs it, the
operand ranges it reads and writes (register, items, item size, alignment) and its shape
checks. From it come

* the opcode sets of the units (:data:`RTL_OPCODES`, :data:`ROW_OPCODES`, ...) and the
  unit flags of a decoded opcode (:func:`unit_groups`);
* the byte counts of an operand for the running command (:func:`operand_bytes`): the
  checks at START, the reader's operands, the writer's results, RowUnit's pass length;
* the checks at START themselves (:func:`start_checks`), in the order ERROR reports them.
"""

from functools import reduce
from operator import or_

from amaranth.hdl import Const, Signal
from amaranth.lib import data
from amaranth.utils import exact_log2

from hdl.common.codes import ErrorCode, VaOpcode
from hdl.common.memport import PHYS_ADDR_BITS
from spec.va import MAX_LENGTH, VA_COMMANDS, Count, VaUnit

__all__ = ["RTL_OPCODES", "ROW_OPCODES", "EXT_OPCODES", "INDEXED_OPCODES", "PACKED_OPCODES",
           "DST2_OPCODES", "opcodes", "unit_groups", "operand_bytes", "start_checks"]


def opcodes(unit=None, where=lambda spec: True):
    """The RTL's opcodes (:class:`hdl.common.codes.VaOpcode`) of the commands ``unit``
    runs (None: every unit) whose :class:`spec.va.VaCommandSpec` satisfies ``where``,
    in opcode order."""
    return tuple(VaOpcode(op.value) for op, spec in VA_COMMANDS.items()
                 if unit in (None, spec.unit) and where(spec))


RTL_OPCODES = opcodes()
"""The commands this RTL runs; START refuses the others with BAD_COMMAND."""
ROW_OPCODES = opcodes(VaUnit.ROWS)
"""The commands :class:`hdl.va.rows.RowUnit` runs."""
EXT_OPCODES = opcodes(VaUnit.EXT)
"""The commands :class:`hdl.va.extfunc.ExtUnit` runs."""
INDEXED_OPCODES = opcodes(VaUnit.INDEXED)
"""The commands :class:`hdl.va.indexed.IndexedMover` runs."""
PACKED_OPCODES = opcodes(VaUnit.ROWS, lambda spec: spec.operand("src").size
                         == 2 * spec.operand("dst").size)
"""Row commands whose results are half the size of x's elements: half a bus word of
results a word read (QUANTIZE, DEQUANTIZE, CVT_F32, DEQUANTIZE_MEM)."""
DST2_OPCODES = opcodes(where=lambda spec: spec.operand("dst2") is not None)
"""The commands with a second result at DST2 (QUANTIZE, TOPK, TOPK_WIDE)."""


def unit_groups():
    """:func:`hdl.common.codes.decode` groups: a flag per :class:`spec.va.VaUnit`, named
    by its value, high while the opcode is one that unit runs."""
    return {unit.value: opcodes(unit) for unit in VaUnit}


def _bytes(count, size, counts, esize):
    """The bytes of ``count`` items of ``size`` bytes (None: ``1 << esize``), from
    ``counts`` (:class:`Count` → Value)."""
    if count is Count.STRIDED:
        return counts[Count.STRIDED]
    if count is Count.ONE:
        return Const(size)
    return counts[count] << (esize if size is None else exact_log2(size))


def operand_bytes(m, op, reg, counts, esize, *, units=tuple(VaUnit), name, shape=None):
    """A Signal (``name``): the bytes of the operand at register ``reg`` of the command
    ``op`` when one of ``units`` runs it, else 0. ``counts`` maps each :class:`Count`
    the operands use to its Value (LENGTH, K, ...); ``esize`` is log2 of the element size.
    One ``m.Switch`` on ``op``, a case per distinct count."""
    cases = {}
    for code, spec in VA_COMMANDS.items():
        operand = spec.operand(reg)
        if operand is not None and spec.unit in units:
            cases.setdefault((operand.count, operand.size), []).append(VaOpcode(code.value))
    nbytes = Signal(shape or range(4 * MAX_LENGTH + 1), name=name)
    with m.Switch(op):
        for (count, size), codes in cases.items():
            with m.Case(*codes):
                m.d.comb += nbytes.eq(_bytes(count, size, counts, esize))
    return nbytes


SLOTS = max(len(spec.operands) for spec in VA_COMMANDS.values())
ALIGNED = max(len(spec.aligned) for spec in VA_COMMANDS.values())


def start_checks(m, cmd, clamp_ok):
    """The checks at START of the command registers ``cmd`` (a ``VaCommandLayout``
    view), generated from :data:`spec.va.VA_COMMANDS`: a list of (failed, ErrorCode,
    ERR_ADDR) in the order :class:`spec.va.VaCommandSpec` gives (the first failing one
    is the refusal). ``clamp_ok``: CLAMP's bounds in SCALAR are usable (a Value).

    One ``m.Switch`` on the opcode fills, for the command, its shape check and up to
    :data:`SLOTS` operand ranges (address, bytes, alignment mask) and :data:`ALIGNED`
    registers that must be multiples of the element size; an unknown opcode's shape check
    fails."""
    n, k = cmd.length[:17], cmd.k[:17]
    size = Signal(3)
    m.d.comb += size.eq(1 << cmd.esize)
    span = Signal(range((MAX_LENGTH - 1) * 2 ** 32 + 5))
    m.d.comb += span.eq((n - 1) * cmd.stride + size)
    counts = {Count.LENGTH: n, Count.K: k, Count.ROWS_1: cmd.rows + 1, Count.STRIDED: span}
    slot_layout = data.StructLayout({"used": 1, "addr": PHYS_ADDR_BITS, "nbytes": len(span),
                                     "mask": 3})
    slots = [Signal(slot_layout, name=f"start_range{i}") for i in range(SLOTS)]
    aligned = [Signal(data.StructLayout({"used": 1, "value": PHYS_ADDR_BITS}),
                      name=f"start_aligned{i}") for i in range(ALIGNED)]
    bad_length = (cmd.length == 0) | (cmd.length > MAX_LENGTH)
    bad_shape = Signal(init=1, name="start_bad_shape")
    groups = {}
    for code, spec in VA_COMMANDS.items():
        groups.setdefault(spec, []).append(VaOpcode(code.value))
    with m.Switch(cmd.op):
        for spec, codes in groups.items():
            with m.Case(*codes):
                bad = [bad_length]
                if spec.elements:
                    bad.append(cmd.esize == 3)
                if spec.k_max is not None:
                    bad.append((cmd.k == 0) | (cmd.k > cmd.length))
                    if spec.k_max < MAX_LENGTH:
                        bad.append(cmd.k > spec.k_max)
                if spec.even:
                    bad.append(cmd.length[0])
                if spec.clamp:
                    bad.append(~clamp_ok)
                m.d.comb += bad_shape.eq(reduce(or_, bad))
                for slot, operand in zip(slots, spec.operands, strict=False):
                    mask = size - 1 if operand.align is None else operand.align - 1
                    m.d.comb += [slot.used.eq(1), slot.addr.eq(getattr(cmd, operand.reg)),
                                 slot.nbytes.eq(_bytes(operand.count, operand.size, counts,
                                                       cmd.esize)),
                                 slot.mask.eq(mask)]
                for reg, value in zip(aligned, spec.aligned, strict=False):
                    m.d.comb += [reg.used.eq(1), reg.value.eq(getattr(cmd, value))]
    checks = [(bad_shape, ErrorCode.BAD_COMMAND, 0)]
    checks += [(s.used & ((s.addr + s.nbytes) > (1 << PHYS_ADDR_BITS)), ErrorCode.BAD_COMMAND,
                s.addr[:32]) for s in slots]
    checks += [(s.used & ((s.addr & s.mask) != 0), ErrorCode.MISALIGNED, s.addr[:32])
               for s in slots]
    checks += [(r.used & ((r.value & (size - 1)) != 0), ErrorCode.MISALIGNED, r.value[:32])
               for r in aligned]
    return checks
