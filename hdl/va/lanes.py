"""The lane engine: L bf16 lanes computing one elementwise operation or reduction."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from golden.va import SUM_INTERLEAVE
from hdl.codes import VaOpcode
from hdl.ma.fp import bf16_mul, f32_add_pipelined

__all__ = ["LaneEngine", "f32_to_bf16", "order_key"]

_F32_MINUS_ZERO = 0x80000000
# SUM's loop: the partial sums' read register, the deep adder's five, the partial memory.
_SUM_LOOP = 7
# A lane starts a vector every cycle if a partial is read again at the earliest
# SUM_INTERLEAVE cycles after it was read, i.e. after its new value is written.
assert _SUM_LOOP <= SUM_INTERLEAVE and SUM_INTERLEAVE & (SUM_INTERLEAVE - 1) == 0


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
    past ``count`` in the last vector take nothing). MAX keeps one best value per lane
    and combines the lanes pairwise after the last vector, a tree level a cycle (lane i ←
    lanes 2i, 2i+1). SUM takes a vector every cycle: each lane keeps D =
    ``SUM_INTERLEAVE`` (8) binary32 partial sums in a small memory, and vector v adds to
    partial v mod D (read, registered, the five-register adder, written back: a loop of
    seven cycles, so the partial is ready when vector v + D comes). The first D vectors
    add to +0 instead of the memory (which is not reset); after a SUM of fewer than D
    vectors, steps without a vector (adding -0, which changes nothing) write +0 into the
    rest. Then, with the same adders, one address a cycle: log2(L) lane levels (lane i ←
    lanes 2i, 2i+1, for each of the D partials), then log2(D) levels in lane 0 (partial a
    ← partials 2a, 2a+1, through a second read port); a level that reads what the one
    before wrote at other addresses waits for its last write. One output vector follows:
    the binary32 sum in lanes 0-1, or the bf16 maximum in lane 0 (by value, -0 == +0, NaN
    lowest, ties to the lowest index).

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

        # Reduction state: SUM's partials (memories, below); MAX's best (key, value, index).
        best = Signal(data.ArrayLayout(data.StructLayout(
            {"have": 1, "key": range(-1, 0x10000), "value": 16, "index": range(65536)}), lanes))
        depth = SUM_INTERLEAVE
        lane_levels, levels = exact_log2(lanes), exact_log2(lanes) + exact_log2(depth)
        seen = Signal(range(65536 + lanes + 1))
        level = Signal(range(levels + 1))
        phase = Signal(range(4))          # 0 accumulate, 1 combine, 2 emit, 3 done
        wait = Signal(range(_SUM_LOOP + 1))   # SUM: cycles until the partials are written
        idle = wait == 0
        rest = Signal()                   # every vector taken
        vec = Signal(range(depth))        # SUM: the partial of the next step (v mod D)
        first = Signal(init=1)            # SUM: the first D steps (partials from +0)
        addr = Signal(range(depth))       # SUM: the address of the next combine step
        accumulating = reduce & (phase == 0) & ~rest
        take = Signal()
        m.d.comb += take.eq(Mux(reduce, accumulating & self.x.valid, have & (free != 0)))
        m.d.comb += [self.x.ready.eq(take), self.y.ready.eq(take & two)]
        reduce_take = take & reduce
        last_vector = seen + lanes >= self.count

        # SUM: a step adds a vector (or nothing, after the last one while the first D
        # steps are not done) to partial ``vec``; a combine step reads address ``addr``.
        partial = level >= lane_levels
        step = (reduce_take | (reduce & (phase == 0) & rest)) & is_sum
        issue = is_sum & (phase == 1) & idle
        level_last = Signal(range(depth))     # the last address of this level
        with m.Switch(level):
            for lv in range(levels):
                with m.Case(lv):
                    m.d.comb += level_last.eq((depth if lv < lane_levels
                                               else depth >> (lv - lane_levels + 1)) - 1)
        with m.If(~idle):
            m.d.sync += wait.eq(wait - 1)
        with m.If(step):
            m.d.sync += vec.eq((vec + 1)[:len(vec)])     # v mod D: wraps at D
            with m.If(vec == depth - 1):
                m.d.sync += first.eq(0)
            with m.If(last_vector & (~first | (vec == depth - 1))):
                m.d.sync += [phase.eq(1), level.eq(0), addr.eq(0), wait.eq(_SUM_LOOP - 1)]
        with m.If(issue):
            m.d.sync += addr.eq(addr + 1)
            with m.If(addr == level_last):
                m.d.sync += [addr.eq(0), level.eq(level + 1)]
                with m.If(level == levels - 1):
                    m.d.sync += [phase.eq(2), wait.eq(_SUM_LOOP)]
                with m.Elif(level + 1 >= lane_levels):
                    m.d.sync += wait.eq(_SUM_LOOP - 1)
                # between two lane levels no wait: each reads an address D >= _SUM_LOOP
                # cycles after the level before read (and so wrote) it.

        # The partials: one read port for every lane (address ``raddr``), a second one at
        # 2a + 1 for lane 0's last levels (there a < D/2); read data one cycle later.
        raddr = Signal(range(depth))
        m.d.comb += raddr.eq(Mux(phase == 1, Mux(partial, Cat(0, addr[:-1]), addr),
                                 Mux(phase == 0, vec, 0)))
        rd, wp = [], []
        for lane in range(lanes):
            m.submodules[f"part{lane}"] = mem = Memory(shape=32, depth=depth, init=[])
            port = mem.read_port()
            m.d.comb += port.addr.eq(raddr)
            rd.append(port.data)
            wp.append(mem.write_port())
            if lane == 0:
                port_b = mem.read_port()
                m.d.comb += port_b.addr.eq(Cat(1, addr[:-1]))
        # The adder's operands (selects registered, like the read data): a step adds x
        # (or -0) to the partial (+0 in the first D steps), a combine step a pair.
        use_acc, use_pair, first_d, partial_d = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [use_acc.eq((op == VaOpcode.SUM) & (phase != 1)),
                     use_pair.eq((op == VaOpcode.SUM) & (phase == 1)),
                     first_d.eq(first), partial_d.eq(partial)]
        waddr = Signal(range(depth))
        m.d.sync += waddr.eq(Mux(phase == 1, addr, vec))
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
            in_range = seen + lane < self.count
            adds_x = Signal(name=f"adds_x{lane}")       # a step of a vector, lane in range
            m.d.sync += adds_x.eq(reduce_take & in_range)
            pair_b = rd[2 * lane + 1] if 2 * lane + 1 < lanes else 0
            if lane == 0:
                pair_b = Mux(partial_d, port_b.data, pair_b)
            pair = (rd[2 * lane] if 2 * lane < lanes else 0, pair_b)
            add_a = Mux(use_pair, pair[0], Mux(use_acc, Mux(first_d, 0, rd[lane]), op_a))
            add_b = Mux(use_pair, pair[1],
                        Mux(use_acc, Mux(adds_x, Cat(Const(0, 16), a0), _F32_MINUS_ZERO), op_b))
            active = (2 * lane + 1 < lanes) & ~partial if lane else Const(1)
            writes = Signal(name=f"writes{lane}")
            m.d.sync += writes.eq(step | (issue & active))
            if lane == 0:
                total, carried = f32_add_pipelined(m, add_a, add_b, name=f"add{lane}", deep=True,
                                                   carry={"w": writes, "v": valid1, "a": waddr})
                raw_valid_in, write_addr = carried["v"], carried["a"]
            else:
                total, carried = f32_add_pipelined(m, add_a, add_b, name=f"add{lane}",
                                                   carry={"w": writes}, deep=True)
            m.d.comb += [wp[lane].addr.eq(write_addr), wp[lane].data.eq(total),
                         wp[lane].en.eq(carried["w"] & is_sum)]
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
                with m.If(is_max & (phase == 1)):
                    m.d.sync += mine.eq(Mux(right_wins, right, left))
        m.d.sync += raw_valid.eq(raw_valid_in)

        emit = reduce & (phase == 2) & idle
        m.d.comb += [out_fifo.w_en.eq(raw_valid | emit),
                     out_fifo.w_data.eq(Mux(emit, Cat(Mux(is_sum, rd[0][:16], best[0].value),
                                                      Mux(is_sum, rd[0][16:], 0)), result))]
        # free: - a vector taken, + a vector read out
        read = self.o.valid & self.o.ready
        with m.If((take & ~reduce) & ~read):
            m.d.sync += free.eq(free - 1)
        with m.Elif(~(take & ~reduce) & read):
            m.d.sync += free.eq(free + 1)

        with m.If(reduce_take):
            m.d.sync += seen.eq(seen + lanes)
            with m.If(last_vector):
                m.d.sync += rest.eq(1)
        # MAX: the lane tree right after the last vector, a level a cycle.
        with m.If(is_max & reduce_take & last_vector):
            m.d.sync += [phase.eq(2 if lane_levels == 0 else 1), level.eq(0)]
        with m.If(is_max & (phase == 1)):
            m.d.sync += level.eq(level + 1)
            with m.If(level == lane_levels - 1):
                m.d.sync += phase.eq(2)
        with m.If(emit):
            m.d.sync += phase.eq(3)
        return m
