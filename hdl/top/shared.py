"""The wiring every standalone top repeats: the command life cycle between the register
block, :class:`~hdl.common.command.CommandStatus` and a core, and the interrupt line.

Each function appends to ``m.d.comb`` the statements the tops wrote out by hand, in the
same order (so the generated Verilog is unchanged).
"""

__all__ = ["connect_core_command", "report_command", "drive_interrupt"]


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
