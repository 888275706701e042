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

The unit's parts are components of their own, joined by streams and by the pass
handshake (:class:`hdl.va.row_common.PassSignature`): the element feed and the results'
packing (:class:`hdl.va.row_feed.ElementFeed`, with the :class:`RopeLanes`), the max tree,
the exact sum and the top-k lists (:mod:`hdl.va.row_reduce`), the scalar sequencer
(:class:`hdl.va.row_scalar.ScalarSequencer`); :class:`RowUnit` holds the pass plan, the
reductions' input and the pass control.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.codes import VaOpcode, decode
from hdl.va.narrow import check_fn_lanes
from hdl.va.opcodes import DST2_OPCODES, PACKED_OPCODES, operand_bytes
from hdl.va.row_common import Entry, PassSignature, Piece
from hdl.va.row_feed import ElementFeed, RopeLanes
from hdl.va.row_reduce import ExactSum, MaxTree, TopkLists
from hdl.va.row_scalar import ScalarSequencer
from spec.va import FIX, MAX_K, MAX_LENGTH, Count, VaUnit

__all__ = ["RowUnit", "RopeLanes", "ExactSum", "TopkLists"]

assert FIX == 30


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
    entries after pass c-1's eighth pick (:func:`hdl.va.row_common.better` is a strict
    total order over (value, index), so the passes pick ranks 8c..8c+7 of
    golden.va.topk_bf16). Each
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

    ``elaborate`` builds the unit from its parts (the module docstring); between them
    run the pass plan (``_pass_plan``), the reductions' input (``_reduction_input``) and
    the pass control (an FSM whose states are built by ``_pass_control``, ``_run_state``
    and ``_topk_states``). The signals these share are the attributes of one
    namespace, each named as its signal.
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

    def elaborate(self, platform):
        m = Module()
        width, fn, lut = self.data_width, self.fn_lanes, self.lut_products
        r = SimpleNamespace()           # what the phases below share, named as in each
        self._decode(m, r)
        self._pass_plan(m, r)
        m.submodules.feed = feed = ElementFeed(width, fn, lut)
        m.submodules.max_tree = mx = MaxTree(fn, width // 16)
        m.submodules.exact_sum = total = ExactSum(fn, width // 16, lut)
        m.submodules.topk_lists = lists = TopkLists(fn)
        m.submodules.scalar = seq = ScalarSequencer(width, lut)
        r.feed, r.lists, r.seq = feed, lists, seq
        # the pass control's side of each unit's pass handshake
        r.ctl = {name: PassSignature().create(path=(f"{name}_pass",))
                 for name in ("max", "sum", "lists", "seq")}
        for name, unit in (("max", mx), ("sum", total), ("lists", lists), ("seq", seq)):
            wiring.connect(m, r.ctl[name], unit.passes)
        running, taken, words = r.running, r.taken, r.total

        # the element feed: x (and gamma), cos, sin, x[n/2:] in; the results to o
        m.d.comb += [feed.op.eq(self.op), feed.scalar.eq(self.scalar), feed.c.eq(seq.c),
                     feed.row_max.eq(mx.best.value), feed.dq_mem.eq(r.dq_mem),
                     feed.dequantize.eq(r.dequantize), feed.packed.eq(r.packed),
                     feed.rope.eq(r.rope), feed.split.eq(r.split), feed.use_y.eq(self.use_y),
                     feed.emit.eq(r.emit), feed.second_half.eq(r.pass_ == 1),
                     feed.go.eq(running & ~r.reduce_pass & (taken != words)
                                & (seq.scale_ready | ~r.dq_mem)),
                     feed.last_word.eq(taken == words - 1),
                     feed.flush.eq(r.results == words), feed.e.ready.eq(~r.hold)]
        wiring.connect(m, wiring.flipped(self.x), feed.x)
        # DEQUANTIZE_MEM: y's first word is the scale, taken before the pass
        with m.If(r.dq_mem & ~seq.scale_ready):
            wiring.connect(m, wiring.flipped(self.y), seq.y)
        with m.Else():
            wiring.connect(m, wiring.flipped(self.y), feed.y)
        wiring.connect(m, wiring.flipped(self.z), feed.z)
        wiring.connect(m, wiring.flipped(self.w), feed.w)
        wiring.connect(m, feed.o, wiring.flipped(self.o))
        with m.If(feed.produced):
            m.d.sync += r.results.eq(r.results + 1)

        # the reductions: the pieces of x (or of the exp values) to the max tree and the
        # sum, the max tree's candidates to the top-k lists
        piece = self._reduction_input(m, r, feed)
        wiring.connect(m, piece, mx.i)
        wiring.connect(m, piece, total.i)          # ready is the constant 1 in all three
        m.d.comb += [mx.n.eq(self.n), mx.softmax.eq(r.softmax), mx.rmsnorm.eq(r.rmsnorm),
                     mx.topk.eq(r.topk), mx.first.eq(r.pass_ == 0), mx.thr.eq(r.thr),
                     mx.have_thr.eq(r.have_thr)]
        m.d.comb += [total.n.eq(self.n), total.emax.eq(mx.best.key[:8]),
                     total.softmax.eq(r.softmax), total.sums.eq(r.sum_x | r.sum_e)]
        m.d.comb += [lists.cands.eq(mx.cands), lists.insert.eq(r.topk & piece.valid)]

        # the scalar steps between the passes
        m.d.comb += [seq.softmax.eq(r.softmax), seq.sum_e.eq(r.sum_e), seq.sum_x.eq(r.sum_x),
                     seq.quantize.eq(r.quantize), seq.dq_mem.eq(r.dq_mem),
                     seq.poison.eq(mx.poison), seq.n.eq(self.n), seq.scalar.eq(self.scalar),
                     seq.total.eq(total.total), seq.emax.eq(mx.best.key[:8]),
                     seq.best.eq(mx.best)]

        r.busy = piece.valid | Cat(*(ctl.busy for ctl in r.ctl.values())).any()
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
        # TOPK_WIDE after its first chunk: the max tree's candidates only after the last pick
        r.thr, r.have_thr = Signal(Entry()), Signal()
        r.total, r.pass_, r.running, r.taken, r.results, r.hold = (
            total, pass_, running, taken, results, hold)

    def _reduction_input(self, m, r, feed):
        """Stage A of the reductions: the word (from x, or the element feed's exp values
        ``e``) and its first index, then the piece of it this cycle (the stream returned,
        never held back). The reductions take it ``fn_lanes`` elements a cycle: a piece
        a cycle, the word held until its last piece (at the bus rate: one piece, a word
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
        with m.If(take_x | feed.took):
            m.d.sync += taken.eq(taken + 1)
        a_word = Signal(data.ArrayLayout(16, lanes))
        a_e = Signal(data.ArrayLayout(32, lanes))
        a_base = Signal(range(MAX_LENGTH + lanes + 1))
        with m.If(~hold):
            m.d.sync += a_valid.eq(take_x | (sum_e & feed.e.valid & feed.e.ready))
            m.d.sync += [a_word.eq(self.x.payload), a_e.eq(feed.e.payload),
                         a_base.eq(Mux(sum_e, r.results, taken) * lanes)]
        out = stream.Signature(Piece(fn, lanes), always_ready=True).create(path=("piece",))
        p = out.payload
        m.d.comb += out.valid.eq(a_valid)
        if pieces == 1:
            m.d.comb += [p.word.eq(a_word), p.e.eq(a_e), p.base.eq(a_base)]
        else:
            piece = Signal(range(pieces))
            m.d.comb += [hold.eq(a_valid & (piece != pieces - 1)),
                         p.word.eq(Value.cast(a_word).word_select(piece, 16 * fn)),
                         p.e.eq(Value.cast(a_e).word_select(piece, 32 * fn)),
                         p.base.eq(a_base + piece * fn)]
            with m.If(a_valid):
                m.d.sync += piece.eq(Mux(hold, piece + 1, 0))
        return out

    def _pass_control(self, m, r):
        """The passes' FSM: a pass, the work between passes (the scalar steps, TOPK's
        merge: the units' pass handshakes), the next pass (``again``), TOPK's results,
        the second result (``second``), ``done``."""
        r.out_words = Signal(range(8))
        r.pass_end = (r.running & (r.taken == r.total) & ~r.busy
                      & (r.reduce_pass | ((r.results == r.total) & ~r.feed.have_half)))
        with m.FSM():
            self._run_state(m, r)
            with m.State("STEPS"):                 # the scalar steps
                with m.If(r.ctl["seq"].done):
                    m.next = "NEXT"
            with m.State("ROPE_WRITER"):           # the second halves go to DST + n
                with m.If(self.writer_done):
                    m.next = "ROPE_RESTART"
            with m.State("ROPE_RESTART"):
                m.d.comb += self.second.eq(1)
                m.next = "NEXT"
            with m.State("NEXT"):
                m.d.sync += [r.pass_.eq(r.pass_ + 1), r.taken.eq(0), r.results.eq(0)]
                m.d.comb += r.feed.restart.eq(1)
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
                    m.d.comb += r.ctl["lists"].start.eq(1)
                    m.next = "MERGE"
                with m.Elif(r.pass_ != r.last_pass):
                    with m.If(r.rope):
                        m.next = "ROPE_WRITER"
                    with m.Elif(r.sum_e | r.sum_x | r.quantize):
                        m.d.comb += r.ctl["seq"].start.eq(1)
                        m.next = "STEPS"
                    with m.Else():
                        m.next = "NEXT"
                with m.Elif(r.writes_dst2):
                    m.next = "WAIT_WRITER"
                with m.Else():
                    m.next = "DONE"

    def _topk_states(self, m, r):
        """TOPK, MAX, TOPK_WIDE after a pass: the merge of the lanes' lists, the values,
        then the indices at DST2 (TOPK_WIDE: chunk by chunk, a pass each)."""
        width = self.data_width
        final, out_words = [r.lists.final[i] for i in range(MAX_K)], r.out_words

        def words_of(bits):
            return max(1, bits // width)

        with m.State("MERGE"):                     # the lanes' lists into one
            with m.If(r.ctl["lists"].done):
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
                         self.o.payload.eq(Mux(r.quantize, r.seq.scale,
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
                         r.thr.eq(final[MAX_K - 1]), r.have_thr.eq(1)]
            m.d.comb += r.lists.clear.eq(1)
            m.next = "AGAIN"
