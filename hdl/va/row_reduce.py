"""The reductions of :class:`hdl.va.rows.RowUnit` over the pieces of a row
(:class:`hdl.va.row_common.Piece`, ``fn_lanes`` elements a cycle): the max tree, the
exact sum and the top-k lists. Each is a pipeline with a register after every level of
its tree, and takes part in the pass handshake (:class:`hdl.va.row_common.PassSignature`)
as ``passes``."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.common.fp import bf16_order_key, lut_product
from hdl.va.row_common import SUM_BITS, Entry, PassSignature, Piece, better, tree
from spec.va import MAX_K, MAX_LENGTH, SUM_FRAC

__all__ = ["MaxTree", "ExactSum", "TopkLists"]


def _pieces(fn_lanes, bus_lanes):
    """The reductions' input: a piece a cycle while ``valid``, never held back."""
    return In(stream.Signature(Piece(fn_lanes, bus_lanes), always_ready=True))


class MaxTree(wiring.Component):
    """The maximum of a row in ``best`` (SOFTMAX: by value; RMSNORM: the exponent field;
    QUANTIZE: \\|x\\|; a larger key, then a lower index), and every lane's candidate of
    the piece ``i`` (``cands``, combinational: what TOPK's lists take).

    The pieces of the ``first`` pass count (the max, and ``poison``: SOFTMAX a NaN,
    RMSNORM an inf or NaN); lanes at or past ``n`` are no candidates (key -2). While
    ``have_thr`` (TOPK_WIDE after its first chunk) only the entries after ``thr`` in
    that order are. ``passes.busy`` while a piece is in the tree. ``best`` starts empty
    (key -2) and ``poison`` at 0 with the unit's reset.
    """

    def __init__(self, fn_lanes, bus_lanes):
        self.fn_lanes = fn_lanes
        super().__init__({
            "i": _pieces(fn_lanes, bus_lanes),
            "n": In(range(MAX_LENGTH + 1)),
            "softmax": In(1),
            "rmsnorm": In(1),
            "topk": In(1),
            "first": In(1),
            "thr": In(Entry()),
            "have_thr": In(1),
            "cands": Out(data.ArrayLayout(Entry(), fn_lanes)),
            "best": Out(Entry()),
            "poison": Out(1),
            "passes": In(PassSignature()),
        })

    def elaborate(self, platform):
        m = Module()
        softmax, rmsnorm, topk, thr = self.softmax, self.rmsnorm, self.topk, self.thr
        valid, word, base = self.i.valid, self.i.payload.word, self.i.payload.base
        best = Signal(Entry(), init={"key": -2})
        poison = Signal()
        cands = []
        poisoned = []
        for lane in range(self.fn_lanes):
            x = word[lane]
            inside = valid & (base + lane < self.n)
            key = Signal(range(-2, 0x10000), name=f"key{lane}")
            exp_field = x[7:15]
            raw = Signal(range(-2, 0x10000), name=f"raw{lane}")
            m.d.comb += raw.eq(bf16_order_key(x))
            after = (thr.key > raw) | ((thr.key == raw) & (thr.index < base + lane))
            with m.If(~inside | (self.have_thr & ~after)):
                m.d.comb += key.eq(-2)
            with m.Elif(softmax | topk):
                m.d.comb += key.eq(raw)
            with m.Elif(rmsnorm):
                m.d.comb += key.eq(exp_field)
            with m.Else():
                m.d.comb += key.eq(Mux(exp_field == 0, 0, x[:15]))
            cand = Signal(Entry(), name=f"cand{lane}")
            m.d.comb += [cand.key.eq(key), cand.value.eq(x), cand.index.eq(base + lane)]
            cands.append(cand)
            poisoned.append(inside & (exp_field == 0xFF) & (rmsnorm | (x[:7] != 0)))

        def pick(a, b):
            return Mux(better(b, a), b, a)

        winner, levels = tree(m, cands, pick, Const(1), "max")
        tree_valid = Signal(levels)
        m.d.sync += tree_valid.eq(Cat(valid & self.first & ~topk, tree_valid[:-1]))
        with m.If(tree_valid[-1] & better(winner, best)):
            m.d.sync += best.eq(winner)
        with m.If(valid & self.first & Cat(*poisoned).any()):
            m.d.sync += poison.eq(1)
        m.d.comb += [self.cands[lane].eq(cand) for lane, cand in enumerate(cands)]
        m.d.comb += [self.best.eq(best), self.poison.eq(poison),
                     self.passes.busy.eq(tree_valid.any()), self.passes.done.eq(self.passes.start)]
        return m


