"""The matrix accelerator's core: checks, operand loads, tile issue, result write-back.

Data flow of one command (C = A·B, or C += A·B)::

    TAT walk ─► RowReader ─► B buffer (all of B) ─┐
                         ├─► A buffer (2 blocks of P rows) ─► issue ─► SystolicArray
                         └─► cnext (old C tile) ──────────────────────┘     │ rows
                                                      RowWriter ◄─ out FIFO ◄┘

* **Checks at START** (combinational, DESIGN.md order): BAD_COMMAND, BAD_TAT, MISALIGNED.
* **TAT walk**: before any access, every row of A, B and C is checked to lie in mapped
  regions (first and last byte, one row a cycle); a miss ends the command with
  TAT_MISS and ERR_ADDR = the first unmapped byte of the row (its page start if the row
  begins mapped). So a failing command never computes or writes anything.
* **Loads**: all of B first, then A one block of P rows at a time into the free half of
  a double buffer (and, with ACCUMULATE, the old C tile into ``cnext``), running ahead
  of the computation.
* **Issue**: output tiles in row-major order of tiles; tile (it, jt) takes K cycles (at
  least 2·P), reading A column k and B row k from the buffers.
* **Write-back**: each finished tile's rows go through a FIFO to the row writer; a credit
  counter keeps the FIFO from overflowing.
"""

from contextlib import contextmanager

from amaranth.hdl import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, fifo, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.codes import ErrorCode, MaMode
from hdl.common.memport import MemPortSignature
from hdl.common.rowio import ADDR_BITS, ErrorReport, RowReader, RowWriter
from hdl.common.tat import TatEntryLayout, tat_entry_ok, tat_translate
from hdl.ma.array import SystolicArray

__all__ = ["MAX_DIM", "MaCommandLayout", "MatrixCore", "check_parameters"]

MAX_DIM = 128
ROW_BYTES = 2 * MAX_DIM          # the longest A or B row: 128 bf16 elements
VALID_P = (2, 4, 8, 16, 32)
VALID_DATA_WIDTH = (64, 128, 256, 512)


def check_parameters(p, data_width):
    """Raise ValueError unless (P, DATA_WIDTH) is a configuration the MA supports."""
    if not isinstance(p, int) or p not in VALID_P:
        raise ValueError(f"P must be a power of two in 2..32 (2, 4, 8, 16 or 32), not {p!r}")
    if not isinstance(data_width, int) or data_width not in VALID_DATA_WIDTH:
        raise ValueError(f"DATA_WIDTH must be 64, 128, 256 or 512, not {data_width!r}")


class MaCommandLayout(data.StructLayout):
    """The command registers of the MA, as the core sees them."""
    def __init__(self):
        super().__init__({
            "mode": 2, "accumulate": 1,
            "a_addr": 32, "b_addr": 32, "c_addr": 32,
            "lda": 32, "ldb": 32, "ldc": 32,
            "m": 16, "k": 16, "n": 16,
        })


class _Tag(data.StructLayout):
    """What the row reader hands back with each row's data."""
    def __init__(self):
        super().__init__({"dest": 2, "row": 7, "half": 1, "group_last": 1})


DEST_A, DEST_B, DEST_C = 0, 1, 2


