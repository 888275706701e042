"""The tile's command sequencer: launches a planned command list on the tile's blocks at
its planned cycles, without the host (docs/tile/sequencer.md; the list's and the log's
words are :mod:`spec.sequencer`'s).

:class:`Sequencer` is a block like the migrate engine: its register block on ``bus``
(``hdl/tile/sequencer.rdl``), the command list and the log on ``mem`` (a
:class:`~hdl.common.memport.MemPortSignature` port), the blocks' registers on ``ctl`` (an
AXI4-Lite *master* of the tile's 20-bit control space: a second master of the control
decoder), the tile's timebase on ``now``, and each window's STATUS.DONE / STATUS.ERROR
on ``done`` / ``error`` (bit w: window w).

A run (:class:`SequencerCore`), started by START:

1. Checks at START: LIST or LOG at or past 2^48 → BAD_COMMAND; LIST not a multiple of
   the bus width, LOG not of 32 bytes → MISALIGNED. T0 = the cycle after START is
   performed. The list is read ahead in bursts (``spec.sequencer``: header, then the
   entries); a header of another magic or version is BAD_LIST, a COUNT beyond its count
   BAD_COMMAND.
2. The entries, one at a time in list order: the register writes before START are
   written at once (the blocks sample their command at START, so this may overlap the
   target's running command). Then the entry is *armed*: it launches, with START's
   write, in the first cycle in which (a) ``now`` ≥ T0 + PLANNED, (b) every dependency
   has ended (entry INDEX on TARGET has ended when that target's latest ended entry is
   INDEX or later: a target ends its entries in list order), (c) its target has no
   command of the run outstanding whose CTR is still to be read. LAUNCH is the cycle
   the START write's AW and W are both transferred; an entry that is ready at its
   planned cycle launches exactly then (``ctl`` ready at once).
3. Late: an armed entry still waiting at or after its planned cycle is late; FLAGS say
   why (LATE_DEPENDENCY: a dependency had not ended when the sequencer looked at or
   after the planned cycle; LATE_TARGET: the target was not free). With
   MODE.STOP_ON_LATE a LATE_DEPENDENCY stops the run there instead: the entry gets a
   NOT_LAUNCHED record and the run fails with LATE_DEPENDENCY (ERR_ADDR its index).
4. Completion: once START's B response is in, the target's ``done`` or ``error`` ends
   the command; DONE is that cycle and CTR the cycle before (the blocks' CTR takes the
   timebase in the cycle before STATUS.DONE shows, ``hdl/common/command.py`` rule 2;
   the sequencer reads no CTR, so its reads cannot delay a launch). The target is free
   for its next entry in the next cycle, once the record is in the log (a record is
   written to LOG + 32 · index on ``mem`` as soon as the port takes it). After an ERROR
   the record's CODE is read from the target's ERROR register.
5. A command that ends in ERROR (COMMAND_FAILED: entries launched up to the cycle it is
   seen still run), a control access answered SLVERR or DECERR (CONTROL_ERROR), a bad
   entry (BAD_ENTRY) or a late dependency in stop mode stop the launching; every
   command already launched is waited for and logged, then the run fails with the
   first error (ERR_ADDR: the entry's index; the word's or the record's address for
   AXI_READ_ERROR / AXI_WRITE_ERROR). Otherwise the run is DONE when the last record is
   written (CTR: that cycle).
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, enum, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.common.axi import AXI4LiteSignature, AxiResp
from hdl.common.command import CommandStatus
from hdl.common.kernel import drive_common_registers
from hdl.common.memport import MemPortSignature
from hdl.common.regblock import RegisterBlock
from hdl.top.shared import connect_core_command, report_command
from spec import sequencer as fmt
from spec.codes import BlockId
from spec.memory import ADDRESS_LIMIT, PAGE_BYTES, PHYS_ADDR_BITS
from spec.sequencer import RecordFlag, SequencerError
from spec.tile import BLOCK_WINDOW_BITS, CONTROL_ADDR_BITS, TileBlock

from . import sequencer_regmap

__all__ = ["SEQUENCER_VERSION", "DEFAULT_TARGETS", "SequencerCommandLayout",
           "SequencerCore", "Sequencer", "check_parameters", "caps_word"]

SEQUENCER_VERSION = 1
DEFAULT_TARGETS = (TileBlock.MA, TileBlock.VA, TileBlock.MIGRATE)
WINDOWS = 1 << (CONTROL_ADDR_BITS - BLOCK_WINDOW_BITS)
_ERROR = 0x000C          # the common ERROR register (docs/design.md)
_BURST = 16                                           # beats per list read


def check_parameters(data_width, targets, max_deps):
    """One clear ``ValueError``/``TypeError`` for a parameter the sequencer does not build."""
    for name, value in (("data_width", data_width), ("max_deps", max_deps)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an integer, not {value!r}")
    if data_width not in (64, 128, 256, 512):
        raise ValueError(f"data_width must be 64, 128, 256 or 512 bits, not {data_width}")
    targets = tuple(targets)
    if not targets or len(set(targets)) != len(targets) or not all(
            isinstance(t, int) and 0 < t < WINDOWS and t != TileBlock.SEQUENCER
            for t in targets):
        raise ValueError(f"targets must be distinct windows in 1..{WINDOWS - 1} other than "
                         f"SEQUENCER, not {targets!r}")
    if not 1 <= max_deps <= fmt.MAX_NDEPS:
        raise ValueError(f"max_deps must be in 1..{fmt.MAX_NDEPS}, not {max_deps}")


def caps_word(data_width, targets, max_deps):
    """CAPS: bits 15:0 one bit per target window, 23:16 bus width in bytes, 27:24
    ``max_deps``, 31:28 the format version."""
    return (sum(1 << t for t in targets) | (data_width // 8) << 16 | max_deps << 24
            | fmt.VERSION << 28)


class SequencerCommandLayout(data.StructLayout):
    """A run as the registers describe it."""
    def __init__(self):
        super().__init__({"list": 64, "log": 64, "count": 16, "stop_on_late": 1})


class _Lite(wiring.Component):
    """One AXI4-Lite transaction at a time on ``bus``: ``go`` with ``write``, ``addr``,
    ``wdata`` starts one when ``idle``; ``end`` pulses with ``resp`` (and ``rdata``) when
    it is answered; ``sent`` pulses in the cycle a write's AW and W are both transferred."""

    def __init__(self):
        super().__init__({
            "bus": Out(AXI4LiteSignature(CONTROL_ADDR_BITS, 32)),
            "go": In(1), "write": In(1), "addr": In(CONTROL_ADDR_BITS), "wdata": In(32),
            "idle": Out(1), "sent": Out(1), "end": Out(1), "resp": Out(AxiResp),
            "rdata": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        aw, w, b, ar, r = (Signal(name=n) for n in ("aw", "w", "b", "ar", "r"))
        m.d.comb += self.idle.eq(~(aw | w | b | ar | r))
        # A transaction is offered in the cycle of ``go`` (so a launch can be transferred
        # in the very cycle it is decided), then held from registers until taken.
        addr, wdata = Signal(CONTROL_ADDR_BITS), Signal(32)
        new_w = self.go & self.idle & self.write
        new_r = self.go & self.idle & ~self.write
        awv, wv, arv = aw | new_w, w | new_w, ar | new_r
        m.d.comb += [bus.awvalid.eq(awv), bus.wvalid.eq(wv), bus.bready.eq(b),
                     bus.arvalid.eq(arv), bus.rready.eq(r), bus.wstrb.eq(0b1111),
                     bus.awaddr.eq(Mux(self.idle, self.addr, addr)),
                     bus.araddr.eq(Mux(self.idle, self.addr, addr)),
                     bus.wdata.eq(Mux(self.idle, self.wdata, wdata))]
        with m.If(self.go & self.idle):
            m.d.sync += [addr.eq(self.addr), wdata.eq(self.wdata)]
        aw_now = awv & bus.awready
        w_now = wv & bus.wready
        m.d.sync += [aw.eq(awv & ~aw_now), w.eq(wv & ~w_now)]
        # the later of the two transfers: both in this cycle, or one now, the other before
        m.d.comb += self.sent.eq((aw_now | w_now) & (aw_now | ~awv) & (w_now | ~wv))
        with m.If(self.sent):
            m.d.sync += b.eq(1)
        with m.If(b & bus.bvalid):
            m.d.sync += b.eq(0)
            m.d.comb += [self.end.eq(1), self.resp.eq(bus.bresp)]
        m.d.sync += ar.eq(arv & ~bus.arready)
        with m.If(arv & bus.arready):
            m.d.sync += r.eq(1)
        with m.If(r & bus.rvalid):
            m.d.sync += r.eq(0)
            m.d.comb += [self.end.eq(1), self.resp.eq(bus.rresp), self.rdata.eq(bus.rdata)]
        return m


class _ListReader(wiring.Component):
    """The command list as a stream of words: from ``addr`` (bus aligned, sampled on
    ``start``) up to ``limit`` words (``halt``: ask for no more), read ahead in bursts of
    at most 16 beats (never across 4 KiB) into a buffer of 32 beats. ``word`` carries each word with ``error``
    (its beat was answered with an error). ``idle``: no read unanswered."""

    def __init__(self, data_width):
        self.data_width = data_width
        super().__init__({
            "mem_rd_req": Out(MemPortSignature(data_width).members["rd_req"].signature),
            "mem_rd_resp": In(MemPortSignature(data_width).members["rd_resp"].signature),
            "start": In(1), "halt": In(1), "addr": In(PHYS_ADDR_BITS), "limit": In(32),
            "word": Out(wiring.Signature({"valid": Out(1), "ready": In(1),
                                          "data": Out(32), "error": Out(1)})),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        dw, per = self.data_width, self.data_width // 32
        shift = exact_log2(dw // 8)
        depth = 2 * _BURST
        fifo = m.submodules.fifo = ResetInserter(self.start)(
            SyncFIFOBuffered(width=dw + 1, depth=depth + 1))
        addr = Signal(PHYS_ADDR_BITS)
        asked = Signal(32)                  # beats asked for
        due = Signal(range(depth + 1))      # beats asked for, not yet in the buffer
        beats = Signal(32)
        m.d.comb += beats.eq((self.limit + per - 1) >> exact_log2(per))
        to_page = Signal(range(PAGE_BYTES // (dw // 8) + 1))
        m.d.comb += to_page.eq((PAGE_BYTES - addr[:12]) >> shift)
        n = Signal(range(_BURST + 1))
        left = beats - asked
        capped = Signal(range(_BURST + 1))
        m.d.comb += capped.eq(Mux(to_page < _BURST, to_page, _BURST))
        m.d.comb += n.eq(Mux(left < capped, left, capped))
        req = self.mem_rd_req
        m.d.comb += [req.payload.addr.eq(addr), req.payload.len.eq(n - 1),
                     req.valid.eq(~self.halt & (asked < beats) & (n != 0)
                                  & (due + fifo.level + n <= depth))]
        issued = req.valid & req.ready
        with m.If(self.start):
            m.d.sync += [addr.eq(self.addr), asked.eq(0)]
        with m.Elif(issued):
            m.d.sync += [addr.eq(addr + (n << shift)), asked.eq(asked + n)]
        resp = self.mem_rd_resp
        m.d.comb += [fifo.w_data.eq(Cat(resp.payload.data, resp.payload.error)),
                     fifo.w_en.eq(resp.valid), resp.ready.eq(1)]
        m.d.sync += due.eq(due + Mux(issued, n, 0) - resp.valid)
        m.d.comb += self.idle.eq((due == 0) & ~req.valid)
        # words out of the head beat
        k = Signal(range(per))
        words = Array(fifo.r_data[32 * i:32 * i + 32] for i in range(per))
        m.d.comb += [self.word.valid.eq(fifo.r_rdy), self.word.data.eq(words[k]),
                     self.word.error.eq(fifo.r_data[dw])]
        with m.If(self.start):
            m.d.sync += k.eq(0)
        with m.Elif(self.word.valid & self.word.ready):
            m.d.sync += k.eq(Mux(k == per - 1, 0, k + 1))
            m.d.comb += fifo.r_en.eq(k == per - 1)
        return m


class _Stop(enum.Enum, shape=8):
    """Why launching stopped (the run's ERROR code), a value of SequencerError."""
    NONE = SequencerError.NONE
    BAD_COMMAND = SequencerError.BAD_COMMAND
    AXI_READ_ERROR = SequencerError.AXI_READ_ERROR
    AXI_WRITE_ERROR = SequencerError.AXI_WRITE_ERROR
    BAD_LIST = SequencerError.BAD_LIST
    BAD_ENTRY = SequencerError.BAD_ENTRY
    LATE_DEPENDENCY = SequencerError.LATE_DEPENDENCY
    COMMAND_FAILED = SequencerError.COMMAND_FAILED
    CONTROL_ERROR = SequencerError.CONTROL_ERROR


class _Target:
    """The run's state of one target: its outstanding command (``busy`` from its launch
    until its end is seen, ``armed`` once its START is answered), its latest ended entry
    (``last``, valid with ``any``), and the record of its last ended command until the
    log has it (``pending``)."""

    def __init__(self, k):
        def sig(width, name):
            return Signal(width, name=f"t{k}_{name}")
        self.busy, self.armed, self.any = sig(1, "busy"), sig(1, "armed"), sig(1, "any")
        self.index, self.last = sig(16, "index"), sig(16, "last")
        self.flags, self.late, self.launch = sig(8, "flags"), sig(32, "late"), sig(64, "launch")
        self.pending, self.failed = sig(1, "pending"), sig(1, "failed")
        self.held, self.h_failed, self.h_done = sig(1, "held"), sig(1, "h_failed"), \
            sig(64, "h_done")
        self.p_index, self.p_flags = sig(16, "p_index"), sig(8, "p_flags")
        self.p_late, self.p_launch, self.p_done = sig(32, "p_late"), sig(64, "p_launch"), \
            sig(64, "p_done")


class SequencerCore(wiring.Component):
    """The run (see the module docstring for its rules).

    Members: ``cmd`` (``In(SequencerCommandLayout)``: read for the checks and sampled on
    ``launch``), ``refuse_code`` / ``refuse_addr``, ``launch``, ``finish`` / ``fail`` with
    ``fail_code`` / ``fail_addr`` (the shared command contract), ``mem``
    (``Out(MemPortSignature(data_width))``), ``ctl`` (``Out(AXI4LiteSignature(20, 32))``,
    the control master), ``now`` (``In(64)``), ``done`` / ``error`` (``In(16)``: bit w,
    window w's STATUS.DONE / STATUS.ERROR), and the counters ``launched``, ``completed``,
    ``late`` and ``t0`` (``Out``) for the registers.
    """

    def __init__(self, data_width=128, *, targets=DEFAULT_TARGETS, max_deps=4):
        check_parameters(data_width, targets, max_deps)
        self.data_width, self.targets = data_width, tuple(int(t) for t in targets)
        self.max_deps = max_deps
        super().__init__({
            "cmd": In(SequencerCommandLayout()),
            "refuse_code": Out(8), "refuse_addr": Out(32),
            "launch": In(1), "finish": Out(1), "fail": Out(1),
            "fail_code": Out(8), "fail_addr": Out(32),
            "mem": Out(MemPortSignature(data_width)),
            "ctl": Out(AXI4LiteSignature(CONTROL_ADDR_BITS, 32)),
            "now": In(64), "done": In(WINDOWS), "error": In(WINDOWS),
            "launched": Out(32), "completed": Out(32), "late": Out(32), "t0": Out(64),
        })

    def _refuse(self, m):
        cmd = self.cmd
        bus_mask = self.data_width // 8 - 1
        m.d.comb += self.refuse_code.eq(SequencerError.NONE)
        with m.If((cmd.list >= ADDRESS_LIMIT) | (cmd.log >= ADDRESS_LIMIT)):
            m.d.comb += [self.refuse_code.eq(SequencerError.BAD_COMMAND),
                         self.refuse_addr.eq(Mux(cmd.list >= ADDRESS_LIMIT, cmd.list, cmd.log))]
        with m.Elif((cmd.list & bus_mask) != 0):
            m.d.comb += [self.refuse_code.eq(SequencerError.MISALIGNED),
                         self.refuse_addr.eq(cmd.list)]
        with m.Elif(cmd.log[:5] != 0):
            m.d.comb += [self.refuse_code.eq(SequencerError.MISALIGNED),
                         self.refuse_addr.eq(cmd.log)]

    def elaborate(self, platform):
        m = Module()
        self._refuse(m)
        m.submodules.lite = lite = _Lite()
        m.submodules.reader = reader = _ListReader(self.data_width)
        wiring.connect(m, wiring.flipped(self.ctl), lite.bus)
        wiring.connect(m, reader.mem_rd_req, wiring.flipped(self.mem.rd_req))
        resp = reader.mem_rd_resp
        m.d.comb += [resp.valid.eq(self.mem.rd_resp.valid),
                     resp.payload.eq(self.mem.rd_resp.payload),
                     self.mem.rd_resp.ready.eq(resp.ready)]
        run = Signal(SequencerCommandLayout())
        with m.If(self.launch):
            m.d.sync += [run.eq(self.cmd), self.t0.eq(self.now + 1), self.launched.eq(0),
                         self.completed.eq(0), self.late.eq(0)]
        tgt = [_Target(k) for k in range(len(self.targets))]
        s = _State(m, self, run, tgt, lite, reader)
        s.issuer()
        s.observe()
        s.completer()
        return m


class _State:
    """The issuer (entries, in list order), the observer (ends of commands) and the
    completer (CTR reads and records) of :class:`SequencerCore`, sharing ``lite``."""

    def __init__(self, m, core, run, tgt, lite, reader):
        self.m, self.core, self.run, self.tgt, self.lite, self.reader = (
            m, core, run, tgt, lite, reader)
        kbits = max(1, (len(tgt) - 1).bit_length())
        self.kbits = kbits
        self.index = Signal(16)             # the entry being issued
        self.k = Signal(kbits)              # its target
        self.window = Signal(4)
        self.nwrites = Signal(8)
        self.ndeps = Signal(4)
        self.due = Signal(64)               # T0 + PLANNED
        self.dep_index = [Signal(16, name=f"dep{j}_index") for j in range(core.max_deps)]
        self.dep_k = [Signal(kbits, name=f"dep{j}_k") for j in range(core.max_deps)]
        self.offset = Signal(16)
        self.arm_flags = Signal(8)
        self.armed = Signal()               # the issuer waits to launch
        self.issuer_go = Signal()           # the issuer offers a transaction this cycle
        self.stopping = Signal()
        self.stop_code = Signal(_Stop)
        self.stop_addr = Signal(32)
        self.stop_record = Signal()         # a NOT_LAUNCHED record is due
        self.stop_flags = Signal(8)
        self.stop_late = Signal(32)
        self.completer_idle = Signal()

    def stop(self, code, addr):
        m = self.m
        with m.If(~self.stopping):
            m.d.sync += [self.stopping.eq(1), self.stop_code.eq(code), self.stop_addr.eq(addr)]

    def lookup(self, window):
        """(found, target index) of a window."""
        m = self.m
        found, k = Signal(), Signal(self.kbits)
        for i, t in enumerate(self.core.targets):
            with m.If(window == t):
                m.d.comb += [found.eq(1), k.eq(i)]
        return found, k

    def issuer(self):
        m, core, run, tgt, lite, reader = (self.m, self.core, self.run, self.tgt, self.lite,
                                           self.reader)
        word = reader.word
        draining = Signal()
        m.d.comb += [reader.addr.eq(core.cmd.list), reader.start.eq(core.launch),
                     reader.halt.eq(self.stopping | draining)]
        limit = Signal(32)
        m.d.comb += reader.limit.eq(limit)
        position = Signal(32)               # words taken from the list
        with m.If(core.launch):
            m.d.sync += [limit.eq(fmt.HEADER_WORDS), position.eq(0), self.index.eq(0),
                         self.stopping.eq(0), self.stop_code.eq(_Stop.NONE),
                         self.stop_record.eq(0)]
        with m.Elif(word.valid & word.ready):
            m.d.sync += position.eq(position + 1)
        take = Signal()                     # a word is taken this cycle (valid)
        m.d.comb += word.ready.eq(take)
        bad_word = word.valid & word.error
        target, tk = self.lookup(word.data[:4])
        dep_found, dep_k = self.lookup(word.data[16:20])
        head = Signal(range(max(fmt.HEADER_WORDS, core.max_deps + 1)))
        have_offset = Signal()
        ok = Signal()                       # every dependency has ended
        oks = [(j >= self.ndeps) | (Array(t.any for t in tgt)[self.dep_k[j]]
                                    & (Array(t.last for t in tgt)[self.dep_k[j]]
                                       >= self.dep_index[j]))
               for j in range(core.max_deps)]
        m.d.comb += ok.eq(Cat(oks).all())
        free = ~Array(t.busy | t.held for t in tgt)[self.k]
        at_due = core.now >= self.due
        base = self.window << BLOCK_WINDOW_BITS

        with m.FSM():
            with m.State("IDLE"):
                with m.If(core.launch):
                    with m.If(core.cmd.count == 0):
                        m.next = "DRAIN"
                    with m.Else():
                        m.d.sync += head.eq(0)
                        m.next = "HEADER"
            with m.State("HEADER"):
                with m.If(bad_word):
                    self.stop(_Stop.AXI_READ_ERROR, run.list + (position << 2))
                    m.next = "DRAIN"
                with m.Elif(word.valid):
                    m.d.comb += take.eq(1)
                    m.d.sync += head.eq(head + 1)
                    with m.Switch(head):
                        with m.Case(0):
                            with m.If(word.data != fmt.MAGIC):
                                self.stop(_Stop.BAD_LIST, 0)
                                m.next = "DRAIN"
                        with m.Case(1):
                            with m.If(word.data != fmt.VERSION):
                                self.stop(_Stop.BAD_LIST, 1)
                                m.next = "DRAIN"
                        with m.Case(2):
                            with m.If((word.data < run.count) | (word.data >= fmt.MAX_ENTRIES)):
                                self.stop(_Stop.BAD_COMMAND, word.data)
                                m.next = "DRAIN"
                        with m.Case(3):
                            m.d.sync += limit.eq(fmt.HEADER_WORDS + word.data)
                            m.next = "ENTRY"
            with m.State("ENTRY"):
                with m.If(self.stopping):
                    m.next = "DRAIN"
                with m.Elif(bad_word):
                    self.stop(_Stop.AXI_READ_ERROR, run.list + (position << 2))
                    m.next = "DRAIN"
                with m.Elif(word.valid):
                    m.d.comb += take.eq(1)
                    nd, nw = word.data[8:12], word.data[16:24]
                    m.d.sync += [self.window.eq(word.data[:4]), self.k.eq(tk),
                                 self.ndeps.eq(nd), self.nwrites.eq(nw), head.eq(0)]
                    with m.If(~target | (nw == 0) | (nd > core.max_deps)
                              | ((word.data & 0xFF0000F0) != 0)):
                        self.stop(_Stop.BAD_ENTRY, self.index)
                        m.next = "DRAIN"
                    with m.Else():
                        m.next = "PLANNED"
            with m.State("PLANNED"):
                with m.If(bad_word):
                    self.stop(_Stop.AXI_READ_ERROR, run.list + (position << 2))
                    m.next = "DRAIN"
                with m.Elif(word.valid):
                    m.d.comb += take.eq(1)
                    m.d.sync += self.due.eq(core.t0 + word.data)
                    m.next = "DEPS"
                    with m.If(self.ndeps == 0):
                        m.next = "W_OFFSET"
            with m.State("DEPS"):
                with m.If(bad_word):
                    self.stop(_Stop.AXI_READ_ERROR, run.list + (position << 2))
                    m.next = "DRAIN"
                with m.Elif(word.valid):
                    m.d.comb += take.eq(1)
                    m.d.sync += head.eq(head + 1)
                    with m.Switch(head):
                        for j in range(core.max_deps):
                            with m.Case(j):
                                m.d.sync += [self.dep_index[j].eq(word.data[:16]),
                                             self.dep_k[j].eq(dep_k)]
                    with m.If(~dep_found | (word.data[:16] >= self.index)
                              | (word.data[20:] != 0)):
                        self.stop(_Stop.BAD_ENTRY, self.index)
                        m.next = "DRAIN"
                    with m.Elif(head + 1 == self.ndeps):
                        m.next = "W_OFFSET"
            with m.State("W_OFFSET"):
                with m.If(self.stopping):
                    m.next = "DRAIN"
                with m.Elif(bad_word):
                    self.stop(_Stop.AXI_READ_ERROR, run.list + (position << 2))
                    m.next = "DRAIN"
                with m.Elif(word.valid):
                    m.d.comb += take.eq(1)
                    m.d.sync += self.offset.eq(word.data[:16])
                    m.next = "W_VALUE"
            with m.State("W_VALUE"):
                last = self.nwrites == 1
                with m.If(bad_word):
                    self.stop(_Stop.AXI_READ_ERROR, run.list + (position << 2))
                    m.next = "DRAIN"
                with m.Elif(word.valid & last):
                    m.d.sync += self.arm_flags.eq(RecordFlag.VALID)
                    m.next = "ARM"
                with m.Elif(word.valid & lite.idle):
                    m.d.comb += [take.eq(1), self.issuer_go.eq(1), lite.write.eq(1),
                                 lite.addr.eq(base | self.offset), lite.wdata.eq(word.data)]
                    m.d.sync += [self.nwrites.eq(self.nwrites - 1), have_offset.eq(0)]
                    m.next = "W_WAIT"
            with m.State("W_WAIT"):
                # the next pair's offset is taken while the write is answered
                with m.If(~have_offset & word.valid & ~word.error):
                    m.d.comb += take.eq(1)
                    m.d.sync += [self.offset.eq(word.data[:16]), have_offset.eq(1)]
                with m.If(lite.end):
                    with m.If(lite.resp != AxiResp.OKAY):
                        self.stop(_Stop.CONTROL_ERROR, self.index)
                        m.next = "DRAIN"
                    with m.Elif(have_offset | (word.valid & ~word.error)):
                        m.next = "W_VALUE"
                    with m.Else():
                        m.next = "W_OFFSET"
            with m.State("ARM"):
                m.d.comb += self.armed.eq(1)
                ready = ok & free
                with m.If(self.stopping):
                    m.next = "DRAIN"
                with m.Elif(at_due & ~ok & run.stop_on_late):
                    self.stop(_Stop.LATE_DEPENDENCY, self.index)
                    m.d.sync += [self.stop_record.eq(1),
                                 self.stop_flags.eq(self.arm_flags | RecordFlag.LATE
                                                    | RecordFlag.LATE_DEPENDENCY
                                                    | RecordFlag.NOT_LAUNCHED
                                                    | Mux(free, 0, RecordFlag.LATE_TARGET)),
                                 self.stop_late.eq(_saturate(core.now - self.due))]
                    m.next = "DRAIN"
                with m.Elif(at_due & ready & lite.idle):
                    m.d.comb += [take.eq(lite.sent), self.issuer_go.eq(1), lite.write.eq(1),
                                 lite.addr.eq(base | self.offset), lite.wdata.eq(word.data)]
                    with m.If(lite.sent):
                        self._launched(m, core.now)
                        m.next = "S_WAIT"
                    with m.Else():
                        m.next = "S_SENDING"
                with m.Elif(at_due):
                    m.d.sync += self.arm_flags.eq(self.arm_flags
                                                  | Mux(ok, 0, RecordFlag.LATE_DEPENDENCY)
                                                  | Mux(free, 0, RecordFlag.LATE_TARGET))
            with m.State("S_SENDING"):
                # the START's AW or W is not taken yet: hold it (lite holds the values)
                with m.If(lite.sent):
                    m.d.comb += take.eq(1)
                    self._launched(m, core.now)
                    m.next = "S_WAIT"
            with m.State("S_WAIT"):
                with m.If(lite.end):
                    with m.If(lite.resp != AxiResp.OKAY):
                        self.stop(_Stop.CONTROL_ERROR, self.index)
                        with m.Switch(self.k):
                            for i, t in enumerate(tgt):
                                with m.Case(i):
                                    m.d.sync += t.busy.eq(0)
                        m.next = "DRAIN"
                    with m.Else():
                        with m.Switch(self.k):
                            for i, t in enumerate(tgt):
                                with m.Case(i):
                                    m.d.sync += t.armed.eq(1)
                        m.d.sync += self.index.eq(self.index + 1)
                        m.next = "ENTRY"
                        with m.If(self.index + 1 == run.count):
                            m.next = "DRAIN"
            with m.State("DRAIN"):
                m.d.comb += draining.eq(1)
                quiet = (Cat(t.busy for t in tgt) == 0) & self.completer_idle & \
                    ~self.stop_record & reader.idle
                with m.If(quiet):
                    with m.If(self.stopping):
                        m.d.comb += [core.fail.eq(1), core.fail_code.eq(self.stop_code),
                                     core.fail_addr.eq(self.stop_addr)]
                    with m.Else():
                        m.d.comb += core.finish.eq(1)
                    m.next = "IDLE"

    def _launched(self, m, now):
        """The START write's AW and W are transferred in this cycle: the launch."""
        core = self.core
        late = Signal(32)
        m.d.comb += late.eq(Mux(now > self.due, _saturate(now - self.due), 0))
        with m.Switch(self.k):
            for i, t in enumerate(self.tgt):
                with m.Case(i):
                    m.d.sync += [t.busy.eq(1), t.armed.eq(0), t.index.eq(self.index),
                                 t.launch.eq(now), t.late.eq(late),
                                 t.flags.eq(self.arm_flags | Mux(late != 0, RecordFlag.LATE, 0))]
        m.d.sync += core.launched.eq(core.launched + 1)
        with m.If(late != 0):
            m.d.sync += core.late.eq(core.late + 1)

    def observe(self):
        """A target's DONE or ERROR ends its armed command: its record goes to the
        completer (``pending``) at once, or, while the target's previous record is still
        pending, is held (``held``, with the cycle) until it is taken. The target is free
        for its next entry once its record is pending. An ERROR stops the run."""
        m, core = self.m, self.core
        for t, window in zip(self.tgt, core.targets, strict=True):
            ended = core.done[window] | core.error[window]

            def record(done, failed, t=t):
                m.d.sync += [t.pending.eq(1), t.failed.eq(failed), t.p_index.eq(t.index),
                             t.p_late.eq(t.late), t.p_launch.eq(t.launch), t.p_done.eq(done),
                             t.p_flags.eq(t.flags | Mux(failed, RecordFlag.ERROR, 0))]

            with m.If(t.busy & t.armed & ended):
                m.d.sync += [t.busy.eq(0), t.armed.eq(0), t.last.eq(t.index), t.any.eq(1)]
                with m.If(t.pending):
                    m.d.sync += [t.held.eq(1), t.h_done.eq(core.now),
                                 t.h_failed.eq(core.error[window])]
                with m.Else():
                    record(core.now, core.error[window])
                with m.If(core.error[window]):
                    self.stop(_Stop.COMMAND_FAILED, t.index)
            with m.Elif(t.held & ~t.pending):
                m.d.sync += t.held.eq(0)
                record(t.h_done, t.h_failed)
        with m.If(core.launch):
            for t in self.tgt:
                m.d.sync += [t.busy.eq(0), t.any.eq(0), t.armed.eq(0), t.pending.eq(0),
                             t.held.eq(0)]

    def completer(self):
        """Writes the pending records (and the stop's NOT_LAUNCHED one) to the log; after
        an ERROR it first reads the target's ERROR register for the record's CODE."""
        m, core, tgt, lite = self.m, self.core, self.tgt, self.lite
        dw = core.data_width
        rec = Signal(data.ArrayLayout(32, fmt.RECORD_WORDS))
        job = Signal(self.kbits)
        index = Signal(16)
        pick, found = Signal(self.kbits), Signal()
        for i in reversed(range(len(tgt))):
            with m.If(tgt[i].pending):
                m.d.comb += [pick.eq(i), found.eq(1)]
        m.d.comb += lite.go.eq(self.issuer_go)
        window = Array(Const(w, 4) for w in core.targets)[job]
        beats = max(1, 256 // dw)
        beat = Signal(range(beats + 1))
        slot = Signal(64)
        m.d.comb += slot.eq(self.run.log + (index << 5))

        def take(k, code):
            t = _Pick(tgt, k)
            m.d.sync += [rec[0].eq(t.p_index | t.p_flags << 16 | code << 24),
                         rec[1].eq(t.p_late), rec[2].eq(t.p_launch[:32]),
                         rec[3].eq(t.p_launch[32:]), rec[4].eq(t.p_done[:32]),
                         rec[5].eq(t.p_done[32:]),
                         # the CTR took the timebase in the cycle before DONE was seen
                         # (hdl/common/command.py, rule 2); none after an error
                         rec[6].eq(Mux(t.failed, 0, (t.p_done - 1)[:32])),
                         rec[7].eq(Mux(t.failed, 0, (t.p_done - 1)[32:])),
                         index.eq(t.p_index)]
            with m.Switch(k):
                for i, tt in enumerate(tgt):
                    with m.Case(i):
                        m.d.sync += tt.pending.eq(0)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.completer_idle.eq(~found & ~self.stop_record)
                with m.If(self.stop_record):
                    m.d.sync += [rec[0].eq(self.index | self.stop_flags << 16),
                                 rec[1].eq(self.stop_late),
                                 *(rec[w].eq(0) for w in range(2, fmt.RECORD_WORDS)),
                                 self.stop_record.eq(0), index.eq(self.index)]
                    m.next = "W_REQ"
                with m.Elif(found & Array(t.failed for t in tgt)[pick]):
                    m.d.sync += job.eq(pick)
                    m.next = "ERROR"
                with m.Elif(found):
                    take(pick, 0)
                    m.next = "W_REQ"
            with m.State("ERROR"):
                with m.If(~self.issuer_go & lite.idle):
                    m.d.comb += [lite.go.eq(1), lite.write.eq(0),
                                 lite.addr.eq(window << BLOCK_WINDOW_BITS | _ERROR)]
                    m.next = "ERROR_R"
            with m.State("ERROR_R"):
                with m.If(lite.end):
                    take(job, Mux(lite.resp == AxiResp.OKAY, lite.rdata[:8], 0))
                    with m.If(lite.resp != AxiResp.OKAY):
                        self.stop(_Stop.CONTROL_ERROR, Array(t.p_index for t in tgt)[job])
                    m.next = "W_REQ"
            with m.State("W_REQ"):
                req = core.mem.wr_req
                m.d.comb += [req.valid.eq(1), req.payload.addr.eq(slot & ~(dw // 8 - 1)),
                             req.payload.len.eq(beats - 1)]
                with m.If(req.ready):
                    m.d.sync += beat.eq(0)
                    m.next = "W_DATA"
            with m.State("W_DATA"):
                wd = core.mem.wr_data
                flat = rec.as_value()
                if dw == 512:        # the record is one half of the beat
                    m.d.comb += [wd.payload.data.eq(flat.replicate(2)),
                                 wd.payload.strb.eq(Mux(slot[5], Const(0xFFFFFFFF << 32, 64),
                                                        Const(0xFFFFFFFF, 64)))]
                else:
                    pieces = Array(flat[i * dw:(i + 1) * dw] for i in range(beats))
                    m.d.comb += [wd.payload.data.eq(pieces[beat]),
                                 wd.payload.strb.eq((1 << (dw // 8)) - 1)]
                m.d.comb += [wd.valid.eq(1), wd.payload.last.eq(beat == beats - 1)]
                with m.If(wd.ready):
                    m.d.sync += beat.eq(beat + 1)
                    with m.If(beat == beats - 1):
                        m.next = "W_RESP"
            with m.State("W_RESP"):
                resp = core.mem.wr_resp
                m.d.comb += resp.ready.eq(1)
                with m.If(resp.valid):
                    with m.If(resp.payload.error):
                        self.stop(_Stop.AXI_WRITE_ERROR, slot)
                    m.d.sync += core.completed.eq(core.completed + 1)
                    m.next = "IDLE"


class _Pick:
    """The fields of target ``job`` (muxed)."""

    def __init__(self, tgt, job):
        for name in ("p_late", "p_launch", "p_done", "p_index", "p_flags", "failed"):
            setattr(self, name, Array(getattr(t, name) for t in tgt)[job])


def _saturate(value):
    return Mux(value >= 1 << 32, (1 << 32) - 1, value[:32])


class Sequencer(wiring.Component):
    """The command sequencer: register block, command status and :class:`SequencerCore`.

    Members: ``bus`` (``In(AXI4LiteSignature(16, 32))``: its registers,
    ``hdl/tile/sequencer.rdl``), ``mem`` (``Out(MemPortSignature(data_width))``: the list
    and the log), ``ctl`` (``Out(AXI4LiteSignature(20, 32))``: the blocks' registers),
    ``now`` (``In(64)``: the tile's timebase), ``done`` / ``error`` (``In(16)``: bit w,
    the STATUS.DONE / STATUS.ERROR of the block at window w) and ``interrupt``
    (``Out(1)``, level: IRQ_STATUS & IRQ_ENABLE).

    Parameters: ``data_width`` (64, 128, 256 or 512 bits), ``targets`` (the windows it
    may launch on; default MA, VA, MIGRATE), ``max_deps`` (dependencies an entry may
    have, 1..15, default 4).
    """

    def __init__(self, data_width=128, *, targets=DEFAULT_TARGETS, max_deps=4):
        check_parameters(data_width, targets, max_deps)
        self.data_width, self.targets = data_width, tuple(int(t) for t in targets)
        self.max_deps = max_deps
        super().__init__({
            "bus": In(AXI4LiteSignature(BLOCK_WINDOW_BITS, 32)),
            "mem": Out(MemPortSignature(data_width)),
            "ctl": Out(AXI4LiteSignature(CONTROL_ADDR_BITS, 32)),
            "now": In(64), "done": In(WINDOWS), "error": In(WINDOWS),
            "interrupt": Out(1),
        })

    def elaborate(self, platform):
        from .migrate import _SharedTime

        m = Module()
        m.submodules.regs = regs = RegisterBlock(sequencer_regmap)
        m.submodules.time = time = _SharedTime()
        m.submodules.status = status = CommandStatus()
        m.submodules.core = core = SequencerCore(
            self.data_width, targets=self.targets, max_deps=self.max_deps)
        wiring.connect(m, wiring.flipped(self.bus), regs.bus)
        wiring.connect(m, wiring.flipped(self.mem), core.mem)
        wiring.connect(m, wiring.flipped(self.ctl), core.ctl)
        m.d.comb += [time.now.eq(self.now), core.now.eq(self.now),
                     core.done.eq(self.done), core.error.eq(self.error)]
        drive_common_registers(m, regs, time, BlockId.SEQUENCER, SEQUENCER_VERSION,
                               caps_word(self.data_width, self.targets, self.max_deps))
        m.d.comb += [
            core.cmd.list.eq(regs.list_lo.addr | regs.list_hi.addr << 32),
            core.cmd.log.eq(regs.log_lo.addr | regs.log_hi.addr << 32),
            core.cmd.count.eq(regs.count.value),
            core.cmd.stop_on_late.eq(regs.mode.stop_on_late),
            regs.launched.value.eq(core.launched), regs.completed.value.eq(core.completed),
            regs.late.value.eq(core.late),
            regs.t0_lo.value.eq(core.t0[:32]), regs.t0_hi.value.eq(core.t0[32:]),
        ]
        connect_core_command(m, regs, status, core)
        report_command(m, self, regs, status, time, cycle_counter=True)
        return m
