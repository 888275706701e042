"""A narrower function unit standing in for a bus-wide one: words split, results joined.

The VA's function units (:class:`hdl.va.functions.UnaryUnit`, :class:`hdl.va.extfunc.ExtUnit`,
:class:`hdl.va.rows.RopeLanes`) take a bus word of ``data_width / 16`` bf16 elements a
cycle, one lane of multipliers per element. With fewer *function lanes* (the VA's
``fn_lanes``) each unit is built ``fn_lanes`` elements wide and :class:`WidthAdapter`
feeds it every bus word as ``pieces = data_width / (16 · fn_lanes)`` narrow words, one a
cycle, then joins the narrow results back into one wide result: the commands give the
same results, at ``1 / pieces`` of the bus rate through these units.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["WidthAdapter", "check_fn_lanes"]


def check_fn_lanes(fn_lanes, data_width):
    """Raise ValueError unless ``fn_lanes`` function lanes suit a ``data_width``-bit bus:
    a power of two from 2 (an int32 of DEQUANTIZE and a RoPE pair span two lanes) to
    ``data_width / 16`` (one lane per bf16 element of a bus word)."""
    top = data_width // 16
    if (not isinstance(fn_lanes, int) or fn_lanes < 2 or fn_lanes > top
            or fn_lanes & (fn_lanes - 1)):
        raise ValueError(f"FN_LANES must be a power of two in 2..{top} (DATA_WIDTH/16) "
                         f"for a {data_width}-bit bus, not {fn_lanes!r}")


class WidthAdapter(wiring.Component):
    """Wide words in ``i`` → ``pieces`` narrow words a wide word on ``narrow_i`` (to the
    unit) → the unit's narrow results on ``narrow_o`` → one joined wide result on ``o``.

    ``split(payload, index)`` gives the narrow payload of piece ``index`` (a Signal,
    ``0 .. pieces - 1``) of the wide ``payload``; ``join(parts)`` the wide result of the
    ``pieces`` narrow results, the first piece's first. Both are evaluated in the
    combinational logic of this adapter; they may read other signals that hold still
    while a command runs (the opcode, a mode) or while a wide word waits in ``i``.

    Rules (streams as in :mod:`amaranth.lib.stream`):

    1. A wide word is taken from ``i`` when its last piece is taken by the unit; it
       must hold still meanwhile, as a stream payload does.
    2. The unit must answer every narrow word with exactly one narrow result, in order.
    3. The first ``pieces - 1`` results of a word are held here; the last waits in the
       unit's output until ``o`` takes the joined result, so one narrow word moves each
       cycle while ``o`` is ready.
    """

    def __init__(self, wide_in, wide_out, narrow_in, narrow_out, pieces, split, join):
        if not isinstance(pieces, int) or pieces < 2:
            raise ValueError(f"pieces must be an integer of at least 2, not {pieces!r}")
        self.pieces, self._split, self._join = pieces, split, join
        self._narrow_out = narrow_out
        super().__init__({
            "i": In(stream.Signature(wide_in)),
            "o": Out(stream.Signature(wide_out)),
            "narrow_i": Out(stream.Signature(narrow_in)),
            "narrow_o": In(stream.Signature(narrow_out)),
        })

    def elaborate(self, platform):
        m = Module()
        last = self.pieces - 1
        sent = Signal(range(self.pieces))          # the piece of the wide word on offer
        m.d.comb += [self.narrow_i.payload.eq(self._split(self.i.payload, sent)),
                     self.narrow_i.valid.eq(self.i.valid),
                     self.i.ready.eq(self.narrow_i.ready & (sent == last))]
        with m.If(self.narrow_i.valid & self.narrow_i.ready):
            m.d.sync += sent.eq(Mux(sent == last, 0, sent + 1))

        held = Signal(data.ArrayLayout(self._narrow_out, last))
        got = Signal(range(self.pieces))           # results of the current word held
        final = got == last
        m.d.comb += [self.narrow_o.ready.eq(~final | self.o.ready),
                     self.o.valid.eq(self.narrow_o.valid & final),
                     self.o.payload.eq(self._join([held[k] for k in range(last)]
                                                  + [self.narrow_o.payload]))]
        with m.If(self.narrow_o.valid & self.narrow_o.ready):
            with m.If(final):
                m.d.sync += got.eq(0)
            with m.Else():
                m.d.sync += [held[got].eq(self.narrow_o.payload), got.eq(got + 1)]
        return m
