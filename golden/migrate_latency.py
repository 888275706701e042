"""Cycle model of the tile's cache-migrate engine (hdl/tile/migrate.py): draft."""

from spec.memory import PAGE_BYTES

__all__ = ["bursts"]


def bursts(addr, nbytes, bus_bytes, max_burst):
    """The engine's burst cut of ``[addr, addr + nbytes)``: ``(address, words)`` pairs,
    each at most ``max_burst`` words and never across a 4 KiB page."""
    out, words = [], nbytes // bus_bytes
    while words:
        n = min(max_burst, (PAGE_BYTES - addr % PAGE_BYTES) // bus_bytes, words)
        out.append((addr, n))
        addr, words = addr + n * bus_bytes, words - n
    return out
