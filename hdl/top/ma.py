"""``v4hw_ma``: the matrix accelerator as a standalone unit (Vitis RTL-kernel ports)."""

from amaranth.hdl import Module
from amaranth.lib import wiring

from hdl.common.kernel import kernel_members
from hdl.ma import regmap
from hdl.ma.core import MAX_DIM, MatrixCore, check_parameters
from hdl.top.shared import build_command_top
from spec.codes import BlockId

__all__ = ["MA_VERSION", "MaTop", "caps_word", "connect_registers"]

MA_VERSION = 1


def caps_word(p, data_width):
    """CAPS of the MA: bits 7:0 P, 15:8 bus width in bytes, 23:16 the largest M/K/N
    (128 reads as 0x80), 27:24 TAT entries."""
    return p | (data_width // 8) << 8 | MAX_DIM << 16 | 4 << 24


def connect_registers(m, regs, core):
    """The MA's command registers and TAT entries → ``core`` (a
    :class:`~hdl.ma.core.MatrixCore`); shared by :class:`MaTop` and the tile."""
    cmd = core.cmd
    m.d.comb += [
        cmd.mode.eq(regs.mode.mode), cmd.accumulate.eq(regs.mode.accumulate),
        cmd.a_addr.eq(regs.a_addr.addr), cmd.b_addr.eq(regs.b_addr.addr),
        cmd.c_addr.eq(regs.c_addr.addr),
        cmd.lda.eq(regs.lda.stride), cmd.ldb.eq(regs.ldb.stride),
        cmd.ldc.eq(regs.ldc.stride),
        cmd.m.eq(regs.m.value), cmd.k.eq(regs.k.value), cmd.n.eq(regs.n.value),
    ]
    for i, entry in enumerate(core.tat):
        logic = getattr(regs, f"tat_logic_{i}")
        m.d.comb += [
            entry.valid.eq(logic.valid), entry.size.eq(logic.size),
            entry.logical_page.eq(logic.base),
            entry.physical_page.eq(getattr(regs, f"tat_phys_lo_{i}").base
                                   | getattr(regs, f"tat_phys_hi_{i}").base << 20),
        ]


class MaTop(wiring.Component):
    """The MA with its register block, command status, timebase and AXI4 bridge.

    Ports: ``ap_clk``, ``ap_rst_n`` (active low, synchronous), ``s_axi_control_*``
    (AXI4-Lite slave, 16-bit address, 32-bit data), ``m_axi_gmem_*`` (AXI4 master, 64-bit
    address, ``data_width`` data, ID width 1), ``interrupt`` (level).

    Parameters: ``p`` (array size, a power of two in 2..32) and ``data_width`` (64, 128,
    256 or 512 bits).
    """

    def __init__(self, p=8, data_width=128):
        check_parameters(p, data_width)
        self.p, self.data_width = p, data_width
        super().__init__({
            **kernel_members(data_width),
        })

    def elaborate(self, platform):
        m = Module()
        build_command_top(m, self, regmap, MatrixCore(self.p, self.data_width), BlockId.MA,
                          MA_VERSION, caps_word(self.p, self.data_width), connect_registers)
        return m