class MatrixCore(wiring.Component):
    """Runs one MA command at a time (see the module docstring).

    ``cmd`` and ``tat`` are the register values; ``refuse_code`` / ``refuse_addr`` are the
    checks at START, for :class:`hdl.common.command.CommandStatus`. ``launch`` starts a
    command (the core copies ``cmd`` and ``tat`` then); it ends with one ``finish`` pulse,
    after the last write of C is acknowledged, or one ``fail`` pulse with a code and the
    logical address, once nothing it issued is still in flight.
    """

    def __init__(self, p=8, data_width=128):
        check_parameters(p, data_width)
        self.p = p
        self.data_width = data_width
        self.bus_bytes = data_width // 8
        super().__init__({
            "cmd": In(MaCommandLayout()),
            "tat": In(data.ArrayLayout(TatEntryLayout(), 4)),
            "refuse_code": Out(8),
            "refuse_addr": Out(32),
            "launch": In(1),
            "finish": Out(1),
            "fail": Out(1),
            "fail_code": Out(8),
            "fail_addr": Out(32),
            "mem": Out(MemPortSignature(data_width)),
        })

    # ------------------------------------------------------------------ checks at START
    def _start_checks(self, m):
        cmd = self.cmd
        bf16 = cmd.mode == MaMode.BF16
        bad_shape = Signal()
        m.d.comb += bad_shape.eq((cmd.mode > MaMode.BF16)
                                 | (cmd.m == 0) | (cmd.m > MAX_DIM)
                                 | (cmd.k == 0) | (cmd.k > MAX_DIM)
                                 | (cmd.n == 0) | (cmd.n > MAX_DIM))
        bad_tat = Signal()
        m.d.comb += bad_tat.eq(~Cat(*(tat_entry_ok(e) for e in self.tat)).all())
        # (register value, alignment mask) in the order ERR_ADDR reports them.
        alignment = [(cmd.a_addr, bf16), (cmd.lda, bf16), (cmd.b_addr, bf16),
                     (cmd.ldb, bf16), (cmd.c_addr, 3), (cmd.ldc, 3)]
        with m.If(bad_shape):
            m.d.comb += self.refuse_code.eq(ErrorCode.BAD_COMMAND)
        with m.Elif(bad_tat):
            m.d.comb += self.refuse_code.eq(ErrorCode.BAD_TAT)
        for value, mask in alignment:
            with m.Elif((value & mask) != 0):
                m.d.comb += [self.refuse_code.eq(ErrorCode.MISALIGNED),
                             self.refuse_addr.eq(value)]

    # ------------------------------------------------------------------ elaborate
    def elaborate(self, platform):
        m = Module()
        p, bb = self.p, self.bus_bytes
        log_p = exact_log2(p)
        self._start_checks(m)

        cfg = Signal(MaCommandLayout())
        tat = Signal(data.ArrayLayout(TatEntryLayout(), 4))
        clear = Signal()
        with m.If(self.launch):
            m.d.sync += [cfg.eq(self.cmd), tat.eq(self.tat)]
        m.d.comb += clear.eq(self.launch)

        bf16 = cfg.mode == MaMode.BF16
        elem_shift = Mux(bf16, 1, 0)                     # log2 of the element size
        m_tiles = Signal(range(MAX_DIM // p + 1))
        n_tiles = Signal(range(MAX_DIM // p + 1))
        m.d.comb += [m_tiles.eq((cfg.m + p - 1) >> log_p), n_tiles.eq((cfg.n + p - 1) >> log_p)]

        m.submodules.reader = reader = RowReader(self.data_width, _Tag())
        m.submodules.writer = writer = RowWriter(self.data_width, 4 * p)
        m.submodules.array = array = ResetInserter(clear)(SystolicArray(p))
        m.submodules.out_fifo = out_fifo = ResetInserter(clear)(fifo.SyncFIFOBuffered(
            width=writer.row.payload.shape().size, depth=2 * p))
        m.d.comb += [reader.clear.eq(clear), writer.clear.eq(clear),
                     reader.tat.eq(tat), writer.tat.eq(tat),
                     array.bf16.eq(bf16), array.accumulate.eq(cfg.accumulate)]
        wiring.connect(m, wiring.flipped(self.mem.rd_req), reader.rd_req)
        wiring.connect(m, wiring.flipped(self.mem.rd_resp), reader.rd_resp)
        wiring.connect(m, wiring.flipped(self.mem.wr_req), writer.wr_req)
        wiring.connect(m, wiring.flipped(self.mem.wr_data), writer.wr_data)
        wiring.connect(m, wiring.flipped(self.mem.wr_resp), writer.wr_resp)

        # ---- phases
        walk_go, walk_done, walk_fail = Signal(), Signal(), Signal(ErrorReport())
        run = Signal()
        all_written = Signal()
        error = Signal(ErrorReport())
        abort = Signal()
        m.d.comb += [reader.abort.eq(abort), writer.abort.eq(abort)]
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.launch):
                    m.next = "WALK"
            with m.State("WALK"):
                m.d.comb += walk_go.eq(1)
                with m.If(walk_fail.valid):
                    m.d.sync += error.eq(walk_fail)
                    m.next = "FAIL"
                with m.Elif(walk_done):
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += run.eq(1)
                with m.If(reader.error.valid):
                    m.d.sync += error.eq(reader.error)
                    m.next = "ABORT"
                with m.Elif(writer.error.valid):
                    m.d.sync += error.eq(writer.error)
                    m.next = "ABORT"
                with m.Elif(all_written):
                    m.d.comb += self.finish.eq(1)
                    m.next = "IDLE"
            with m.State("ABORT"):
                m.d.comb += abort.eq(1)
                with m.If(reader.idle & writer.idle):
                    m.next = "FAIL"
            with m.State("FAIL"):
                m.d.comb += [self.fail.eq(1), self.fail_code.eq(error.code),
                             self.fail_addr.eq(error.addr[:32])]
                m.next = "IDLE"

        self._walk(m, cfg, tat, elem_shift, walk_go, walk_done, walk_fail)

        # ---- operand buffers
        a_words = ROW_BYTES // bb                          # words per A row (one lane)
        b_word_bytes = max(bb, 2 * p)                      # a B word holds ≥ P elements
        b_lanes = b_word_bytes // bb
        b_words = ROW_BYTES // b_word_bytes                # words per B row
        m.submodules.a_mem = a_mem = Memory(shape=data.ArrayLayout(8 * bb, p),
                                            depth=2 * a_words, init=[])
        m.submodules.b_mem = b_mem = Memory(shape=data.ArrayLayout(8 * bb, b_lanes),
                                            depth=MAX_DIM * b_words, init=[])
        a_wr, b_wr = a_mem.write_port(granularity=1), b_mem.write_port(granularity=1)
        a_rd, b_rd = a_mem.read_port(), b_mem.read_port()
        cnext = Signal(data.ArrayLayout(32, p * p))
        m.d.comb += array.cinit.eq(cnext)

        a_full = Signal(2)
        b_full = Signal()
        c_full = Signal()
        beat = reader.beat
        tag = Signal(_Tag())
        m.d.comb += tag.eq(beat.tag)
        with m.If(beat.valid & (tag.dest == DEST_A)):
            m.d.comb += [a_wr.addr.eq(Cat(beat.index[:exact_log2(a_words)], tag.half)),
                         a_wr.data.eq(Cat(*([beat.data] * p))),
                         a_wr.en.eq(1 << tag.row[:log_p])]
        with m.If(beat.valid & (tag.dest == DEST_B)):
            word_index = beat.index >> exact_log2(b_lanes)
            m.d.comb += [b_wr.addr.eq(tag.row * b_words + word_index),
                         b_wr.data.eq(Cat(*([beat.data] * b_lanes))),
                         b_wr.en.eq(1 << beat.index[:exact_log2(b_lanes)])]
        c_row_beats = (4 * p + bb - 1) // bb
        for i in range(p):
            row_bits = cnext.as_value()[i * p * 32:(i + 1) * p * 32]
            for n in range(c_row_beats):
                part = row_bits[n * 8 * bb:(n + 1) * 8 * bb]
                with m.If(beat.valid & (tag.dest == DEST_C) & (tag.row[:log_p] == i)
                          & (beat.index == n)):
                    m.d.sync += part.eq(beat.data[:len(part)])

        loaded = beat.valid & beat.last & tag.group_last
        a_freed = Signal(2)
        c_taken = Signal()
        with m.If(loaded & (tag.dest == DEST_A)):
            m.d.sync += a_full.eq((a_full | (1 << tag.half)) & ~a_freed)
        with m.Else():
            m.d.sync += a_full.eq(a_full & ~a_freed)
        with m.If(loaded & (tag.dest == DEST_B)):
            m.d.sync += b_full.eq(1)
        with m.If(loaded & (tag.dest == DEST_C)):
            m.d.sync += c_full.eq(1)
        with m.Elif(c_taken):
            m.d.sync += c_full.eq(0)
        with m.If(clear):
            m.d.sync += [a_full.eq(0), b_full.eq(0), c_full.eq(0)]

        self._load_sequencer(m, cfg, run, reader, elem_shift, m_tiles, n_tiles,
                             a_freed, c_taken)
        # Credits: free out-FIFO places not yet promised to an issued tile's rows.
        credits = Signal(range(2 * p + 1), init=2 * p)
        credit_back = Signal(range(3))
        issued_all = self._issue(m, cfg, run, a_rd, b_rd, array, m_tiles, n_tiles,
                                 a_full, b_full, c_full, a_freed, c_taken, credits,
                                 credit_back, bf16, b_word_bytes)
        drained_all = self._drain(m, cfg, run, array, out_fifo, writer, m_tiles, n_tiles,
                                  credit_back)
        with m.If(clear):
            m.d.sync += credits.eq(2 * p)
        m.d.comb += all_written.eq(issued_all & drained_all & ~out_fifo.r_rdy
                                   & writer.idle & reader.idle)
        return m

    # ------------------------------------------------------------------ TAT walk
    def _walk(self, m, cfg, tat, elem_shift, go, done, fail):
        operand = Signal(range(3))
        row = Signal(range(MAX_DIM + 1))
        addr = Signal(ADDR_BITS)
        bases = [cfg.a_addr, cfg.b_addr, cfg.c_addr]
        strides = [cfg.lda, cfg.ldb, cfg.ldc]
        rows = [cfg.m, cfg.k, cfg.m]
        lengths = [cfg.k << elem_shift, cfg.n << elem_shift, cfg.n << 2]
        started = Signal()
        last = Signal(ADDR_BITS)
        nrows = Signal(range(MAX_DIM + 1))
        with m.Switch(operand):
            for index in range(3):
                with m.Case(index):
                    m.d.comb += [last.eq(addr + lengths[index] - 1), nrows.eq(rows[index])]
        first_hit, _ = tat_translate(m, tat, addr, name="walk_first")
        last_hit, _ = tat_translate(m, tat, last, name="walk_last")
        with m.If(go & ~started):
            m.d.sync += [started.eq(1), operand.eq(0), row.eq(0), addr.eq(bases[0])]
        with m.Elif(go & started):
            with m.If(~first_hit):
                m.d.comb += [fail.valid.eq(1), fail.code.eq(ErrorCode.TAT_MISS),
                             fail.addr.eq(addr)]
            with m.Elif(~last_hit):
                m.d.comb += [fail.valid.eq(1), fail.code.eq(ErrorCode.TAT_MISS),
                             fail.addr.eq(Cat(Const(0, 12), last[12:]))]
            with m.Elif(row == nrows - 1):
                m.d.sync += row.eq(0)
                with m.Switch(operand):
                    for index in range(3):
                        with m.Case(index):
                            if index == 2:
                                m.d.comb += done.eq(1)
                            else:
                                m.d.sync += [operand.eq(index + 1), addr.eq(bases[index + 1])]
            with m.Else():
                m.d.sync += row.eq(row + 1)
                with m.Switch(operand):
                    for index in range(3):
                        with m.Case(index):
                            m.d.sync += addr.eq(addr + strides[index])
        with m.If(~go):
            m.d.sync += started.eq(0)

    # ------------------------------------------------------------------ loads
    def _load_sequencer(self, m, cfg, run, reader, elem_shift, m_tiles, n_tiles,
                        a_freed, c_taken):
        """Asks the reader for B, then each A block and (ACCUMULATE) each old C tile, in
        the order the tiles are issued, as soon as their buffer is free."""
        p, log_p = self.p, exact_log2(self.p)
        it = Signal(range(MAX_DIM // p + 1))
        jt = Signal(range(MAX_DIM // p + 1))
        row = Signal(range(MAX_DIM))
        b_row_addr = Signal(ADDR_BITS)
        a_row_addr = Signal(ADDR_BITS)
        c_block_addr = Signal(ADDR_BITS)
        c_row_addr = Signal(ADDR_BITS)
        a_used = Signal(2)      # an A half is in use from its first load until freed
        c_used = Signal()       # cnext is in use from its first load until taken
        block_rows = Signal(range(p + 1))               # rows of A block `it` below M
        rows_left = cfg.m - (it << log_p)
        m.d.comb += block_rows.eq(Mux(rows_left < p, rows_left, p))
        tile_cols = cfg.n - (jt << log_p)
        tile_bytes = Mux(tile_cols < p, tile_cols, p) << 2
        half = it[0]
        last_block = it == m_tiles - 1
        last_row = row == block_rows - 1

        cmd, tag = reader.cmd, Signal(_Tag())
        m.d.comb += cmd.payload.tag.eq(tag)
        accepted = cmd.valid & cmd.ready

        def request(dest, addr, nbytes, group_last, row_half=0):
            m.d.comb += [cmd.valid.eq(1), cmd.payload.addr.eq(addr),
                         cmd.payload.nbytes.eq(nbytes), tag.dest.eq(dest), tag.row.eq(row),
                         tag.half.eq(row_half), tag.group_last.eq(group_last)]

        @contextmanager
        def state(name):
            # Leaving RUN (done, or an error) returns every state to IDLE.
            with m.State(name):
                yield
                with m.If(~run):
                    m.next = "IDLE"

        with m.FSM(name="loads"):
            with m.State("IDLE"):
                with m.If(run):
                    m.d.sync += [row.eq(0), it.eq(0), jt.eq(0),
                                 b_row_addr.eq(cfg.b_addr), a_row_addr.eq(cfg.a_addr),
                                 c_block_addr.eq(cfg.c_addr)]
                    m.next = "B"
            with state("B"):
                request(DEST_B, b_row_addr, cfg.n << elem_shift, row == cfg.k - 1)
                with m.If(accepted):
                    m.d.sync += [row.eq(row + 1), b_row_addr.eq(b_row_addr + cfg.ldb)]
                    with m.If(row == cfg.k - 1):
                        m.d.sync += row.eq(0)
                        m.next = "A_WAIT"
            with state("A_WAIT"):
                with m.If(~a_used.bit_select(half, 1)):
                    m.next = "A"
            with state("A"):
                request(DEST_A, a_row_addr, cfg.k << elem_shift, last_row, half)
                with m.If(accepted):
                    m.d.sync += [row.eq(row + 1), a_row_addr.eq(a_row_addr + cfg.lda)]
                    with m.If(last_row):
                        m.d.sync += row.eq(0)
                        with m.If(cfg.accumulate):
                            m.next = "C_WAIT"
                        with m.Elif(last_block):
                            m.next = "DONE"
                        with m.Else():
                            m.d.sync += it.eq(it + 1)
                            m.next = "A_WAIT"
            with state("C_WAIT"):
                with m.If(~c_used):
                    m.d.sync += c_row_addr.eq(c_block_addr + (jt << (log_p + 2)))
                    m.next = "C"
            with state("C"):
                request(DEST_C, c_row_addr, tile_bytes, last_row)
                with m.If(accepted):
                    m.d.sync += [row.eq(row + 1), c_row_addr.eq(c_row_addr + cfg.ldc)]
                    with m.If(last_row):
                        m.d.sync += [row.eq(0), jt.eq(jt + 1)]
                        with m.If(jt != n_tiles - 1):
                            m.next = "C_WAIT"
                        with m.Elif(last_block):
                            m.next = "DONE"
                        with m.Else():
                            m.d.sync += [jt.eq(0), it.eq(it + 1),
                                         c_block_addr.eq(c_block_addr + (cfg.ldc << log_p))]
                            m.next = "A_WAIT"
            with state("DONE"):
                pass

        starting = accepted & (row == 0)
        m.d.sync += [
            a_used.eq((a_used | Mux(starting & (tag.dest == DEST_A), 1 << half, 0))
                      & ~a_freed),
            c_used.eq(Mux(starting & (tag.dest == DEST_C), 1, Mux(c_taken, 0, c_used))),
        ]
        with m.If(~run):
            m.d.sync += [a_used.eq(0), c_used.eq(0)]

    # ------------------------------------------------------------------ issue
    def _issue(self, m, cfg, run, a_rd, b_rd, array, m_tiles, n_tiles, a_full, b_full,
               c_full, a_freed, c_taken, credits, credit_back, bf16, b_word_bytes):
        """Feeds tiles to the array: one k-step a cycle, tiles ``max(K, 2P)`` apart.
        Returns a signal that is high once every tile has been issued."""
        p, bb = self.p, self.bus_bytes
        log_p, log_bb = exact_log2(p), exact_log2(bb)
        it = Signal(range(MAX_DIM // p + 1))
        jt = Signal(range(MAX_DIM // p + 1))
        k = Signal(range(MAX_DIM))
        issuing = Signal()
        issued_all = Signal()
        since = Signal(range(array.min_spacing + 1), init=array.min_spacing)
        half = it[0]

        start = Signal()
        m.d.comb += start.eq(run & ~issuing & ~issued_all & b_full & a_full.bit_select(half, 1)
                             & (~cfg.accumulate | c_full) & (credits >= p)
                             & (since == array.min_spacing))
        step = start | issuing
        last_step = k == cfg.k - 1
        m.d.sync += credits.eq(credits - Mux(start, p, 0) + credit_back)
        with m.If(start):
            m.d.sync += since.eq(1)
        with m.Elif(since != array.min_spacing):
            m.d.sync += since.eq(since + 1)

        elem_shift = Mux(bf16, 1, 0)
        byte_k = k << elem_shift                           # byte of column k in an A row
        byte_j = (jt << log_p) << elem_shift               # byte of the tile's first column
        b_words = ROW_BYTES // b_word_bytes
        m.d.comb += [
            a_rd.addr.eq(Cat((byte_k >> log_bb)[:exact_log2(ROW_BYTES // bb)], half)),
            b_rd.addr.eq(k * b_words + (byte_j >> exact_log2(b_word_bytes))),
        ]
        with m.If(step):
            m.d.sync += k.eq(k + 1)
            with m.If(last_step):
                m.d.sync += [k.eq(0), issuing.eq(0), jt.eq(jt + 1)]
                with m.If(jt == n_tiles - 1):
                    m.d.sync += [jt.eq(0), it.eq(it + 1)]
                    m.d.comb += a_freed.eq(1 << half)
                    with m.If(it == m_tiles - 1):
                        m.d.sync += issued_all.eq(1)
            with m.Else():
                m.d.sync += issuing.eq(1)
        with m.If(~run):
            m.d.sync += [k.eq(0), issuing.eq(0), jt.eq(0), it.eq(0), issued_all.eq(0),
                         since.eq(array.min_spacing)]

        # One cycle later the buffers answer: pick the elements and present the step.
        s_valid, s_first, s_last = Signal(), Signal(), Signal()
        s_byte_k = Signal(log_bb)
        s_byte_j = Signal(exact_log2(b_word_bytes))
        m.d.sync += [s_valid.eq(step), s_first.eq(start), s_last.eq(last_step),
                     s_byte_k.eq(byte_k), s_byte_j.eq(byte_j)]
        m.d.comb += [array.step.valid.eq(s_valid), array.step.first.eq(s_first),
                     array.step.last.eq(s_last)]
        for i in range(p):
            word = a_rd.data[i]
            m.d.comb += array.step.a[i].eq(Mux(bf16, word.word_select(s_byte_k >> 1, 16),
                                               word.word_select(s_byte_k, 8)))
        b_word = b_rd.data.as_value()
        chunk16 = b_word.word_select(s_byte_j >> exact_log2(2 * p), 16 * p)
        chunk8 = b_word.word_select(s_byte_j >> log_p, 8 * p)
        for j in range(p):
            m.d.comb += array.step.b[j].eq(Mux(bf16, chunk16[16 * j:16 * j + 16],
                                               chunk8[8 * j:8 * j + 8]))
        take_c = s_valid & s_first & cfg.accumulate
        m.d.comb += [array.cinit_load.eq(take_c), c_taken.eq(take_c)]
        return issued_all

    # ------------------------------------------------------------------ drain
    def _drain(self, m, cfg, run, array, out_fifo, writer, m_tiles, n_tiles, credit_back):
        """Sends the array's result rows below M to the writer; returns "all drained"."""
        p, log_p = self.p, exact_log2(self.p)
        it = Signal(range(MAX_DIM // p + 1))
        jt = Signal(range(MAX_DIM // p + 1))
        drained_all = Signal()
        row = Signal(range(MAX_DIM + p))
        m.d.comb += row.eq((it << log_p) + array.row_index)
        tile_cols = cfg.n - (jt << log_p)
        entry = Signal(writer.row.payload.shape())
        m.d.comb += [
            entry.data.eq(array.row),
            entry.addr.eq(cfg.c_addr + row * cfg.ldc + (jt << (log_p + 2))),
            entry.nbytes.eq(Mux(tile_cols < p, tile_cols, p) << 2),
            out_fifo.w_data.eq(entry),
            out_fifo.w_en.eq(array.row_valid & (row < cfg.m)),
        ]
        with m.If(array.row_valid & (array.row_index == p - 1)):
            m.d.sync += jt.eq(jt + 1)
            with m.If(jt == n_tiles - 1):
                m.d.sync += [jt.eq(0), it.eq(it + 1)]
                with m.If(it == m_tiles - 1):
                    m.d.sync += drained_all.eq(1)
        with m.If(~run):
            m.d.sync += [it.eq(0), jt.eq(0), drained_all.eq(0)]

        m.d.comb += [writer.row.valid.eq(out_fifo.r_rdy),
                     writer.row.payload.eq(out_fifo.r_data),
                     out_fifo.r_en.eq(writer.row.ready)]
        m.d.comb += credit_back.eq((array.row_valid & (row >= cfg.m))
                                   + (out_fifo.r_en & out_fifo.r_rdy))
        return drained_all
