"""Client channels of the memory controller and their credit-based flow control.

A client talks to the MC over one :class:`ClientChannelSignature`: three
:class:`CreditStreamSignature` links (requests, write data, responses). Credit links have
no ready: a sender may only send what the receiver has room for, so nothing is ever held
up on the link itself and nothing can be dropped. :class:`CreditSender` and
:class:`CreditReceiver` turn a credit link into, and back from, a ``lib.stream``.
"""

from amaranth.hdl import Assert, Module, Shape, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from spec.memory import PHYS_ADDR_BITS

__all__ = ["check", "LENGTH_BITS", "ID_BITS", "CLASS_BITS", "ERROR_BITS", "RequestLayout",
           "WriteWordLayout", "ResponseLayout", "CreditStreamSignature",
           "ClientChannelSignature", "CreditSender", "CreditReceiver", "check_depth"]

LENGTH_BITS = 16   # request length in bytes, 1..65535 (0 is refused)
ID_BITS = 8        # request id, echoed in every response item
CLASS_BITS = 3     # traffic class (spec.codes.TrafficClass: 7, 5, 3)
ERROR_BITS = 3     # spec.codes.ErrorCode of a response item (0 NONE, 1, 5, 6 used)
MAX_DEPTH = 256


def check(m, condition, message):
    """A run-time check for simulation and formal proofs: ``condition`` is registered at
    each clock edge and asserted from the register, so the check sees exactly the values
    of the cycle (a combinational assertion may see unsettled values, and a synchronous
    one in the Amaranth simulator the registers' new values) and fails one cycle later."""
    ok = Signal(init=1, name="check_ok")
    m.d.sync += ok.eq(condition)
    m.d.comb += Assert(ok, message)


def check_depth(name, depth):
    if not isinstance(depth, int) or isinstance(depth, bool):
        raise TypeError(f"{name} must be an integer, not {depth!r}")
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"{name} must be in 1..{MAX_DEPTH}, not {depth}")


class RequestLayout(data.StructLayout):
    """A client request: ``op`` (spec.codes.McOp: 0 read, 1 write), byte ``addr`` (48
    bits), ``length`` in bytes, traffic class ``cls``, and an ``id`` echoed in the
    response."""

    def __init__(self):
        super().__init__({"op": 1, "addr": PHYS_ADDR_BITS, "length": LENGTH_BITS,
                          "cls": CLASS_BITS, "id": ID_BITS})


class WriteWordLayout(data.StructLayout):
    """One bus word of write data (the MC derives the byte strobes from the request)."""

    def __init__(self, data_width):
        super().__init__({"data": data_width})


class ResponseLayout(data.StructLayout):
    """One response item: a word of read data, or a write's acknowledgement (``data``
    0), or a refusal; ``last`` on the final item of a request, ``error`` its ErrorCode
    (0 NONE), ``id`` the request's."""

    def __init__(self, data_width):
        super().__init__({"data": data_width, "last": 1, "error": ERROR_BITS, "id": ID_BITS})


class CreditStreamSignature(wiring.Signature):
    """A credit-flow-controlled stream, from the sender's side.

    Members: ``payload`` (``Out(layout)``), ``valid`` (``Out(1)``), ``credit``
    (``In(1)``).

    Rules:

    1. At reset the sender holds ``depth`` credits: the number of items the receiver's
       buffer holds.
    2. An item is transferred in every cycle where ``valid`` is high; there is no ready,
       the receiver takes it. Each item costs the sender one credit; the sender never
       raises ``valid`` while it holds no credit.
    3. The receiver raises ``credit`` for one cycle for each buffer slot it frees, at
       most one per cycle; the sender may spend that credit from the next cycle on.
    4. Hence the receiver's buffer never overflows and, at every clock edge, the sender's
       credits + the items in the receiver's buffer + the credit pulse on the link =
       ``depth``: no credit is created or lost.
    5. Items are delivered in the order sent, each exactly once.

    Parameters
    ----------
    layout : data layout of the payload.
    depth : int
        The receiver's buffer depth in items, 1..256.
    """

    def __init__(self, layout, depth):
        check_depth("depth", depth)
        self.layout, self.depth = layout, depth
        super().__init__({"payload": Out(layout), "valid": Out(1), "credit": In(1)})

    def __eq__(self, other):
        return (type(other) is type(self) and other.layout == self.layout
                and other.depth == self.depth)

    def __hash__(self):
        return hash((type(self), self.depth))

    def __repr__(self):
        return f"CreditStreamSignature({self.layout!r}, depth={self.depth})"


