"""The memory-side network interface: memory packets from the mesh onto two MC client
channels (one for reads, one for writes), and the MC's answers back as packets.

Packet formats: :mod:`hdl.tile.packets`; the credit scheme: :mod:`hdl.tile.ni`.

1. Input: one buffer of ``credits`` flits per requester, shared (each requester holds
   ``credits`` credits of it), so ``eject`` always finds room. Flits are taken in
   arrival order; each one taken owes its requester a credit. The debt goes back in
   the ``credits`` field of the next head flit sent to that requester, or in a CREDIT
   packet: at once when a requester is owed ``credit_batch`` or more (in the head of
   the answer that goes next if that answer is to it, else in a CREDIT packet before
   any answer), otherwise when nothing else is sent. A requester therefore never waits
   for credits while it holds fewer than ``credits - credit_batch + 1``: its packets must
   be no longer than that.
2. A READ piece becomes one MC read of its words. A WRITE chunk becomes one MC write
   per run of contiguous enabled bytes (a run ends at a disabled byte, at the chunk's
   end, or after ``run_words`` words, at most the MC's ``wdata_depth``, so the MC's write
   buffer always holds the words sent ahead of their request); a word is sent once per
   run it holds bytes of; a word with no strobe is not sent. A run's request goes after
   its last word, so with runs of half the MC's buffer one run fills it while the one
   before drains to the memory: a stream of writes keeps a word a cycle (runs as long
   as the buffer stop at each request until the MC's credits come back).
3. Reads and writes go to separate MC channels, so neither waits for the other's
   answers (an MC channel serves requests answered by different paths one after the
   other; a block's memory port orders its reads and its writes only among themselves).
   Every MC request leaves a tag (source, class, whether it ends the block's burst) in
   its channel's tag queue; each channel answers in request order, so the tags' order
   is the answers'. Packets go out one at a time, READ_DATA and WRITE_DONE taking turns
   when both are ready. A read's
   words go back as one READ_DATA packet; a write burst's MC answers are merged into one
   WRITE_DONE (``error`` if any failed), sent after its last one (at once, in order, for
   a burst with no byte enabled).

With ``checks``, simulation assertions check: no flit arrives at a full buffer (credit
conservation), every packet comes from a known requester and is well formed, no
requester is owed more than ``credits``, and the MC's read answers have the length
asked for.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.credit import CreditReceiver, CreditSender, check
from hdl.mc.channel import (
    ClientChannelSignature,
    RequestLayout,
    ResponseLayout,
    WriteWordLayout,
)
from hdl.muon.layouts import CLASS_BITS, FlitStreamSignature, flit_layout
from spec.codes import McOp, MuonVc, TrafficClass

from .ni import body_view, check_coord, check_int, head_view
from .packets import (
    MAX_CREDITS,
    MAX_PIECE,
    ReadBodyLayout,
    ReqKind,
    RespKind,
    WriteBodyLayout,
    check_ni_widths,
)

__all__ = ["MemoryNi"]


class _TagLayout(data.StructLayout):
    def __init__(self, requesters):
        super().__init__({"src": range(max(requesters, 2)), "cls": CLASS_BITS, "write": 1,
                          "last": 1, "expect": 1, "beats": range(MAX_PIECE + 1)})


def _lowest(m, bits, width, name):
    """Index of the lowest set bit of ``bits`` (``width`` if none)."""
    index = Signal(range(width + 1), name=name)
    m.d.comb += index.eq(width)
    for i in reversed(range(width)):
        with m.If(bits[i]):
            m.d.comb += index.eq(i)
    return index


class MemoryNi(wiring.Component):
    """Memory packets at the Muon node ``node`` (``eject`` in, ``inject`` out) onto the MC
    client channels ``rd_chan`` (reads) and ``wr_chan`` (writes), the client's side.

    Parameters: ``data_width``, ``flit_data_bits`` (as :class:`hdl.tile.ni.RequesterNi`),
    ``requesters`` (the nodes (x, y) whose packets it serves, 1..16 distinct, not
    ``node``), ``credits`` (flit credits each requester holds, 2..255), ``credit_batch``
    (1..credits), ``tags`` (MC requests awaiting their answer, 2..256), ``channel`` (the
    :class:`hdl.mc.channel.ClientChannelSignature` of both; by default that of
    ``data_width``), ``run_words`` (write words per MC request at most,
    1..``channel.wdata_depth``; None: half of it, at least 1).

    ``owed`` (``Out(len(requesters))``): bit i is set while the NI owes requester i any
    credit (flits of it taken whose credits have not gone back yet); all clear when the
    NI has given back every credit (the reserved commands' drain check reads it).
    """

    def __init__(self, data_width, flit_data_bits, node, requesters, *, credits=32,
                 credit_batch=8, tags=16, channel=None, run_words=None, checks=False):
        check_ni_widths(data_width, flit_data_bits)
        check_coord("node", node)
        requesters = tuple(requesters)
        if not 1 <= len(requesters) <= 16:
            raise ValueError(f"a memory NI serves 1..16 requesters, not {len(requesters)}")
        for r in requesters:
            check_coord("requester", r)
        if len(set(requesters)) != len(requesters) or node in requesters:
            raise ValueError(f"requesters must be distinct nodes other than {node}: "
                             f"{requesters!r}")
        check_int("credits", credits, 2, MAX_CREDITS)
        check_int("credit_batch", credit_batch, 1, credits)
        check_int("tags", tags, 2, 256)
        channel = ClientChannelSignature(data_width) if channel is None else channel
        if not isinstance(channel, ClientChannelSignature) or channel.data_width != data_width:
            raise ValueError(f"channel must be a ClientChannelSignature of {data_width} bits, "
                             f"not {channel!r}")
        if run_words is None:
            run_words = max(1, channel.wdata_depth // 2)
        check_int("run_words", run_words, 1, channel.wdata_depth)
        self.run_words = run_words
        self.data_width, self.flit_data_bits = data_width, flit_data_bits
        self.node, self.requesters = node, requesters
        self.credit_count, self.credit_batch, self.tags = credits, credit_batch, tags
        self.channel = channel
        self._checks = checks
        # Credits owed to each requester (``owed`` says which are not 0).
        self._debts = [Signal(range(credits + 1), name=f"owed{i}")
                       for i in range(len(requesters))]
        super().__init__({
            "eject": In(FlitStreamSignature(flit_data_bits)),
            "inject": Out(FlitStreamSignature(flit_data_bits)),
            "rd_chan": Out(channel),
            "wr_chan": Out(channel),
            "owed": Out(len(requesters)),
        })

    def elaborate(self, platform):
        m = Module()
        ch, n, checks = self.channel, len(self.requesters), self._checks
        flit = flit_layout(self.flit_data_bits)
        in_fifo = m.submodules.in_fifo = SyncFIFOBuffered(
            width=data.Layout.cast(flit).size, depth=self.credit_count * n)
        m.d.comb += [in_fifo.w_data.eq(self.eject.payload), in_fifo.w_en.eq(self.eject.valid),
                     self.eject.ready.eq(in_fifo.w_rdy)]
        tag_layout = _TagLayout(n)
        paths = {}
        for kind in ("rd", "wr"):
            chan = getattr(self, f"{kind}_chan")
            req_tx = m.submodules[f"{kind}_req_tx"] = CreditSender(RequestLayout(), ch.req_depth,
                                                                   checks=checks)
            resp_rx = m.submodules[f"{kind}_resp_rx"] = CreditReceiver(
                ResponseLayout(self.data_width), ch.resp_depth, checks=checks)
            tags = m.submodules[f"{kind}_tags"] = SyncFIFOBuffered(width=tag_layout.size,
                                                                   depth=self.tags)
            wiring.connect(m, req_tx.o, wiring.flipped(chan.req))
            wiring.connect(m, wiring.flipped(chan.resp), resp_rx.i)
            paths[kind] = (req_tx, tags, resp_rx)
        wd_tx = m.submodules.wd_tx = CreditSender(WriteWordLayout(self.data_width),
                                                  ch.wdata_depth, checks=checks)
        wiring.connect(m, wd_tx.o, wiring.flipped(self.wr_chan.wdata))
        # The read channel carries no write data.
        m.d.comb += self.rd_chan.wdata.valid.eq(0)

        owed = self._debts
        pop_src = Signal(range(max(n, 2)))
        ret_en, ret_src = Signal(), Signal(range(max(n, 2)))
        self._requests(m, flit(in_fifo.r_data), in_fifo, paths, wd_tx, tag_layout, pop_src)
        self._responses(m, paths, tag_layout, owed, ret_en, ret_src)
        popped = in_fifo.r_en & in_fifo.r_rdy
        for i, debt in enumerate(owed):
            inc = popped & (pop_src == i)
            m.d.sync += debt.eq(Mux(ret_en & (ret_src == i), 0, debt) + inc)
            m.d.comb += self.owed[i].eq(debt != 0)
            if checks:
                check(m, debt <= self.credit_count, f"requester {i} owed more than its credits")
        if checks:
            check(m, ~self.eject.valid | in_fifo.w_rdy,
                  "flit lost: a requester sent beyond its credits")
        return m

    def _source(self, m, header):
        """Index of the requester that sent ``header``'s packet, and whether it is one."""
        index, known = Signal(range(max(len(self.requesters), 2))), Signal()
        for i, (x, y) in enumerate(self.requesters):
            with m.If((header.src_x == x) & (header.src_y == y)):
                m.d.comb += [index.eq(i), known.eq(1)]
        return index, known

    def _requests(self, m, front, in_fifo, paths, wd_tx, tag_layout, pop_src):
        dw = self.data_width
        lanes, shift = dw // 8, exact_log2(dw // 8)
        cap = self.run_words
        have = in_fifo.r_rdy
        head = head_view(front, dw)
        cmd = head.cmd.req
        body = body_view(front, WriteBodyLayout(dw))
        src, known = self._source(m, head.header)
        rd_tx, rd_tags, _ = paths["rd"]
        req_tx, tag_fifo, _ = paths["wr"]
        mreq, rreq = req_tx.i.payload, rd_tx.i.payload
        tag, rtag = tag_layout(tag_fifo.w_data), tag_layout(rd_tags.w_data)

        # The write chunk being split.
        cur_src, cur_cls = Signal.like(src), Signal(CLASS_BITS)
        word, words_left = Signal.like(cmd.word), Signal(range(MAX_PIECE + 1))
        chunk_last = Signal()
        mask_reg, mask_loaded = Signal(lanes), Signal()
        run_open, run_addr = Signal(), Signal(mreq.addr.shape())
        run_bytes, run_words = Signal(mreq.length.shape()), Signal(range(cap + 1))
        m.d.comb += [mreq.id.eq(cur_src), rreq.id.eq(src), rtag.src.eq(src), tag.src.eq(cur_src),
                     wd_tx.i.payload.data.eq(body.data)]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += pop_src.eq(src)
                if self._checks:
                    check(m, ~have | (front.head & known),
                          "memory packet that is not a head from a known requester")
                with m.If(have & (cmd.kind == ReqKind.READ)):
                    m.d.comb += [rreq.op.eq(McOp.READ), rreq.addr.eq(cmd.word << shift),
                                 rreq.length.eq((cmd.count + 1) << shift),
                                 rreq.cls.eq(head.header.cls),
                                 rtag.cls.eq(head.header.cls), rtag.last.eq(cmd.last),
                                 rtag.expect.eq(1), rtag.beats.eq(cmd.count + 1)]
                    with m.If(rd_tags.w_rdy):
                        m.d.comb += [rd_tx.i.valid.eq(1), rd_tags.w_en.eq(rd_tx.i.ready),
                                     in_fifo.r_en.eq(rd_tx.i.ready)]
                    if self._checks:
                        check(m, ~have | ~front.head | front.tail, "read request framing")
                with m.Elif(have):
                    m.d.comb += in_fifo.r_en.eq(1)
                    m.d.sync += [cur_src.eq(src), cur_cls.eq(head.header.cls), word.eq(cmd.word),
                                 words_left.eq(cmd.count + 1), chunk_last.eq(cmd.last),
                                 mask_loaded.eq(0), run_open.eq(0)]
                    m.next = "WRITE"
            with m.State("WRITE"):
                m.d.comb += pop_src.eq(cur_src)
                if self._checks:
                    check(m, ~have | (~front.head & (front.tail == (words_left == 1))),
                          "write packet framing")
                mask = Signal(lanes)
                m.d.comb += mask.eq(Mux(mask_loaded, mask_reg, body.strb))
                # The run this step: from `start` (0 when it continues from the last word)
                # up to the first disabled byte `stop`.
                start = Signal(range(lanes + 1))
                m.d.comb += start.eq(Mux(run_open, 0, _lowest(m, mask, lanes, "first_on")))
                filled = Cat(mask[i] | (start > i) for i in range(lanes))
                stop = _lowest(m, ~filled, lanes, "first_off")
                in_run = Cat((start <= i) & (stop > i) for i in range(lanes))
                remaining = Signal(lanes)
                m.d.comb += remaining.eq(mask & ~in_run)
                last_word = words_left == 1
                close_only = Signal()   # the open run ended with the last word
                empty = Signal()        # nothing (left) to write in this word
                send = Signal()
                extend = Signal()       # the run goes on into the next word
                issue = Signal()
                consume = Signal()
                m.d.comb += [
                    close_only.eq(run_open & ~mask[0]),
                    empty.eq(~run_open & (mask == 0)),
                    send.eq(~close_only & ~empty),
                    extend.eq(send & (stop == lanes) & ~last_word
                              & Mux(run_open, run_words + 1 < cap, int(cap > 1))),
                    issue.eq(close_only | (send & ~extend)),
                    consume.eq(empty | (close_only & (mask == 0))
                               | (send & (extend | (remaining == 0)))),
                ]
                final = last_word & chunk_last & consume
                byte_addr = Cat(Const(0, shift), word) + start
                m.d.comb += [
                    mreq.op.eq(McOp.WRITE), mreq.cls.eq(cur_cls),
                    mreq.addr.eq(Mux(run_open, run_addr, byte_addr)),
                    mreq.length.eq(Mux(close_only, run_bytes,
                                       Mux(run_open, run_bytes + stop, stop - start))),
                    tag.cls.eq(cur_cls), tag.write.eq(1), tag.last.eq(final),
                    tag.expect.eq(issue), tag.beats.eq(0),
                ]
                go = Signal()
                m.d.comb += go.eq(have & (~issue | req_tx.i.ready) & (~send | wd_tx.i.ready)
                                  & (~(issue | (empty & final)) | tag_fifo.w_rdy))
                with m.If(go):
                    m.d.comb += [req_tx.i.valid.eq(issue), wd_tx.i.valid.eq(send),
                                 tag_fifo.w_en.eq(issue | (empty & final)),
                                 in_fifo.r_en.eq(consume)]
                    with m.If(issue):
                        m.d.sync += run_open.eq(0)
                    with m.If(extend & run_open):
                        m.d.sync += [run_bytes.eq(run_bytes + lanes), run_words.eq(run_words + 1)]
                    with m.If(extend & ~run_open):
                        m.d.sync += [run_open.eq(1), run_addr.eq(byte_addr),
                                     run_bytes.eq(lanes - start), run_words.eq(1)]
                    with m.If(consume):
                        m.d.sync += [mask_loaded.eq(0), word.eq(word + 1),
                                     words_left.eq(words_left - 1)]
                        with m.If(last_word):
                            m.next = "IDLE"
                    with m.Else():
                        m.d.sync += [mask_loaded.eq(1),
                                     mask_reg.eq(Mux(close_only, mask, remaining))]

    def _responses(self, m, paths, tag_layout, owed, ret_en, ret_src):
        dw = self.data_width
        n = len(self.requesters)
        _, rd_tags, rd_rx = paths["rd"]
        _, wr_tags, wr_rx = paths["wr"]
        rtag, wtag = tag_layout(rd_tags.r_data), tag_layout(wr_tags.r_data)
        resp, wresp = rd_rx.o, wr_rx.o
        layout = flit_layout(self.flit_data_bits)
        flit = layout(Signal(data.Layout.cast(layout).size))
        head = head_view(flit, dw)
        cmd = head.cmd.resp
        body = body_view(flit, ReadBodyLayout(dw))
        m.d.comb += [self.inject.payload.eq(flit), flit.vc.eq(MuonVc.BEST_EFFORT)]
        dst = Signal(range(max(n, 2)))
        debt = Signal(range(self.credit_count + 1))
        dst_x, dst_y = Signal.like(head.header.dst_x), Signal.like(head.header.dst_y)
        m.d.comb += ret_src.eq(dst)
        with m.Switch(dst):
            for i, (x, y) in enumerate(self.requesters):
                with m.Case(i):
                    m.d.comb += [dst_x.eq(x), dst_y.eq(y), debt.eq(owed[i])]
        owing = Cat(d >= self.credit_batch for d in owed)
        lazy = Cat(d != 0 for d in owed)
        err_acc = Signal()
        beats_left = Signal(range(MAX_PIECE + 1))
        sent = self.inject.valid & self.inject.ready
        failed, wfailed = resp.payload.error != 0, wresp.payload.error != 0
        prefer_read = Signal()          # round robin between READ_DATA and WRITE_DONE
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += [flit.head.eq(1), flit.tail.eq(1), cmd.credits.eq(debt),
                             ret_en.eq(sent),
                             head.header.src_x.eq(self.node[0]), head.header.src_y.eq(self.node[1]),
                             head.header.dst_x.eq(dst_x), head.header.dst_y.eq(dst_y)]
                read_ready = Signal()
                done_ready = Signal()
                m.d.comb += [read_ready.eq(rd_tags.r_rdy & resp.valid),
                             done_ready.eq(wr_tags.r_rdy & wtag.last
                                           & (~wtag.expect | wresp.valid))]
                # A write answer that does not end its burst is merged without a packet.
                with m.If(wr_tags.r_rdy & ~wtag.last & wresp.valid):
                    m.d.comb += [wresp.ready.eq(1), wr_tags.r_en.eq(1)]
                    m.d.sync += err_acc.eq(err_acc | wfailed)
                # The answer to go next, if any, carries its requester's whole debt in its
                # head: a CREDIT packet is urgent only for the requesters it does not go to.
                take_read = Signal()
                answer_to = Signal(n)
                m.d.comb += take_read.eq(read_ready & (prefer_read | ~done_ready))
                with m.If(take_read):
                    m.d.comb += answer_to.eq(Const(1, n) << rtag.src)
                with m.Elif(done_ready):
                    m.d.comb += answer_to.eq(Const(1, n) << wtag.src)
                urgent = Signal(n)
                m.d.comb += urgent.eq(owing & ~answer_to)
                with m.If(urgent.any()):
                    m.d.comb += [self.inject.valid.eq(1), dst.eq(_lowest(m, urgent, n, "urgent")),
                                 cmd.kind.eq(RespKind.CREDIT),
                                 head.header.cls.eq(TrafficClass.DECODE)]
                with m.Elif(take_read):
                    m.d.comb += [self.inject.valid.eq(1), dst.eq(rtag.src), flit.tail.eq(0),
                                 cmd.kind.eq(RespKind.READ_DATA), cmd.last.eq(rtag.last),
                                 head.header.cls.eq(rtag.cls)]
                    with m.If(sent):
                        m.d.sync += [beats_left.eq(rtag.beats), prefer_read.eq(0)]
                        m.next = "DATA"
                with m.Elif(done_ready):
                    m.d.comb += [self.inject.valid.eq(1), dst.eq(wtag.src),
                                 cmd.kind.eq(RespKind.WRITE_DONE), cmd.last.eq(1),
                                 cmd.error.eq(err_acc | (wtag.expect & wfailed)),
                                 head.header.cls.eq(wtag.cls)]
                    with m.If(sent):
                        m.d.comb += [wresp.ready.eq(wtag.expect), wr_tags.r_en.eq(1)]
                        m.d.sync += [err_acc.eq(0), prefer_read.eq(1)]
                with m.Elif(lazy.any()):
                    m.d.comb += [self.inject.valid.eq(1), dst.eq(_lowest(m, lazy, n, "lazy")),
                                 cmd.kind.eq(RespKind.CREDIT),
                                 head.header.cls.eq(TrafficClass.DECODE)]
            with m.State("DATA"):
                m.d.comb += [self.inject.valid.eq(resp.valid), flit.tail.eq(beats_left == 1),
                             body.data.eq(resp.payload.data), body.error.eq(failed)]
                with m.If(sent):
                    m.d.comb += resp.ready.eq(1)
                    m.d.sync += beats_left.eq(beats_left - 1)
                    with m.If(beats_left == 1):
                        m.d.comb += rd_tags.r_en.eq(1)
                        m.next = "IDLE"
                if self._checks:
                    check(m, ~sent | (resp.payload.last == (beats_left == 1)),
                          "MC read answer of another length than asked for")
