"""The VA's memory streams: operand reads, byte realignment, writes.

A command's operands are long byte streams (up to 128 KiB) at 48-bit physical addresses
with any element-aligned start; the VA has no TAT. So it does not use the MA's row
reader and writer (rows of at most 512 bytes behind a TAT) but these stream units, on
the same internal memory port (:class:`hdl.common.memport.MemPortSignature`).

Every stream here is a ``lib.stream`` of bus words; "aligned" words hold stream bytes
``[k·B, k·B + B)`` for a bus of B bytes.
"""

from amaranth.hdl import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.memport import BurstLayout, ReadDataLayout, WriteDataLayout, WriteRespLayout
from spec.codes import ErrorCode
from spec.memory import PAGE_BYTES, PHYS_ADDR_BITS
from spec.va import MAX_LENGTH

__all__ = ["MAX_BYTES", "MAX_BURST", "ErrorEvent", "OperandConfig", "OperandReader",
           "Realign", "StreamWriter", "words_for"]

MAX_BYTES = 4 * MAX_LENGTH  # the longest stream: 65 536 four-byte elements
MAX_BURST = 16              # bus words per burst: short bursts keep every FIFO small


class ErrorEvent(data.StructLayout):
    """A one-cycle error event: ``valid``, the ERROR code and the low 32 address bits."""
    def __init__(self):
        super().__init__({"valid": 1, "code": 8, "addr": 32})


class OperandConfig(data.StructLayout):
    """One operand stream: physical byte ``addr``, ``nbytes`` (0 = not read, at most
    ``max_bytes``)."""
    def __init__(self, max_bytes=MAX_BYTES):
        super().__init__({"addr": PHYS_ADDR_BITS, "nbytes": range(max_bytes + 1)})


def words_for(offset, nbytes, bus_bytes):
    """Bus words that bytes ``[offset, offset + nbytes)`` of aligned words touch."""
    return (offset + nbytes + bus_bytes - 1) >> exact_log2(bus_bytes)


