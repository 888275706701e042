"""``v4hw_muon``: the Muon mesh as a standalone unit, with its control port."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.common.axi import connect_flat, flat_members
from hdl.common.command import CommandStatus
from hdl.common.kernel import drive_common_registers, kernel_clock, kernel_members
from hdl.common.regblock import RegisterBlock
from hdl.common.timebase import Timebase
from hdl.muon import regmap
from hdl.muon.layouts import CLASS_BITS, DropSignature, FlitStreamSignature
from hdl.muon.mesh import Mesh
from hdl.muon.rbr import ReservationTable, check_rbr_parameters
from hdl.muon.router import check_router_parameters
from hdl.top.shared import report_command
from spec.codes import BlockId, ErrorCode

__all__ = ["MUON_VERSION", "MuonTop", "caps_word", "check_parameters", "connect_registers"]

MUON_VERSION = 1


def check_parameters(cols, rows, slots, be_depth, rsv_depth):
    check_router_parameters(cols, rows, be_depth, rsv_depth, 4)
    check_rbr_parameters(slots)


def caps_word(cols, rows, slots, be_depth, rsv_depth):
    """CAPS of Muon: bits 3:0 COLS, 7:4 ROWS (16 reads as 0), 15:8 slots, 23:16
    best-effort depth, 31:24 reserved-VC depth."""
    return (cols % 16) | (rows % 16) << 4 | slots << 8 | be_depth << 16 | rsv_depth << 24


class MuonTop(wiring.Component):
    """A ``cols`` × ``rows`` Muon mesh with its register block and reservation arbiter.

    Ports: ``ap_clk``, ``ap_rst_n`` (active low), ``s_axi_control_*`` (AXI4-Lite slave,
    16-bit address), ``interrupt`` (level), and for node n = y·cols + x:
    ``inject<n>_{valid,ready,payload}`` (flits in, :class:`hdl.muon.layouts.FlitLayout`),
    ``eject<n>_{valid,ready,payload}`` (flits out) and ``dropped<n>_{valid,payload}``
    (:class:`hdl.muon.layouts.DropLayout`, one cycle per discarded packet).
    """

    def __init__(self, cols=4, rows=4, *, slots=8, be_depth=8, rsv_depth=4):
        check_parameters(cols, rows, slots, be_depth, rsv_depth)
        self.cols, self.rows, self.slots = cols, rows, slots
        self.be_depth, self.rsv_depth = be_depth, rsv_depth
        members = kernel_members()
        for n in range(cols * rows):
            members.update(flat_members(f"inject{n}", In(FlitStreamSignature())))
            members.update(flat_members(f"eject{n}", Out(FlitStreamSignature())))
            members.update(flat_members(f"dropped{n}", Out(DropSignature())))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        kernel_clock(m, self)

        m.submodules.regs = regs = RegisterBlock(regmap)
        m.submodules.timebase = timebase = Timebase()
        m.submodules.status = status = CommandStatus()
        m.submodules.rbr = rbr = ReservationTable(self.cols, self.rows, self.slots)
        m.submodules.mesh = mesh = Mesh(self.cols, self.rows, slots=self.slots,
                                        be_depth=self.be_depth, rsv_depth=self.rsv_depth)
        connect_flat(m, self, "s_axi_control", regs.bus)
        for n in range(self.cols * self.rows):
            connect_flat(m, self, f"inject{n}", mesh.inject[n])
            connect_flat(m, self, f"eject{n}", mesh.eject[n])
            connect_flat(m, self, f"dropped{n}", mesh.dropped[n])

        drive_common_registers(m, regs, timebase, BlockId.MUON, MUON_VERSION,
                               caps_word(self.cols, self.rows, self.slots, self.be_depth,
                                         self.rsv_depth))
        m.d.comb += [mesh.now.eq(timebase.now), mesh.max_age.eq(regs.max_age.cycles),
                     mesh.slots.eq(rbr.slots)]
        connect_registers(m, self, regs, status, rbr, timebase,
                          [mesh.dropped[n] for n in range(self.cols * self.rows)])
        return m


def connect_registers(m, top, regs, status, rbr, timebase, dropped):
    """The Muon register block's wiring (shared with the tile's MESH window): the
    reservation request as the block's command (RSV_* into ``rbr``, STATUS, RSV_RESULT,
    RSV_RETRY, RSV_REQ_CYCLE, RSV_GRANT_CYCLE, ``top.interrupt``), RSV_LEAD, and the
    DROPPED_<class> and BAD_DST counters of the routers' drop ports ``dropped``."""
    m.d.comb += [regs.rsv_lead.cycles.eq(rbr.lead), rbr.now.eq(timebase.now)]
    _counters(m, regs, dropped)

    # A reservation request is the block's command.
    rq = rbr.request
    m.d.comb += [
        rq.src_x.eq(regs.rsv_src.x), rq.src_y.eq(regs.rsv_src.y),
        rq.dst_x.eq(regs.rsv_dst.x), rq.dst_y.eq(regs.rsv_dst.y),
        rq.start.eq(regs.rsv_start_lo.value | regs.rsv_start_hi.value << 32),
        rq.duration.eq(regs.rsv_duration.cycles), rq.bandwidth.eq(regs.rsv_bandwidth.flits),
        status.start.eq(regs.request.request),
        status.refuse_code.eq(rbr.refuse * ErrorCode.BAD_COMMAND),
        rbr.launch.eq(status.launch), status.finish.eq(rbr.done),
    ]
    report_command(m, top, regs, status, timebase, cycle_counter=False)
    m.d.comb += [
        regs.rsv_result.granted.eq(rbr.result.granted),
        regs.rsv_result.full.eq(rbr.result.full), regs.rsv_result.id.eq(rbr.result.id),
        regs.rsv_retry_lo.value.eq(rbr.result.retry_after[:32]),
        regs.rsv_retry_hi.value.eq(rbr.result.retry_after[32:]),
    ]
    req_cycle, grant_cycle = Signal(64), Signal(64)
    with m.If(status.launch):
        m.d.sync += req_cycle.eq(timebase.now)
    with m.If(rbr.done):
        m.d.sync += grant_cycle.eq(timebase.now)
    m.d.comb += [regs.rsv_req_cycle_lo.value.eq(req_cycle[:32]),
                 regs.rsv_req_cycle_hi.value.eq(req_cycle[32:]),
                 regs.rsv_grant_cycle_lo.value.eq(grant_cycle[:32]),
                 regs.rsv_grant_cycle_hi.value.eq(grant_cycle[32:])]


def _counters(m, regs, dropped):
    """DROPPED_<class> (TSP drops) and BAD_DST: every drop of every router counts."""
    for cls in range(1 << CLASS_BITS):
        counter = Signal(32, name=f"dropped_{cls}")
        hits = [d.valid & ~d.payload.bad_dst & (d.payload.header.cls == cls) for d in dropped]
        m.d.sync += counter.eq(counter + sum(hits))
        m.d.comb += getattr(regs, f"dropped_{cls}").count.eq(counter)
    bad = Signal(32, name="bad_dst")
    m.d.sync += bad.eq(bad + sum(d.valid & d.payload.bad_dst for d in dropped))
    m.d.comb += regs.bad_dst.count.eq(bad)
