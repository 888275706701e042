"""Element reads: one single-word read per element, many in flight, results in order.

:class:`ElementReader` serves both the strided gather (addresses ``base + i·stride``,
:class:`StridedAddresses`) and the indexed forms (addresses from an index vector, some
elements skipped, :mod:`hdl.va.indexed`). :class:`PackElements` packs the strided
gather's elements densely into aligned words for the stream writer.
"""

from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.memport import PHYS_ADDR_BITS, BurstLayout, ReadDataLayout
from hdl.va.streams import ErrorEvent
from spec.codes import ErrorCode
from spec.va import MAX_LENGTH

__all__ = ["ElementAddress", "ElementValue", "StridedAddresses", "ElementReader",
           "PackElements", "StridedGather"]


class ElementAddress(data.StructLayout):
    """One element's physical byte address; ``skip``: no access (an index of -1)."""
    def __init__(self):
        super().__init__({"addr": PHYS_ADDR_BITS, "skip": 1})


class ElementValue(data.StructLayout):
    """One element as read: its bytes from bit 0 (above the element size: don't care)."""
    def __init__(self):
        super().__init__({"value": 32, "skip": 1})


class StridedAddresses(wiring.Component):
    """``count`` (1..65536) element addresses ``base + i·stride``, taken at ``start``."""

    def __init__(self):
        super().__init__({
            "start": In(1),
            "base": In(PHYS_ADDR_BITS),
            "stride": In(32),
            "count": In(range(MAX_LENGTH + 1)),
            "o": Out(stream.Signature(ElementAddress())),
        })

    def elaborate(self, platform):
        m = Module()
        addr = Signal(PHYS_ADDR_BITS)
        stride = Signal(32)
        left = Signal(range(MAX_LENGTH + 1))
        m.d.comb += [self.o.valid.eq((left != 0) & ~self.start), self.o.payload.addr.eq(addr)]
        with m.If(self.start):
            m.d.sync += [addr.eq(self.base), stride.eq(self.stride), left.eq(self.count)]
        with m.Elif(self.o.valid & self.o.ready):
            m.d.sync += [addr.eq(addr + stride), left.eq(left - 1)]
        return m


