"""``v4hw_va``: the vector accelerator as a standalone unit (Vitis RTL-kernel ports)."""

from amaranth.hdl import Module
from amaranth.lib import wiring

from hdl.common.kernel import kernel_members
from hdl.top.shared import build_command_top
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
        build_command_top(m, self, regmap,
                          VectorCore(self.lanes, self.data_width, self.fn_lanes), BlockId.VA,
                          VA_VERSION, caps_word(self.lanes, self.data_width, self.fn_lanes),
                          connect_registers)
        return m
