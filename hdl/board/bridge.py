"""A UART-to-bus bridge: a host reaches the control port and the on-chip memory.

Protocol (bytes on the UART; multi-byte fields little-endian):

1. A request is an opcode byte (:class:`BridgeOp`), a 4-byte address and, for the two
   writes, a 4-byte data word.
2. Every request gets one status byte (:class:`BridgeStatus`) and, for the two reads,
   the 4-byte word read (0 when the status is not OKAY).
3. ``REG_*`` go to ``ctrl`` (AXI4-Lite, ``ctrl_addr_bits``-bit address, 16 by default):
   the status is the AXI response. An address at or above ``2**ctrl_addr_bits`` is
   answered ``DECERR`` without a bus access.
4. ``MEM_*`` go to ``mem`` (32-bit words of the on-chip memory, byte address, the low
   two bits ignored); the status is ``OKAY`` or ``SLVERR`` (outside the memory).
5. An unknown opcode is answered ``BAD_OPCODE`` at once and nothing else is read.
6. A request left incomplete for ``timeout`` cycles is dropped without an answer, so a
   host that lost its place resynchronises by waiting.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.common.axi import AXI4LiteSignature, AxiResp

__all__ = ["BridgeOp", "BridgeStatus", "HostWordRequest", "HostWordResponse",
           "HostWordSignature", "UartBridge"]


class BridgeOp(enum.Enum, shape=8):
    REG_WRITE = 0x01
    REG_READ = 0x02
    MEM_WRITE = 0x03
    MEM_READ = 0x04


class BridgeStatus(enum.Enum, shape=8):
    OKAY = AxiResp.OKAY.value
    SLVERR = AxiResp.SLVERR.value   # no register at that offset, or outside the memory
    DECERR = AxiResp.DECERR.value   # a register address beyond the control port's
    BAD_OPCODE = 0x10


class HostWordRequest(data.StructLayout):
    def __init__(self):
        super().__init__({"addr": 32, "data": 32, "write": 1})


class HostWordResponse(data.StructLayout):
    def __init__(self):
        super().__init__({"data": 32, "error": 1})


class HostWordSignature(wiring.Signature):
    """One 32-bit word access at a time, from the requester's side.

    Rules: ``req`` and ``resp`` are streams; every request taken is answered by exactly
    one response (``data`` is the word read, 0 for a write or an error), in order.
    """

    def __init__(self):
        super().__init__({
            "req": Out(stream.Signature(HostWordRequest())),
            "resp": In(stream.Signature(HostWordResponse())),
        })


class UartBridge(wiring.Component):
    """Serves the protocol of the module docstring: bytes in on ``rx``, out on ``tx``;
    ``ctrl_addr_bits`` (2..32) is the control port's address width (the tile's is 20)."""

    def __init__(self, timeout=1 << 20, ctrl_addr_bits=16):
        if not isinstance(timeout, int) or timeout < 1:
            raise ValueError(f"timeout must be a positive number of cycles, not {timeout!r}")
        if not isinstance(ctrl_addr_bits, int) or not 2 <= ctrl_addr_bits <= 32:
            raise ValueError(f"ctrl_addr_bits must be in 2..32, not {ctrl_addr_bits!r}")
        self.timeout, self.ctrl_addr_bits = timeout, ctrl_addr_bits
        super().__init__({
            "rx": In(stream.Signature(8)),
            "tx": Out(stream.Signature(8)),
            "ctrl": Out(AXI4LiteSignature(ctrl_addr_bits, 32)),
            "mem": Out(HostWordSignature()),
        })

    def elaborate(self, platform):
        m = Module()
        op = Signal(8)                              # a BridgeOp, or not
        addr, word = Signal(32), Signal(32)
        count = Signal(range(9))                    # request bytes still to come
        idle = Signal(range(self.timeout + 1))
        reply = Signal(40)                          # status, then the word, LSB first
        reply_len = Signal(range(6))
        is_write = (op == BridgeOp.REG_WRITE) | (op == BridgeOp.MEM_WRITE)
        is_reg = (op == BridgeOp.REG_WRITE) | (op == BridgeOp.REG_READ)
        got = self.rx.valid & self.rx.ready

        def answer(status, value=0, length=5):
            status = Value.cast(status)
            m.d.sync += [reply.eq(Cat(status, Const(0, 8 - len(status)), value)),
                         reply_len.eq(length)]

        ctrl, mem = self.ctrl, self.mem
        with m.FSM():
            with m.State("OPCODE"):
                m.d.comb += self.rx.ready.eq(1)
                with m.If(got):
                    m.d.sync += [op.eq(self.rx.payload), count.eq(4), idle.eq(0)]
                    with m.Switch(self.rx.payload):
                        with m.Case(BridgeOp.REG_WRITE, BridgeOp.MEM_WRITE):
                            m.d.sync += count.eq(8)
                            m.next = "FIELDS"
                        with m.Case(BridgeOp.REG_READ, BridgeOp.MEM_READ):
                            m.next = "FIELDS"
                        with m.Default():
                            answer(BridgeStatus.BAD_OPCODE, length=1)
                            m.next = "REPLY"
            with m.State("FIELDS"):
                m.d.comb += self.rx.ready.eq(1)
                m.d.sync += idle.eq(idle + 1)
                with m.If(got):
                    # Bytes shift in from the top: after 4 (or 8) the fields are in place.
                    m.d.sync += [Cat(addr, word).eq(Cat(addr[8:], word[:8], word[8:],
                                                        self.rx.payload)),
                                 count.eq(count - 1), idle.eq(0)]
                    with m.If(count == 1):
                        m.next = "DISPATCH"
                with m.Elif(idle == self.timeout):
                    m.next = "OPCODE"
            with m.State("DISPATCH"):
                # Reads took only 4 bytes: the address is in the upper word.
                with m.If(~is_write):
                    m.d.sync += [addr.eq(word), word.eq(0)]
                m.next = "ACCESS"
            with m.State("ACCESS"):
                with m.If(is_reg & (addr[self.ctrl_addr_bits:] != 0)):
                    answer(BridgeStatus.DECERR, length=Mux(is_write, 1, 5))
                    m.next = "REPLY"
                with m.Elif(is_reg):
                    m.next = "REG"
                with m.Else():
                    m.next = "MEM"
            with m.State("REG"):
                m.next = "REG_WAIT"
                with m.If(is_write):
                    m.d.sync += [ctrl.awvalid.eq(1), ctrl.wvalid.eq(1)]
                with m.Else():
                    m.d.sync += ctrl.arvalid.eq(1)
            with m.State("REG_WAIT"):
                m.d.comb += [ctrl.bready.eq(1), ctrl.rready.eq(1)]
                with m.If(ctrl.awready):
                    m.d.sync += ctrl.awvalid.eq(0)
                with m.If(ctrl.wready):
                    m.d.sync += ctrl.wvalid.eq(0)
                with m.If(ctrl.arready):
                    m.d.sync += ctrl.arvalid.eq(0)
                with m.If(ctrl.bvalid):
                    answer(ctrl.bresp.as_value(), length=1)
                    m.next = "REPLY"
                with m.If(ctrl.rvalid):
                    answer(ctrl.rresp.as_value(), ctrl.rdata)
                    m.next = "REPLY"
            with m.State("MEM"):
                m.d.comb += [mem.req.valid.eq(1), mem.req.payload.addr.eq(addr),
                             mem.req.payload.data.eq(word), mem.req.payload.write.eq(is_write)]
                with m.If(mem.req.ready):
                    m.next = "MEM_WAIT"
            with m.State("MEM_WAIT"):
                m.d.comb += mem.resp.ready.eq(1)
                with m.If(mem.resp.valid):
                    status = Mux(mem.resp.payload.error, BridgeStatus.SLVERR, BridgeStatus.OKAY)
                    answer(status, mem.resp.payload.data, length=Mux(is_write, 1, 5))
                    m.next = "REPLY"
            with m.State("REPLY"):
                m.d.comb += [self.tx.valid.eq(1), self.tx.payload.eq(reply[:8])]
                with m.If(self.tx.ready):
                    m.d.sync += [reply.eq(reply >> 8), reply_len.eq(reply_len - 1)]
                    with m.If(reply_len == 1):
                        m.next = "OPCODE"
        bits = self.ctrl_addr_bits
        m.d.comb += [ctrl.awaddr.eq(addr[:bits]), ctrl.araddr.eq(addr[:bits]),
                     ctrl.wdata.eq(word), ctrl.wstrb.eq(0xF)]
        return m
