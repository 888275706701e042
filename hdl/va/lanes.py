"""The lane engine: L bf16 lanes computing one elementwise operation or reduction."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.codes import VaOpcode
from hdl.ma.fp import bf16_mul, f32_add

__all__ = ["LaneEngine", "f32_to_bf16", "order_key"]


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
    (golden.va.add_bf16, mul_bf16, scale_bf16); a result vector leaves through one
    register stage. ``y`` is used (and waited for) only by ADD and MUL.

    Reductions (golden.va.sum_bf16, max_bf16): lane j takes elements j, j+L, ... (lanes
    past ``count`` in the last vector take nothing); after the last vector the lanes are
    combined pairwise, one tree level a cycle (lane i ← lanes 2i, 2i+1), with the same
    adders. One output vector follows: the binary32 sum in lanes 0-1, or the bf16 maximum
    in lane 0 (by value, -0 == +0, NaN lowest, ties to the lowest index).
    """

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
        op = self.op
        two = (op == VaOpcode.ADD) | (op == VaOpcode.MUL)
        is_sum, is_max = op == VaOpcode.SUM, op == VaOpcode.MAX
        reduce = is_sum | is_max
        ready_in = ~self.o.valid | self.o.ready
        have = self.x.valid & (self.y.valid | ~two)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        # Reduction state: per lane a binary32 sum, or the best (key, value, index).
        acc = Signal(data.ArrayLayout(32, lanes))
        best = Signal(data.ArrayLayout(data.StructLayout(
            {"have": 1, "key": range(-1, 0x10000), "value": 16, "index": range(65536)}), lanes))
        seen = Signal(range(65536 + lanes + 1))
        level = Signal(range(exact_log2(lanes) + 1))
        phase = Signal(range(4))          # 0 accumulate, 1 combine, 2 emitted
        accumulating = reduce & (phase == 0)
        combining = reduce & (phase == 1)
        take = Signal()
        m.d.comb += take.eq(Mux(reduce, accumulating & self.x.valid, ready_in & have))
        m.d.comb += [self.x.ready.eq(take), self.y.ready.eq(take & two)]

        result = Signal(data.ArrayLayout(16, lanes))
        for lane in range(lanes):
            a = self.x.payload[lane]
            b = Mux(op == VaOpcode.SCALE, self.scalar, self.y.payload[lane])
            product = bf16_mul(m, a, b, name=f"mul{lane}")
            pair = (acc[2 * lane], acc[2 * lane + 1]) if 2 * lane + 1 < lanes else (0, 0)
            add_a = Mux(is_sum, Mux(combining, pair[0], acc[lane]), Cat(Const(0, 16), a))
            add_b = Mux(is_sum, Mux(combining, pair[1], Cat(Const(0, 16), a)),
                        Cat(Const(0, 16), b))
            total = f32_add(m, add_a, add_b, name=f"add{lane}")
            m.d.comb += result[lane].eq(f32_to_bf16(Mux(op == VaOpcode.ADD, total, product)))
            in_range = seen + lane < self.count
            key = Signal(range(-1, 0x10000), name=f"key{lane}")
            m.d.comb += key.eq(order_key(a))
            mine = best[lane]
            with m.If(take & reduce & in_range):
                m.d.sync += acc[lane].eq(total)
                with m.If(~mine.have | (key > mine.key)):
                    m.d.sync += [mine.have.eq(1), mine.key.eq(key), mine.value.eq(a),
                                 mine.index.eq(seen + lane)]
            if 2 * lane + 1 < lanes:
                left, right = best[2 * lane], best[2 * lane + 1]
                right_wins = right.have & (~left.have | (right.key > left.key)
                                           | ((right.key == left.key) & (right.index < left.index)))
                with m.If(combining):
                    m.d.sync += [acc[lane].eq(total), mine.eq(Mux(right_wins, right, left))]
        with m.If(take & ~reduce):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(result)]

        with m.If(take & reduce):
            m.d.sync += seen.eq(seen + lanes)
            with m.If(seen + lanes >= self.count):
                m.d.sync += [phase.eq(1), level.eq(0)]
        with m.If(combining):
            m.d.sync += level.eq(level + 1)
            with m.If(level == exact_log2(lanes) - 1):
                m.d.sync += phase.eq(2)
        with m.If(reduce & (phase == 2) & (level == exact_log2(lanes))):
            # (a whole-vector assignment: lanes left out of a comb signal stay X in Icarus)
            m.d.sync += [self.o.valid.eq(1), level.eq(0),
                         self.o.payload.eq(Cat(Mux(is_sum, acc[0][:16], best[0].value),
                                               Mux(is_sum, acc[0][16:], 0)))]
        return m
