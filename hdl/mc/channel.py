"""Client channels of the memory controller and their credit-based flow control.

A client talks to the MC over one :class:`ClientChannelSignature`: three single-VC
links of the project's credit protocol (``hdl.common.credit``: requests, write data,
responses). Credit links have no ready: a sender may only send what the receiver has room
for, so nothing is ever held up on the link itself and nothing can be dropped.
``hdl.common.credit.CreditSender`` and ``CreditReceiver`` turn a credit link into, and
back from, a ``lib.stream``; ``check`` (a run-time check) is there too.
"""

from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hdl.common.credit import CreditSignature, check_depth
from spec.memory import PHYS_ADDR_BITS

__all__ = ["LENGTH_BITS", "ID_BITS", "CLASS_BITS", "ERROR_BITS", "RequestLayout",
           "WriteWordLayout", "ResponseLayout", "ClientChannelSignature"]

LENGTH_BITS = 16   # request length in bytes, 1..65535 (0 is refused)
ID_BITS = 8        # request id, echoed in every response item
CLASS_BITS = 3     # traffic class (spec.codes.TrafficClass: 7, 5, 3)
ERROR_BITS = 3     # spec.codes.ErrorCode of a response item (0 NONE, 1, 5, 6 used)


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


class ClientChannelSignature(wiring.Signature):
    """One client channel of the MC, from the client's side.

    Members: ``req`` (``Out``: requests, :class:`RequestLayout`), ``wdata`` (``Out``:
    write data, :class:`WriteWordLayout`), ``resp`` (``In``: responses,
    :class:`ResponseLayout`), each a single-VC
    :class:`hdl.common.credit.CreditSignature` whose rules hold.

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
            "req": Out(CreditSignature(RequestLayout(), req_depth)),
            "wdata": Out(CreditSignature(WriteWordLayout(data_width), wdata_depth)),
            "resp": In(CreditSignature(ResponseLayout(data_width), resp_depth)),
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
