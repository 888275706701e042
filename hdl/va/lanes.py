"""The lane engine: L bf16 lanes computing one elementwise operation or reduction."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.codes import VaOpcode
from hdl.ma.fp import bf16_mul, f32_add_pipelined

__all__ = ["LaneEngine", "f32_to_bf16", "order_key"]

_F32_MINUS_ZERO = 0x80000000
_SUM_LOOP = 6       # registers around SUM's loop: the deep adder's five, then the sum


def f32_to_bf16(value):
    """binary32 bits → bf16 bits, nearest even. Correct for every value the MA's units
    produce: normals, zeros, infinities and the canonical NaN (which stays 0x7FC0)."""
    return (value + 0x7FFF + value[16])[16:32]


def order_key(bits):
    """Signed key that orders bf16 values: -0 == +0, NaN (key -1) below everything."""
    b = Mux(bits == 0x8000, 0, bits)
    nan = (b[7:15] == 0xFF) & (b[:7] != 0)
    key = Mux(b[15], 0x7FFF - b[:15], 0x8000 + b)
    return Mux(nan, -1, key.as_signed())


class LaneEngine(wiring.Component):
    """``lanes`` bf16 lanes: ADD (x + y), MUL (x · y), SCALE (x · scalar), and the
    reductions SUM and MAX over ``count`` elements.

    Elementwise: each lane computes in binary32 with the MA's units (:mod:`hdl.ma.fp`: an
    exact bf16 product, a round-to-nearest-even sum) and rounds to bf16
    (golden.va.add_bf16, mul_bf16, scale_bf16). The lanes are a pipeline without stalls
    (a vector taken in cycle t is written into the output FIFO in cycle t + 8): stage 0
    multiplies the significands, stage 1 forms the adder's operands (ADD: x and y;
    MUL/SCALE: the exact product and -0, which the adder returns unchanged), the binary32
    adder follows in six stages (``f32_add_pipelined(deep=True)``), then the rounding to
    bf16. A vector is taken only when the output FIFO
    (:data:`FIFO_DEPTH` vectors) has room for it beside every vector in flight, so
    back-pressure never has to stop the pipeline. ``y`` is used (and waited for) only by
    ADD and MUL.

    Reductions (golden.va.sum_bf16, max_bf16): lane j takes elements j, j+L, ... (lanes
    past ``count`` in the last vector take nothing); after the last vector the lanes are
    combined pairwise, one tree level at a time (lane i ← lanes 2i, 2i+1), with the same
    adders. SUM's loop (sum → adder → sum) is six registers long, so a SUM takes a
    vector (or a tree level) every sixth cycle; each lane's sum is still formed in
    element order with the same roundings. One output vector follows: the binary32 sum in
    lanes 0-1, or the bf16 maximum in lane 0 (by value, -0 == +0, NaN lowest, ties to the
    lowest index).

    ``op``, ``scalar`` and ``count`` must hold still from one cycle before the first
    vector until the result is out (the core latches them at START and resets the engine).
    """

    FIFO_DEPTH = 12

    def __init__(self, lanes):
        self.lanes = lanes
        vec = data.ArrayLayout(16, lanes)
        super().__init__({
            "op": In(8),
            "scalar": In(16),
            "count": In(range(65537)),
            "x": In(stream.Signature(vec)),
            "y": In(stream.Signature(vec)),
            "o": Out(stream.Signature(vec)),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        # The operation, decoded into registers (``op`` fans out to every lane).
        is_add, scale, two = Signal(), Signal(), Signal()
        is_sum, is_max, reduce = Signal(), Signal(), Signal()
        op = self.op
        m.d.sync += [is_add.eq(op == VaOpcode.ADD), scale.eq(op == VaOpcode.SCALE),
                     two.eq((op == VaOpcode.ADD) | (op == VaOpcode.MUL)),
                     is_sum.eq(op == VaOpcode.SUM), is_max.eq(op == VaOpcode.MAX),
                     reduce.eq((op == VaOpcode.SUM) | (op == VaOpcode.MAX))]

        m.submodules.fifo = out_fifo = fifo.SyncFIFOBuffered(width=16 * lanes,
                                                            depth=self.FIFO_DEPTH)
        m.d.comb += [self.o.payload.eq(out_fifo.r_data), self.o.valid.eq(out_fifo.r_rdy),
                     out_fifo.r_en.eq(self.o.ready)]
        # Room in the FIFO for a vector beside those in flight.
        free = Signal(range(self.FIFO_DEPTH + 1), init=self.FIFO_DEPTH)
        have = self.x.valid & (self.y.valid | ~two)

        # Reduction state: per lane a binary32 sum, or the best (key, value, index).
        acc = Signal(data.ArrayLayout(32, lanes))
        best = Signal(data.ArrayLayout(data.StructLayout(
            {"have": 1, "key": range(-1, 0x10000), "value": 16, "index": range(65536)}), lanes))
        seen = Signal(range(65536 + lanes + 1))
        level = Signal(range(exact_log2(lanes) + 1))
        phase = Signal(range(4))          # 0 accumulate, 1 combine, 2 emit, 3 done
        wait = Signal(range(_SUM_LOOP))   # SUM: cycles until the sums are written
        idle = wait == 0
        accumulating = reduce & (phase == 0) & idle
        combine = reduce & (phase == 1) & idle
        take = Signal()
        m.d.comb += take.eq(Mux(reduce, accumulating & self.x.valid, have & (free != 0)))
        m.d.comb += [self.x.ready.eq(take), self.y.ready.eq(take & two)]
        reduce_take = take & reduce
        with m.If(~idle):
            m.d.sync += wait.eq(wait - 1)
        with m.Elif(is_sum & (reduce_take | combine)):
            m.d.sync += wait.eq(_SUM_LOOP - 1)

        # The adder's operands: SUM's running sums and x (accumulating), pairs of sums
        # (combining), or the elementwise operands (selects registered: phase changes at
        # least _SUM_LOOP cycles before the next SUM step).
        use_acc, use_pair = Signal(), Signal()
        m.d.sync += [use_acc.eq((op == VaOpcode.SUM) & (phase != 1)),
                     use_pair.eq((op == VaOpcode.SUM) & (phase == 1))]
        valid0, valid1 = Signal(), Signal()
        m.d.sync += [valid0.eq(take & ~reduce), valid1.eq(valid0)]
        result = Signal(data.ArrayLayout(16, lanes))
        raw_valid = Signal()
        for lane in range(lanes):
            a = self.x.payload[lane]
            b = Mux(scale, self.scalar, self.y.payload[lane])
            # Stage 0: the product of the significands (a multiplier block of its own).
            a0, b0 = Signal(16, name=f"a0_{lane}"), Signal(16, name=f"b0_{lane}")
            sig = Signal(16, name=f"sig{lane}")
            m.d.sync += [a0.eq(a), b0.eq(b), sig.eq(Cat(a[:7], 1) * Cat(b[:7], 1))]
            # Stage 1: the adder's operands.
            product = bf16_mul(m, a0, b0, name=f"mul{lane}", product=sig)
            op_a, op_b = Signal(32, name=f"opa{lane}"), Signal(32, name=f"opb{lane}")
            m.d.sync += [op_a.eq(Mux(is_add, Cat(Const(0, 16), a0), product)),
                         op_b.eq(Mux(is_add, Cat(Const(0, 16), b0), _F32_MINUS_ZERO))]
            pair = (acc[2 * lane], acc[2 * lane + 1]) if 2 * lane + 1 < lanes else (0, 0)
            add_a = Mux(use_pair, pair[0], Mux(use_acc, acc[lane], op_a))
            add_b = Mux(use_pair, pair[1], Mux(use_acc, Cat(Const(0, 16), a), op_b))
            in_range = seen + lane < self.count
            writes = (reduce_take & in_range) | (combine & (2 * lane + 1 < lanes))
            if lane == 0:
                total, carried = f32_add_pipelined(m, add_a, add_b, name=f"add{lane}",
                                                   carry={"w": writes, "v": valid1}, deep=True)
                raw_valid_in = carried["v"]
            else:
                total, carried = f32_add_pipelined(m, add_a, add_b, name=f"add{lane}",
                                                   carry={"w": writes}, deep=True)
            with m.If(carried["w"] & is_sum):
                m.d.sync += acc[lane].eq(total)
            raw = Signal(32, name=f"raw{lane}")
            m.d.sync += raw.eq(total)
            m.d.comb += result[lane].eq(f32_to_bf16(raw))
            key = Signal(range(-1, 0x10000), name=f"key{lane}")
            m.d.comb += key.eq(order_key(a))
            mine = best[lane]
            with m.If(reduce_take & in_range):
                with m.If(~mine.have | (key > mine.key)):
                    m.d.sync += [mine.have.eq(1), mine.key.eq(key), mine.value.eq(a),
                                 mine.index.eq(seen + lane)]
            if 2 * lane + 1 < lanes:
                left, right = best[2 * lane], best[2 * lane + 1]
                right_wins = right.have & (~left.have | (right.key > left.key)
                                           | ((right.key == left.key) & (right.index < left.index)))
                with m.If(combine):
                    m.d.sync += mine.eq(Mux(right_wins, right, left))
        m.d.sync += raw_valid.eq(raw_valid_in)

        emit = reduce & (phase == 2) & idle
        m.d.comb += [out_fifo.w_en.eq(raw_valid | emit),
                     out_fifo.w_data.eq(Mux(emit, Cat(Mux(is_sum, acc[0][:16], best[0].value),
                                                      Mux(is_sum, acc[0][16:], 0)), result))]
        # free: - a vector taken, + a vector read out
        read = self.o.valid & self.o.ready
        with m.If((take & ~reduce) & ~read):
            m.d.sync += free.eq(free - 1)
        with m.Elif(~(take & ~reduce) & read):
            m.d.sync += free.eq(free + 1)

        with m.If(reduce_take):
            m.d.sync += seen.eq(seen + lanes)
            with m.If(seen + lanes >= self.count):
                m.d.sync += [phase.eq(1), level.eq(0)]
        with m.If(combine):
            m.d.sync += level.eq(level + 1)
            with m.If(level == exact_log2(lanes) - 1):
                m.d.sync += phase.eq(2)
        with m.If(emit):
            m.d.sync += phase.eq(3)
        return m
