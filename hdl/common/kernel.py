"""What every standalone top shares (docs/design.md, "Conventions shared by every block").

The kernel ports (``ap_clk``, ``ap_rst_n``, ``s_axi_control_*``, ``m_axi_gmem_*`` when
the block masters memory, ``interrupt``), the clock domain they drive, and the common
registers every block's map holds (ID, CAPS, TIME_LO/TIME_HI from the timebase).
"""

from amaranth.hdl import ClockDomain, ClockSignal, ResetSignal
from amaranth.lib.wiring import In, Out

from hdl.common.axi import AXI4LiteSignature, AXI4Signature, flat_members

__all__ = ["kernel_members", "kernel_clock", "drive_common_registers"]


def kernel_members(gmem_data_width=None):
    """The kernel's ports, in their Verilog order; ``m_axi_gmem`` only with a data width."""
    members = {
        "ap_clk": In(1),
        "ap_rst_n": In(1),
        **flat_members("s_axi_control", In(AXI4LiteSignature(16, 32))),
    }
    if gmem_data_width is not None:
        members.update(flat_members("m_axi_gmem", Out(AXI4Signature(64, gmem_data_width, 1))))
    members["interrupt"] = Out(1)
    return members


def kernel_clock(m, top):
    """The ``sync`` domain, clocked by ``ap_clk``, reset by ``ap_rst_n`` low (synchronous)."""
    m.domains.sync = ClockDomain()
    m.d.comb += [ClockSignal().eq(top.ap_clk), ResetSignal().eq(~top.ap_rst_n)]


def drive_common_registers(m, regs, timebase, block, version, caps):
    """ID (block and version), CAPS and the 64-bit time, read low word first.

    ``regs`` is the block's :class:`~hdl.common.regblock.RegisterBlock`; ``caps`` (an
    ``int``) is cut into the fields of its map's CAPS register, which must hold every set
    bit of it."""
    fields = next(register for register in regs.registers
                  if register["name"] == "CAPS")["fields"]
    held = sum(((1 << field["width"]) - 1) << field["lsb"] for field in fields)
    if caps & ~held:
        raise ValueError(f"CAPS 0x{caps:08X} has bits outside the fields of the map's CAPS "
                         f"register (0x{held:08X})")
    m.d.comb += [
        regs.id.block.eq(block), regs.id.version.eq(version),
        *(getattr(regs.caps, field["name"].lower()).eq(
            caps >> field["lsb"] & (1 << field["width"]) - 1) for field in fields),
        regs.time_lo.value.eq(timebase.now[:32]),
        timebase.read_lo.eq(regs.time_lo.rd_stb),
        regs.time_hi.value.eq(timebase.time_hi),
    ]
