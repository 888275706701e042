"""Transaction-level reference model of the memory controller (MC).

The MC moves bytes between C client channels and one memory. This model says, for every
response a client can see, which values are legal, from the requests and the responses
alone (no cycles, no bursts, no prefetch buffer): whatever the MC does inside, a read
must return, for each byte, the value of the last write to it that completed before the
read was asked for, or the value of a write to it that was in flight while the read was.
A write "completes" when its response reaches the client; a write and a read on the same
channel are never in flight together (per-channel order).

Requests (all lengths and addresses in bytes):

* :func:`check_request` gives the error a request is answered with: BAD_COMMAND for a
  length of 0 or a range that wraps past 2**48; NONE otherwise. AXI errors are the
  memory's business: :class:`ByteMemoryModel` is told of them.
* :func:`word_span` is how many bus words carry a request's bytes: a read answers that
  many words (the bytes outside ``[addr, addr + length)`` in the first and last words are
  don't-cares), a write sends that many (only the bytes inside are written).

:class:`ByteMemoryModel` keeps, per byte, the set of values a read may legally return.
Writes from different channels that overlap in time may land in either order, so after
both complete a byte may have two legal values; the model keeps both.

:func:`arbiter_grant_bound` and :func:`arbiter_wait_bound` are the starvation bounds
the RTL's arbiter promises, in grants and in cycles; their derivations are in their
docstrings.
"""

from dataclasses import dataclass, field

from spec.codes import ErrorCode, McOp

__all__ = ["ADDR_LIMIT", "LINE_BYTES", "check_request", "word_span", "lines_of",
           "ByteMemoryModel", "ReadToken", "arbiter_grant_bound", "arbiter_wait_bound"]

ADDR_LIMIT = 1 << 48      # physical byte addresses are 48 bits
LINE_BYTES = 64           # one prefetch-buffer line


def check_request(op, addr, length):
    """The error code a request gets at once (NONE: it is carried out)."""
    McOp(op)
    if not 0 <= addr < ADDR_LIMIT:
        raise ValueError(f"address {addr:#x} does not fit in 48 bits")
    if length == 0 or addr + length > ADDR_LIMIT:
        return ErrorCode.BAD_COMMAND
    return ErrorCode.NONE


def word_span(addr, length, bus_bytes):
    """``(first word address, word count)`` of the bus words covering the bytes
    ``[addr, addr + length)``; ``(addr rounded down, 0)`` for length 0."""
    first = addr - addr % bus_bytes
    if length == 0:
        return first, 0
    last = (addr + length - 1) - (addr + length - 1) % bus_bytes
    return first, (last - first) // bus_bytes + 1


def lines_of(addr, length):
    """Addresses of the prefetch lines that ``[addr, addr + length)`` touches."""
    first, count = word_span(addr, length, LINE_BYTES)
    return [first + i * LINE_BYTES for i in range(count)]


@dataclass(eq=False)
class ReadToken:
    """A read the model is watching (see :meth:`ByteMemoryModel.read_begin`):
    ``allowed`` the legal sets when it was asked for, ``writes`` every write in flight
    with it since."""
    addr: int
    length: int
    allowed: list
    writes: list = field(default_factory=list)


@dataclass(eq=False)
class _Write:
    addr: int
    data: bytes
    overlapped: list = field(default_factory=list)   # writes in flight with it

    def value(self, addr):
        offset = addr - self.addr
        return self.data[offset] if 0 <= offset < len(self.data) else None


class ByteMemoryModel:
    """Legal values of every byte of the memory, as the MC's clients may observe them.

    ``initial``: ``{address: byte}`` for bytes that are not 0 at the start. Call, in the
    order the testbench sees them happen:

    * :meth:`write_begin` when a write request is handed to the MC,
      :meth:`write_end` when its response is received (``ok`` False: nothing written);
    * :meth:`read_begin` when a read request is handed to the MC, and
      :meth:`read_check` with the bytes of its response when the response is complete.
    """

    def __init__(self, initial=None):
        self._legal = {}            # address -> frozenset of values
        self._initial = dict(initial or {})
        self._writes = []           # writes in flight
        self._reads = []            # ReadTokens in flight

    def legal(self, addr):
        """The values byte ``addr`` may hold, given the writes completed so far (the
        writes still in flight are not counted)."""
        return self._legal.get(addr, frozenset((self._initial.get(addr, 0),)))

    def write_begin(self, addr, data):
        """A write of ``data`` at ``addr`` is requested; returns its handle."""
        write = _Write(addr, bytes(data))
        for other in self._writes:
            write.overlapped.append(other)
            other.overlapped.append(write)
        self._writes.append(write)
        for token in self._reads:
            token.writes.append(write)
        return write

    def write_end(self, write, ok=True):
        """The write's response arrived. ``ok`` False: the memory refused at least one of
        its bursts, so each byte may hold the old or the new value."""
        self._writes.remove(write)
        for offset, value in enumerate(write.data):
            addr = write.addr + offset
            legal = {value} if ok else {value, *self.legal(addr)}
            # A write to the same byte that was in flight with this one may land after
            # it, whether it has completed already or not.
            for other in write.overlapped:
                other_value = other.value(addr)
                if other_value is not None:
                    legal.add(other_value)
            self._legal[addr] = frozenset(legal)

    def read_begin(self, addr, length):
        """A read of ``[addr, addr + length)`` is requested; returns its token."""
        token = ReadToken(addr, length, [self.legal(addr + i) for i in range(length)],
                          list(self._writes))
        self._reads.append(token)
        return token

    def read_check(self, token, data):
        """Check the read's response bytes (exactly ``length`` of them); returns a list of
        ``(address, value, legal values)`` for every byte that is not legal."""
        self._reads.remove(token)
        if len(data) != token.length:
            raise ValueError(f"{len(data)} bytes for a read of {token.length}")
        bad = []
        for offset, value in enumerate(data):
            addr = token.addr + offset
            legal = set(token.allowed[offset])
            legal.update(v for v in (w.value(addr) for w in token.writes) if v is not None)
            if value not in legal:
                bad.append((addr, value, sorted(legal)))
        return bad


def arbiter_grant_bound(channels, age_limit):
    """Grants to other channels that a channel holding its request can see before its
    own: ``age_limit`` grants make it urgent; urgent channels go first, round-robin, and
    at most ``channels - 2`` others can be urgent then (the one just granted is not)."""
    if channels < 1 or age_limit < 1:
        raise ValueError("channels and age_limit must be at least 1")
    return 0 if channels == 1 else age_limit + channels - 2


def arbiter_wait_bound(channels, age_limit, max_burst, latency, outstanding,
                       pipeline=8):
    """Cycles from a read request's sending to its first response word, at most, for a
    channel whose client takes its answers at once, when the memory answers every read
    ``latency`` cycles after its address and one word a cycle.

    The memory's read bus is the shared resource: each burst holds it for at most
    ``max_burst`` cycles. A grant waits for a free slot among the ``outstanding`` bursts
    in flight (one frees every ``max_burst`` cycles at worst), the request sees at most
    :func:`arbiter_grant_bound` other grants before its own, a prefetch fill may take
    the slot before each of those grants and its own (fills and grants take turns), and
    its words then follow at most ``outstanding - 1`` bursts already in flight.
    ``pipeline`` covers the fixed stages (request buffer, burst split, address register,
    response path).
    """
    grants = arbiter_grant_bound(channels, age_limit) + 1
    return pipeline + (2 * grants + outstanding - 1) * max_burst + latency
