"""The wiring every standalone top repeats: the command life cycle between the register
block, :class:`~hdl.common.command.CommandStatus` and a core, and the interrupt line;
:func:`build_command_top`, the whole top of a block whose core has the
:class:`~hdl.common.command.CommandCoreSignature` (the MA's and the VA's).

Each function appends to ``m.d.comb`` the statements the tops wrote out by hand, in the
same order (so the generated Verilog is unchanged).
"""

from amaranth.lib import wiring

from hdl.common.axi import AXI4Signature, connect_flat
from hdl.common.command import CommandStatus
from hdl.common.kernel import drive_common_registers, kernel_clock
from hdl.common.memport import MemPortToAxi4
from hdl.common.regblock import RegisterBlock
from hdl.common.timebase import Timebase

__all__ = ["build_command_top", "connect_core_command", "report_command", "drive_interrupt"]


def build_command_top(m, top, regmap, core, block_id, version, caps, connect_registers):
    """``top``'s whole design in ``m``: the clock, the register block of ``regmap``, the
    timebase, the command status, ``core`` (submodule ``core``), its memory port bridged
    to ``m_axi_gmem``, the common registers (ID of ``block_id`` and ``version``, CAPS
    ``caps``), the block's own registers by ``connect_registers(m, regs, core)``, the
    command life cycle, STATUS, ERROR, CTR and the interrupt."""
    kernel_clock(m, top)

    m.submodules.regs = regs = RegisterBlock(regmap)
    m.submodules.timebase = timebase = Timebase()
    m.submodules.status = status = CommandStatus()
    m.submodules.core = core
    m.submodules.bridge = bridge = MemPortToAxi4(
        top.data_width, AXI4Signature(64, top.data_width, 1))
    connect_flat(m, top, "s_axi_control", regs.bus)
    connect_flat(m, top, "m_axi_gmem", bridge.axi)
    wiring.connect(m, core.mem, bridge.port)

    drive_common_registers(m, regs, timebase, block_id, version, caps)
    connect_registers(m, regs, core)
    # Command life cycle: START → status → core, and back.
    connect_core_command(m, regs, status, core)
    report_command(m, top, regs, status, timebase, cycle_counter=True)


def connect_core_command(m, regs, status, core):
    """START → status → ``core`` and back, for a core with the shared command contract
    (``refuse_code``/``refuse_addr``, ``launch``, ``finish``, ``fail``, ``fail_code``,
    ``fail_addr``: the MA's and the VA's)."""
    m.d.comb += [
        status.start.eq(regs.start.start),
        status.refuse_code.eq(core.refuse_code), status.refuse_addr.eq(core.refuse_addr),
        core.launch.eq(status.launch),
        status.finish.eq(core.finish), status.fail.eq(core.fail),
        status.fail_code.eq(core.fail_code), status.fail_addr.eq(core.fail_addr),
    ]


def report_command(m, top, regs, status, timebase, *, cycle_counter):
    """The status's time, STATUS, ERROR, ERR_ADDR, IRQ_STATUS's set inputs and the
    interrupt; with ``cycle_counter``, CTR_LO/CTR_HI (read low word first) too."""
    m.d.comb += status.cycle.eq(timebase.now)
    if cycle_counter:
        m.d.comb += [
            status.ctr_read.eq(regs.ctr_lo.rd_stb),
            regs.ctr_lo.value.eq(status.ctr_lo), regs.ctr_hi.value.eq(status.ctr_hi),
        ]
    m.d.comb += [
        regs.status.busy.eq(status.busy), regs.status.done.eq(status.done),
        regs.status.error.eq(status.error),
        regs.status.start_dropped.eq(status.start_dropped),
        regs.error.code.eq(status.error_code), regs.err_addr.addr.eq(status.err_addr),
        regs.irq_status.done_set.eq(status.irq_done),
        regs.irq_status.error_set.eq(status.irq_error),
    ]
    drive_interrupt(m, top, regs)


def drive_interrupt(m, top, regs):
    """``interrupt``: high while an enabled IRQ_STATUS bit is set (level)."""
    m.d.comb += top.interrupt.eq(((regs.irq_status.done & regs.irq_enable.done)
                                  | (regs.irq_status.error & regs.irq_enable.error)) != 0)
