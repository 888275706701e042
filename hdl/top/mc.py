"""``v4hw_mc``: the memory controller as a standalone unit (Vitis RTL-kernel ports)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from hdl.common.axi import AXI4Signature, connect_flat
from hdl.common.codes import ErrorCode
from hdl.common.kernel import drive_common_registers, kernel_clock, kernel_members
from hdl.common.memport import MemPortToAxi4
from hdl.common.regblock import RegisterBlock
from hdl.common.timebase import Timebase
from hdl.mc import regmap
from hdl.mc.channel import ClientChannelSignature
from hdl.mc.core import McCore, check_parameters
from hdl.mc.frontend import MAX_BURST
from hdl.mc.prefetch import check_lines
from hdl.top.shared import drive_interrupt
from spec.codes import BlockId

__all__ = ["MC_VERSION", "McTop", "caps_word", "connect_registers"]

MC_VERSION = 1
COUNTERS = ("reads", "writes", "errors", "axi_reads", "hits", "misses", "prefetches",
            "evicted_unused")


def caps_word(channels, data_width, prefetch_lines):
    """CAPS of the MC: bits 3:0 channels, 15:8 bus width in bytes, 23:16 the largest
    burst in beats, 31:24 prefetch-buffer lines."""
    return channels | (data_width // 8) << 8 | MAX_BURST << 16 | prefetch_lines << 24


def connect_registers(m, top, regs, core):
    """The MC's registers ↔ ``core`` (a :class:`~hdl.mc.core.McCore`): STATUS.BUSY,
    WINDOW, the last error until CLEAR.ERROR, the interrupt of ``top`` and the event
    counters; shared by :class:`McTop` and the tile."""
    m.d.comb += [
        regs.status.busy.eq(core.busy),
        core.window.eq(regs.window.bytes),
        regs.atp_status.window_bad.eq(core.window_bad),
    ]
    # The last error, kept until CLEAR.ERROR.
    error, code, addr = Signal(), Signal(ErrorCode), Signal(32)
    with m.If(regs.clear.error):
        m.d.sync += [error.eq(0), code.eq(ErrorCode.NONE), addr.eq(0)]
    failed = core.error != ErrorCode.NONE
    with m.If(failed):
        m.d.sync += [error.eq(1), code.eq(core.error), addr.eq(core.error_addr)]
    m.d.comb += [
        regs.status.error.eq(error), regs.error.code.eq(code), regs.err_addr.addr.eq(addr),
        regs.irq_status.error_set.eq(failed),
    ]
    drive_interrupt(m, top, regs)
    events = {"reads": core.ev_read, "writes": core.ev_write, "errors": core.ev_error,
              "axi_reads": core.ev_burst, "hits": core.ev_hit, "misses": core.ev_miss,
              "prefetches": core.ev_prefetch, "evicted_unused": core.ev_evicted}
    for name in COUNTERS:
        count = Signal(32, name=f"count_{name}")
        with m.If(regs.clear.counters):
            m.d.sync += count.eq(0)
        with m.Else():
            m.d.sync += count.eq(count + events[name])
        m.d.comb += getattr(regs, name).count.eq(count)


class McTop(wiring.Component):
    """The MC with its register block, timebase and AXI4 bridge.

    Ports: ``ap_clk``, ``ap_rst_n`` (active low, synchronous), ``s_axi_control_*``
    (AXI4-Lite slave), ``m_axi_gmem_*`` (AXI4 master, 64-bit address, ``data_width``
    data, ID width 1), ``interrupt`` (level: IRQ_STATUS & IRQ_ENABLE), and client channel
    ``i`` as ``ch<i>__req__*``, ``ch<i>__wdata__*``, ``ch<i>__resp__*``
    (:class:`~hdl.mc.channel.ClientChannelSignature`, MC side; payloads are the packed
    layouts of :mod:`hdl.mc.channel`).
    """

    def __init__(self, channels=4, data_width=128, *, age_limit=8, prefetch_lines=32,
                 req_depth=4, wdata_depth=16, resp_depth=64):
        check_parameters(channels, data_width, age_limit)
        check_lines(prefetch_lines)
        self.channels, self.data_width, self.prefetch_lines = channels, data_width, prefetch_lines
        self._core_args = dict(age_limit=age_limit, prefetch_lines=prefetch_lines,
                               req_depth=req_depth, wdata_depth=wdata_depth,
                               resp_depth=resp_depth)
        channel = ClientChannelSignature(data_width, req_depth, wdata_depth, resp_depth)
        super().__init__({
            **kernel_members(data_width),
            **{f"ch{i}": In(channel) for i in range(channels)},
        })

    def elaborate(self, platform):
        m = Module()
        kernel_clock(m, self)

        m.submodules.regs = regs = RegisterBlock(regmap)
        m.submodules.timebase = timebase = Timebase()
        m.submodules.core = core = McCore(self.channels, self.data_width, **self._core_args)
        m.submodules.bridge = bridge = MemPortToAxi4(
            self.data_width, AXI4Signature(64, self.data_width, 1))
        connect_flat(m, self, "s_axi_control", regs.bus)
        connect_flat(m, self, "m_axi_gmem", bridge.axi)
        wiring.connect(m, core.mem, bridge.port)
        for i in range(self.channels):
            wiring.connect(m, wiring.flipped(getattr(self, f"ch{i}")), core.chans[i])

        drive_common_registers(m, regs, timebase, BlockId.MC, MC_VERSION,
                               caps_word(self.channels, self.data_width, self.prefetch_lines))
        connect_registers(m, self, regs, core)
        return m
