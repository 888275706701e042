"""The memory controller's core: channels, arbitration, and the memory port's paths."""

from amaranth.hdl import Assert, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.codes import ErrorCode
from hdl.common.memport import MemPortSignature

from .arbiter import ClassArbiter
from .channel import ID_BITS, ClientChannelSignature, ResponseLayout
from .frontend import MAX_BURST, ChannelFrontend

__all__ = ["McCore", "check_parameters", "OUTSTANDING"]

OUTSTANDING = 16   # read and write bursts in flight on the memory port at most


def check_parameters(channels, data_width, age_limit):
    if not isinstance(channels, int) or not 1 <= channels <= 8:
        raise ValueError(f"channels must be an integer in 1..8, not {channels!r}")
    if data_width not in (64, 128, 256, 512):
        raise ValueError(f"data width must be 64, 128, 256 or 512 bits, not {data_width!r}")
    if not isinstance(age_limit, int) or not 1 <= age_limit <= 255:
        raise ValueError(f"age_limit must be an integer in 1..255, not {age_limit!r}")


class _ReadTag(data.StructLayout):
    def __init__(self, channels):
        super().__init__({"chan": range(channels), "last": 1, "id": ID_BITS, "addr": 32})


class _WriteTag(data.StructLayout):
    def __init__(self, channels, lanes):
        super().__init__({"chan": range(channels), "beats": range(MAX_BURST + 1),
                          "first": 1, "last": 1, "first_strb": lanes, "last_strb": lanes})


class _AckTag(data.StructLayout):
    def __init__(self, channels):
        super().__init__({"chan": range(channels), "last": 1, "id": ID_BITS, "addr": 32})


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

    def __init__(self, channels=4, data_width=128, *, age_limit=8, req_depth=4,
                 wdata_depth=16, resp_depth=32, checks=False):
        check_parameters(channels, data_width, age_limit)
        self.channels, self.data_width, self.age_limit = channels, data_width, age_limit
        self._checks = checks
        self.channel_signature = ClientChannelSignature(data_width, req_depth, wdata_depth,
                                                        resp_depth)
        super().__init__({
            "chans": In(self.channel_signature).array(channels),
            "mem": Out(MemPortSignature(data_width)),
            "error": Out(8),
            "error_addr": Out(32),
            "busy": Out(1),
            "ev_read": Out(range(channels + 1)),
            "ev_write": Out(range(channels + 1)),
            "ev_burst": Out(1),
            "ev_error": Out(range(channels + 3)),
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
        rtags, rtag_w, rtag_r = _fifo(m, "rtags", _ReadTag(n), OUTSTANDING)
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
        advance = Signal()
        m.d.comb += [
            advance.eq((arb.grant != 0) & Mux(burst.write, can_write, can_read)),
            arb.advance.eq(advance),
        ]
        for i, fe in enumerate(fes):
            m.d.comb += fe.burst.ready.eq(advance & arb.grant[i])

        with m.If(rd.ready):
            m.d.sync += rd.valid.eq(0)
        with m.If(wr.ready):
            m.d.sync += wr.valid.eq(0)
        with m.If(advance & ~burst.write):
            m.d.sync += [rd.valid.eq(1), rd.payload.addr.eq(burst.word << shift),
                         rd.payload.len.eq(burst.beats - 1)]
            m.d.comb += [rtags.w_en.eq(1), rtag_w.chan.eq(arb.index), rtag_w.last.eq(burst.last),
                         rtag_w.id.eq(burst.id), rtag_w.addr.eq(burst.addr),
                         self.ev_burst.eq(1)]
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

        self._read_path(m, fes, rtags, rtag_r)
        self._write_path(m, fes, wtags, wtag_r)
        self._ack_path(m, fes, btags, btag_r)

        # --- Events and state for the registers.
        # One error reported per cycle: a refusal first, then read, then write errors
        # (a test of ERROR sees the last; each channel gets all of its own answers).
        sources = [(fe.error, fe.error_addr) for fe in fes] + [self._read_error, self._ack_error]
        m.d.comb += self.ev_error.eq(sum((code != 0) for code, _ in sources))
        for k, (code, addr) in enumerate(sources):
            earlier = Cat(c != 0 for c, _ in sources[:k]).any() if k else Const(0)
            with m.If((code != 0) & ~earlier):
                m.d.comb += [self.error.eq(code), self.error_addr.eq(addr)]
        m.d.comb += [
            self.ev_read.eq(sum(fe.chan.req.valid & ~fe.chan.req.payload.op for fe in fes)),
            self.ev_write.eq(sum(fe.chan.req.valid & fe.chan.req.payload.op for fe in fes)),
            self.busy.eq(Cat(fe.busy for fe in fes).any() | rtags.r_rdy | btags.r_rdy),
        ]
        return m

    def _read_path(self, m, fes, rtags, tag):
        """Returning read words → the channel of the read-tag queue's head."""
        r = self.mem.rd_resp
        item = Signal(ResponseLayout(self.data_width))
        m.d.comb += [
            item.data.eq(r.payload.data), item.last.eq(r.payload.last & tag.last),
            item.error.eq(Mux(r.payload.error, ErrorCode.AXI_READ_ERROR, ErrorCode.NONE)),
            item.id.eq(tag.id),
            r.ready.eq(rtags.r_rdy),
            rtags.r_en.eq(r.valid & r.ready & r.payload.last),
        ]
        self._read_item, self._read_valid, self._read_chan = item, r.valid & rtags.r_rdy, tag.chan
        code = Signal(8)
        m.d.comb += code.eq(Mux(r.valid & r.ready & r.payload.error, ErrorCode.AXI_READ_ERROR, 0))
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
        code = Signal(8)
        m.d.comb += code.eq(Mux(b.valid & btags.r_rdy & b.payload.error,
                                ErrorCode.AXI_WRITE_ERROR, 0))
        self._ack_error = (code, tag.addr)
        ack_valid = b.valid & btags.r_rdy & tag.last
        for i, fe in enumerate(fes):
            from_read = self._read_valid & (self._read_chan == i)
            from_ack = ack_valid & (tag.chan == i)
            m.d.comb += [fe.reserved.valid.eq(from_read | from_ack),
                         fe.reserved.payload.eq(Mux(from_read, self._read_item, item))]
            if self._checks:
                m.d.comb += Assert(~(from_read & from_ack), "read and write answers collide")
