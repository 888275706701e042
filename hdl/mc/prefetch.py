"""Address-triggered prefetch (ATP): the prefetch buffer and the engine that fills it."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from spec.memory import PHYS_ADDR_BITS

__all__ = ["LINE_BYTES", "LINE_BITS", "PrefetchBuffer", "check_lines"]

LINE_BYTES = 64
LINE_BITS = PHYS_ADDR_BITS - exact_log2(LINE_BYTES)   # a line address
MIN_WINDOW, MAX_WINDOW = LINE_BYTES, 1 << 16
MAX_LOCKS = 32      # hits queued on one line at most (more than bursts in flight)


def check_lines(lines):
    if not isinstance(lines, int) or lines not in [1 << k for k in range(1, 9)]:
        raise ValueError(f"prefetch_lines must be a power of two in 2..256, not {lines!r}")


class _LineState(data.StructLayout):
    def __init__(self):
        super().__init__({"tag": LINE_BITS, "valid": 1, "pending": 1, "poisoned": 1,
                          "used": 1, "locks": range(MAX_LOCKS + 1)})


class PrefetchBuffer(wiring.Component):
    """``lines`` lines of 64 bytes, their tags, and the prefetch engine.

    Members (``line`` = byte address >> 6; ``slot`` = a line's place in the buffer):

    - ``window`` (``In(32)``): the WINDOW register; ``window_bad`` (``Out``): it is not 0
      and not a power of two in 64..65536; ``on``: neither 0 nor bad (the user serves
      hits, and the engine walks, only while ``on``).
    - Lookup, combinational: ``look_line`` → ``look_hit`` (a valid line, or one being
      filled and not poisoned: the user answers the hit after the fill) and
      ``look_slot``. ``hit`` (``In``): a hit on ``look_slot`` was queued; the line is
      locked (never replaced) until ``release`` names its slot.
    - ``trigger`` with ``trigger_addr`` (a read's first byte) and ``trigger_last_line``
      (the line of its last byte): the engine walks the lines after that one up to the
      line of ``trigger_addr + window - 1`` (at most ``lines / 2`` of them: the other
      half of the buffer holds the lines being read; never past 2**48) and asks for each
      one missing. A trigger whose walk overlaps the walk in progress extends it.
    - ``fill`` (``Out`` stream of ``{line, slot}``): a line to read from memory into
      ``slot``; ``fill_word`` (with ``fill_slot``, ``fill_beat``, ``fill_data``,
      ``fill_word_error``) stores a word, ``fill_done`` (with ``fill_error``: some word
      failed) completes the line.
    - ``inval`` with ``inval_first`` / ``inval_last`` (line range): a write was granted;
      every line it overlaps is invalidated, and fills in flight for them are poisoned
      (their data is dropped on arrival).
    - ``rd_slot``, ``rd_word`` → ``rd_data``, ``rd_error`` (next cycle): the hit read
      port.
    - Events: ``ev_prefetch`` (a fill issued), ``ev_evicted`` (lines dropped unused).

    Rules: a line is valid only when all of its words arrived without error and no write
    overlapped it since its fill was issued; the user issues no fill while a write is in
    flight on the memory port, so a valid line never holds bytes older than a write that
    has been acknowledged. Replacement is round-robin over the slots, skipping locked and
    pending ones.
    """

    def __init__(self, lines, data_width):
        check_lines(lines)
        self._lines, self._dw = lines, data_width
        self.words_per_line = LINE_BYTES // (data_width // 8)
        slot = range(lines)
        super().__init__({
            "window": In(32),
            "window_bad": Out(1), "on": Out(1),
            "look_line": In(LINE_BITS), "look_hit": Out(1), "look_slot": Out(slot),
            "hit": In(1), "release": In(1), "release_slot": In(slot),
            "trigger": In(1), "trigger_addr": In(PHYS_ADDR_BITS),
            "trigger_last_line": In(LINE_BITS),
            "fill": Out(stream.Signature(data.StructLayout({"line": LINE_BITS, "slot": slot}))),
            "fill_word": In(1), "fill_slot": In(slot),
            "fill_beat": In(range(max(self.words_per_line, 2))), "fill_data": In(data_width),
            "fill_word_error": In(1),
            "fill_done": In(1), "fill_error": In(1),
            "inval": In(1), "inval_first": In(LINE_BITS), "inval_last": In(LINE_BITS),
            "rd_slot": In(slot), "rd_word": In(range(max(self.words_per_line, 2))),
            "rd_data": Out(data_width), "rd_error": Out(1),
            "ev_prefetch": Out(1), "ev_evicted": Out(range(lines + 2)),
        })

    def elaborate(self, platform):
        m = Module()
        n, wpl = self._lines, self.words_per_line
        state = [Signal(_LineState(), name=f"line{i}") for i in range(n)]

        # Each word with the memory's error flag for it, so a hit answers as memory did.
        m.submodules.mem = mem = Memory(shape=self._dw + 1, depth=n * wpl, init=[])
        wr, rd = mem.write_port(), mem.read_port()
        word_bits = exact_log2(wpl)     # 0 on a 512-bit bus: one word a line

        def word(index):
            return index[:word_bits] if word_bits else 0

        m.d.comb += [
            wr.addr.eq(self.fill_slot * wpl + word(self.fill_beat)),
            wr.data.eq(Cat(self.fill_data, self.fill_word_error)), wr.en.eq(self.fill_word),
            rd.addr.eq(self.rd_slot * wpl + word(self.rd_word)),
            Cat(self.rd_data, self.rd_error).eq(rd.data),
        ]

        # The window: a power of two in 64..65536, or off.
        window = self.window
        power = (window & (window - 1)) == 0
        m.d.comb += self.window_bad.eq((window != 0)
                                       & (~power | (window < MIN_WINDOW) | (window > MAX_WINDOW)))
        on = self.on
        m.d.comb += on.eq((window != 0) & ~self.window_bad)

        # Lookup of a granted read: a filled line, or one whose fill is in flight and not
        # overlapped by a write since (the hit is answered after the fill, in tag order).
        for i in range(n):
            usable = state[i].valid | (state[i].pending & ~state[i].poisoned)
            with m.If(usable & (state[i].tag == self.look_line)):
                m.d.comb += [self.look_hit.eq(1), self.look_slot.eq(i)]

        # The engine: the next line to consider and the end of the walk.
        cursor, end = Signal(LINE_BITS, name="cursor"), Signal(LINE_BITS, name="end")
        start = Signal(LINE_BITS + 1)
        reach = Signal(LINE_BITS + 2)
        limit = Signal(LINE_BITS + 1)
        m.d.comb += [
            start.eq(self.trigger_last_line + 1),
            reach.eq(((self.trigger_addr + window - 1) >> 6) + 1),
            limit.eq(Mux(reach > (1 << LINE_BITS), 1 << LINE_BITS, reach)),
        ]
        walk_end = Signal(LINE_BITS + 1)
        ahead = max(n // 2, 1)
        m.d.comb += walk_end.eq(Mux(limit - start > ahead, start + ahead, limit))
        present = Signal()
        for i in range(n):
            with m.If((state[i].valid | state[i].pending) & (state[i].tag == cursor)):
                m.d.comb += present.eq(1)
        walking = on & (cursor < end)
        victim = Signal(range(n))
        v = Signal(_LineState())
        m.d.comb += v.eq(Cat(*state).word_select(victim, len(Cat(state[0]))))
        # (The user never takes a fill in a cycle where it queues a hit.)
        free = ~v.pending & (v.locks == 0)
        with m.If(walking & present):
            m.d.sync += cursor.eq(cursor + 1)
        m.d.comb += [
            self.fill.valid.eq(walking & ~present & free),
            self.fill.payload.line.eq(cursor), self.fill.payload.slot.eq(victim),
        ]
        with m.If(walking & ~present & ~free):
            m.d.sync += victim.eq(victim + 1)       # skip a slot that cannot be replaced

        evicted = []
        for i, line in enumerate(state):
            lost = Signal(name=f"lost{i}")
            evicted.append(lost)
            taken = self.fill.valid & self.fill.ready & (victim == i)
            overlap = (line.tag >= self.inval_first) & (line.tag <= self.inval_last)
            written = self.inval & overlap & (line.valid | line.pending)
            with m.If(taken):
                m.d.sync += [line.tag.eq(cursor), line.valid.eq(0), line.pending.eq(1),
                             line.poisoned.eq(0), line.used.eq(0)]
                m.d.comb += lost.eq(line.valid & ~line.used)
            with m.Elif(self.fill_done & (self.fill_slot == i)):
                ok = ~line.poisoned & ~self.fill_error & ~written
                m.d.sync += [line.pending.eq(0), line.valid.eq(ok)]
                m.d.comb += lost.eq(~ok)
            with m.Elif(written):
                m.d.sync += [line.valid.eq(0), line.poisoned.eq(line.pending)]
                m.d.comb += lost.eq(line.valid & ~line.used)
            hit_here = self.hit & (self.look_slot == i)
            released = self.release & (self.release_slot == i)
            m.d.sync += line.locks.eq(line.locks + hit_here - released)
            with m.If(hit_here):
                m.d.sync += line.used.eq(1)
        with m.If(self.fill.valid & self.fill.ready):
            m.d.sync += [cursor.eq(cursor + 1), victim.eq(victim + 1)]
        # Last, so that a trigger wins over the walk's own step in the same cycle.
        with m.If(self.trigger & on & (limit > start)):
            with m.If((start <= cursor) & (cursor <= walk_end) & (cursor < end)):
                m.d.sync += end.eq(Mux(walk_end > end, walk_end, end))
            with m.Else():
                m.d.sync += [cursor.eq(start), end.eq(walk_end)]
        m.d.comb += [self.ev_prefetch.eq(self.fill.valid & self.fill.ready),
                     self.ev_evicted.eq(sum(evicted))]
        return m
