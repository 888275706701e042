"""The VA's row commands: passes over one vector, reductions between them.

:class:`RowUnit` runs the commands of :mod:`golden.va` that need the element pipeline
(:class:`hdl.va.functions.UnaryUnit`) or a whole-row reduction:

=========== ============================================ ==================================
command     passes over x (each reads the operand again)  between / after the passes
=========== ============================================ ==================================
EXP, SILU   1: the pipeline, results out
DEQUANTIZE  1: int32 → binary32 · SCALAR, results out
DEQUANTIZE_ 1: int32 → binary32 · t, results out         before it: t = the binary32 at
MEM                                                         SRC2 (y's first word) · SCALAR
RECIP       1: the pipeline's reciprocal of x, results out
CVT_F32     1: binary32 → bf16 (rounded on its bits),
            results out
SOFTMAX     1: max; 2: exact sum of exp(x - max);          recip of the sum
            3: exp(x - max) · recip, results out
RMSNORM     1: largest exponent; 2: exact sum of the        ms = sum/n, rsqrt(ms + eps)
            scaled squares; 3: (x · rsqrt) · gamma out
QUANTIZE    1: absmax; 2: int8 of x · recip(scale) out      scale = absmax · RECIP_127;
                                                            the scale to DST2
TOPK        1: per lane the best 8 (value, index)           merge of the lanes' lists,
                                                            values to DST, indices to DST2
TOPK_WIDE   ceil(K/8): TOPK's pass, each over the entries   after pass c: TOPK's merge,
            after pass c-1's last pick (in the order        8 values to DST + 16c, their
            value, then index: a strict total order)        indices to DST2 + 32c
MAX         TOPK's pass and merge                           the first value to DST
ROPE        adjacent pairs: 1 (x, cos, sin), results out
            split-half: 1: first halves out (x[:n/2],       the writer restarts at
            x[n/2:], cos, sin); 2: second halves out        DST + LENGTH bytes
=========== ============================================ ==================================

Every reduction and the element pipeline take ``fn_lanes`` elements a cycle (one bus
word, ``data_width/16`` elements, by default); the reductions are pipelines with a
register after every level of their trees. The scalar steps between passes run one
operation at a time on one shared normaliser, reciprocal, multiplier, adder and rsqrt
unit, each a pipeline whose depth the step waits out.
"""

import operator
from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.codes import VaOpcode, decode
from hdl.common.fp import (
    F32_CANONICAL_NAN,
    Stages,
    bf16_mul,
    bf16_order_key,
    f32_add_staged,
    f32_mul,
    f32_to_bf16,
    lut_product,
    normalize_trunc,
)
from hdl.va.functions import UnaryUnit, credit_pipeline, recip_f32, rsqrt_f32
from hdl.va.narrow import WidthAdapter, check_fn_lanes
from hdl.va.opcodes import DST2_OPCODES, PACKED_OPCODES, operand_bytes
from spec.va import FIX, MAX_K, MAX_LENGTH, RECIP_127, SUM_FRAC, Count, VaUnit

__all__ = ["RowUnit", "RopeLanes", "ExactSum", "TopkLists"]

SUM_BITS = 58               # 65 536 terms below 2**41

assert FIX == 30


class Entry(data.StructLayout):
    """A candidate of a max / top-k: key (order of values; -2 for none), value, index."""
    def __init__(self):
        super().__init__({"key": range(-2, 0x10000), "value": 16, "index": range(MAX_LENGTH)})


def _better(a, b):
    """``a`` before ``b``: a larger key, or the same key at a lower index."""
    return (a.key > b.key) | ((a.key == b.key) & (a.index < b.index))


def _tree(m, items, combine, step, name):
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