class OperandReader(wiring.Component):
    """Reads ``n`` operand streams in interleaved bursts, each into its own FIFO.

    Rules:

    1. ``start`` (one cycle) takes ``config``; operand i's raw bus words (from the word
       holding its first byte to the one holding its last) come out on ``out<i>`` in order.
    2. A burst is issued only when its operand's FIFO has room for all of it (credits),
       so read data is never back-pressured and the operands cannot block each other.
       A credit returns when its word leaves the FIFO, so ``depth`` words must cover the
       memory latency plus a burst: 64 keeps a 128-bit bus busy at 20 cycles' latency.
       Bursts never cross 4 KiB and are at most :data:`MAX_BURST` words.
    3. An error response is reported once on ``error`` (AXI_READ_ERROR, the address of the
       burst's first byte); its words and everything after are dropped, nothing more is
       issued. ``abort`` stops issuing too. ``idle`` when nothing is in flight.
    4. ``max_bytes`` bounds an operand's length (default :data:`MAX_BYTES`).
    """

    def __init__(self, data_width, n, depth=64, max_bytes=MAX_BYTES):
        self.data_width, self.n, self.depth = data_width, n, depth
        self.bus_bytes, self.max_bytes = data_width // 8, max_bytes
        super().__init__({
            "start": In(1),
            "config": In(data.ArrayLayout(OperandConfig(max_bytes), n)),
            "rd_req": Out(stream.Signature(BurstLayout())),
            "rd_resp": In(stream.Signature(ReadDataLayout(data_width))),
            **{f"out{i}": Out(stream.Signature(data_width)) for i in range(n)},
            "error": Out(ErrorEvent()),
            "abort": In(1),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        bb, n = self.bus_bytes, self.n
        off_bits = exact_log2(bb)
        tag = data.StructLayout({"op": range(n), "addr": 32})
        m.submodules.tags = tags = ResetInserter(self.start)(
            fifo.SyncFIFOBuffered(width=tag.size, depth=8))
        stopped = Signal()
        with m.If(self.start):
            m.d.sync += stopped.eq(0)
        with m.Elif(self.abort | self.error.valid):
            m.d.sync += stopped.eq(1)

        # Per operand: next word address, words left to ask for, free FIFO slots.
        wanted = []
        for i in range(n):
            q = ResetInserter(self.start)(fifo.SyncFIFOBuffered(width=self.data_width,
                                                                depth=self.depth))
            m.submodules[f"fifo{i}"] = q
            out = getattr(self, f"out{i}")
            wiring.connect(m, q.r_stream, wiring.flipped(out))
            cfg = self.config[i]
            addr = Signal(PHYS_ADDR_BITS, name=f"addr{i}")
            first = Signal(32, name=f"first{i}")
            left = Signal(range(self.max_bytes // bb + 2), name=f"left{i}")
            credits = Signal(range(self.depth + 1), name=f"credits{i}", init=self.depth)
            room = (PAGE_BYTES - addr[:12]) >> off_bits
            length = Signal(range(MAX_BURST + 1), name=f"len{i}")
            want = Mux(left < MAX_BURST, left, MAX_BURST)
            m.d.comb += length.eq(Mux(room < want, room, want))
            wanted.append((addr, first, left, credits, length, q))
            with m.If(self.start):
                m.d.sync += [addr.eq(Cat(Const(0, off_bits), cfg.addr[off_bits:])),
                             first.eq(cfg.addr[:32]), credits.eq(self.depth),
                             left.eq(Mux(cfg.nbytes == 0, 0,
                                         words_for(cfg.addr[:off_bits], cfg.nbytes, bb)))]

        # Request: one registered burst at a time, operands in turn.
        turn = Signal(range(n))
        held = Signal()
        req = self.rd_req
        m.d.comb += req.valid.eq(held)
        with m.If(req.valid & req.ready):
            m.d.sync += held.eq(0)
        can = [(left != 0) & (credits >= length) & (length != 0)
               for (_, _, left, credits, length, _) in wanted]
        pops = [getattr(self, f"out{i}").valid & getattr(self, f"out{i}").ready for i in range(n)]
        chosen = Signal(range(n))
        any_can = Signal()
        for i in reversed(range(n)):
            with m.If(can[i]):
                m.d.comb += [chosen.eq(i), any_can.eq(1)]
        for i in range(n):                         # prefer the operand whose turn it is
            with m.If(can[i] & (turn == i)):
                m.d.comb += chosen.eq(i)
        issue = ~held & any_can & ~stopped & ~self.start & tags.w_rdy
        for i, (addr, first, left, credits, length, _) in enumerate(wanted):
            mine = issue & (chosen == i)
            with m.If(mine):
                m.d.sync += [req.payload.addr.eq(addr), req.payload.len.eq(length - 1),
                             held.eq(1), addr.eq(addr + (length << off_bits)),
                             first.eq((addr + (length << off_bits))[:32]),
                             left.eq(left - length), turn.eq((i + 1) % n)]
            with m.If(~self.start):     # start (above) refills the credits
                m.d.sync += credits.eq(credits - Mux(mine, length, 0) + pops[i])
        tag_in = Signal(tag)
        m.d.comb += [tag_in.op.eq(chosen), tags.w_data.eq(tag_in), tags.w_en.eq(issue)]
        for i, (_, first, _, _, _, _) in enumerate(wanted):
            with m.If(chosen == i):
                m.d.comb += tag_in.addr.eq(first)

        # Responses: always accepted (room was reserved), routed by the burst's tag.
        resp = self.rd_resp
        cur = Signal(tag)
        m.d.comb += [cur.eq(tags.r_data), resp.ready.eq(1)]
        take = resp.valid & tags.r_rdy
        m.d.comb += tags.r_en.eq(take & resp.payload.last)
        failed = Signal()
        with m.If(self.start):
            m.d.sync += failed.eq(0)
        with m.If(take & resp.payload.error & ~failed):
            m.d.comb += [self.error.valid.eq(1), self.error.code.eq(ErrorCode.AXI_READ_ERROR),
                         self.error.addr.eq(cur.addr)]
            m.d.sync += failed.eq(1)
        for i, (_, _, _, _, _, q) in enumerate(wanted):
            m.d.comb += [q.w_data.eq(resp.payload.data),
                         q.w_en.eq(take & (cur.op == i) & ~resp.payload.error & ~failed
                                   & ~self.abort)]
        m.d.comb += self.idle.eq(~held & ~tags.r_rdy)
        return m


class Realign(wiring.Component):
    """Shifts a word stream by a whole number of bytes.

    Output word j is ``(Cat(w[j-1], w[j]) >> 8·shift)[:width]`` (``w[-1] = 0``), where
    ``shift`` is 1..B bytes (B gives the words unchanged). ``absorb`` drops the first
    output (a reader: the first word only primes the shifter); after the last of
    ``words_in`` input words, one more output ``Cat(w[last], 0) >> 8·shift`` follows if
    fewer than ``words_out`` were produced. ``start`` (one cycle) takes the settings.
    ``max_bytes`` bounds the stream's length (default :data:`MAX_BYTES`).
    """

    def __init__(self, data_width, max_bytes=MAX_BYTES):
        self.data_width = data_width
        bb = data_width // 8
        count = range(max_bytes // bb + 3)
        super().__init__({
            "start": In(1),
            "shift": In(range(bb + 1)),
            "absorb": In(1),
            "words_in": In(count),
            "words_out": In(count),
            "i": In(stream.Signature(data_width)),
            "o": Out(stream.Signature(data_width)),
        })

    def elaborate(self, platform):
        m = Module()
        width, bb = self.data_width, self.data_width // 8
        shift = Signal(range(bb + 1))
        absorb = Signal()
        left_in = Signal.like(self.words_in)
        left_out = Signal.like(self.words_out)
        prev = Signal(width)
        with m.If(self.start):
            m.d.sync += [shift.eq(self.shift), absorb.eq(self.absorb), prev.eq(0),
                         left_in.eq(self.words_in), left_out.eq(self.words_out)]
        joined = Signal(width)
        flushing = (left_in == 0) & (left_out != 0)
        m.d.comb += joined.eq((Cat(prev, Mux(flushing, 0, self.i.payload)) >> (shift * 8))[:width])
        m.d.comb += self.o.payload.eq(joined)
        with m.If(flushing):
            m.d.comb += self.o.valid.eq(1)
        with m.Elif(absorb):
            m.d.comb += self.i.ready.eq(1)
        with m.Elif(left_in != 0):
            m.d.comb += [self.o.valid.eq(self.i.valid), self.i.ready.eq(self.o.ready)]
        with m.If(self.i.valid & self.i.ready & ~self.start):
            m.d.sync += [prev.eq(self.i.payload), left_in.eq(left_in - 1), absorb.eq(0)]
        with m.If(self.o.valid & self.o.ready & ~self.start):
            m.d.sync += left_out.eq(left_out - 1)
        return m


class StreamWriter(wiring.Component):
    """Writes an aligned word stream of ``nbytes`` bytes to physical address ``addr``.

    Rules:

    1. ``start`` (one cycle) takes ``addr`` and ``nbytes`` (1..:data:`MAX_BYTES`). Input
       words beyond ``ceil(nbytes / B)`` are taken and dropped.
    2. The words are shifted to the address's alignment; byte strobes cover exactly the
       stream's bytes. A burst (at most :data:`MAX_BURST` words, never crossing 4 KiB) is
       issued only when all of its data waits in the writer's FIFO, so a burst, once
       issued, completes.
    3. An error response is reported once on ``error`` (AXI_WRITE_ERROR, the burst's first
       byte address); after it, or ``abort``, no new burst starts. ``done`` when every
       byte is written and answered; ``idle`` when no burst is in flight.
    """

    def __init__(self, data_width, depth=32):
        self.data_width, self.depth = data_width, depth
        self.bus_bytes = data_width // 8
        super().__init__({
            "start": In(1),
            "addr": In(PHYS_ADDR_BITS),
            "nbytes": In(range(MAX_BYTES + 1)),
            "i": In(stream.Signature(data_width)),
            "wr_req": Out(stream.Signature(BurstLayout())),
            "wr_data": Out(stream.Signature(WriteDataLayout(data_width))),
            "wr_resp": In(stream.Signature(WriteRespLayout())),
            "error": Out(ErrorEvent()),
            "abort": In(1),
            "done": Out(1),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        q, word, offset, count = self._words(m)
        self._bursts(m, q, word, offset, count)
        return m

    def _words(self, m):
        """The input words realigned to the address, with their byte strobes, into the
        FIFO ``q`` (entries of ``word``); returns (q, word, the address's offset in a
        bus word, the counters' shape)."""
        width, bb = self.data_width, self.bus_bytes
        off_bits = exact_log2(bb)
        count = range(MAX_BYTES // bb + 3)
        offset = self.addr[:off_bits]
        m.submodules.realign = realign = Realign(width)
        word = data.StructLayout({"data": width, "strb": bb})
        m.submodules.q = q = ResetInserter(self.start)(
            fifo.SyncFIFOBuffered(width=word.size, depth=self.depth))

        # Input words past the stream's end are dropped before the realigner.
        left_in = Signal(count)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += left_in.eq(left_in - (left_in != 0))
        keep = left_in != 0
        m.d.comb += [realign.i.payload.eq(self.i.payload),
                     realign.i.valid.eq(self.i.valid & keep),
                     self.i.ready.eq(Mux(keep, realign.i.ready, 1)),
                     realign.start.eq(self.start),
                     realign.shift.eq(bb - offset), realign.absorb.eq(0),
                     realign.words_in.eq(words_for(0, self.nbytes, bb)),
                     realign.words_out.eq(words_for(offset, self.nbytes, bb))]

        # Strobes: the first word starts at the offset, the last ends with the stream.
        first_mask = Signal(bb)
        last_mask = Signal(bb)
        total = Signal(count)
        index = Signal(count)
        with m.If(self.start):
            end = (offset + self.nbytes - 1)[:off_bits]
            m.d.sync += [
                left_in.eq(words_for(0, self.nbytes, bb)),
                first_mask.eq(~((Const(1, bb + 1) << offset) - 1)),
                last_mask.eq((Const(1, bb + 1) << (end + 1)) - 1),
                total.eq(words_for(offset, self.nbytes, bb)), index.eq(0),
            ]
        strb = Signal(bb)
        m.d.comb += strb.eq(Mux(index == 0, first_mask, ~0) & Mux(index == total - 1, last_mask, ~0))
        entry = Signal(word)
        m.d.comb += [entry.data.eq(realign.o.payload), entry.strb.eq(strb),
                     q.w_data.eq(entry), q.w_en.eq(realign.o.valid),
                     realign.o.ready.eq(q.w_rdy)]
        with m.If(realign.o.valid & realign.o.ready):
            m.d.sync += index.eq(index + 1)
        return q, word, offset, count

    def _bursts(self, m, q, word, offset, count):
        """Bursts from the FIFO (rule 2), their responses, errors, ``done`` and ``idle``."""
        bb = self.bus_bytes
        off_bits = exact_log2(bb)
        # Bursts.
        addr = Signal(PHYS_ADDR_BITS)
        first = Signal(32)
        to_send = Signal(count)
        burst_left = Signal(range(MAX_BURST + 1))
        outstanding = Signal(range(MAX_BYTES // bb + 3))
        stopped = Signal()
        room = (PAGE_BYTES - addr[:12]) >> off_bits
        length = Signal(range(MAX_BURST + 1))
        want = Mux(to_send < MAX_BURST, to_send, MAX_BURST)
        m.d.comb += length.eq(Mux(room < want, room, want))
        with m.If(self.start):
            m.d.sync += [addr.eq(Cat(Const(0, off_bits), self.addr[off_bits:])),
                         first.eq(self.addr[:32]), stopped.eq(0),
                         to_send.eq(words_for(offset, self.nbytes, bb))]
        with m.Elif(self.abort | self.error.valid):
            m.d.sync += stopped.eq(1)
        # First-byte addresses of the bursts in flight, for error reports.
        m.submodules.bursts = bursts = ResetInserter(self.start)(
            fifo.SyncFIFOBuffered(width=32, depth=8))
        out_word = Signal(word)
        m.d.comb += out_word.eq(q.r_data)
        issued = Signal()
        responded = Signal()
        with m.FSM():
            with m.State("ADDRESS"):
                ready = ((to_send != 0) & (q.level >= length) & ~stopped & ~self.start
                         & bursts.w_rdy)
                m.d.comb += [self.wr_req.valid.eq(ready),
                             self.wr_req.payload.addr.eq(addr),
                             self.wr_req.payload.len.eq(length - 1)]
                with m.If(self.wr_req.valid & self.wr_req.ready):
                    m.d.comb += issued.eq(1)
                    m.d.sync += [burst_left.eq(length), addr.eq(addr + (length << off_bits)),
                                 to_send.eq(to_send - length)]
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [self.wr_data.valid.eq(q.r_rdy),
                             self.wr_data.payload.data.eq(out_word.data),
                             self.wr_data.payload.strb.eq(out_word.strb),
                             self.wr_data.payload.last.eq(burst_left == 1),
                             q.r_en.eq(self.wr_data.ready)]
                with m.If(self.wr_data.valid & self.wr_data.ready):
                    m.d.sync += burst_left.eq(burst_left - 1)
                    with m.If(burst_left == 1):
                        m.next = "ADDRESS"
        m.d.comb += [bursts.w_data.eq(first), bursts.w_en.eq(issued)]
        with m.If(issued):
            m.d.sync += first.eq((addr + (length << off_bits))[:32])
        m.d.comb += [self.wr_resp.ready.eq(1), bursts.r_en.eq(self.wr_resp.valid),
                     responded.eq(self.wr_resp.valid)]
        m.d.sync += outstanding.eq(outstanding + issued - responded)
        failed = Signal()
        with m.If(self.start):
            m.d.sync += failed.eq(0)
        with m.If(self.wr_resp.valid & self.wr_resp.payload.error & ~failed):
            m.d.comb += [self.error.valid.eq(1), self.error.code.eq(ErrorCode.AXI_WRITE_ERROR),
                         self.error.addr.eq(bursts.r_data)]
            m.d.sync += failed.eq(1)
        m.d.comb += [self.idle.eq((outstanding == 0) & ~issued),
                     self.done.eq((to_send == 0) & (outstanding == 0) & ~issued & ~failed
                                  & ~self.start)]
