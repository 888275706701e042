"""Host-level cocotb driver of the ``v4hw_va`` top: :class:`VaBench`.

The bench uses the shared memory model and cycle bookkeeping (:mod:`sim.bfm`:
:class:`~sim.bfm.GmemModel` with its latency, error ranges, burst log and AXI4 rule
checks; :class:`~sim.bfm.Timing`) and adds the VA's host view: a *window* of
physical memory filled with random bytes, commands written to the registers by name
(:mod:`sim.regs`), and :meth:`VaBench.check`, which runs one command and compares its
outcome, ERR_ADDR and every byte of the window with :func:`golden.va.execute`.
"""

from dataclasses import dataclass

import numpy as np

from golden.va import MemoryWindow, execute
from hdl.top.va import caps_word
from hdl.va import regmap
from spec.codes import BlockId, ErrorCode, VaOpcode
from spec.va import MAX_LENGTH

from . import fcov
from .bfm import KernelBench
from .blocks import descriptor

__all__ = ["VA_GTKW_GROUPS", "VaOutcome", "VaBench"]

QUIET_CYCLES = 64
_OPCODES = {int(op) for op in VaOpcode}


@dataclass
class VaOutcome:
    """``code``/``err_addr``: ERROR and ERR_ADDR after the end; ``cycles``: CTR minus the
    timebase at the START write's response (so about 2 cycles short of START)."""
    code: ErrorCode
    err_addr: int
    cycles: int = 0


