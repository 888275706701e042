"""``v4hw_tile``: the integrated tile, the MA, the VA, the MC and the cache-migrate engine
on one Muon mesh (docs/tile/README.md).

Ports, as every standalone top's (Vitis RTL-kernel convention): ``ap_clk``, ``ap_rst_n``
(active low, synchronous), ``s_axi_control_*`` (AXI4-Lite slave, 32-bit data,
:data:`spec.tile.CONTROL_ADDR_BITS` = 20 address bits: the windows of
:mod:`spec.tile`), ``m_axi_gmem_*`` (AXI4 master behind the MC, 64-bit address,
``data_width`` data, ID width 1) and ``interrupt`` (level: the OR of the blocks').

Inside (:class:`TileTop`):

* one :class:`~hdl.common.timebase.Timebase`, read by every block's TIME and CTR
  registers and by the mesh (its TSP time stamps);
* :class:`~hdl.tile.control.TileControl`: the address decoder and the tile's own
  registers (ID, CAPS, NODES, PARAMS, NI, IRQ_SOURCE, TRAFFIC_CLASS, TIME);
* the MA, VA and MC each as a *unit* (register block, command status and core, with the
  standalone top's register wiring, :func:`hdl.top.ma.connect_registers` and its VA and MC
  twins) and the :class:`~hdl.tile.migrate.MigrateEngine`;
* a ``cols`` × ``rows`` :class:`~hdl.muon.mesh.Mesh` without TSP's stale drop (memory
  traffic is never lost) with ``rsv_slots`` reservation slots, and its register block
  and RBR arbiter (:class:`~hdl.muon.rbr.ReservationTable`) at the MESH window, wired as
  on the Muon standalone top (:func:`hdl.top.muon.connect_registers`); the nodes are
  :data:`spec.tile.DEFAULT_NODES`;
* a :class:`~hdl.tile.ni.RequesterNi` on the memory port of the MA, the VA and the
  migrate engine, at their nodes, of the class their TRAFFIC_CLASS field says, and a
  :class:`~hdl.tile.memni.MemoryNi` at the MC's node on two of its client channels (0
  reads, 1 writes); the MC's memory port goes to ``m_axi_gmem`` through a
  :class:`~hdl.common.memport.MemPortToAxi4`;
* the command sequencer (:class:`~hdl.tile.sequencer.Sequencer`, docs/tile/sequencer.md)
  at window SEQUENCER: its ``ctl`` a second master of the control decoder (a
  :class:`~hdl.tile.control.ControlArbiter` beside the host), the MA's, VA's and migrate
  engine's STATUS.DONE / ERROR on its ``done`` / ``error``, its memory port sharing the
  migrate engine's node and NI behind a :class:`~hdl.common.memport.MemPortArbiter`
  (the sequencer's bursts first; after the migrate engine's PortGate, so a reservation
  does not hold the sequencer);
* reserved commands (:mod:`hdl.tile.reserve`): a :class:`~hdl.tile.reserve.PortGate` between
  each requester and its NI, and the :class:`~hdl.tile.reserve.ReserveControl` that holds
  the background while a command of a reserved class (RESERVE.CLASSES) runs, holds that
  command's bursts for RSV_GUARD cycles after its START and turns the MC's prefetch off
  meanwhile; with RSV_SHARE, the command's time is a repeating schedule of phases in
  which it and the background issue in turn.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.common.axi import AXI4LiteSignature, AXI4Signature, connect_flat, flat_members
from hdl.common.command import CommandStatus
from hdl.common.kernel import drive_common_registers, kernel_clock
from hdl.common.memport import MemPortArbiter, MemPortSignature, MemPortToAxi4
from hdl.common.regblock import RegisterBlock
from hdl.common.timebase import Timebase
from hdl.ma import regmap as ma_regmap
from hdl.ma.core import MatrixCore
from hdl.ma.core import check_parameters as check_ma
from hdl.mc import regmap as mc_regmap
from hdl.mc.channel import ClientChannelSignature
from hdl.mc.core import McCore
from hdl.mc.prefetch import check_lines
from hdl.muon import regmap as muon_regmap
from hdl.muon.layouts import DropSignature
from hdl.muon.mesh import Mesh, node_index
from hdl.muon.rbr import ReservationTable, check_rbr_parameters
from hdl.top import ma as ma_top
from hdl.top import mc as mc_top
from hdl.top import muon as muon_top
from hdl.top import va as va_top
from hdl.top.shared import connect_core_command, report_command
from hdl.va import regmap as va_regmap
from hdl.va.core import VectorCore
from hdl.va.core import check_parameters as check_va
from spec.codes import BlockId
from spec.tile import BLOCK_WINDOW_BITS, CONTROL_ADDR_BITS, DEFAULT_NODES, TileBlock

from .control import TileControl
from .memni import MemoryNi
from .migrate import MigrateEngine, _SharedTime
from .migrate import check_parameters as check_migrate
from .ni import RequesterNi
from .packets import MAX_CREDITS, check_ni_widths, min_flit_data_bits
from .reserve import PortGate, ReserveControl
from .sequencer import Sequencer
from .sequencer import check_parameters as check_sequencer

__all__ = ["TileTop", "SMALL", "DEFAULT", "check_parameters", "MC_CHANNELS", "BLOCKS",
           "SEQ_TARGETS"]

MC_CHANNELS = 2            # the memory NI's read and write channels
RESERVABLE = ("ma", "va")  # the requesters whose commands can run reserved
NI_WR_CHUNK = 16           # words per write packet (the requester NIs')
NI_CREDIT_BATCH = 8        # the memory NI returns credits at least this eagerly
NI_RD_BUFFER = 128         # read words each requester NI buffers: two operands of 64 (the VA)
NI_RD_PIECE = 16           # words per read packet
NI_WR_OUTSTANDING = 16     # write bursts unanswered: a ~90-cycle write round trip
MIN_CREDITS = NI_WR_CHUNK + NI_CREDIT_BATCH
MESH_SIDES = range(2, 9)
BLOCKS = {"ma": TileBlock.MA, "va": TileBlock.VA, "mc": TileBlock.MC,
          "migrate": TileBlock.MIGRATE, "mesh": TileBlock.MESH,
          "sequencer": TileBlock.SEQUENCER}
"""The windows the tile decodes besides TILE."""
SEQ_TARGETS = {"ma": TileBlock.MA, "va": TileBlock.VA, "migrate": TileBlock.MIGRATE}
"""The blocks the command sequencer launches commands on (their done / error wires)."""
SEQ_MAX_DEPS = 4               # dependencies a command-list entry may have
SEQ_TAGS = 32                  # bursts in flight a kind at the shared node's arbiter
BE_DEPTH, RSV_DEPTH = 8, 4     # the mesh's buffers: hdl.muon.mesh.Mesh's defaults

DEFAULT = dict(p=8, lanes=32, fn_lanes=None, data_width=128, cols=2, rows=2,
               flit_bits=None, credits=32, prefetch_lines=32, rsv_slots=2)
"""The demo's configuration."""
SMALL = dict(DEFAULT, p=4, lanes=8)
"""The tests' configuration: MA P=4, VA L=8, 128-bit bus."""


