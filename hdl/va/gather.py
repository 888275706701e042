"""Strided gather: element i of 1, 2 or 4 bytes from ``base + i·stride``, packed densely."""

from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.codes import ErrorCode
from hdl.common.memport import PHYS_ADDR_BITS, BurstLayout, ReadDataLayout
from hdl.va.streams import ErrorEvent

__all__ = ["StridedGather"]


class StridedGather(wiring.Component):
    """Reads ``count`` elements at any byte stride and packs them into aligned words.

    Rules:

    1. ``start`` (one cycle) takes ``base``, ``stride`` (bytes, a multiple of the element
       size), ``esize`` (log2 of the element size: 0, 1 or 2) and ``count`` (1..65536).
    2. Every element is one single-word read of the bus word that holds it (an aligned
       element never straddles two). Up to ``outstanding`` reads are in flight, one new
       read per cycle, so a memory latency below that costs no throughput.
    3. ``o`` carries the elements packed from byte 0 (element i at byte i·size); the
       last word is padded with zeros.
    4. An error response is reported once on ``error`` (AXI_READ_ERROR, the element's
       address); nothing after it comes out and nothing more is issued. ``idle`` when no
       read is in flight.
    """

    def __init__(self, data_width, outstanding=32):
        self.data_width, self.outstanding = data_width, outstanding
        self.bus_bytes = data_width // 8
        super().__init__({
            "start": In(1),
            "base": In(PHYS_ADDR_BITS),
            "stride": In(32),
            "esize": In(2),
            "count": In(range(65537)),
            "rd_req": Out(stream.Signature(BurstLayout())),
            "rd_resp": In(stream.Signature(ReadDataLayout(data_width))),
            "o": Out(stream.Signature(data_width)),
            "error": Out(ErrorEvent()),
            "abort": In(1),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        width, bb = self.data_width, self.bus_bytes
        off_bits = exact_log2(bb)
        esize = Signal(2)
        addr = Signal(PHYS_ADDR_BITS)
        stride = Signal(32)
        to_issue = Signal(range(65537))
        to_pack = Signal(range(65537))
        stopped = Signal()
        with m.If(self.start):
            m.d.sync += [esize.eq(self.esize), addr.eq(self.base), stride.eq(self.stride),
                         to_issue.eq(self.count), to_pack.eq(self.count), stopped.eq(0)]
        with m.Elif(self.abort | self.error.valid):
            m.d.sync += stopped.eq(1)

        # Requests: registered, one a cycle while the offset FIFO has room.
        tag = data.StructLayout({"offset": off_bits, "addr": 32})
        m.submodules.tags = tags = ResetInserter(self.start)(
            fifo.SyncFIFOBuffered(width=tag.size, depth=self.outstanding))
        held = Signal()
        req = self.rd_req
        m.d.comb += req.valid.eq(held)
        issue = (to_issue != 0) & ~stopped & ~self.start & tags.w_rdy & (~held | req.ready)
        with m.If(req.valid & req.ready):
            m.d.sync += held.eq(0)
        tag_in = Signal(tag)
        m.d.comb += [tag_in.offset.eq(addr[:off_bits]), tag_in.addr.eq(addr[:32]),
                     tags.w_data.eq(tag_in), tags.w_en.eq(issue)]
        with m.If(issue):
            m.d.sync += [req.payload.addr.eq(addr >> off_bits << off_bits), req.payload.len.eq(0),
                         held.eq(1), addr.eq(addr + stride), to_issue.eq(to_issue - 1)]

        # Responses: extract the element, pack it at byte `pos` of the word being built.
        cur = Signal(tag)
        m.d.comb += cur.eq(tags.r_data)
        building = Signal(width)
        pos = Signal(range(bb + 1))
        out_valid = Signal()
        m.d.comb += [self.o.valid.eq(out_valid)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += out_valid.eq(0)
        free = ~out_valid | self.o.ready
        resp = self.rd_resp
        m.d.comb += resp.ready.eq(free | stopped)
        take = resp.valid & resp.ready
        m.d.comb += tags.r_en.eq(take)
        failed = Signal()
        with m.If(self.start):
            m.d.sync += [failed.eq(0), pos.eq(0), building.eq(0), out_valid.eq(0)]
        with m.If(take & resp.payload.error & ~failed):
            m.d.comb += [self.error.valid.eq(1), self.error.code.eq(ErrorCode.AXI_READ_ERROR),
                         self.error.addr.eq(cur.addr)]
            m.d.sync += failed.eq(1)
        element = Signal(32)
        m.d.comb += element.eq(resp.payload.data >> (cur.offset * 8))
        placed = Signal(width)
        size = Signal(range(5))
        m.d.comb += size.eq(1 << esize)
        with m.Switch(esize):
            for code in range(3):
                with m.Case(code):
                    bits = 8 << code
                    m.d.comb += placed.eq(building | (element[:bits] << (pos * 8)))
        with m.If(take & ~resp.payload.error & ~failed & ~stopped):
            last = to_pack == 1
            full = pos + size == bb
            m.d.sync += to_pack.eq(to_pack - 1)
            with m.If(full | last):
                m.d.sync += [self.o.payload.eq(placed), out_valid.eq(1), building.eq(0),
                             pos.eq(0)]
            with m.Else():
                m.d.sync += [building.eq(placed), pos.eq(pos + size)]
        m.d.comb += self.idle.eq(~held & ~tags.r_rdy)
        return m
