"""Row readers and writers: byte rows in logical memory ↔ bus words on a memory port.

A *row* is ``nbytes`` consecutive bytes from a logical address with any alignment that
suits its element size. The reader and writer split rows into bursts that never cross
4 KiB, translate every burst through the TAT, and shift data between the row's own
alignment and the bus's, so the buffers they serve see rows starting at byte 0.
"""

from amaranth.hdl import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.codes import ErrorCode
from hdl.common.memport import BurstLayout, ReadDataLayout, WriteDataLayout, WriteRespLayout
from hdl.common.tat import TatTableLayout, tat_covers, tat_masks, tat_select
from spec.memory import PAGE_BYTES

__all__ = ["ADDR_BITS", "MAX_ROW_BYTES", "ErrorReport", "RowBeatLayout", "RowCommandLayout",
           "RowWriteLayout", "RowReader", "RowWriter"]

ADDR_BITS = 40        # logical row addresses: 32-bit base + row · stride never wraps
MAX_ROW_BYTES = 512


class ErrorReport(data.StructLayout):
    """A one-cycle error event: ``valid``, the ERROR code and the logical address."""
    def __init__(self):
        super().__init__({"valid": 1, "code": ErrorCode, "addr": ADDR_BITS})


class RowCommandLayout(data.StructLayout):
    """A row to read: logical ``addr``, ``nbytes`` (1..512) and a caller's ``tag``."""
    def __init__(self, tag_layout):
        super().__init__({"addr": ADDR_BITS, "nbytes": range(MAX_ROW_BYTES + 1),
                          "tag": tag_layout})