def _integer(name, value):
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, not {value!r}")


def check_parameters(p, lanes, fn_lanes, data_width, cols, rows, flit_bits, credits,
                     prefetch_lines, rsv_slots=2):
    """One ``ValueError`` line for the first parameter the tile does not build."""
    check_ma(p, data_width)
    check_va(lanes, data_width, fn_lanes)
    for name, value in (("COLS", cols), ("ROWS", rows)):
        _integer(name, value)
        if value not in MESH_SIDES:
            raise ValueError(f"{name} must be in {MESH_SIDES.start}..{MESH_SIDES.stop - 1} "
                             f"(the tile's nodes need a 2×2 mesh at least), not {value}")
    if flit_bits is not None:
        _integer("FLIT_BITS", flit_bits)
        check_ni_widths(data_width, flit_bits)
    _integer("CREDITS", credits)
    if not MIN_CREDITS <= credits <= MAX_CREDITS:
        raise ValueError(f"CREDITS must be in {MIN_CREDITS}..{MAX_CREDITS} (a whole write "
                         f"packet and a credit batch), not {credits}")
    check_lines(prefetch_lines)
    _integer("RSV_SLOTS", rsv_slots)
    check_rbr_parameters(rsv_slots)
    check_migrate(data_width, 16, 8)
    check_sequencer(data_width, tuple(SEQ_TARGETS.values()), SEQ_MAX_DEPS)


