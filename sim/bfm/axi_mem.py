"""The memory behind a block's ``m_axi_gmem`` master: :class:`GmemModel`.

A sparse 48-bit physical byte space with a fixed read and write latency in clock cycles,
optional SLVERR/DECERR ranges (:class:`ErrorRange`), a log of every burst
(:class:`ReadBurst`, :class:`WriteBurst`), and checks of the AXI4 rules of docs/design.md's
memory port (INCR, full-width beats, aligned, never crossing 4 KiB, 48-bit addresses,
ID 0). Latencies are counted in the edges of a :class:`~sim.bfm.clock.Timing`.
"""

from dataclasses import dataclass, field

import cocotb
import numpy as np
from cocotb.queue import Queue
from cocotbext.axi import AxiResp
from cocotbext.axi.axi_channels import AxiBMonitor, AxiRMonitor
from cocotbext.axi.axi_slave import AxiSlaveRead, AxiSlaveWrite
from cocotbext.axi.sparse_memory import SparseMemory

__all__ = ["PAGE", "PHYS_BITS", "ReadBurst", "WriteBurst", "ErrorRange", "GmemModel"]

PAGE = 4096
PHYS_BITS = 48

@dataclass
class ReadBurst:
    """One read burst as the memory saw it. ``edge``: AR handshake; ``failed``: beat
    indices answered with an error response."""
    edge: int
    addr: int
    beats: int
    failed: list = field(default_factory=list)


@dataclass
class WriteBurst:
    """One write burst: ``aw_edge`` of its AW handshake, ``edge`` of its last W beat,
    the strobed bytes as ``[(physical address, bytes)]`` runs, and whether it was refused
    (then nothing was written)."""
    aw_edge: int
    edge: int
    addr: int
    beats: int
    runs: list
    failed: bool


@dataclass(frozen=True)
class ErrorRange:
    """Physical bytes ``[start, end)`` that the memory refuses with ``resp``: a read beat
    that overlaps them (if ``reads``), a write burst with a strobed byte in them (if
    ``writes``; the burst then writes nothing)."""
    start: int
    end: int
    resp: AxiResp = AxiResp.SLVERR
    reads: bool = True
    writes: bool = True

    def __post_init__(self):
        # Accept hdl.common.axi.AxiResp (an Amaranth enum) too; the bus wants an int.
        object.__setattr__(self, "resp", AxiResp(getattr(self.resp, "value", self.resp)))
        if self.resp == AxiResp.OKAY or not self.start < self.end:
            raise ValueError(f"not an error range: {self}")


class _ProtocolChecks:
    """The AXI4 rules of docs/design.md's memory port that every burst of a block must follow,
    and the life cycle of a port's responder: ``_respond`` serves ``_due`` (a queue of
    (edge, burst)) while out of reset, and everything pending is dropped at reset."""

    def _handle_reset(self, state):
        super()._handle_reset(state)
        if state:
            if self._responder is not None:
                self._responder.cancel()
                self._responder = None
            self._due = Queue()
        elif self._responder is None:
            self._responder = cocotb.start_soon(self._respond())

    def _check_burst(self, kind, addr, length, size, burst, ident):
        lanes = self._model.bus_bytes
        beats = length + 1
        where = f"{kind} burst at {addr:#x} ({beats} beats)"
        problems = []
        if burst != 1:
            problems.append(f"burst type {burst}, not INCR")
        if 1 << size != lanes:
            problems.append(f"size {1 << size} bytes, not the bus width {lanes}")
        if addr % lanes:
            problems.append("address not aligned to the bus width")
        if (addr % PAGE) + beats * lanes > PAGE:
            problems.append("crosses a 4 KiB boundary")
        if addr >> PHYS_BITS:
            problems.append(f"address above {PHYS_BITS} bits")
        if ident != 0:
            problems.append(f"ID {ident}, not 0")
        if problems:
            self._model.violations.append(f"{where}: {'; '.join(problems)}")
        return beats


class _ReadPort(_ProtocolChecks, AxiSlaveRead):
    """AR accepted at edge ``a`` → first R beat can be taken at edge ``a + latency``;
    bursts are pipelined (any number outstanding), answered in order."""

    def __init__(self, bus, clock, reset, model):
        self._model = model
        self._due = Queue()
        self._responder = None
        super().__init__(bus, clock, reset, reset_active_level=False)

    async def _process_read(self):
        while True:
            ar = await self.ar_channel.recv()
            beats = self._check_burst("read", int(ar.araddr), int(ar.arlen), int(ar.arsize),
                                      int(ar.arburst), int(ar.arid))
            burst = ReadBurst(self._model.timing.edge(), int(ar.araddr), beats)
            self._model.reads.append(burst)
            self._due.put_nowait((burst.edge + self._model.read_latency, burst))

    async def _respond(self):
        model, lanes = self._model, self._model.bus_bytes
        while True:
            due, burst = await self._due.get()
            await model.timing.present_at(due)
            for n in range(burst.beats):
                addr = burst.addr + n * lanes
                r = self.r_channel._transaction_obj()
                r.rid = 0
                r.rlast = n == burst.beats - 1
                resp = model.error_response(addr, lanes, write=False)
                if resp is None:
                    r.rresp = AxiResp.OKAY
                    r.rdata = int.from_bytes(model.mem.read(addr, lanes), "little")
                else:
                    r.rresp = resp
                    r.rdata = 0
                    burst.failed.append(n)
                await self.r_channel.send(r)


