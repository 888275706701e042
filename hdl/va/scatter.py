"""Strided scatter: element i of 1, 2 or 4 bytes to ``base + i·stride``."""

from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.codes import ErrorCode
from hdl.common.memport import PHYS_ADDR_BITS, BurstLayout, WriteDataLayout, WriteRespLayout
from hdl.va.streams import ErrorEvent

__all__ = ["StridedScatter"]


class StridedScatter(wiring.Component):
    """Writes ``count`` elements, taken densely from aligned words, at any byte stride.

    Rules:

    1. ``start`` (one cycle) takes ``base``, ``stride`` (a multiple of the element size),
       ``esize`` (log2 of the element size: 0, 1 or 2) and ``count`` (1..65536).
    2. ``i`` carries the elements packed from byte 0 (element i at byte i·size).
    3. Every element is one single-word write burst with exactly its bytes strobed, in
       element order (so with stride 0 the last element wins). Up to ``outstanding``
       bursts await their response; one new burst per cycle.
    4. An error response is reported once on ``error`` (AXI_WRITE_ERROR, the element's
       address); then no new burst starts. ``done`` when every element is written and
       answered; ``idle`` when no burst is in flight.
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
        width, bb = self.data_width, self.bus_bytes
        off_bits = exact_log2(bb)
        esize = Signal(2)
        addr = Signal(PHYS_ADDR_BITS)
        stride = Signal(32)
        to_send = Signal(range(65537))
        pos = Signal(range(bb + 1))          # byte of the current input word
        stopped = Signal()
        with m.If(self.start):
            m.d.sync += [esize.eq(self.esize), addr.eq(self.base), stride.eq(self.stride),
                         to_send.eq(self.count), pos.eq(0), stopped.eq(0)]
        with m.Elif(self.abort | self.error.valid):
            m.d.sync += stopped.eq(1)

        m.submodules.bursts = bursts = ResetInserter(self.start)(
            fifo.SyncFIFOBuffered(width=32, depth=self.outstanding))
        size = Signal(range(5))
        m.d.comb += size.eq(1 << esize)
        element = Signal(32)
        m.d.comb += element.eq(self.i.payload >> (pos * 8))
        lanes = addr[:off_bits]
        data = Signal(width)
        strb = Signal(bb)
        with m.Switch(esize):
            for code in range(3):
                with m.Case(code):
                    m.d.comb += [data.eq(element[:8 << code] << (lanes * 8)),
                                 strb.eq(((1 << (1 << code)) - 1) << lanes)]

        # AW and W of an element go out together; each may be taken in a different cycle.
        aw_sent, w_sent = Signal(), Signal()
        # An element whose AW or W went out is completed even past an abort (AXI).
        active = self.i.valid & (to_send != 0) & (
            (~stopped & ~self.start & bursts.w_rdy) | aw_sent | w_sent)
        m.d.comb += [
            self.wr_req.valid.eq(active & ~aw_sent),
            self.wr_req.payload.addr.eq(addr >> off_bits << off_bits),
            self.wr_req.payload.len.eq(0),
            self.wr_data.valid.eq(active & ~w_sent),
            self.wr_data.payload.data.eq(data), self.wr_data.payload.strb.eq(strb),
            self.wr_data.payload.last.eq(1),
        ]
        aw_now = aw_sent | (self.wr_req.valid & self.wr_req.ready)
        w_now = w_sent | (self.wr_data.valid & self.wr_data.ready)
        both = active & aw_now & w_now
        m.d.comb += [bursts.w_data.eq(addr[:32]), bursts.w_en.eq(both)]
        with m.If(both):
            last_in_word = (pos + size == bb) | (to_send == 1)
            m.d.sync += [aw_sent.eq(0), w_sent.eq(0), addr.eq(addr + stride),
                         to_send.eq(to_send - 1), pos.eq((pos + size)[:off_bits])]
            m.d.comb += self.i.ready.eq(last_in_word)
            with m.If(last_in_word):
                m.d.sync += pos.eq(0)
        with m.Elif(active):
            m.d.sync += [aw_sent.eq(aw_now), w_sent.eq(w_now)]
        # Idle between commands: take (and drop) whatever is offered.
        with m.If(to_send == 0):
            m.d.comb += self.i.ready.eq(1)

        m.d.comb += [self.wr_resp.ready.eq(1), bursts.r_en.eq(self.wr_resp.valid)]
        failed = Signal()
        with m.If(self.start):
            m.d.sync += failed.eq(0)
        with m.If(self.wr_resp.valid & self.wr_resp.payload.error & ~failed):
            m.d.comb += [self.error.valid.eq(1), self.error.code.eq(ErrorCode.AXI_WRITE_ERROR),
                         self.error.addr.eq(bursts.r_data)]
            m.d.sync += failed.eq(1)
        m.d.comb += [
            self.idle.eq(~bursts.r_rdy & ~aw_sent & ~w_sent),
            self.done.eq((to_send == 0) & ~bursts.r_rdy & ~failed & ~self.start),
        ]
        return m