class ExactSum(wiring.Component):
    """The exact fixed-point sum of a row (:data:`spec.va.SUM_FRAC` fraction bits,
    :data:`SUM_BITS` wide: 65 536 terms below 2**41), ``fn_lanes`` elements a cycle.

    In a cycle with ``take``, the piece ``word`` (bf16 x) / ``e`` (the element pipeline's
    binary32 values), whose first element has index ``base``, adds to ``total``; lanes at
    or past ``n`` add nothing. SOFTMAX (``softmax``): the exp values ``e``; RMSNORM: the
    squares of x scaled by 2**(2·(exponent − ``emax``)), so the largest is below 4. A
    pipeline (the terms | a register after each level of the tree | ``total``) that never
    stalls; ``busy`` while a piece is in it. ``total`` starts at 0 with the unit's reset.
    ``lut_products``: the 8×8 squares in logic.
    """

    def __init__(self, fn_lanes, bus_lanes, lut_products=False):
        self.fn_lanes, self.lut_products = fn_lanes, lut_products
        super().__init__({
            "word": In(data.ArrayLayout(16, fn_lanes)),
            "e": In(data.ArrayLayout(32, fn_lanes)),
            "base": In(range(MAX_LENGTH + bus_lanes + 1)),
            "n": In(range(MAX_LENGTH + 1)),
            "emax": In(8),
            "softmax": In(1),
            "take": In(1),
            "busy": Out(1),
            "total": Out(SUM_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        fn = self.fn_lanes
        p_word, p_e, p_base, emax = self.word, self.e, self.base, self.emax
        terms = []
        for lane in range(fn):
            inside = p_base + lane < self.n
            x, e = p_word[lane], p_e[lane]
            big_m = Cat(x[:7], 1)
            sq = Signal(16, name=f"sq{lane}")
            m.d.comb += sq.eq(lut_product(big_m, big_m) if self.lut_products else big_m * big_m)
            sh_x = Signal(9, name=f"shx{lane}")
            m.d.comb += sh_x.eq((emax - x[7:15]) << 1)
            square = Mux((x[7:15] == 0) | (sh_x >= SUM_FRAC), 0, (sq << 24) >> sh_x[:6])
            ee = e[23:31]
            mant = Cat(e[:23], 1)
            left = Signal(range(-256, 256), name=f"she{lane}")
            m.d.comb += left.eq(ee - (150 - SUM_FRAC))
            from_e = Mux(ee == 0, 0, Mux(left >= 0, mant << left[:5],
                                         Mux(left < -24, 0, mant >> (-left)[:5])))
            term = Signal(SUM_FRAC + 1, name=f"term{lane}")
            with m.If(inside):
                m.d.sync += term.eq(Mux(self.softmax, from_e, square))
            with m.Else():
                m.d.sync += term.eq(0)
            terms.append(term)
        sum_valid0 = Signal()
        m.d.sync += sum_valid0.eq(self.take)
        wide = [Signal(SUM_BITS, name=f"wterm{i}") for i in range(fn)]
        for w, t in zip(wide, terms, strict=True):
            m.d.comb += w.eq(t)
        partial, sum_levels = _tree(m, wide, lambda a, b: (a + b)[:SUM_BITS], Const(1), "sum")
        sum_valid = Signal(sum_levels)
        m.d.sync += sum_valid.eq(Cat(sum_valid0, sum_valid[:-1]))
        total_sum = Signal(SUM_BITS)
        with m.If(sum_valid[-1]):
            m.d.sync += total_sum.eq(total_sum + partial)
        m.d.comb += [self.busy.eq(sum_valid0 | sum_valid.any()), self.total.eq(total_sum)]
        return m


class TopkLists(wiring.Component):
    """Top-k of a row, ``fn_lanes`` candidates a cycle (TOPK, MAX, TOPK_WIDE):

    1. in a cycle with ``insert``, each lane's candidate (``cands``, key -2: none) goes
       into its lane's list of the best :data:`MAX_K` (:func:`_better`: a larger key,
       then a lower index), best first;
    2. while ``merge`` (``fn_lanes`` · MAX_K cycles, no ``insert``), the lanes' lists
       shift one entry a cycle into ``final``, the best MAX_K of them all, and empty;
    3. ``clear`` empties ``final`` (keys -2) for TOPK_WIDE's next chunk.

    Every list starts empty with the unit's reset.
    """

    def __init__(self, fn_lanes):
        self.fn_lanes = fn_lanes
        super().__init__({
            "cands": In(data.ArrayLayout(Entry(), fn_lanes)),
            "insert": In(1),
            "merge": In(1),
            "clear": In(1),
            "final": Out(data.ArrayLayout(Entry(), MAX_K)),
        })

    def elaborate(self, platform):
        m = Module()
        fn = self.fn_lanes
        lists = [[Signal(Entry(), name=f"top{lane}_{i}", init={"key": -2})
                  for i in range(MAX_K)] for lane in range(fn)]
        final = [Signal(Entry(), name=f"final{i}", init={"key": -2}) for i in range(MAX_K)]

        def insert(entries, new, name):
            wins = [Signal(name=f"{name}_w{i}") for i in range(MAX_K)]
            for i, e in enumerate(entries):
                m.d.comb += wins[i].eq(_better(new, e))
            out = []
            for i, e in enumerate(entries):
                out.append(Mux(wins[i - 1] if i else 0, entries[i - 1], Mux(wins[i], new, e)))
            return out

        for lane in range(fn):
            updated = insert(lists[lane], self.cands[lane], f"ins{lane}")
            with m.If(self.insert):
                m.d.sync += [e.eq(u) for e, u in zip(lists[lane], updated, strict=True)]
        chain = [e for lst in lists for e in lst]
        merged = insert(final, chain[0], "merge")
        with m.If(self.merge):
            m.d.sync += [e.eq(u) for e, u in zip(final, merged, strict=True)]
            m.d.sync += [chain[i].eq(chain[i + 1]) for i in range(len(chain) - 1)]
            m.d.sync += chain[-1].key.eq(-2)
        with m.If(self.clear):
            m.d.sync += [e.key.eq(-2) for e in final]
        m.d.comb += [self.final[i].eq(e) for i, e in enumerate(final)]
        return m


class RowUnit(wiring.Component):
    """The row commands of the module docstring on ``data_width/16`` lanes.

    ``x`` and ``y`` (gamma, RMSNORM's last pass) are the realigned operand words of the
    current pass (the word holding elements ``[j·E, j·E + E)`` for E = data_width/16; a
    DEQUANTIZE word holds E/2 int32). After a pass the unit computes what the next one
    needs, then pulses ``again``: the core reads the operands again, ``y`` too while
    ``use_y``. ``o`` carries the result words for the stream writer (started by the
    core at DST). QUANTIZE and TOPK then wait for ``writer_done`` and pulse ``second``:
    the core restarts the writer at DST2 (4 bytes / 4·k bytes) for the second result.
    ``done`` once nothing more is to come (always for other commands). The unit is meant
    to be reset at every command's start.

    TOPK_WIDE repeats TOPK's pass and merge ``ceil(k/8)`` times; pass c takes only the
    entries after pass c-1's eighth pick (``_better`` is a strict total order over
    (value, index), so the passes pick ranks 8c..8c+7 of golden.va.topk_bf16). Each
    ``second`` pulse restarts the writer for chunk ``chunk``: its values (``indices`` 0:
    DST + 16·chunk, min(8, k - 8·chunk) bf16; chunk 0's values are the writer's first
    stream, started by the core) or its indices (``indices`` 1: DST2 + 32·chunk). The
    next pass reads x while the writer writes the indices.

    ``fn_lanes`` (default ``data_width/16``): the element pipeline and the RoPE lanes are
    built that many elements wide and take each word in ``data_width / (16 · fn_lanes)``
    pieces (:class:`hdl.va.narrow.WidthAdapter`); the reductions (max, sums, TOPK's
    per-lane lists) are built that wide too and take each word in as many cycles.
    Narrowed, the RoPE lanes, the sum's squares and the scalar steps' units also form
    their small partial products in logic (``lut_products``, for a small FPGA).

    ``elaborate`` builds the unit in phases, a method each, in this order (their
    statements' order is the priority of their assignments): decode, the pass plan, the
    element feed, the results' packing, the reductions' input, the max tree, the exact
    sum, the top-k lists, the scalar units, the pass control (an FSM whose states are
    built by ``_run_state``, ``_scalar_steps`` and ``_topk_states``). The signals the
    phases share are the attributes of one namespace, each named as its signal.
    """

    def __init__(self, data_width, fn_lanes=None):
        self.data_width = data_width
        self.fn_lanes = data_width // 16 if fn_lanes is None else fn_lanes
        check_fn_lanes(self.fn_lanes, data_width)
        self.lut_products = self.fn_lanes < data_width // 16
        super().__init__({
            "op": In(VaOpcode),
            "n": In(range(MAX_LENGTH + 1)),
            "k": In(range(MAX_LENGTH + 1)),
            "scalar": In(32),
            "x": In(stream.Signature(data_width)),
            "y": In(stream.Signature(data_width)),
            "z": In(stream.Signature(data_width)),
            "w": In(stream.Signature(data_width)),
            "split": In(1),
            "o": Out(stream.Signature(data_width)),
            "again": Out(1),
            "use_y": Out(1),
            "second": Out(1),
            "chunk": Out(range(MAX_LENGTH // MAX_K)),
            "indices": Out(1),
            "writer_done": In(1),
            "done": Out(1),
        })

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

    def elaborate(self, platform):
        m = Module()
        r = SimpleNamespace()           # what the phases below share, named as in each
        self._decode(m, r)
        self._pass_plan(m, r)
        self._element_feed(m, r)
        self._pack_results(m, r)
        self._reduction_input(m, r)
        self._max_tree(m, r)
        self._exact_sum(m, r)
        self._topk_lists(m, r)
        self._scalar_units(m, r)
        self._pass_control(m, r)
        with m.If(~r.has_second):
            m.d.comb += self.done.eq(1)
        return m

    def _decode(self, m, r):
        """The command's flags (``r.softmax`` ... ``r.has_second``)."""
        code = decode(m, self.op, {
            "softmax": VaOpcode.SOFTMAX, "rmsnorm": VaOpcode.RMSNORM,
            "quantize": VaOpcode.QUANTIZE, "dequantize": VaOpcode.DEQUANTIZE,
            "dq_mem": VaOpcode.DEQUANTIZE_MEM, "max": VaOpcode.MAX, "rope": VaOpcode.ROPE,
            "topk_wide": VaOpcode.TOPK_WIDE,
            "topk": (VaOpcode.TOPK, VaOpcode.MAX, VaOpcode.TOPK_WIDE),
            "packed": PACKED_OPCODES, "dst2": DST2_OPCODES}, "op")
        r.softmax, r.rmsnorm = code["softmax"], code["rmsnorm"]
        r.quantize, r.dequantize = code["quantize"], code["dequantize"]
        # DEQUANTIZE_MEM is DEQUANTIZE by f32_mul(the binary32 at SRC2 (y), SCALAR)
        r.dq_mem = code["dq_mem"]
        scale_in = Signal()                      # DEQUANTIZE_MEM: the scale word is taken
        scale_ready = Signal()                   # DEQUANTIZE_MEM: c holds the scale product
        r.scale_in, r.scale_ready = scale_in, scale_ready
        # MAX is TOPK's first value (golden.va.max_bf16), without the indices
        r.is_max, r.rope = code["max"], code["rope"]
        r.topk_wide = code["topk_wide"]
        r.topk = code["topk"]
        r.split = r.rope & self.split
        # half a word of results a word (spec.va.VA_COMMANDS: results half the size of x's)
        r.packed = code["packed"]
        r.writes_dst2 = code["dst2"]
        r.has_second = r.writes_dst2 | r.split   # done only at the end of the FSM

    def _pass_plan(self, m, r):
        """Words a pass reads (``r.total``), the passes, what each does, the pass's
        counters."""
        bb = self.data_width // 8
        softmax, rmsnorm, quantize, split = r.softmax, r.rmsnorm, r.quantize, r.split
        n = self.n
        # x's bytes (spec.va.VA_COMMANDS); split-half ROPE reads each half on its own
        src_bytes = operand_bytes(m, self.op, "src", {Count.LENGTH: n}, 0, units=(VaUnit.ROWS,),
                                  name="src_bytes")
        total = Signal(range(4 * MAX_LENGTH // bb + 2))
        m.d.comb += total.eq((Mux(split, n, src_bytes) + bb - 1) >> exact_log2(bb))

        pass_ = Signal(range(3))
        r.last_pass = Mux(softmax | rmsnorm, 2, Mux(quantize | split, 1, 0))
        r.reduce_pass = (((softmax | quantize) & (pass_ == 0)) | (rmsnorm & (pass_ < 2))
                         | r.topk)
        r.sum_x = rmsnorm & (pass_ == 1)         # the sum of squares, from x
        r.sum_e = softmax & (pass_ == 1)         # the sum of exp(x - m), from the pipeline
        r.emit = ~r.reduce_pass & ((pass_ == r.last_pass) | r.rope)
        m.d.comb += self.use_y.eq(rmsnorm & (pass_ == 2))

        running = Signal(init=1)                 # a pass is taking words
        taken = Signal.like(total)               # input words of this pass
        results = Signal.like(total)             # pipeline outputs of this pass
        hold = Signal()                          # reductions: the word has pieces left
        r.total, r.pass_, r.running, r.taken, r.results, r.hold = (
            total, pass_, running, taken, results, hold)

    def _element_feed(self, m, r):
        """x (and gamma) into the element pipeline, x / cos / sin into the RoPE lanes."""
        rope, split, running, taken, total = r.rope, r.split, r.running, r.taken, r.total
        upper = Signal()                         # RoPE adjacent: which half of the cos/sin word
        pipe, pipe_i, pipe_o, rl, rl_i, rl_o = self._units(m, r.packed, split, upper)
        c = Signal(32)                           # the pipeline's constant
        with m.If(r.dq_mem):
            m.d.comb += pipe.op.eq(VaOpcode.DEQUANTIZE)
        with m.Else():
            m.d.comb += pipe.op.eq(self.op)
        m.d.comb += pipe.c.eq(Mux(r.dequantize, self.scalar, c))
        feed = (running & ~r.reduce_pass & ~rope & (taken != total)
                & (r.scale_ready | ~r.dq_mem))
        need_y = self.use_y
        m.d.comb += [pipe_i.payload.x.eq(self.x.payload), pipe_i.payload.g.eq(self.y.payload),
                     pipe_i.valid.eq(feed & self.x.valid & (self.y.valid | ~need_y))]
        with m.If(feed):
            m.d.comb += [self.x.ready.eq(pipe_i.ready & (self.y.valid | ~need_y)),
                         self.y.ready.eq(pipe_i.ready & self.x.valid & need_y)]
        pipe_out = pipe_o.valid & pipe_o.ready

        # RoPE: x (adjacent), or x[:n/2] and x[n/2:] (split-half), with cos (y), sin (z).
        last_word = taken == total - 1
        all_valid = self.x.valid & self.y.valid & self.z.valid & (self.w.valid | ~split)
        m.d.comb += [rl.split.eq(split), rl.second.eq(r.pass_ == 1),
                     rl_i.payload.a.eq(self.x.payload), rl_i.payload.b.eq(self.w.payload),
                     rl_i.payload.c.eq(self.y.payload), rl_i.payload.s.eq(self.z.payload),
                     rl_i.valid.eq(running & rope & (taken != total) & all_valid)]
        rope_in = rl_i.valid & rl_i.ready
        with m.If(rope):
            m.d.comb += [self.x.ready.eq(rope_in), self.w.ready.eq(rope_in & split),
                         self.y.ready.eq(rope_in & (split | upper | last_word)),
                         self.z.ready.eq(rope_in & (split | upper | last_word))]
        with m.If(rope_in):
            m.d.sync += upper.eq(~upper)
        rope_out = rl_o.valid & rl_o.ready
        with m.If(pipe_out | rope_out):
            m.d.sync += r.results.eq(r.results + 1)
        r.upper, r.pipe, r.pipe_o, r.rl_o, r.c = upper, pipe, pipe_o, rl_o, c
        r.feed, r.pipe_out, r.rope_in = feed, pipe_out, rope_in

    def _pack_results(self, m, r):
        """Results to ``o``: as they are, or two half words packed into one (QUANTIZE,
        DEQUANTIZE)."""
        width = self.data_width
        pipe_o, rl_o, pipe_out, packed = r.pipe_o, r.rl_o, r.pipe_out, r.packed
        half = Signal(width // 2)
        have_half = Signal()
        flush = r.emit & packed & have_half & (r.results == r.total)
        with m.If(r.rope):
            wiring.connect(m, rl_o, wiring.flipped(self.o))
        with m.Elif(~r.emit):                    # SOFTMAX's exp values: to the sum
            m.d.comb += pipe_o.ready.eq(~r.hold)
        with m.Elif(~packed):
            m.d.comb += [self.o.payload.eq(pipe_o.payload.word), self.o.valid.eq(pipe_o.valid),
                         pipe_o.ready.eq(self.o.ready)]
        with m.Elif(flush):
            m.d.comb += [self.o.payload.eq(half), self.o.valid.eq(1)]
            with m.If(self.o.ready):
                m.d.sync += have_half.eq(0)
        with m.Elif(have_half):
            m.d.comb += [self.o.payload.eq(Cat(half, pipe_o.payload.word[:width // 2])),
                         self.o.valid.eq(pipe_o.valid), pipe_o.ready.eq(self.o.ready)]
            with m.If(pipe_out):
                m.d.sync += have_half.eq(0)
        with m.Else():
            m.d.comb += pipe_o.ready.eq(1)
            with m.If(pipe_o.valid):
                m.d.sync += [half.eq(pipe_o.payload.word[:width // 2]), have_half.eq(1)]
        r.have_half = have_half

    def _reduction_input(self, m, r):
        """Stage A of the reductions: the word (from x, or the pipeline's exp values) and
        its first index, then the piece of it this cycle (``r.p_word``, ``r.p_e``,
        ``r.p_base``). The reductions take it ``fn_lanes`` elements a cycle: a piece a
        cycle, the word held until its last piece (at the bus rate: one piece, a word
        every cycle)."""
        lanes = self.data_width // 16
        fn = self.fn_lanes
        pieces = lanes // fn
        running, taken, total, hold = r.running, r.taken, r.total, r.hold
        reduce_pass, sum_e = r.reduce_pass, r.sum_e
        a_valid = Signal()
        take_x = running & reduce_pass & (taken != total) & self.x.valid & ~hold
        with m.If(running & reduce_pass & (taken != total)):
            m.d.comb += self.x.ready.eq(~hold)
        with m.If(take_x | (r.feed & self.x.valid & self.x.ready) | r.rope_in):
            m.d.sync += taken.eq(taken + 1)
        a_word = Signal(data.ArrayLayout(16, lanes))
        a_e = Signal(data.ArrayLayout(32, lanes))
        a_base = Signal(range(MAX_LENGTH + lanes + 1))
        with m.If(~hold):
            m.d.sync += a_valid.eq(take_x | (sum_e & r.pipe_out))
            m.d.sync += [a_word.eq(self.x.payload), a_e.eq(r.pipe_o.payload.e),
                         a_base.eq(Mux(sum_e, r.results, taken) * lanes)]
        p_word = Signal(data.ArrayLayout(16, fn))  # the piece: its elements, first index
        p_e = Signal(data.ArrayLayout(32, fn))
        p_base = Signal.like(a_base)
        if pieces == 1:
            m.d.comb += [p_word.eq(a_word), p_e.eq(a_e), p_base.eq(a_base)]
        else:
            piece = Signal(range(pieces))
            m.d.comb += [hold.eq(a_valid & (piece != pieces - 1)),
                         p_word.eq(Value.cast(a_word).word_select(piece, 16 * fn)),
                         p_e.eq(Value.cast(a_e).word_select(piece, 32 * fn)),
                         p_base.eq(a_base + piece * fn)]
            with m.If(a_valid):
                m.d.sync += piece.eq(Mux(hold, piece + 1, 0))
        r.a_valid, r.p_word, r.p_e, r.p_base = a_valid, p_word, p_e, p_base

    def _max_tree(self, m, r):
        """The maximum (SOFTMAX: by value; RMSNORM: exponent field; QUANTIZE: |x|) in
        ``r.best``, and every lane's candidate (``r.cands``, TOPK's too)."""
        softmax, rmsnorm, topk = r.softmax, r.rmsnorm, r.topk
        a_valid, p_word, p_base, pass_ = r.a_valid, r.p_word, r.p_base, r.pass_
        n = self.n
        best = Signal(Entry(), init={"key": -2})
        poison = Signal()                        # SOFTMAX: a NaN; RMSNORM: inf or NaN
        cands = []
        poisoned = []
        # TOPK_WIDE after its first pass: only the entries after the last pick
        thr = Signal(Entry())
        have_thr = Signal()
        for lane in range(self.fn_lanes):
            x = p_word[lane]
            inside = a_valid & (p_base + lane < n)
            key = Signal(range(-2, 0x10000), name=f"key{lane}")
            exp_field = x[7:15]
            raw = Signal(range(-2, 0x10000), name=f"raw{lane}")
            m.d.comb += raw.eq(bf16_order_key(x))
            after = (thr.key > raw) | ((thr.key == raw) & (thr.index < p_base + lane))
            with m.If(~inside | (have_thr & ~after)):
                m.d.comb += key.eq(-2)
            with m.Elif(softmax | topk):
                m.d.comb += key.eq(raw)
            with m.Elif(rmsnorm):
                m.d.comb += key.eq(exp_field)
            with m.Else():
                m.d.comb += key.eq(Mux(exp_field == 0, 0, x[:15]))
            cand = Signal(Entry(), name=f"cand{lane}")
            m.d.comb += [cand.key.eq(key), cand.value.eq(x), cand.index.eq(p_base + lane)]
            cands.append(cand)
            poisoned.append(inside & (exp_field == 0xFF) & (rmsnorm | (x[:7] != 0)))

        def pick(a, b):
            return Mux(_better(b, a), b, a)

        winner, levels = _tree(m, cands, pick, Const(1), "max")
        tree_valid = Signal(levels)
        m.d.sync += tree_valid.eq(Cat(a_valid & (pass_ == 0) & ~topk, tree_valid[:-1]))
        with m.If(tree_valid[-1] & _better(winner, best)):
            m.d.sync += best.eq(winner)
        with m.If(a_valid & (pass_ == 0) & Cat(*poisoned).any()):
            m.d.sync += poison.eq(1)
        r.best, r.emax, r.poison, r.cands, r.thr, r.have_thr, r.tree_valid = (
            best, best.key[:8], poison, cands, thr, have_thr, tree_valid)

    def _exact_sum(self, m, r):
        """The exact sum (:class:`ExactSum`) of the pass's pieces: SOFTMAX's exp values,
        RMSNORM's scaled squares, in ``r.sum.total``."""
        m.submodules.exact_sum = r.sum = ExactSum(self.fn_lanes, self.data_width // 16,
                                                  self.lut_products)
        m.d.comb += [r.sum.word.eq(r.p_word), r.sum.e.eq(r.p_e), r.sum.base.eq(r.p_base),
                     r.sum.n.eq(self.n), r.sum.emax.eq(r.emax), r.sum.softmax.eq(r.softmax),
                     r.sum.take.eq(r.a_valid & (r.sum_x | r.sum_e))]

    def _topk_lists(self, m, r):
        """Top-k (:class:`TopkLists`): the pass's candidates into the lanes' lists, then
        while ``r.merging`` into ``r.final`` (MAX_K entries, best first)."""
        m.submodules.topk_lists = lists = TopkLists(self.fn_lanes)
        r.merging = Signal()
        m.d.comb += [lists.cands[lane].eq(cand) for lane, cand in enumerate(r.cands)]
        m.d.comb += [lists.insert.eq(r.topk & r.a_valid & ~r.merging),
                     lists.merge.eq(r.merging)]
        r.topk_lists, r.final = lists, [lists.final[i] for i in range(MAX_K)]

    def _scalar_units(self, m, r):
        """The scalar steps' shared units (normaliser, reciprocal, multiplier, adder,
        rsqrt) on ``r.t1`` / ``r.t2``, ``r.ready(*units)``, and DEQUANTIZE_MEM's scale
        product into the pipeline's constant before its first word."""
        lut = self.lut_products
        t1 = Signal(32)
        t2 = Signal(32)
        nt_value = Signal(SUM_BITS)
        nt_scale = Signal(range(-512, 512))
        # Each unit is a pipeline; a step waits out the deepest unit it reads (its inputs
        # hold still meanwhile).
        units = {}
        st = Stages(m, "nt", lut_products=lut)
        units["nt"] = (normalize_trunc(m, nt_value, SUM_BITS, nt_scale, 0, "nt", st), st)
        st = Stages(m, "rc", lut_products=lut)
        units["rc"] = (recip_f32(m, t1, "rc", st), st)
        st = Stages(m, "smul", lut_products=lut)
        units["mul"] = (f32_mul(m, t1, Mux(r.quantize, Const(RECIP_127, 32), t2), "smul", st),
                        st)
        st = Stages(m, "sadd", lut_products=lut)
        units["add"] = (f32_add_staged(m, t1, self.scalar, "sadd", st), st)
        st = Stages(m, "rs", lut_products=lut)
        units["rs"] = (rsqrt_f32(m, t1, "rs", st), st)
        r.nt, r.rc, r.mul, r.add, r.rs = (units[k][0] for k in ("nt", "rc", "mul", "add", "rs"))
        step_count = Signal(range(max(st.depth for _, st in units.values()) + 1))

        def ready(*names):
            """In a scalar step: the results of ``names`` are there (this cycle)."""
            depth = max(units[k][1].depth for k in names)
            done = step_count == depth
            m.d.sync += step_count.eq(Mux(done, 0, step_count + 1))
            return done
        # the row is all NaN
        r.spoiled = r.poison | (r.softmax & (r.best.value[7:15] == 0xFF))
        # DEQUANTIZE_MEM: t1 = the binary32 at SRC2 (the first word of y), t2 = SCALAR;
        # c = their product before the first word of x enters the pipeline
        dq_mem, scale_in, scale_ready = r.dq_mem, r.scale_in, r.scale_ready
        with m.If(dq_mem & ~scale_in):
            m.d.comb += self.y.ready.eq(1)
            with m.If(self.y.valid):
                m.d.sync += [t1.eq(self.y.payload[:32]), t2.eq(self.scalar), scale_in.eq(1)]
        with m.If(dq_mem & scale_in & ~scale_ready):
            with m.If(ready("mul")):
                m.d.sync += [r.c.eq(r.mul), scale_ready.eq(1)]
        m.d.comb += r.pipe.m.eq(r.best.value)
        r.t1, r.t2, r.nt_value, r.nt_scale, r.ready = t1, t2, nt_value, nt_scale, ready

    def _pass_control(self, m, r):
        """The passes' FSM: a pass, the scalar steps after it, the next pass (``again``),
        TOPK's merge and results, the second result (``second``), ``done``."""
        busy = Signal()
        m.d.comb += busy.eq(r.a_valid | r.tree_valid.any() | r.sum.busy)
        r.out_words = Signal(range(8))
        r.merged_count = Signal(range(self.fn_lanes * MAX_K))
        r.pass_end = (r.running & (r.taken == r.total) & ~busy
                      & (r.reduce_pass | ((r.results == r.total) & ~r.have_half)))
        with m.FSM():
            self._run_state(m, r)
            self._scalar_steps(m, r)
            with m.State("ROPE_WRITER"):           # the second halves go to DST + n
                with m.If(self.writer_done):
                    m.next = "ROPE_RESTART"
            with m.State("ROPE_RESTART"):
                m.d.comb += self.second.eq(1)
                m.next = "NEXT"
            with m.State("NEXT"):
                m.d.sync += [r.pass_.eq(r.pass_ + 1), r.taken.eq(0), r.results.eq(0),
                             r.upper.eq(0)]
                m.next = "AGAIN"
            with m.State("AGAIN"):
                m.d.comb += self.again.eq(1)
                m.d.sync += r.running.eq(1)
                m.next = "RUN"
            self._topk_states(m, r)
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)

    def _run_state(self, m, r):
        """RUN: a pass; at its end, where the command goes next."""
        with m.State("RUN"):
            with m.If(r.pass_end):
                m.d.sync += r.running.eq(0)
                with m.If(r.topk):
                    m.d.sync += r.merging.eq(1)
                    m.next = "MERGE"
                with m.Elif(r.pass_ != r.last_pass):
                    with m.If(r.rope):
                        m.next = "ROPE_WRITER"
                    with m.Elif(r.sum_e):
                        m.next = "SOFTMAX_SUM"
                    with m.Elif(r.sum_x):
                        m.next = "RMS_N"
                    with m.Elif(r.quantize):
                        best = r.best
                        m.d.sync += r.t1.eq(Mux(best.key == 0, 0, Cat(Const(0, 16),
                                                                      best.value[:15])))
                        m.next = "QUANT_SCALE"
                    with m.Else():
                        m.next = "NEXT"
                with m.Elif(r.writes_dst2):
                    m.next = "WAIT_WRITER"
                with m.Else():
                    m.next = "DONE"

    def _scalar_steps(self, m, r):
        """The scalar steps between passes: SOFTMAX's reciprocal of the sum, RMSNORM's
        rsqrt(sum/n + eps), QUANTIZE's scale and its reciprocal, into ``c``."""
        t1, t2, c, ready, spoiled = r.t1, r.t2, r.c, r.ready, r.spoiled
        with m.State("SOFTMAX_SUM"):
            m.d.comb += [r.nt_value.eq(r.sum.total), r.nt_scale.eq(-SUM_FRAC)]
            with m.If(ready("nt")):
                m.d.sync += t1.eq(r.nt)
                m.next = "SOFTMAX_RECIP"
        with m.State("SOFTMAX_RECIP"):
            with m.If(ready("rc")):
                m.d.sync += c.eq(Mux(spoiled, F32_CANONICAL_NAN, r.rc))
                m.next = "NEXT"
        with m.State("RMS_N"):
            m.d.comb += [r.nt_value.eq(self.n), r.nt_scale.eq(0)]
            with m.If(ready("nt")):
                m.d.sync += t1.eq(r.nt)
                m.next = "RMS_SUM"
        with m.State("RMS_SUM"):
            m.d.comb += [r.nt_value.eq(r.sum.total),
                         r.nt_scale.eq(2 * (r.emax - 126) - SUM_FRAC)]
            with m.If(ready("nt", "rc")):
                m.d.sync += [t2.eq(r.rc), t1.eq(r.nt)]
                m.next = "RMS_MEAN"
        with m.State("RMS_MEAN"):
            with m.If(ready("mul")):
                m.d.sync += t1.eq(r.mul)
                m.next = "RMS_EPS"
        with m.State("RMS_EPS"):
            with m.If(ready("add")):
                m.d.sync += t1.eq(r.add)
                m.next = "RMS_RSQRT"
        with m.State("RMS_RSQRT"):
            with m.If(ready("rs")):
                m.d.sync += c.eq(Mux(spoiled, F32_CANONICAL_NAN, r.rs))
                m.next = "NEXT"
        with m.State("QUANT_SCALE"):
            with m.If(ready("mul")):
                m.d.sync += t1.eq(r.mul)
                m.next = "QUANT_RECIP"
        with m.State("QUANT_RECIP"):
            with m.If(ready("rc")):
                m.d.sync += c.eq(r.rc)
                m.next = "NEXT"

    def _topk_states(self, m, r):
        """TOPK, MAX, TOPK_WIDE after a pass: the merge of the lanes' lists, the values,
        then the indices at DST2 (TOPK_WIDE: chunk by chunk, a pass each)."""
        width = self.data_width
        final, out_words, merged_count = r.final, r.out_words, r.merged_count

        def words_of(bits):
            return max(1, bits // width)

        with m.State("MERGE"):
            m.d.sync += merged_count.eq(merged_count + 1)
            with m.If(merged_count == self.fn_lanes * MAX_K - 1):   # every candidate is in
                m.d.sync += r.merging.eq(0)
                with m.If(r.topk_wide & (self.chunk != 0)):
                    m.next = "WAIT_VALUES"
                with m.Else():
                    m.next = "VALUES"
        with m.State("WAIT_VALUES"):               # TOPK_WIDE: the last indices written
            with m.If(self.writer_done):
                m.next = "RESTART_VALUES"
        with m.State("RESTART_VALUES"):            # the writer at DST + 16·chunk
            m.d.comb += self.second.eq(1)
            m.next = "VALUES"
        with m.State("VALUES"):
            values = Cat(*(e.value for e in final))
            m.d.comb += [self.o.valid.eq(1),
                         self.o.payload.eq((values >> (out_words * width))[:width])]
            with m.If(self.o.ready):
                m.d.sync += out_words.eq(out_words + 1)
                with m.If(out_words == words_of(16 * MAX_K) - 1):
                    m.d.sync += out_words.eq(0)
                    with m.If(r.is_max):
                        m.next = "DONE"
                    with m.Else():
                        m.next = "WAIT_WRITER"
        with m.State("WAIT_WRITER"):
            with m.If(self.writer_done):
                m.next = "RESTART_WRITER"
        with m.State("RESTART_WRITER"):
            m.d.comb += [self.second.eq(1), self.indices.eq(1)]
            m.next = "SECOND"
        with m.State("SECOND"):
            indices = Cat(*(Cat(e.index, Const(0, 32 - len(e.index))) for e in final))
            m.d.comb += [self.o.valid.eq(1),
                         self.o.payload.eq(Mux(r.quantize, r.t1,
                                               (indices >> (out_words * width))[:width]))]
            with m.If(self.o.ready):
                m.d.sync += out_words.eq(out_words + 1)
                with m.If(r.quantize | (out_words == words_of(32 * MAX_K) - 1)):
                    m.d.sync += out_words.eq(0)
                    with m.If(r.topk_wide & (self.chunk != (self.k - 1) >> 3)):
                        m.next = "NEXT_CHUNK"
                    with m.Else():
                        m.next = "DONE"
        with m.State("NEXT_CHUNK"):                # TOPK_WIDE: the next 8, after the last pick
            m.d.sync += [self.chunk.eq(self.chunk + 1), r.taken.eq(0), r.results.eq(0),
                         r.thr.eq(final[-1]), r.have_thr.eq(1)]
            m.d.comb += r.topk_lists.clear.eq(1)
            m.next = "AGAIN"