class ExactSum(wiring.Component):
    """The exact fixed-point sum of a row (:data:`spec.va.SUM_FRAC` fraction bits,
    :data:`hdl.va.row_common.SUM_BITS` wide: 65 536 terms below 2**41), ``fn_lanes``
    elements a cycle.

    While ``sums``, each piece ``i`` (bf16 x in ``word``, the element pipeline's binary32
    values in ``e``) adds to ``total``; lanes at or past ``n`` add nothing. SOFTMAX
    (``softmax``): the exp values ``e``; RMSNORM: the squares of x scaled by
    2**(2·(exponent − ``emax``)), so the largest is below 4. A pipeline (the terms | a
    register after each level of the tree | ``total``) that never stalls;
    ``passes.busy`` while a piece is in it. ``total`` starts at 0 with the unit's reset.
    ``lut_products``: the 8×8 squares in logic.
    """

    def __init__(self, fn_lanes, bus_lanes, lut_products=False):
        self.fn_lanes, self.lut_products = fn_lanes, lut_products
        super().__init__({
            "i": _pieces(fn_lanes, bus_lanes),
            "n": In(range(MAX_LENGTH + 1)),
            "emax": In(8),
            "softmax": In(1),
            "sums": In(1),
            "total": Out(SUM_BITS),
            "passes": In(PassSignature()),
        })

    def elaborate(self, platform):
        m = Module()
        p_word, p_e, p_base = self.i.payload.word, self.i.payload.e, self.i.payload.base
        emax = self.emax
        terms = []
        for lane in range(self.fn_lanes):
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
        m.d.sync += sum_valid0.eq(self.i.valid & self.sums)
        wide = [Signal(SUM_BITS, name=f"wterm{i}") for i in range(self.fn_lanes)]
        for w, t in zip(wide, terms, strict=True):
            m.d.comb += w.eq(t)
        partial, sum_levels = tree(m, wide, lambda a, b: (a + b)[:SUM_BITS], Const(1), "sum")
        sum_valid = Signal(sum_levels)
        m.d.sync += sum_valid.eq(Cat(sum_valid0, sum_valid[:-1]))
        total_sum = Signal(SUM_BITS)
        with m.If(sum_valid[-1]):
            m.d.sync += total_sum.eq(total_sum + partial)
        m.d.comb += [self.passes.busy.eq(sum_valid0 | sum_valid.any()),
                     self.passes.done.eq(self.passes.start), self.total.eq(total_sum)]
        return m


class TopkLists(wiring.Component):
    """Top-k of a row, ``fn_lanes`` candidates a cycle (TOPK, MAX, TOPK_WIDE):

    1. in a cycle with ``insert`` (and no merge), each lane's candidate (``cands``, key
       -2: none) goes into its lane's list of the best :data:`MAX_K` (a larger key, then
       a lower index), best first;
    2. from ``passes.start``, for ``fn_lanes`` · MAX_K cycles, the lanes' lists shift one
       entry a cycle into ``final``, the best MAX_K of them all, and empty; ``passes.done``
       in the last of them;
    3. ``clear`` empties ``final`` (keys -2) for TOPK_WIDE's next chunk.

    Every list starts empty with the unit's reset; ``passes.busy`` is 0 (a candidate is
    in its list the cycle after ``insert``).
    """

    def __init__(self, fn_lanes):
        self.fn_lanes = fn_lanes
        super().__init__({
            "cands": In(data.ArrayLayout(Entry(), fn_lanes)),
            "insert": In(1),
            "clear": In(1),
            "final": Out(data.ArrayLayout(Entry(), MAX_K)),
            "passes": In(PassSignature()),
        })

    def elaborate(self, platform):
        m = Module()
        fn = self.fn_lanes
        lists = [[Signal(Entry(), name=f"top{lane}_{i}", init={"key": -2})
                  for i in range(MAX_K)] for lane in range(fn)]
        final = [Signal(Entry(), name=f"final{i}", init={"key": -2}) for i in range(MAX_K)]
        merging = Signal()
        merged_count = Signal(range(fn * MAX_K))

        def insert(entries, new, name):
            wins = [Signal(name=f"{name}_w{i}") for i in range(MAX_K)]
            for i, e in enumerate(entries):
                m.d.comb += wins[i].eq(better(new, e))
            out = []
            for i, e in enumerate(entries):
                out.append(Mux(wins[i - 1] if i else 0, entries[i - 1], Mux(wins[i], new, e)))
            return out

        for lane in range(fn):
            updated = insert(lists[lane], self.cands[lane], f"ins{lane}")
            with m.If(self.insert & ~merging):
                m.d.sync += [e.eq(u) for e, u in zip(lists[lane], updated, strict=True)]
        chain = [e for lst in lists for e in lst]
        merged = insert(final, chain[0], "merge")
        with m.If(self.passes.start):
            m.d.sync += merging.eq(1)
        with m.If(merging):
            m.d.sync += [e.eq(u) for e, u in zip(final, merged, strict=True)]
            m.d.sync += [chain[i].eq(chain[i + 1]) for i in range(len(chain) - 1)]
            m.d.sync += [chain[-1].key.eq(-2), merged_count.eq(merged_count + 1)]
            with m.If(merged_count == fn * MAX_K - 1):       # every candidate is in
                m.d.sync += merging.eq(0)
                m.d.comb += self.passes.done.eq(1)
        with m.If(self.clear):
            m.d.sync += [e.key.eq(-2) for e in final]
        m.d.comb += [self.final[i].eq(e) for i, e in enumerate(final)]
        return m