class RowBeatLayout(data.StructLayout):
    """One bus word of a row read, realigned: row bytes ``[index·B, index·B + B)``."""
    def __init__(self, data_width, tag_layout):
        super().__init__({"valid": 1, "index": range(MAX_ROW_BYTES // (data_width // 8) + 1),
                          "last": 1, "data": data_width, "tag": tag_layout})


class RowWriteLayout(data.StructLayout):
    """A row to write: ``data`` (byte n in bits 8n..8n+7), logical ``addr``, ``nbytes``."""
    def __init__(self, max_bytes):
        super().__init__({"data": 8 * max_bytes, "addr": ADDR_BITS,
                          "nbytes": range(max_bytes + 1)})


def _burst_beats_to_page_end(addr, bus_bytes):
    """Bus words from ``addr`` (bus aligned) to the end of its 4 KiB page."""
    return (PAGE_BYTES - addr[:12]) >> exact_log2(bus_bytes)


class RowReader(wiring.Component):
    """Reads rows into on-chip buffers.

    Rules:

    1. ``cmd`` names a row: logical ``addr``, ``nbytes`` (1..512) and a ``tag`` that is
       handed back with its data untouched (the buffer, row, and so on).
    2. Row data comes out on ``beat`` (no back-pressure: buffers always accept): beat
       ``index`` n holds row bytes ``[n·B, n·B + B)`` for a bus of B bytes, with ``last``
       on the row's final beat. Rows come out whole and in command order.
    3. A TAT miss (checked per burst, before it is issued) or an error response is
       reported once on ``error``; the reader then issues nothing more, drops the data of
       failed words, and is ``idle`` once every burst it issued has returned.
    4. ``abort`` stops issuing at once (an error elsewhere). ``clear`` (one cycle, while
       ``idle``) forgets everything for the next command.
    """

    def __init__(self, data_width, tag_layout, *, outstanding=16):
        self.data_width = data_width
        self.bus_bytes = data_width // 8
        self.tag_layout = tag_layout
        self.outstanding = outstanding
        super().__init__({
            "cmd": In(stream.Signature(RowCommandLayout(tag_layout))),
            "tat": In(TatTableLayout()),
            "rd_req": Out(stream.Signature(BurstLayout())),
            "rd_resp": In(stream.Signature(ReadDataLayout(data_width))),
            "beat": Out(RowBeatLayout(data_width, tag_layout)),
            "error": Out(ErrorReport()),
            "abort": In(1),
            "clear": In(1),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        bb = self.bus_bytes
        off_bits = exact_log2(bb)
        row_meta = data.StructLayout({
            "tag": self.tag_layout, "offset": off_bits,
            "beats_in": range(MAX_ROW_BYTES // bb + 2),
            "beats_out": range(MAX_ROW_BYTES // bb + 1)})
        m.submodules.rows = rows = ResetInserter(self.clear)(
            fifo.SyncFIFOBuffered(width=row_meta.size, depth=self.outstanding))
        m.submodules.bursts = bursts = ResetInserter(self.clear)(
            fifo.SyncFIFOBuffered(width=ADDR_BITS, depth=self.outstanding))

        # --- Request side: one row at a time, split into bursts at 4 KiB boundaries.
        busy = Signal()
        stopped = Signal()                  # after an error or abort: issue nothing more
        addr = Signal(ADDR_BITS)            # bus-aligned logical address of the next burst
        first_byte = Signal(ADDR_BITS)      # logical address of the next burst's first byte
        left = Signal(range(MAX_ROW_BYTES // bb + 2))  # bus words of the row not yet asked
        cmd = self.cmd.payload
        offset = cmd.addr[:off_bits]
        beats_in = (offset + cmd.nbytes + bb - 1) >> off_bits
        beats_out = (cmd.nbytes + bb - 1) >> off_bits
        meta_in = Signal(row_meta)
        m.d.comb += [meta_in.tag.eq(cmd.tag), meta_in.offset.eq(offset),
                     meta_in.beats_in.eq(beats_in), meta_in.beats_out.eq(beats_out),
                     rows.w_data.eq(meta_in)]
        # Room for the row's record, registered (one short of full: a record may go in
        # the cycle it is judged), so ``ready`` depends on registers alone.
        record_room = Signal()
        m.d.sync += record_room.eq(rows.level < self.outstanding - 1)
        m.d.comb += self.cmd.ready.eq(~busy & ~stopped & ~self.abort & record_room)
        m.d.comb += rows.w_en.eq(self.cmd.valid & self.cmd.ready)
        with m.If(rows.w_en):
            m.d.sync += [busy.eq(1), addr.eq(Cat(Const(0, off_bits), cmd.addr[off_bits:])),
                         first_byte.eq(cmd.addr), left.eq(beats_in)]

        # The TAT lookup of the next burst's address, registered: from the waiting
        # command's address while idle (so from the one taken, the cycle it is taken),
        # else from ``addr``. After a burst the new ``addr`` waits a cycle for its lookup
        # (``fresh`` low): only the second burst of a row that crosses a 4 KiB page pays it.
        held = Signal()
        lookup = Signal(ADDR_BITS)
        m.d.comb += lookup.eq(Mux(busy | held, addr, Cat(Const(0, off_bits), cmd.addr[off_bits:])))
        # Registered: which entries cover it (with registered page masks); the winner's
        # physical address is then selected from the registers.
        masks = tat_masks(m, self.tat, name="rd_tat")
        covers = Signal(len(self.tat))
        m.d.sync += covers.eq(tat_covers(m, self.tat, lookup, masks, name="rd_tat"))
        hit, physical = tat_select(m, self.tat, covers, addr, masks, name="rd_tat")
        fresh = Signal()
        m.d.sync += fresh.eq(1)
        room = _burst_beats_to_page_end(addr, bb)
        length = Signal(range(PAGE_BYTES // bb + 1))
        m.d.comb += length.eq(Mux(left < room, left, room))
        # An address once offered stays offered until taken (AXI), even past an abort;
        # its data is then received and dropped like that of any burst in flight.
        m.d.sync += held.eq(self.rd_req.valid & ~self.rd_req.ready)
        m.d.comb += [
            self.rd_req.payload.addr.eq(physical),
            self.rd_req.payload.len.eq(length - 1),
            self.rd_req.valid.eq(held | (busy & fresh & ~stopped & ~self.abort & hit
                                         & bursts.w_rdy)),
            bursts.w_data.eq(first_byte),
            bursts.w_en.eq(self.rd_req.valid & self.rd_req.ready),
        ]
        error_pending = Signal(ErrorReport())
        with m.If(bursts.w_en):
            next_addr = addr + (length << off_bits)
            m.d.sync += [addr.eq(next_addr), first_byte.eq(next_addr), left.eq(left - length),
                         fresh.eq(0)]
            with m.If(left == length):
                m.d.sync += busy.eq(0)
        with m.If(busy & fresh & ~stopped & ~self.abort & ~held & ~hit):
            m.d.sync += [stopped.eq(1), busy.eq(0)]
            m.d.comb += [error_pending.valid.eq(1), error_pending.code.eq(ErrorCode.TAT_MISS),
                         error_pending.addr.eq(first_byte)]
        with m.If(self.abort):
            m.d.sync += [stopped.eq(1), busy.eq(0)]

        # --- Response side: realign each row so that its first byte is byte 0 of beat 0.
        self._realign(m, rows, bursts, row_meta, error_pending, stopped)
        m.d.comb += self.idle.eq(~busy & ~self.rd_req.valid & ~bursts.r_rdy)
        with m.If(self.clear):
            m.d.sync += [stopped.eq(0), busy.eq(0)]
        return m

    def _realign(self, m, rows, bursts, row_meta, error_pending, stopped):
        bb, width = self.bus_bytes, self.data_width
        meta = Signal(row_meta)
        m.d.comb += meta.eq(rows.r_data)
        resp = self.rd_resp
        prev = Signal(width)
        seen = Signal(range(MAX_ROW_BYTES // bb + 2))   # words of this row received
        flush = Signal()                                 # emit the held word, take none
        joined = (Cat(prev, resp.payload.data) >> (meta.offset * 8))[:width]
        tail = (prev >> (meta.offset * 8))[:width]

        m.d.comb += resp.ready.eq(~flush & rows.r_rdy)
        take = resp.valid & resp.ready
        emit = Signal()
        out = self.beat
        m.d.sync += emit.eq(0)
        with m.If(flush):
            m.d.sync += [emit.eq(1), out.data.eq(tail), out.index.eq(seen - 1),
                         out.last.eq(1), flush.eq(0), seen.eq(0)]
            m.d.comb += rows.r_en.eq(1)
        with m.Elif(take):
            row_done = seen == meta.beats_in - 1
            m.d.sync += [prev.eq(resp.payload.data), seen.eq(seen + 1)]
            with m.If(meta.offset == 0):
                m.d.sync += [emit.eq(1), out.data.eq(resp.payload.data), out.index.eq(seen),
                             out.last.eq(row_done)]
            with m.Elif(seen != 0):
                m.d.sync += [emit.eq(1), out.data.eq(joined), out.index.eq(seen - 1),
                             out.last.eq(row_done & (meta.beats_out != meta.beats_in))]
            with m.If(row_done):
                with m.If((meta.offset != 0) & (meta.beats_out == meta.beats_in)):
                    m.d.sync += flush.eq(1)
                with m.Else():
                    m.d.comb += rows.r_en.eq(1)
                    m.d.sync += seen.eq(0)
            with m.If(resp.payload.last):
                m.d.comb += bursts.r_en.eq(1)
        m.d.sync += out.tag.eq(meta.tag)

        failed = Signal()                # this command already reported an error
        with m.If(take & resp.payload.error & ~failed & ~error_pending.valid):
            m.d.comb += [self.error.valid.eq(1), self.error.code.eq(ErrorCode.AXI_READ_ERROR),
                         self.error.addr.eq(bursts.r_data)]
        with m.Elif(error_pending.valid & ~failed):
            m.d.comb += self.error.eq(error_pending)
        with m.If(self.error.valid):
            m.d.sync += [failed.eq(1), stopped.eq(1)]
        with m.If(self.clear):
            m.d.sync += [failed.eq(0), flush.eq(0), seen.eq(0)]
        # Data of a failed command is dropped: nothing reaches a buffer after an error.
        m.d.comb += out.valid.eq(emit & ~failed & ~self.abort)


class RowWriter(wiring.Component):
    """Writes rows from a stream to logical memory.

    Rules:

    1. ``row`` carries ``data`` (row byte n in bits ``8n..8n+7``), the logical ``addr``
       and ``nbytes`` (1..``max_bytes``).
    2. Each row becomes one or two bursts (split at 4 KiB), each translated through the
       TAT before its address is issued; a burst's data follows its address. Byte strobes
       cover exactly the row's bytes.
    3. A TAT miss stops the writer before the burst is issued; an error response is
       reported (``error``) with the logical address of the burst's first byte. After an
       error or ``abort``, no new burst starts; ``idle`` once every issued burst answered.
    4. Every row's ``addr`` is a multiple of ``align`` bytes (a power of two; the caller
       guarantees it, e.g. by refusing misaligned commands at START). The row is shifted
       to the bus's alignment in steps of ``align`` bytes, so a larger ``align`` makes
       the shifter smaller (the MA's C rows: 4 bytes, a 4:1 instead of a 16:1
       multiplexer per bit on a 128-bit bus).
    """

    def __init__(self, data_width, max_bytes, *, outstanding=16, align=1):
        if align not in (1, 2, 4, 8) or align > data_width // 8:
            raise ValueError(f"align must be 1, 2, 4 or 8 bytes and at most the bus width, "
                             f"not {align!r}")
        self.data_width = data_width
        self.bus_bytes = data_width // 8
        self.max_bytes = max_bytes
        self.outstanding = outstanding
        self.align = align
        super().__init__({
            "row": In(stream.Signature(RowWriteLayout(max_bytes))),
            "tat": In(TatTableLayout()),
            "wr_req": Out(stream.Signature(BurstLayout())),
            "wr_data": Out(stream.Signature(WriteDataLayout(data_width))),
            "wr_resp": In(stream.Signature(WriteRespLayout())),
            "error": Out(ErrorReport()),
            "abort": In(1),
            "clear": In(1),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        bb, width = self.bus_bytes, self.data_width
        off_bits = exact_log2(bb)
        log_align = exact_log2(self.align)
        span = self.max_bytes + bb                       # a shifted row fits in this
        m.submodules.bursts = bursts = ResetInserter(self.clear)(
            fifo.SyncFIFOBuffered(width=ADDR_BITS, depth=self.outstanding))

        shifted = Signal(8 * span)
        strobes = Signal(span)
        row_addr = Signal(ADDR_BITS)
        addr = Signal(ADDR_BITS)                         # bus-aligned, next burst
        beats = Signal(range(span // bb + 2))            # words in the row
        sent = Signal(range(span // bb + 2))             # words sent so far
        burst_left = Signal(range(PAGE_BYTES // bb + 1))
        stopped = Signal()

        row = self.row.payload
        offset = row.addr[:off_bits]
        room = _burst_beats_to_page_end(addr, bb)
        length = Mux(beats - sent < room, beats - sent, room)

        miss = Signal(ErrorReport())
        held = Signal()
        m.d.sync += held.eq(self.wr_req.valid & ~self.wr_req.ready)
        # The TAT lookup of the burst address, registered: from the waiting row's address
        # while idle, else from ``addr``, which changes when a burst's address is taken
        # and is looked up again while its data goes out.
        in_idle = Signal()
        # Registered: which entries cover it (page masks registered too); the physical
        # address is selected from the registers.
        lookup = Mux(in_idle, Cat(Const(0, off_bits), row.addr[off_bits:]), addr)
        masks = tat_masks(m, self.tat, name="wr_tat")
        covers = Signal(len(self.tat))
        m.d.sync += covers.eq(tat_covers(m, self.tat, lookup, masks, name="wr_tat"))
        hit, physical = tat_select(m, self.tat, covers, addr, masks, name="wr_tat")
        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.comb += [in_idle.eq(1), self.row.ready.eq(~stopped & ~self.abort)]
                with m.If(self.row.valid & self.row.ready):
                    m.d.sync += [
                        shifted.eq(row.data << (offset[log_align:] * (8 * self.align))),
                        strobes.eq(((Const(1, span + 1) << row.nbytes) - 1) << offset),
                        row_addr.eq(row.addr),
                        addr.eq(Cat(Const(0, off_bits), row.addr[off_bits:])),
                        beats.eq((offset + row.nbytes + bb - 1) >> off_bits),
                        sent.eq(0),
                    ]
                    m.next = "ADDRESS"
            with m.State("ADDRESS"):
                first_byte = Mux(sent == 0, row_addr, addr)
                # An address once offered stays offered until taken (AXI); its data
                # then follows, even past an abort.
                with m.If(~held & (stopped | self.abort)):
                    m.next = "IDLE"
                with m.Elif(~held & ~hit):
                    m.d.comb += [miss.valid.eq(1), miss.addr.eq(first_byte),
                                 miss.code.eq(ErrorCode.TAT_MISS)]
                    m.next = "IDLE"
                with m.Else():
                    m.d.comb += [
                        self.wr_req.payload.addr.eq(physical),
                        self.wr_req.payload.len.eq(length - 1),
                        self.wr_req.valid.eq(held | bursts.w_rdy),
                        bursts.w_data.eq(first_byte),
                        bursts.w_en.eq(self.wr_req.valid & self.wr_req.ready),
                    ]
                    with m.If(bursts.w_en):
                        m.d.sync += [burst_left.eq(length),
                                     addr.eq(addr + (length << off_bits))]
                        m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [
                    self.wr_data.valid.eq(1),
                    self.wr_data.payload.data.eq(shifted.word_select(sent, width)),
                    self.wr_data.payload.strb.eq(strobes.word_select(sent, bb)),
                    self.wr_data.payload.last.eq(burst_left == 1),
                ]
                with m.If(self.wr_data.ready):
                    m.d.sync += [sent.eq(sent + 1), burst_left.eq(burst_left - 1)]
                    with m.If((burst_left == 1) & (sent + 1 == beats)):
                        m.next = "IDLE"
                    with m.Elif(burst_left == 1):
                        m.next = "ADDRESS"

        # Responses: one per burst, in order.
        m.d.comb += [self.wr_resp.ready.eq(1), bursts.r_en.eq(self.wr_resp.valid)]
        with m.If(self.wr_resp.valid & self.wr_resp.payload.error & ~stopped):
            m.d.comb += [self.error.valid.eq(1), self.error.addr.eq(bursts.r_data),
                         self.error.code.eq(ErrorCode.AXI_WRITE_ERROR)]
        with m.Elif(miss.valid & ~stopped):
            m.d.comb += self.error.eq(miss)
        with m.If(self.error.valid):
            m.d.sync += stopped.eq(1)
        with m.If(self.clear):
            m.d.sync += stopped.eq(0)
        m.d.comb += self.idle.eq(~bursts.r_rdy & fsm.ongoing("IDLE"))
        return m
