"""Element writes: one single-word write burst per element, many in flight, in order.

:class:`ElementWriter` serves the strided scatter (addresses ``base + i·stride``), the
indexed scatter (addresses from an index vector) and the indexed gathers' results
(:mod:`hdl.va.indexed`). :class:`UnpackElements` splits a dense stream into elements.
"""

from amaranth.hdl import Module, Mux, ResetInserter, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.memport import PHYS_ADDR_BITS, BurstLayout, WriteDataLayout, WriteRespLayout
from hdl.va.gather import StridedAddresses
from hdl.va.streams import ErrorEvent
from spec.codes import ErrorCode
from spec.va import MAX_LENGTH

__all__ = ["WriteElement", "UnpackElements", "ElementWriter", "StridedScatter"]


class WriteElement(data.StructLayout):
    """One element to write: its address, ``skip`` (no write) and its bytes from bit 0."""
    def __init__(self):
        super().__init__({"addr": PHYS_ADDR_BITS, "skip": 1, "value": 32})


class UnpackElements(wiring.Component):
    """Splits aligned words into ``count`` elements of ``1 << esize`` bytes (element i at
    byte i·size of the stream; bits above the element are don't-care), one a cycle.
    Words offered after the last element are taken and dropped. ``max_count`` bounds
    ``count``."""

    def __init__(self, data_width, max_count=MAX_LENGTH):
        self.data_width, self.max_count = data_width, max_count
        super().__init__({
            "start": In(1),
            "esize": In(2),
            "count": In(range(max_count + 1)),
            "i": In(stream.Signature(data_width)),
            "o": Out(stream.Signature(32)),
        })

    def elaborate(self, platform):
        m = Module()
        bb = self.data_width // 8
        off_bits = exact_log2(bb)
        esize = Signal(2)
        left = Signal(range(self.max_count + 1))
        pos = Signal(range(bb + 1))
        size = Signal(range(5))
        m.d.comb += size.eq(1 << esize)
        last_in_word = (pos + size == bb) | (left == 1)
        m.d.comb += [self.o.valid.eq(self.i.valid & (left != 0) & ~self.start),
                     self.o.payload.eq(self.i.payload >> (pos * 8)),
                     self.i.ready.eq(Mux(left == 0, 1, self.o.ready & last_in_word))]
        with m.If(self.start):
            m.d.sync += [esize.eq(self.esize), left.eq(self.count), pos.eq(0)]
        with m.Elif(self.o.valid & self.o.ready):
            m.d.sync += [left.eq(left - 1), pos.eq(Mux(last_in_word, 0, (pos + size)[:off_bits]))]
        return m


