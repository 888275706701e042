"""Memory packets on Muon: the formats the network interfaces (NIs) exchange.

A block's memory port (:class:`hdl.common.memport.MemPortSignature`) is carried over the
mesh by a requester NI (:class:`hdl.tile.ni.RequesterNi`) at the block's node and the
memory NI (:class:`hdl.tile.memni.MemoryNi`) at the MC's node. Every packet travels on
the best-effort VC (``spec.codes.MuonVc.BEST_EFFORT``). W = data width / 8 bytes per bus
word; A = 48 - log2(W) bits of bus-word address.

Head flit (``head`` set): its data holds a :class:`hdl.muon.layouts.HeaderLayout` (91
bits: time stamp, source and destination, class) and, right above it, a command:

- requester -> memory, :class:`RequestCmdLayout` (10 + A bits):
  ``kind`` (:class:`ReqKind`, 1 bit: READ 0, WRITE 1), ``last`` (1: this piece ends the
  block's burst), ``count`` (8: words - 1, 1..256 words), ``word`` (A: bus-word address
  of the first word).

  - READ: one flit (head and tail): read ``count + 1`` words from ``word``.
  - WRITE: the head, then ``count + 1`` body flits, one per word, tail on the last:
    :class:`WriteBodyLayout` (``data``, ``strb``: one bit per byte). A block's write
    burst goes as one or more such packets ("chunks"); ``last`` is set on the final one.

- memory -> requester, :class:`ResponseCmdLayout` (12 bits):
  ``kind`` (:class:`RespKind`, 2 bits), ``last`` (1), ``error`` (1), ``credits`` (8: request
  credits returned to the requester, 0..255, on every kind).

  - READ_DATA: the head, then one body flit per word read, tail on the last:
    :class:`ReadBodyLayout` (``data``, ``error``: the memory refused that word). ``last``
    echoes the read piece's: the block's burst ends with this packet's last word.
  - WRITE_DONE: one flit: the block's write burst is done, ``error`` if the memory
    refused any of its bytes. Sent once per burst, after its final chunk.
  - CREDIT: one flit that only returns ``credits``.

A response travels at its request's class (the header's ``cls``); a CREDIT packet at
class 7 (decode), so that returning credits is never starved.

So a flit's data must hold max(DW + W, 91 + 10 + A) bits (:func:`min_flit_data_bits`):
145 for a 128-bit bus (DW + 17), 146 for 64 bits, DW + W beyond.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data, enum
from amaranth.utils import exact_log2

from hdl.common.memport import PHYS_ADDR_BITS
from hdl.muon.layouts import HEADER_BITS, HeaderLayout, check_flit_data_bits

__all__ = ["ReqKind", "RespKind", "COUNT_BITS", "CREDIT_BITS", "MAX_PIECE", "MAX_CREDITS",
           "RequestCmdLayout", "ResponseCmdLayout", "HeadLayout", "WriteBodyLayout",
           "ReadBodyLayout", "min_flit_data_bits", "check_ni_widths"]

COUNT_BITS = 8                 # words - 1 of a read piece or write chunk
MAX_PIECE = 1 << COUNT_BITS    # words per packet at most
CREDIT_BITS = 8
MAX_CREDITS = (1 << CREDIT_BITS) - 1


class ReqKind(enum.Enum, shape=1):
    READ = 0
    WRITE = 1


class RespKind(enum.Enum, shape=2):
    READ_DATA = 0
    WRITE_DONE = 1
    CREDIT = 2


def _word_bits(data_width):
    return PHYS_ADDR_BITS - exact_log2(data_width // 8)


class RequestCmdLayout(data.StructLayout):
    def __init__(self, data_width):
        super().__init__({"kind": ReqKind, "last": 1, "count": COUNT_BITS,
                          "word": _word_bits(data_width)})


class ResponseCmdLayout(data.StructLayout):
    def __init__(self):
        super().__init__({"kind": RespKind, "last": 1, "error": 1, "credits": CREDIT_BITS})


class HeadLayout(data.StructLayout):
    """A head flit's data (its low bits): the Muon header, then the command."""

    def __init__(self, data_width):
        super().__init__({"header": HeaderLayout, "cmd": data.UnionLayout({
            "req": RequestCmdLayout(data_width), "resp": ResponseCmdLayout()})})


class WriteBodyLayout(data.StructLayout):
    def __init__(self, data_width):
        super().__init__({"data": data_width, "strb": data_width // 8})


class ReadBodyLayout(data.StructLayout):
    def __init__(self, data_width):
        super().__init__({"data": data_width, "error": unsigned(1)})


def min_flit_data_bits(data_width):
    """The flit data width the memory packets of a ``data_width``-bit bus need."""
    return max(data_width + data_width // 8, HEADER_BITS + 10 + _word_bits(data_width))


def check_ni_widths(data_width, flit_data_bits):
    if data_width not in (64, 128, 256, 512):
        raise ValueError(f"data width must be 64, 128, 256 or 512 bits, not {data_width!r}")
    check_flit_data_bits(flit_data_bits)
    need = min_flit_data_bits(data_width)
    if flit_data_bits < need:
        raise ValueError(f"flit data bits must be at least {need} for a {data_width}-bit bus "
                         f"(a whole word with its strobes, or a header and a command), "
                         f"not {flit_data_bits}")
