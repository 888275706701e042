"""The matrix accelerator's core: checks, operand loads, tile issue, result write-back.

Data flow of one command (C = A·B, or C += A·B)::

    TatWalk ─► LoadSequencer ─► RowReader ─► OperandBuffers ─► SystolicArray
                                                 ▲     (B, 2×A, old C)  │ rows
                          TileIssuer ── steps ───┘                      ▼
                                              RowWriter ◄── ResultPath (FIFO, credits)

* **Checks at START** (docs/design.md order): BAD_COMMAND, BAD_TAT, MISALIGNED, computed every
  cycle from the register values and registered (see :class:`MatrixCore`).
* **TAT walk** (:class:`~hdl.ma.walk.TatWalk`): before any access, every row of A, B and
  C is checked to lie in mapped regions, so a failing command computes and writes nothing.
* **Loads** (:class:`~hdl.ma.loads.LoadSequencer`): all of B first, then A one block of P
  rows at a time into the free half of a double buffer (and, with ACCUMULATE, the old C
  tiles of the next group), running ahead of the computation.
* **Issue** (:class:`~hdl.ma.issue.TileIssuer`): output tiles in groups of
  ``INTERLEAVE`` along N, groups in row-major order; a group takes ``K·INTERLEAVE``
  cycles (at least ``(INTERLEAVE + 1)·P``), its tiles' k-steps interleaved so that the
  PE's pipelined binary32 adder keeps the sequential-in-k order of every sum.
* **Write-back** (:class:`~hdl.ma.results.ResultPath`): each finished group's rows go
  through a FIFO to the row writer while the next group computes.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from hdl.common.codes import ErrorCode
from hdl.common.command import CommandCoreSignature
from hdl.common.rowio import ErrorReport, RowReader, RowWriter
from hdl.common.tat import TatTableLayout, tat_entry_ok
from hdl.ma.array import SystolicArray
from hdl.ma.buffers import OperandBuffers
from hdl.ma.issue import TileIssuer
from hdl.ma.layouts import MAX_DIM, MaCommandLayout, RowTag, check_parameters, mode_flags
from hdl.ma.loads import LoadSequencer
from hdl.ma.results import ResultPath
from hdl.ma.walk import TatWalk

__all__ = ["MAX_DIM", "MaCommandLayout", "MatrixCore", "check_parameters"]


class MatrixCore(wiring.Component):
    """Runs one MA command at a time (see the module docstring).

    ``cmd`` and ``tat`` are the register values; ``refuse_code`` / ``refuse_addr`` are the
    checks at START, for :class:`hdl.common.command.CommandStatus`. They are registered
    (two stages): they judge the register values of two cycles before, which are the
    values START sees, since the register block performs two writes at least three
    cycles apart (one write outstanding, the next accepted after its B response). ``launch`` starts a command
    (the core copies ``cmd`` and ``tat`` then); it ends with one ``finish`` pulse, after
    the last write of C is acknowledged, or one ``fail`` pulse with a code and the
    logical address, once nothing it issued is still in flight.

    Timing: nothing but the walk's start and the copy of the command hangs on ``launch``
    (a decode of the register bus); the units are cleared by a registered copy of it, a
    cycle later, while the walk runs.
    """

    def __init__(self, p=8, data_width=128):
        check_parameters(p, data_width)
        self.p = p
        self.data_width = data_width
        super().__init__(CommandCoreSignature(MaCommandLayout(), data_width,
                                              tat=In(TatTableLayout())))

    def _start_checks(self, m):
        # Two register stages: each check's verdict, then the first failing one. A write
        # changes a register the cycle after it is performed and START is performed three
        # cycles after the write at the earliest, by when both stages have followed.
        cmd = self.cmd
        code, addr = Signal(ErrorCode), Signal(32)
        bf16, _ = mode_flags(m, cmd, "start_mode")
        # Every MODE.MODE value is a mode (bit 0 bf16, bit 1 B transposed): only the
        # shape can be out of range.
        bad_shape = Signal()
        m.d.sync += bad_shape.eq((cmd.m == 0) | (cmd.m > MAX_DIM)
                                 | (cmd.k == 0) | (cmd.k > MAX_DIM)
                                 | (cmd.n == 0) | (cmd.n > MAX_DIM))
        bad_tat = Signal()
        m.d.sync += bad_tat.eq(~Cat(*(tat_entry_ok(e) for e in self.tat)).all())
        # (register value, alignment mask) in the order ERR_ADDR reports them.
        alignment = [(cmd.a_addr, bf16), (cmd.lda, bf16), (cmd.b_addr, bf16),
                     (cmd.ldb, bf16), (cmd.c_addr, 3), (cmd.ldc, 3)]
        misaligned = Signal(len(alignment))
        values = [Signal(32, name=f"align_value{i}") for i in range(len(alignment))]
        for i, (value, mask) in enumerate(alignment):
            m.d.sync += [misaligned[i].eq((value & mask) != 0), values[i].eq(value)]
        with m.If(bad_shape):
            m.d.comb += code.eq(ErrorCode.BAD_COMMAND)
        with m.Elif(bad_tat):
            m.d.comb += code.eq(ErrorCode.BAD_TAT)
        for i, value in enumerate(values):
            with m.Elif(misaligned[i]):
                m.d.comb += [code.eq(ErrorCode.MISALIGNED), addr.eq(value)]
        m.d.sync += [self.refuse_code.eq(code), self.refuse_addr.eq(addr)]

    def elaborate(self, platform):
        m = Module()
        p = self.p
        self._start_checks(m)

        # The command as launched: later register writes do not disturb it.
        # (copied every cycle while idle, so the copy's enable is a state, not ``launch``)
        cmd = Signal(MaCommandLayout())
        tat = Signal(TatTableLayout())
        idle = Signal()
        with m.If(idle):
            m.d.sync += [cmd.eq(self.cmd), tat.eq(self.tat)]
        bf16, b_t = mode_flags(m, cmd, "mode")
        # Clears every unit (and the array's pipeline) the cycle after launch: the walk,
        # which takes that cycle to set up, uses none of them.
        clear = Signal()
        m.d.sync += clear.eq(self.launch)

        m.submodules.walk = walk = TatWalk()
        m.submodules.loads = loads = LoadSequencer(p)
        m.submodules.reader = reader = RowReader(self.data_width, RowTag())
        array = SystolicArray(p, self.data_width)
        m.submodules.buffers = buffers = OperandBuffers(p, self.data_width, array.init_hold)
        m.submodules.issuer = issuer = TileIssuer(p, array.min_spacing)
        m.submodules.array = array
        m.submodules.results = results = ResultPath(p)
        # C rows start on 4-byte boundaries: C_ADDR and LDC are checked at START.
        m.submodules.writer = writer = RowWriter(self.data_width, 4 * p, align=4)

        run, abort = Signal(), Signal()
        for unit in (walk, loads, issuer, results):
            m.d.comb += unit.cmd.eq(cmd)
        for unit in (loads, issuer, results):
            m.d.comb += unit.run.eq(run)
        for unit in (reader, writer):
            m.d.comb += [unit.tat.eq(tat), unit.clear.eq(clear), unit.abort.eq(abort)]
        m.d.comb += [
            walk.tat.eq(tat),
            buffers.clear.eq(clear), results.clear.eq(clear), array.clear.eq(clear),
            buffers.bf16.eq(bf16), buffers.b_t.eq(b_t),
            buffers.accumulate.eq(cmd.accumulate),
            array.bf16.eq(bf16), array.accumulate.eq(cmd.accumulate),
            # operands: reader → buffers → array, as the issuer asks
            buffers.beat.eq(reader.beat),
            buffers.request.eq(issuer.request),
            array.step.eq(buffers.step),
            array.init_write.eq(buffers.init_write),
            issuer.a_full.eq(buffers.a_full), issuer.b_full.eq(buffers.b_full),
            issuer.c_full.eq(buffers.c_full),
            buffers.a_freed.eq(issuer.a_freed), loads.a_freed.eq(issuer.a_freed),
            loads.c_taken.eq(buffers.c_taken),
            # results: array → FIFO → writer, with credits
            results.row_valid.eq(array.row_valid), results.row_index.eq(array.row_index),
            results.row.eq(array.row),
            results.reserve.eq(issuer.reserve), issuer.room.eq(results.room),
        ]
        wiring.connect(m, loads.request, reader.cmd)
        wiring.connect(m, results.out, writer.row)
        for name in ("rd_req", "rd_resp"):
            wiring.connect(m, wiring.flipped(getattr(self.mem, name)), getattr(reader, name))
        for name in ("wr_req", "wr_data", "wr_resp"):
            wiring.connect(m, wiring.flipped(getattr(self.mem, name)), getattr(writer, name))

        # After an error nothing more may reach memory: rows still in the result path, or
        # still leaving the array, are dropped. ``abort`` holds the writer off them until
        # ``clear`` has emptied the result path, the cycle after launch: lifted at launch,
        # it let the writer take a row of the failed command from the FIFO in the cycle
        # of ``clear`` and write it during the next command.
        with m.If(clear):
            m.d.sync += abort.eq(0)

        error = Signal(ErrorReport())
        # Everything written, registered (once true it stays true until ``run`` falls):
        # DONE comes a cycle after the last write response was taken.
        all_written = Signal()
        m.d.sync += all_written.eq(run & issuer.issued_all & results.drained_all
                                   & results.empty & writer.idle & reader.idle)
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += idle.eq(1)
                with m.If(self.launch):
                    m.next = "WALK"
            with m.State("WALK"):
                m.d.comb += walk.go.eq(1)
                with m.If(walk.fail.valid):
                    m.d.sync += error.eq(walk.fail)
                    m.next = "FAIL"
                with m.Elif(walk.done):
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += run.eq(1)
                # Once everything is written, reader and writer are idle: no error can
                # come, so DONE does not wait for their error logic.
                with m.If(all_written):
                    m.d.comb += self.finish.eq(1)
                    m.next = "IDLE"
                with m.Elif(reader.error.valid):
                    m.d.sync += [error.eq(reader.error), abort.eq(1)]
                    m.next = "ABORT"
                with m.Elif(writer.error.valid):
                    m.d.sync += [error.eq(writer.error), abort.eq(1)]
                    m.next = "ABORT"
            with m.State("ABORT"):
                # Wait for every burst in flight: the next command starts clean.
                with m.If(reader.idle & writer.idle):
                    m.next = "FAIL"
            with m.State("FAIL"):
                m.d.comb += [self.fail.eq(1), self.fail_code.eq(error.code),
                             self.fail_addr.eq(error.addr[:32])]
                m.next = "IDLE"
        return m
