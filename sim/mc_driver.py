"""Host-level cocotb driver of the ``v4hw_mc`` top: :class:`McBench`.

A bench owns the clock and reset, an ``AxiLiteMaster`` with the register helper, the
memory on ``m_axi_gmem`` (:class:`sim.bfm.GmemModel`: latency, error ranges, AXI
rule checks, pause generators on all five channels) and one :class:`Client` per client
channel, whose three credit links are :mod:`sim.bfm.credit`'s BFMs (a source each for
requests and write words, a sink for responses). One coroutine runs every client, once a
cycle at the falling edge of ``ap_clk``: it reads what the MC drives (response items,
credit pulses), checks it, and drives the next cycle's request, write word and credit
pulse, so each link moves in the cycle it is driven for.

Checks made every cycle (an ``AssertionError`` names the channel and the cycle):

* the client's response buffer never overflows (the MC spent a credit it did not have);
* a credit link never returns more credits than items sent (no credit created);
* each response item belongs to the oldest unanswered request of its channel (order,
  nothing lost or duplicated), with its id, ``last`` on the final item only, and the
  error code the reference says; read bytes inside the request are legal values of
  :class:`golden.mc.ByteMemoryModel`.

:meth:`McBench.drain` waits until every request is answered and then checks that every
credit is back (no credit lost) and that every byte of memory holds a legal value.
"""

import random
from collections import deque
from dataclasses import dataclass, field

import cocotb
from cocotb.triggers import FallingEdge

from golden.mc import LINE_BYTES, ByteMemoryModel, check_request, word_span
from hdl.mc import regmap
from hdl.mc.channel import RequestLayout, ResponseLayout, WriteWordLayout
from hdl.top.mc import caps_word
from spec.codes import BlockId, ErrorCode, McOp

from . import fcov
from .bfm import KernelBench
from .bfm.credit import CocotbCreditSink, CocotbCreditSource, CreditError
from .blocks import descriptor

__all__ = ["McBench", "Client", "Request", "MC_GTKW_GROUPS"]

MC_GTKW_GROUPS = [
    ("clock, reset, interrupt", ["ap_clk", "ap_rst_n", "interrupt"]),
    ("channel 0", ["ch0__*"]),
    ("channel 0 inside", ["core.chan0.fsm_state", "core.chan0.pending",
                          "core.chan0.resp_tx.credits", "core.chan0.req_rx.level",
                          "core.chan0.wdata_rx.level"]),
    ("channel 1", ["ch1__*"]),
    ("arbiter", ["core.arbiter.request", "core.arbiter.grant", "core.arbiter.age*",
                 "core.advance", "core.fill_go"]),
    ("prefetch", ["core.prefetch.window", "core.prefetch.on", "core.prefetch.trigger",
                  "core.prefetch.cursor", "core.prefetch.end", "core.prefetch.fill__valid",
                  "core.prefetch.hit", "core.prefetch.inval", "core.prefetch.ev_evicted"]),
    ("m_axi_gmem read", ["m_axi_gmem_ar*", "m_axi_gmem_r*"]),
    ("m_axi_gmem write", ["m_axi_gmem_aw*", "m_axi_gmem_w*", "m_axi_gmem_b*"]),
]


@dataclass(eq=False)
class Request:
    """A client request and what became of it (cycles are bench cycles)."""
    op: McOp
    addr: int
    length: int
    cls: int
    id: int
    data: bytes = b""             # write: the bytes of the request's words (word-aligned)
    sent: int = None              # cycle the request item was sent
    first: int = None             # cycle of the first response item
    done: int = None              # cycle of the last response item
    items: list = field(default_factory=list)   # (data int, error) of each response item
    token: object = None          # golden read token / write handle


