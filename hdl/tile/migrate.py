"""The tile's cache-migrate engine: a DMA that copies memory in the background
(docs/tile/migrate.md; the design notes' Context Management Path).

:class:`MigrateEngine` is a bus master like a block: its register block on ``bus`` (the
tile's MIGRATE window), its copies on ``mem`` (a :class:`~hdl.common.memport.MemPortSignature`
port; in the tile, through a ``RequesterNi`` at class cache-migrate), the tile's timebase
on ``now``. :class:`MigrateCore` is the copier alone, with the command contract of the
MA's and VA's cores (``refuse_code``, ``launch``, ``finish``, ``fail``).

How a copy runs (:class:`MigrateCore`):

1. The checks at START (combinational, in this order): LENGTH 0, SRC + LENGTH or
   DST + LENGTH past 2^48, or SRC < DST < SRC + LENGTH (an overlap that a forward copy
   would corrupt) → BAD_COMMAND; SRC, DST, LENGTH not multiples of the bus width in bytes
   → MISALIGNED. A refused copy makes no memory access.
2. Reads: bursts of at most ``max_burst`` words that never cross 4 KiB, issued back to
   back while the read buffer (``max_outstanding · max_burst`` words, owned here) has
   room for the whole burst beside every word already asked for and not yet written, and
   fewer than ``max_outstanding`` read bursts are unanswered. So the engine never asks for
   more read data than it can hold, and ``rd_resp`` is always ready.
   ``max_outstanding`` is at least 2, so the buffer (at least ``2 · max_burst`` words)
   always has room for a read burst beside the words a write burst waits with (fewer
   than ``max_burst``): the copy cannot stall on its own buffer.
3. Writes: bursts cut the same way from DST, each requested once all its words are in
   the buffer (its data then follows one word a cycle, never waiting for a read), with
   fewer than ``max_outstanding`` write bursts unanswered.
4. DONE when the last write burst is acknowledged. A read word answered with ``error``
   or a write burst answered with ``error`` stops the copy: nothing more is issued (a
   write burst already requested still gets its data, which was read before the error),
   the engine takes every response still due, then fails with AXI_READ_ERROR and the
   failing word's source address, or AXI_WRITE_ERROR and the failing burst's first
   destination byte (the first error wins; ERR_ADDR holds the low 32 bits).
"""

from amaranth.hdl import Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.axi import AXI4LiteSignature
from hdl.common.command import CommandStatus
from hdl.common.kernel import drive_common_registers
from hdl.common.memport import MemPortSignature
from hdl.common.regblock import RegisterBlock
from hdl.top.shared import connect_core_command, report_command
from spec.codes import BlockId, ErrorCode
from spec.memory import ADDRESS_LIMIT, PAGE_BYTES, PHYS_ADDR_BITS

from . import migrate_regmap

__all__ = ["MIGRATE_VERSION", "MAX_BURST", "MAX_OUTSTANDING", "MigrateCommandLayout",
           "MigrateCore", "MigrateEngine", "caps_word", "check_parameters"]

MIGRATE_VERSION = 1
MAX_BURST = 128          # words; CAPS has 8 bits for it
MAX_OUTSTANDING = 16     # read (and write) bursts in flight
LENGTH_BITS = 32


