"""On-chip memory with an AXI4 slave port, standing in for external memory on a board."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In
from amaranth.utils import ceil_log2, exact_log2

from hdl.board.bridge import HostWordSignature
from hdl.common.axi import AXI4Signature, AxiResp

__all__ = ["AxiRam"]

AXI_BURST_INCR = 1
# Words read ahead of R: a word read in cycle t is in the FIFO at t + 1 and on R at
# t + 2, so four keep one word a cycle flowing.
READ_AHEAD = 4


class AxiRam(wiring.Component):
    """``size`` bytes of block RAM behind an AXI4 slave (``axi``) and a host word port.

    Rules:

    1. ``axi`` serves INCR bursts of full-width beats (``axsize`` = log2 of the bus bytes),
       one beat a cycle when the master is ready, one read and one write burst at a time.
       Byte address ``a`` is word ``a // bus bytes``; an address's low bits are ignored.
    2. A beat outside the memory, or of a burst that is not INCR with full-width beats, is
       answered SLVERR: reads return 0, writes change nothing. Physical addresses are
       bytes from 0; the memory does not wrap.
    3. ``host`` (32-bit words, for the UART bridge) is served between bursts, ahead of a
       waiting burst, so the host gets in even while a block streams; the host should
       only touch memory while no command runs.
    """

    def __init__(self, data_width=128, size=64 * 1024, addr_width=64):
        if data_width not in (64, 128, 256, 512):
            raise ValueError(f"data width must be 64, 128, 256 or 512 bits, not {data_width!r}")
        if not isinstance(size, int) or size < data_width // 8 or size & (size - 1):
            raise ValueError(f"size must be a power of two of at least one bus word, not {size!r}")
        self.data_width, self.size = data_width, size
        self.depth = size // (data_width // 8)
        super().__init__({
            "axi": In(AXI4Signature(addr_width, data_width, 1)),
            "host": In(HostWordSignature()),
        })

    def elaborate(self, platform):
        m = Module()
        bus_bytes = self.data_width // 8
        log_bb = exact_log2(bus_bytes)
        m.submodules.mem = mem = Memory(shape=self.data_width, depth=self.depth, init=[])
        wr = mem.write_port(granularity=8)
        rd = mem.read_port()
        axi, host = self.axi, self.host
        word_bits = max(ceil_log2(self.depth), 1)

        def locate(byte_addr):
            """(word index, in range) of a byte address."""
            word = byte_addr[log_bb:]
            return word[:word_bits], (word >> word_bits) == 0

        host_word, host_ok = locate(host.req.payload.addr)
        host_lane = host.req.payload.addr[2:log_bb]
        host_read = host.req.valid & ~host.req.payload.write
        host_write = host.req.valid & host.req.payload.write
        # A host access is answered from registers: a read's word is taken from the
        # memory's output the cycle after the read (``host_pending``), then offered.
        resp_valid, resp_error = Signal(), Signal()
        resp_lane = Signal(max(log_bb - 2, 1))
        resp_data = Signal(32)
        host_pending = Signal()
        host_busy = resp_valid | host_pending
        m.d.comb += [host.resp.valid.eq(resp_valid), host.resp.payload.error.eq(resp_error),
                     host.resp.payload.data.eq(resp_data)]
        with m.If(host.resp.ready):
            m.d.sync += resp_valid.eq(0)
        m.d.sync += host_pending.eq(0)
        with m.If(host_pending):
            m.d.sync += [resp_valid.eq(1),
                         resp_data.eq(Mux(resp_error, 0, rd.data.word_select(resp_lane, 32)))]

        # Writes reach the memory a cycle after they are taken (address, data and byte
        # enables registered); a write's response comes no earlier than that.
        wr_addr, wr_data = Signal.like(wr.addr), Signal.like(wr.data)
        wr_en = Signal.like(wr.en)
        m.d.comb += [wr.addr.eq(wr_addr), wr.data.eq(wr_data), wr.en.eq(wr_en)]
        m.d.sync += wr_en.eq(0)

        # --- reads: words are read ahead into a small FIFO that drives R, so nothing on
        # the block RAM's address side waits for ``rready`` (and its output is registered
        # before R). ``ahead`` counts the words read and not yet taken, the one leaving
        # the memory included; a word is read while there is room for it.
        # Word indices carry two bits more than the memory needs, so an address past the
        # end stays past the end for the rest of its burst.
        beat = data.StructLayout({"data": self.data_width, "last": 1, "id": 1, "bad": 1})
        m.submodules.r_fifo = r_fifo = fifo.SyncFIFOBuffered(width=beat.size,
                                                              depth=READ_AHEAD)
        r_word, r_left = Signal(word_bits + 2), Signal(8)
        r_id, r_bad = Signal(1), Signal()
        r_burst = Signal()
        ahead = Signal(range(READ_AHEAD + 2))
        read = r_burst & (ahead < READ_AHEAD)
        taken = axi.rvalid & axi.rready
        m.d.sync += ahead.eq(ahead + read - taken)
        # The memory reads every cycle (words are captured the cycle after they are
        # asked for): the burst's next word during a burst, else the host's word, so the
        # address depends on registers only.
        m.d.comb += rd.addr.eq(Mux(r_burst, r_word[:word_bits], host_word))
        out = Signal(beat)
        host_reads = ~r_burst & (ahead == 0) & host_read & ~host_busy
        # No burst starts while the host's read waits to be served or for its word.
        m.d.comb += axi.arready.eq(~r_burst & ~(host_read & ~host_busy) & ~host_pending)
        with m.If(host_reads):
            m.d.comb += host.req.ready.eq(1)
            m.d.sync += [host_pending.eq(1), resp_error.eq(~host_ok), resp_lane.eq(host_lane)]
        with m.If(axi.arvalid & axi.arready):
            word, ok = locate(axi.araddr)
            m.d.sync += [r_burst.eq(1), r_word.eq(Cat(word, ~ok, 0)), r_left.eq(axi.arlen),
                         r_id.eq(axi.arid),
                         r_bad.eq((axi.arburst != AXI_BURST_INCR) | (axi.arsize != log_bb))]
        pending = Signal(beat)                    # what goes with the word being read
        pending_valid = Signal()
        m.d.sync += pending_valid.eq(read)
        with m.If(read):
            m.d.sync += [pending.last.eq(r_left == 0), pending.id.eq(r_id),
                         pending.bad.eq(r_bad | (r_word[word_bits:] != 0)),
                         r_word.eq(r_word + 1), r_left.eq(r_left - 1)]
            with m.If(r_left == 0):
                m.d.sync += r_burst.eq(0)
        in_memory = Signal(beat)                  # the word leaving the memory this cycle
        m.d.comb += [in_memory.eq(pending), in_memory.data.eq(rd.data),
                     r_fifo.w_data.eq(in_memory), r_fifo.w_en.eq(pending_valid),
                     out.eq(r_fifo.r_data),
                     axi.rvalid.eq(r_fifo.r_rdy), r_fifo.r_en.eq(axi.rready),
                     axi.rdata.eq(Mux(out.bad, 0, out.data)), axi.rlast.eq(out.last),
                     axi.rid.eq(out.id),
                     axi.rresp.eq(Mux(out.bad, AxiResp.SLVERR, AxiResp.OKAY))]

        # --- writes
        w_word, w_id, w_bad, w_error = Signal(word_bits + 2), Signal(1), Signal(), Signal()
        w_state = Signal(2)                       # 0 idle, 1 data, 2 response
        host_writes = (w_state == 0) & host_write & ~host_busy & ~host_reads
        m.d.comb += axi.awready.eq((w_state == 0) & ~(host_write & ~host_busy))
        with m.If(host_writes):
            m.d.comb += host.req.ready.eq(1)
            m.d.sync += [wr_addr.eq(host_word), wr_data.eq(Cat(*([host.req.payload.data]
                                                                 * (bus_bytes // 4)))),
                         wr_en.eq(Mux(host_ok, Const(0xF, 4) << (host_lane << 2), 0)),
                         resp_valid.eq(1), resp_error.eq(~host_ok)]
        with m.If(axi.awvalid & axi.awready):
            word, ok = locate(axi.awaddr)
            m.d.sync += [w_state.eq(1), w_word.eq(Cat(word, ~ok, 0)), w_id.eq(axi.awid),
                         w_error.eq(0),
                         w_bad.eq((axi.awburst != AXI_BURST_INCR) | (axi.awsize != log_bb))]
        m.d.comb += axi.wready.eq(w_state == 1)
        with m.If(axi.wvalid & axi.wready):
            bad = w_bad | (w_word[word_bits:] != 0)
            m.d.sync += [wr_addr.eq(w_word[:word_bits]), wr_data.eq(axi.wdata),
                         wr_en.eq(Mux(bad, 0, axi.wstrb)),
                         w_word.eq(w_word + 1), w_error.eq(w_error | bad)]
            with m.If(axi.wlast):
                m.d.sync += w_state.eq(2)
        m.d.comb += [axi.bvalid.eq(w_state == 2), axi.bid.eq(w_id),
                     axi.bresp.eq(Mux(w_error, AxiResp.SLVERR, AxiResp.OKAY))]
        with m.If(axi.bvalid & axi.bready):
            m.d.sync += w_state.eq(0)
        return m
