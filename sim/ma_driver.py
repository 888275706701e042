"""Host-level cocotb driver of the ``v4hw_ma`` top: :class:`MaBench`.

A bench owns everything around the DUT:

* the clock on ``ap_clk`` (:data:`PERIOD_NS`) and the active-low reset ``ap_rst_n``;
* an ``AxiLiteMaster`` on ``s_axi_control`` and the :class:`~sim.regs.Registers` helper;
* :class:`sim.bfm.GmemModel`, the memory behind ``m_axi_gmem``: a sparse 48-bit physical
  byte space with a fixed read and write latency in clock cycles, optional SLVERR/DECERR
  ranges, a log of every burst, and checks of the AXI4 rules the MA promises
  (INCR, full-width beats, aligned, never crossing 4 KiB, 48-bit addresses);
* optional random idle and back-pressure cycles on every AXI channel of both buses;
* the host view of the MA: the TAT (:meth:`MaBench.set_tat`), logical memory seen
  through it (:meth:`MaBench.place`), and :meth:`MaBench.gemm`, which runs one command
  the design notes' way and checks its outcome against :mod:`golden.ma`.

Cycle bookkeeping. Rising edges of ``ap_clk`` are numbered from the first one the bench
sees (:meth:`sim.bfm.Timing.edge`). ``ap_rst_n`` is first sampled high at edge ``r``; the
timebase counts from 0 "in the first cycle after reset", so the value a register samples
at edge ``n`` (the timebase *during* the cycle that ends at edge ``n``) is ``n - r``
(:meth:`MaBench.timebase_at`).

**Command cycles** (:attr:`Outcome.cycles`) = CTR − the timebase during the cycle in
which the START write is performed. The register block performs a write in the cycle
after the later of its AW and W transfers (``hdl/common/regblock.py``, rule 2), so with
those transfers seen at edges ``e_aw`` and ``e_w`` that cycle ends at edge
``max(e_aw, e_w) + 1``. The CTR is the timebase during the cycle in which the core's
``finish`` is high. This is the definition of ``golden.ma_latency.ma_cycles`` ("START is
performed in cycle 0"); the START write's B response is taken two or more cycles later.
"""

import dataclasses
import logging
from dataclasses import dataclass

import numpy as np
from cocotb.triggers import FallingEdge

from golden.ma import TAT_ENTRIES, TatEntry, pack_matrix, tat_check, tat_first_uncovered, unpack_matrix
from golden.ma import gemm as golden_gemm
from hdl.ma import regmap
from hdl.top.ma import caps_word
from spec.codes import MA_MODE_B_T, MA_MODE_BF16, BlockId, ErrorCode, MaMode

from . import fcov
from .bfm import PAGE, KernelBench
from .blocks import descriptor

__all__ = ["MA_GTKW_GROUPS", "MAX_DIM", "Command", "Outcome", "MaBench", "element_size",
           "b_transposed"]

MAX_DIM = 128
LOGICAL_LIMIT = 1 << 32
NO_TAT_ENTRY = TatEntry(False, 0, 0, 0)
# Cycles (beyond the memory latencies) that gemm() waits after a command's end for late
# memory accesses: more than the array's drain (about 2·P + 8, then 4·P rows) and a few
# C rows.
QUIET_CYCLES = 128


def element_size(mode):
    """Bytes per A/B element: 1 (int8) or 2 (bf16, MODE bit 0); C elements are always 4
    bytes."""
    return 2 if mode & MA_MODE_BF16 else 1


def c_dtype(mode):
    """C's elements: int32 (int8 modes) or binary32 bits as uint32 (bf16 modes)."""
    return np.uint32 if mode & MA_MODE_BF16 else np.int32


def b_transposed(mode):
    """MODE bit 1: B is stored as N rows of K elements (C = A·Bᵀ)."""
    return bool(mode & MA_MODE_B_T)


# --- Commands and outcomes -----------------------------------------------------------------

def _check_disjoint(cmd):
    """ValueError if rows of two different operands share a byte (a test's layout bug:
    placing one would overwrite the other)."""
    rows = sorted((start, start + length, name) for name, spans in cmd.operand_rows()
                  for start, length in spans)
    reach = {}
    for start, end, name in rows:
        for other, other_end in reach.items():
            if other != name and start < other_end:
                raise ValueError(f"rows of {other} and {name} overlap at {start:#x}")
        reach[name] = max(reach.get(name, 0), end)


