"""The vector accelerator's core: checks at START, the data paths, the command's end.

Data flow of one command::

    elementwise (ADD, MUL, SCALE; MUL_MEM, ADD_MEM: y is one word, the scalar at SRC2)
    and SUM (one result):
      OperandReader ─► Realign ─┐ x
                    └► Realign ─┤ y ─► LaneEngine (a bus word a cycle) ─┐
    strided GATHER:                                                     ├─► StreamWriter
      StridedGather (one read per element, many in flight) ─────────────┘
    row commands (EXP, SILU, DEQUANTIZE, SOFTMAX, RMSNORM, QUANTIZE, TOPK, MAX, RECIP,
    CVT_F32, TOPK_WIDE, DEQUANTIZE_MEM (y: the scale word at SRC2); fn_lanes elements a
    cycle through the function units; a pass per read of the operands, see hdl.va.rows):
      OperandReader ─► Realign ─► RowUnit ─► StreamWriter (again at DST2: QUANTIZE, TOPK;
                                             TOPK_WIDE: DST + 16c, DST2 + 32c per pass c)
    CLAMP, SOFTPLUS, SQRT (fn_lanes elements a cycle, a pipeline that never stalls):
      OperandReader ─► Realign ─► [WidthAdapter ─►] ExtUnit (hdl.va.extfunc) ─► StreamWriter

``fn_lanes`` (default data_width/16, the bus rate): with fewer, the function units are
built that narrow and take each bus word in pieces (:mod:`hdl.va.narrow`).
    strided SCATTER:
      OperandReader ─► Realign ─► StridedScatter (one write per element, many in flight)
    GATHER_IDX, SCATTER_IDX, GATHER_CSR: IndexedMover (its own memory port; hdl/va/indexed.py)

Both paths read through one memory port (``rd_req`` / ``rd_resp``, the running
command's path owns it: :class:`~hdl.va.portmux.PortMux`) and write through the
:class:`~hdl.va.streams.StreamWriter`.

Which path runs a command, the checks at START and the bytes each operand and result
spans come from one table, :data:`spec.va.VA_COMMANDS` (:mod:`hdl.va.opcodes`).
"""

from functools import reduce
from operator import or_
from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, wiring
from amaranth.utils import exact_log2

from hdl.common.codes import VaOpcode, decode
from hdl.common.command import CommandCoreSignature
from hdl.common.memport import PHYS_ADDR_BITS
from hdl.va.extfunc import ExtUnit, clamp_bounds_ok
from hdl.va.gather import StridedGather
from hdl.va.indexed import IndexedMover
from hdl.va.lanes import LaneEngine
from hdl.va.narrow import WidthAdapter, check_fn_lanes
from hdl.va.opcodes import RTL_OPCODES, operand_bytes, start_checks, unit_groups
from hdl.va.portmux import PortMux
from hdl.va.rows import RowUnit
from hdl.va.scatter import StridedScatter
from hdl.va.streams import (
    ErrorEvent,
    OperandReader,
    Realign,
    StreamWriter,
    words_for,
)
from spec.va import MAX_K, MAX_LENGTH, Count, VaUnit

__all__ = ["RTL_OPCODES", "VaCommandLayout", "VectorCore", "check_parameters"]

VALID_LANES = (4, 8, 16, 32, 64)
VALID_DATA_WIDTH = (64, 128, 256, 512)


def check_parameters(lanes, data_width, fn_lanes=None):
    """Raise ValueError unless (L, DATA_WIDTH, FN_LANES) is a configuration the VA supports
    (``fn_lanes`` None: DATA_WIDTH/16)."""
    if not isinstance(data_width, int) or data_width not in VALID_DATA_WIDTH:
        raise ValueError(f"DATA_WIDTH must be 64, 128, 256 or 512, not {data_width!r}")
    if not isinstance(lanes, int) or lanes not in VALID_LANES:
        raise ValueError(f"L must be a power of two in 4..64, not {lanes!r}")
    if 16 * lanes < data_width:
        raise ValueError(f"L={lanes} bf16 lanes ({16 * lanes} bits) are narrower than the "
                         f"{data_width}-bit bus: L must be at least {data_width // 16}")
    if fn_lanes is not None:
        check_fn_lanes(fn_lanes, data_width)