class ClientChannelSignature(wiring.Signature):
    """One client channel of the MC, from the client's side.

    Members: ``req`` (``Out``: requests, :class:`RequestLayout`), ``wdata`` (``Out``:
    write data, :class:`WriteWordLayout`), ``resp`` (``In``: responses,
    :class:`ResponseLayout`), each a :class:`CreditStreamSignature` whose rules hold.

    Rules of the channel (addresses and lengths in bytes; W = ``data_width / 8``):

    1. A request covers the bytes ``[addr, addr + length)``; they travel in the bus
       words from ``addr`` rounded down to W up to the word holding the last byte
       (``golden.mc.word_span``).
    2. A write request is followed on ``wdata`` by exactly that many words, in order;
       the MC writes only the bytes inside the request. The words of successive write
       requests follow each other in request order; they may be sent before, with or
       after their request.
    3. A read is answered by one response item per word, in address order, ``last`` on
       the final one. A write is answered by one item (``data`` 0, ``last`` 1) once the
       memory has acknowledged all of it.
    4. A request of length 0, or whose range wraps past 2**48, is refused: one item with
       ``error`` BAD_COMMAND, ``last``, and the request's address in ``data``; a refused
       write's words (as rule 1 counts
       them; none for length 0) are still taken and dropped. Nothing is written.
    5. A memory error answers the read words it hit with ``error`` AXI_READ_ERROR, or the
       write's item with AXI_WRITE_ERROR; other channels are not affected.
    6. Responses come in request order, each request answered exactly once; ``id`` is
       the request's.
    7. A read asked for after a write's response arrived (on any channel) returns the
       written bytes, never older ones.

    Parameters: ``data_width`` (64, 128, 256, 512), and the receiver depths of each link
    (``req_depth``, ``wdata_depth`` at the MC; ``resp_depth`` at the client), 1..256.
    """

    def __init__(self, data_width, req_depth=4, wdata_depth=16, resp_depth=64):
        if data_width not in (64, 128, 256, 512):
            raise ValueError(f"data width must be 64, 128, 256 or 512 bits, not {data_width!r}")
        for name, depth in (("req_depth", req_depth), ("wdata_depth", wdata_depth),
                            ("resp_depth", resp_depth)):
            check_depth(name, depth)
        self.data_width = data_width
        self.req_depth, self.wdata_depth, self.resp_depth = req_depth, wdata_depth, resp_depth
        super().__init__({
            "req": Out(CreditStreamSignature(RequestLayout(), req_depth)),
            "wdata": Out(CreditStreamSignature(WriteWordLayout(data_width), wdata_depth)),
            "resp": In(CreditStreamSignature(ResponseLayout(data_width), resp_depth)),
        })

    def _values(self):
        return (self.data_width, self.req_depth, self.wdata_depth, self.resp_depth)

    def __eq__(self, other):
        return type(other) is type(self) and other._values() == self._values()

    def __hash__(self):
        return hash((type(self), self._values()))

    def __repr__(self):
        return "ClientChannelSignature({}, req_depth={}, wdata_depth={}, resp_depth={})".format(
            *self._values())


class CreditSender(wiring.Component):
    """The sending end of a credit link: a ``lib.stream`` in, a credit stream out.

    ``i.ready`` is high while the sender holds a credit, so a stream transfer on ``i``
    is the item sent on ``o`` in the same cycle. ``take`` spends extra credits (0..
    ``max_take``) in a cycle without sending anything, for a user that reserves room for
    items it will send later through ``send_reserved`` (which then costs nothing);
    ``take`` must not exceed ``credits`` minus what ``i`` sends that cycle. ``credits`` is
    the count held. With ``checks``, simulation assertions check the counter's range.
    """

    def __init__(self, layout, depth, *, max_take=0, checks=False):
        check_depth("depth", depth)
        self._depth, self._checks = depth, checks
        super().__init__({
            "i": In(stream.Signature(layout)),
            "o": Out(CreditStreamSignature(layout, depth)),
            "credits": Out(range(depth + 1), init=depth),
            "take": In(range(max_take + 1)),
            "send_reserved": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        spend = Signal.like(self.credits)
        m.d.comb += [
            self.i.ready.eq(self.send_reserved | (self.credits != 0)),
            self.o.valid.eq(self.i.valid & self.i.ready),
            self.o.payload.eq(self.i.payload),
            spend.eq((self.o.valid & ~self.send_reserved) + self.take),
        ]
        m.d.sync += self.credits.eq(self.credits - spend + self.o.credit)
        if self._checks:
            check(m, spend <= self.credits, "credit spent that the sender does not hold")
            check(m, self.credits - spend + self.o.credit <= self._depth,
                  "credit returned beyond the receiver's depth")
        return m


class CreditReceiver(wiring.Component):
    """The receiving end of a credit link: a buffer of ``depth`` items, a ``lib.stream``
    out; a ``credit`` pulse for every item taken from ``o``. ``level``: items buffered.
    With ``checks``, a simulation assertion fails if an item arrives at a full buffer."""

    def __init__(self, layout, depth, *, checks=False):
        check_depth("depth", depth)
        self._layout, self._depth, self._checks = layout, depth, checks
        super().__init__({
            "i": In(CreditStreamSignature(layout, depth)),
            "o": Out(stream.Signature(layout)),
            "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        width = Shape.cast(self._layout).width
        # SyncFIFO accepts a write whenever fewer than ``depth`` items are held; the
        # buffered variant may refuse one while an item moves to its output register
        # (depth 2, back-to-back writes), which would break the credit contract. At depth
        # 1 the buffered one is a plain register (SyncFIFO's memory would have a 0-bit
        # address, which Verilator and yosys' SMT back end refuse).
        fifo_type = SyncFIFOBuffered if self._depth == 1 else SyncFIFO
        m.submodules.fifo = fifo = fifo_type(width=width, depth=self._depth)
        m.d.comb += [
            fifo.w_data.eq(Value.cast(self.i.payload)),
            fifo.w_en.eq(self.i.valid),
            self.o.payload.eq(fifo.r_data),
            self.o.valid.eq(fifo.r_rdy),
            fifo.r_en.eq(self.o.ready),
            self.level.eq(fifo.level),
        ]
        m.d.sync += self.i.credit.eq(self.o.valid & self.o.ready)
        if self._checks:
            check(m, ~self.i.valid | fifo.w_rdy, "item sent to a full buffer")
        return m
