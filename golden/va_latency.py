"""Latency model of the vector accelerator: cycles from START to DONE for one command.

The model follows the RTL's streams (``hdl/va/core.py``, ``hdl/va/streams.py``) word by
word, in clock cycles, with the memory answering a read burst ``latency`` cycles after
its address (one word a cycle, in order) and a write burst ``latency`` cycles after its
last word:

1. **Reads** (:class:`~hdl.va.streams.OperandReader`). The first burst address goes
   out :data:`READ_START` cycles after START (a later pass: :data:`AGAIN_TO_READ`
   cycles after the row unit's ``again``), then one every two cycles at most (the
   request is registered), the operands in turn; a burst is at most
   :data:`MAX_BURST` words and never crosses 4 KiB, and is issued only when its
   operand's FIFO has room for all of it (:data:`READ_FIFO` words of credit, given
   back as words leave). Words come back ``latency + READ_WAIT`` cycles after their
   burst's address at the earliest, one a cycle on the one read channel.
2. **Realignment** (:class:`~hdl.va.streams.Realign`). An operand that does not start
   on a bus word has its first word absorbed: output word j leaves with input word
   j + 1, and when the stream has as many words in as out, a flush word follows the
   last one a cycle later.
3. **The unit**: output word k leaves ``depth`` cycles after the unit took input word
   k (every operand's word k), and the unit takes a word every ``interval`` cycles at
   most (1 at the bus rate; ``data_width / (16·fn_lanes)`` through narrowed function
   units). Per-opcode depths are fitted (:data:`STREAM_DEPTH`).
4. **Writes** (:class:`~hdl.va.streams.StreamWriter`). The writer realigns the results
   to DST (a word more when DST's offset makes the stream span one more bus word) and
   issues a burst when all of its words are in its FIFO: the address one cycle, then
   its words one a cycle, then the next address. The memory answers ``latency +
   WRITE_WAIT`` cycles after a burst's last word; DONE follows the last answer.

Row commands (``hdl/va/rows.py``) read the operands once per pass; a reduction pass
ends when its last word has gone through the reduction trees, and the scalar steps
between passes (and the next read) take a fitted number of cycles per opcode
(:data:`PASS_GAP`). Commands with a second result (QUANTIZE, TOPK, split-half ROPE)
restart the writer once the first result is written. The element movers (strided
GATHER / SCATTER, the indexed forms) issue one single-word access per element, one a
cycle, many in flight.

``tests/test_va_latency.py`` checks the model against the RTL core in the Amaranth
simulator on random commands of every opcode.
"""

from spec.codes import VaOpcode
from spec.memory import PAGE_BYTES
from spec.va import MAX_K, SUM_INTERLEAVE

__all__ = ["VaState", "va_cycles", "va_passes", "va_repeat_cycles"]


MAX_BURST = 16          # bus words per burst (hdl.va.streams.MAX_BURST)
READ_FIFO = 64          # words of each operand's FIFO: the reader's credits
TAGS = 8                # read bursts in flight at most (the reader's tag FIFO)

# Fitted offsets (cycles), see the module docstring.
READ_START = 3          # START → the first burst address
READ_WAIT = 2           # beyond ``latency``: a burst address → its first word
WRITE_WAIT = 2          # beyond ``latency``: a burst's last word → its answer
CREDIT_WAIT = 1         # a word leaves its FIFO → its credit can issue a burst