class _CommandUnit(wiring.Component):
    """A block with the MA's and VA's command contract on the tile's timebase: its register
    block (``bus``), command status and core (``mem``), ``interrupt`` as on its top;
    ``launch`` (a command starts) and ``busy`` (its status's), for the reservations;
    ``done`` / ``error`` (STATUS.DONE / STATUS.ERROR), for the command sequencer."""

    def __init__(self, regmap, block, version, caps, core, connect, data_width):
        self._regmap, self._block, self._version, self._caps = regmap, block, version, caps
        self._core, self._connect = core, connect
        super().__init__({
            "bus": In(AXI4LiteSignature(BLOCK_WINDOW_BITS, 32)),
            "mem": Out(MemPortSignature(data_width)),
            "now": In(64),
            "interrupt": Out(1),
            "launch": Out(1),
            "busy": Out(1),
            "done": Out(1),
            "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = RegisterBlock(self._regmap)
        m.submodules.time = time = _SharedTime()
        m.submodules.status = status = CommandStatus()
        m.submodules.core = core = self._core
        wiring.connect(m, wiring.flipped(self.bus), regs.bus)
        wiring.connect(m, wiring.flipped(self.mem), core.mem)
        m.d.comb += time.now.eq(self.now)
        drive_common_registers(m, regs, time, self._block, self._version, self._caps)
        self._connect(m, regs, core)
        connect_core_command(m, regs, status, core)
        report_command(m, self, regs, status, time, cycle_counter=True)
        m.d.comb += [self.launch.eq(status.launch), self.busy.eq(status.busy),
                     self.done.eq(status.done), self.error.eq(status.error)]
        return m


class _McUnit(wiring.Component):
    """The MC's register block and core on the tile's timebase: ``bus``, ``chans`` (its
    client channels, MC side), ``mem`` (its memory port), ``interrupt``; ``busy`` (the
    core's: a request or an answer in flight) and ``prefetch_off`` (while high the core
    sees WINDOW 0: no prefetch hit, no fill; the register keeps its value)."""

    def __init__(self, channels, data_width, prefetch_lines):
        self.channels, self.data_width, self.prefetch_lines = channels, data_width, prefetch_lines
        self.channel_signature = ClientChannelSignature(data_width)
        super().__init__({
            "bus": In(AXI4LiteSignature(BLOCK_WINDOW_BITS, 32)),
            "chans": In(self.channel_signature).array(channels),
            "mem": Out(MemPortSignature(data_width)),
            "now": In(64),
            "interrupt": Out(1),
            "busy": Out(1),
            "prefetch_off": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = RegisterBlock(mc_regmap)
        m.submodules.time = time = _SharedTime()
        m.submodules.core = core = McCore(self.channels, self.data_width,
                                          prefetch_lines=self.prefetch_lines)
        assert core.channel_signature == self.channel_signature
        wiring.connect(m, wiring.flipped(self.bus), regs.bus)
        wiring.connect(m, wiring.flipped(self.mem), core.mem)
        for i in range(self.channels):
            wiring.connect(m, wiring.flipped(self.chans[i]), core.chans[i])
        m.d.comb += time.now.eq(self.now)
        drive_common_registers(m, regs, time, BlockId.MC, mc_top.MC_VERSION,
                               mc_top.caps_word(self.channels, self.data_width,
                                                self.prefetch_lines))
        mc_top.connect_registers(m, self, regs, core)
        m.d.comb += self.busy.eq(core.busy)
        with m.If(self.prefetch_off):     # after connect_registers: this assignment wins
            m.d.comb += core.window.eq(0)
        return m


class _MeshUnit(wiring.Component):
    """The Muon register block and RBR arbiter on the tile's timebase: ``bus``,
    ``slots`` (the reservation table, to the mesh), ``dropped`` (the routers' drop
    ports, for DROPPED_<class> and BAD_DST), ``max_age`` (MAX_AGE), ``now``,
    ``interrupt``."""

    def __init__(self, cols, rows, slots):
        self.cols, self.rows, self.n_slots = cols, rows, slots
        self.table = ReservationTable(cols, rows, slots)
        super().__init__({
            "bus": In(AXI4LiteSignature(BLOCK_WINDOW_BITS, 32)),
            "slots": Out(self.table.slots.shape()),
            "dropped": In(DropSignature()).array(cols * rows),
            "max_age": Out(32),
            "now": In(64),
            "interrupt": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = RegisterBlock(muon_regmap)
        m.submodules.time = time = _SharedTime()
        m.submodules.status = status = CommandStatus()
        m.submodules.rbr = rbr = self.table
        wiring.connect(m, wiring.flipped(self.bus), regs.bus)
        m.d.comb += [time.now.eq(self.now), self.slots.eq(rbr.slots),
                     self.max_age.eq(regs.max_age.cycles)]
        drive_common_registers(m, regs, time, BlockId.MUON, muon_top.MUON_VERSION,
                               muon_top.caps_word(self.cols, self.rows, self.n_slots,
                                                  BE_DEPTH, RSV_DEPTH))
        muon_top.connect_registers(m, self, regs, status, rbr, time, list(self.dropped))
        return m


class TileTop(wiring.Component):
    """The integrated tile (see the module docstring).

    Parameters: ``p`` (MA array size), ``lanes`` and ``fn_lanes`` (VA L and FN_LANES),
    ``data_width`` (every block's memory bus and ``m_axi_gmem``: 64, 128, 256 or 512),
    ``cols`` × ``rows`` (the mesh, 2..8 each), ``flit_bits`` (flit data bits, at least
    :func:`hdl.tile.packets.min_flit_data_bits`, None: that minimum, DATA_WIDTH + 17 for
    128 bits), ``credits`` (flit credits of each requester NI, 24..255),
    ``prefetch_lines`` (the MC's prefetch buffer) and ``rsv_slots`` (the mesh's
    reservation slots, 1..32). Each is checked at construction: one ``ValueError`` line
    for the first bad one.
    """

    def __init__(self, *, p=8, lanes=32, fn_lanes=None, data_width=128, cols=2, rows=2,
                 flit_bits=None, credits=32, prefetch_lines=32, rsv_slots=2):
        check_parameters(p, lanes, fn_lanes, data_width, cols, rows, flit_bits, credits,
                         prefetch_lines, rsv_slots)
        self.p, self.lanes, self.data_width = p, lanes, data_width
        self.fn_lanes = data_width // 16 if fn_lanes is None else fn_lanes
        self.cols, self.rows, self.credits = cols, rows, credits
        self.prefetch_lines, self.rsv_slots = prefetch_lines, rsv_slots
        self.flit_bits = min_flit_data_bits(data_width) if flit_bits is None else flit_bits
        self.nodes = dict(DEFAULT_NODES)
        super().__init__({
            "ap_clk": In(1),
            "ap_rst_n": In(1),
            **flat_members("s_axi_control", In(AXI4LiteSignature(CONTROL_ADDR_BITS, 32))),
            **flat_members("m_axi_gmem", Out(AXI4Signature(64, data_width, 1))),
            "interrupt": Out(1),
        })

    def info(self):
        """What the tile's identification registers report."""
        return dict(cols=self.cols, rows=self.rows, data_width=self.data_width,
                    nodes=self.nodes, ma_p=self.p, va_l=self.lanes, va_fn_lanes=self.fn_lanes,
                    mc_channels=MC_CHANNELS, flit_bits=self.flit_bits, credits=self.credits)

    def elaborate(self, platform):
        m = Module()
        kernel_clock(m, self)
        dw, fb = self.data_width, self.flit_bits

        m.submodules.timebase = timebase = Timebase()
        m.submodules.control = control = TileControl(BLOCKS, self.info())
        connect_flat(m, self, "s_axi_control", control.bus)
        m.d.comb += control.now.eq(timebase.now)

        units = {
            "ma": _CommandUnit(ma_regmap, BlockId.MA, ma_top.MA_VERSION,
                               ma_top.caps_word(self.p, dw), MatrixCore(self.p, dw),
                               ma_top.connect_registers, dw),
            "va": _CommandUnit(va_regmap, BlockId.VA, va_top.VA_VERSION,
                               va_top.caps_word(self.lanes, dw, self.fn_lanes),
                               VectorCore(self.lanes, dw, self.fn_lanes),
                               va_top.connect_registers, dw),
            "migrate": MigrateEngine(dw),
        }
        mc = _McUnit(MC_CHANNELS, dw, self.prefetch_lines)
        mesh_regs = _MeshUnit(self.cols, self.rows, self.rsv_slots)
        seq = Sequencer(dw, targets=tuple(SEQ_TARGETS.values()), max_deps=SEQ_MAX_DEPS)
        for name, unit in (*units.items(), ("mc", mc), ("mesh", mesh_regs), ("sequencer", seq)):
            m.submodules["muon" if name == "mesh" else name] = unit     # "mesh": the routers
            wiring.connect(m, getattr(control, name), unit.bus)
            m.d.comb += [unit.now.eq(timebase.now),
                         getattr(control, f"irq_{name}").eq(unit.interrupt)]
        m.d.comb += self.interrupt.eq(control.interrupt)
        # The command sequencer: a second master of the control decoder, the targets'
        # STATUS.DONE / ERROR, its memory port beside the migrate engine's (below).
        wiring.connect(m, seq.ctl, control.seq)
        for name, window in SEQ_TARGETS.items():
            m.d.comb += [seq.done[window].eq(units[name].done),
                         seq.error[window].eq(units[name].error)]

        # The mesh and the network interfaces.
        m.submodules.mesh = mesh = Mesh(self.cols, self.rows, slots=self.rsv_slots,
                                        be_depth=BE_DEPTH, rsv_depth=RSV_DEPTH,
                                        flit_data_bits=fb, stale_drop=False)
        m.d.comb += [mesh.now.eq(timebase.now), mesh.max_age.eq(mesh_regs.max_age),
                     mesh.slots.eq(mesh_regs.slots)]
        for n in range(self.cols * self.rows):
            wiring.connect(m, mesh.dropped[n], mesh_regs.dropped[n])
        mc_node = self.nodes["mc"]

        def attach(ni, node):
            n = node_index(*node, self.cols)
            wiring.connect(m, ni.inject, mesh.inject[n])
            wiring.connect(m, mesh.eject[n], ni.eject)

        m.submodules.reserve = reserve = ReserveControl(RESERVABLE, ("migrate",))
        for name, unit in units.items():
            ni = RequesterNi(dw, fb, self.nodes[name], mc_node, credits=self.credits,
                             rd_buffer=NI_RD_BUFFER, rd_piece=NI_RD_PIECE,
                             wr_chunk=NI_WR_CHUNK, wr_outstanding=NI_WR_OUTSTANDING)
            m.submodules[f"ni_{name}"] = ni
            m.submodules[f"gate_{name}"] = gate = PortGate(dw)
            wiring.connect(m, unit.mem, gate.up)
            if name == "migrate":       # the sequencer's node: its bursts first
                m.submodules.seq_port = shared = MemPortArbiter(dw, SEQ_TAGS)
                wiring.connect(m, seq.mem, shared.high)
                wiring.connect(m, gate.down, shared.low)
                wiring.connect(m, shared.down, ni.port)
            else:
                wiring.connect(m, gate.down, ni.port)
            m.d.comb += [ni.cls.eq(getattr(control, f"cls_{name}")),
                         gate.hold.eq(getattr(reserve, f"hold_{name}")),
                         getattr(reserve, f"idle_{name}").eq(gate.idle)]
            if name in RESERVABLE:
                m.d.comb += [getattr(reserve, f"launch_{name}").eq(unit.launch),
                             getattr(reserve, f"busy_{name}").eq(unit.busy),
                             getattr(reserve, f"cls_{name}").eq(getattr(control, f"cls_{name}"))]
            attach(ni, self.nodes[name])
        m.submodules.ni_mem = mem_ni = MemoryNi(
            dw, fb, mc_node, [self.nodes[name] for name in units], credits=self.credits,
            credit_batch=NI_CREDIT_BATCH, channel=mc.channel_signature)
        attach(mem_ni, mc_node)
        # Whether the memory NI owes each requester credits (in units' order).
        for i, name in enumerate(units):
            m.d.comb += getattr(reserve, f"owed_{name}").eq(mem_ni.owed[i])
        m.d.comb += [reserve.classes.eq(control.rsv_classes), reserve.guard.eq(control.rsv_guard),
                     reserve.reserved.eq(control.rsv_reserved),
                     reserve.shared.eq(control.rsv_background),
                     reserve.mc_busy.eq(mc.busy), mc.prefetch_off.eq(reserve.prefetch_off),
                     control.rsv_starts.eq(reserve.starts), control.rsv_late.eq(reserve.late),
                     control.rsv_drain_max.eq(reserve.drain_max)]
        wiring.connect(m, mem_ni.rd_chan, mc.chans[0])
        wiring.connect(m, mem_ni.wr_chan, mc.chans[1])

        m.submodules.bridge = bridge = MemPortToAxi4(dw, AXI4Signature(64, dw, 1))
        wiring.connect(m, mc.mem, bridge.port)
        connect_flat(m, self, "m_axi_gmem", bridge.axi)
        return m
