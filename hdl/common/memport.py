"""The internal memory port every block uses for its memory traffic.

A block never sees AXI: its datapath issues bursts on a :class:`MemPortSignature`
interface; a standalone top bridges that to ``m_axi_gmem`` (:class:`MemPortToAxi4`), and
the integrated tile will bridge it to Muon packets instead.
"""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from spec.memory import PHYS_ADDR_BITS

__all__ = ["BurstLayout", "ReadDataLayout", "WriteDataLayout",
           "WriteRespLayout", "MemPortSignature", "MemPortToAxi4"]



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