def _words(addr, nbytes, bb):
    """Bus words that bytes ``[addr, addr + nbytes)`` touch."""
    offset = addr % bb
    return -(-(offset + nbytes) // bb)


def _bursts(addr, nbytes, bb):
    """Burst lengths (words) of a stream at ``addr``: at most MAX_BURST, never across
    4 KiB."""
    offset = addr % bb
    left, word, out = _words(addr, nbytes, bb), addr - offset, []
    while left:
        room = (PAGE_BYTES - word % PAGE_BYTES) // bb
        length = min(left, room, MAX_BURST)
        out.append(length)
        left -= length
        word += length * bb
    return out


class _Operand:
    """One operand stream of a pass: its bursts, raw word arrivals and pops."""

    def __init__(self, addr, nbytes, bb):
        self.bursts = _bursts(addr, nbytes, bb)
        self.words_in = sum(self.bursts)
        self.offset = addr % bb
        self.words_out = -(-nbytes // bb)
        self.arrive = []            # raw words: the cycle each is in the FIFO
        self.pops = []              # raw words: the cycle each leaves the FIFO
        self.out = []               # realigned words: the cycle each is ready
        self.issued = 0
        self.next = 0

    def ready(self, j, taken):
        """Realigned word j's ready cycle, or None while its raw word is not issued;
        ``taken``: the cycle realigned word j - 1 was taken (the flush needs it)."""
        if not self.offset:
            return self.arrive[j] if j < len(self.arrive) else None
        if j + 1 < self.words_in:
            return self.arrive[j + 1] if j + 1 < len(self.arrive) else None
        if len(self.arrive) < self.words_in:
            return None
        # the flush word, a cycle after the last raw word left (absorbed, if alone)
        return (self.arrive[0] if self.words_in == 1 else taken) + 1

    def took(self, j, cycle):
        """Realigned word j was taken in ``cycle``: the raw words that leave the FIFO."""
        if not self.offset:
            self.pops.append(cycle)
        elif j + 1 < self.words_in:
            if not self.pops:               # the absorbed first word
                self.pops.append(self.arrive[0])
            self.pops.append(cycle)


class _Channels:
    """The VA's one read channel and one write channel, across the passes of a command."""

    def __init__(self, bb, latency, write_latency=None, burst_gap=0, write_store=0):
        self.bb, self.latency = bb, latency
        self.write_latency = latency if write_latency is None else write_latency
        self.burst_gap, self.write_store = burst_gap, write_store
        self.read_free = 0
        self.write_free = 0
        self.answer = 0
        self.written = 0            # the last answer of the current writer stream

    def read_pass(self, start, operands, steps, interval, depth, turn=0, readers=4):
        """One pass: the reader starts at ``start`` with ``operands`` (a list of four
        (addr, nbytes) or None); the unit takes step k when every (operand, word) of
        ``steps[k]`` is ready, every ``interval`` cycles at most; ``turn``: the operand
        the reader serves first (of ``readers`` operand slots). Returns the steps' take
        cycles + ``depth`` (and leaves
        the reader's next turn in ``self.turn``)."""
        bb, latency = self.bb, self.latency
        ops = [None if o is None or not o[1] else _Operand(o[0], o[1], bb) for o in operands]
        takes = []
        last_taken = {}             # operand → cycle its previous realigned word was taken
        bursts_done = []            # cycles the last word of each burst arrived

        def advance():
            while len(takes) < len(steps):
                k = len(takes)
                need = [0 if not takes else takes[-1] + interval]
                for i, j, *extra in steps[k]:
                    r = ops[i].ready(j, last_taken.get(i, 0))
                    if r is None:
                        return
                    need.append(r + sum(extra))
                cycle = max(need)
                takes.append(cycle)
                for i, j, *_ in steps[k]:
                    if last_taken.get((i, j)) is None:
                        last_taken[(i, j)] = cycle
                        last_taken[i] = cycle
                        ops[i].took(j, cycle)

        t = start + READ_START
        while any(o is not None and o.next < len(o.bursts) for o in ops):
            advance()
            can = []
            for i, o in enumerate(ops):
                if o is None or o.next >= len(o.bursts):
                    continue
                length = o.bursts[o.next]
                need = o.issued + length - READ_FIFO     # pops needed before this burst
                if need > 0 and (len(o.pops) < need or o.pops[need - 1] + CREDIT_WAIT > t):
                    continue
                if len(bursts_done) >= TAGS and bursts_done[-TAGS] >= t:
                    continue
                can.append(i)
            if not can:
                t += 1
                continue
            i = turn if turn in can else can[0]
            o = ops[i]
            length = o.bursts[o.next]
            first = max(t + latency + READ_WAIT, self.read_free)
            o.arrive.extend(range(first, first + length))
            self.read_free = first + length + self.burst_gap
            bursts_done.append(first + length - 1)
            o.issued += length
            o.next += 1
            turn = (i + 1) % readers
            t += 2
        advance()
        assert len(takes) == len(steps), "a step needs a word no operand reads"
        self.turn = turn
        self.operands = ops
        return [c + depth for c in takes]

    def write(self, ready, addr, nbytes, start=0):
        """The writer takes result words ready in the given cycles (extra words are
        dropped) and writes ``nbytes`` at ``addr``; returns the last answer's cycle."""
        bb = self.bb
        words_in = -(-nbytes // bb)
        words_out = _words(addr, nbytes, bb)
        times = list(ready[:words_in])
        if words_out > words_in:
            times.append(times[-1] + 1)     # the realigner's flush word
        times = [max(c, start) for c in times]
        word, answer = 0, 0
        for length in _bursts(addr, nbytes, bb):
            issue = max(times[word + length - 1], self.write_free)
            self.write_free = issue + length + 1
            answer = (issue + length + self.write_latency + WRITE_WAIT
                      + self.write_store * (length - 1))
            word += length
        self.answer = max(self.answer, answer)
        return answer


class VaState:
    """What a command leaves in the VA that the next one's timing depends on: the
    reader's ``turn`` (the operand it serves first; ``mover_turn``: the indexed mover's
    reader's, of its two operands) and the row unit's last ``pass``
    (RMSNORM's first read takes gamma too when the previous command ended in pass 2).
    ``VaState()`` is the VA after reset."""

    def __init__(self, turn=0, row_pass=0, mover_turn=0):
        self.turn, self.row_pass, self.mover_turn = turn, row_pass, mover_turn

    def __repr__(self):
        return (f"VaState(turn={self.turn}, row_pass={self.row_pass}, "
                f"mover_turn={self.mover_turn})")


# Per-opcode depth of the element pipelines, cycles from the unit taking a word to the
# result being ready for the writer's next burst (fn_lanes at the bus rate; each extra
# piece of a narrowed unit adds a cycle).
ENGINE_DEPTH = 12                    # ADD, MUL, SCALE, MUL_MEM, ADD_MEM (the lane engine)
UNARY_DEPTH = {VaOpcode.EXP: 44, VaOpcode.SILU: 44, VaOpcode.RECIP: 44,
               VaOpcode.SOFTMAX: 44, VaOpcode.RMSNORM: 44}
PACKED_DEPTH = 44                    # DEQUANTIZE, CVT_F32, QUANTIZE: half a word a step
SCALE_PRODUCT = 5                    # DEQUANTIZE_MEM: the SRC2 word → the first step
EXT_DEPTH = 32                       # CLAMP, SOFTPLUS, SQRT (hdl.va.extfunc)
ROPE_DEPTH = 12


def _levels(count):
    return max(0, (count - 1).bit_length())


# Row commands: cycles from a pass's last step (the unit taking its last word) to the
# next pass's first burst address, as ``base + per_piece·(pieces - 1) + per_level·levels``
# (``levels``: log2 of fn_lanes, the depth of the reduction trees), per (opcode, pass).
PASS_GAP = {
    (VaOpcode.SOFTMAX, 0): (7, 1, 1),
    (VaOpcode.SOFTMAX, 1): (63, 1, 1),
    (VaOpcode.RMSNORM, 0): (7, 1, 1),
    (VaOpcode.RMSNORM, 1): (43, 1, 1),
    (VaOpcode.QUANTIZE, 0): (21, 1, 1),
}
NARROW_GAP = {(VaOpcode.SOFTMAX, 1): 3}   # extra cycles with narrowed units (fitted)
MERGE_TAIL = 5          # TOPK / MAX: last word's last piece → first value word ready
SECOND_WAIT = 3         # the first result's last answer → the second result's word 0
ROPE_AGAIN = 5          # split-half ROPE: the first halves' last answer → the next read
SUM_TAIL = 12           # SUM: the tree's last step → the result ready for the writer
SUM_START = 7           # SUM: the last accumulation step → the first tree step
SUM_LOOP = 7            # SUM's partial-sum loop (hdl.va.lanes._SUM_LOOP)
GATHER_WAIT = 1         # a word's last element arrived → the packed word ready
SCATTER_WAIT = 2        # a source word ready → its first element's write
ELEMENTS_IN_FLIGHT = 32


def _sum_done(last_take, beats, lanes, width):
    """SUM (hdl.va.lanes.LaneEngine): the cycle its tree's last step issues, from the
    last beat's step; ``width`` engine lanes serve ``lanes`` (L)."""
    partials = SUM_INTERLEAVE * lanes
    words = partials // width
    # Steps: one a beat, then (fewer beats than words) one a cycle until word words-1.
    end = last_take + max(0, words - beats)
    issue = end + SUM_START
    levels = _levels(partials)
    for lv in range(levels):
        n = max(1, (partials >> lv) // width)
        reads = max(1, n // 2)
        gap = SUM_LOOP - 1 if n <= 2 else max(0, SUM_LOOP - reads // 2)
        issue += reads - 1
        if lv != levels - 1:
            issue += gap + 1
    return issue


def _gap(op, pass_, pieces, fn_lanes, narrowed):
    base, per_piece, per_level = PASS_GAP[op, pass_]
    extra = NARROW_GAP.get((op, pass_), 0) if narrowed else 0
    return base + per_piece * (pieces - 1) + per_level * _levels(fn_lanes) + extra


def va_passes(cmd):
    """Reads of the operands a command makes (row commands: one per pass)."""
    op = VaOpcode(cmd.op)
    if op in (VaOpcode.SOFTMAX, VaOpcode.RMSNORM):
        return 3
    if op == VaOpcode.QUANTIZE or (op == VaOpcode.ROPE and cmd.split_half):
        return 2
    if op == VaOpcode.TOPK_WIDE:
        return -(-cmd.k // MAX_K_ENTRIES)
    return 1


def va_cycles(cmd, *, lanes, data_width, fn_lanes=None, latency, state=None, memory=None,
              origin=0, write_latency=None, burst_gap=0, write_store=0):
    """Predicted cycles from START to DONE (as the VA's CTR counts them) of ``cmd`` (a
    :class:`golden.va.VaCommand`) on a VA of ``lanes`` lanes, a ``data_width``-bit bus
    and ``fn_lanes`` function lanes (None: data_width/16), with ``latency`` cycles of
    memory latency.
    ``write_latency`` (default ``latency``): cycles from a write burst's last word to
    its answer instead; ``burst_gap``: cycles the read channel loses after each burst's
    words; ``write_store``: cycles per word of a write burst beyond its first before its
    answer (a memory path that stores and forwards the words; ``plan.machine.MemoryPath``
    gives the tile's).
    ``state`` (a :class:`VaState`, updated in place): what the previous
    command left; None: the VA after reset. The indexed forms skip the elements whose
    index is -1: ``memory`` (bytes from physical address ``origin``) holds the indices;
    None: no element is skipped."""
    state = VaState() if state is None else state
    fn = data_width // 16 if fn_lanes is None else fn_lanes
    pieces = (data_width // 16) // fn
    narrowed = pieces > 1
    bb = data_width // 8
    op = VaOpcode(cmd.op)
    n = cmd.length
    ch = _Channels(bb, latency, write_latency, burst_gap, write_store)
    start = 0
    turn = [state.turn]
    prev_pass = state.row_pass
    state.row_pass = 0

    def stream(operands, steps, interval, depth, again=start):
        ch_turn = turn[0]
        out = ch.read_pass(again, operands, steps, interval, depth, ch_turn)
        turn[0] = ch.turn
        return out

    def x_words(nbytes):
        return -(-nbytes // bb)

    src2, src3 = cmd.src2, cmd.src3
    if op in (VaOpcode.ADD, VaOpcode.MUL):
        w = x_words(2 * n)
        ready = stream([(cmd.src, 2 * n), (src2, 2 * n), None, None],
                       [[(0, k), (1, k)] for k in range(w)], 1, ENGINE_DEPTH)
        end = ch.write(ready, cmd.dst, 2 * n)
    elif op in (VaOpcode.SCALE, VaOpcode.MUL_MEM, VaOpcode.ADD_MEM):
        w = x_words(2 * n)
        y = (src2, 2) if op != VaOpcode.SCALE else None
        # MUL_MEM, ADD_MEM: the engine registers the scalar before it takes a beat
        steps = [[(0, k)] + ([(1, 0, 1)] if y and k == 0 else []) for k in range(w)]
        ready = stream([(cmd.src, 2 * n), y, None, None], steps, 1, ENGINE_DEPTH)
        end = ch.write(ready, cmd.dst, 2 * n)
    elif op == VaOpcode.SUM:
        w = x_words(2 * n)
        takes = stream([(cmd.src, 2 * n), None, None, None], [[(0, k)] for k in range(w)],
                       1, 0)
        done = _sum_done(takes[-1], w, lanes, data_width // 16) + SUM_TAIL
        end = ch.write([done], cmd.dst, 4)
    elif op in (VaOpcode.EXP, VaOpcode.SILU, VaOpcode.RECIP, VaOpcode.CLAMP,
                VaOpcode.SOFTPLUS, VaOpcode.SQRT):
        w = x_words(2 * n)
        depth = UNARY_DEPTH.get(op, EXT_DEPTH) + pieces - 1
        ready = stream([(cmd.src, 2 * n), None, None, None], [[(0, k)] for k in range(w)],
                       pieces, depth)
        end = ch.write(ready, cmd.dst, 2 * n)
    elif op in (VaOpcode.DEQUANTIZE, VaOpcode.CVT_F32, VaOpcode.DEQUANTIZE_MEM):
        w = x_words(4 * n)
        y = (src2, 4) if op == VaOpcode.DEQUANTIZE_MEM else None
        # DEQUANTIZE_MEM: the scale product is ready SCALE_PRODUCT cycles after its word
        steps = [[(0, k)] + ([(1, 0, SCALE_PRODUCT)] if y and k == 0 else []) for k in range(w)]
        takes = stream([(cmd.src, 4 * n), y, None, None], steps,
                       pieces, PACKED_DEPTH + pieces - 1)
        end = ch.write(_packed(takes), cmd.dst, 2 * n)
    elif op in (VaOpcode.MAX, VaOpcode.TOPK):
        w = x_words(2 * n)
        takes = stream([(cmd.src, 2 * n), None, None, None], [[(0, k)] for k in range(w)],
                       pieces, 0)
        first = takes[-1] + pieces - 1 + MAX_K_ENTRIES * fn + MERGE_TAIL
        value_words = max(1, 16 * MAX_K_ENTRIES // data_width)
        ready = [first + j for j in range(value_words)]
        if op == VaOpcode.MAX:
            end = ch.write(ready, cmd.dst, 2)
        else:
            written = ch.write(ready, cmd.dst, 2 * cmd.k)
            index_words = max(1, 32 * MAX_K_ENTRIES // data_width)
            second = [written + SECOND_WAIT + j for j in range(index_words)]
            end = ch.write(second, cmd.dst2, 4 * cmd.k)
    elif op == VaOpcode.TOPK_WIDE:
        end = _topk_wide(cmd, stream, ch, x_words(2 * n), pieces, fn, data_width)
    elif op in (VaOpcode.SOFTMAX, VaOpcode.RMSNORM, VaOpcode.QUANTIZE):
        w = x_words(2 * n)
        rms = op == VaOpcode.RMSNORM
        gamma = (src2, 2 * n)
        first_y = gamma if rms and prev_pass == 2 else None
        takes = stream([(cmd.src, 2 * n), first_y, None, None], [[(0, k)] for k in range(w)],
                       pieces, 0)
        again = takes[-1] + _gap(op, 0, pieces, fn, narrowed) - READ_START
        if op == VaOpcode.QUANTIZE:
            takes = stream([(cmd.src, 2 * n), None, None, None], [[(0, k)] for k in range(w)],
                           pieces, PACKED_DEPTH + pieces - 1, again)
            written = ch.write(_packed(takes), cmd.dst, n)
            end = ch.write([written + SECOND_WAIT], cmd.dst2, 4)
            state.row_pass = 1
        else:
            takes = stream([(cmd.src, 2 * n), None, None, None], [[(0, k)] for k in range(w)],
                           pieces, 0, again)
            again = takes[-1] + _gap(op, 1, pieces, fn, narrowed) - READ_START
            y = gamma if rms else None
            steps = [[(0, k)] + ([(1, k)] if y else []) for k in range(w)]
            ready = stream([(cmd.src, 2 * n), y, None, None], steps, pieces,
                           UNARY_DEPTH[op] + pieces - 1, again)
            end = ch.write(ready, cmd.dst, 2 * n)
            state.row_pass = 2
    elif op == VaOpcode.ROPE:
        if cmd.split_half:
            half = n
            w = x_words(half)
            operands = [(cmd.src, half), (src2, half), (src3, half), (cmd.src + half, half)]
            steps = [[(0, k), (1, k), (2, k), (3, k)] for k in range(w)]
            ready = stream(operands, steps, pieces, ROPE_DEPTH + pieces - 1)
            written = ch.write(ready, cmd.dst, half)
            again = written + ROPE_AGAIN - READ_START
            ready = stream(operands, steps, pieces, ROPE_DEPTH + pieces - 1, again)
            end = ch.write(ready, cmd.dst + half, half)
            state.row_pass = 1
        else:
            w = x_words(2 * n)
            operands = [(cmd.src, 2 * n), (src2, n), (src3, n), None]
            steps = [[(0, k), (1, k // 2), (2, k // 2)] for k in range(w)]
            ready = stream(operands, steps, pieces, ROPE_DEPTH + pieces - 1)
            end = ch.write(ready, cmd.dst, 2 * n)
    elif op == VaOpcode.GATHER:
        end = _gather(ch, cmd, bb, latency)
    elif op == VaOpcode.SCATTER:
        end, turn[0] = _scatter(ch, cmd, bb, latency, turn[0])
    elif op in (VaOpcode.GATHER_IDX, VaOpcode.SCATTER_IDX, VaOpcode.GATHER_CSR):
        end, state.mover_turn = _indexed(
            ch, cmd, bb, latency, _skips(cmd, memory, origin),
            _rows_of(cmd, memory, origin) if op == VaOpcode.GATHER_CSR else None,
            state.mover_turn)
    else:
        raise ValueError(f"the VA latency model has no timing for {op.name}")
    state.turn = turn[0]
    return end - start


MAX_K_ENTRIES = MAX_K   # TOPK's lists
WIDE_RESTART = 2        # TOPK_WIDE, pass c > 0: the merge's end → the values' restart
WIDE_AGAIN = 3          # TOPK_WIDE: the last index word out → the next pass's read


def _topk_wide(cmd, stream, ch, w, pieces, fn, data_width):
    """TOPK_WIDE (hdl.va.rows.RowUnit): ceil(K/8) of TOPK's passes, each TOPK's merge,
    its values written (after the previous pass's indices are answered), then its
    indices while the next pass reads x."""
    value_words = max(1, 16 * MAX_K_ENTRIES // data_width)
    index_words = max(1, 32 * MAX_K_ENTRIES // data_width)
    again, answer = 0, 0
    for c in range(-(-cmd.k // MAX_K_ENTRIES)):
        count = min(MAX_K_ENTRIES, cmd.k - MAX_K_ENTRIES * c)
        takes = stream([(cmd.src, 2 * cmd.length), None, None, None],
                       [[(0, k)] for k in range(w)], pieces, 0, again)
        first = takes[-1] + pieces - 1 + MAX_K_ENTRIES * fn + MERGE_TAIL
        if c:
            first = max(first + WIDE_RESTART, answer + SECOND_WAIT)
        written = ch.write([first + j for j in range(value_words)],
                           cmd.dst + 2 * MAX_K_ENTRIES * c, 2 * count)
        second = [written + SECOND_WAIT + j for j in range(index_words)]
        answer = ch.write(second, cmd.dst2 + 4 * MAX_K_ENTRIES * c, 4 * count)
        again = second[-1] + WIDE_AGAIN - READ_START
    return answer


def _packed(takes):
    """Packed results (two steps fill a word): the cycle each result word is ready."""
    out = [takes[j + 1] for j in range(0, len(takes) - 1, 2)]
    if len(takes) % 2:
        out.append(takes[-1] + 1)      # the last half word, flushed a cycle later
    return out


def _gather(ch, cmd, bb, latency):
    """Strided GATHER: a single-word read per element, one a cycle, in order."""
    arrive = []
    for e in range(cmd.length):
        issue = READ_START + e
        if e >= ELEMENTS_IN_FLIGHT:
            issue = max(issue, arrive[e - ELEMENTS_IN_FLIGHT])
        first = max(issue + latency + READ_WAIT, ch.read_free)
        arrive.append(first)
        ch.read_free = first + 1 + ch.burst_gap
    per_word = bb >> cmd.esize
    ready = [arrive[min(cmd.length, (j + 1) * per_word) - 1] + GATHER_WAIT
             for j in range(-(-cmd.length // per_word))]
    return ch.write(ready, cmd.dst, cmd.length << cmd.esize)


def _scatter(ch, cmd, bb, latency, turn):
    """Strided SCATTER: the source read as a stream, then a single-word write per
    element, one a cycle, in order."""
    nbytes = cmd.length << cmd.esize
    words = -(-nbytes // bb)
    takes = ch.read_pass(0, [(cmd.src, nbytes), None, None, None],
                         [[(0, k)] for k in range(words)], 1, 0, turn)
    per_word = bb >> cmd.esize
    answers, issue = [], 0
    for e in range(cmd.length):
        issue = max(takes[e // per_word] + SCATTER_WAIT, issue + 1)
        if e >= ELEMENTS_IN_FLIGHT:
            issue = max(issue, answers[e - ELEMENTS_IN_FLIGHT] + 1)
        answers.append(issue + ch.write_latency + WRITE_WAIT)
    return answers[-1], ch.turn


LIMITS_CYCLES = 50      # indexed forms: START → the CHECK pass's first burst address
INDEX_AGAIN = 5         # the CHECK pass's last word → the RUN pass's first address
ADDRESS_WAIT = 5        # RUN: an index word ready → its first element's address
POINTER_WAIT = 4        # RUN (CSR): a row-pointer word ready → its first pointer taken
SOURCE_WAIT = 3         # RUN (SCATTER_IDX): a source word ready → its first element
SCATTER_IDX_WRITE = -1  # RUN (SCATTER_IDX): an element address → its write


def _skips(cmd, memory, origin):
    """Which elements of an indexed command make no access (index -1)."""
    if memory is None or cmd.op == VaOpcode.GATHER_CSR:
        return [False] * cmd.length
    at = cmd.src2 - origin
    raw = bytes(memory[at:at + 4 * cmd.length])
    return [raw[4 * i:4 * i + 4] == b"\xff\xff\xff\xff" for i in range(cmd.length)]


def _rows_of(cmd, memory, origin):
    """GATHER_CSR: the row of each element (from the row pointers; None: all in row 0)."""
    if memory is None:
        return [0] * cmd.length
    at = cmd.src2 - origin
    raw = bytes(memory[at:at + 4 * (cmd.rows + 1)])
    ptr = [int.from_bytes(raw[4 * r:4 * r + 4], "little", signed=True)
           for r in range(cmd.rows + 1)]
    rows, r = [], 0
    for e in range(cmd.length):
        while r + 1 < len(ptr) and ptr[r + 1] <= e:
            r += 1
        rows.append(r)
    return rows


def _word_ready(o, j):
    """A realigned word's ready cycle from its operand's raw arrivals."""
    if not o.offset:
        return o.arrive[j]
    return o.arrive[j + 1] if j + 1 < o.words_in else o.arrive[-1] + 1


def _indexed(ch, cmd, bb, latency, skips, rows, turn):
    """GATHER_IDX, SCATTER_IDX, GATHER_CSR (hdl.va.indexed.IndexedMover): the limits,
    the CHECK pass over the indices (and row pointers), the RUN pass: an element
    address a cycle (CSR: a row pointer taken a cycle as well), a single-word read
    (gathers) and a single-word write per element; an index of -1 makes no access."""
    n, op = cmd.length, VaOpcode(cmd.op)
    csr = op == VaOpcode.GATHER_CSR
    index_addr = cmd.src3 if csr else cmd.src2
    pointers = (cmd.src2, 4 * (cmd.rows + 1)) if csr else None
    per_word = bb // 4
    out_words = -(-4 * n // bb)
    steps = [[(0, k)] for k in range(out_words)]
    takes = ch.read_pass(LIMITS_CYCLES, [(index_addr, 4 * n), pointers, None, None], steps,
                         1, 0, turn, 2)
    last = takes[-1]
    if csr:                 # the pointers are checked too
        o = ch.operands[1]
        last = max(last, _word_ready(o, o.words_out - 1))
    again = last + INDEX_AGAIN - READ_START
    source = (cmd.src, n << cmd.esize) if op == VaOpcode.SCATTER_IDX else pointers
    takes = ch.read_pass(again, [(index_addr, 4 * n), source, None, None], steps, 1, 0,
                         ch.turn, 2)
    ptr_ready, src_ready = [], []
    if csr:
        o = ch.operands[1]
        ptr_ready = [_word_ready(o, j) for j in range(o.words_out)]
    if op == VaOpcode.SCATTER_IDX:
        o = ch.operands[1]
        src_ready = [_word_ready(o, j) for j in range(o.words_out)]
    events = []             # (element or None for a pointer, its ready cycle)
    taken_rows = -1
    for e in range(n):
        while csr and taken_rows < min(rows[e] + 1, cmd.rows):
            taken_rows += 1
            events.append((None, ptr_ready[4 * taken_rows // bb] + POINTER_WAIT))
        ready = takes[e // per_word] + ADDRESS_WAIT
        if src_ready:       # the scatter's element pairs with its source element
            ready = max(ready, src_ready[(e << cmd.esize) // bb] + SOURCE_WAIT)
        events.append((e, ready))
    cursor, answers, element_free = -1, [], 0
    for e, ready in events:
        cursor = max(cursor + 1, ready)
        if e is None or skips[e]:
            continue
        if op == VaOpcode.SCATTER_IDX:
            write = max(cursor + SCATTER_IDX_WRITE, element_free)
        else:
            first = max(cursor + latency + READ_WAIT, ch.read_free)
            ch.read_free = first + 1 + ch.burst_gap
            write = max(first, element_free)
        element_free = write + 1
        answers.append(write + ch.write_latency + WRITE_WAIT)
    return (max(answers) if answers else cursor + 1), ch.turn


_REPEAT_CACHE = {}


def va_repeat_cycles(cmds, *, lanes, data_width, fn_lanes=None, latency, write_latency=None,
                     burst_gap=0, write_store=0):
    """Cycles of ``cmds`` (VaCommands) run one after the other from reset, each from
    START to DONE: the model's prediction for a repeated command. Commands of the same
    shape and alignment after the same state are timed once (no memory: the indexed
    forms as if no index were -1)."""
    state, total = VaState(), 0
    for cmd in cmds:
        key = (cmd.op, cmd.length, cmd.esize, cmd.stride, cmd.k, cmd.split_half, cmd.rows,
               cmd.index_limit, tuple(a % PAGE_BYTES if a else -1 for a in (
                   cmd.src, cmd.src2, cmd.src3, cmd.dst, cmd.dst2)),
               state.turn, state.row_pass, lanes, data_width, fn_lanes, latency,
               write_latency, burst_gap, write_store)
        if key not in _REPEAT_CACHE:
            after = VaState(state.turn, state.row_pass)
            cycles = va_cycles(cmd, lanes=lanes, data_width=data_width, fn_lanes=fn_lanes,
                               latency=latency, state=after, write_latency=write_latency,
                               burst_gap=burst_gap, write_store=write_store)
            _REPEAT_CACHE[key] = cycles, after
        cycles, after = _REPEAT_CACHE[key]
        state = VaState(after.turn, after.row_pass)
        total += cycles
    return total