class ElementReader(wiring.Component):
    """Reads the bus word of each element of ``i``; the elements come out in order on ``o``.

    Rules:

    1. An element never straddles two bus words (its address is a multiple of its size),
       so each is one single-word read. Up to ``outstanding`` elements are in flight and
       one new read goes out a cycle, so a memory latency below that costs no throughput.
    2. A ``skip`` element makes no access; it comes out in its place with ``skip`` set.
    3. An error response is reported once on ``error`` (AXI_READ_ERROR, the element's
       address); that element and everything after it are dropped, nothing more is issued.
       ``abort`` stops issuing too. ``idle`` when no read is in flight (the responses of an
       aborted command are taken and dropped). ``start`` (one cycle) clears the unit.
    """

    def __init__(self, data_width, outstanding=32):
        self.data_width, self.outstanding = data_width, outstanding
        super().__init__({
            "start": In(1),
            "i": In(stream.Signature(ElementAddress())),
            "rd_req": Out(stream.Signature(BurstLayout())),
            "rd_resp": In(stream.Signature(ReadDataLayout(data_width))),
            "o": Out(stream.Signature(ElementValue())),
            "error": Out(ErrorEvent()),
            "abort": In(1),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        off_bits = exact_log2(self.data_width // 8)
        stopped = Signal()
        with m.If(self.start):
            m.d.sync += stopped.eq(0)
        with m.Elif(self.abort | self.error.valid):
            m.d.sync += stopped.eq(1)

        # Requests: registered, one a cycle while the tag FIFO has room.
        tag = data.StructLayout({"offset": off_bits, "addr": 32, "skip": 1})
        m.submodules.tags = tags = ResetInserter(self.start)(
            fifo.SyncFIFOBuffered(width=tag.size, depth=self.outstanding))
        held = Signal()
        req, el = self.rd_req, self.i.payload
        m.d.comb += req.valid.eq(held)
        with m.If(req.valid & req.ready):
            m.d.sync += held.eq(0)
        m.d.comb += self.i.ready.eq(~stopped & ~self.start & tags.w_rdy
                                    & (el.skip | ~held | req.ready))
        tag_in = Signal(tag)
        m.d.comb += [tag_in.offset.eq(el.addr[:off_bits]), tag_in.addr.eq(el.addr[:32]),
                     tag_in.skip.eq(el.skip),
                     tags.w_data.eq(tag_in), tags.w_en.eq(self.i.valid & self.i.ready)]
        with m.If(self.i.valid & self.i.ready & ~el.skip):
            m.d.sync += [req.payload.addr.eq(el.addr >> off_bits << off_bits),
                         req.payload.len.eq(0), held.eq(1)]

        # Responses, in request order; a skipped element needs none.
        cur = Signal(tag)
        resp = self.rd_resp
        m.d.comb += cur.eq(tags.r_data)
        head_skip = tags.r_rdy & cur.skip
        got = tags.r_rdy & ~cur.skip & resp.valid
        bad = got & resp.payload.error
        m.d.comb += [self.o.valid.eq(~stopped & (head_skip | (got & ~resp.payload.error))),
                     self.o.payload.value.eq(resp.payload.data >> (cur.offset * 8)),
                     self.o.payload.skip.eq(cur.skip)]
        discard = (stopped & (head_skip | got)) | (~stopped & bad)
        pop = (self.o.valid & self.o.ready) | discard
        m.d.comb += [tags.r_en.eq(pop), resp.ready.eq(tags.r_rdy & ~cur.skip & pop)]
        failed = Signal()
        with m.If(self.start):
            m.d.sync += failed.eq(0)
        with m.If(bad & ~stopped & ~failed):
            m.d.comb += [self.error.valid.eq(1), self.error.code.eq(ErrorCode.AXI_READ_ERROR),
                         self.error.addr.eq(cur.addr)]
            m.d.sync += failed.eq(1)
        m.d.comb += self.idle.eq(~held & ~tags.r_rdy)
        return m


class PackElements(wiring.Component):
    """Packs ``count`` (1..65536) elements of ``1 << esize`` bytes from byte 0 of aligned
    words (element i at byte i·size); the last word is padded with zeros."""

    def __init__(self, data_width):
        self.data_width = data_width
        super().__init__({
            "start": In(1),
            "esize": In(2),
            "count": In(range(MAX_LENGTH + 1)),
            "i": In(stream.Signature(ElementValue())),
            "o": Out(stream.Signature(data_width)),
        })

    def elaborate(self, platform):
        m = Module()
        width, bb = self.data_width, self.data_width // 8
        esize = Signal(2)
        left = Signal(range(MAX_LENGTH + 1))
        building = Signal(width)
        pos = Signal(range(bb + 1))
        out_valid = Signal()
        m.d.comb += self.o.valid.eq(out_valid)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += out_valid.eq(0)
        m.d.comb += self.i.ready.eq(~out_valid | self.o.ready)
        size = Signal(range(5))
        m.d.comb += size.eq(1 << esize)
        placed = Signal(width)
        with m.Switch(esize):
            for code in range(3):
                with m.Case(code):
                    value = self.i.payload.value[:8 << code]
                    m.d.comb += placed.eq(building | (value << (pos * 8)))
        with m.If(self.i.valid & self.i.ready & (left != 0)):
            m.d.sync += left.eq(left - 1)
            with m.If((pos + size == bb) | (left == 1)):
                m.d.sync += [self.o.payload.eq(placed), out_valid.eq(1), building.eq(0),
                             pos.eq(0)]
            with m.Else():
                m.d.sync += [building.eq(placed), pos.eq(pos + size)]
        with m.If(self.start):
            m.d.sync += [esize.eq(self.esize), left.eq(self.count), pos.eq(0), building.eq(0),
                         out_valid.eq(0)]
        return m


class StridedGather(wiring.Component):
    """Reads ``count`` elements at any byte stride and packs them into aligned words.

    Rules:

    1. ``start`` (one cycle) takes ``base``, ``stride`` (bytes, a multiple of the element
       size), ``esize`` (log2 of the element size: 0, 1 or 2) and ``count`` (1..65536).
    2. Every element is one single-word read (:class:`ElementReader`), up to
       ``outstanding`` in flight.
    3. ``o`` carries the elements packed from byte 0 (element i at byte i·size); the
       last word is padded with zeros.
    4. Errors, ``abort`` and ``idle`` as :class:`ElementReader`.
    """

    def __init__(self, data_width, outstanding=32):
        self.data_width, self.outstanding = data_width, outstanding
        super().__init__({
            "start": In(1),
            "base": In(PHYS_ADDR_BITS),
            "stride": In(32),
            "esize": In(2),
            "count": In(range(MAX_LENGTH + 1)),
            "rd_req": Out(stream.Signature(BurstLayout())),
            "rd_resp": In(stream.Signature(ReadDataLayout(self.data_width))),
            "o": Out(stream.Signature(data_width)),
            "error": Out(ErrorEvent()),
            "abort": In(1),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.addresses = addresses = StridedAddresses()
        m.submodules.reader = reader = ElementReader(self.data_width, self.outstanding)
        m.submodules.pack = pack = PackElements(self.data_width)
        wiring.connect(m, addresses.o, reader.i)
        wiring.connect(m, reader.o, pack.i)
        wiring.connect(m, wiring.flipped(self.rd_req), reader.rd_req)
        wiring.connect(m, wiring.flipped(self.rd_resp), reader.rd_resp)
        wiring.connect(m, wiring.flipped(self.o), pack.o)
        m.d.comb += [
            addresses.start.eq(self.start), addresses.base.eq(self.base),
            addresses.stride.eq(self.stride), addresses.count.eq(self.count),
            reader.start.eq(self.start), reader.abort.eq(self.abort),
            pack.start.eq(self.start), pack.esize.eq(self.esize), pack.count.eq(self.count),
            self.error.eq(reader.error), self.idle.eq(reader.idle),
        ]
        return m
