"""The internal memory port every block uses for its memory traffic.

A block never sees AXI: its datapath issues bursts on a :class:`MemPortSignature`
interface; a standalone top bridges that to ``m_axi_gmem`` (:class:`MemPortToAxi4`), and
the integrated tile will bridge it to Muon packets instead.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from spec.memory import PHYS_ADDR_BITS

__all__ = ["BurstLayout", "ReadDataLayout", "WriteDataLayout",
           "WriteRespLayout", "MemPortSignature", "MemPortToAxi4", "MemPortArbiter"]



class BurstLayout(data.StructLayout):
    """A burst request: ``beats`` = len + 1 consecutive bus words from ``addr``."""
    def __init__(self):
        super().__init__({"addr": PHYS_ADDR_BITS, "len": 8})


class ReadDataLayout(data.StructLayout):
    def __init__(self, data_width):
        super().__init__({"data": data_width, "last": 1, "error": 1})


class WriteDataLayout(data.StructLayout):
    def __init__(self, data_width):
        super().__init__({"data": data_width, "strb": data_width // 8, "last": 1})


class WriteRespLayout(data.StructLayout):
    def __init__(self):
        super().__init__({"error": 1})


class MemPortSignature(wiring.Signature):
    """Burst memory port, from the requester's side.

    Rules:

    1. Every member is a ``lib.stream`` (valid/ready); a payload is transferred in a cycle
       where both are high.
    2. ``rd_req`` asks for ``len + 1`` bus words from physical byte address ``addr``,
       which is aligned to the bus width; a burst never crosses a 4 KiB boundary.
    3. ``rd_resp`` returns the words of the read bursts in request order, ``last`` on each
       burst's final word, ``error`` on every word the memory refused.
    4. ``wr_req`` is a write burst of the same form; its ``len + 1`` words follow on
       ``wr_data`` in request order (``strb``: one bit per byte), ``last`` on the final.
    5. ``wr_resp`` answers each write burst once, in request order, ``error`` if refused.
    """

    def __init__(self, data_width):
        if data_width not in (64, 128, 256, 512):
            raise ValueError(f"data width must be 64, 128, 256 or 512 bits, not {data_width!r}")
        self.data_width = data_width
        super().__init__({
            "rd_req": Out(stream.Signature(BurstLayout())),
            "rd_resp": In(stream.Signature(ReadDataLayout(data_width))),
            "wr_req": Out(stream.Signature(BurstLayout())),
            "wr_data": Out(stream.Signature(WriteDataLayout(data_width))),
            "wr_resp": In(stream.Signature(WriteRespLayout())),
        })


class MemPortToAxi4(wiring.Component):
    """Bridges a :class:`MemPortSignature` requester to an AXI4 master port.

    Every burst is INCR with the full bus width per beat and ID 0, so responses return
    in order. SLVERR and DECERR both become ``error``.
    """

    def __init__(self, data_width, axi_signature):
        self.data_width = data_width
        super().__init__({
            "port": In(MemPortSignature(data_width)),
            "axi": Out(axi_signature),
        })

    def elaborate(self, platform):
        m = Module()
        port, axi = self.port, self.axi
        size = exact_log2(self.data_width // 8)
        INCR = 1
        m.d.comb += [
            axi.araddr.eq(port.rd_req.payload.addr),
            axi.arlen.eq(port.rd_req.payload.len),
            axi.arsize.eq(size),
            axi.arburst.eq(INCR),
            axi.arvalid.eq(port.rd_req.valid),
            port.rd_req.ready.eq(axi.arready),

            port.rd_resp.payload.data.eq(axi.rdata),
            port.rd_resp.payload.last.eq(axi.rlast),
            port.rd_resp.payload.error.eq(axi.rresp.as_value()[1]),
            port.rd_resp.valid.eq(axi.rvalid),
            axi.rready.eq(port.rd_resp.ready),

            axi.awaddr.eq(port.wr_req.payload.addr),
            axi.awlen.eq(port.wr_req.payload.len),
            axi.awsize.eq(size),
            axi.awburst.eq(INCR),
            axi.awvalid.eq(port.wr_req.valid),
            port.wr_req.ready.eq(axi.awready),

            axi.wdata.eq(port.wr_data.payload.data),
            axi.wstrb.eq(port.wr_data.payload.strb),
            axi.wlast.eq(port.wr_data.payload.last),
            axi.wvalid.eq(port.wr_data.valid),
            port.wr_data.ready.eq(axi.wready),

            port.wr_resp.payload.error.eq(axi.bresp.as_value()[1]),
            port.wr_resp.valid.eq(axi.bvalid),
            axi.bready.eq(port.wr_resp.ready),
        ]
        # Normal, non-secure data access; modifiable, bufferable.
        for name, value in (("arcache", 0b0011), ("awcache", 0b0011)):
            if hasattr(axi, name):
                m.d.comb += getattr(axi, name).eq(value)
        return m


class MemPortArbiter(wiring.Component):
    """Two requesters, ``high`` and ``low``, on one memory port ``down`` (as one block:
    the answers come back in request order, so each goes to the requester of the burst
    at the head of a queue of ``depth`` bursts a kind; a burst is not taken while its
    queue is full).

    Rule: a read burst goes to ``high`` when it asks, else to ``low``. A write burst
    likewise, but write bursts of the two are never interleaved: while the requester that
    had the last write burst still has words of it (or of an earlier one) to send, only
    it may start another, and while ``high`` asks, ``low`` may not (so ``high`` waits at
    most for ``low``'s bursts already taken). A burst's words may pass in the cycle its
    request is taken; none before. With ``high`` idle, ``low``'s streams pass unchanged.

    Parameters: ``data_width`` (as :class:`MemPortSignature`), ``depth`` (bursts in
    flight a kind, 2..256).
    """

    def __init__(self, data_width, depth=32):
        if not isinstance(depth, int) or isinstance(depth, bool) or not 2 <= depth <= 256:
            raise ValueError(f"depth must be an integer in 2..256, not {depth!r}")
        self.data_width, self.depth = data_width, depth
        super().__init__({
            "high": In(MemPortSignature(data_width)),
            "low": In(MemPortSignature(data_width)),
            "down": Out(MemPortSignature(data_width)),
        })

    def elaborate(self, platform):
        m = Module()
        hi, lo, down = self.high, self.low, self.down
        # --- reads: the requester of each burst in a queue, the answers to its head
        rd_tags = m.submodules.rd_tags = SyncFIFOBuffered(width=1, depth=self.depth)
        # a request offered and not taken stays offered (the choice is held)
        rd_held, rd_held_hi = Signal(), Signal()
        rd_hi = Signal()
        m.d.comb += rd_hi.eq(Mux(rd_held, rd_held_hi, hi.rd_req.valid))
        m.d.sync += [rd_held.eq(down.rd_req.valid & ~down.rd_req.ready), rd_held_hi.eq(rd_hi)]
        m.d.comb += [down.rd_req.valid.eq((hi.rd_req.valid | lo.rd_req.valid) & rd_tags.w_rdy),
                     down.rd_req.payload.eq(Mux(rd_hi, hi.rd_req.payload, lo.rd_req.payload)),
                     hi.rd_req.ready.eq(rd_hi & down.rd_req.ready & rd_tags.w_rdy),
                     lo.rd_req.ready.eq(~rd_hi & down.rd_req.ready & rd_tags.w_rdy),
                     rd_tags.w_data.eq(rd_hi),
                     rd_tags.w_en.eq(down.rd_req.valid & down.rd_req.ready)]
        rd_to_hi = rd_tags.r_data[0]
        m.d.comb += [hi.rd_resp.payload.eq(down.rd_resp.payload),
                     lo.rd_resp.payload.eq(down.rd_resp.payload),
                     hi.rd_resp.valid.eq(down.rd_resp.valid & rd_tags.r_rdy & rd_to_hi),
                     lo.rd_resp.valid.eq(down.rd_resp.valid & rd_tags.r_rdy & ~rd_to_hi),
                     down.rd_resp.ready.eq(rd_tags.r_rdy & Mux(rd_to_hi, hi.rd_resp.ready,
                                                              lo.rd_resp.ready)),
                     rd_tags.r_en.eq(down.rd_resp.valid & down.rd_resp.ready
                                     & down.rd_resp.payload.last)]
        # --- writes: one requester's bursts at a time (their words follow in order)
        wr_tags = m.submodules.wr_tags = SyncFIFOBuffered(width=1, depth=self.depth)
        pending = Signal(range(self.depth + 2))     # bursts taken whose last word has not gone
        owner = Signal()                            # 1: high had the last write burst
        free = pending == 0
        wr_held, wr_held_hi = Signal(), Signal()
        take_hi, take_lo = Signal(), Signal()
        with m.If(wr_held):
            m.d.comb += [take_hi.eq(wr_held_hi), take_lo.eq(~wr_held_hi)]
        with m.Else():
            m.d.comb += [take_hi.eq(hi.wr_req.valid & (free | owner)),
                         take_lo.eq(lo.wr_req.valid & ~hi.wr_req.valid & (free | ~owner))]
        m.d.sync += [wr_held.eq(down.wr_req.valid & ~down.wr_req.ready), wr_held_hi.eq(take_hi)]
        m.d.comb += [down.wr_req.valid.eq((take_hi | take_lo) & wr_tags.w_rdy),
                     down.wr_req.payload.eq(Mux(take_hi, hi.wr_req.payload,
                                                lo.wr_req.payload)),
                     hi.wr_req.ready.eq(take_hi & down.wr_req.ready & wr_tags.w_rdy),
                     lo.wr_req.ready.eq(take_lo & down.wr_req.ready & wr_tags.w_rdy),
                     wr_tags.w_data.eq(take_hi)]
        req_in = down.wr_req.valid & down.wr_req.ready
        m.d.comb += wr_tags.w_en.eq(req_in)
        words_hi = Signal()           # whose words may pass now
        words_ok = Signal()
        m.d.comb += [words_hi.eq(Mux(free, take_hi, owner)), words_ok.eq(~free | req_in)]
        m.d.comb += [down.wr_data.payload.eq(Mux(words_hi, hi.wr_data.payload,
                                                 lo.wr_data.payload)),
                     down.wr_data.valid.eq(words_ok & Mux(words_hi, hi.wr_data.valid,
                                                          lo.wr_data.valid)),
                     hi.wr_data.ready.eq(words_ok & words_hi & down.wr_data.ready),
                     lo.wr_data.ready.eq(words_ok & ~words_hi & down.wr_data.ready)]
        word_last = down.wr_data.valid & down.wr_data.ready & down.wr_data.payload.last
        m.d.sync += pending.eq(pending + req_in - word_last)
        with m.If(req_in):
            m.d.sync += owner.eq(take_hi)
        wr_to_hi = wr_tags.r_data[0]
        m.d.comb += [hi.wr_resp.payload.eq(down.wr_resp.payload),
                     lo.wr_resp.payload.eq(down.wr_resp.payload),
                     hi.wr_resp.valid.eq(down.wr_resp.valid & wr_tags.r_rdy & wr_to_hi),
                     lo.wr_resp.valid.eq(down.wr_resp.valid & wr_tags.r_rdy & ~wr_to_hi),
                     down.wr_resp.ready.eq(wr_tags.r_rdy & Mux(wr_to_hi, hi.wr_resp.ready,
                                                              lo.wr_resp.ready)),
                     wr_tags.r_en.eq(down.wr_resp.valid & down.wr_resp.ready)]
        return m