@dataclass(frozen=True)
class Command:
    """The MA command registers. ``mode`` is a MODE.MODE value (``spec.codes.MaMode``:
    bit 0 bf16, bit 1 B transposed)."""
    mode: int
    m: int
    k: int
    n: int
    a_addr: int
    b_addr: int
    c_addr: int
    lda: int
    ldb: int
    ldc: int
    accumulate: bool = False

    @property
    def es(self):
        return element_size(self.mode)

    def operand_rows(self):
        """``(name, [(first byte, length)])`` of A, B and C rows, in TAT-walk order."""
        es = self.es
        b_count, b_length = (self.n, self.k) if b_transposed(self.mode) else (self.k, self.n)
        return [
            ("A", [(self.a_addr + r * self.lda, self.k * es) for r in range(self.m)]),
            ("B", [(self.b_addr + r * self.ldb, b_length * es) for r in range(b_count)]),
            ("C", [(self.c_addr + r * self.ldc, self.n * 4) for r in range(self.m)]),
        ]


@dataclass
class Outcome:
    """What a command did, as the host sees it.

    ``code``: ERROR register (``ErrorCode.NONE`` when DONE). ``ctr``: 64-bit CTR from
    CTR_LO and the latched CTR_HI (0 on an error). ``start``: timebase value at the edge
    of the START write's B handshake. ``cycles``: ``ctr - start`` when done.
    ``ack_to_ctr``: CTR minus the timebase value at the edge where the last B response
    of the command was taken. ``status``: STATUS fields read after the end.
    ``end_edge``: the edge by which the host had seen the end (the command ended earlier).
    """
    done: bool
    code: ErrorCode
    err_addr: int
    ctr: int = 0
    start: int = 0
    cycles: int = 0
    ack_to_ctr: int = None
    status: dict = None
    irq_status: dict = None
    end_edge: int = None


