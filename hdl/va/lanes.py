"""The lane engine: L bf16 lanes computing one elementwise operation or reduction."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.codes import VaOpcode, decode
from hdl.common.fp import F32_MINUS_ZERO, bf16_mul, f32_add_pipelined, f32_to_bf16
from spec.va import MAX_LENGTH, SUM_INTERLEAVE

__all__ = ["LaneEngine", "check_engine"]

# SUM's loop: the partial sums' read register, the deep adder's five, the partial memory.
_SUM_LOOP = 7
# A beat every cycle if a partial word is read again at the earliest SUM_INTERLEAVE
# (or more) cycles after it was read, i.e. after its new value is written.
assert _SUM_LOOP <= SUM_INTERLEAVE and SUM_INTERLEAVE & (SUM_INTERLEAVE - 1) == 0


def check_engine(lanes, width):
    """Raise ValueError unless a lane engine of ``width`` lanes can serve ``lanes`` (L):
    both powers of two, at least 2, ``width`` at most ``lanes``."""
    for name, value in (("lanes", lanes), ("width", width)):
        if not isinstance(value, int) or value < 2 or value & (value - 1):
            raise ValueError(f"{name} must be a power of two >= 2, not {value!r}")
    if width > lanes:
        raise ValueError(f"width {width} is more than the {lanes} lanes")


class LaneEngine(wiring.Component):
    """bf16 elementwise operations and SUM, ``width`` elements a cycle, for a VA of
    ``lanes`` lanes (L; ``width`` lanes of hardware, default L): ADD (x + y), MUL
    (x · y), SCALE (x · scalar), MUL_MEM / ADD_MEM (x · s, x + s: s is lane 0 of the one
    word ``y`` carries, taken before the first beat of x), and SUM over ``count``
    elements (MAX is TOPK's, in :class:`hdl.va.rows.RowUnit`).
    The streams carry ``width`` elements a beat, element i of the operand in lane
    i mod ``width`` of beat i // ``width``; the VA gives it the bus words
    (``width`` = DATA_WIDTH/16), so the engine runs at the memory's rate with the adders
    of one bus word, whatever L.

    Elementwise: each lane computes in binary32 with the MA's units (:mod:`hdl.common.fp`: an
    exact bf16 product, a round-to-nearest-even sum) and rounds to bf16
    (golden.va.add_bf16, mul_bf16, scale_bf16). The lanes are a pipeline without stalls
    (a beat taken in cycle t is written into the output FIFO in cycle t + 8): stage 0
    multiplies the significands, stage 1 forms the adder's operands (ADD: x and y;
    MUL/SCALE: the exact product and -0, which the adder returns unchanged), the binary32
    adder follows in six stages (``f32_add_pipelined(deep=True)``), then the rounding to
    bf16. A beat is taken only when the output FIFO (:data:`FIFO_DEPTH` beats) has room
    for it beside every beat in flight, so back-pressure never has to stop the pipeline.
    ``y`` is used (and waited for) only by ADD and MUL (a beat each beat of x), MUL_MEM
    and ADD_MEM (one beat).

    SUM (golden.va.sum_bf16) keeps the golden model's D·L binary32 partial sums (D =
    ``SUM_INTERLEAVE``, 8), element i in partial i mod D·L: partial k lives in lane
    k mod ``width`` of word k // ``width`` (two small memories per lane, the even words
    and the odd ones), so beat b adds to word b mod (D·L/``width``) (read, registered,
    the five-register adder, written back:
    a loop of seven cycles, shorter than the D·L/``width`` >= D beats before the word
    comes round again). The first D·L/``width`` beats add to +0 instead of the memory
    (which is not reset); after a SUM of fewer beats, steps without a beat (adding -0,
    which changes nothing) write +0 into the rest. Lanes past ``count`` in the last beat
    add -0. Then the golden model's pairwise tree over the D·L partials (partial 2k +
    partial 2k+1, level by level), a word a cycle with the same adders: a combine step
    reads words 2a and 2a + 1 (one from each memory) and writes word a, lane q the sum of
    lanes 2q, 2q + 1 of word 2a (q < ``width``/2) or of lanes 2q - ``width``, +1 of word
    2a + 1 (a level of one word leaves its ``width``/2 sums in the low lanes of word 0).
    A level waits only as long as the next one would otherwise read a word before its
    last write.

    One output beat follows a SUM: the binary32 sum in lanes 0-1.

    ``op``, ``scalar`` and ``count`` must hold still from one cycle before the first beat
    until the result is out (the core latches them at START and resets the engine).
    """

    FIFO_DEPTH = 12

    def __init__(self, lanes, width=None):
        width = lanes if width is None else width
        check_engine(lanes, width)
        self.lanes, self.width = lanes, width
        vec = data.ArrayLayout(16, width)
        super().__init__({
            "op": In(VaOpcode),
            "scalar": In(16),
            "count": In(range(MAX_LENGTH + 1)),
            "x": In(stream.Signature(vec)),
            "y": In(stream.Signature(vec)),
            "o": Out(stream.Signature(vec)),
        })

    def elaborate(self, platform):
        m = Module()
        e = SimpleNamespace(lanes=self.width)   # what the parts below share, named as in each
        self._control(m, e)
        self._sum_sequence(m, e)
        self._partials(m, e)
        self._lane_datapath(m, e)
        self._output(m, e)
        return m

    def _control(self, m, e):
        """The operation's flags, the broadcast scalar, the output FIFO and its room."""
        lanes = e.lanes
        # The operation's control, decoded into registers (the lanes' selects have
        # their own copies, below).
        two, reduce, bcast = Signal(), Signal(), Signal()
        op = decode(m, self.op, {
            "two": (VaOpcode.ADD, VaOpcode.MUL), "sum": VaOpcode.SUM,
            "bcast": (VaOpcode.MUL_MEM, VaOpcode.ADD_MEM),
            "is_add": (VaOpcode.ADD, VaOpcode.ADD_MEM),
            "scale": (VaOpcode.SCALE, VaOpcode.MUL_MEM, VaOpcode.ADD_MEM)}, "op")
        m.d.sync += [two.eq(op["two"]), reduce.eq(op["sum"]), bcast.eq(op["bcast"])]
        # The second operand of SCALE, MUL_MEM and ADD_MEM: SCALAR, or lane 0 of the one
        # word of ``y`` (the bf16 at SRC2), taken before the first beat of x.
        b_scalar = Signal(16)
        got_s = Signal()
        with m.If(~bcast):
            m.d.sync += b_scalar.eq(self.scalar)
        with m.Elif(self.y.valid & ~got_s):
            m.d.sync += [b_scalar.eq(self.y.payload[0]), got_s.eq(1)]

        m.submodules.fifo = out_fifo = fifo.SyncFIFOBuffered(width=16 * lanes,
                                                            depth=self.FIFO_DEPTH)
        wiring.connect(m, out_fifo.r_stream, wiring.flipped(self.o))
        # Room in the FIFO for a beat beside those in flight.
        free = Signal(range(self.FIFO_DEPTH + 1), init=self.FIFO_DEPTH)
        have = self.x.valid & (self.y.valid | ~two) & (got_s | ~bcast)
        e.two, e.reduce, e.bcast, e.op, e.b_scalar, e.got_s = two, reduce, bcast, op, b_scalar, got_s
        e.out_fifo, e.free, e.have = out_fifo, free, have

    def _sum_sequence(self, m, e):
        """The beats taken; SUM's steps over the partial words, then the tree's levels
        (``e.phase``)."""
        lanes, two, reduce, bcast, got_s, have, free = (
            e.lanes, e.two, e.reduce, e.bcast, e.got_s, e.have, e.free)
        partials = SUM_INTERLEAVE * self.lanes
        words = partials // lanes             # SUM: words of partials in the memories
        levels = exact_log2(partials)         # SUM: the tree's levels
        seen = Signal(range(MAX_LENGTH + lanes + 1))
        level = Signal(range(levels + 1))
        phase = Signal(range(4))          # 0 accumulate, 1 combine, 2 emit, 3 done
        wait = Signal(range(_SUM_LOOP + 1))   # SUM: cycles until the partials are written
        idle = wait == 0
        rest = Signal()                   # every beat taken
        vec = Signal(range(words))        # SUM: the word of the next step (b mod words)
        first = Signal(init=1)            # SUM: the first ``words`` steps (from +0)
        addr = Signal(range(words // 2))  # SUM: the pair of words the next combine step reads
        accumulating = reduce & (phase == 0) & ~rest
        take = Signal()
        m.d.comb += take.eq(Mux(reduce, accumulating & self.x.valid, have & (free != 0)))
        m.d.comb += [self.x.ready.eq(take), self.y.ready.eq((take & two) | (bcast & ~got_s))]
        reduce_take = take & reduce
        last_vector = seen + lanes >= self.count

        # SUM: a step adds a beat (or nothing, after the last one while the first steps
        # are not done) to word ``vec``; a combine step reads word ``addr``.
        step = reduce_take | (reduce & (phase == 0) & rest)
        issue = reduce & (phase == 1) & idle
        level_last = Signal(range(words // 2))    # the last pair this level reads
        level_gap = Signal(range(_SUM_LOOP))      # cycles between its last read and the next
        with m.Switch(level):
            for lv in range(levels):
                n = max(1, (partials >> lv) // lanes)     # words in, read a pair a cycle
                reads = max(1, n // 2)
                # read c writes word c of the next level, readable _SUM_LOOP cycles later;
                # the next level's read j (words 2j, 2j+1: this level's reads 2j, 2j+1, or
                # read 0 for a single word) comes reads + gap + j cycles after our first.
                gap = _SUM_LOOP - 1 if n <= 2 else max(0, _SUM_LOOP - reads // 2)
                with m.Case(lv):
                    m.d.comb += [level_last.eq(reads - 1), level_gap.eq(gap)]
        with m.If(~idle):
            m.d.sync += wait.eq(wait - 1)
        with m.If(step):
            m.d.sync += vec.eq((vec + 1)[:len(vec)])     # b mod words: wraps
            with m.If(vec == words - 1):
                m.d.sync += first.eq(0)
            with m.If(last_vector & (~first | (vec == words - 1))):
                m.d.sync += [phase.eq(1), level.eq(0), addr.eq(0), wait.eq(_SUM_LOOP - 1)]
        with m.If(issue):
            m.d.sync += addr.eq(addr + 1)
            with m.If(addr == level_last):
                m.d.sync += [addr.eq(0), level.eq(level + 1)]
                with m.If(level == levels - 1):
                    m.d.sync += [phase.eq(2), wait.eq(_SUM_LOOP)]
                with m.Else():
                    m.d.sync += wait.eq(level_gap)
        e.words, e.seen, e.phase, e.idle, e.rest, e.vec, e.first, e.addr = (
            words, seen, phase, idle, rest, vec, first, addr)
        e.take, e.reduce_take, e.last_vector, e.step, e.issue = (
            take, reduce_take, last_vector, step, issue)

    def _partials(self, m, e):
        """The partial sums' memories (``e.rd`` read data, ``e.wp`` write ports, per
        bank), the lanes' registered selects (``e.lane_copies``), the write's word and
        the beats' valid."""
        lanes, words, phase, addr, vec, op, first = (
            e.lanes, e.words, e.phase, e.addr, e.vec, e.op, e.first)
        step, issue, take, reduce = e.step, e.issue, e.take, e.reduce
        # The partials: two banks a lane, even words and odd words (word w at w // 2 of
        # bank w mod 2), both read at ``raddr`` (a step's word, or a combine step's pair
        # 2a, 2a + 1), data a cycle later.
        raddr = Signal(range(words // 2))
        m.d.comb += raddr.eq(Mux(phase == 1, addr, Mux(phase == 0, vec >> 1, 0)))
        rd, wp = ([], []), ([], [])
        for lane in range(lanes):
            for bank in (0, 1):
                mem = Memory(shape=32, depth=words // 2, init=[])
                m.submodules[f"part{lane}_{bank}"] = mem
                port = mem.read_port()
                m.d.comb += port.addr.eq(raddr)
                rd[bank].append(port.data)
                wp[bank].append(mem.write_port())
        # The adder's operands (selects registered, like the read data): a step adds x
        # (or -0) to the partial (+0 in the first steps), a combine step a pair.
        # Each lane has its own copy of these registers (kept apart through synthesis):
        # one copy for all would drive every lane's 64 operand bits across the unit.
        selects = {"use_acc": op["sum"] & (phase != 1),
                   "use_pair": op["sum"] & (phase == 1),
                   "first_d": first, "odd_d": vec[0],
                   "is_add": op["is_add"], "scale": op["scale"]}

        def lane_copies(lane):
            regs = {}
            for name, value in selects.items():
                regs[name] = Signal(name=f"{name}{lane}", attrs={"keep": 1})
                m.d.sync += regs[name].eq(value)
            return regs
        waddr = Signal(range(words))                 # the word written (combine: pair a → a)
        m.d.sync += waddr.eq(Mux(phase == 1, addr, vec))
        writes = Signal()
        m.d.sync += writes.eq(step | issue)
        valid0, valid1 = Signal(), Signal()
        m.d.sync += [valid0.eq(take & ~reduce), valid1.eq(valid0)]
        e.rd, e.wp, e.lane_copies, e.waddr, e.writes, e.valid1 = (
            rd, wp, lane_copies, waddr, writes, valid1)

    def _lane_datapath(self, m, e):
        """Each lane: the product, the adder's operands, the binary32 sum (written back
        for SUM), the bf16 result (``e.result``, valid with ``e.raw_valid``)."""
        lanes, rd, wp, reduce, seen, reduce_take, b_scalar, lane_copies = (
            e.lanes, e.rd, e.wp, e.reduce, e.seen, e.reduce_take, e.b_scalar, e.lane_copies)
        writes, valid1, waddr = e.writes, e.valid1, e.waddr
        result = Signal(data.ArrayLayout(16, lanes))
        raw_valid = Signal()
        half = lanes // 2
        for lane in range(lanes):
            sel = lane_copies(lane)
            a = self.x.payload[lane]
            b = Mux(sel["scale"], b_scalar, self.y.payload[lane])
            # Stage 0: the product of the significands (a multiplier block of its own).
            a0, b0 = Signal(16, name=f"a0_{lane}"), Signal(16, name=f"b0_{lane}")
            sig = Signal(16, name=f"sig{lane}")
            m.d.sync += [a0.eq(a), b0.eq(b), sig.eq(Cat(a[:7], 1) * Cat(b[:7], 1))]
            # Stage 1: the adder's operands.
            product = bf16_mul(m, a0, b0, name=f"mul{lane}", product=sig)
            op_a, op_b = Signal(32, name=f"opa{lane}"), Signal(32, name=f"opb{lane}")
            m.d.sync += [op_a.eq(Mux(sel["is_add"], Cat(Const(0, 16), a0), product)),
                         op_b.eq(Mux(sel["is_add"], Cat(Const(0, 16), b0), F32_MINUS_ZERO))]
            in_range = seen + lane < self.count
            adds_x = Signal(name=f"adds_x{lane}")       # a step of a beat, lane in range
            m.d.sync += adds_x.eq(reduce_take & in_range)
            # a combine step of pair a: lane q of word a sums lanes 2q, 2q + 1 of word 2a
            # (q < width/2) or 2q - width, 2q - width + 1 of word 2a + 1
            src = rd[lane >= half]
            pair = src[2 * (lane % half)], src[2 * (lane % half) + 1]
            mine = Mux(sel["odd_d"], rd[1][lane], rd[0][lane])
            add_a = Mux(sel["use_pair"], pair[0],
                        Mux(sel["use_acc"], Mux(sel["first_d"], 0, mine), op_a))
            add_b = Mux(sel["use_pair"], pair[1],
                        Mux(sel["use_acc"], Mux(adds_x, Cat(Const(0, 16), a0), F32_MINUS_ZERO),
                            op_b))
            if lane == 0:       # lane 0 carries the write, the word and the output's valid
                total, carried = f32_add_pipelined(m, add_a, add_b, name=f"add{lane}", deep=True,
                                                   carry={"w": writes, "v": valid1, "a": waddr})
                raw_valid_in, write_addr, write_en = carried["v"], carried["a"], carried["w"]
            else:
                total, _ = f32_add_pipelined(m, add_a, add_b, name=f"add{lane}", deep=True)
            for bank in (0, 1):
                m.d.comb += [wp[bank][lane].addr.eq(write_addr >> 1),
                             wp[bank][lane].data.eq(total),
                             wp[bank][lane].en.eq(write_en & reduce
                                                  & (write_addr[0] == bank))]
            raw = Signal(32, name=f"raw{lane}")
            m.d.sync += raw.eq(total)
            m.d.comb += result[lane].eq(f32_to_bf16(raw))
        m.d.sync += raw_valid.eq(raw_valid_in)

        e.result, e.raw_valid = result, raw_valid

    def _output(self, m, e):
        """Results (or SUM's sum) into the output FIFO, its room, the beats seen."""
        lanes, reduce, phase, idle, rd, out_fifo, free, take = (
            e.lanes, e.reduce, e.phase, e.idle, e.rd, e.out_fifo, e.free, e.take)
        raw_valid, result, reduce_take, seen, last_vector, rest = (
            e.raw_valid, e.result, e.reduce_take, e.seen, e.last_vector, e.rest)
        emit = reduce & (phase == 2) & idle
        m.d.comb += [out_fifo.w_en.eq(raw_valid | emit),
                     out_fifo.w_data.eq(Mux(emit, rd[0][0], result))]
        # free: - a beat taken, + a beat read out
        read = self.o.valid & self.o.ready
        with m.If((take & ~reduce) & ~read):
            m.d.sync += free.eq(free - 1)
        with m.Elif(~(take & ~reduce) & read):
            m.d.sync += free.eq(free + 1)

        with m.If(reduce_take):
            m.d.sync += seen.eq(seen + lanes)
            with m.If(last_vector):
                m.d.sync += rest.eq(1)
        with m.If(emit):
            m.d.sync += phase.eq(3)
