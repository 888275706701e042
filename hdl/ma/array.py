"""The P×P output-stationary systolic array of the matrix accelerator."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.common.fp import F32_ADD_STAGES
from hdl.common.rowio import MAX_ROW_BYTES
from hdl.ma.fp import PE_PRODUCT_STAGES, pe_accumulate, pe_product
from hdl.ma.layouts import INTERLEAVE

__all__ = ["INTERLEAVE", "PRODUCT_STAGES", "PE_LATENCY", "FlagsLayout", "StepLayout",
           "InitWriteLayout", "ProcessingElement", "SystolicArray", "array_timing"]

PRODUCT_STAGES = PE_PRODUCT_STAGES   # multiplier, product (outside the loop)
# From the cycle a step is in a PE's input registers to the cycle its sum is in the
# PE's accumulator (and, for a tile's last step, in its result register).
PE_LATENCY = PRODUCT_STAGES + F32_ADD_STAGES


class FlagsLayout(data.StructLayout):
    """The control flags that travel with the A values, and the command's mode (which
    travels the same way, so that no net carries it to every PE at once)."""
    def __init__(self):
        super().__init__({"valid": 1, "first": 1, "last": 1, "slot": range(INTERLEAVE),
                          "bf16": 1, "accumulate": 1})


class StepLayout(data.StructLayout):
    """One k-step of one tile as it enters the array: column k of A, row k of B.

    Elements are 16 bits: a bf16 pattern, or an int8 in the low byte. ``slot`` is the
    tile's place in its group of ``INTERLEAVE`` tiles.
    """
    def __init__(self, p):
        super().__init__({
            "valid": 1,
            "first": 1,                        # k == 0: start from the initial value
            "last": 1,                         # k == K-1: the tile's result is ready
            "slot": range(INTERLEAVE),
            "a": data.ArrayLayout(16, p),      # A[i0 + i, k], i = 0..P-1
            "b": data.ArrayLayout(16, p),      # B[k, j0 + j], j = 0..P-1
        })


class InitWriteLayout(data.StructLayout):
    """One bus word of an old-C row on its way into the PEs: ``data`` holds the row's
    bytes ``[index·B, index·B + B)`` (B = ``data_width / 8``), i.e. the old C of the PEs
    ``(row, j)`` with ``j·4`` in that range, for tile ``slot`` of the group."""
    def __init__(self, p, data_width):
        super().__init__({"valid": 1, "row": range(p),
                          "index": range(MAX_ROW_BYTES // (data_width // 8) + 1),
                          "slot": range(INTERLEAVE), "data": data_width})


class ProcessingElement(wiring.Component):
    """One PE: a multiply-accumulate pipeline holding ``INTERLEAVE`` partial sums.

    Stages (one register each): the multiplier (one 9×9 signed product shared by the
    modes: int8 × int8, or the two bf16 significands), the product (the bf16 product
    unpacked, or the int8 product; :func:`hdl.ma.fp.pe_product`), then the adder's
    stages (:func:`hdl.ma.fp.pe_accumulate`), the last of which is the accumulator.
    The loop ``accumulator → base → adder → accumulator`` is ``INTERLEAVE`` registers
    long, so a step of slot s meets the sum of the previous step of the same slot::

        base = first ? (accumulate ? init[slot] : 0) : accumulator
        int8: sum = base + a·b                        (wrapping, 32 bits)
        bf16: sum = f32_add(base, bf16_mul(a, b))      (see ``hdl.common.fp``)

    A step with ``last`` leaves its sum in ``result[slot]``, ``PE_LATENCY`` cycles after
    it was in the input registers (``done`` is that step's flags, then). The mode
    (``flags.bf16``, ``flags.accumulate``) is registered from the flags at the input; it
    must be steady from two cycles before a command's first step until its last.

    No register of the PE has a reset (the array's input flags do): a step that is in the
    PE when the array is cleared leaves it ``PE_LATENCY`` cycles later at most.

    ``init`` is a small memory of ``INTERLEAVE`` words (distributed RAM), one per slot:
    ``init_we`` writes ``init_data`` into word ``init_slot``; the second product stage
    reads the word of its step's slot.
    """

    def __init__(self):
        super().__init__({
            "a": In(16),
            "b": In(16),
            "flags": In(FlagsLayout()),
            "init_we": In(1),
            "init_slot": In(range(INTERLEAVE)),
            "init_data": In(32),
            "result": Out(data.ArrayLayout(32, INTERLEAVE)),
            "done": Out(FlagsLayout()),
        })

    def elaborate(self, platform):
        m = Module()
        # The mode, registered here from the flags: it changes only at a command's start,
        # long before its first step.
        bf16 = Signal(name="mode_bf16", reset_less=True, attrs={"keep": 1})
        accumulate = Signal(name="mode_accumulate", reset_less=True, attrs={"keep": 1})
        m.d.sync += [bf16.eq(self.flags.bf16), accumulate.eq(self.flags.accumulate)]

        # Product stages: the shared multiplier, then the unpacked bf16 product (or the
        # int8 product in its significand field).
        product = pe_product(m, self.a, self.b, bf16, name="prod")
        flags1 = Signal(FlagsLayout(), reset_less=True)
        flags2 = Signal(FlagsLayout(), reset_less=True)
        # The slot's initial value, read in the second product stage so that the loop
        # sees one register.
        m.submodules.init_mem = init_mem = Memory(shape=32, depth=INTERLEAVE, init=[])
        init_wr, init_rd = init_mem.write_port(), init_mem.read_port(domain="comb")
        m.d.comb += [init_wr.en.eq(self.init_we), init_wr.addr.eq(self.init_slot),
                     init_wr.data.eq(self.init_data), init_rd.addr.eq(flags1.slot)]
        init = Signal(32, reset_less=True)
        m.d.sync += [flags1.eq(self.flags), flags2.eq(flags1),
                     init.eq(Mux(accumulate, init_rd.data, 0))]

        # The accumulation loop.
        acc = Signal(32, reset_less=True)
        base = Signal(32)
        m.d.comb += base.eq(Mux(flags2.first, init, acc))
        new, carried = pe_accumulate(m, base, product, ~bf16, name="add",
                                     carry={"flags": flags2.as_value()})
        flags = FlagsLayout()(carried["flags"])
        m.d.sync += acc.eq(new)
        results = Signal.like(self.result, reset_less=True)
        done = Signal(FlagsLayout(), reset_less=True)
        for slot in range(INTERLEAVE):
            with m.If(flags.valid & flags.last & (flags.slot == slot)):
                m.d.sync += results[slot].eq(new)
        m.d.sync += done.eq(flags)
        m.d.comb += [self.result.eq(results), self.done.eq(done)]
        return m


def array_timing(p):
    """``(min_spacing, drain_delay, init_hold)`` of a P×P array (see SystolicArray)."""
    min_spacing = (INTERLEAVE + 1) * p
    # The corner PE(P-1, P-1) sees a step 2P-1 cycles after it entered; its sum is in
    # the accumulator PE_LATENCY later; the read-out starts the cycle after and its rows
    # are registered once more.
    drain_delay = 2 * p - 1 + PE_LATENCY + 2
    # The last PE reads its init words (at the latest) PRODUCT_STAGES cycles after its
    # last slot's first step reached it.
    init_hold = 2 * p - 1 + INTERLEAVE - 1 + PRODUCT_STAGES
    return min_spacing, drain_delay, init_hold


class SystolicArray(wiring.Component):
    """P×P processing elements; PE(i, j) owns C[i0 + i, j0 + j] of each tile of a group.

    A group is ``INTERLEAVE`` output tiles (slots) that share their rows of A. A values
    move right and B values move down, one PE per cycle; the input skew delays row i of A
    by i cycles and column j of B by j cycles, so PE(i, j) sees a step ``i + j + 1``
    cycles after it entered. A group's steps enter k-major: step k of slot 0, of slot 1,
    …, of slot ``INTERLEAVE - 1``, then step k + 1 of slot 0, …, so the partial sum of a
    slot comes out of the PE's ``INTERLEAVE``-deep adder loop just in time for its next
    step (see :class:`ProcessingElement`). In the command's mode each PE computes, per
    slot, ``acc = (first ? init : acc) ⊕ a·b`` in increasing k, where ``init`` is 0
    (+0.0), or with ``accumulate`` the slot's word of ``cinit``.

    Protocol (the feeder's obligations):

    1. A group is ``K·INTERLEAVE`` ``step`` beats with ``valid`` on consecutive cycles in
       the order above; a step of k = 0 has ``first``, of k = K-1 ``last``.
    2. The first steps of two groups are at least ``min_spacing`` = ``(INTERLEAVE + 1)·P``
       cycles apart. Results are read out while the next group computes, and the spacing
       is what keeps a PE from overwriting a result before it is read.
    3. With ``accumulate``, the group's old C comes through ``init_write`` (a bus word
       of row i of a slot's tile: the words of PEs (i, j)) at the latest the cycle the
       group's first step enters, and nothing more comes until ``init_hold`` cycles after
       that: each PE reads its words when its first steps reach it. A word can be read
       two cycles after it was on ``init_write`` (a register per row of PEs, then the
       memory's write); PE(0, 0) reads its first word two cycles after the first step
       entered.

    Results: ``drain_delay`` cycles after the cycle the first slot's last step entered,
    ``row`` holds row 0 of slot 0's P×P result, then the other rows of slot 0 and of the
    next slots on the following cycles (``INTERLEAVE·P`` rows), with ``row_valid`` high.
    """

    def __init__(self, p, data_width):
        if not isinstance(p, int) or not 2 <= p <= 32:
            raise ValueError(f"P must be an integer in 2..32, not {p!r}")
        if data_width not in (64, 128, 256, 512):
            raise ValueError(f"data_width must be 64, 128, 256 or 512, not {data_width!r}")
        self.p, self.data_width = p, data_width
        self.min_spacing, self.drain_delay, self.init_hold = array_timing(p)
        super().__init__({
            "clear": In(1),
            "bf16": In(1),
            "accumulate": In(1),
            "step": In(StepLayout(p)),
            "init_write": In(InitWriteLayout(p, data_width)),
            "row_valid": Out(1),
            "row_index": Out(range(p)),
            "row": Out(data.ArrayLayout(32, p)),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.p

        # Input skew: row i of A (with the control flags) and column j of B by i, j cycles.
        a_in, f_in, b_in = [], [], []
        for i in range(p):
            a, b = self.step.a[i], self.step.b[i]
            f = Signal(FlagsLayout(), name=f"f_skew_{i}_in")
            m.d.comb += [f.valid.eq(self.step.valid), f.first.eq(self.step.first),
                         f.last.eq(self.step.last), f.slot.eq(self.step.slot),
                         f.bf16.eq(self.bf16), f.accumulate.eq(self.accumulate)]
            for d in range(i):
                a_d = Signal(16, name=f"a_skew_{i}_{d}", reset_less=True)
                f_d = Signal(FlagsLayout(), name=f"f_skew_{i}_{d}")
                b_d = Signal(16, name=f"b_skew_{i}_{d}", reset_less=True)
                m.d.sync += [a_d.eq(a), f_d.eq(f), b_d.eq(b)]
                with m.If(self.clear):
                    m.d.sync += f_d.valid.eq(0)
                a, f, b = a_d, f_d, b_d
            a_in.append(a), f_in.append(f), b_in.append(b)

        # Old C: each row of PEs takes the bus words of its row from a register of its own
        # (loaded only for that row: a short net to P PEs instead of one to all P²).
        cw = self.init_write
        beat_words = self.data_width // 32
        row_we, row_slot, row_index, row_data = [], [], [], []
        for i in range(p):
            hit = cw.valid & (cw.row == i)
            we = Signal(name=f"init_we_{i}")
            slot = Signal(range(INTERLEAVE), name=f"init_slot_{i}", reset_less=True)
            index = Signal.like(cw.index, name=f"init_index_{i}", reset_less=True)
            words = Signal(32 * min(beat_words, p), name=f"init_data_{i}", reset_less=True)
            m.d.sync += we.eq(hit)
            with m.If(hit):
                m.d.sync += [slot.eq(cw.slot), index.eq(cw.index), words.eq(cw.data[:len(words)])]
            row_we.append(we), row_slot.append(slot), row_index.append(index)
            row_data.append(words)

        pes = [[None] * p for _ in range(p)]
        a_reg = [[None] * p for _ in range(p)]
        b_reg = [[None] * p for _ in range(p)]
        f_reg = [[None] * p for _ in range(p)]
        for i in range(p):
            for j in range(p):
                a_src = a_in[i] if j == 0 else a_reg[i][j - 1]
                f_src = f_in[i] if j == 0 else f_reg[i][j - 1]
                b_src = b_in[j] if i == 0 else b_reg[i - 1][j]
                a_reg[i][j] = Signal(16, name=f"a_{i}_{j}", reset_less=True)
                b_reg[i][j] = Signal(16, name=f"b_{i}_{j}", reset_less=True)
                # (kept apart in synthesis: the same flags reach every PE of an
                # anti-diagonal, and merged they would drive them all from one register)
                f_reg[i][j] = Signal(FlagsLayout(), name=f"f_{i}_{j}", attrs={"keep": 1})
                m.d.sync += [a_reg[i][j].eq(a_src), b_reg[i][j].eq(b_src),
                             f_reg[i][j].eq(f_src)]
                with m.If(self.clear):
                    m.d.sync += f_reg[i][j].valid.eq(0)
                pe = pes[i][j] = ProcessingElement()
                m.submodules[f"pe_{i}_{j}"] = pe
                m.d.comb += [pe.a.eq(a_reg[i][j]), pe.b.eq(b_reg[i][j]),
                             pe.flags.eq(f_reg[i][j]),
                             pe.init_we.eq(row_we[i] & (row_index[i] == j // beat_words)),
                             pe.init_slot.eq(row_slot[i]),
                             pe.init_data.eq(row_data[i].word_select(j % beat_words, 32))]

        # Read-out: the bottom-right PE is the last to finish slot 0 of a group; then
        # slot s's rows, s = 0.., each row once all its PEs have finished it.
        # After a clear, the steps still inside the PEs (they have no reset) come out within
        # PE_LATENCY cycles: the read-out ignores them.
        done = pes[p - 1][p - 1].done
        quiet = Signal(range(PE_LATENCY + 2), init=PE_LATENCY + 1)
        with m.If(quiet != 0):
            m.d.sync += quiet.eq(quiet - 1)
        draining = Signal()
        index = Signal(range(p))
        slot = Signal(range(INTERLEAVE))
        # Each column's multiplexer has its own copy of (index, slot) (P is a power of two:
        # the copy counts through Cat(index, slot)), kept apart in synthesis (sim.fpga):
        # one register would drive the selects of all 32·P bits.
        select = [Signal(len(index) + len(slot), name=f"read_select_{j}", attrs={"keep": 1})
                  for j in range(p)]
        with m.If(done.valid & done.last & (done.slot == 0) & (quiet == 0)):
            m.d.sync += [draining.eq(1), index.eq(0), slot.eq(0)]
            m.d.sync += [sel.eq(0) for sel in select]
        with m.Elif(draining):
            m.d.sync += index.eq(index + 1)
            m.d.sync += [sel.eq(sel + 1) for sel in select]
            with m.If(index == p - 1):
                m.d.sync += [index.eq(0), slot.eq(slot + 1)]
                with m.If(slot == INTERLEAVE - 1):
                    m.d.sync += draining.eq(0)
        m.d.sync += [self.row_valid.eq(draining), self.row_index.eq(index)]
        row = Signal.like(self.row, reset_less=True)
        for j in range(p):
            with m.Switch(select[j]):
                for s in range(INTERLEAVE):
                    for i in range(p):
                        with m.Case(s * (1 << len(index)) + i):
                            m.d.sync += row[j].eq(pes[i][j].result[s])
        m.d.comb += self.row.eq(row)
        with m.If(self.clear):
            m.d.sync += [quiet.eq(PE_LATENCY + 1), draining.eq(0), self.row_valid.eq(0)]
        return m
