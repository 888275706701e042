"""One client channel's end inside the MC: credit buffers, request checks, burst split."""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.codes import ErrorCode
from hdl.common.credit import CreditReceiver, CreditSender, check
from spec.codes import McOp
from spec.memory import PAGE_BYTES, PHYS_ADDR_BITS

from .channel import (
    CLASS_BITS,
    ID_BITS,
    LENGTH_BITS,
    ClientChannelSignature,
    RequestLayout,
    ResponseLayout,
    WriteWordLayout,
)

__all__ = ["MAX_BURST", "BurstLayout", "ChannelFrontend"]

MAX_BURST = 16     # beats per AXI burst at most: bounds every arbitration slot


class BurstLayout(data.StructLayout):
    """A burst a channel asks the arbiter for. ``word``: bus-word address; ``beats``
    1..MAX_BURST; ``first`` / ``last``: the request's first / last burst; ``first_strb``
    / ``last_strb``: byte enables of the request's first / last word (writes); ``addr``:
    the request's address, low 32 bits; ``single``: a read whose bytes all lie in one
    64-byte line and whose words fit in the client's response buffer (it is then issued
    as one burst, so the prefetch buffer may serve it);
    ``last_line``: the line of the request's last byte."""

    def __init__(self, data_width):
        lanes = data_width // 8
        super().__init__({
            "write": 1, "word": PHYS_ADDR_BITS - exact_log2(lanes), "beats": range(MAX_BURST + 1),
            "first": 1, "last": 1, "first_strb": lanes, "last_strb": lanes,
            "id": ID_BITS, "cls": CLASS_BITS, "addr": 32,
            "single": 1, "last_line": PHYS_ADDR_BITS - 6,
        })