class ElementWriter(wiring.Component):
    """Writes ``count`` elements of ``1 << esize`` bytes, each to its own address.

    Rules:

    1. ``start`` (one cycle) takes ``esize`` (0, 1, 2) and ``count`` (1..65536); then
       ``i`` carries the elements (address a multiple of the size, so an element never
       straddles two bus words).
    2. Every element is one single-word write burst with exactly its bytes strobed, in
       element order (so the last of several writes to one place wins); a ``skip``
       element is taken without a write. Up to ``outstanding`` bursts await their
       response; one new burst per cycle. AW and W are registered: once offered, each
       stays unchanged until taken.
    3. An error response is reported once on ``error`` (AXI_WRITE_ERROR, the element's
       address); then, or after ``abort``, no new burst starts (an element whose address
       or data already went out is completed, as AXI requires). ``done`` when all
       ``count`` elements are taken and every write is answered; ``idle`` when no burst
       is in flight.
    """

    def __init__(self, data_width, outstanding=32):
        self.data_width, self.outstanding = data_width, outstanding
        super().__init__({
            "start": In(1),
            "esize": In(2),
            "count": In(range(MAX_LENGTH + 1)),
            "i": In(stream.Signature(WriteElement())),
            "wr_req": Out(stream.Signature(BurstLayout())),
            "wr_data": Out(stream.Signature(WriteDataLayout(data_width))),
            "wr_resp": In(stream.Signature(WriteRespLayout())),
            "error": Out(ErrorEvent()),
            "abort": In(1),
            "done": Out(1),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        width, bb = self.data_width, self.data_width // 8
        off_bits = exact_log2(bb)
        esize = Signal(2)
        left = Signal(range(MAX_LENGTH + 1))
        stopped = Signal()
        with m.If(self.start):
            m.d.sync += [esize.eq(self.esize), left.eq(self.count), stopped.eq(0)]
        with m.Elif(self.abort | self.error.valid):
            m.d.sync += stopped.eq(1)

        # Addresses of the writes awaiting their response, for error reports. Not the
        # buffered FIFO: a response may come the cycle after the element's AW and W.
        m.submodules.bursts = bursts = ResetInserter(self.start)(
            fifo.SyncFIFO(width=32, depth=self.outstanding))
        el = self.i.payload
        lanes = el.addr[:off_bits]
        wdata = Signal(width)
        strb = Signal(bb)
        with m.Switch(esize):
            for code in range(3):
                with m.Case(code):
                    m.d.comb += [wdata.eq(el.value[:8 << code] << (lanes * 8)),
                                 strb.eq(((1 << (1 << code)) - 1) << lanes)]

        # An element enters the AW and W registers together; each is offered, unchanged,
        # until the memory takes it (AXI: a valid stays up until its handshake).
        aw_held, w_held = Signal(), Signal()
        aw_done = self.wr_req.valid & self.wr_req.ready
        w_done = self.wr_data.valid & self.wr_data.ready
        room = (~aw_held | aw_done) & (~w_held | w_done) & bursts.w_rdy
        open_ = ~stopped & ~self.start & (left != 0)
        load = self.i.valid & open_ & ~el.skip & room
        m.d.comb += [
            self.wr_req.valid.eq(aw_held), self.wr_data.valid.eq(w_held),
            bursts.w_data.eq(el.addr[:32]), bursts.w_en.eq(load),
            self.i.ready.eq(load | (open_ & el.skip)),
        ]
        with m.If(aw_done):
            m.d.sync += aw_held.eq(0)
        with m.If(w_done):
            m.d.sync += w_held.eq(0)
        with m.If(load):
            m.d.sync += [aw_held.eq(1), w_held.eq(1),
                         self.wr_req.payload.addr.eq(el.addr >> off_bits << off_bits),
                         self.wr_req.payload.len.eq(0),
                         self.wr_data.payload.data.eq(wdata),
                         self.wr_data.payload.strb.eq(strb),
                         self.wr_data.payload.last.eq(1)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += left.eq(left - 1)

        m.d.comb += [self.wr_resp.ready.eq(1), bursts.r_en.eq(self.wr_resp.valid)]
        failed = Signal()
        with m.If(self.start):
            m.d.sync += failed.eq(0)
        with m.If(self.wr_resp.valid & self.wr_resp.payload.error & ~failed):
            m.d.comb += [self.error.valid.eq(1), self.error.code.eq(ErrorCode.AXI_WRITE_ERROR),
                         self.error.addr.eq(bursts.r_data)]
            m.d.sync += failed.eq(1)
        m.d.comb += [
            self.idle.eq(~bursts.r_rdy & ~aw_held & ~w_held),
            self.done.eq((left == 0) & ~bursts.r_rdy & ~failed & ~self.start),
        ]
        return m


class StridedScatter(wiring.Component):
    """Writes ``count`` elements, taken densely from aligned words, at any byte stride.

    Rules:

    1. ``start`` (one cycle) takes ``base``, ``stride`` (a multiple of the element size),
       ``esize`` (log2 of the element size: 0, 1 or 2) and ``count`` (1..65536).
    2. ``i`` carries the elements packed from byte 0 (element i at byte i·size).
    3. Writes, errors, ``abort``, ``done`` and ``idle`` as :class:`ElementWriter`.
    """

    def __init__(self, data_width, outstanding=32):
        self.data_width, self.outstanding = data_width, outstanding
        super().__init__({
            "start": In(1),
            "base": In(PHYS_ADDR_BITS),
            "stride": In(32),
            "esize": In(2),
            "count": In(range(MAX_LENGTH + 1)),
            "i": In(stream.Signature(data_width)),
            "wr_req": Out(stream.Signature(BurstLayout())),
            "wr_data": Out(stream.Signature(WriteDataLayout(data_width))),
            "wr_resp": In(stream.Signature(WriteRespLayout())),
            "error": Out(ErrorEvent()),
            "abort": In(1),
            "done": Out(1),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.addresses = addresses = StridedAddresses()
        m.submodules.unpack = unpack = UnpackElements(self.data_width)
        m.submodules.writer = writer = ElementWriter(self.data_width, self.outstanding)
        wiring.connect(m, wiring.flipped(self.i), unpack.i)
        for name in ("wr_req", "wr_data", "wr_resp"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(writer, name))
        join_elements(m, addresses.o, unpack.o, writer.i)
        m.d.comb += [
            addresses.start.eq(self.start), addresses.base.eq(self.base),
            addresses.stride.eq(self.stride), addresses.count.eq(self.count),
            unpack.start.eq(self.start), unpack.esize.eq(self.esize),
            unpack.count.eq(self.count),
            writer.start.eq(self.start), writer.esize.eq(self.esize),
            writer.count.eq(self.count), writer.abort.eq(self.abort),
            self.error.eq(writer.error), self.done.eq(writer.done), self.idle.eq(writer.idle),
        ]
        return m


def join_elements(m, addresses, values, out):
    """Joins an :class:`~hdl.va.gather.ElementAddress` stream and a stream of values
    (32 bits, or an :class:`~hdl.va.gather.ElementValue` whose ``skip`` also counts) into
    a :class:`WriteElement` stream: one transfer when both are offered."""
    both = addresses.valid & values.valid
    value = values.payload
    skip = addresses.payload.skip
    if isinstance(value, data.View):
        skip = skip | value.skip
        value = value.value
    m.d.comb += [out.valid.eq(both), out.payload.addr.eq(addresses.payload.addr),
                 out.payload.skip.eq(skip), out.payload.value.eq(value),
                 addresses.ready.eq(both & out.ready), values.ready.eq(both & out.ready)]
