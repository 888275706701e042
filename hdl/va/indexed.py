"""Indexed gather and scatter (GATHER_IDX, SCATTER_IDX) and the CSR gather (GATHER_CSR).

Element i lives at ``base + idx[i]·stride`` (``base`` is SRC for the gathers, DST for
SCATTER_IDX; ``idx`` the int32 vector at SRC2, -1 skips), or for GATHER_CSR element j of
row r at ``SRC + r·ROW_STRIDE + col[j]·STRIDE`` (row pointers at SRC2, columns at SRC3).
The golden model's contract (:func:`golden.va.execute`) is that a bad index is found
*before anything is written*: the command then ends with BAD_COMMAND and ERR_ADDR = the
first offending index's address. Hence three phases:

1. LIMITS (:class:`IndexLimits`, 48 cycles): the largest index whose element stays below
   2**48, ``Q = floor((2**48 - size - base) / stride)``, by restoring division; for the
   CSR form the source matrix's extent ``SRC + (ROWS-1)·ROW_STRIDE + (INDEX_LIMIT-1)·STRIDE
   + size`` by shift-and-add (beyond 2**48: BAD_COMMAND at SRC, nothing read).
2. CHECK: the indices (and row pointers) stream in at the bus rate and are checked a
   word at a time (:class:`IndexCheck`, :class:`RowPointerCheck`); nothing is written.
3. RUN: the index data is read again and turned into one element address a cycle
   (:class:`IndexAddresses`); the gathers read each element (:class:`ElementReader`) and
   write it to ``DST + i·size``, the scatter writes each element of the dense source to
   its address (:class:`ElementWriter`), in element order.

The read port is shared by the burst reader (index data, row pointers, the scatter's
source) and the element reader; responses come back in request order, so a small FIFO
of request owners routes them.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, ResetInserter, Signal, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.codes import VaOpcode, decode
from hdl.common.memport import PHYS_ADDR_BITS, MemPortSignature
from hdl.va.gather import ElementAddress, ElementReader, StridedAddresses
from hdl.va.scatter import ElementWriter, UnpackElements, WriteElement, join_elements
from hdl.va.streams import ErrorEvent, OperandReader, Realign, words_for
from spec.codes import ErrorCode
from spec.va import MAX_LENGTH

__all__ = ["IndexLimits", "IndexCheck", "RowPointerCheck",
           "IndexAddresses", "IndexedMover"]

MAX_ROW_POINTERS = 1 << 32          # ROWS + 1 for a 32-bit ROWS register
MAX_N = MAX_LENGTH                  # elements of a command


class IndexLimits(wiring.Component):
    """Address limits of an indexed command, 48 cycles after ``start``.

    ``qmax``: an index ``v >= 0`` stays below 2**48 (``base + v·stride + size <= 2**48``)
    iff ``v <= qmax``; ``none_ok`` when not even index 0 does. ``extent_bad`` (CSR form):
    ``base + (rows-1)·row_stride + (limit-1)·stride + size > 2**48`` (a factor below 0
    counts as 0). ``done`` stays high until the next ``start``.
    """

    def __init__(self):
        super().__init__({
            "start": In(1),
            "base": In(PHYS_ADDR_BITS), "esize": In(2), "stride": In(32),
            "rows": In(32), "row_stride": In(32), "limit": In(32),
            "done": Out(1), "qmax": Out(PHYS_ADDR_BITS), "none_ok": Out(1),
            "extent_bad": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        size = Signal(3)
        m.d.comb += size.eq(1 << self.esize)
        steps = Signal(range(PHYS_ADDR_BITS + 1))
        dividend = Signal(PHYS_ADDR_BITS)
        rem = Signal(33)
        quo = Signal(PHYS_ADDR_BITS)
        # Two shift-and-add products (64 bits each): (rows-1)·row_stride, (limit-1)·stride.
        mcand = [Signal(64, name=f"mcand{i}") for i in range(2)]
        mplier = [Signal(32, name=f"mplier{i}") for i in range(2)]
        acc = [Signal(64, name=f"acc{i}") for i in range(2)]
        top = Signal(PHYS_ADDR_BITS + 1)
        m.d.comb += top.eq((1 << PHYS_ADDR_BITS) - size - self.base)
        with m.If(self.start):
            m.d.sync += [steps.eq(PHYS_ADDR_BITS), dividend.eq(top[:PHYS_ADDR_BITS]),
                         rem.eq(0), quo.eq(0), self.none_ok.eq(top[PHYS_ADDR_BITS])]
            for i, (count, factor) in enumerate(((self.rows, self.row_stride),
                                                 (self.limit, self.stride))):
                m.d.sync += [mcand[i].eq(factor), acc[i].eq(0),
                             mplier[i].eq(Mux(count == 0, 0, count - 1))]
        with m.Elif(steps != 0):
            shifted = Cat(dividend[-1], rem[:32])
            fits = shifted >= self.stride
            m.d.sync += [steps.eq(steps - 1), dividend.eq(dividend << 1),
                         rem.eq(Mux(fits, shifted - self.stride, shifted)),
                         quo.eq(Cat(fits, quo[:-1]))]
            for i in range(2):
                m.d.sync += [mcand[i].eq(mcand[i] << 1), mplier[i].eq(mplier[i] >> 1),
                             acc[i].eq(acc[i] + Mux(mplier[i][0], mcand[i], 0))]
        extent = self.base + acc[0] + acc[1] + size
        m.d.comb += [self.done.eq(steps == 0), self.qmax.eq(quo),
                     self.extent_bad.eq(extent > (1 << PHYS_ADDR_BITS))]
        return m


class IndexCheck(wiring.Component):
    """Checks ``count`` (1..65536) int32 indices, ``data_width/32`` a word.

    ``i`` carries the index vector from byte 0 of aligned words. An index is out of
    range below ``lowest`` (-1 for the index vector, 0 for CSR columns) or at/above
    ``limit`` (unsigned); with ``check_addr``, an index ``v >= 0`` is out of the address
    space when ``none_ok`` or ``v > qmax``. ``range_bad``/``range_pos`` and
    ``addr_bad``/``addr_pos`` report the first of each kind; ``done`` once every word
    was taken (until the next ``start``).
    """

    def __init__(self, data_width):
        self.data_width = data_width
        super().__init__({
            "start": In(1),
            "count": In(range(MAX_N + 1)),
            "lowest": In(range(-1, 1)),
            "limit": In(32),
            "check_addr": In(1),
            "none_ok": In(1),
            "qmax": In(PHYS_ADDR_BITS),
            "i": In(stream.Signature(data_width)),
            "done": Out(1),
            "range_bad": Out(1), "range_pos": Out(range(MAX_N)),
            "addr_bad": Out(1), "addr_pos": Out(range(MAX_N)),
        })

    def elaborate(self, platform):
        m = Module()
        per_word = self.data_width // 32
        index = Signal(range(MAX_N + per_word))     # element index of the word's lane 0
        count = Signal(range(MAX_N + 1))
        m.d.comb += [self.done.eq(index >= count), self.i.ready.eq(~self.done)]
        take = self.i.valid & self.i.ready & ~self.start
        lanes = data.View(data.ArrayLayout(signed(32), per_word), self.i.payload)
        out_of_range, out_of_space = [], []
        for j in range(per_word):
            v = lanes[j]
            live = (index + j) < count
            out_of_range.append(live & ((v < self.lowest)
                                        | ((v >= 0) & (v.as_unsigned() >= self.limit))))
            out_of_space.append(live & self.check_addr & (v >= 0)
                                & (self.none_ok | (v > self.qmax)))
        for flags, bad, pos in ((out_of_range, self.range_bad, self.range_pos),
                                (out_of_space, self.addr_bad, self.addr_pos)):
            first = Signal(range(per_word))
            for j in reversed(range(per_word)):
                with m.If(flags[j]):
                    m.d.comb += first.eq(j)
            with m.If(take & Cat(*flags).any() & ~bad):
                m.d.sync += [bad.eq(1), pos.eq(index + first)]
        with m.If(take):
            m.d.sync += index.eq(index + per_word)
        with m.If(self.start):
            m.d.sync += [index.eq(0), count.eq(self.count), self.range_bad.eq(0),
                         self.addr_bad.eq(0)]
        return m


class RowPointerCheck(wiring.Component):
    """Checks the ``rows + 1`` int32 row pointers of a CSR command, ``data_width/32`` a
    word: the first is 0, none is below its predecessor, the last equals ``count``.
    ``bad`` when one of these fails; ``done`` once every word was taken."""

    def __init__(self, data_width):
        self.data_width = data_width
        super().__init__({
            "start": In(1),
            "rows": In(32),
            "count": In(range(MAX_N + 1)),
            "i": In(stream.Signature(data_width)),
            "done": Out(1),
            "bad": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        per_word = self.data_width // 32
        index = Signal(range(MAX_ROW_POINTERS + per_word + 1))   # entry of lane 0
        last = Signal(32)                                         # entry of the last pointer
        count = Signal(range(MAX_N + 1))
        prev = Signal(signed(32))
        m.d.comb += [self.done.eq(index > last), self.i.ready.eq(~self.done)]
        take = self.i.valid & self.i.ready & ~self.start
        lanes = data.View(data.ArrayLayout(signed(32), per_word), self.i.payload)
        wrong = []
        for j in range(per_word):
            v, entry = lanes[j], index + j
            before = prev if j == 0 else lanes[j - 1]
            wrong.append((entry <= last) & (Mux(entry == 0, v != 0, v < before)
                                            | ((entry == last) & (v != count))))
        with m.If(take):
            m.d.sync += [index.eq(index + per_word), prev.eq(lanes[per_word - 1])]
            with m.If(Cat(*wrong).any()):
                m.d.sync += self.bad.eq(1)
        with m.If(self.start):
            m.d.sync += [index.eq(0), last.eq(self.rows), count.eq(self.count),
                         self.bad.eq(0)]
        return m


class IndexAddresses(wiring.Component):
    """Element addresses of the RUN phase, one a cycle.

    ``idx`` carries the ``count`` indices (checked: -1 or in range), ``ptr`` the CSR row
    pointers (checked). Index form: ``base + v·stride``, ``skip`` for -1. CSR form
    (``csr``): column ``c`` of row ``r`` at ``base + r·row_stride + c·stride``; the row
    advances when the element number reaches the next row pointer (an empty row costs a
    cycle); pointers left after the last element are taken and dropped. Two register
    stages (index, then the product and sum).
    """

    def __init__(self):
        super().__init__({
            "start": In(1),
            "csr": In(1),
            "base": In(PHYS_ADDR_BITS), "stride": In(32), "row_stride": In(32),
            "count": In(range(MAX_N + 1)),
            "idx": In(stream.Signature(32)),
            "ptr": In(stream.Signature(32)),
            "o": Out(stream.Signature(ElementAddress())),
        })

    def elaborate(self, platform):
        m = Module()
        elem = Signal(range(MAX_N + 1))
        primed, have_end = Signal(), Signal()
        row_end = Signal(32)
        row_base = Signal(PHYS_ADDR_BITS)
        # The row walk: rp[0] (= 0) primes it, rp[r+1] ends row r.
        m.d.comb += self.ptr.ready.eq(self.csr & (~primed | ~have_end | (row_end == elem)))
        with m.If(self.ptr.valid & self.ptr.ready):
            with m.If(~primed):
                m.d.sync += primed.eq(1)
            with m.Else():
                m.d.sync += [row_end.eq(self.ptr.payload), have_end.eq(1)]
                with m.If(have_end):
                    m.d.sync += row_base.eq(row_base + self.row_stride)

        a_valid, a_skip = Signal(), Signal()
        a_idx = Signal(31)
        a_base = Signal(PHYS_ADDR_BITS)
        o_valid = Signal()
        o = Signal(ElementAddress())
        m.d.comb += [self.o.valid.eq(o_valid), self.o.payload.eq(o)]
        move = ~o_valid | self.o.ready
        a_free = ~a_valid | move
        in_row = ~self.csr | (have_end & (row_end != elem))
        emit = a_free & self.idx.valid & (elem != self.count) & in_row & ~self.start
        skip = ~self.csr & self.idx.payload[31]          # checked: a negative index is -1
        m.d.comb += self.idx.ready.eq(emit)
        with m.If(move):
            m.d.sync += [o_valid.eq(a_valid), o.skip.eq(a_skip),
                         o.addr.eq(a_base + a_idx * self.stride)]
        with m.If(a_free):
            m.d.sync += a_valid.eq(emit)
        with m.If(emit):
            m.d.sync += [a_idx.eq(Mux(skip, 0, self.idx.payload[:31])), a_skip.eq(skip),
                         a_base.eq(Mux(self.csr, row_base, self.base)), elem.eq(elem + 1)]
        with m.If(self.start):
            m.d.sync += [elem.eq(0), primed.eq(0), have_end.eq(0), row_base.eq(self.base),
                         a_valid.eq(0), o_valid.eq(0)]
        return m


def route(m, source, sink, when):
    """``source`` feeds ``sink`` while ``when`` (several routes of one source exclude
    each other)."""
    with m.If(when):
        wiring.connect(m, source, sink)


class IndexedMover(wiring.Component):
    """GATHER_IDX, SCATTER_IDX and GATHER_CSR (see the module docstring).

    ``start`` (one cycle) begins the command in ``cmd`` (a
    :class:`hdl.va.core.VaCommandLayout`, held for the whole command, already checked
    at START). It ends with ``done`` (every write answered) or one ``error`` event
    (BAD_COMMAND from the index checks, AXI errors), after which nothing is written.
    ``abort`` stops every unit; ``idle`` when no access is in flight.
    """

    def __init__(self, data_width, cmd_layout, outstanding=32):
        self.data_width, self.outstanding = data_width, outstanding
        super().__init__({
            "start": In(1),
            "cmd": In(cmd_layout),
            "mem": Out(MemPortSignature(data_width)),
            "error": Out(ErrorEvent()),
            "abort": In(1),
            "done": Out(1),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        x = SimpleNamespace()           # what the parts below share, named as in each
        self._units(m, x)
        self._phases(m, x)
        self._index_data(m, x)
        request_held = self._element_path(m, x)
        verdict, reader, elements, writer = x.verdict, x.reader, x.elements, x.writer
        with m.If(verdict.valid):
            m.d.comb += self.error.eq(verdict)
        for unit in (reader, elements, writer):
            with m.Elif(unit.error.valid):
                m.d.comb += self.error.eq(unit.error)
        m.d.comb += self.idle.eq(reader.idle & elements.idle & writer.idle & ~request_held)
        return m

    def _units(self, m, x):
        """The command's flags and sizes, and the units (each a submodule)."""
        width, bb = self.data_width, self.data_width // 8
        off_bits = exact_log2(bb)
        cmd = self.cmd
        op = decode(m, cmd.op, {"sidx": VaOpcode.SCATTER_IDX, "csr": VaOpcode.GATHER_CSR}, "op")
        sidx, csr = op["sidx"], op["csr"]
        n = cmd.length[:17]
        size = Signal(3)
        m.d.comb += size.eq(1 << cmd.esize)
        max_bytes = 4 * MAX_ROW_POINTERS

        m.submodules.limits = limits = IndexLimits()
        m.submodules.reader = reader = OperandReader(width, 2, max_bytes=max_bytes)
        m.submodules.realign0 = realign0 = Realign(width)
        m.submodules.realign1 = realign1 = Realign(width, max_bytes=max_bytes)
        m.submodules.check = check = IndexCheck(width)
        m.submodules.ptr_check = ptr_check = RowPointerCheck(width)
        m.submodules.unpack_idx = unpack_idx = UnpackElements(width)
        m.submodules.unpack_ptr = unpack_ptr = UnpackElements(width, MAX_ROW_POINTERS)
        m.submodules.unpack_src = unpack_src = UnpackElements(width)
        m.submodules.addresses = addresses = IndexAddresses()
        m.submodules.elements = elements = ElementReader(width, self.outstanding)
        m.submodules.dst = dst = StridedAddresses()
        m.submodules.writer = writer = ElementWriter(width, self.outstanding)
        x.cmd, x.sidx, x.csr, x.n, x.size, x.off_bits, x.bb = cmd, sidx, csr, n, size, off_bits, bb
        x.limits, x.reader, x.realign0, x.realign1, x.check, x.ptr_check = (
            limits, reader, realign0, realign1, check, ptr_check)
        x.unpack_idx, x.unpack_ptr, x.unpack_src, x.addresses = (
            unpack_idx, unpack_ptr, unpack_src, addresses)
        x.elements, x.dst, x.writer = elements, dst, writer

    def _phases(self, m, x):
        """IDLE, LIMITS, CHECK, RUN: ``x.pass_start`` (re)starts the burst reader for the
        CHECK and RUN passes; ``x.verdict`` is the index checks' error."""
        cmd, csr, limits, check, ptr_check, writer = (
            x.cmd, x.csr, x.limits, x.check, x.ptr_check, x.writer)
        # Phases. `pass_start` (re)starts the burst reader for the CHECK and RUN passes.
        pass_start, into_run, in_check, in_run = Signal(), Signal(), Signal(), Signal()
        verdict = Signal(ErrorEvent())

        def restart():
            with m.If(self.start):
                m.next = "LIMITS"
            with m.Elif(self.abort):
                m.next = "IDLE"

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.next = "LIMITS"
            with m.State("LIMITS"):
                with m.If(limits.done & ~self.start & ~self.abort):
                    with m.If(csr & limits.extent_bad):
                        m.d.comb += [verdict.valid.eq(1), verdict.code.eq(ErrorCode.BAD_COMMAND),
                                     verdict.addr.eq(cmd.src[:32])]
                        m.next = "IDLE"
                    with m.Else():
                        m.d.comb += pass_start.eq(1)
                        m.next = "CHECK"
                restart()
            with m.State("CHECK"):
                m.d.comb += in_check.eq(1)
                with m.If(check.done & (ptr_check.done | ~csr) & ~self.abort):
                    m.d.comb += verdict.code.eq(ErrorCode.BAD_COMMAND)
                    with m.If(csr & ptr_check.bad):
                        m.d.comb += [verdict.valid.eq(1), verdict.addr.eq(cmd.src2[:32])]
                    with m.Elif(check.range_bad):
                        m.d.comb += [verdict.valid.eq(1), verdict.addr.eq(
                            Mux(csr, cmd.src3, cmd.src2)[:32] + 4 * check.range_pos)]
                    with m.Elif(check.addr_bad):
                        m.d.comb += [verdict.valid.eq(1),
                                     verdict.addr.eq(cmd.src2[:32] + 4 * check.addr_pos)]
                    with m.If(verdict.valid):
                        m.next = "IDLE"
                    with m.Else():
                        m.d.comb += [pass_start.eq(1), into_run.eq(1)]
                        m.next = "RUN"
                restart()
            with m.State("RUN"):        # until the next start: `done` waits for `idle`
                m.d.comb += [in_run.eq(1), self.done.eq(writer.done)]
                restart()
        x.pass_start, x.into_run, x.in_check, x.in_run, x.verdict = (
            pass_start, into_run, in_check, in_run, verdict)

    def _index_data(self, m, x):
        """The limits' and checks' settings, the burst reader's operands (indices, row
        pointers, a scatter's source) to the checks or to the element path."""
        cmd, sidx, csr, n, off_bits, bb = x.cmd, x.sidx, x.csr, x.n, x.off_bits, x.bb
        limits, reader, realign0, realign1, check, ptr_check = (
            x.limits, x.reader, x.realign0, x.realign1, x.check, x.ptr_check)
        unpack_idx, unpack_ptr, unpack_src, addresses = (
            x.unpack_idx, x.unpack_ptr, x.unpack_src, x.addresses)
        pass_start, into_run, in_check, in_run = x.pass_start, x.into_run, x.in_check, x.in_run
        base = Mux(sidx, cmd.dst, cmd.src)
        m.d.comb += [
            limits.start.eq(self.start), limits.base.eq(base), limits.esize.eq(cmd.esize),
            limits.stride.eq(cmd.stride), limits.rows.eq(cmd.rows),
            limits.row_stride.eq(cmd.row_stride), limits.limit.eq(cmd.index_limit),
            check.start.eq(pass_start), check.count.eq(n), check.lowest.eq(Mux(csr, 0, -1)),
            check.limit.eq(cmd.index_limit), check.check_addr.eq(~csr),
            check.none_ok.eq(limits.none_ok), check.qmax.eq(limits.qmax),
            ptr_check.start.eq(pass_start), ptr_check.rows.eq(cmd.rows), ptr_check.count.eq(n),
        ]

        # The burst reader: operand 0 the indices (columns), operand 1 the row pointers
        # (CSR, both passes) or the scatter's source (RUN).
        pointers = 4 * (cmd.rows + 1)
        configs = ((Mux(csr, cmd.src3, cmd.src2), n << 2),
                   (Mux(csr, cmd.src2, cmd.src),
                    Mux(csr, pointers, Mux(into_run & sidx, n << cmd.esize, 0))))
        for i, ((addr, nbytes), realign) in enumerate(zip(configs, (realign0, realign1), strict=True)):
            offset = addr[:off_bits]
            m.d.comb += [
                reader.config[i].addr.eq(addr), reader.config[i].nbytes.eq(nbytes),
                realign.start.eq(pass_start),
                realign.shift.eq(offset | ((offset == 0) << off_bits)),
                realign.absorb.eq(offset != 0),
                realign.words_in.eq(words_for(offset, nbytes, bb)),
                realign.words_out.eq(words_for(0, nbytes, bb)),
            ]
        wiring.connect(m, reader.out0, realign0.i)
        wiring.connect(m, reader.out1, realign1.i)
        m.d.comb += [reader.start.eq(pass_start), reader.abort.eq(self.abort)]
        route(m, realign0.o, check.i, in_check)
        route(m, realign1.o, ptr_check.i, in_check)
        route(m, realign0.o, unpack_idx.i, in_run)
        route(m, realign1.o, unpack_ptr.i, in_run & csr)
        route(m, realign1.o, unpack_src.i, in_run & sidx)
        # The element path restarts at `start` too: a command ended by an error leaves
        # addresses and elements in it, which must not reach the next command.
        for unpack, esize, count in ((unpack_idx, 2, n), (unpack_ptr, 2, cmd.rows + 1),
                                     (unpack_src, cmd.esize, n)):
            m.d.comb += [unpack.start.eq(pass_start | self.start), unpack.esize.eq(esize),
                         unpack.count.eq(count)]
        wiring.connect(m, unpack_idx.o, addresses.idx)
        wiring.connect(m, unpack_ptr.o, addresses.ptr)
        m.d.comb += [addresses.start.eq(pass_start | self.start), addresses.csr.eq(csr),
                     addresses.base.eq(base), addresses.stride.eq(cmd.stride),
                     addresses.row_stride.eq(cmd.row_stride), addresses.count.eq(n)]

    def _element_path(self, m, x):
        """The elements' reads and writes; returns the read port's request register's
        ``held``."""
        cmd, sidx, n, size = x.cmd, x.sidx, x.n, x.size
        addresses, elements, dst, writer, unpack_src, reader = (
            x.addresses, x.elements, x.dst, x.writer, x.unpack_src, x.reader)
        # Gathers: read each element, write it to DST + i·size. Scatter: write the source's
        # element i to its address.
        gathered = stream.Signature(WriteElement()).create()
        scattered = stream.Signature(WriteElement()).create()
        route(m, addresses.o, elements.i, ~sidx)
        join_elements(m, dst.o, elements.o, gathered)
        route(m, gathered, writer.i, ~sidx)
        with m.If(sidx):
            join_elements(m, addresses.o, unpack_src.o, scattered)
        route(m, scattered, writer.i, sidx)
        m.d.comb += [
            elements.start.eq(self.start), elements.abort.eq(self.abort),
            dst.start.eq(self.start), dst.base.eq(cmd.dst), dst.stride.eq(size),
            dst.count.eq(n),
            writer.start.eq(self.start), writer.esize.eq(cmd.esize), writer.count.eq(n),
            writer.abort.eq(self.abort),
        ]
        request_held = self._read_port(m, reader, elements)
        for name in ("wr_req", "wr_data", "wr_resp"):
            wiring.connect(m, getattr(writer, name), wiring.flipped(getattr(self.mem, name)))
        return request_held


    def _read_port(self, m, reader, elements):
        """The burst reader and the element reader share the read port through one
        request register (the burst reader first): a request, once offered, stays
        unchanged until the memory takes it. A FIFO of owners (1 = element reader),
        written as a request enters the register, routes the in-order responses."""
        mem = self.mem
        m.submodules.owners = owners = ResetInserter(self.start)(
            fifo.SyncFIFOBuffered(width=1, depth=64))
        held = Signal()
        bursts = reader.rd_req.valid
        free = (~held | mem.rd_req.ready) & owners.w_rdy
        m.d.comb += [
            mem.rd_req.valid.eq(held),
            reader.rd_req.ready.eq(free),
            elements.rd_req.ready.eq(free & ~bursts),
            owners.w_en.eq(free & (bursts | elements.rd_req.valid)), owners.w_data.eq(~bursts),
        ]
        with m.If(mem.rd_req.valid & mem.rd_req.ready):
            m.d.sync += held.eq(0)
        with m.If(owners.w_en):
            m.d.sync += [held.eq(1), mem.rd_req.payload.eq(
                Mux(bursts, reader.rd_req.payload, elements.rd_req.payload))]
        mine = owners.r_data[0]
        for unit, owner in ((reader, 0), (elements, 1)):
            m.d.comb += [unit.rd_resp.payload.eq(mem.rd_resp.payload),
                         unit.rd_resp.valid.eq(mem.rd_resp.valid & owners.r_rdy
                                               & (mine == owner))]
        m.d.comb += [
            mem.rd_resp.ready.eq(owners.r_rdy & Mux(mine, elements.rd_resp.ready,
                                                    reader.rd_resp.ready)),
            owners.r_en.eq(mem.rd_resp.valid & mem.rd_resp.ready & mem.rd_resp.payload.last),
        ]
        return held
