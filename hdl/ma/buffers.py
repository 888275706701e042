"""The MA's operand buffers: all of B (as K rows, or transposed as N rows), two blocks of
A; the next old-C group's words on their way into the PEs."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.rowio import RowBeatLayout
from hdl.ma.array import InitWriteLayout, StepLayout
from hdl.ma.layouts import (
    DEST_A,
    DEST_B,
    DEST_C,
    MAX_DIM,
    ROW_BYTES,
    RowTag,
    StepRequestLayout,
)

__all__ = ["STEP_LATENCY", "OperandBuffers"]

STEP_LATENCY = 2          # cycles from a ``request`` to its ``step``


class OperandBuffers(wiring.Component):
    """Holds the operands between the row reader and the systolic array.

    * B: K rows of up to 256 bytes, a row per ``ROW_BYTES`` of address space, in words of
      ``max(bus, 2·P bytes)`` so that one word holds a tile row of B in either mode.
    * B transposed (``b_t``: B stored as N rows of K, C = A·Bᵀ): the N rows held the way
      A's are, one memory lane per row of a tile of P rows (lane ``j mod P``, block
      ``j div P``), so the P elements of step k of tile jt are one read, as A's column
      k is. A memory of its own (``MAX_DIM·ROW_BYTES`` bytes, as B's): its words are P
      bus words wide, B's one.
    * A: two halves (double buffer) of P rows each, one memory lane per row, so column k
      of a block is one read.
    * old C: the next group's ``INTERLEAVE`` P×P tiles of initial values, for
      ACCUMULATE, are not kept here: each beat goes on (registered) to ``init_write``
      and so into the PEs' own memories; the tag's ``slot`` says which tile a row
      belongs to.

    Fill side: ``beat`` words from the row reader; a group's "full" flag rises two cycles
    after its last word (``group_last`` in the tag). Read side: a ``request`` for step
    (k, jt, slot, half) is answered two cycles later on ``step``: the words are read and
    registered, then the elements picked out of them. ``a_freed`` empties an A half.
    The old C of a group is used up (``c_full`` falls) when the group's first step enters
    the array, and given back to the loads (``c_taken``) ``init_hold`` cycles later, once
    every PE has read it.
    """

    def __init__(self, p, data_width, init_hold):
        self.p, self.data_width, self.bus_bytes = p, data_width, data_width // 8
        self.init_hold = init_hold
        super().__init__({
            "clear": In(1),
            "bf16": In(1),
            "b_t": In(1),
            "accumulate": In(1),
            "beat": In(RowBeatLayout(data_width, RowTag())),
            "request": In(StepRequestLayout(p)),
            "step": Out(StepLayout(p)),
            "init_write": Out(InitWriteLayout(p, data_width)),
            "c_taken": Out(1),
            "a_freed": In(2),
            "a_full": Out(2),
            "b_full": Out(1),
            "c_full": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p, bb = self.p, self.bus_bytes
        log_p, log_bb = exact_log2(p), exact_log2(bb)
        a_words = ROW_BYTES // bb                          # words per A row (one lane)
        b_word_bytes = max(bb, 2 * p)                      # a B word holds ≥ P elements
        b_lanes = b_word_bytes // bb
        b_words = ROW_BYTES // b_word_bytes                # words per B row
        # A is shallow (2·ROW_BYTES/B words) and wide (P bus words): left to yosys it
        # becomes distributed RAM (P=8: 512 TRELLIS_DPR16X4, each taking three slices in
        # nextpnr), where block RAM is to spare. Its read is registered anyway.
        m.submodules.a_mem = a_mem = Memory(shape=data.ArrayLayout(8 * bb, p),
                                            depth=2 * a_words, init=[],
                                            attrs={"ram_style": "block"})
        m.submodules.b_mem = b_mem = Memory(shape=data.ArrayLayout(8 * bb, b_lanes),
                                            depth=MAX_DIM * b_words, init=[])
        # Bᵀ: a block of P lanes per tile of N, each lane a row of K (as A's halves).
        row_words, bt_blocks = a_words, MAX_DIM // p
        m.submodules.bt_mem = bt_mem = Memory(shape=data.ArrayLayout(8 * bb, p),
                                              depth=bt_blocks * row_words, init=[],
                                              attrs={"ram_style": "block"})
        a_wr, b_wr = a_mem.write_port(granularity=1), b_mem.write_port(granularity=1)
        bt_wr = bt_mem.write_port(granularity=1)
        a_rd, b_rd, bt_rd = a_mem.read_port(), b_mem.read_port(), bt_mem.read_port()
        # B's layout, registered here (it is steady through a command).
        b_t = Signal()
        m.d.sync += b_t.eq(self.b_t)

        # --- fill
        beat = self.beat
        with m.If(beat.valid & (beat.tag.dest == DEST_A)):
            m.d.comb += [a_wr.addr.eq(Cat(beat.index[:exact_log2(a_words)], beat.tag.half)),
                         a_wr.data.eq(Cat(*([beat.data] * p))),
                         a_wr.en.eq(1 << beat.tag.row[:log_p])]
        with m.If(beat.valid & (beat.tag.dest == DEST_B) & ~b_t):
            m.d.comb += [b_wr.addr.eq(Cat((beat.index >> exact_log2(b_lanes))
                                          [:exact_log2(b_words)], beat.tag.row)),
                         b_wr.data.eq(Cat(*([beat.data] * b_lanes))),
                         b_wr.en.eq(1 << beat.index[:exact_log2(b_lanes)])]
        with m.If(beat.valid & (beat.tag.dest == DEST_B) & b_t):
            # row j of Bᵀ: lane j mod P of block j div P
            m.d.comb += [bt_wr.addr.eq(Cat(beat.index[:exact_log2(row_words)],
                                           beat.tag.row[log_p:])),
                         bt_wr.data.eq(Cat(*([beat.data] * p))),
                         bt_wr.en.eq(1 << beat.tag.row[:log_p])]
        # Old C: the beat, registered, goes to the array, which writes it into the PEs'
        # memories: a word can be read three cycles after its beat. ``c_full`` rises the
        # cycle after the group's last beat, and the first PE reads its word
        # ``STEP_LATENCY`` + 2 cycles after the issuer's start at the earliest.
        init = self.init_write
        m.d.sync += [init.valid.eq(beat.valid & (beat.tag.dest == DEST_C)),
                     init.row.eq(beat.tag.row[:log_p]), init.index.eq(beat.index),
                     init.slot.eq(beat.tag.slot), init.data.eq(beat.data)]

        loaded = beat.valid & beat.last & beat.tag.group_last
        m.d.sync += self.a_full.eq(
            (self.a_full | Mux(loaded & (beat.tag.dest == DEST_A), 1 << beat.tag.half, 0))
            & ~self.a_freed)
        with m.If(loaded & (beat.tag.dest == DEST_B)):
            m.d.sync += self.b_full.eq(1)
        group_start = Signal()
        with m.If(loaded & (beat.tag.dest == DEST_C)):
            m.d.sync += self.c_full.eq(1)
        with m.Elif(group_start):
            m.d.sync += self.c_full.eq(0)
        # The old C stays put until every PE has read it, then goes back to the loads.
        hold = Signal(range(self.init_hold + 1))
        with m.If(group_start):
            m.d.sync += hold.eq(self.init_hold)
        with m.Elif(hold != 0):
            m.d.sync += hold.eq(hold - 1)
        m.d.comb += self.c_taken.eq(hold == 1)
        with m.If(self.clear):
            m.d.sync += [self.a_full.eq(0), self.b_full.eq(0), self.c_full.eq(0), hold.eq(0)]

        # --- read: addresses now, elements one cycle later
        req = self.request
        # The mode, registered here (it is steady through a command).
        bf16 = Signal()
        m.d.sync += bf16.eq(self.bf16)
        shift = Mux(bf16, 1, 0)
        byte_k = req.k << shift                            # byte of column k in an A row
        byte_j = (req.jt << log_p) << shift                # byte of the tile's first column
        m.d.comb += [
            a_rd.addr.eq(Cat((byte_k >> log_bb)[:exact_log2(a_words)], req.half)),
            b_rd.addr.eq(Cat((byte_j >> exact_log2(b_word_bytes))[:exact_log2(b_words)],
                             req.k)),
            # (lanes past N, and slots past N's last tile, read stale words: their results
            # are dropped)
            bt_rd.addr.eq(Cat((byte_k >> log_bb)[:exact_log2(row_words)],
                              req.jt[:exact_log2(bt_blocks)])),
        ]
        # The words read are registered before the elements are picked out of them (the
        # block RAMs' outputs are slow), so ``step`` comes two cycles after ``request``.
        step = self.step
        byte_k_d, byte_k_dd = Signal(log_bb), Signal(log_bb)
        byte_j_d, byte_j_dd = Signal(exact_log2(b_word_bytes)), Signal(exact_log2(b_word_bytes))
        flags_d = Signal(StepRequestLayout(p))
        a_words = Signal.like(a_rd.data)
        bt_words = Signal.like(bt_rd.data)
        b_word = Signal(len(b_rd.data.as_value()))
        m.d.sync += [flags_d.eq(req), byte_k_d.eq(byte_k), byte_j_d.eq(byte_j),
                     step.valid.eq(flags_d.valid), step.first.eq(flags_d.first),
                     step.last.eq(flags_d.last), step.slot.eq(flags_d.slot),
                     byte_k_dd.eq(byte_k_d), byte_j_dd.eq(byte_j_d),
                     a_words.eq(a_rd.data), bt_words.eq(bt_rd.data), b_word.eq(b_rd.data)]
        for i in range(p):
            word = a_words[i]
            m.d.comb += step.a[i].eq(Mux(bf16, word.word_select(byte_k_dd >> 1, 16),
                                         word.word_select(byte_k_dd, 8)))
        chunk16 = b_word.word_select(byte_j_dd >> exact_log2(2 * p), 16 * p)
        chunk8 = b_word.word_select(byte_j_dd >> log_p, 8 * p)
        for j in range(p):
            word = bt_words[j]
            transposed = Mux(bf16, word.word_select(byte_k_dd >> 1, 16),
                             word.word_select(byte_k_dd, 8))
            m.d.comb += step.b[j].eq(Mux(b_t, transposed,
                                         Mux(bf16, chunk16[16 * j:16 * j + 16],
                                             chunk8[8 * j:8 * j + 8])))
        m.d.comb += group_start.eq(step.valid & step.first & (step.slot == 0)
                                   & self.accumulate)
        return m
