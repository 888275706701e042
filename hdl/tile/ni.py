"""The requester-side network interface: a block's memory port onto a Muon node.

Packet formats: :mod:`hdl.tile.packets`.

**No loss, no deadlock: end-to-end credits.** Every packet is sent only when its
destination has room reserved for all of it, so every ejection port always drains and
the mesh never holds a flit that cannot move on: requests and responses cannot block
each other, though both use the best-effort VC (the reserved VC stays for RBR flows).

1. Requests: the NI holds ``credits`` flit credits of the memory NI's input buffer. A
   packet (a read piece: 1 flit; a write chunk: 1 + words) is started only when the
   credits cover all its flits, and spends them; the memory NI returns them as it takes
   the flits (``credits`` field of its response heads and CREDIT packets).
2. Read data: a read piece of n words is sent only when the NI's read buffer has n
   words free that no earlier piece reserved. A block's read burst of up to 256 words
   goes as pieces of at most ``rd_piece`` words; ``last`` reaches the block on the final
   word of the final piece.
3. Write responses: a write burst is taken only while fewer than ``wr_outstanding`` are
   unanswered, so its WRITE_DONE finds a slot.
4. A write chunk starts only once all its words are in the NI's write buffer, so a
   packet never waits for its block in the middle of the mesh (a block may well wait
   for read data before it writes).

Memory packets are never dropped by TSP: the tile's mesh is built with
``stale_drop=False`` (:class:`hdl.muon.mesh.Mesh`); a router still drops a packet to a
destination outside the mesh, which an NI never sends.

Responses come back in request order: one memory NI answers in the order it took the
requests, and XY routing on one VC keeps the packets of one source and destination in
order.

With ``checks``, simulation assertions (``hdl.common.credit.check``) check: every ejected
flit finds room (no loss); no more read words or write answers arrive than were asked
for (no duplication); packets are well formed; the credits held never exceed
``credits`` (conservation).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.credit import check
from hdl.common.memport import PHYS_ADDR_BITS, MemPortSignature
from hdl.muon.layouts import CLASS_BITS, MAX_MESH_SIDE, FlitStreamSignature, flit_layout
from spec.codes import MuonVc

from .packets import (
    MAX_CREDITS,
    MAX_PIECE,
    HeadLayout,
    ReadBodyLayout,
    ReqKind,
    RespKind,
    WriteBodyLayout,
    check_ni_widths,
)

__all__ = ["RequesterNi", "check_int", "check_coord"]


def check_int(name, value, low, high):
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in {low}..{high}, not {value}")


def check_coord(name, coord):
    if (not isinstance(coord, tuple) or len(coord) != 2
            or not all(isinstance(c, int) and 0 <= c < MAX_MESH_SIDE for c in coord)):
        raise ValueError(f"{name} must be a pair (x, y) of 0..{MAX_MESH_SIDE - 1}, "
                         f"not {coord!r}")


def head_view(flit, data_width):
    """The :class:`HeadLayout` of a flit view's data."""
    layout = HeadLayout(data_width)
    return layout(flit.data.payload[:layout.size])


def body_view(flit, layout):
    return layout(flit.data.payload[:data.Layout.cast(layout).size])