class MaBench(KernelBench):
    """Clock, reset, bus models and host-level operations for one ``v4hw_ma`` DUT.

    ``p``, ``data_width``: the DUT's parameters (checked against CAPS by
    :meth:`start`; ``None``: taken from CAPS). ``latency``: read and write latency of the memory in cycles
    (``write_latency`` overrides the write side). ``rng``: a ``random.Random`` (from
    :func:`sim.seed.test_seed`) for background bytes and pause patterns.
    ``bus_log_level``: level of the bus models' loggers.
    """

    BLOCK = BlockId.MA
    REGMAP = regmap
    CAPS_LAYOUT = descriptor("ma").caps_layout

    def __init__(self, dut, *, p=8, data_width=128, latency=20, write_latency=None,
                 rng=None, bus_log_level=logging.WARNING):
        self.p, self.data_width = p, data_width
        # cocotbext-axi logs every register access and burst at INFO: pass
        # bus_log_level=logging.INFO to see them.
        super().__init__(dut, rng=rng, bus_log_level=bus_log_level, memory=(
            latency, latency if write_latency is None else write_latency))
        self.watch_control_writes()      # they date the START write (launch)
        self.tat = [NO_TAT_ENTRY] * TAT_ENTRIES

    # -- clock, reset, time
    def expected_caps(self, caps):
        """CAPS of ``caps_word(p, data_width)``; a ``p`` or ``data_width`` of ``None`` is
        taken from CAPS."""
        if self.p is None:
            self.p = caps["P"]
        if self.data_width is None:
            self.data_width = 8 * caps["BUS_BYTES"]
        return self.decode_caps(caps_word(self.p, self.data_width))

    async def set_timebase(self, value):
        """Load the DUT's 64-bit timebase with ``value`` (so that a test can cross 2**32
        cycles without simulating them). The counter is internal: it is found as the
        submodule with a ``now`` register whose name starts with ``timebase``, and
        deposited at a falling edge, so the next rising edge samples ``value``."""
        instance = None
        for child in self.dut:
            name = child._name.strip().lstrip("\\")
            if name == "timebase" or name.startswith("timebase$"):
                if hasattr(child, "now"):
                    instance = child
        assert instance is not None, "no timebase instance with a `now` register in the DUT"
        await FallingEdge(self.dut.ap_clk)
        instance.now.value = value
        self._time_offset += value - self.timebase_at(self.timing.edge() + 1)

    def set_pauses(self, probability, *, axil=True, gmem=True):
        """Random idle/back-pressure on every channel of the chosen buses (0 stops it)."""
        self.pause((list(self.ram.channels()) if gmem else [])
                   + (self.axil_channels() if axil else []), probability)

    # -- TAT and logical memory
    async def set_tat(self, entries):
        """Write the 4 TAT entries (missing ones invalid). Entries need not pass
        ``tat_check``: a bad table is what BAD_TAT tests write."""
        entries = list(entries) + [NO_TAT_ENTRY] * (TAT_ENTRIES - len(entries))
        if len(entries) != TAT_ENTRIES:
            raise ValueError(f"the MA has {TAT_ENTRIES} TAT entries, not {len(entries)}")
        for i, e in enumerate(entries):
            await self.regs.write_fields(f"TAT_LOGIC_{i}", valid=int(e.valid), size=e.size,
                                         base=e.logical_base >> 12)
            await self.regs.write_fields(f"TAT_PHYS_LO_{i}", base=(e.phys_base >> 12) & 0xFFFFF)
            await self.regs.write_fields(f"TAT_PHYS_HI_{i}", base=e.phys_base >> 32)
        self.tat = entries

    def translate(self, logical):
        """Physical address of a logical byte under the bench's TAT, or ``None``."""
        for e in self.tat:
            if e.covers(logical):
                return e.phys_base + logical - e.logical_base
        return None

    def _chunks(self, addr, nbytes):
        """``(logical, physical or None, length)`` pieces of a range, split at pages."""
        while nbytes > 0:
            length = min(nbytes, PAGE - addr % PAGE)
            yield addr, self.translate(addr), length
            addr, nbytes = addr + length, nbytes - length

    def write_logical(self, addr, data):
        """Write bytes at a logical address; unmapped parts are skipped."""
        offset = 0
        for _, phys, length in self._chunks(addr, len(data)):
            if phys is not None:
                self.ram.mem.write(phys, data[offset:offset + length])
            offset += length

    def read_logical(self, addr, nbytes):
        """Read bytes at a logical address (``ValueError`` if any is unmapped)."""
        out = bytearray()
        for logical, phys, length in self._chunks(addr, nbytes):
            if phys is None:
                raise ValueError(f"logical address {logical:#x} is not mapped by the TAT")
            out += self.ram.mem.read(phys, length)
        return bytes(out)

    def place(self, matrix, addr, ld):
        """Store a matrix's rows (row-major, stride ``ld`` bytes) in logical memory;
        the bytes between rows are left as they are, unmapped rows are skipped."""
        matrix = np.asarray(matrix)
        row_bytes = matrix.shape[1] * matrix.dtype.itemsize
        for r in range(matrix.shape[0]):
            self.write_logical(addr + r * ld, pack_matrix(matrix[r:r + 1], row_bytes))

    def fetch(self, addr, rows, cols, dtype, ld):
        """Read a row-major matrix back from logical memory."""
        itemsize = np.dtype(dtype).itemsize
        buf = b"".join(self.read_logical(addr + r * ld, cols * itemsize) for r in range(rows))
        return unpack_matrix(buf, rows, cols, dtype, cols * itemsize)

    def scribble(self, addr, nbytes):
        """Fill the mapped part of a logical range with random bytes."""
        self.write_logical(addr, self.rng.randbytes(nbytes))

    # -- reference of the checks at START
    def predict_refusal(self, cmd):
        """``(code, ERR_ADDR)`` of the first failing check at START or of the TAT walk,
        or ``None`` if the command should run (docs/design.md order)."""
        if cmd.mode not in tuple(MaMode) or not all(
                1 <= x <= MAX_DIM for x in (cmd.m, cmd.k, cmd.n)):
            return ErrorCode.BAD_COMMAND, 0
        if tat_check(self.tat) is not ErrorCode.NONE:
            return ErrorCode.BAD_TAT, 0
        es = cmd.es
        for value, align in ((cmd.a_addr, es), (cmd.lda, es), (cmd.b_addr, es),
                             (cmd.ldb, es), (cmd.c_addr, 4), (cmd.ldc, 4)):
            if value % align:
                return ErrorCode.MISALIGNED, value
        for _, rows in cmd.operand_rows():
            for start, length in rows:
                miss = tat_first_uncovered(self.tat, start, length)
                if miss is not None:
                    return ErrorCode.TAT_MISS, miss % LOGICAL_LIMIT
        return None

    def _c_footprint(self, cmd):
        """``{physical address: logical address}`` of every byte of C's rows."""
        footprint = {}
        for start, length in cmd.operand_rows()[2][1]:
            for logical, phys, size in self._chunks(start, length):
                if phys is not None:
                    for i in range(size):
                        footprint[phys + i] = logical + i
        return footprint

    def _logical_of(self, phys):
        for e in self.tat:
            if e.valid and e.phys_base <= phys < e.phys_base + e.region_bytes:
                return e.logical_base + phys - e.phys_base
        return None

    def _read_segments(self, cmd):
        """Rows as the MA reads them: A and B rows whole; with ACCUMULATE, the old C in
        rows of one P-column tile (the core's load order, see ``hdl/ma/core.py``)."""
        rows = cmd.operand_rows()
        segments = rows[0][1] + rows[1][1]
        if cmd.accumulate:
            p = self.p
            for r in range(cmd.m):
                for j in range(0, cmd.n, p):
                    segments.append((cmd.c_addr + r * cmd.ldc + j * 4, min(p, cmd.n - j) * 4))
        return segments

    def read_error_addresses(self, cmd, burst):
        """Logical first bytes of the bursts the MA could have issued as ``burst``: the
        start of a row whose first bus word it is, or a 4 KiB boundary inside a row."""
        lanes = self.ram.bus_bytes
        logical = self._logical_of(burst.addr)
        candidates = set()
        if logical is None:
            return candidates
        for start, length in self._read_segments(cmd):
            if start - start % lanes == logical:
                candidates.add(start)
            boundary = (start // PAGE + 1) * PAGE
            if boundary == logical and boundary < start + length:
                candidates.add(boundary)
        return candidates

    # -- running commands
    async def write_command(self, cmd):
        """Write the command registers of ``cmd`` (not START)."""
        await self.regs.write("M", cmd.m)
        await self.regs.write("K", cmd.k)
        await self.regs.write("N", cmd.n)
        await self.regs.write_fields("MODE", mode=cmd.mode, accumulate=int(cmd.accumulate))
        for name in ("A_ADDR", "B_ADDR", "C_ADDR", "LDA", "LDB", "LDC"):
            await self.regs.write(name, getattr(cmd, name.lower()))

    async def launch(self, cmd):
        """Write the command registers and START; return the timebase value in the
        cycle the START write is performed (see the module docstring). Checks that
        STATUS right after START is not idle."""
        await self.write_command(cmd)
        aw, w = (len(self._control_writes[kind]) for kind in ("aw", "w"))
        await self.regs.write("START", 1)
        assert self.timing.at_edge(), "the START write returned between clock edges"
        answered = self.timing.edge()
        transfers = self._control_writes["aw"][aw:] + self._control_writes["w"][w:]
        assert len(transfers) == 2, f"the START write made {len(transfers)} AW/W transfers"
        performed = max(transfers) + 1
        assert performed < answered, (
            f"the START write was answered at edge {answered}, before it was performed "
            f"(edge {performed})")
        start = self.timebase_at(performed)
        status = await self.regs.read_fields("STATUS")
        assert status["BUSY"] or status["DONE"] or status["ERROR"], (
            f"STATUS right after START shows BUSY, DONE and ERROR all clear: {status}")
        return start

    async def wait_end(self, start, *, wait="poll", max_cycles=400_000):
        """Wait for the running command's end, by polling CTR_LO (and STATUS, for
        errors) or by waiting for ``interrupt``; return the :class:`Outcome`."""
        deadline = self.timing.edge() + max_cycles
        if wait == "interrupt":
            await self.wait_interrupt(max_cycles)
            irq = await self.regs.read_fields("IRQ_STATUS")
            status = await self.regs.read_fields("STATUS")
            ctr_lo = await self.regs.read("CTR_LO") if status["DONE"] else 0
        elif wait == "poll":
            while True:
                ctr_lo = await self.regs.read("CTR_LO")
                if ctr_lo:
                    status = await self.regs.read_fields("STATUS")
                    break
                status = await self.regs.read_fields("STATUS")
                if status["ERROR"]:
                    break
                if status["DONE"]:  # finished between the two reads
                    ctr_lo = await self.regs.read("CTR_LO")
                    assert ctr_lo, "STATUS.DONE is set but CTR_LO reads 0"
                    break
                assert self.timing.edge() < deadline, (
                    f"the command did not end within {max_cycles} cycles: {status}")
            irq = await self.regs.read_fields("IRQ_STATUS")
        else:
            raise ValueError(f"wait must be 'poll' or 'interrupt', not {wait!r}")
        end_edge = self.timing.edge()
        ctr_hi = await self.regs.read("CTR_HI") if ctr_lo else 0
        code = ErrorCode(await self.regs.read("ERROR"))
        err_addr = await self.regs.read("ERR_ADDR")
        assert not status["BUSY"], f"STATUS shows BUSY after the end: {status}"
        assert status["DONE"] != status["ERROR"], f"STATUS after the end: {status}"
        assert (code is ErrorCode.NONE) == bool(status["DONE"]), (
            f"ERROR is {code.name} with STATUS {status}")
        outcome = Outcome(done=bool(status["DONE"]), code=code, err_addr=err_addr,
                          status=status, irq_status=irq, start=start, end_edge=end_edge)
        if outcome.done:
            outcome.ctr = ctr_hi << 32 | ctr_lo
            outcome.cycles = outcome.ctr - start
            assert 0 < outcome.cycles <= self.now() - start, (
                f"CTR {outcome.ctr} is not between START ({start}) and now ({self.now()})")
        return outcome

    async def run(self, cmd, *, wait="poll", during=None, max_cycles=400_000):
        """Run one command with IRQ_STATUS cleared first; return the :class:`Outcome`.
        ``wait="interrupt"`` enables both interrupt sources, waits for ``interrupt``, then
        clears IRQ_STATUS and checks that ``interrupt`` falls. ``during``: an async
        callable run after START and before waiting for the end."""
        await self.regs.write_fields("IRQ_STATUS", done=1, error=1)
        if wait == "interrupt":
            await self.regs.write_fields("IRQ_ENABLE", done=1, error=1)
        acks = len(self.ram.acks)
        start = await self.launch(cmd)
        if during is not None:
            await during()
        outcome = await self.wait_end(start, wait=wait, max_cycles=max_cycles)
        expected_irq = {"DONE": int(outcome.done), "ERROR": int(not outcome.done)}
        assert outcome.irq_status == expected_irq, (
            f"IRQ_STATUS {outcome.irq_status} after the command, expected {expected_irq}")
        if wait == "interrupt":
            await self.regs.write_fields("IRQ_STATUS", done=1, error=1)
            assert not int(self.dut.interrupt.value), "interrupt stays high after W1C"
            await self.regs.write("IRQ_ENABLE", 0)
        if outcome.done and len(self.ram.acks) > acks:
            outcome.ack_to_ctr = outcome.ctr - self.timebase_at(self.ram.acks[-1])
        fcov.sample("ma", mode=MaMode(cmd.mode).name, accumulate=bool(cmd.accumulate),
                    shape=fcov.ma_shape_class(cmd.m, cmd.k, cmd.n, self.p, MAX_DIM),
                    code=outcome.code.name, bp=self.pausing)
        return outcome

    async def gemm(self, mode, a, b, c=None, *, accumulate=False, a_addr, b_addr, c_addr,
                   lda=None, ldb=None, ldc=None, m=None, k=None, n=None, wait="poll",
                   expect=None, place=True, during=None, max_cycles=400_000):
        """Run C = A·B (or C += A·B) and check everything about it; return the Outcome.

        ``a``/``b``: int8 or bf16-bit (uint16) arrays, ``b`` as stored: K×N, or N×K when
        ``mode`` has B transposed (MODE bit 1); ``c``: the old C (int32 /
        float32 bits as uint32), random if ``None``. Strides default to a row. ``m``,
        ``k``, ``n`` override the shape written to the registers (for bad shapes).
        ``place``: store A, B and the old C through the TAT first (with random bytes
        around them). ``during``: see :meth:`run`. ``expect``: the ErrorCode the test
        means to provoke (checked in addition to the bench's own prediction).

        Checks: the outcome is the predicted one (refusal/TAT miss from the registers,
        AXI errors from the memory log, else DONE); a refused or TAT-missing command
        makes no memory access; no access starts after the host has seen the end (after
        a wait of ``QUIET_CYCLES`` plus the latencies); every byte written lies in C's
        rows and equals the golden result; no other byte changed; when DONE, C equals
        ``golden.ma.gemm`` bit for bit, every C byte was written, and CTR is 0 to 2
        cycles after the last write response.
        """
        mode = int(mode)
        es = element_size(mode)
        a, b = np.asarray(a), np.asarray(b)
        bt = b_transposed(mode)
        m_, k_, n_ = a.shape[0], a.shape[1], b.shape[0 if bt else 1]
        if c is None:
            c = np.frombuffer(self.rng.randbytes(4 * m_ * n_), c_dtype(mode)).reshape(m_, n_)
        cmd = Command(mode=mode, m=m_ if m is None else m, k=k_ if k is None else k,
                      n=n_ if n is None else n, a_addr=a_addr, b_addr=b_addr, c_addr=c_addr,
                      lda=k_ * es if lda is None else lda,
                      ldb=(k_ if bt else n_) * es if ldb is None else ldb,
                      ldc=n_ * 4 if ldc is None else ldc, accumulate=accumulate)
        if place:
            _check_disjoint(dataclasses.replace(cmd, m=m_, k=k_, n=n_))
            for matrix, addr, ld in ((a, cmd.a_addr, cmd.lda), (b, cmd.b_addr, cmd.ldb),
                                     (c, cmd.c_addr, cmd.ldc)):
                span = (matrix.shape[0] - 1) * ld + matrix.shape[1] * matrix.dtype.itemsize
                self.scribble(max(addr - 64, 0), span + 128)
            # Later operands win where they overlap: place in the order A, B, C.
            self.place(a, cmd.a_addr, cmd.lda)
            self.place(b, cmd.b_addr, cmd.ldb)
            self.place(c, cmd.c_addr, cmd.ldc)
        runnable = m is None and k is None and n is None and mode in tuple(MaMode)
        expected = golden_gemm(mode, a, b, c if accumulate else None) if runnable else None
        refusal = self.predict_refusal(cmd)
        if expected is None and refusal is None:
            raise ValueError("shape overrides and MODE values outside MaMode are for "
                             "commands the MA refuses")

        before = self.ram.snapshot()
        reads, writes = len(self.ram.reads), len(self.ram.writes)
        outcome = await self.run(cmd, wait=wait, during=during, max_cycles=max_cycles)
        # Give a straggling access time to show: none may follow the end.
        await self.cycles(QUIET_CYCLES + self.ram.read_latency + self.ram.write_latency)
        new_reads, new_writes = self.ram.reads[reads:], self.ram.writes[writes:]
        assert not self.ram.violations, "AXI rule violations:\n" + "\n".join(self.ram.violations)
        self.check_no_access_after(outcome, new_reads, new_writes)

        # What should have happened.
        if refusal is not None:
            predicted = refusal
            assert not new_reads and not new_writes, (
                f"{refusal[0].name}: the command accessed memory "
                f"({len(new_reads)} read and {len(new_writes)} write bursts)")
        else:
            predicted = self._axi_error(cmd, new_reads, new_writes)
        if expect is not None:
            assert predicted[0] == ErrorCode(expect), (
                f"the test meant to provoke {ErrorCode(expect).name}, but the bench "
                f"predicts {predicted[0].name}")
        assert (outcome.code, outcome.err_addr) == predicted, (
            f"outcome {outcome.code.name} ERR_ADDR={outcome.err_addr:#x}, expected "
            f"{predicted[0].name} ERR_ADDR={predicted[1]:#x} ({cmd})")

        self.check_memory(cmd, expected, before, new_writes, done=outcome.done)
        if outcome.done:
            # DONE never before the last write response; CTR is two cycles after it (the
            # core registers "everything written", then finishes), three when a very
            # short write latency lets the response beat the array's drain of the rows
            # past M.
            assert outcome.ack_to_ctr is not None and 0 <= outcome.ack_to_ctr <= 3, (
                f"CTR is {outcome.ack_to_ctr} cycles after the last write response")
        return outcome

    def check_no_access_after(self, outcome, reads, writes):
        """No burst of ``reads``/``writes`` was issued after the host saw the end."""
        late = [f"read at physical {b.addr:#x} (AR at edge {b.edge})"
                for b in reads if b.edge > outcome.end_edge]
        late += [f"write at physical {b.addr:#x} (AW at edge {b.aw_edge})"
                 for b in writes if b.aw_edge > outcome.end_edge]
        assert not late, (
            f"{len(late)} memory accesses after the command had ended "
            f"({outcome.code.name}, seen by edge {outcome.end_edge}); first: {late[0]}")

    def check_memory(self, cmd, expected, before, writes, *, done):
        """Memory after ``cmd``: every byte of ``writes`` (the command's write bursts)
        lies in C's rows and equals ``expected`` (the golden C; ``None``: no write
        allowed); no byte outside C's rows differs from the ``before`` snapshot; if
        ``done``, every byte of C was written and C equals ``expected`` bit for bit."""
        footprint = self._c_footprint(cmd) if expected is not None else {}
        image = {}
        if expected is not None:
            for r in range(cmd.m):
                row = expected[r].astype(expected.dtype.newbyteorder("<")).tobytes()
                for logical, phys, size in self._chunks(cmd.c_addr + r * cmd.ldc, len(row)):
                    off = logical - (cmd.c_addr + r * cmd.ldc)
                    if phys is not None:
                        for i in range(size):
                            image[phys + i] = row[off + i]
        written = set()
        for burst in writes:
            for addr, run in burst.runs:
                for i, value in enumerate(run):
                    phys = addr + i
                    assert phys in footprint, (
                        f"a write to physical {phys:#x} lies outside C's rows ({cmd})")
                    assert value == image[phys], (
                        f"C byte at logical {footprint[phys]:#x} written as {value:#04x}, "
                        f"the golden result has {image[phys]:#04x}")
                    if not burst.failed:
                        written.add(phys)
        stray = [addr for addr in self.ram.changed_bytes(before) if addr not in footprint]
        assert not stray, (f"{len(stray)} bytes outside C changed, first at physical "
                           f"{stray[0]:#x}")
        if done:
            assert len(written) == len(footprint), (
                f"{len(footprint) - len(written)} bytes of C were never written")
            got = self.fetch(cmd.c_addr, cmd.m, cmd.n, expected.dtype, cmd.ldc)
            if not np.array_equal(got, expected):
                bad = np.argwhere(got != expected)
                i, j = bad[0]
                raise AssertionError(
                    f"C differs from the golden model in {len(bad)} elements; first "
                    f"C[{i}][{j}] = {int(got[i, j]) & 0xFFFFFFFF:#010x}, expected "
                    f"{int(expected[i, j]) & 0xFFFFFFFF:#010x} ({cmd})")

    def _axi_error(self, cmd, reads, writes):
        """``(code, ERR_ADDR)`` the memory log calls for: the first burst answered with
        an error, or ``(NONE, 0)``."""
        failed_read = next((b for b in reads if b.failed), None)
        failed_write = next((b for b in writes if b.failed), None)
        if failed_read is None and failed_write is None:
            return ErrorCode.NONE, 0
        # Which of a failed read and a failed write the MA sees first is a race; tests
        # put their error range where only one kind of access goes.
        assert failed_read is None or failed_write is None, (
            "both a read and a write burst failed: the expected error is ambiguous")
        if failed_read is not None:
            candidates = self.read_error_addresses(cmd, failed_read)
            assert len(candidates) == 1, (
                f"the failed read burst at physical {failed_read.addr:#x} is the first "
                f"burst of {sorted(candidates)}: choose a layout where rows do not share "
                "a bus word")
            return ErrorCode.AXI_READ_ERROR, candidates.pop()
        return ErrorCode.AXI_WRITE_ERROR, self._logical_of(failed_write.runs[0][0])


# The MA's GTKWave groups: its ports, the command status and the core's key state
# (patterns as sim.waves.match_signals reads them, below the top).
MA_GTKW_GROUPS = [
    ("clock, reset, interrupt", ["ap_clk", "ap_rst_n", "interrupt"]),
    ("s_axi_control", ["s_axi_control_*"]),
    ("m_axi_gmem read", ["m_axi_gmem_ar*", "m_axi_gmem_r*"]),
    ("m_axi_gmem write", ["m_axi_gmem_aw*", "m_axi_gmem_w*", "m_axi_gmem_b*"]),
    ("command status", ["status.busy", "status.done", "status.error", "status.start_dropped",
                        "status.error_code", "status.err_addr", "status.launch",
                        "status.finish", "status.fail", "status.ctr_lo"]),
    ("core", ["core.fsm_state", "core.abort", "core.loads.fsm_state", "core.a_full",
              "core.b_full", "core.c_full", "core.issuer.issuing", "core.results.credits",
              "core.reader.idle", "core.writer.fsm_state", "core.writer.idle"]),
]