class Client:
    """One client channel: a source of requests (``req``: its queue holds
    :class:`Request` objects), a source of write words (``wdata``: ints), a sink of response
    items (``resp``: its buffer)."""

    def __init__(self, bench, index, rng):
        self.bench, self.index, self.rng = bench, index, rng

        def link(name):
            return (getattr(bench.dut, f"ch{index}__{name}__{member}")
                    for member in ("payload", "valid", "credit"))

        # The draws are made in this order each cycle (a response taken, a request, a
        # word), and only when the link could move: the seeds give the runs they gave.
        self.resp = CocotbCreditSink(*link("resp"), ResponseLayout(bench.data_width),
                                     bench.resp_depth, pause=lambda: rng.random() < self.stall,
                                     name="the response buffer")
        self.req = CocotbCreditSource(*link("req"), RequestLayout(), bench.req_depth,
                                      fields=_request_fields, name="req",
                                      pause=lambda: rng.random() < self.idle)
        self.wdata = CocotbCreditSource(*link("wdata"), WriteWordLayout(bench.data_width),
                                        bench.wdata_depth, fields=lambda word: {"data": word},
                                        name="wdata", pause=lambda: rng.random() < self.idle)
        self.waiting = deque()        # sent, not fully answered
        self.answered = []
        self.idle = 0.0               # probability of not sending in a cycle
        self.stall = 0.0              # probability of not taking a response item
        self.max_outstanding = None   # requests in flight at most (None: credits only)
        self.next_id = rng.randrange(256)

    def submit(self, op, addr, length, cls, data=None):
        """Queue a request; ``data`` (write) defaults to random bytes."""
        req = Request(McOp(op), addr, length, int(cls), self.next_id)
        self.next_id = (self.next_id + 1) % 256
        if req.op == McOp.WRITE:
            _, count = word_span(addr, length, self.bench.lanes)
            words = data if data is not None else self.rng.randbytes(count * self.bench.lanes)
            req.data = bytes(words)
        self.req.send(req)
        return req

    @property
    def queue(self):
        """Requests not yet sent."""
        return self.req.queue

    def busy(self):
        return not (self.req.idle and self.wdata.idle and not self.waiting and self.resp.idle)


def _request_fields(req):
    return {"op": req.op, "addr": req.addr, "length": req.length, "cls": req.cls, "id": req.id}


