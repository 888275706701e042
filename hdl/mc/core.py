"""The memory controller's core: channels, arbitration, and the memory port's paths."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.codes import ErrorCode
from hdl.common.credit import check
from hdl.common.memport import MemPortSignature

from .arbiter import ClassArbiter
from .channel import ID_BITS, ClientChannelSignature, ResponseLayout
from .frontend import MAX_BURST, ChannelFrontend
from .prefetch import LINE_BYTES, PrefetchBuffer, check_lines

__all__ = ["McCore", "check_parameters", "OUTSTANDING"]

# Read and write bursts in flight on the memory port at most: enough to cover the
# memory's latency with short bursts, few enough that a class's priority still shows.
OUTSTANDING = 8


def check_parameters(channels, data_width, age_limit):
    if not isinstance(channels, int) or not 1 <= channels <= 8:
        raise ValueError(f"channels must be an integer in 1..8, not {channels!r}")
    if data_width not in (64, 128, 256, 512):
        raise ValueError(f"data width must be 64, 128, 256 or 512 bits, not {data_width!r}")
    if not isinstance(age_limit, int) or not 1 <= age_limit <= 255:
        raise ValueError(f"age_limit must be an integer in 1..255, not {age_limit!r}")


def _at_least_1_bit(count):
    """``range(count)``, but never 0 bits wide (a 0-bit field becomes a ``[-1:0]``
    vector in the Verilog, which Verilator refuses): 1 channel, 512-bit bus."""
    return range(max(count, 2))


class ReadKind(enum.Enum, shape=2):
    """What the read-tag queue's head is: words from memory for a channel, a prefetch
    fill, or a hit served from the prefetch buffer."""
    DEMAND = 0
    FILL = 1
    HIT = 2


class _ReadTag(data.StructLayout):
    def __init__(self, channels, lines, words_per_line):
        super().__init__({"kind": ReadKind, "chan": _at_least_1_bit(channels), "last": 1,
                          "id": ID_BITS, "addr": 32, "slot": range(lines),
                          "word": _at_least_1_bit(words_per_line),
                          "beats": range(MAX_BURST + 1)})


class _WriteTag(data.StructLayout):
    def __init__(self, channels, lanes):
        super().__init__({"chan": _at_least_1_bit(channels), "beats": range(MAX_BURST + 1),
                          "first": 1, "last": 1, "first_strb": lanes, "last_strb": lanes})


class _AckTag(data.StructLayout):
    def __init__(self, channels):
        super().__init__({"chan": _at_least_1_bit(channels), "last": 1, "id": ID_BITS,
                          "addr": 32})


def _fifo(m, name, layout, depth):
    fifo = SyncFIFOBuffered(width=data.Layout.cast(layout).size, depth=depth)
    m.submodules[name] = fifo
    return fifo, data.View(layout, fifo.w_data), data.View(layout, fifo.r_data)


class McCore(wiring.Component):
    """``channels`` client channels onto one memory port.

    Members: ``chans`` (array of ``In(ClientChannelSignature)``: the MC's side),
    ``mem`` (``Out(MemPortSignature)``: the memory requester), ``error`` / ``error_addr``
    (a refused request or a memory error, pulsed; one a cycle), ``busy``, and event
    counts for the counters (``ev_read``, ``ev_write``: requests taken; ``ev_burst``: a
    read burst issued; ``ev_error``: error answers, all of them).

    Paths: each channel's :class:`ChannelFrontend` offers bursts; the
    :class:`ClassArbiter` picks one a cycle when the port's queues have room; a read
    burst's address goes to ``rd_req`` and a tag to the read-tag queue, whose head routes
    the returning words to their channel; a write burst's address goes to ``wr_req``, a
    tag to the W queue (whose head pulls the burst's words from its channel and sets the
    strobes) and to the acknowledgement queue (whose head routes ``wr_resp``). The memory
    answers in order (one AXI ID), so the queues' order is the answers' order.
    """

    def __init__(self, channels=4, data_width=128, *, age_limit=8, prefetch_lines=32,
                 req_depth=4, wdata_depth=16, resp_depth=64, checks=False):
        check_parameters(channels, data_width, age_limit)
        check_lines(prefetch_lines)
        self.channels, self.data_width, self.age_limit = channels, data_width, age_limit
        self.prefetch_lines = prefetch_lines
        self._checks = checks
        self.channel_signature = ClientChannelSignature(data_width, req_depth, wdata_depth,
                                                        resp_depth)
        super().__init__({
            "chans": In(self.channel_signature).array(channels),
            "mem": Out(MemPortSignature(data_width)),
            "error": Out(ErrorCode),
            "error_addr": Out(32),
            "busy": Out(1),
            "ev_read": Out(range(channels + 1)),
            "ev_write": Out(range(channels + 1)),
            "ev_burst": Out(1),
            "ev_error": Out(range(channels + 3)),
            "window": In(32),
            "window_bad": Out(1),
            "ev_hit": Out(1),
            "ev_miss": Out(1),
            "ev_prefetch": Out(1),
            "ev_evicted": Out(range(prefetch_lines + 2)),
        })

    def elaborate(self, platform):
        m = Module()
        n, dw = self.channels, self.data_width
        lanes = dw // 8
        shift = exact_log2(lanes)
        fes = []
        for i in range(n):
            fe = ChannelFrontend(self.channel_signature, checks=self._checks)
            m.submodules[f"chan{i}"] = fe
            wiring.connect(m, wiring.flipped(self.chans[i]), fe.chan)
            fes.append(fe)

        m.submodules.arbiter = arb = ClassArbiter(n, self.age_limit, checks=self._checks)
        wpl = max(LINE_BYTES // lanes, 1)
        rtags, rtag_w, rtag_r = _fifo(m, "rtags", _ReadTag(n, self.prefetch_lines, wpl),
                                      OUTSTANDING)
        wtags, wtag_w, wtag_r = _fifo(m, "wtags", _WriteTag(n, lanes), OUTSTANDING)
        btags, btag_w, btag_r = _fifo(m, "btags", _AckTag(n), OUTSTANDING)

        # --- Arbitration and issue.
        for i, fe in enumerate(fes):
            m.d.comb += [arb.request[i].eq(fe.burst.valid), arb.cls[i].eq(fe.burst.payload.cls)]
        burst = Signal.like(fes[0].burst.payload)
        for i, fe in enumerate(fes):
            with m.If(arb.index == i):
                m.d.comb += burst.eq(fe.burst.payload)
        rd, wr = self.mem.rd_req, self.mem.wr_req
        # A grant is taken only when every queue of its path has room, so the address
        # handshake never holds up the arbiter's state.
        can_read = rtags.w_rdy & (~rd.valid | rd.ready)
        can_write = wtags.w_rdy & btags.w_rdy & (~wr.valid | wr.ready)
        # A prefetch fill competes for the read path: when both want it, they take turns
        # (so the prefetcher keeps pace with a demand stream), and a fill never goes while
        # a write is in flight (its data could be older than the write's). A write is in
        # flight from its grant (which excludes a fill in that cycle) until its last
        # burst's acknowledgement leaves the acknowledgement queue: the queue's level
        # counts it from the next cycle on, where its ``r_rdy`` would only show it two
        # cycles after the grant.
        pf = self._prefetch(m, lanes)
        want, advance = Signal(name="want"), Signal(name="advance")
        fill_go, fill_turn = Signal(name="fill_go"), Signal(name="fill_turn")
        fill_ok = pf.fill.valid & can_read & (btags.level == 0)
        m.d.comb += [
            want.eq((arb.grant != 0) & Mux(burst.write, can_write, can_read)),
            fill_go.eq(fill_ok & (fill_turn | ~want)),
            advance.eq(want & ~fill_go),
            arb.advance.eq(advance),
        ]
        with m.If(fill_ok & want):
            m.d.sync += fill_turn.eq(~fill_turn)
        for i, fe in enumerate(fes):
            m.d.comb += fe.burst.ready.eq(advance & arb.grant[i])

        with m.If(rd.ready):
            m.d.sync += rd.valid.eq(0)
        with m.If(wr.ready):
            m.d.sync += wr.valid.eq(0)
        hit = Signal()
        m.d.comb += [pf.look_line.eq(burst.last_line), hit.eq(pf.look_hit & burst.single & pf.on)]
        with m.If(advance & ~burst.write):
            m.d.comb += [rtags.w_en.eq(1), rtag_w.chan.eq(arb.index), rtag_w.last.eq(burst.last),
                         rtag_w.id.eq(burst.id), rtag_w.addr.eq(burst.addr),
                         rtag_w.slot.eq(pf.look_slot), rtag_w.word.eq(burst.word),
                         rtag_w.beats.eq(burst.beats),
                         pf.trigger.eq(burst.first), pf.trigger_addr.eq(burst.word << shift),
                         pf.trigger_last_line.eq(burst.last_line)]
            with m.If(hit):
                m.d.comb += [rtag_w.kind.eq(ReadKind.HIT), pf.hit.eq(1), self.ev_hit.eq(1)]
            with m.Else():
                m.d.sync += [rd.valid.eq(1), rd.payload.addr.eq(burst.word << shift),
                             rd.payload.len.eq(burst.beats - 1)]
                m.d.comb += [rtag_w.kind.eq(ReadKind.DEMAND), self.ev_burst.eq(1),
                             self.ev_miss.eq(burst.first)]
        with m.If(fill_go):
            m.d.comb += [pf.fill.ready.eq(1), rtags.w_en.eq(1), rtag_w.kind.eq(ReadKind.FILL),
                         rtag_w.slot.eq(pf.fill.payload.slot), rtag_w.beats.eq(wpl),
                         rtag_w.addr.eq(pf.fill.payload.line << 6), self.ev_burst.eq(1)]
            m.d.sync += [rd.valid.eq(1), rd.payload.addr.eq(pf.fill.payload.line << 6),
                         rd.payload.len.eq(wpl - 1)]
        with m.If(advance & burst.write):
            first_byte = burst.word << shift
            m.d.comb += [pf.inval.eq(1), pf.inval_first.eq(first_byte >> 6),
                         pf.inval_last.eq(((burst.word + burst.beats) << shift) - 1 >> 6)]
        with m.If(advance & burst.write):
            m.d.sync += [wr.valid.eq(1), wr.payload.addr.eq(burst.word << shift),
                         wr.payload.len.eq(burst.beats - 1)]
            m.d.comb += [
                wtags.w_en.eq(1), wtag_w.chan.eq(arb.index), wtag_w.beats.eq(burst.beats),
                wtag_w.first.eq(burst.first), wtag_w.last.eq(burst.last),
                wtag_w.first_strb.eq(burst.first_strb), wtag_w.last_strb.eq(burst.last_strb),
                btags.w_en.eq(1), btag_w.chan.eq(arb.index), btag_w.last.eq(burst.last),
                btag_w.id.eq(burst.id), btag_w.addr.eq(burst.addr),
            ]

        if self._checks:
            # Counted apart from the queues: write bursts granted and not acknowledged.
            unacked = Signal(range(OUTSTANDING + 1), name="unacked_writes")
            m.d.sync += unacked.eq(unacked + (advance & burst.write)
                                   - (self.mem.wr_resp.valid & self.mem.wr_resp.ready))
            check(m, ~(fill_go & (unacked != 0)), "a prefetch fill while a write is in flight")
        self._read_path(m, fes, rtags, rtag_r)
        self._write_path(m, fes, wtags, wtag_r)
        self._ack_path(m, fes, btags, btag_r)

        # --- Events and state for the registers.
        # One error reported per cycle: a refusal first, then read, then write errors
        # (a test of ERROR sees the last; each channel gets all of its own answers).
        sources = [(fe.error, fe.error_addr) for fe in fes] + [self._read_error, self._ack_error]
        failed = [code != ErrorCode.NONE for code, _ in sources]
        m.d.comb += self.ev_error.eq(sum(failed))
        for k, (code, addr) in enumerate(sources):
            earlier = Cat(failed[:k]).any() if k else Const(0)
            with m.If(failed[k] & ~earlier):
                m.d.comb += [self.error.eq(code), self.error_addr.eq(addr)]
        m.d.comb += [
            self.ev_read.eq(sum(fe.chan.req.valid & ~fe.chan.req.payload.op for fe in fes)),
            self.ev_write.eq(sum(fe.chan.req.valid & fe.chan.req.payload.op for fe in fes)),
            self.busy.eq(Cat(fe.busy for fe in fes).any() | rtags.r_rdy | btags.r_rdy),
        ]
        return m

    def _prefetch(self, m, lanes):
        m.submodules.prefetch = pf = PrefetchBuffer(self.prefetch_lines, self.data_width)
        m.d.comb += [pf.window.eq(self.window), self.window_bad.eq(pf.window_bad),
                     self.ev_prefetch.eq(pf.ev_prefetch), self.ev_evicted.eq(pf.ev_evicted)]
        self._pf = pf
        return pf

    def _read_path(self, m, fes, rtags, tag):
        """The read-tag queue's head: words from memory to a channel (DEMAND) or into the
        prefetch buffer (FILL), or a hit's words from the buffer (HIT: one a cycle, each
        delivered the cycle after its buffer read, so a DEMAND word waits for the last)."""
        r, pf = self.mem.rd_resp, self._pf
        item = Signal(ResponseLayout(self.data_width))
        beat = Signal(range(MAX_BURST))
        kind = tag.kind
        head = rtags.r_rdy
        # The hit word read last cycle, delivered now.
        hit_valid, hit_chan = Signal(), Signal.like(tag.chan)
        hit_last, hit_id = Signal(), Signal.like(tag.id)
        m.d.sync += hit_valid.eq(0)
        with m.If(head & (kind == ReadKind.HIT)):
            final = beat == tag.beats - 1
            m.d.comb += [pf.rd_slot.eq(tag.slot), pf.rd_word.eq(tag.word + beat)]
            m.d.sync += [hit_valid.eq(1), hit_chan.eq(tag.chan), hit_last.eq(final & tag.last),
                         hit_id.eq(tag.id), beat.eq(Mux(final, 0, beat + 1))]
            with m.If(final):
                m.d.comb += [rtags.r_en.eq(1), pf.release.eq(1), pf.release_slot.eq(tag.slot)]
        fill_failed = Signal()
        with m.If(head & (kind == ReadKind.FILL)):
            m.d.comb += [r.ready.eq(1), pf.fill_word.eq(r.valid), pf.fill_slot.eq(tag.slot),
                         pf.fill_beat.eq(beat), pf.fill_data.eq(r.payload.data),
                         pf.fill_word_error.eq(r.payload.error)]
            with m.If(r.valid):
                m.d.sync += [beat.eq(Mux(r.payload.last, 0, beat + 1)),
                             fill_failed.eq(~r.payload.last & (fill_failed | r.payload.error))]
                with m.If(r.payload.last):
                    m.d.comb += [rtags.r_en.eq(1), pf.fill_done.eq(1),
                                 pf.fill_error.eq(fill_failed | r.payload.error)]
        demand = head & (kind == ReadKind.DEMAND) & ~hit_valid
        with m.If(demand):
            m.d.comb += [r.ready.eq(1), rtags.r_en.eq(r.valid & r.payload.last)]
        with m.If(hit_valid):
            m.d.comb += [
                item.data.eq(pf.rd_data), item.last.eq(hit_last), item.id.eq(hit_id),
                item.error.eq(Mux(pf.rd_error, ErrorCode.AXI_READ_ERROR, ErrorCode.NONE)),
            ]
        with m.Else():
            m.d.comb += [
                item.data.eq(r.payload.data), item.last.eq(r.payload.last & tag.last),
                item.error.eq(Mux(r.payload.error, ErrorCode.AXI_READ_ERROR, ErrorCode.NONE)),
                item.id.eq(tag.id),
            ]
        self._read_item = item
        self._read_valid = hit_valid | (demand & r.valid)
        self._read_chan = Mux(hit_valid, hit_chan, tag.chan)
        code = Signal(ErrorCode)
        failed = (demand & r.valid & r.payload.error) | (hit_valid & pf.rd_error)
        m.d.comb += code.eq(Mux(failed, ErrorCode.AXI_READ_ERROR, ErrorCode.NONE))
        self._read_error = (code, tag.addr)

    def _write_path(self, m, fes, wtags, tag):
        """The W queue's head pulls its burst's words from its channel."""
        w = self.mem.wr_data
        beat = Signal(range(MAX_BURST))
        words = Signal.like(fes[0].wword.payload)
        word_valid = Signal()
        for i, fe in enumerate(fes):
            with m.If(tag.chan == i):
                m.d.comb += [words.eq(fe.wword.payload), word_valid.eq(fe.wword.valid),
                             fe.wword.ready.eq(wtags.r_rdy & w.ready)]
        final = beat == tag.beats - 1
        strb = Signal(self.data_width // 8)
        m.d.comb += strb.eq(Mux(tag.first & (beat == 0), tag.first_strb, ~0)
                            & Mux(tag.last & final, tag.last_strb, ~0))
        m.d.comb += [
            w.valid.eq(wtags.r_rdy & word_valid), w.payload.data.eq(words.data),
            w.payload.strb.eq(strb), w.payload.last.eq(final),
        ]
        with m.If(w.valid & w.ready):
            m.d.sync += beat.eq(Mux(final, 0, beat + 1))
            m.d.comb += wtags.r_en.eq(final)

    def _ack_path(self, m, fes, btags, tag):
        """Write responses → one acknowledgement per request, on its last burst's."""
        b = self.mem.wr_resp
        failed = Signal(self.channels)   # a burst of the channel's current write failed
        item = Signal(ResponseLayout(self.data_width))
        bad = Signal()
        m.d.comb += [
            bad.eq(b.payload.error | failed.bit_select(tag.chan, 1)),
            item.last.eq(1), item.id.eq(tag.id),
            item.error.eq(Mux(bad, ErrorCode.AXI_WRITE_ERROR, ErrorCode.NONE)),
            b.ready.eq(btags.r_rdy),
            btags.r_en.eq(b.valid),
        ]
        for i in range(self.channels):
            with m.If(b.valid & btags.r_rdy & (tag.chan == i)):
                m.d.sync += failed[i].eq(~tag.last & bad)
        code = Signal(ErrorCode)
        m.d.comb += code.eq(Mux(b.valid & btags.r_rdy & b.payload.error,
                                ErrorCode.AXI_WRITE_ERROR, ErrorCode.NONE))
        self._ack_error = (code, tag.addr)
        ack_valid = b.valid & btags.r_rdy & tag.last
        for i, fe in enumerate(fes):
            from_read = self._read_valid & (self._read_chan == i)
            from_ack = ack_valid & (tag.chan == i)
            m.d.comb += [fe.reserved.valid.eq(from_read | from_ack),
                         fe.reserved.payload.eq(Mux(from_read, self._read_item, item))]
            if self._checks:
                check(m, ~(from_read & from_ack), "read and write answers collide")
