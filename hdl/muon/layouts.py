"""Muon flit and packet layouts, and the signatures of the links that carry them.

One definition for the RTL, the testbench (``Layout.const({...}).as_bits()`` to pack,
``Layout.from_bits(x)`` to unpack) and the documentation. A packet is one head flit
(its ``data`` is a :class:`HeaderLayout`) followed by zero or more body flits; its last
flit has ``tail`` set (a one-flit packet has ``head`` and ``tail`` both set).
"""

from functools import cache

from amaranth.hdl import unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import Out

from hdl.common.credit import CreditSignature
from spec.codes import MuonVc

__all__ = [
    "COORD_BITS", "CLASS_BITS", "RSV_ID_BITS", "FLIT_DATA_BITS", "MAX_FLIT_DATA_BITS",
    "HEADER_BITS", "MAX_MESH_SIDE", "HeaderLayout", "FlitDataLayout", "FlitLayout",
    "flit_data_layout", "flit_layout", "flit_data_bits", "check_flit_data_bits", "DropLayout", "VC_COUNT",
    "MuonLinkSignature", "FlitStreamSignature", "DropSignature",
]

COORD_BITS = 4                      # mesh coordinates: up to 16 × 16 routers
MAX_MESH_SIDE = 1 << COORD_BITS
CLASS_BITS = 3                      # spec.codes.TrafficClass values 0..7
RSV_ID_BITS = 8                     # reservation id: generation and slot (hdl.muon.rbr)
FLIT_DATA_BITS = 96                 # default: a flit carries a header or 96 payload bits
MAX_FLIT_DATA_BITS = 1024
VC_COUNT = len(MuonVc)


class HeaderLayout(data.Struct):
    """The head flit's data: the TSP time stamp and the routing fields.

    ``ts`` is the 64-bit timebase value of the cycle the head was accepted on the
    injection port (the injection port writes it; what the source puts there is
    overwritten). ``rsv_id`` names the reservation of a packet on the reserved VC
    (informational: routers steer by VC), 0 on the best-effort VC.
    """
    ts: unsigned(64)
    src_x: unsigned(COORD_BITS)
    src_y: unsigned(COORD_BITS)
    dst_x: unsigned(COORD_BITS)
    dst_y: unsigned(COORD_BITS)
    cls: unsigned(CLASS_BITS)
    rsv_id: unsigned(RSV_ID_BITS)


HEADER_BITS = HeaderLayout.as_shape().size     # a flit's data holds at least a header


class FlitDataLayout(data.Union):
    """A flit's 96 data bits: the header of a head flit, or payload."""
    header: HeaderLayout
    payload: unsigned(FLIT_DATA_BITS)


class FlitLayout(data.Struct):
    """One flit: its virtual channel (:class:`spec.codes.MuonVc`), packet framing, data."""
    vc: unsigned(1)
    head: unsigned(1)
    tail: unsigned(1)
    data: FlitDataLayout


def check_flit_data_bits(data_bits):
    """A flit's data width: an integer from :data:`HEADER_BITS` (91) to
    :data:`MAX_FLIT_DATA_BITS`."""
    if not isinstance(data_bits, int) or isinstance(data_bits, bool):
        raise TypeError(f"flit data bits must be an integer, not {data_bits!r}")
    if not HEADER_BITS <= data_bits <= MAX_FLIT_DATA_BITS:
        raise ValueError(f"flit data bits must be in {HEADER_BITS}..{MAX_FLIT_DATA_BITS}, "
                         f"not {data_bits}")


@cache
def flit_data_layout(data_bits=FLIT_DATA_BITS):
    """A flit's ``data_bits`` data bits: the header of a head flit (its low bits), or
    payload; :class:`FlitDataLayout` at the default width."""
    check_flit_data_bits(data_bits)
    if data_bits == FLIT_DATA_BITS:
        return FlitDataLayout
    return data.UnionLayout({"header": HeaderLayout, "payload": unsigned(data_bits)})


@cache
def flit_layout(data_bits=FLIT_DATA_BITS):
    """One flit of ``data_bits`` data bits, fields as :class:`FlitLayout` (which it is
    at the default width)."""
    check_flit_data_bits(data_bits)
    if data_bits == FLIT_DATA_BITS:
        return FlitLayout
    return data.StructLayout({"vc": unsigned(1), "head": unsigned(1), "tail": unsigned(1),
                              "data": flit_data_layout(data_bits)})


def flit_data_bits(layout):
    """The data width of a flit layout made by :func:`flit_layout`."""
    return data.Layout.cast(layout)["data"].shape.size


class DropLayout(data.Struct):
    """A packet a router discarded: its header, and why (``bad_dst``: the destination
    is outside the mesh; otherwise TSP: older than MAX_AGE at its destination)."""
    header: HeaderLayout
    bad_dst: unsigned(1)


class MuonLinkSignature(CreditSignature):
    """A router-to-router link, seen from the sender: a link of the project's credit
    protocol (:class:`hdl.common.credit.CreditSignature`, whose rules hold) with one
    receiver buffer and one credit bit per virtual channel.

    Members: ``valid``, ``payload`` (a flit, :func:`flit_layout`; its ``vc`` field is
    the VC it travels on), ``credit`` (one bit per VC, :class:`spec.codes.MuonVc`).

    Rules (the credit protocol's, for flits):

    1. ``valid`` is high in a cycle in which ``payload`` is on the link. The receiver
       takes every valid flit: there is no ready.
    2. The receiver has a buffer of ``depth[vc]`` flits per virtual channel. The sender
       keeps one credit counter per VC, starting at that depth after reset, spends one
       credit per flit sent on that VC and never sends on a VC with no credit.
    3. ``credit`` bit ``vc`` is a one-cycle pulse from the receiver each time it frees a
       slot of that VC's buffer; each pulse gives the sender one credit back.
    4. So no buffer overflows, no flit is dropped on a link and no credit is created or
       lost: credits held + flits in flight + flits buffered + credits in flight = depth.

    ``data_bits``: the flits' data width (:func:`flit_layout`); ``be_depth`` /
    ``rsv_depth``: the receiver's buffer depth of the best-effort / reserved VC, flits.
    """

    def __init__(self, data_bits=FLIT_DATA_BITS, be_depth=8, rsv_depth=4):
        self.data_bits = data_bits
        depths = [0] * VC_COUNT
        depths[MuonVc.BEST_EFFORT], depths[MuonVc.RESERVED] = be_depth, rsv_depth
        super().__init__(flit_layout(data_bits), tuple(depths), vcs=VC_COUNT)


def FlitStreamSignature(data_bits=FLIT_DATA_BITS):
    """Injection and ejection ports: a ``lib.stream`` of flits (valid/ready) of
    ``data_bits`` data bits (:func:`flit_layout`).

    On an injection port, ``ready`` may depend on the offered flit's VC (each VC has
    its own buffer). Flits of the two VCs may interleave on a port between or inside
    packets; within one VC, a packet's flits are consecutive.
    """
    return stream.Signature(flit_layout(data_bits))


def DropSignature():
    """Drop events of one router: at most one discarded packet per cycle (``valid`` for
    one cycle per packet, with its header in ``payload``); nothing can hold them back."""
    return wiring.Signature({"valid": Out(1), "payload": Out(DropLayout)})