class VaBench(KernelBench):
    """Clock, reset, bus models and host operations for one ``v4hw_va`` DUT.

    ``lanes``/``data_width``/``fn_lanes``: the DUT's parameters (checked against CAPS;
    ``fn_lanes`` None: DATA_WIDTH/16). ``latency``:
    memory read and write latency in cycles. ``window``: (origin, bytes) of the physical
    memory the tests use; it starts filled with random bytes from ``rng``.
    """

    BLOCK = BlockId.VA
    REGMAP = regmap
    CAPS_LAYOUT = descriptor("va").caps_layout

    def __init__(self, dut, *, lanes=32, data_width=128, fn_lanes=None, latency=20, rng=None,
                 window=(0x7F00_0000_0000, 1 << 20)):
        self.lanes, self.data_width = lanes, data_width
        self.fn_lanes = fn_lanes
        super().__init__(dut, rng=rng, memory=(latency, latency))
        self.origin, self.size = window
        self.image = np.frombuffer(self.rng.randbytes(self.size), np.uint8).copy()
        self.ram.mem.write(self.origin, self.image.tobytes())

    def expected_caps(self, caps):
        return self.decode_caps(caps_word(self.lanes, self.data_width, self.fn_lanes))

    def set_pauses(self, probability):
        """Random idle/back-pressure on every memory channel (0 stops it)."""
        self.pause(self.ram.channels(), probability)

    def place(self, addr, values):
        """Store an array at a physical address inside the window."""
        raw = np.ascontiguousarray(values).view(np.uint8)
        start = addr - self.origin
        assert 0 <= start and start + raw.size <= self.size, f"{addr:#x} is outside the window"
        self.image[start:start + raw.size] = raw
        self.ram.mem.write(addr, raw.tobytes())

    async def write_command(self, cmd):
        regs = self.regs
        await regs.write_fields("OPCODE", op=cmd.op, esize=cmd.esize,
                                split_half=int(cmd.split_half))
        await regs.write("LENGTH", cmd.length)
        for name, value in (("SRC", cmd.src), ("SRC2", cmd.src2), ("SRC3", cmd.src3),
                            ("DST", cmd.dst), ("DST2", cmd.dst2)):
            await regs.write(f"{name}_LO", value & 0xFFFFFFFF)
            await regs.write(f"{name}_HI", value >> 32)
        for name in ("STRIDE", "SCALAR", "K", "INDEX_LIMIT", "ROWS", "ROW_STRIDE"):
            await regs.write(name, getattr(cmd, name.lower()))

    async def run(self, cmd, *, max_cycles=2_000_000):
        """Write ``cmd``, START with both interrupts enabled, wait for ``interrupt``;
        check STATUS, IRQ_STATUS and the interrupt's fall after W1C."""
        await self.regs.write_fields("IRQ_STATUS", done=1, error=1)
        await self.regs.write_fields("IRQ_ENABLE", done=1, error=1)
        await self.write_command(cmd)
        await self.regs.write("START", 1)
        started = self.now()
        await self.wait_interrupt(max_cycles, f" ({cmd})")
        status = await self.regs.read_fields("STATUS")
        irq = await self.regs.read_fields("IRQ_STATUS")
        code = ErrorCode(await self.regs.read("ERROR"))
        err_addr = await self.regs.read("ERR_ADDR")
        assert not status["BUSY"] and status["DONE"] != status["ERROR"], f"STATUS {status}"
        assert irq == {"DONE": status["DONE"], "ERROR": status["ERROR"]}, f"IRQ_STATUS {irq}"
        assert (code is ErrorCode.NONE) == bool(status["DONE"]), f"{code.name} with {status}"
        outcome = VaOutcome(code, err_addr)
        if status["DONE"]:
            lo = await self.regs.read("CTR_LO")
            hi = await self.regs.read("CTR_HI")
            outcome.cycles = (hi << 32 | lo) - started
            assert outcome.cycles > 0, f"CTR {hi << 32 | lo} is not after START ({started})"
        await self.regs.write_fields("IRQ_STATUS", done=1, error=1)
        assert not int(self.dut.interrupt.value), "interrupt stays high after W1C"
        fcov.sample("va", op=VaOpcode(cmd.op).name if cmd.op in _OPCODES else "invalid",
                    length=fcov.va_length_class(cmd.length, self.lanes, MAX_LENGTH),
                    code=code.name, bp=self.pausing)
        return outcome

    def window_bytes(self):
        return np.frombuffer(self.ram.mem.read(self.origin, self.size), np.uint8)

    async def check(self, cmd, *, expect=None, err_addr=None, reads_first=False,
                    max_cycles=2_000_000):
        """Run ``cmd`` and check it against the golden model; return the outcome.

        The golden model predicts the code and ERR_ADDR (``expect`` and ``err_addr``
        override them for AXI errors, which it does not model). On DONE the whole window
        equals the golden memory image byte for byte; on a refusal no memory access is
        made and nothing changes; on an AXI error every byte that changed equals the
        golden result (only results before the failing access may land). No access
        follows the end, and every burst obeys the AXI4 rules. ``reads_first``: the refusal
        comes from data the command reads first (the indexed forms' index checks), so
        reads are allowed there, writes are not.
        """
        golden = self.image.copy()
        code, addr = execute(cmd, MemoryWindow(self.origin, golden), lanes=self.lanes)
        if expect is not None:
            assert code == ErrorCode.NONE, f"golden refuses a command meant to run: {code.name}"
            code, addr = expect, err_addr
        reads, writes = len(self.ram.reads), len(self.ram.writes)
        outcome = await self.run(cmd, max_cycles=max_cycles)
        end = self.timing.edge()
        await self.cycles(QUIET_CYCLES + self.ram.read_latency + self.ram.write_latency)
        assert not self.ram.violations, "AXI rule violations:\n" + "\n".join(self.ram.violations)
        new_reads, new_writes = self.ram.reads[reads:], self.ram.writes[writes:]
        late = [b for b in new_reads if b.edge > end] + [b for b in new_writes if b.aw_edge > end]
        assert not late, f"{len(late)} memory accesses after the end, first {late[0]}"
        assert (outcome.code, outcome.err_addr) == (code, addr), (
            f"outcome {outcome.code.name} ERR_ADDR={outcome.err_addr:#x}, expected "
            f"{ErrorCode(code).name} ERR_ADDR={addr:#x} ({cmd})")
        after = self.window_bytes()
        if code == ErrorCode.NONE:
            if not np.array_equal(after, golden):
                bad = np.nonzero(after != golden)[0]
                at = self.origin + int(bad[0])
                raise AssertionError(
                    f"{len(bad)} bytes differ from the golden model, first at {at:#x}: "
                    f"{after[bad[0]]:#04x}, expected {golden[bad[0]]:#04x} ({cmd})")
        elif expect is None:
            assert (reads_first or not new_reads) and not new_writes, (
                f"a refused command accessed memory ({len(new_reads)} reads, "
                f"{len(new_writes)} writes)")
            assert np.array_equal(after, self.image), "a refused command changed memory"
        else:
            full = self.image.copy()
            execute(cmd, MemoryWindow(self.origin, full), lanes=self.lanes)
            changed = np.nonzero(after != self.image)[0]
            assert np.array_equal(after[changed], full[changed]), (
                f"a byte written before the error differs from the golden result, first "
                f"at {self.origin + int(changed[after[changed] != full[changed]][0]):#x} ({cmd})")
        for burst in new_writes:
            for run_addr, run in burst.runs:
                assert self.origin <= run_addr and run_addr + len(run) <= self.origin + self.size, (
                    f"a write at {run_addr:#x} lies outside the window")
        self.image = after.copy()
        return outcome


VA_GTKW_GROUPS = [
    ("clock, reset, interrupt", ["ap_clk", "ap_rst_n", "interrupt"]),
    ("s_axi_control", ["s_axi_control_*"]),
    ("m_axi_gmem read", ["m_axi_gmem_ar*", "m_axi_gmem_r*"]),
    ("m_axi_gmem write", ["m_axi_gmem_aw*", "m_axi_gmem_w*", "m_axi_gmem_b*"]),
    ("command status", ["status.busy", "status.done", "status.error", "status.error_code",
                        "status.err_addr", "status.launch", "status.finish", "status.fail"]),
    ("core", ["core.fsm_state", "core.abort", "core.reader.idle", "core.gatherer.idle",
              "core.writer.fsm_state", "core.writer.idle", "core.writer.done"]),
]
