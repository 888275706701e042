"""The numeric codes of :mod:`spec.codes` as ``amaranth.lib.enum`` shapes, for the RTL.

:mod:`spec.codes` holds every code once, as a plain ``IntEnum`` (it imports nothing, so
the golden model shares it without Amaranth). Here each code the RTL decodes becomes an
``amaranth.lib.enum`` shape of the same names and values with the width of its register
field, so a signal of it is an ``EnumView``: compared only with its own members, decoded
with ``m.Switch`` / ``m.Case`` (:func:`decode`), and shown by name in the waves.

* :class:`VaOpcode` (8 bits, OPCODE.OP): spec's members and ``NONE = 0``, the register's
  reset value, which is no command (START refuses it with BAD_COMMAND like any value the
  VA does not run). A signal of an Amaranth enum needs a member for its initial value.
* :class:`MaMode` (2 bits, MODE.MODE): every value is a mode (bit 0 bf16, bit 1 B
  transposed); the MA decodes it into its two flags with :func:`decode`.
* :class:`ErrorCode` (8 bits, ERROR.CODE): what the MA's, VA's and MC's START checks
  refuse with and their units fail with (``NONE`` the reset value). The command status
  (:class:`hdl.common.command.CommandStatus`) keeps plain 8 bits: it carries any block's
  code, also a block's own from 16 up (the tile sequencer's), which are no members.
"""

from enum import Enum as PyEnum

from amaranth.hdl import Signal
from amaranth.lib import enum

from spec import codes

__all__ = ["ErrorCode", "MaMode", "VaOpcode", "decode"]


def _shaped(source, shape, extra=()):
    """An ``amaranth.lib.enum.IntEnum`` of ``shape`` with the members of ``source`` (an
    ``IntEnum`` of :mod:`spec.codes`) and ``extra`` (``(name, value)`` pairs). Its members
    are ints, equal to spec's (tables of them serve the drivers and tests as they are);
    its signals are views (``EnumView``), as an ``Enum``'s would be."""
    bases = (enum.IntEnum,)
    options = {"shape": shape, "view_class": enum.EnumView}
    body = enum.EnumType.__prepare__(source.__name__, bases, **options)
    for name, value in extra:
        body[name] = value
    for member in source:
        body[member.name] = member.value
    body["__module__"] = __name__
    body["__qualname__"] = source.__name__
    body["__doc__"] = source.__doc__
    return enum.EnumType(source.__name__, bases, body, **options)


VaOpcode = _shaped(codes.VaOpcode, 8, extra=(("NONE", 0),))
MaMode = _shaped(codes.MaMode, 2)
ErrorCode = _shaped(codes.ErrorCode, 8)


def decode(m, value, groups, name):
    """One-bit Signals decoded from the enum-shaped ``value`` by one ``m.Switch``.

    ``groups`` maps a flag's name to a code or an iterable of codes (members of
    ``value``'s enum, or of the :mod:`spec.codes` enum it views); its Signal
    (``<name>_<flag>``) is high while ``value`` is one of them. A code may be in several
    groups. Returns the dict of Signals, in ``groups``' order.
    """
    shape = value.shape()
    flags = {key: Signal(name=f"{name}_{key}") for key in groups}
    cases = {}
    for key, members in groups.items():
        for member in (members,) if isinstance(members, PyEnum) else members:
            cases.setdefault(shape(member.value), []).append(flags[key])
    with m.Switch(value):
        for member, signals in cases.items():
            with m.Case(member):
                m.d.comb += [signal.eq(1) for signal in signals]
    return flags
