"""Cycle model of the tile's cache-migrate engine (``hdl/tile/migrate.py``): cycles from
the START write to the completion timestamp (CTR) of one copy, for the planner.

The engine (docs/tile/migrate.md) reads in bursts of at most ``max_burst`` words (never
across 4 KiB) into a buffer of ``D = max_burst · max_outstanding`` words, asking for a
burst only when the buffer has room for it beside every word asked for and not yet
written; it requests a write burst once all its words are buffered and sends them one a
cycle. The memory answers a read burst ``read_latency`` cycles after taking its address,
one word a cycle, and a write burst ``write_latency`` cycles after its last word (the
rules of ``sim.bfm.memport.PortMemory``, without back-pressure).

The copy then runs in *rounds* of ``D`` words (the last one shorter). A round's place in
the buffer is free again ``R = read_latency + 2·max_burst + ROUND_OFFSET`` cycles after
its first burst was asked for (the latency, its words arriving, its last write burst
waiting for them, then sending them), so rounds start ``P = max(D, R)`` cycles apart:
the engine streams a bus word a cycle while ``R ≤ D``, and moves ``D`` words every
``R`` cycles beyond. That holds while the read and the write bursts are cut in phase
(each write burst's words come from one read burst: :func:`in_phase_words` counts
them). Out of phase, a write burst also waits for the next read burst's first words, and
a round takes ``R' = N/(N − 1) · (read_latency + max_burst + ROUND_OFFSET)`` cycles
(``N = max_outstanding``), so ``P' = max(D, R')``. The last round's words arrive; the
write stream follows them ``B_max`` words behind (the largest write burst of the
destination's cut: a write burst waits for all its words, and the data of the bursts
before it has to go first, one word a cycle); the last write is acknowledged:

    cycles = START_OFFSET + (the rounds but the last, at P and P' in the proportion of
             the words in and out of phase) + read_latency + last + B_max + write_latency

with ``last`` the words of the last round. The constants were fitted on the RTL and
``tests/test_tile_migrate.py`` checks the model against measured copies (aligned and
unaligned to pages, several buffer sizes and latencies): within :data:`STREAM_TOLERANCE`
while the buffer covers the latency, within :data:`LIMITED_TOLERANCE` beyond (where
bursts out of phase make the rounds irregular).
"""

from math import ceil

from spec.memory import PAGE_BYTES

__all__ = ["START_OFFSET", "ROUND_OFFSET", "STREAM_TOLERANCE", "LIMITED_TOLERANCE",
           "bursts", "in_phase_words", "buffer_limited", "migrate_cycles",
           "stream_bytes_per_cycle"]

START_OFFSET = 4     # START performed → first read address, and last answer → CTR
ROUND_OFFSET = 2     # a burst's last word in → its write burst asked for → first word out
# (relative, cycles) the model may be off by: while the buffer covers the latency (the
# default build up to a latency of about 90 cycles; exact on every copy measured), and
# beyond (within 9 % on 60 random copies and builds).
STREAM_TOLERANCE = (0.01, 4)
LIMITED_TOLERANCE = (0.10, 8)


def bursts(addr, nbytes, bus_bytes, max_burst):
    """The engine's burst cut of ``[addr, addr + nbytes)``: ``(address, words)`` pairs,
    each at most ``max_burst`` words and never across a 4 KiB page."""
    out, words = [], nbytes // bus_bytes
    while words:
        n = min(max_burst, (PAGE_BYTES - addr % PAGE_BYTES) // bus_bytes, words)
        out.append((addr, n))
        addr, words = addr + n * bus_bytes, words - n
    return out


def in_phase_words(src, dst, length, bus_bytes, max_burst):
    """Words of the copy in write bursts whose words all come from one read burst."""
    starts, index = [], 0
    for _, n in bursts(src, length, bus_bytes, max_burst):
        starts.append((index, index + n))
        index += n
    count, k, index = 0, 0, 0
    for _, n in bursts(dst, length, bus_bytes, max_burst):
        while starts[k][1] <= index:
            k += 1
        if index + n <= starts[k][1]:
            count += n
        index += n
    return count


def _check(length, bus_bytes, max_burst, max_outstanding, read_latency, write_latency):
    if bus_bytes not in (8, 16, 32, 64):
        raise ValueError(f"bus_bytes must be 8, 16, 32 or 64, not {bus_bytes!r}")
    if length <= 0 or length % bus_bytes:
        raise ValueError(f"length must be a positive multiple of {bus_bytes} bytes, "
                         f"not {length!r}")
    if not (1 <= max_burst and 2 <= max_outstanding):
        raise ValueError(f"max_burst must be at least 1 and max_outstanding at least 2, "
                         f"not {max_burst!r} and {max_outstanding!r}")
    if not (read_latency >= 1 and write_latency >= 1):
        raise ValueError("latencies must be at least 1 cycle")


def migrate_cycles(length, *, src=0, dst=0, bus_bytes=16, max_burst=16, max_outstanding=8,
                   read_latency=8, write_latency=None):
    """Cycles from the START write (the cycle it is performed) to the CTR of a copy of
    ``length`` bytes from ``src`` to ``dst`` (only their offsets in a 4 KiB page and to
    each other matter); ``write_latency`` defaults to ``read_latency``."""
    write_latency = read_latency if write_latency is None else write_latency
    _check(length, bus_bytes, max_burst, max_outstanding, read_latency, write_latency)
    words = length // bus_bytes
    in_phase_period, shifted_period, depth = _periods(max_burst, max_outstanding, read_latency)
    in_phase = in_phase_words(src, dst, length, bus_bytes, max_burst)
    rounds = ceil(words / depth)
    steady = (rounds - 1) * depth
    last = words - steady
    rounds_time = steady * (in_phase * in_phase_period
                            + (words - in_phase) * shifted_period) / (words * depth)
    lag = max(n for _, n in bursts(dst, length, bus_bytes, max_burst))
    return START_OFFSET + round(rounds_time) + read_latency + last + lag + write_latency


def _periods(max_burst, max_outstanding, read_latency):
    """Round periods in phase and out of phase, and the buffer's words."""
    depth = max_burst * max_outstanding
    in_phase = max(depth, read_latency + 2 * max_burst + ROUND_OFFSET)
    shifted = max(depth, max_outstanding * (read_latency + max_burst + ROUND_OFFSET)
                  / (max_outstanding - 1))
    return in_phase, shifted, depth


def buffer_limited(*, bus_bytes=16, max_burst=16, max_outstanding=8, read_latency=8):
    """Whether the buffer, not the bus, sets the copy rate (a round takes longer than
    ``D`` cycles in or out of phase)."""
    _check(bus_bytes, bus_bytes, max_burst, max_outstanding, read_latency, 1)
    in_phase, shifted, depth = _periods(max_burst, max_outstanding, read_latency)
    return max(in_phase, shifted) > depth


def stream_bytes_per_cycle(*, bus_bytes=16, max_burst=16, max_outstanding=8, read_latency=8,
                           in_phase=True):
    """The steady copy rate in bytes per cycle: the bus width while the buffer covers the
    latency, ``D`` words per round beyond (``in_phase``: the read and write bursts cut in
    phase; see the module docstring)."""
    _check(bus_bytes, bus_bytes, max_burst, max_outstanding, read_latency, 1)
    in_phase_period, shifted, depth = _periods(max_burst, max_outstanding, read_latency)
    return bus_bytes * depth / (in_phase_period if in_phase else shifted)