def check_parameters(data_width, max_burst, max_outstanding):
    """One clear ``ValueError``/``TypeError`` for a parameter the engine does not build."""
    for name, value in (("data_width", data_width), ("max_burst", max_burst),
                        ("max_outstanding", max_outstanding)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an integer, not {value!r}")
    if data_width not in (64, 128, 256, 512):
        raise ValueError(f"data_width must be 64, 128, 256 or 512 bits, not {data_width}")
    if not (1 <= max_burst <= MAX_BURST and max_burst & (max_burst - 1) == 0):
        raise ValueError(f"max_burst must be a power of two in 1..{MAX_BURST} words, "
                         f"not {max_burst}")
    if not 2 <= max_outstanding <= MAX_OUTSTANDING:
        raise ValueError(f"max_outstanding must be 2..{MAX_OUTSTANDING} bursts, "
                         f"not {max_outstanding}")


def caps_word(data_width, max_burst, max_outstanding):
    """CAPS of the engine: bits 7:0 read bursts in flight (``max_outstanding``), 15:8 bus
    width in bytes, 23:16 the largest burst in words (``max_burst``)."""
    return max_outstanding | (data_width // 8) << 8 | max_burst << 16


class MigrateCommandLayout(data.StructLayout):
    """The copy the registers describe: ``src``, ``dst`` (64-bit byte addresses) and
    ``length`` (bytes)."""
    def __init__(self):
        super().__init__({"src": 64, "dst": 64, "length": LENGTH_BITS})


class _Bursts:
    """The burst cut of one address stream: ``addr`` (bus aligned), ``left`` (words not
    yet covered) and ``length``, the next burst's words: the smallest of ``max_burst``,
    the words to the end of the 4 KiB page and ``left``."""

    def __init__(self, m, name, bus_bytes, max_burst):
        self.addr = Signal(PHYS_ADDR_BITS, name=f"{name}_addr")
        self.left = Signal(LENGTH_BITS, name=f"{name}_left")
        self.length = Signal(range(max_burst + 1), name=f"{name}_len")
        shift = exact_log2(bus_bytes)
        to_page = Signal(range(PAGE_BYTES // bus_bytes + 1), name=f"{name}_to_page")
        m.d.comb += to_page.eq((PAGE_BYTES - self.addr[:12]) >> shift)
        capped = Mux(to_page < max_burst, to_page, max_burst)
        m.d.comb += self.length.eq(Mux(self.left < capped, self.left, capped))
        self._shift = shift

    def start(self, m, addr, words):
        m.d.sync += [self.addr.eq(addr), self.left.eq(words)]

    def advance(self, m):
        m.d.sync += [self.addr.eq(self.addr + (self.length << self._shift)),
                     self.left.eq(self.left - self.length)]


class MigrateCore(wiring.Component):
    """The copier (see the module docstring for its rules).

    Members: ``cmd`` (``In(MigrateCommandLayout)``, read combinationally for the checks
    and sampled on ``launch``), ``refuse_code`` / ``refuse_addr`` (the checks' verdict),
    ``launch`` (``In``: run ``cmd``), ``finish`` / ``fail`` (one-cycle ends) with
    ``fail_code`` / ``fail_addr``, ``mem`` (``Out(MemPortSignature(data_width))``) and
    ``idle`` (no copy running).
    """

    def __init__(self, data_width=128, *, max_burst=16, max_outstanding=8):
        check_parameters(data_width, max_burst, max_outstanding)
        self.data_width, self.max_burst, self.max_outstanding = (
            data_width, max_burst, max_outstanding)
        self.bus_bytes = data_width // 8
        self.buffer_words = max_burst * max_outstanding
        super().__init__({
            "cmd": In(MigrateCommandLayout()),
            "refuse_code": Out(8),
            "refuse_addr": Out(32),
            "launch": In(1),
            "finish": Out(1),
            "fail": Out(1),
            "fail_code": Out(8),
            "fail_addr": Out(32),
            "mem": Out(MemPortSignature(data_width)),
            "idle": Out(1),
        })

    def _checks(self, m):
        cmd, shift = self.cmd, exact_log2(self.bus_bytes)
        checks = [
            (cmd.length == 0, ErrorCode.BAD_COMMAND, 0),
            (cmd.src + cmd.length > ADDRESS_LIMIT, ErrorCode.BAD_COMMAND, cmd.src[:32]),
            (cmd.dst + cmd.length > ADDRESS_LIMIT, ErrorCode.BAD_COMMAND, cmd.dst[:32]),
            ((cmd.dst > cmd.src) & (cmd.dst < cmd.src + cmd.length), ErrorCode.BAD_COMMAND,
             cmd.dst[:32]),
            (cmd.src[:shift] != 0, ErrorCode.MISALIGNED, cmd.src[:32]),
            (cmd.dst[:shift] != 0, ErrorCode.MISALIGNED, cmd.dst[:32]),
            (cmd.length[:shift] != 0, ErrorCode.MISALIGNED, cmd.length),
        ]
        code, addr = Const(ErrorCode.NONE, 8), Const(0, 32)
        for fails, fail_code, fail_addr in reversed(checks):
            code = Mux(fails, fail_code, code)
            addr = Mux(fails, fail_addr, addr)
        m.d.comb += [self.refuse_code.eq(code), self.refuse_addr.eq(addr)]

    def elaborate(self, platform):
        m = Module()
        self._checks(m)
        bb, depth, outstanding = self.bus_bytes, self.buffer_words, self.max_outstanding
        shift = exact_log2(bb)
        mem = self.mem

        # The read buffer: every word asked for and not yet written has a place here.
        # SyncFIFOBuffered refuses a write while its memory (depth - 1 words) is full, even
        # when its output register is about to take a word from it: one word beyond the
        # reservation keeps ``w_rdy`` high whenever at most ``depth`` words are held.
        buffer = m.submodules.buffer = ResetInserter(self.launch)(
            SyncFIFOBuffered(width=self.data_width, depth=depth + 1))
        # First destination byte of each write burst not yet answered (for ERR_ADDR).
        answers = m.submodules.answers = ResetInserter(self.launch)(
            SyncFIFO(width=32, depth=outstanding))

        running = Signal()
        stopped = Signal()           # an error was seen: issue nothing more
        error_code = Signal(8)
        error_addr = Signal(32)
        reserved = Signal(range(depth + 1))      # words asked for, not yet written
        rd_bursts = Signal(range(outstanding + 1))   # read bursts not fully answered
        avail = Signal(range(depth + 1))         # buffered words no write burst claimed
        granted = Signal(LENGTH_BITS)            # words claimed by write bursts, not sent
        wr_bursts = Signal(range(outstanding + 1))   # write bursts not yet answered
        rd_word_addr = Signal(PHYS_ADDR_BITS)    # source address of the next read word

        rd = _Bursts(m, "rd", bb, self.max_burst)
        wr = _Bursts(m, "wr", bb, self.max_burst)
        wd = _Bursts(m, "wd", bb, self.max_burst)    # the write data's own cut, for last
        beat = Signal(range(self.max_burst + 1))         # word of the current write burst

        with m.If(self.launch):
            words = self.cmd.length >> shift
            rd.start(m, self.cmd.src[:PHYS_ADDR_BITS], words)
            wr.start(m, self.cmd.dst[:PHYS_ADDR_BITS], words)
            wd.start(m, self.cmd.dst[:PHYS_ADDR_BITS], words)
            m.d.sync += [running.eq(1), stopped.eq(0), error_code.eq(ErrorCode.NONE),
                         error_addr.eq(0), reserved.eq(0), rd_bursts.eq(0), avail.eq(0),
                         granted.eq(0), wr_bursts.eq(0), beat.eq(0),
                         rd_word_addr.eq(self.cmd.src[:PHYS_ADDR_BITS])]

        # --- Read requests. An offered burst stays offered until taken (even past an
        # error: its words are then received and dropped).
        rd_held = Signal()
        m.d.sync += rd_held.eq(mem.rd_req.valid & ~mem.rd_req.ready)
        rd_go = (running & ~stopped & (rd.left != 0) & (reserved + rd.length <= depth)
                 & (rd_bursts < outstanding))
        m.d.comb += [
            mem.rd_req.valid.eq(rd_held | rd_go),
            mem.rd_req.payload.addr.eq(rd.addr),
            mem.rd_req.payload.len.eq(rd.length - 1),
        ]
        rd_taken = mem.rd_req.valid & mem.rd_req.ready
        with m.If(rd_taken):
            rd.advance(m)

        # --- Read data into the buffer (dropped after an error).
        resp = mem.rd_resp.payload
        m.d.comb += mem.rd_resp.ready.eq(buffer.w_rdy | stopped)
        rd_word = mem.rd_resp.valid & mem.rd_resp.ready
        keep = rd_word & ~stopped & ~resp.error
        m.d.comb += [buffer.w_data.eq(resp.data), buffer.w_en.eq(keep)]
        read_error = rd_word & resp.error & ~stopped
        with m.If(rd_word):
            m.d.sync += rd_word_addr.eq(rd_word_addr + bb)
        dropped = rd_word & ~keep

        # --- Write requests: a burst once all its words are buffered.
        wr_held = Signal()
        m.d.sync += wr_held.eq(mem.wr_req.valid & ~mem.wr_req.ready)
        wr_go = (running & ~stopped & (wr.left != 0) & (avail >= wr.length)
                 & (wr_bursts < outstanding) & answers.w_rdy)
        m.d.comb += [
            mem.wr_req.valid.eq(wr_held | wr_go),
            mem.wr_req.payload.addr.eq(wr.addr),
            mem.wr_req.payload.len.eq(wr.length - 1),
            answers.w_data.eq(wr.addr[:32]),
        ]
        wr_taken = mem.wr_req.valid & mem.wr_req.ready
        m.d.comb += answers.w_en.eq(wr_taken)
        with m.If(wr_taken):
            wr.advance(m)

        # --- Write data: the claimed words, in order, ``last`` on each burst's final one.
        last = beat == wd.length - 1
        m.d.comb += [
            mem.wr_data.valid.eq((granted != 0) & buffer.r_rdy),
            mem.wr_data.payload.data.eq(buffer.r_data),
            mem.wr_data.payload.strb.eq((1 << bb) - 1),
            mem.wr_data.payload.last.eq(last),
        ]
        sent = mem.wr_data.valid & mem.wr_data.ready
        m.d.comb += buffer.r_en.eq(sent)
        with m.If(sent):
            with m.If(last):
                wd.advance(m)
                m.d.sync += beat.eq(0)
            with m.Else():
                m.d.sync += beat.eq(beat + 1)

        # --- Write responses.
        m.d.comb += mem.wr_resp.ready.eq(1)
        answered = mem.wr_resp.valid & mem.wr_resp.ready
        m.d.comb += answers.r_en.eq(answered)
        write_error = answered & mem.wr_resp.payload.error & ~stopped & ~read_error

        # --- The counters.
        with m.If(~self.launch):
            m.d.sync += [
                reserved.eq(reserved + Mux(rd_taken, rd.length, 0) - dropped - sent),
                avail.eq(avail + keep - Mux(wr_taken, wr.length, 0)),
                granted.eq(granted + Mux(wr_taken, wr.length, 0) - sent),
                rd_bursts.eq(rd_bursts + rd_taken - (rd_word & resp.last)),
                wr_bursts.eq(wr_bursts + wr_taken - answered),
            ]
        with m.If(read_error):
            m.d.sync += [stopped.eq(1), error_code.eq(ErrorCode.AXI_READ_ERROR),
                         error_addr.eq(rd_word_addr[:32])]
        with m.If(write_error):
            m.d.sync += [stopped.eq(1), error_code.eq(ErrorCode.AXI_WRITE_ERROR),
                         error_addr.eq(answers.r_data)]

        # --- The end: everything issued is answered (and, without an error, all copied).
        quiet = (~rd_held & ~wr_held & (rd_bursts == 0) & (wr_bursts == 0) & (granted == 0)
                 & ~mem.rd_req.valid & ~mem.wr_req.valid)
        done = running & ~stopped & quiet & (rd.left == 0) & (wr.left == 0)
        failed = running & stopped & quiet
        m.d.comb += [
            self.finish.eq(done), self.fail.eq(failed),
            self.fail_code.eq(error_code), self.fail_addr.eq(error_addr),
            self.idle.eq(~running),
        ]
        with m.If(done | failed):
            m.d.sync += running.eq(0)
        return m


class _SharedTime(wiring.Component):
    """The TIME_LO / TIME_HI pair on a timebase that comes from outside (the tile's):
    ``time_hi`` latches ``now``'s high word on ``read_lo``, as
    :class:`hdl.common.timebase.Timebase` does for its own counter."""

    def __init__(self):
        super().__init__({"now": In(64), "read_lo": In(1), "time_hi": Out(32)})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.read_lo):
            m.d.sync += self.time_hi.eq(self.now[32:])
        return m


class MigrateEngine(wiring.Component):
    """The cache-migrate engine: register block, command status and :class:`MigrateCore`.

    Members: ``bus`` (``In(AXI4LiteSignature(16, 32))``: its register block,
    ``hdl/tile/migrate.rdl``), ``mem`` (``Out(MemPortSignature(data_width))``), ``now``
    (``In(64)``: the tile's timebase; TIME and the CTR read it), ``interrupt``
    (``Out(1)``, level: IRQ_STATUS & IRQ_ENABLE) and ``done`` / ``error`` (``Out(1)``:
    STATUS.DONE / STATUS.ERROR, for the command sequencer).

    Parameters: ``data_width`` (64, 128, 256 or 512 bits), ``max_burst`` (words per
    burst, a power of two in 1..128; default 16, the MC's largest burst) and
    ``max_outstanding`` (read bursts in flight, 2..16; the read buffer holds
    ``max_burst · max_outstanding`` words; default 8: enough to stream a bus word a cycle
    up to a memory latency of about ``(max_outstanding - 2) · max_burst`` cycles, 94 for
    the defaults; see ``golden/migrate_latency.py``).
    """

    def __init__(self, data_width=128, *, max_burst=16, max_outstanding=8):
        check_parameters(data_width, max_burst, max_outstanding)
        self.data_width, self.max_burst, self.max_outstanding = (
            data_width, max_burst, max_outstanding)
        super().__init__({
            "bus": In(AXI4LiteSignature(16, 32)),
            "mem": Out(MemPortSignature(data_width)),
            "now": In(64),
            "interrupt": Out(1),
            "done": Out(1),
            "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = RegisterBlock(migrate_regmap)
        m.submodules.time = time = _SharedTime()
        m.submodules.status = status = CommandStatus()
        m.submodules.core = core = MigrateCore(self.data_width, max_burst=self.max_burst,
                                               max_outstanding=self.max_outstanding)
        wiring.connect(m, wiring.flipped(self.bus), regs.bus)
        wiring.connect(m, wiring.flipped(self.mem), core.mem)
        m.d.comb += time.now.eq(self.now)

        drive_common_registers(m, regs, time, BlockId.MIGRATE, MIGRATE_VERSION,
                               caps_word(self.data_width, self.max_burst,
                                         self.max_outstanding))
        m.d.comb += [
            core.cmd.src.eq(regs.src_lo.addr | regs.src_hi.addr << 32),
            core.cmd.dst.eq(regs.dst_lo.addr | regs.dst_hi.addr << 32),
            core.cmd.length.eq(regs.length.value),
        ]
        connect_core_command(m, regs, status, core)
        report_command(m, self, regs, status, time, cycle_counter=True)
        m.d.comb += [self.done.eq(status.done), self.error.eq(status.error)]
        return m
