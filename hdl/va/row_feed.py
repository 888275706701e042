"""The element side of :class:`hdl.va.rows.RowUnit`: the RoPE lanes and the element
feed, which takes a pass's words into the element pipeline
(:class:`hdl.va.functions.UnaryUnit`) or the RoPE lanes and packs their results for the
stream writer."""

import operator

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.common.codes import VaOpcode
from hdl.common.fp import Stages, bf16_mul, f32_add_staged, f32_to_bf16, lut_product
from hdl.va.functions import UnaryUnit, credit_pipeline
from hdl.va.narrow import WidthAdapter

__all__ = ["RopeLanes", "ElementFeed"]


class RopeLanes(wiring.Component):
    """RoPE on ``data_width/16`` lanes: ``(a, b) → (a·c - b·s, a·s + b·c)`` (golden.va
    rope_bf16: exact bf16 products, one binary32 sum each, rounded to bf16).

    Adjacent pairs (``split`` 0): a word of x holds E/2 pairs; their cos and sin are
    half of a word (``half`` picks it). Split-half (``split`` 1): lane i pairs ``a`` (a
    word of x[:n/2]) with ``b`` (the same word of x[n/2:]); ``second`` 0 gives the first
    halves a·c - b·s, 1 the second halves a·s + b·c. A pipeline (products |
    the binary32 sum | rounding) that never stalls, into an output FIFO taken on
    credit (:func:`hdl.va.functions.credit_pipeline`). ``lut_products``: the 8×8
    significand products in logic.
    """

    def __init__(self, data_width, lut_products=False):
        self.data_width, self.lut_products = data_width, lut_products
        wide_in, wide_out = self.layouts(data_width)
        super().__init__({
            "split": In(1),
            "second": In(1),
            "half": In(1),
            "i": In(stream.Signature(wide_in)),
            "o": Out(stream.Signature(wide_out)),
        })

    @staticmethod
    def layouts(data_width):
        """The payload shapes of ``i`` and ``o``."""
        word = data.ArrayLayout(16, data_width // 16)
        return data.StructLayout({"a": word, "b": word, "c": word, "s": word}), data_width

    def elaborate(self, platform):
        m = Module()
        lanes = self.data_width // 16
        a, b, c, s = (self.i.payload.a, self.i.payload.b, self.i.payload.c, self.i.payload.s)
        out = Signal(data.ArrayLayout(16, lanes))
        depths = set()
        mul = lut_product if self.lut_products else operator.mul
        for lane in range(lanes):
            st = Stages(m, f"r{lane}")
            pair = lane // 2 + Mux(self.half, lanes // 2, 0)
            odd = lane % 2 == 1
            # p·c + q·s (negated for a first half): adjacent lane 2j is x[2j]·c - x[2j+1]·s,
            # lane 2j+1 is x[2j+1]·c + x[2j]·s
            p = Mux(self.split, Mux(self.second, b[lane], a[lane]), a[lane])
            q = Mux(self.split, Mux(self.second, a[lane], b[lane]), a[lane ^ 1])
            cos = Mux(self.split, c[lane], c[pair])
            sin = Mux(self.split, s[lane], s[pair])
            neg = Mux(self.split, ~self.second, not odd)
            v = st({"p": p, "q": q, "cos": cos, "sin": sin, "neg": neg,
                    "pc": mul(Cat(p[:7], 1), Cat(cos[:7], 1)),
                    "qs": mul(Cat(q[:7], 1), Cat(sin[:7], 1))})
            pc = bf16_mul(m, v["p"], v["cos"], name=f"pc{lane}", product=v["pc"])
            qs = bf16_mul(m, v["q"], v["sin"], name=f"qs{lane}", product=v["qs"])
            v = st({"pc": pc, "qs": qs ^ (v["neg"] << 31)})
            total = f32_add_staged(m, v["pc"], v["qs"], f"rope{lane}", st)
            v = st({"total": total})
            m.d.comb += out[lane].eq(f32_to_bf16(v["total"]))
            depths.add(st.depth)
        assert len(depths) == 1
        credit_pipeline(m, self.i, self.o, out, depths.pop())
        return m


class ElementFeed(wiring.Component):
    """A pass's words into the element pipeline (x, and gamma ``y`` while ``use_y``) or
    the RoPE lanes (x, cos ``y``, sin ``z``, split-half: x[n/2:] ``w``), the results out
    to ``o``: as they are, or two half words packed into one (``packed``: QUANTIZE,
    DEQUANTIZE). Both units are built ``16 · fn_lanes`` bits wide, each word taken in
    ``data_width / (16 · fn_lanes)`` pieces (:class:`hdl.va.narrow.WidthAdapter`);
    ``lut_products``: the RoPE lanes' 8×8 products in logic.

    Words are taken while ``go`` (the pass takes words and has some left; the
    pipeline's constant is there); ``took`` pulses for each, ``produced`` for each
    result word of the units. Results of a pass that are not written (``emit`` low:
    SOFTMAX's exp values, for the sum) leave as ``e`` instead; ``flush`` (every result
    of the pass is out) writes a last half word (``have_half`` while one waits).
    ``op`` and ``c`` (the constant; DEQUANTIZE: ``scalar``), ``row_max`` (SOFTMAX's max)
    go to the pipeline; ``second_half`` to the RoPE lanes, ``last_word`` of the pass
    takes the last cos / sin word in adjacent-pairs RoPE; ``restart`` (a cycle before
    the next pass) starts it at the first half of a cos / sin word again.
    """

    def __init__(self, data_width, fn_lanes, lut_products=False):
        self.data_width, self.fn_lanes, self.lut_products = data_width, fn_lanes, lut_products
        word = stream.Signature(data_width)
        super().__init__({
            "op": In(VaOpcode),
            "scalar": In(32),
            "c": In(32),
            "row_max": In(16),
            **{flag: In(1) for flag in ("dq_mem", "dequantize", "packed", "rope", "split",
                                        "use_y", "emit", "second_half", "go", "last_word",
                                        "flush", "restart")},
            "x": In(word),
            "y": In(word),
            "z": In(word),
            "w": In(word),
            "o": Out(word),
            "e": Out(stream.Signature(data.ArrayLayout(32, data_width // 16))),
            "took": Out(1),
            "produced": Out(1),
            "have_half": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        rope, split, x, y = self.rope, self.split, self.x, self.y
        upper = Signal()                         # RoPE adjacent: which half of the cos/sin word
        pipe, pipe_i, pipe_o, rl, rl_i, rl_o = self._units(m, self.packed, split, upper)
        with m.If(self.dq_mem):
            m.d.comb += pipe.op.eq(VaOpcode.DEQUANTIZE)
        with m.Else():
            m.d.comb += pipe.op.eq(self.op)
        m.d.comb += [pipe.c.eq(Mux(self.dequantize, self.scalar, self.c)),
                     pipe.m.eq(self.row_max)]
        feed = self.go & ~rope
        need_y = self.use_y
        m.d.comb += [pipe_i.payload.x.eq(x.payload), pipe_i.payload.g.eq(y.payload),
                     pipe_i.valid.eq(feed & x.valid & (y.valid | ~need_y))]
        with m.If(feed):
            m.d.comb += [x.ready.eq(pipe_i.ready & (y.valid | ~need_y)),
                         y.ready.eq(pipe_i.ready & x.valid & need_y)]
        pipe_out = pipe_o.valid & pipe_o.ready

        # RoPE: x (adjacent), or x[:n/2] and x[n/2:] (split-half), with cos (y), sin (z).
        all_valid = x.valid & y.valid & self.z.valid & (self.w.valid | ~split)
        m.d.comb += [rl.split.eq(split), rl.second.eq(self.second_half),
                     rl_i.payload.a.eq(x.payload), rl_i.payload.b.eq(self.w.payload),
                     rl_i.payload.c.eq(y.payload), rl_i.payload.s.eq(self.z.payload),
                     rl_i.valid.eq(self.go & rope & all_valid)]
        rope_in = rl_i.valid & rl_i.ready
        with m.If(rope):
            m.d.comb += [x.ready.eq(rope_in), self.w.ready.eq(rope_in & split),
                         y.ready.eq(rope_in & (split | upper | self.last_word)),
                         self.z.ready.eq(rope_in & (split | upper | self.last_word))]
        with m.If(rope_in):
            m.d.sync += upper.eq(~upper)
        with m.If(self.restart):
            m.d.sync += upper.eq(0)
        m.d.comb += [self.took.eq((feed & x.valid & x.ready) | rope_in),
                     self.produced.eq(pipe_out | (rl_o.valid & rl_o.ready))]
        self._pack(m, pipe_o, rl_o, pipe_out)
        return m

    def _pack(self, m, pipe_o, rl_o, pipe_out):
        """Results to ``o``: as they are, or two half words packed into one; SOFTMAX's
        exp values to ``e``."""
        width, packed, o = self.data_width, self.packed, self.o
        half = Signal(width // 2)
        have_half = Signal()
        m.d.comb += [self.e.payload.eq(pipe_o.payload.e), self.have_half.eq(have_half)]
        with m.If(self.rope):
            wiring.connect(m, rl_o, wiring.flipped(o))
        with m.Elif(~self.emit):                 # SOFTMAX's exp values: to the sum
            m.d.comb += [self.e.valid.eq(pipe_o.valid), pipe_o.ready.eq(self.e.ready)]
        with m.Elif(~packed):
            m.d.comb += [o.payload.eq(pipe_o.payload.word), o.valid.eq(pipe_o.valid),
                         pipe_o.ready.eq(o.ready)]
        with m.Elif(self.flush & have_half):
            m.d.comb += [o.payload.eq(half), o.valid.eq(1)]
            with m.If(o.ready):
                m.d.sync += have_half.eq(0)
        with m.Elif(have_half):
            m.d.comb += [o.payload.eq(Cat(half, pipe_o.payload.word[:width // 2])),
                         o.valid.eq(pipe_o.valid), pipe_o.ready.eq(o.ready)]
            with m.If(pipe_out):
                m.d.sync += have_half.eq(0)
        with m.Else():
            m.d.comb += pipe_o.ready.eq(1)
            with m.If(pipe_o.valid):
                m.d.sync += [half.eq(pipe_o.payload.word[:width // 2]), have_half.eq(1)]

    def _units(self, m, packed, split, upper):
        """The element pipeline and the RoPE lanes, ``fn_lanes`` wide: (pipe, its wide input
        and output streams, rope, its wide streams)."""
        width, narrow = self.data_width, 16 * self.fn_lanes
        pieces = width // narrow
        # the element pipeline's products in multiplier blocks: with the lane engine at
        # the bus rate the narrowed VA has them to spare (docs/fpga.md)
        m.submodules.pipe = pipe = UnaryUnit(narrow)
        m.submodules.rope = rl = RopeLanes(narrow, self.lut_products)
        if pieces == 1:
            m.d.comb += rl.half.eq(upper)
            return pipe, pipe.i, pipe.o, rl, rl.i, rl.o

        def unary_split(payload, piece):
            return Cat(payload.x.word_select(piece, narrow), payload.g.word_select(piece, narrow))

        def unary_join(parts):
            # QUANTIZE / DEQUANTIZE: each piece's results fill the low half of its word
            words = [Value.cast(part.word) for part in parts]
            low = Cat(*(w[:narrow // 2] for w in words))
            return Cat(Mux(packed, low, Cat(*words)), *(part.e for part in parts))

        def rope_split(payload, piece):
            a, b, c, s = (Value.cast(payload[k]) for k in "abcs")
            # adjacent pairs: the narrow lanes' cos/sin are the first half of a narrow word
            pair = piece + Mux(upper, pieces, 0)
            return Cat(a.word_select(piece, narrow), b.word_select(piece, narrow),
                       *(Mux(split, v.word_select(piece, narrow),
                             v.word_select(pair, narrow // 2)) for v in (c, s)))

        m.d.comb += rl.half.eq(0)
        adapters = []
        for name, unit, layouts, split_fn, join_fn in (
                ("pipe", pipe, UnaryUnit.layouts, unary_split, unary_join),
                ("rope", rl, RopeLanes.layouts, rope_split, lambda parts: Cat(*parts))):
            wide_in, wide_out = layouts(width)
            narrow_in, narrow_out = layouts(narrow)
            adapter = WidthAdapter(wide_in, wide_out, narrow_in, narrow_out, pieces,
                                   split_fn, join_fn)
            m.submodules[f"{name}_width"] = adapter
            wiring.connect(m, adapter.narrow_i, unit.i)
            wiring.connect(m, unit.o, adapter.narrow_o)
            adapters.append(adapter)
        return pipe, adapters[0].i, adapters[0].o, rl, adapters[1].i, adapters[1].o