class ChannelFrontend(wiring.Component):
    """The MC's side of one client channel.

    Members: ``chan`` (the channel, MC side); ``burst`` (``Out`` stream: the next
    burst, valid while the channel may issue it; ``ready``: the arbiter grants it);
    ``wword`` (``Out`` stream: write words for the W path, which only takes the words of
    granted bursts); ``reserved`` (``In`` stream of response items whose credits were
    reserved at grant: read words and write acknowledgements); ``error`` (an ErrorCode,
    pulsed with ``error_addr`` when a request is refused); ``busy``.

    Rules it keeps (the channel rules of :class:`ClientChannelSignature`):

    1. Requests are taken in order, one at a time. A good one is cut into bursts of at
       most MAX_BURST words that never cross 4 KiB. A read burst is asked for only when
       the client has room for all its words (their response credits are *reserved*
       when it is granted); a write burst only when its words are already buffered here,
       so a granted burst never waits for its client; a write's first burst also
       reserves the credit of its acknowledgement. A burst is as long as the request,
       the 4 KiB boundary, MAX_BURST and the receiving buffer's depth allow: the channel
       waits for that much room rather than issue short bursts.
    2. A request whose answers come from another source than those still pending on the
       channel (AXI reads, AXI writes, or the frontend itself for refusals) waits until
       the pending ones are answered, so answers leave in request order.
    3. A refused request is answered by the frontend: after the pending answers, its
       write words (if any) are taken and dropped, then one error item.
    """

    def __init__(self, signature, *, checks=False):
        if not isinstance(signature, ClientChannelSignature):
            raise TypeError(f"signature must be a ClientChannelSignature, not {signature!r}")
        self._sig, self._checks = signature, checks
        dw = signature.data_width
        super().__init__({
            "chan": In(signature),
            "burst": Out(stream.Signature(BurstLayout(dw))),
            "wword": Out(stream.Signature(WriteWordLayout(dw))),
            "reserved": In(stream.Signature(ResponseLayout(dw))),
            "error": Out(ErrorCode),
            "error_addr": Out(32),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        sig, dw = self._sig, self._sig.data_width
        lanes = dw // 8
        shift = exact_log2(lanes)
        page_words = PAGE_BYTES // lanes

        m.submodules.req_rx = req_rx = CreditReceiver(RequestLayout(), sig.req_depth,
                                                      checks=self._checks)
        m.submodules.wdata_rx = wdata_rx = CreditReceiver(WriteWordLayout(dw), sig.wdata_depth,
                                                          checks=self._checks)
        m.submodules.resp_tx = resp_tx = CreditSender(ResponseLayout(dw), sig.resp_depth,
                                                      max_take=MAX_BURST, checks=self._checks)
        wiring.connect(m, wiring.flipped(self.chan.req), req_rx.i)
        wiring.connect(m, wiring.flipped(self.chan.wdata), wdata_rx.i)
        wiring.connect(m, resp_tx.o, wiring.flipped(self.chan.resp))

        # Answers pending on AXI: requests granted and not yet answered in full.
        pending = Signal(range(sig.resp_depth + 1))   # each holds a reserved credit
        pending_write = Signal()
        # Write words buffered here that belong to granted bursts.
        committed = Signal(range(sig.wdata_depth + 1))

        cur = Signal(RequestLayout())
        word = Signal(PHYS_ADDR_BITS - shift)
        left = Signal(range((1 << LENGTH_BITS) // lanes + 3))
        first = Signal()
        first_strb, last_strb = Signal(lanes), Signal(lanes)
        single, last_line = Signal(), Signal(PHYS_ADDR_BITS - 6)

        # Request checks: length 0, or a range past 2**48 (49-bit sum).
        head = req_rx.o.payload
        end = Signal(PHYS_ADDR_BITS + 1)
        m.d.comb += end.eq(head.addr + head.length)
        head_bad = Signal()
        m.d.comb += head_bad.eq((head.length == 0) | end[PHYS_ADDR_BITS] & (end[:PHYS_ADDR_BITS] != 0))
        head_words = Signal.like(left)
        last_byte = Signal(PHYS_ADDR_BITS + 1)
        m.d.comb += [last_byte.eq(end - 1),
                     head_words.eq((last_byte >> shift) - (head.addr >> shift) + 1)]

        # The next burst: words to the 4 KiB boundary, the room at the receiving end.
        to_page = Signal(range(page_words + 1))
        m.d.comb += to_page.eq(page_words - word[:exact_log2(page_words)])
        room = Signal(range(max(sig.resp_depth, sig.wdata_depth) + 1))
        wavail = Signal(range(sig.wdata_depth + 1))
        m.d.comb += wavail.eq(wdata_rx.level - committed)
        is_write = cur.op == McOp.WRITE
        m.d.comb += room.eq(Mux(is_write, wavail, resp_tx.credits))
        # Bursts are as long as they may be (fewer bursts, no bubbles between them): the
        # channel waits until the receiving end has room for the whole burst.
        cap = Mux(is_write, min(sig.wdata_depth, MAX_BURST), min(sig.resp_depth, MAX_BURST))
        beats = Signal(range(MAX_BURST + 1))
        m.d.comb += beats.eq(_min(m, [left, to_page, cap]))
        order_ok = (pending == 0) | (pending_write == is_write)
        ack_room = ~is_write | ~first | (resp_tx.credits != 0)
        b = self.burst.payload
        m.d.comb += [
            b.write.eq(is_write), b.word.eq(word), b.beats.eq(beats), b.first.eq(first),
            b.last.eq(beats == left), b.first_strb.eq(first_strb), b.last_strb.eq(last_strb),
            b.id.eq(cur.id), b.cls.eq(cur.cls), b.addr.eq(cur.addr[:32]),
            b.single.eq(single), b.last_line.eq(last_line),
        ]

        # Answers: reserved items pass through; the frontend's own refusals use a credit.
        own = Signal()
        own_item = Signal(ResponseLayout(dw))
        m.d.comb += [
            resp_tx.send_reserved.eq(self.reserved.valid),
            resp_tx.i.valid.eq(self.reserved.valid | own),
            resp_tx.i.payload.eq(Mux(self.reserved.valid, self.reserved.payload, own_item)),
            self.reserved.ready.eq(1),
        ]
        answered = self.reserved.valid & self.reserved.payload.last
        granted = self.burst.valid & self.burst.ready
        grant_first = granted & first
        m.d.sync += pending.eq(pending + grant_first - answered)
        with m.If(grant_first):
            m.d.sync += pending_write.eq(is_write)

        # Write words: to the W path, or dropped for a refused write.
        dropping = Signal()
        m.d.comb += [
            self.wword.valid.eq(wdata_rx.o.valid & ~dropping),
            self.wword.payload.eq(wdata_rx.o.payload),
            wdata_rx.o.ready.eq(dropping | self.wword.ready),
        ]
        taken_w = self.wword.valid & self.wword.ready
        m.d.sync += committed.eq(committed + Mux(granted & is_write, beats, 0) - taken_w)
        m.d.comb += resp_tx.take.eq(Mux(granted, Mux(is_write, first, beats), 0))

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += req_rx.o.ready.eq(1)
                with m.If(req_rx.o.valid):
                    low = head.addr[:shift]
                    top = last_byte[:shift]
                    m.d.sync += [
                        cur.eq(head), word.eq(head.addr >> shift), left.eq(head_words),
                        first.eq(1), last_line.eq(last_byte >> 6),
                        single.eq((head.op == McOp.READ) & (head.addr[6:] == last_byte[6:])
                                  & (head_words <= sig.resp_depth)),
                        first_strb.eq(Const((1 << lanes) - 1, lanes) << low),
                        last_strb.eq((Const(1, lanes + 1) << (top + 1)) - 1),
                    ]
                    with m.If(head_bad & (head.op == McOp.WRITE) & (head.length != 0)):
                        m.next = "DROP"
                    with m.Elif(head_bad):
                        m.d.sync += left.eq(0)
                        m.next = "REFUSE"
                    with m.Else():
                        m.next = "BURSTS"
            with m.State("BURSTS"):
                m.d.comb += self.burst.valid.eq(order_ok & (room >= beats) & ack_room
                                                & (left != 0))
                with m.If(granted):
                    m.d.sync += [word.eq(word + beats), left.eq(left - beats), first.eq(0)]
                    with m.If(beats == left):
                        m.next = "IDLE"
            with m.State("DROP"):
                m.d.comb += dropping.eq(pending == 0)
                with m.If(dropping & wdata_rx.o.valid):
                    m.d.sync += left.eq(left - 1)
                    with m.If(left == 1):
                        m.next = "REFUSE"
            with m.State("REFUSE"):
                m.d.comb += [own.eq((pending == 0) & (resp_tx.credits != 0)),
                             own_item.data.eq(cur.addr), own_item.last.eq(1),
                             own_item.error.eq(ErrorCode.BAD_COMMAND), own_item.id.eq(cur.id)]
                with m.If(own):
                    m.d.comb += [self.error.eq(ErrorCode.BAD_COMMAND),
                                 self.error_addr.eq(cur.addr[:32])]
                    m.next = "IDLE"
        m.d.comb += self.busy.eq((pending != 0) | req_rx.o.valid | (left != 0))
        if self._checks:
            check(m, ~(self.reserved.valid & own), "two answers in one cycle")
        return m


def _min(m, values):
    """The smallest of ``values``, as a comb signal wide enough for any of them."""
    width = max(len(value) for value in values)
    out = values[0]
    for value in values[1:]:
        tmp = Signal(width)
        m.d.comb += tmp.eq(Mux(out < value, out, value))
        out = tmp
    return out
