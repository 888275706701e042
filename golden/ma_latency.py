"""Latency model of the matrix accelerator: cycles from START to CTR for one command.

The model follows the RTL's pipeline stage by stage (``hdl/ma/core.py``), at the level
of rows, bursts and tiles, in clock cycles:

1. START is performed in cycle 0. The TAT walk checks one row a cycle, A then B then C
   (2·M + K rows; 2·M + N with B transposed, whose B is N rows of K), after a cycle of
   set-up, each verdict a cycle after its lookup; loads
   begin 3 cycles after it.
2. The row reader takes a row command every ``2·bursts`` cycles and issues its bursts
   two cycles apart (a row is split at 4 KiB; each burst's TAT lookup is registered).
   Memory answers a burst ``latency`` cycles after its address, one word a cycle, in
   order, on one read channel. A row whose start is
   not bus-aligned and whose words-in equal words-out costs one extra cycle (the
   realigner's flush). A group (all of B, an A block, an old-C tile) is usable two
   cycles after its last word arrived. B is loaded first, as stored: K rows of N
   elements, or with B transposed N rows of K.
3. Output tiles are issued in groups of ``INTERLEAVE`` along N (the slots of a group
   past the last tile of a row run too; their rows are dropped), groups in row-major
   order, each ``K·INTERLEAVE`` cycles (the group's k-steps interleaved), first steps at
   least ``(INTERLEAVE + 1)·P`` cycles apart, when B, the group's A block (and old C)
   are loaded and the output FIFO has ``INTERLEAVE·P`` free places (credits). The
   sequencer loads the next A block into a half as soon as that half's last group has
   been issued, and the next old-C group once the previous one has been given back
   (``BUFFER_STAGES + 2·P + INTERLEAVE`` cycles after its group started, when every PE
   has read it).
4. The result rows of a group leave the array ``2·P + DRAIN_OFFSET`` cycles after its
   slot 0's last step was issued, one a cycle, slot by slot, and enter the output FIFO
   ``RESULT_STAGES`` cycles later (a dropped row gives its credit back then); the writer
   takes a row, issues its address (per burst), then its words one a cycle; the write
   response comes ``latency`` cycles after the last word.
5. DONE (and the CTR) follow the last write response (the core registers "everything
   written" before it ends the command).

``latency`` is the number of cycles from an address handshake (AR, or the last W beat)
to the first read word (the write response). The constants below were fitted on the RTL
and are checked by ``tests/test_ma_latency.py`` on random shapes.
"""

from dataclasses import dataclass

from spec.memory import PAGE_BYTES

__all__ = ["MaCommand", "ma_cycles"]

# Fitted pipeline offsets (cycles), see the module docstring.
WALK_TO_LOADS = 3        # after the last walk row, the first row command is valid
READ_OFFSET = 0          # extra cycles between a burst's address and its first word
GROUP_READY = 2          # from a group's last word taken to its "full" flag seen
# The array (hdl/ma/array.py): tiles go through it in groups of INTERLEAVE, their k-steps
# interleaved, because the PE's accumulation loop is INTERLEAVE registers long; a PE
# has PE_LATENCY register stages from its input registers to its accumulator.
INTERLEAVE = 4
PE_LATENCY = 6
# From slot 0's last issued step to row 0 leaving the array, beyond 2·P: the operand
# buffer's register, the PE pipeline, the read-out and its output register.
BUFFER_STAGES = 2        # operand buffers: request → words registered → step
DRAIN_OFFSET = BUFFER_STAGES + PE_LATENCY + 1
INIT_HOLD_OFFSET = 0     # beyond 2·P + INTERLEAVE: the old C held for the PEs
RESULT_STAGES = 1        # result path: a row is registered before its FIFO write
FIFO_LATENCY = 1         # out FIFO: pushed → visible to the writer
DONE_OFFSET = 5          # from the last write response to DONE / CTR


