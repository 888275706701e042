"""Command life cycle shared by every block: START, BUSY, DONE, ERROR, CTR, interrupt."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.common import codes
from hdl.common.memport import MemPortSignature
from spec.codes import ErrorCode

__all__ = ["CommandCoreSignature", "CommandStatus"]


class CommandCoreSignature(wiring.Signature):
    """What a command block's core shows its register side (the MA's and the VA's), seen
    from the core:

    - ``cmd`` (``In``): the command registers, a view of ``command_layout``; then any
      block-specific inputs given as keywords (the MA's ``tat``), in their order;
    - ``refuse_code`` / ``refuse_addr`` (``Out``): START's checks on ``cmd``,
      combinational, ``ErrorCode.NONE`` when it may start;
    - ``launch`` (``In``): the command starts (one cycle);
    - ``finish`` / ``fail`` with ``fail_code`` / ``fail_addr`` (``Out``): it ended, well or
      with that code and address (one cycle);
    - ``mem`` (``Out``): the core's memory port, ``data_width`` bits.

    :class:`CommandStatus` sits on the other side (:func:`hdl.top.shared.connect_core_command`).
    """

    def __init__(self, command_layout, data_width, **inputs):
        self.command_layout, self.data_width = command_layout, data_width
        super().__init__({
            "cmd": In(command_layout),
            **inputs,
            "refuse_code": Out(codes.ErrorCode),
            "refuse_addr": Out(32),
            "launch": In(1),
            "finish": Out(1),
            "fail": Out(1),
            "fail_code": Out(codes.ErrorCode),
            "fail_addr": Out(32),
            "mem": Out(MemPortSignature(data_width)),
        })


class CommandStatus(wiring.Component):
    """The STATUS / ERROR / ERR_ADDR / CTR / IRQ behaviour of docs/design.md, for one block.

    Rules:

    1. ``start`` is the START register's write pulse. While ``busy`` it is ignored and
       ``start_dropped`` is set. Otherwise it clears DONE, ERROR, the error code,
       ERR_ADDR, START_DROPPED and the CTR, and then:
       a. if ``refuse_code`` (the block's checks at START, combinational) is not NONE, the
          command ends at once with that code and ``refuse_addr``; BUSY is never set;
       b. else ``launch`` pulses and BUSY is set (visible the next cycle, so before the
          START write is answered).
    2. The block ends a launched command with one ``finish`` pulse (DONE; the CTR takes
       ``cycle``, the timebase) or one ``fail`` pulse with ``fail_code`` and ``fail_addr`` (ERROR).
    3. ``ctr_read`` (the read strobe of CTR_LO) latches the CTR's high word into
       ``ctr_hi`` and clears the CTR.
    4. ``irq_done`` / ``irq_error`` pulse when DONE / ERROR rise, for IRQ_STATUS.
    """

    def __init__(self):
        super().__init__({
            "start": In(1),
            "refuse_code": In(8),
            "refuse_addr": In(32),
            "launch": Out(1),
            "finish": In(1),
            "fail": In(1),
            "fail_code": In(8),
            "fail_addr": In(32),
            # Not "timebase": a top's signal of that name would rename its Timebase
            # instance to timebase$<n> in the Verilog.
            "cycle": In(64),
            "ctr_read": In(1),
            "busy": Out(1),
            "done": Out(1),
            "error": Out(1),
            "start_dropped": Out(1),
            "error_code": Out(8),
            "err_addr": Out(32),
            "ctr_lo": Out(32),
            "ctr_hi": Out(32),
            "irq_done": Out(1),
            "irq_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        ctr = Signal(64)
        m.d.comb += self.ctr_lo.eq(ctr[:32])

        with m.If(self.ctr_read):
            m.d.sync += [self.ctr_hi.eq(ctr[32:]), ctr.eq(0)]

        with m.If(self.start & self.busy):
            m.d.sync += self.start_dropped.eq(1)
        with m.Elif(self.start):
            m.d.sync += [self.done.eq(0), self.error.eq(0), self.error_code.eq(ErrorCode.NONE),
                         self.err_addr.eq(0), self.start_dropped.eq(0), ctr.eq(0)]
            with m.If(self.refuse_code != ErrorCode.NONE):
                m.d.sync += [self.error.eq(1), self.error_code.eq(self.refuse_code),
                             self.err_addr.eq(self.refuse_addr)]
                m.d.comb += self.irq_error.eq(1)
            with m.Else():
                m.d.sync += self.busy.eq(1)
                m.d.comb += self.launch.eq(1)
        with m.Elif(self.busy & self.finish):
            m.d.sync += [self.busy.eq(0), self.done.eq(1), ctr.eq(self.cycle)]
            m.d.comb += self.irq_done.eq(1)
        with m.Elif(self.busy & self.fail):
            m.d.sync += [self.busy.eq(0), self.error.eq(1), self.error_code.eq(self.fail_code),
                         self.err_addr.eq(self.fail_addr)]
            m.d.comb += self.irq_error.eq(1)
        return m
