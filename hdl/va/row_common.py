"""What the parts of :class:`hdl.va.rows.RowUnit` share: the pass handshake between its
pass control and its units, the piece of a row the reductions take in a cycle, the
candidate of a max / top-k and the registered reduction tree."""

from amaranth.hdl import Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from spec.va import MAX_LENGTH

__all__ = ["SUM_BITS", "Entry", "Piece", "PassSignature", "better", "tree"]

SUM_BITS = 58               # 65 536 terms below 2**41


class Entry(data.StructLayout):
    """A candidate of a max / top-k: key (order of values; -2 for none), value, index."""
    def __init__(self):
        super().__init__({"key": range(-2, 0x10000), "value": 16, "index": range(MAX_LENGTH)})


class Piece(data.StructLayout):
    """What the reductions take in a cycle: ``fn_lanes`` bf16 elements of x (``word``),
    the element pipeline's binary32 values in their place (``e``, SOFTMAX's exp values)
    and the index of the first element (``base``; a bus word holds ``bus_lanes``)."""
    def __init__(self, fn_lanes, bus_lanes):
        super().__init__({"word": data.ArrayLayout(16, fn_lanes),
                          "e": data.ArrayLayout(32, fn_lanes),
                          "base": range(MAX_LENGTH + bus_lanes + 1)})


class PassSignature(wiring.Signature):
    """The pass handshake between :class:`hdl.va.rows.RowUnit`'s pass control (this
    signature's side: ``start`` out, ``busy`` and ``done`` in) and a unit that works on
    the words of a pass or between passes (the max tree, the exact sum, the top-k lists,
    the scalar sequencer: ``In(PassSignature())``).

    1. The unit holds ``busy`` high while a word of the pass it has taken is still in
       it (a pipeline's levels); a pass ends in the first cycle in which every word of
       it is taken, no result is owed and no unit is ``busy``.
    2. In that cycle the control pulses ``start`` (one cycle) of the unit whose work
       comes between this pass and the next (the top-k merge, the scalar steps), if any.
    3. The unit pulses ``done`` (one cycle, at the earliest the cycle after ``start``)
       when that work is over: in that cycle its results (a constant for the next pass,
       the merged list) are there, and the control moves on (the next pass, the results).
    4. A unit with no work between passes answers ``start`` with ``done`` in the same
       cycle, and is never started; ``busy`` of a unit that has no pipeline is 0.
    """

    def __init__(self):
        super().__init__({"start": Out(1), "busy": In(1), "done": In(1)})


def better(a, b):
    """``a`` before ``b``: a larger key, or the same key at a lower index."""
    return (a.key > b.key) | ((a.key == b.key) & (a.index < b.index))


def tree(m, items, combine, step, name):
    """A reduction tree with a register after each level, advancing with ``step``;
    returns (result, levels)."""
    level = 0
    while len(items) > 1:
        nxt = []
        for i in range(0, len(items), 2):
            reg = Signal.like(items[i], name=f"{name}_l{level}_{i // 2}")
            with m.If(step):
                m.d.sync += reg.eq(combine(items[i], items[i + 1]))
            nxt.append(reg)
        items, level = nxt, level + 1
    return items[0], level
