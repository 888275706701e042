"""``v4hw_va``: the vector accelerator as a standalone unit (Vitis RTL-kernel ports)."""

from amaranth.hdl import Module
from amaranth.lib import wiring

from hdl.common.axi import AXI4Signature, connect_flat
from hdl.common.command import CommandStatus
from hdl.common.kernel import drive_common_registers, kernel_clock, kernel_members
from hdl.common.memport import MemPortToAxi4
from hdl.common.regblock import RegisterBlock
from hdl.common.timebase import Timebase
from hdl.top.shared import connect_core_command, report_command
from hdl.va import regmap
from hdl.va.core import VectorCore, check_parameters
from spec.codes import BlockId

__all__ = ["VA_VERSION", "VaTop", "caps_word", "connect_registers"]

VA_VERSION = 1


def caps_word(lanes, data_width, fn_lanes=None):
    """CAPS of the VA: bits 7:0 L, 15:8 bus width in bytes, 23:16 function lanes
    (``fn_lanes``; None: DATA_WIDTH/16)."""
    fn_lanes = data_width // 16 if fn_lanes is None else fn_lanes
    return lanes | (data_width // 8) << 8 | fn_lanes << 16


def connect_registers(m, regs, core):
    """The VA's command registers → ``core`` (a :class:`~hdl.va.core.VectorCore`);
    shared by :class:`VaTop` and the tile."""
    cmd = core.cmd
    m.d.comb += [
        cmd.op.eq(regs.opcode.op), cmd.esize.eq(regs.opcode.esize),
        cmd.length.eq(regs.length.value),
        cmd.src.eq(regs.src_lo.addr | regs.src_hi.addr << 32),
        cmd.src2.eq(regs.src2_lo.addr | regs.src2_hi.addr << 32),
        cmd.dst.eq(regs.dst_lo.addr | regs.dst_hi.addr << 32),
        cmd.dst2.eq(regs.dst2_lo.addr | regs.dst2_hi.addr << 32), cmd.k.eq(regs.k.value),
        cmd.src3.eq(regs.src3_lo.addr | regs.src3_hi.addr << 32),
        cmd.split_half.eq(regs.opcode.split_half),
        cmd.stride.eq(regs.stride.value), cmd.scalar.eq(regs.scalar.value),
        cmd.index_limit.eq(regs.index_limit.value), cmd.rows.eq(regs.rows.value),
        cmd.row_stride.eq(regs.row_stride.value),
    ]


class VaTop(wiring.Component):
    """The VA with its register block, command status, timebase and AXI4 bridge.

    Ports: ``ap_clk``, ``ap_rst_n`` (active low, synchronous), ``s_axi_control_*``
    (AXI4-Lite slave, 16-bit address, 32-bit data), ``m_axi_gmem_*`` (AXI4 master, 64-bit
    address, ``data_width`` data, ID width 1), ``interrupt`` (level).

    Parameters: ``lanes`` (L, a power of two in 4..64, at least DATA_WIDTH/16),
    ``data_width`` (64, 128, 256 or 512 bits) and ``fn_lanes`` (FN_LANES: elements a cycle
    through the function units of the row and extension commands, a power of two in
    2..DATA_WIDTH/16; None: DATA_WIDTH/16, the bus rate; see :mod:`hdl.va.narrow`).
    """

    def __init__(self, lanes=32, data_width=128, fn_lanes=None):
        check_parameters(lanes, data_width, fn_lanes)
        self.lanes, self.data_width = lanes, data_width
        self.fn_lanes = data_width // 16 if fn_lanes is None else fn_lanes
        super().__init__({
            **kernel_members(data_width),
        })

    def elaborate(self, platform):
        m = Module()
        kernel_clock(m, self)

        m.submodules.regs = regs = RegisterBlock(regmap)
        m.submodules.timebase = timebase = Timebase()
        m.submodules.status = status = CommandStatus()
        m.submodules.core = core = VectorCore(self.lanes, self.data_width, self.fn_lanes)
        m.submodules.bridge = bridge = MemPortToAxi4(
            self.data_width, AXI4Signature(64, self.data_width, 1))
        connect_flat(m, self, "s_axi_control", regs.bus)
        connect_flat(m, self, "m_axi_gmem", bridge.axi)
        wiring.connect(m, core.mem, bridge.port)

        drive_common_registers(m, regs, timebase, BlockId.VA, VA_VERSION,
                               caps_word(self.lanes, self.data_width, self.fn_lanes))
        connect_registers(m, regs, core)
        connect_core_command(m, regs, status, core)
        report_command(m, self, regs, status, timebase, cycle_counter=True)
        return m