class VaCommandLayout(data.StructLayout):
    """The command registers as the core sees them (bytes, elements, 48-bit addresses)."""
    def __init__(self):
        super().__init__({
            "op": VaOpcode, "esize": 2, "length": 32,
            "src": PHYS_ADDR_BITS, "src2": PHYS_ADDR_BITS, "dst": PHYS_ADDR_BITS,
            "stride": 32, "scalar": 32,
            "dst2": PHYS_ADDR_BITS, "k": 32, "src3": PHYS_ADDR_BITS, "split_half": 1,
            "index_limit": 32, "rows": 32, "row_stride": 32,
        })


class VectorCore(wiring.Component):
    """Runs one VA command at a time (see the module docstring).

    ``cmd`` holds the register values; ``refuse_code`` / ``refuse_addr`` are the checks
    at START for :class:`hdl.common.command.CommandStatus`. ``launch`` starts a command;
    it ends with one ``finish`` pulse after its last write is answered, or one ``fail``
    pulse (code, address) once nothing it issued is in flight.

    ``elaborate`` builds it in parts, a method each: the START checks, the latched
    command, the units, the operand streams, the units' controls, the memory port's
    multiplexing, the command's sequence (the parts share one namespace of signals).
    """

    def __init__(self, lanes=32, data_width=128, fn_lanes=None):
        check_parameters(lanes, data_width, fn_lanes)
        self.lanes, self.data_width = lanes, data_width
        self.fn_lanes = data_width // 16 if fn_lanes is None else fn_lanes
        super().__init__(CommandCoreSignature(VaCommandLayout(), data_width))

    def _start_checks(self, m):
        """``refuse_code`` / ``refuse_addr``: the first failing check of
        :func:`hdl.va.opcodes.start_checks` (generated from :data:`spec.va.VA_COMMANDS`)."""
        checks = start_checks(m, self.cmd, clamp_bounds_ok(self.cmd.scalar))
        # The first failing check wins. A flat AND-OR selection, not an If/Elif chain:
        # a deep mux chain exhausts yosys's stack (opt_muxtree) in the FPGA flow.
        earlier = Const(0)
        codes, addrs = [], []
        for failed, code, addr in checks:
            first = Signal()
            m.d.comb += first.eq(failed & ~earlier)
            codes.append(Mux(first, code, 0))
            addrs.append(Mux(first, addr, 0))
            earlier = earlier | failed
        m.d.comb += [self.refuse_code.eq(reduce(or_, codes)),
                     self.refuse_addr.eq(reduce(or_, addrs))]

    def _ext_unit(self, m, go):
        """ExtUnit, ``fn_lanes`` wide (reset at ``go``), and what carries its bus-wide
        streams ``i`` and ``o``: the unit, or its width adapter."""
        width, narrow = self.data_width, 16 * self.fn_lanes
        m.submodules.ext = unit = ResetInserter(go)(ExtUnit(narrow, narrow < width))
        if narrow == width:
            return unit, unit
        m.submodules.ext_width = adapter = ResetInserter(go)(WidthAdapter(
            width, width, narrow, narrow, width // narrow,
            lambda payload, piece: payload.word_select(piece, narrow),
            lambda parts: Cat(*parts)))
        wiring.connect(m, adapter.narrow_i, unit.i)
        wiring.connect(m, unit.o, adapter.narrow_o)
        return unit, adapter

    def elaborate(self, platform):
        m = Module()
        s = SimpleNamespace()           # what the parts below share, named as in each
        self._start_checks(m)
        self._latch(m, s)
        self._units(m, s)
        self._operands(m, s)
        self._unit_controls(m, s)
        self._memory_port(m, s)
        self._sequence(m, s)
        return m

    def _latch(self, m, s):
        """The command latched at ``launch`` (``s.cmd``, valid from ``s.go``), its flags
        (``s.op``: one per unit of :data:`spec.va.VA_COMMANDS`, and a few commands')."""
        cmd = Signal(VaCommandLayout())
        go = Signal()                   # one cycle after launch: the latched command is valid
        m.d.sync += go.eq(self.launch)
        with m.If(self.launch):
            m.d.sync += cmd.eq(self.cmd)
        op = decode(m, cmd.op, {**unit_groups(), "rms": VaOpcode.RMSNORM,
                                "rope": VaOpcode.ROPE}, "cmd")
        s.cmd, s.go, s.op, s.n = cmd, go, op, cmd.length[:17]
        s.split = op["rope"] & cmd.split_half
        s.abort = Signal()
        s.second = Signal()             # the writer's second result (QUANTIZE, TOPK, ROPE)

    def _units(self, m, s):
        """The data paths' units (module docstring), each reset or started at ``s.go``."""
        width, go, cmd = self.data_width, s.go, s.cmd
        m.submodules.reader = s.reader = OperandReader(width, 4)
        m.submodules.gatherer = s.gatherer = StridedGather(width)
        m.submodules.engine = s.engine = ResetInserter(go)(LaneEngine(self.lanes, width // 16))
        m.submodules.writer = s.writer = StreamWriter(width)
        m.submodules.scatterer = s.scatterer = StridedScatter(width)
        m.submodules.rows = rows = ResetInserter(go)(RowUnit(width, self.fn_lanes))
        # TOPK, TOPK_WIDE: the entries of the row unit's chunk (8 a chunk, the rest last)
        chunk_left = Signal(range(MAX_LENGTH + 1))
        chunk_count = Signal(range(MAX_K + 1))
        m.d.comb += [chunk_left.eq(cmd.k[:17] - (rows.chunk << 3)),
                     chunk_count.eq(Mux(chunk_left > MAX_K, MAX_K, chunk_left))]

        s.ext_unit, s.ext_io = self._ext_unit(m, go)
        m.submodules.indexed = mover = IndexedMover(width, VaCommandLayout())
        m.d.comb += [mover.start.eq(go & s.op["indexed"]), mover.cmd.eq(cmd),
                     mover.abort.eq(s.abort)]
        again = Signal()                # a row command's next pass: read the operands again
        use_y = Signal()                # RMSNORM's gamma: read in this pass
        row = s.op["rows"]
        # In the cycle of go the row unit is being reset: its outputs still show the
        # previous command's last pass (pass 2 of an RMSNORM or SOFTMAX has use_y), so
        # none of them counts then. Otherwise an RMSNORM right after one of them read
        # gamma in its first pass too, and that read could still be answering when the
        # reader restarted for the second pass, its words taken for the new x burst.
        live = row & ~s.abort & ~go
        m.d.comb += [again.eq(rows.again & live), s.second.eq(rows.second & live),
                     use_y.eq(rows.use_y & ~go)]
        s.rows, s.chunk_count, s.mover, s.again, s.use_y = rows, chunk_count, mover, again, use_y

    def _operands(self, m, s):
        """The contiguous operands: a reader's stream each, realigned, to the unit the
        command uses. Their bytes are the command's operand ranges (spec.va.VA_COMMANDS)
        but for split-half ROPE's x: x[:n/2] at SRC, x[n/2:] at SRC + LENGTH bytes (the
        fourth stream); RMSNORM reads gamma in its last pass only."""
        width, bb = self.data_width, self.data_width // 8
        off_bits = exact_log2(bb)
        cmd, op, n, split = s.cmd, s.op, s.n, s.split
        read = (VaUnit.LANES, VaUnit.ROWS, VaUnit.EXT, VaUnit.SCATTER)   # through the reader
        counts = {Count.LENGTH: n}
        src, src2, src3 = (operand_bytes(m, cmd.op, reg, counts, cmd.esize, units=read,
                                         name=f"{reg}_bytes") for reg in ("src", "src2", "src3"))
        src_hi = Signal(PHYS_ADDR_BITS)
        m.d.comb += src_hi.eq(cmd.src + n)
        operands = ((cmd.src, Mux(split, n, src)), (cmd.src2, Mux(op["rms"] & ~s.use_y, 0, src2)),
                    (cmd.src3, src3), (src_hi, Mux(split, n, 0)))
        for i, (addr, size) in enumerate(operands):
            realign = Realign(width)
            m.submodules[f"realign{i}"] = realign
            offset = addr[:off_bits]
            m.d.comb += [
                s.reader.config[i].addr.eq(addr), s.reader.config[i].nbytes.eq(size),
                realign.start.eq(s.go | s.again),
                # a reader's realigner: shift by the offset; an aligned stream passes as is
                realign.shift.eq(offset | ((offset == 0) << off_bits)),
                realign.absorb.eq(offset != 0),
                realign.words_in.eq(words_for(offset, size, bb)),
                realign.words_out.eq(words_for(0, size, bb)),
            ]
            wiring.connect(m, getattr(s.reader, f"out{i}"), realign.i)
            self._route_operand(m, s, i, realign.o)

    def _route_operand(self, m, s, i, stream):
        """Operand ``i``'s realigned ``stream`` to the unit the command uses."""
        rows, engine = s.rows, s.engine
        if i >= 2:      # ROPE's sin and the second half of x
            wiring.connect(m, stream, rows.z if i == 2 else rows.w)
            return
        engine_in = engine.x if i == 0 else engine.y
        if i == 0:      # the first operand feeds the lanes, a scatter or the functions
            with m.If(s.op["scatter"]):
                wiring.connect(m, stream, s.scatterer.i)
            with m.Elif(s.op["rows"]):
                wiring.connect(m, stream, rows.x)
            with m.Elif(s.op["ext"]):
                wiring.connect(m, stream, s.ext_io.i)
            with m.Else():
                wiring.connect(m, stream, engine_in)
        else:
            # y's payload goes to the row unit whatever the command; its valid only to one
            m.d.comb += rows.y.payload.eq(stream.payload)
            with m.If(s.op["rows"]):
                m.d.comb += [rows.y.valid.eq(stream.valid), stream.ready.eq(rows.y.ready)]
            with m.Else():
                wiring.connect(m, stream, engine_in)

    def _unit_controls(self, m, s):
        """The units' command inputs, and the writer's streams: the first result at DST,
        then the second (``s.second``)."""
        cmd, op, n, rows, writer = s.cmd, s.op, s.n, s.rows, s.writer
        engine, gatherer, scatterer, ext_unit = s.engine, s.gatherer, s.scatterer, s.ext_unit
        go, chunk_count = s.go, s.chunk_count
        scatter, indexed, rope, second = op["scatter"], op["indexed"], op["rope"], s.second
        # The results' bytes (spec.va.VA_COMMANDS) for the units that write through the
        # writer; TOPK_WIDE's K a chunk of 8 at a time (chunk 0 from the command: at go
        # the row unit is being reset and still shows the last command's chunk)
        k = Mux(second, chunk_count, Mux(cmd.k[:17] > MAX_K, MAX_K, cmd.k[:4]))
        written = (VaUnit.GATHER, VaUnit.LANES, VaUnit.ROWS, VaUnit.EXT)
        dst, dst2 = (operand_bytes(m, cmd.op, reg, {Count.LENGTH: n, Count.K: k}, cmd.esize,
                                   units=written, name=f"{reg}_bytes") for reg in ("dst", "dst2"))
        m.d.comb += [
            s.reader.start.eq(go | s.again), engine.op.eq(cmd.op),
            rows.op.eq(cmd.op), rows.n.eq(n), rows.k.eq(cmd.k[:17]), rows.scalar.eq(cmd.scalar),
            rows.split.eq(cmd.split_half),
            ext_unit.op.eq(cmd.op), ext_unit.scalar.eq(cmd.scalar),
            rows.writer_done.eq(writer.done),
            engine.scalar.eq(cmd.scalar[:16]), engine.count.eq(n),
            gatherer.start.eq(go & op["gather"]), gatherer.base.eq(cmd.src),
            gatherer.stride.eq(cmd.stride), gatherer.esize.eq(cmd.esize),
            gatherer.count.eq(n),
            scatterer.start.eq(go & scatter), scatterer.base.eq(cmd.dst),
            scatterer.stride.eq(cmd.stride), scatterer.esize.eq(cmd.esize),
            scatterer.count.eq(n),
            # a scatter (and an indexed move) writes through its own unit: the stream
            # writer has nothing to do (address 0: not even a partial first word).
            # QUANTIZE and TOPK write a second result at DST2 once the first is written;
            # split-half ROPE the second halves at DST + LENGTH bytes
            writer.start.eq(go | second),
            writer.addr.eq(Mux(scatter | indexed, 0, Mux(second, Mux(
                rope, cmd.dst + n, Mux(rows.indices, cmd.dst2 + (rows.chunk << 5),
                                       cmd.dst + (rows.chunk << 4))), cmd.dst))),
            writer.nbytes.eq(Mux(s.split, n, Mux(second & rows.indices, dst2, dst))),
        ]
        for unit in (s.reader, gatherer, writer, scatterer):
            m.d.comb += unit.abort.eq(s.abort)

    def _memory_port(self, m, s):
        """The memory port and the writer's input, owned by the running command's path
        (:class:`hdl.va.portmux.PortMux`)."""
        m.submodules.ports = ports = PortMux(self.data_width)
        m.d.comb += [getattr(ports.path, flag).eq(s.op[flag])
                     for flag in ("indexed", "scatter", "gather", "rows", "ext")]
        wiring.connect(m, ports.mem, wiring.flipped(self.mem))
        wiring.connect(m, s.mover.mem, ports.indexed)
        for unit, port in ((s.reader, ports.reader), (s.gatherer, ports.gather)):
            wiring.connect(m, unit.rd_req, port.rd_req)
            wiring.connect(m, port.rd_resp, unit.rd_resp)
        for unit, port in ((s.scatterer, ports.scatter), (s.writer, ports.writer)):
            wiring.connect(m, unit.wr_req, port.wr_req)
            wiring.connect(m, unit.wr_data, port.wr_data)
            wiring.connect(m, port.wr_resp, unit.wr_resp)
        for unit, port in ((s.gatherer.o, ports.from_gather), (s.rows.o, ports.from_rows),
                           (s.ext_io.o, ports.from_ext), (s.engine.o, ports.from_lanes)):
            wiring.connect(m, unit, port)
        wiring.connect(m, ports.to_writer, s.writer.i)

    def _sequence(self, m, s):
        """A command's run: ``finish`` once everything is written and nothing is in
        flight, or the first unit's error, the abort, and ``fail`` once all are idle."""
        reader, gatherer, writer, scatterer, mover = (
            s.reader, s.gatherer, s.writer, s.scatterer, s.mover)
        abort = s.abort
        error = Signal(ErrorEvent())
        idle = reader.idle & gatherer.idle & writer.idle & scatterer.idle & mover.idle
        units = (reader, gatherer, writer, scatterer, mover)
        with m.If(self.launch):
            m.d.sync += abort.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(s.go):
                    m.next = "RUN"
            with m.State("RUN"):
                for unit in units:
                    with m.If(unit.error.valid):
                        m.d.sync += [error.eq(unit.error), abort.eq(1)]
                        m.next = "ABORT"
                with m.If(~Cat(*(unit.error.valid for unit in units)).any()
                          & writer.done & (scatterer.done | ~s.op["scatter"]) & s.rows.done
                          & (mover.done | ~s.op["indexed"]) & idle):
                    m.d.comb += self.finish.eq(1)
                    m.next = "IDLE"
            with m.State("ABORT"):
                with m.If(idle):
                    m.next = "FAIL"
            with m.State("FAIL"):
                m.d.comb += [self.fail.eq(1), self.fail_code.eq(error.code),
                             self.fail_addr.eq(error.addr)]
                m.next = "IDLE"
