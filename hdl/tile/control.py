"""The tile's control port: one AXI4-Lite address decoder in front of every block's
register block, and the tile's own registers (window TILE, ``hdl/tile/tile.rdl``).

The windows are :mod:`spec.tile`'s: an access at byte address ``a`` of the tile's
``s_axi_control`` (``CONTROL_ADDR_BITS`` = 20 bits) goes to window ``a >> 16``, at offset
``a & 0xFFFF`` of that block's own 16-bit map. A window no block answers (windows 7..15)
answers SLVERR: a read returns 0, a write changes nothing.

The decoder has two masters, the host (``s_axi_control``) and the command sequencer
(``hdl/tile/sequencer.py``), in front of it a :class:`ControlArbiter` (its rule: a free
channel goes to the sequencer when it asks, each transaction keeps its channel until
answered; the sequencer's accesses to its own window get SLVERR).

:class:`ControlDecoder` protocol (reads and writes are independent, one of each in
flight, as the register blocks behind it):

1. Write: AW and W are taken in either order or together and held. In the cycle after
   both are held, the decoder offers them to the window's block (``awvalid`` and
   ``wvalid`` until each is taken), then passes that block's B response back
   combinationally; a write to no block is answered SLVERR in that cycle instead.
2. Read: AR is held; in the next cycle it is offered to the window's block and its R
   response passed back combinationally, or, for no block, R is SLVERR with data 0.

So a write reaches a block's register block one cycle later than on a standalone top (a
command's START is performed one cycle later, and a read or write answered a few cycles
later); nothing else changes.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.common.axi import AXI4LiteSignature, AxiResp
from hdl.common.kernel import drive_common_registers
from hdl.common.regblock import RegisterBlock
from spec.codes import BlockId
from spec.tile import BLOCK_WINDOW_BITS, CONTROL_ADDR_BITS, TileBlock

from . import regmap
from .migrate import _SharedTime

__all__ = ["TILE_VERSION", "ControlArbiter", "ControlDecoder", "TileControl", "IRQ_BLOCKS",
           "CLASS_NODES"]

TILE_VERSION = 2                # 2: the command sequencer at window SEQUENCER
WINDOWS = 1 << (CONTROL_ADDR_BITS - BLOCK_WINDOW_BITS)
IRQ_BLOCKS = ("ma", "va", "mc", "migrate", "mesh", "sequencer")
"""The blocks whose interrupts the tile ORs (IRQ_SOURCE has a bit for each, at its window)."""
CLASS_NODES = ("ma", "va", "migrate")
"""The requester nodes whose traffic class is a field of TRAFFIC_CLASS."""


class ControlDecoder(wiring.Component):
    """``bus`` (the tile's ``s_axi_control``, ``CONTROL_ADDR_BITS`` address bits) onto one
    16-bit AXI4-Lite master per window in ``windows``.

    ``windows``: ``{name: window number}`` (the members are named after the keys); every
    other window answers SLVERR.
    """

    def __init__(self, windows):
        windows = dict(windows)
        for name, window in windows.items():
            if not (isinstance(window, int) and 0 <= window < WINDOWS):
                raise ValueError(f"window of {name!r} must be in 0..{WINDOWS - 1}, "
                                 f"not {window!r}")
        if len(set(windows.values())) != len(windows):
            raise ValueError(f"two blocks share a window: {windows!r}")
        if "bus" in windows:
            raise ValueError("a window cannot be named 'bus'")
        self.windows = windows
        super().__init__({
            "bus": In(AXI4LiteSignature(CONTROL_ADDR_BITS, 32)),
            **{name: Out(AXI4LiteSignature(BLOCK_WINDOW_BITS, 32)) for name in windows},
        })

    def elaborate(self, platform):
        m = Module()
        self._write(m)
        self._read(m)
        return m

    def _write(self, m):
        bus = self.bus
        aw_full, w_full = Signal(), Signal()
        addr = Signal(CONTROL_ADDR_BITS)
        wdata, wstrb = Signal(32), Signal(4)
        aw_sent, w_sent = Signal(), Signal()    # taken by the block
        busy = Signal()                         # forwarded, waiting for its answer
        m.d.comb += [bus.awready.eq(~aw_full), bus.wready.eq(~w_full)]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [aw_full.eq(1), addr.eq(bus.awaddr)]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_full.eq(1), wdata.eq(bus.wdata), wstrb.eq(bus.wstrb)]
        window = addr[BLOCK_WINDOW_BITS:]
        hit = Signal()
        done = Signal()
        m.d.comb += hit.eq(0)
        for name, number in self.windows.items():
            port = getattr(self, name)
            m.d.comb += [port.awaddr.eq(addr[:BLOCK_WINDOW_BITS]), port.wdata.eq(wdata),
                         port.wstrb.eq(wstrb)]
            with m.If(window == number):
                m.d.comb += hit.eq(1)
                m.d.comb += [port.awvalid.eq(aw_full & w_full & ~aw_sent),
                             port.wvalid.eq(aw_full & w_full & ~w_sent)]
                with m.If(port.awvalid & port.awready):
                    m.d.sync += aw_sent.eq(1)
                with m.If(port.wvalid & port.wready):
                    m.d.sync += w_sent.eq(1)
                with m.If(busy):
                    m.d.comb += [bus.bvalid.eq(port.bvalid), bus.bresp.eq(port.bresp),
                                 port.bready.eq(bus.bready)]
        with m.If(aw_full & w_full & ~hit):
            m.d.comb += [bus.bvalid.eq(1), bus.bresp.eq(AxiResp.SLVERR)]
        m.d.comb += done.eq(bus.bvalid & bus.bready)
        with m.If(aw_full & w_full & hit):
            m.d.sync += busy.eq(1)
        with m.If(done):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), aw_sent.eq(0), w_sent.eq(0),
                         busy.eq(0)]

    def _read(self, m):
        bus = self.bus
        ar_full = Signal()
        addr = Signal(CONTROL_ADDR_BITS)
        ar_sent = Signal()
        m.d.comb += bus.arready.eq(~ar_full)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [ar_full.eq(1), addr.eq(bus.araddr)]
        window = addr[BLOCK_WINDOW_BITS:]
        hit = Signal()
        m.d.comb += hit.eq(0)
        for name, number in self.windows.items():
            port = getattr(self, name)
            m.d.comb += port.araddr.eq(addr[:BLOCK_WINDOW_BITS])
            with m.If(window == number):
                m.d.comb += hit.eq(1)
                m.d.comb += port.arvalid.eq(ar_full & ~ar_sent)
                with m.If(port.arvalid & port.arready):
                    m.d.sync += ar_sent.eq(1)
                m.d.comb += [bus.rvalid.eq(ar_full & port.rvalid), bus.rdata.eq(port.rdata),
                             bus.rresp.eq(port.rresp), port.rready.eq(ar_full & bus.rready)]
        with m.If(ar_full & ~hit):
            m.d.comb += [bus.rvalid.eq(1), bus.rdata.eq(0), bus.rresp.eq(AxiResp.SLVERR)]
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += [ar_full.eq(0), ar_sent.eq(0)]


class ControlArbiter(wiring.Component):
    """Two AXI4-Lite masters of the control space, ``host`` (the tile's
    ``s_axi_control``) and ``seq`` (the command sequencer), onto one (``out``, to the
    :class:`ControlDecoder`).

    Reads and writes are arbitrated separately, each a transaction at a time (as the
    decoder takes them). Rule: a channel that is free goes to ``seq`` if it offers AW or
    W (a read: AR), else to ``host``; a transaction offered to the decoder keeps the
    channel for its master until its response (B, R) is taken (so what the decoder is
    offered stays offered). So a host transaction already offered delays a sequencer's
    access (a launch) until it is answered, and a host transaction offered in the cycle
    the sequencer offers one waits for it. With
    ``seq`` idle the host's channels pass through unchanged (no cycle added).

    ``seq``'s accesses to window ``own`` (the sequencer's registers) are sent to window
    ``refuse`` (one no block answers) instead, so they get SLVERR.
    """

    def __init__(self, own, refuse):
        self.own, self.refuse = own, refuse
        super().__init__({
            "host": In(AXI4LiteSignature(CONTROL_ADDR_BITS, 32)),
            "seq": In(AXI4LiteSignature(CONTROL_ADDR_BITS, 32)),
            "out": Out(AXI4LiteSignature(CONTROL_ADDR_BITS, 32)),
        })

    def _address(self, addr):
        window = addr[BLOCK_WINDOW_BITS:]
        return Mux(window == self.own,
                   Cat(addr[:BLOCK_WINDOW_BITS], Const(self.refuse, len(window))), addr)

    def elaborate(self, platform):
        m = Module()
        host, seq, out = self.host, self.seq, self.out
        # writes
        w_lock, w_owner, w_sel = Signal(), Signal(), Signal()
        m.d.comb += w_sel.eq(Mux(w_lock, w_owner, seq.awvalid | seq.wvalid))
        with m.If(w_sel):
            m.d.comb += [out.awvalid.eq(seq.awvalid), out.awaddr.eq(self._address(seq.awaddr)),
                         out.wvalid.eq(seq.wvalid), out.wdata.eq(seq.wdata),
                         out.wstrb.eq(seq.wstrb), out.bready.eq(seq.bready),
                         seq.awready.eq(out.awready), seq.wready.eq(out.wready),
                         seq.bvalid.eq(out.bvalid)]
        with m.Else():
            m.d.comb += [out.awvalid.eq(host.awvalid), out.awaddr.eq(host.awaddr),
                         out.wvalid.eq(host.wvalid), out.wdata.eq(host.wdata),
                         out.wstrb.eq(host.wstrb), out.bready.eq(host.bready),
                         host.awready.eq(out.awready), host.wready.eq(out.wready),
                         host.bvalid.eq(out.bvalid)]
        m.d.comb += [seq.bresp.eq(out.bresp), host.bresp.eq(out.bresp)]
        with m.If(out.awvalid | out.wvalid):
            m.d.sync += [w_lock.eq(1), w_owner.eq(w_sel)]
        with m.If(out.bvalid & out.bready):
            m.d.sync += w_lock.eq(0)
        # reads
        r_lock, r_owner, r_sel = Signal(), Signal(), Signal()
        m.d.comb += r_sel.eq(Mux(r_lock, r_owner, seq.arvalid))
        with m.If(r_sel):
            m.d.comb += [out.arvalid.eq(seq.arvalid), out.araddr.eq(self._address(seq.araddr)),
                         out.rready.eq(seq.rready), seq.arready.eq(out.arready),
                         seq.rvalid.eq(out.rvalid)]
        with m.Else():
            m.d.comb += [out.arvalid.eq(host.arvalid), out.araddr.eq(host.araddr),
                         out.rready.eq(host.rready), host.arready.eq(out.arready),
                         host.rvalid.eq(out.rvalid)]
        m.d.comb += [seq.rdata.eq(out.rdata), seq.rresp.eq(out.rresp),
                     host.rdata.eq(out.rdata), host.rresp.eq(out.rresp)]
        with m.If(out.arvalid):
            m.d.sync += [r_lock.eq(1), r_owner.eq(r_sel)]
        with m.If(out.rvalid & out.rready):
            m.d.sync += r_lock.eq(0)
        return m


def caps_word(windows, cols, rows, data_width):
    """CAPS of the tile: bits 15:0 one bit per window that answers (``windows``: their
    numbers), 19:16 COLS, 23:20 ROWS (16 reads as 0), 31:24 bus width in bytes."""
    mask = sum(1 << w for w in set(windows))
    return mask | (cols % 16) << 16 | (rows % 16) << 20 | (data_width // 8) << 24


def node_byte(node):
    x, y = node
    return x | y << 4


class TileControl(wiring.Component):
    """The decoder and the tile's own register block (window TILE).

    Members: ``bus`` (``In``: the tile's ``s_axi_control``), ``seq`` (``In``: the command
    sequencer's control master, arbitrated with ``bus`` by a :class:`ControlArbiter`;
    its accesses to window SEQUENCER get SLVERR), one ``Out`` 16-bit AXI4-Lite
    master per block in ``blocks`` (``{name: window}``, not TILE), ``now`` (``In(64)``:
    the tile's timebase), ``irq_<block>`` (``In(1)``) for each of :data:`IRQ_BLOCKS`,
    ``interrupt`` (``Out(1)``: their OR), ``cls_<node>`` (``Out(3)``) for each of
    :data:`CLASS_NODES`: the TRAFFIC_CLASS fields; ``rsv_classes`` (``Out(8)``,
    RESERVE.CLASSES), ``rsv_guard`` (``Out(16)``, RSV_GUARD), ``rsv_reserved`` and
    ``rsv_background`` (``Out(16)``, RSV_SHARE's fields); ``rsv_starts``,
    ``rsv_late`` (``In(32)``) and ``rsv_drain_max`` (``In(16)``) for RSV_STARTS,
    RSV_LATE, RSV_DRAIN_MAX (:mod:`hdl.tile.reserve`).

    ``info``: the values the identification registers report: ``cols``, ``rows``,
    ``data_width``, ``nodes`` (``{block: (x, y)}`` of ma, va, migrate, mc), ``ma_p``,
    ``va_l``, ``va_fn_lanes``, ``mc_channels``, ``flit_bits``, ``credits``.
    """

    def __init__(self, blocks, info):
        blocks = dict(blocks)
        if TileBlock.TILE in blocks.values():
            raise ValueError("window TILE holds the tile's own registers")
        self.blocks, self.info = blocks, dict(info)
        super().__init__({
            "bus": In(AXI4LiteSignature(CONTROL_ADDR_BITS, 32)),
            "seq": In(AXI4LiteSignature(CONTROL_ADDR_BITS, 32)),
            **{name: Out(AXI4LiteSignature(BLOCK_WINDOW_BITS, 32)) for name in blocks},
            "now": In(64),
            **{f"irq_{name}": In(1) for name in IRQ_BLOCKS},
            "interrupt": Out(1),
            **{f"cls_{name}": Out(3) for name in CLASS_NODES},
            "rsv_classes": Out(8), "rsv_guard": Out(16),
            "rsv_reserved": Out(16), "rsv_background": Out(16),
            "rsv_starts": In(32), "rsv_late": In(32), "rsv_drain_max": In(16),
        })

    def elaborate(self, platform):
        m = Module()
        info = self.info
        windows = {"tile": TileBlock.TILE, **self.blocks}
        m.submodules.decoder = decoder = ControlDecoder(windows)
        free = min(set(range(WINDOWS)) - set(windows.values()))
        m.submodules.arbiter = arbiter = ControlArbiter(TileBlock.SEQUENCER, free)
        m.submodules.regs = regs = RegisterBlock(regmap)
        m.submodules.time = time = _SharedTime()
        wiring.connect(m, wiring.flipped(self.bus), arbiter.host)
        wiring.connect(m, wiring.flipped(self.seq), arbiter.seq)
        wiring.connect(m, arbiter.out, decoder.bus)
        wiring.connect(m, decoder.tile, regs.bus)
        for name in self.blocks:
            wiring.connect(m, getattr(decoder, name), wiring.flipped(getattr(self, name)))
        m.d.comb += time.now.eq(self.now)
        drive_common_registers(m, regs, time, BlockId.TILE, TILE_VERSION,
                               caps_word(windows.values(), info["cols"], info["rows"],
                                         info["data_width"]))
        nodes = info["nodes"]
        m.d.comb += [
            # No command of its own: STATUS, ERROR, ERR_ADDR stay 0, IRQ_STATUS unset.
            regs.status.busy.eq(0), regs.status.done.eq(0), regs.status.error.eq(0),
            regs.status.start_dropped.eq(0), regs.error.code.eq(0), regs.err_addr.addr.eq(0),
            regs.irq_status.done_set.eq(0), regs.irq_status.error_set.eq(0),
            regs.nodes.ma.eq(node_byte(nodes["ma"])), regs.nodes.va.eq(node_byte(nodes["va"])),
            regs.nodes.migrate.eq(node_byte(nodes["migrate"])),
            regs.nodes.mc.eq(node_byte(nodes["mc"])),
            regs.params.ma_p.eq(info["ma_p"]), regs.params.va_l.eq(info["va_l"]),
            regs.params.va_fn_lanes.eq(info["va_fn_lanes"]),
            regs.params.mc_channels.eq(info["mc_channels"]),
            regs.ni.flit_bits.eq(info["flit_bits"]), regs.ni.credits.eq(info["credits"]),
        ]
        irq = Const(0, 1)
        for name in IRQ_BLOCKS:
            line = getattr(self, f"irq_{name}")
            m.d.comb += getattr(regs.irq_source, name).eq(line)
            irq = irq | line
        m.d.comb += self.interrupt.eq(irq)
        for name in CLASS_NODES:
            m.d.comb += getattr(self, f"cls_{name}").eq(getattr(regs.traffic_class, name))
        m.d.comb += [self.rsv_classes.eq(regs.reserve.classes),
                     self.rsv_guard.eq(regs.rsv_guard.cycles),
                     self.rsv_reserved.eq(regs.rsv_share.reserved),
                     self.rsv_background.eq(regs.rsv_share.background),
                     regs.rsv_starts.count.eq(self.rsv_starts),
                     regs.rsv_late.count.eq(self.rsv_late),
                     regs.rsv_drain_max.cycles.eq(self.rsv_drain_max)]
        return m
