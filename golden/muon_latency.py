"""Latency model of a Muon transfer: cycles from a packet's head entering the injection
port to its tail leaving the ejection port.

A transfer of ``F`` flits (one packet: a head and ``F - 1`` body flits) from router
``(x0, y0)`` to ``(x1, y1)`` on a mesh with nothing else in it:

* **Zero load.** The head crosses the source router's switch :data:`MUON_INJECT_CYCLES`
  after it was accepted, then every router on the XY path, :data:`MUON_HOP_CYCLES` a
  hop (input buffer, switch, link register), and the ejection port's register
  (``golden.muon.EJECT_CYCLES``): ``golden.muon.zero_load_latency``. The body follows
  one flit a cycle (wormhole switching; each link's credit loop is four cycles and its
  buffer holds at least four flits, so a link sustains a flit a cycle): the tail leaves
  ``F - 1`` cycles after the head. Contention-free serialisation is that ``F - 1``.
* **Inside a granted reservation** (RBR, ``hdl/muon/rbr.py``): the flits travel on
  the reserved VC, flit ``i`` injected in cycle ``start + i`` of the reservation's
  window, and no best-effort flit crosses the path's links in its windows, so each
  flit arrives exactly ``zero_load_latency`` after its injection, whatever other
  best-effort traffic does: the transfer ends ``start + F - 1 + zero_load_latency``.

``tests/test_muon_latency.py`` checks both on the Amaranth-simulator mesh.
"""

from golden.muon import hops, zero_load_latency

__all__ = ["transfer_cycles", "reserved_transfer_end", "hops"]


def transfer_cycles(src, dst, flits):
    """Cycles from the head's injection (its time stamp) to the tail's first cycle on
    the ejection port, for ``flits`` flits from ``src`` to ``dst`` on an empty mesh."""
    if flits < 1:
        raise ValueError(f"a transfer has at least one flit, not {flits}")
    return zero_load_latency(src, dst) + flits - 1


def reserved_transfer_end(src, dst, flits, start):
    """The cycle the tail of a reserved transfer of ``flits`` flits, injected one a
    cycle from ``start`` (its reservation's start), is first on the ejection port."""
    return start + transfer_cycles(src, dst, flits)