class _WritePort(_ProtocolChecks, AxiSlaveWrite):
    """Last W beat of a burst taken at edge ``w`` → B can be taken at edge
    ``w + latency``; a burst that touches an error range writes nothing."""

    def __init__(self, bus, clock, reset, model):
        self._model = model
        self._due = Queue()
        self._responder = None
        super().__init__(bus, clock, reset, reset_active_level=False)

    async def _process_write(self):
        model, lanes = self._model, self._model.bus_bytes
        while True:
            aw = await self.aw_channel.recv()
            aw_edge = model.timing.edge()
            addr = int(aw.awaddr)
            beats = self._check_burst("write", addr, int(aw.awlen), int(aw.awsize),
                                      int(aw.awburst), int(aw.awid))
            runs = []
            for n in range(beats):
                w = await self.w_channel.recv()
                if bool(int(w.wlast)) != (n == beats - 1):
                    model.violations.append(f"write burst at {addr:#x}: WLAST on beat {n} "
                                            f"of {beats} is {int(w.wlast)}")
                data = int(w.wdata).to_bytes(lanes, "little")
                strb = int(w.wstrb)
                base = addr + n * lanes
                start = None
                for lane in range(lanes + 1):
                    on = lane < lanes and (strb >> lane) & 1
                    if on and start is None:
                        start = lane
                    elif not on and start is not None:
                        runs.append((base + start, data[start:lane]))
                        start = None
            resp = None
            for run_addr, run in runs:
                resp = resp or model.error_response(run_addr, len(run), write=True)
            if resp is None:
                for run_addr, run in runs:
                    model.mem.write(run_addr, run)
            burst = WriteBurst(aw_edge, model.timing.edge(), addr, beats, runs, resp is not None)
            model.writes.append(burst)
            b = self.b_channel._transaction_obj()
            b.bid = 0
            b.bresp = AxiResp.OKAY if resp is None else resp
            self._due.put_nowait((burst.edge + model.write_latency, b))

    async def _respond(self):
        while True:
            due, b = await self._due.get()
            await self._model.timing.present_at(due)
            await self.b_channel.send(b)


class GmemModel:
    """The memory on ``m_axi_gmem`` (see the module docstring).

    ``read_latency``: cycles from the AR handshake to the first R beat's earliest
    handshake; ``write_latency``: cycles from the last W beat's handshake to B's. Both
    at least 2 (both attributes may change between commands). ``error_ranges``: a list of
    :class:`ErrorRange`; addresses above 48 bits answer DECERR. ``reads`` / ``writes``: every burst
    so far; ``acks``: edges of B handshakes; ``violations``: AXI rule breaches seen.
    """

    def __init__(self, bus, clock, reset, timing, *, read_latency=20, write_latency=20):
        for name, value in (("read_latency", read_latency), ("write_latency", write_latency)):
            if not isinstance(value, int) or value < 2:
                raise ValueError(f"{name} must be an integer number of cycles >= 2, "
                                 f"not {value!r}")
        self.timing = timing
        self.read_latency = read_latency
        self.write_latency = write_latency
        self.bus_bytes = len(bus.read.r.rdata) // 8
        self.mem = SparseMemory(1 << PHYS_BITS)
        self.error_ranges = []
        self.reads, self.writes, self.acks, self.violations = [], [], [], []
        self.read_if = _ReadPort(bus.read, clock, reset, self)
        self.write_if = _WritePort(bus.write, clock, reset, self)
        self._b_monitor = AxiBMonitor(bus.write.b, clock, reset, reset_active_level=False)
        cocotb.start_soon(self._watch_acks())

    def channels(self):
        """The five cocotbext-axi channel objects (AR, R, AW, W, B)."""
        return (self.read_if.ar_channel, self.read_if.r_channel, self.write_if.aw_channel,
                self.write_if.w_channel, self.write_if.b_channel)

    def error_response(self, addr, nbytes, *, write):
        """The error response of an access to ``[addr, addr + nbytes)``, or ``None``."""
        if addr + nbytes > 1 << PHYS_BITS:
            return AxiResp.DECERR
        for r in self.error_ranges:
            if (r.writes if write else r.reads) and addr < r.end and r.start < addr + nbytes:
                return r.resp
        return None

    async def _watch_acks(self):
        while True:
            await self._b_monitor.recv()
            self.acks.append(self.timing.edge())

    async def watch_reads(self, first_beats):
        """Append ``(AR edge, first R beat edge)`` of every read burst to ``first_beats``
        (a measurement: costs a Python wake-up per R beat)."""
        monitor = AxiRMonitor(self.read_if.bus.r, self.read_if.clock, None)
        index = len(self.reads)
        beat = 0
        while True:
            r = await monitor.recv()
            if beat == 0:
                first_beats.append((self.reads[index].edge, self.timing.edge()))
            beat += 1
            if int(r.rlast):
                index, beat = index + 1, 0

    def snapshot(self):
        """Copy of every 4 KiB page ever written (the pages that are not zero)."""
        return {page: bytes(block) for page, block in self.mem.segs.items()}

    def changed_bytes(self, before):
        """Physical addresses whose byte differs from the ``before`` snapshot."""
        zero = bytes(PAGE)
        changed = []
        for page, block in self.mem.segs.items():
            old = before.get(page, zero)
            if old != block:
                diff = np.nonzero(np.frombuffer(old, np.uint8) != np.frombuffer(block, np.uint8))[0]
                changed.extend(page + int(i) for i in diff)
        return changed