class McBench(KernelBench):
    """Clock, reset, memory and clients of one ``v4hw_mc`` DUT.

    ``channels``, ``data_width``, ``prefetch_lines``: the DUT's parameters (checked
    against CAPS); the depths: those of its client channels.
    ``latency``: memory latency in cycles. ``rng``: from :func:`sim.seed.test_seed`.
    """

    BLOCK = BlockId.MC
    REGMAP = regmap
    CAPS_LAYOUT = descriptor("mc").caps_layout

    def __init__(self, dut, *, channels=4, data_width=128, req_depth=4, wdata_depth=16,
                 resp_depth=64, prefetch_lines=32, latency=20, rng=None):
        super().__init__(dut, rng=rng, memory=(latency, latency))
        self.channels, self.data_width, self.lanes = channels, data_width, data_width // 8
        self.req_depth, self.wdata_depth, self.resp_depth = req_depth, wdata_depth, resp_depth
        self.prefetch_lines = prefetch_lines
        self.golden = ByteMemoryModel()
        self.clients = [Client(self, i, random.Random(self.rng.getrandbits(32)))
                        for i in range(channels)]
        self.cycle = 0
        self.failures = []

    def idle_inputs(self):
        for client in self.clients:
            for link in (client.req, client.wdata, client.resp):
                link.idle_inputs()

    async def after_reset(self):
        """The client loop runs from the falling edge that releases reset."""
        cocotb.start_soon(self._run())

    def expected_caps(self, caps):
        return self.decode_caps(caps_word(self.channels, self.data_width, self.prefetch_lines))

    def preload(self, addr, data):
        """Put ``data`` in memory before traffic (the golden model learns it too)."""
        self.ram.mem.write(addr, bytes(data))
        self.golden._initial.update({addr + i: b for i, b in enumerate(data)})

    def back_pressure(self, probability):
        """Random idle / not-ready cycles on every AXI channel and client link."""
        self.pause(self.ram.channels(), probability)
        for client in self.clients:
            client.idle = client.stall = probability

    # -- the per-cycle loop
    async def _run(self):
        clock = self.dut.ap_clk
        while True:
            await FallingEdge(clock)
            self.cycle += 1
            for client in self.clients:
                try:
                    self._step(client)
                except AssertionError as error:
                    self.failures.append(str(error))
                    raise

    def _fail(self, client, message):
        raise AssertionError(f"channel {client.index}, cycle {self.cycle}: {message}")

    def _step(self, c):
        try:
            # The MC's response item and credit pulses of this cycle; the client takes
            # one buffered response item (or not) and returns its credit.
            item = c.resp.cycle()
            if item is not None:
                self._answer(c, item)
            # A request and a write word, when credits allow.
            room = c.max_outstanding is None or len(c.waiting) < c.max_outstanding
            req = c.req.cycle(hold=not room)
            if req is not None:
                self._sent(c, req)
            c.wdata.cycle()
        except CreditError as error:
            self._fail(c, str(error))

    def _sent(self, c, req):
        req.sent = self.cycle
        if check_request(req.op, req.addr, req.length) == ErrorCode.NONE:
            if req.op == McOp.READ:
                req.token = self.golden.read_begin(req.addr, req.length)
            else:
                first, _ = word_span(req.addr, req.length, self.lanes)
                offset = req.addr - first
                req.token = self.golden.write_begin(req.addr, req.data[offset:offset + req.length])
        if req.op == McOp.WRITE:
            for k in range(0, len(req.data), self.lanes):
                c.wdata.send(int.from_bytes(req.data[k:k + self.lanes], "little"))
        c.waiting.append(req)

    def _answer(self, c, item):
        if not c.waiting:
            self._fail(c, f"response item with no request outstanding: {item}")
        req = c.waiting[0]
        if int(item.id) != req.id:
            self._fail(c, f"response id {int(item.id)}, expected {req.id} (order)")
        if req.first is None:
            req.first = self.cycle
        req.items.append((int(item.data), int(item.error)))
        code = check_request(req.op, req.addr, req.length)
        expected = 1 if code != ErrorCode.NONE or req.op == McOp.WRITE else \
            word_span(req.addr, req.length, self.lanes)[1]
        final = len(req.items) == expected
        if bool(int(item.last)) != final:
            self._fail(c, f"last={int(item.last)} on item {len(req.items)} of {expected}")
        if not final:
            return
        c.waiting.popleft()
        req.done = self.cycle
        c.answered.append(req)
        fcov.sample("mc", op=req.op.name, channel=c.index, cls=req.cls,
                    length=fcov.mc_length_class(req.length, self.lanes, LINE_BYTES),
                    code=ErrorCode(next((e for _, e in req.items if e), 0)).name,
                    bp=self.pausing or c.idle > 0 or c.stall > 0)
        self._check(c, req, code)

    def _check(self, c, req, code):
        lanes = self.lanes
        if code != ErrorCode.NONE:
            if req.items[0][1] != code:
                self._fail(c, f"{req} answered {req.items[0][1]}, expected {code}")
            return
        if req.op == McOp.WRITE:
            failed = self.ram.error_response(req.addr, req.length, write=True) is not None
            want = ErrorCode.AXI_WRITE_ERROR if failed else ErrorCode.NONE
            if req.items[0][1] != want:
                self._fail(c, f"write {req.addr:#x}+{req.length} answered {req.items[0][1]}, "
                              f"expected {want}")
            self.golden.write_end(req.token, ok=not failed)
            return
        first, count = word_span(req.addr, req.length, lanes)
        data = bytearray()
        for k, (word, error) in enumerate(req.items):
            addr = first + k * lanes
            want = ErrorCode.NONE if self.ram.error_response(addr, lanes, write=False) is None \
                else ErrorCode.AXI_READ_ERROR
            if error != want:
                self._fail(c, f"read word {addr:#x} error {error}, expected {want}")
            data += word.to_bytes(lanes, "little")
        offset = req.addr - first
        bad = self.golden.read_check(req.token, bytes(data[offset:offset + req.length]))
        bad = [b for b in bad if self.ram.error_response(b[0], 1, write=False) is None]
        if bad:
            self._fail(c, f"read {req.addr:#x}+{req.length}: {len(bad)} stale or wrong bytes, "
                          f"first {bad[0][0]:#x} = {bad[0][1]:#x}, legal {bad[0][2]}")

    async def drain(self, timeout_cycles=200_000):
        """Wait until every client is idle; then check credits and memory."""
        start = self.cycle
        while any(c.busy() for c in self.clients):
            if self.failures:
                raise AssertionError(self.failures[0])
            if self.cycle - start > timeout_cycles:
                stuck = [(c.index, len(c.queue), len(c.waiting), len(c.wdata.queue))
                         for c in self.clients]
                raise AssertionError(f"no progress for {timeout_cycles} cycles "
                                     f"(channel, queued, waiting, words): {stuck}")
            await FallingEdge(self.dut.ap_clk)
        for _ in range(4):
            await FallingEdge(self.dut.ap_clk)
        for c in self.clients:
            for link in (c.req, c.wdata):
                try:
                    link.check_all_back()
                except CreditError as error:
                    raise AssertionError(f"channel {c.index}: {error}") from None
        assert not self.ram.violations, self.ram.violations[:5]
        if self.failures:
            raise AssertionError(self.failures[0])

    async def cycles(self, n):
        for _ in range(n):
            await FallingEdge(self.dut.ap_clk)

    def check_memory(self, addresses):
        """Every byte in ``addresses`` holds a legal value (nothing outside a write's
        bytes changed, no write lost)."""
        bad = []
        for addr in addresses:
            value = self.ram.mem.read(addr, 1)[0]
            if value not in self.golden.legal(addr):
                bad.append((addr, value, sorted(self.golden.legal(addr))))
        assert not bad, f"{len(bad)} bytes of memory hold illegal values, first {bad[0]}"