@dataclass(frozen=True)
class MaCommand:
    """One MA command: shapes in elements, addresses and strides in bytes.
    ``b_transposed``: B is stored as N rows of K elements at ``ldb`` (MODE bit 1)."""
    m: int
    k: int
    n: int
    bf16: bool = False
    accumulate: bool = False
    a_addr: int = 0
    b_addr: int = 0
    c_addr: int = 0
    lda: int = 0
    ldb: int = 0
    ldc: int = 0
    b_transposed: bool = False


def _bursts(addr, nbytes, bus_bytes):
    """Bus words of each burst of a row (split at 4 KiB), and the row's word counts."""
    offset = addr % bus_bytes
    words_in = -(-(offset + nbytes) // bus_bytes)
    words_out = -(-nbytes // bus_bytes)
    bursts, word = [], addr - offset
    left = words_in
    while left:
        room = (PAGE_BYTES - word % PAGE_BYTES) // bus_bytes
        length = min(left, room)
        bursts.append(length)
        left -= length
        word += length * bus_bytes
    flush = offset != 0 and words_in == words_out
    return bursts, flush


class _ReadChannel:
    """Row commands → bursts → words on one in-order read channel."""

    def __init__(self, bus_bytes, latency, start, burst_gap=0):
        self.bus_bytes, self.latency = bus_bytes, latency
        self.burst_gap = burst_gap
        self.accept_free = start      # earliest cycle the reader takes a command
        self.channel_free = 0         # earliest cycle the read channel gives a word

    def row(self, valid, addr, nbytes):
        """The row's command is valid from ``valid``; returns (accepted, last word)."""
        accepted = max(valid, self.accept_free)
        bursts, flush = _bursts(addr, nbytes, self.bus_bytes)
        # A burst's TAT lookup is registered: the next burst of a row (past a 4 KiB
        # boundary) waits a cycle for the lookup of its address.
        self.accept_free = accepted + 2 * len(bursts)
        last = None
        for index, words in enumerate(bursts):
            issued = accepted + 1 + 2 * index
            first = max(issued + self.latency + READ_OFFSET, self.channel_free)
            last = first + words - 1
            self.channel_free = last + 1 + self.burst_gap
        if flush:
            self.channel_free += 1
            last += 1
        return accepted, last


def ma_cycles(cmd, *, p, data_width, latency, write_latency=None, burst_gap=0,
              write_store=0):
    """Predicted cycles from the START write to DONE (the CTR's value minus the
    timebase at START) for ``cmd`` on an MA with array size ``p`` and a bus of
    ``data_width`` bits, with ``latency`` cycles of memory latency (``write_latency``,
    default ``latency``: to a write's answer); ``burst_gap`` cycles the read channel loses
    after each burst's words, ``write_store`` cycles per word of a write burst beyond its
    first before its answer (a memory path that stores and forwards; the tile's:
    ``plan.machine.MemoryPath``)."""
    bb = data_width // 8
    es = 2 if cmd.bf16 else 1
    m_tiles, n_tiles = -(-cmd.m // p), -(-cmd.n // p)
    # B as stored: K rows of N, or transposed N rows of K.
    b_rows, b_cols = (cmd.n, cmd.k) if cmd.b_transposed else (cmd.k, cmd.n)
    walk_end = 2 + (2 * cmd.m + b_rows)
    reader = _ReadChannel(bb, latency, 0, burst_gap)
    writer = _Writer(bb, latency if write_latency is None else write_latency, write_store)

    # Loads of B, in order; the sequencer's command stream is one row a cycle at best.
    valid = walk_end + WALK_TO_LOADS
    for row in range(b_rows):
        accepted, last = reader.row(valid, cmd.b_addr + row * cmd.ldb, b_cols * es)
        valid = accepted + 1
    b_ready = last + GROUP_READY
    group_end = accepted

    n_groups = -(-n_tiles // INTERLEAVE)
    spacing = max(cmd.k * INTERLEAVE, (INTERLEAVE + 1) * p)
    a_ready, a_freed = {}, {}           # A block → ready cycle, freed cycle
    c_ready = {}
    credit_returns = []                 # cycles a credit is visible again
    rows_out = []                       # (cycle the row is pushed, bytes, address)
    prev_start = None
    c_taken = None                      # cycle the previous old-C group was given back

    def load_a(block):
        nonlocal group_end
        wait = group_end + 1
        if block >= 2:
            wait = max(wait, a_freed[block - 2] + 1)
        valid = wait + 1
        rows = min(p, cmd.m - block * p)
        for i in range(rows):
            accepted, last = reader.row(valid, cmd.a_addr + (block * p + i) * cmd.lda,
                                        cmd.k * es)
            valid = accepted + 1
        group_end = accepted
        a_ready[block] = last + GROUP_READY

    def load_c(block, group):
        nonlocal group_end
        wait = group_end + 1
        if c_taken is not None:
            wait = max(wait, c_taken + 2)
        valid = wait + 1
        rows = min(p, cmd.m - block * p)
        for col in range(group * INTERLEAVE, min((group + 1) * INTERLEAVE, n_tiles)):
            cols = min(p, cmd.n - col * p)
            for i in range(rows):
                addr = cmd.c_addr + (block * p + i) * cmd.ldc + col * p * 4
                accepted, last = reader.row(valid, addr, cols * 4)
                valid = accepted + 1
        group_end = accepted
        c_ready[block, group] = last + GROUP_READY

    load_a(0)
    if m_tiles > 1 and not cmd.accumulate:
        load_a(1)
    groups = [(it, g) for it in range(m_tiles) for g in range(n_groups)]
    for index, (it, g) in enumerate(groups):
        if cmd.accumulate and g == 0 and it > 0:
            load_a(it)
        if cmd.accumulate:
            load_c(it, g)
        start = max(b_ready, a_ready[it])
        if cmd.accumulate:
            start = max(start, c_ready[it, g])
        if prev_start is not None:
            start = max(start, prev_start + spacing)
        # Credits: the out FIFO holds two groups' rows; a group needs INTERLEAVE·P.
        needed = (index - 1) * INTERLEAVE * p
        if needed > 0:
            start = max(start, sorted(credit_returns)[needed - 1])
        prev_start = start
        if cmd.accumulate:
            c_taken = start + BUFFER_STAGES + INIT_HOLD_OFFSET + 2 * p + INTERLEAVE
        last_step = start + cmd.k * INTERLEAVE - 1
        first_last_step = start + (cmd.k - 1) * INTERLEAVE     # slot 0's last step
        if g == n_groups - 1:
            a_freed[it] = last_step
            if not cmd.accumulate and it + 2 < m_tiles:
                load_a(it + 2)
        for slot in range(INTERLEAVE):
            jt = g * INTERLEAVE + slot
            for r in range(p):
                pushed = first_last_step + 2 * p + DRAIN_OFFSET + RESULT_STAGES + slot * p + r
                row = it * p + r
                if row < cmd.m and jt < n_tiles:
                    cols = min(p, cmd.n - jt * p)
                    rows_out.append((pushed, cmd.c_addr + row * cmd.ldc + jt * p * 4,
                                     cols * 4))
                else:
                    credit_returns.append(pushed + 1)
        # The writer's progress decides when credits come back.
        credit_returns.extend(writer.write(rows_out))
        rows_out.clear()
    return writer.last_response + DONE_OFFSET


class _Writer:
    """Result rows → address, words (one a cycle) → a response ``latency`` later."""

    def __init__(self, bus_bytes, latency, store=0):
        self.bus_bytes, self.latency, self.store = bus_bytes, latency, store
        self.free = 0
        self.last_response = 0

    def write(self, rows):
        """Writes rows in order; returns the cycles their credits are visible again."""
        credits = []
        for pushed, addr, nbytes in rows:
            accepted = max(pushed + FIFO_LATENCY, self.free)
            cycle = accepted
            for words in _bursts(addr, nbytes, self.bus_bytes)[0]:
                cycle += 1 + words                   # the address, then the words
                self.last_response = max(self.last_response, cycle - 1 + self.latency
                                         + self.store * (words - 1))
            self.free = cycle + 1
            credits.append(accepted + 1)
        return credits