class RequesterNi(wiring.Component):
    """A block's memory port (``port``, served) onto the Muon node at ``node`` (``inject``
    into its router, ``eject`` out of it), talking to the memory NI at ``mem_node``.

    Members: ``port`` (``In(MemPortSignature)``), ``inject`` / ``eject`` (flit streams),
    ``cls`` (``In``: traffic class of this node's packets, ``spec.codes.TrafficClass``).

    Parameters: ``data_width`` (64..512), ``flit_data_bits`` (at least
    :func:`hdl.tile.packets.min_flit_data_bits`), ``credits`` (flits of the memory NI's
    input buffer reserved for this node: the memory NI's ``credits``; at least
    ``wr_chunk + credit_batch`` of the memory NI so a whole write chunk never waits for
    a lazy credit return, at least ``wr_chunk + 1`` here, at most 255),
    ``rd_buffer`` (read words buffered, 1..1024), ``rd_piece`` (words per read packet,
    1..min(256, rd_buffer)), ``wr_chunk`` (words per write packet, 1..256; the write
    buffer holds twice that), ``wr_outstanding`` (write bursts unanswered, 1..64).

    The two in-flight bounds set a stream's speed: a block moves at most ``rd_buffer``
    read words and ``wr_outstanding`` write bursts per round trip through the mesh, the
    memory NI and the MC (on the small tile at memory latency 20: about 50 cycles for a
    read burst of 16, 90 for a write burst of 16 to its answer). The defaults (128
    words: two operands of the VA's 64 each; 16 bursts) keep a word a cycle each way.
    """

    def __init__(self, data_width, flit_data_bits, node, mem_node, *, credits=32,
                 rd_buffer=128, rd_piece=16, wr_chunk=16, wr_outstanding=16, checks=False):
        check_ni_widths(data_width, flit_data_bits)
        check_coord("node", node)
        check_coord("mem_node", mem_node)
        check_int("rd_buffer", rd_buffer, 1, 1024)
        check_int("rd_piece", rd_piece, 1, min(MAX_PIECE, rd_buffer))
        check_int("wr_chunk", wr_chunk, 1, MAX_PIECE)
        check_int("credits", credits, wr_chunk + 1, MAX_CREDITS)
        check_int("wr_outstanding", wr_outstanding, 1, 64)
        self.data_width, self.flit_data_bits = data_width, flit_data_bits
        self.node, self.mem_node = node, mem_node
        self.credit_count = credits
        self._p = dict(rd_buffer=rd_buffer, rd_piece=rd_piece, wr_chunk=wr_chunk,
                       wr_outstanding=wr_outstanding)
        self._checks = checks
        # The request credits held (read by the tests: conserved when idle).
        self._credits = Signal(range(MAX_CREDITS + 1), init=credits, name="credits")
        super().__init__({
            "port": In(MemPortSignature(data_width)),
            "inject": Out(FlitStreamSignature(flit_data_bits)),
            "eject": In(FlitStreamSignature(flit_data_bits)),
            "cls": In(CLASS_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        dw, p = self.data_width, self._p
        shift = exact_log2(dw // 8)
        port = self.port
        rd_fifo = m.submodules.rd_fifo = SyncFIFOBuffered(
            width=data.Layout.cast(port.rd_resp.payload.shape()).size, depth=p["rd_buffer"])
        wr_fifo = m.submodules.wr_fifo = SyncFIFOBuffered(
            width=data.Layout.cast(port.wr_data.payload.shape()).size, depth=2 * p["wr_chunk"])
        ack_fifo = m.submodules.ack_fifo = SyncFIFOBuffered(width=1, depth=p["wr_outstanding"])

        # The block's side of the buffers; `reserved` / `pending` count their slots promised.
        reserved = Signal(range(p["rd_buffer"] + 1))
        pending = Signal(range(p["wr_outstanding"] + 1))
        m.d.comb += [
            port.rd_resp.payload.eq(rd_fifo.r_data), port.rd_resp.valid.eq(rd_fifo.r_rdy),
            rd_fifo.r_en.eq(port.rd_resp.ready),
            wr_fifo.w_data.eq(port.wr_data.payload), wr_fifo.w_en.eq(port.wr_data.valid),
            port.wr_data.ready.eq(wr_fifo.w_rdy),
            port.wr_resp.payload.error.eq(ack_fifo.r_data), port.wr_resp.valid.eq(ack_fifo.r_rdy),
            ack_fifo.r_en.eq(port.wr_resp.ready),
        ]
        credits = self._credits
        spent, returned, issued = self._sender(m, wr_fifo, reserved, pending, credits, shift)
        self._receiver(m, rd_fifo, ack_fifo, returned)

        rd_done = rd_fifo.r_en & rd_fifo.r_rdy
        m.d.sync += [reserved.eq(reserved + issued - rd_done),
                     pending.eq(pending + (port.wr_req.valid & port.wr_req.ready)
                                - (ack_fifo.r_en & ack_fifo.r_rdy)),
                     credits.eq(credits - spent + returned)]
        if self._checks:
            check(m, credits - spent + returned <= self.credit_count,
                  "more request credits returned than were spent")
            check(m, ~rd_fifo.w_en | (rd_fifo.level < reserved),
                  "read word received that no piece asked for")
            check(m, ~ack_fifo.w_en | (ack_fifo.level < pending),
                  "write answer received that no burst asked for")
        return m

    def _sender(self, m, wr_fifo, reserved, pending, credits, shift):
        """The read and write paths into ``inject``; returns (credits spent, credits
        returned (driven by the receiver), read words reserved) this cycle."""
        dw, p, port = self.data_width, self._p, self.port
        spent = Signal(range(MAX_PIECE + 2))
        returned = Signal(range(MAX_CREDITS + 1))
        issued = Signal(range(MAX_PIECE + 1))

        # The burst being cut into pieces / chunks.
        rd_active, rd_word = Signal(), Signal(PHYS_ADDR_BITS - shift)
        rd_left = Signal(range(MAX_PIECE + 1))
        wr_active, wr_word, wr_left = Signal(), Signal.like(rd_word), Signal(range(MAX_PIECE + 1))
        m.d.comb += [port.rd_req.ready.eq(~rd_active),
                     port.wr_req.ready.eq(~wr_active & (pending < p["wr_outstanding"]))]
        with m.If(port.rd_req.valid & port.rd_req.ready):
            m.d.sync += [rd_active.eq(1), rd_word.eq(port.rd_req.payload.addr[shift:]),
                         rd_left.eq(port.rd_req.payload.len + 1)]
        with m.If(port.wr_req.valid & port.wr_req.ready):
            m.d.sync += [wr_active.eq(1), wr_word.eq(port.wr_req.payload.addr[shift:]),
                         wr_left.eq(port.wr_req.payload.len + 1)]
        if self._checks:
            for req in (port.rd_req, port.wr_req):
                check(m, ~req.valid | (req.payload.addr[:shift] == 0),
                      "memory port burst address not aligned to the bus width")

        piece = Signal(range(MAX_PIECE + 1))
        chunk = Signal(range(MAX_PIECE + 1))
        m.d.comb += [piece.eq(Mux(rd_left < p["rd_piece"], rd_left, p["rd_piece"])),
                     chunk.eq(Mux(wr_left < p["wr_chunk"], wr_left, p["wr_chunk"]))]
        prefer_write = Signal()        # round robin between the two paths
        write_ready = Signal()         # a chunk's words are all in
        can_read = Signal()
        can_write = Signal()
        m.d.comb += [
            write_ready.eq(wr_active & (wr_fifo.level >= chunk)),
            can_write.eq(write_ready & (credits >= chunk + 1)),
            # A chunk whose turn it is waits for its credits with no read spending them,
            # so a stream of reads never starves the writes.
            can_read.eq(rd_active & (p["rd_buffer"] - reserved >= piece) & (credits != 0)
                        & ~(prefer_write & write_ready)),
        ]

        layout = flit_layout(self.flit_data_bits)
        flit = layout(Signal(data.Layout.cast(layout).size))
        head = head_view(flit, dw)
        body = body_view(flit, WriteBodyLayout(dw))
        m.d.comb += [self.inject.payload.eq(flit), flit.vc.eq(MuonVc.BEST_EFFORT)]
        (x, y), (mx, my) = self.node, self.mem_node
        body_left = Signal(range(MAX_PIECE + 1))
        chunk_last = Signal()
        send = self.inject.valid & self.inject.ready
        with m.FSM():
            with m.State("HEAD"):
                take_write = Signal()
                m.d.comb += take_write.eq(can_write & (prefer_write | ~can_read))
                m.d.comb += [self.inject.valid.eq(can_read | can_write), flit.head.eq(1),
                             head.header.src_x.eq(x), head.header.src_y.eq(y),
                             head.header.dst_x.eq(mx), head.header.dst_y.eq(my),
                             head.header.cls.eq(self.cls)]
                req = head.cmd.req
                with m.If(take_write):
                    m.d.comb += [req.kind.eq(ReqKind.WRITE), req.last.eq(wr_left == chunk),
                                 req.count.eq(chunk - 1), req.word.eq(wr_word)]
                    with m.If(send):
                        m.d.comb += spent.eq(chunk + 1)
                        m.d.sync += [wr_word.eq(wr_word + chunk), wr_left.eq(wr_left - chunk),
                                     body_left.eq(chunk), chunk_last.eq(wr_left == chunk),
                                     prefer_write.eq(0)]
                        with m.If(wr_left == chunk):
                            m.d.sync += wr_active.eq(0)
                        m.next = "BODY"
                with m.Else():
                    m.d.comb += [req.kind.eq(ReqKind.READ), req.last.eq(rd_left == piece),
                                 req.count.eq(piece - 1), req.word.eq(rd_word), flit.tail.eq(1)]
                    with m.If(send):
                        m.d.comb += [spent.eq(1), issued.eq(piece)]
                        m.d.sync += [rd_word.eq(rd_word + piece), rd_left.eq(rd_left - piece),
                                     prefer_write.eq(1)]
                        with m.If(rd_left == piece):
                            m.d.sync += rd_active.eq(0)
            with m.State("BODY"):
                wdata = port.wr_data.payload.shape()(wr_fifo.r_data)
                m.d.comb += [self.inject.valid.eq(wr_fifo.r_rdy), flit.tail.eq(body_left == 1),
                             body.data.eq(wdata.data), body.strb.eq(wdata.strb),
                             wr_fifo.r_en.eq(self.inject.ready)]
                if self._checks:
                    check(m, ~wr_fifo.r_en | ~wr_fifo.r_rdy
                          | (wdata.last == (chunk_last & (body_left == 1))),
                          "write data 'last' does not match the burst's length")
                with m.If(send):
                    m.d.sync += body_left.eq(body_left - 1)
                    with m.If(body_left == 1):
                        m.next = "HEAD"
        return spent, returned, issued

    def _receiver(self, m, rd_fifo, ack_fifo, returned):
        """``eject`` into the read and write-response buffers; drives ``returned``."""
        dw = self.data_width
        flit = self.eject.payload
        head = head_view(flit, dw).cmd.resp
        body = body_view(flit, ReadBodyLayout(dw))
        in_read, piece_last = Signal(), Signal()
        got = self.eject.valid
        rd_item = self.port.rd_resp.payload.shape()(rd_fifo.w_data)
        m.d.comb += [self.eject.ready.eq(1),
                     rd_item.data.eq(body.data), rd_item.error.eq(body.error),
                     rd_item.last.eq(flit.tail & piece_last),
                     ack_fifo.w_data.eq(head.error)]
        with m.If(got & flit.head):
            m.d.comb += returned.eq(head.credits)
            with m.If(head.kind == RespKind.READ_DATA):
                m.d.sync += [in_read.eq(1), piece_last.eq(head.last)]
            with m.If(head.kind == RespKind.WRITE_DONE):
                m.d.comb += ack_fifo.w_en.eq(1)
        with m.If(got & ~flit.head):
            m.d.comb += rd_fifo.w_en.eq(1)
            with m.If(flit.tail):
                m.d.sync += in_read.eq(0)
        if self._checks:
            check(m, ~got | (flit.vc == MuonVc.BEST_EFFORT), "memory packet on the reserved VC")
            check(m, ~(got & flit.head) | ~in_read, "head flit inside a read data packet")
            check(m, ~(got & flit.head) | (flit.tail == (head.kind != RespKind.READ_DATA)),
                  "response packet framing")
            check(m, ~(got & flit.head) | (head.kind.as_value() != 3), "unknown response kind")
            check(m, ~(got & ~flit.head) | in_read, "body flit outside a read data packet")
            check(m, ~rd_fifo.w_en | rd_fifo.w_rdy, "read word lost: read buffer full")
            check(m, ~ack_fifo.w_en | ack_fifo.w_rdy, "write answer lost: no slot")
