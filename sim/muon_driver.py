"""cocotb bench of the ``v4hw_muon`` top: traffic BFMs for every node, the sniffer and
the scoreboard against the golden model (``golden.muon``).

One coroutine drives and samples every node each cycle (one Python wake-up per clock,
whatever the mesh size), so long runs stay fast on Verilator:

* **Sources**: each node has a queue of best-effort packets (offered flit by flit,
  ``valid`` held until taken) and a schedule of reserved packets, each flit offered in
  exactly its cycle (it preempts the best-effort packet in progress, flit by flit: the
  two VCs interleave on the port).
* **Sinks**: each ejection port has a random ``ready`` (back-pressure probability
  ``eject_stall``); flits are reassembled per VC.
* **Sniffer**: every packet (src, dst, class, reservation id, tx, rx, dropped) and every
  reservation request (request and grant cycles, answer) is recorded; :meth:`capture`
  writes them (``sim.muon_capture``).
* **Scoreboard**, checked as flits arrive and at :meth:`finish`: the head's time stamp is
  its injection cycle; each packet arrives once, intact (body flits carry its serial and
  index), at its destination, in order per (source, destination, class), or is dropped
  once, with a reason the golden model confirms (TSP: older than MAX_AGE in the cycle of
  the drop; a delivered packet was not stale when it won the ejection port), never in a
  reservation; a reserved packet arrives exactly ``golden.muon.zero_load_latency`` after
  its injection; the DROPPED_<class> and BAD_DST registers count exactly the drops seen.
"""

from collections import defaultdict, deque
from dataclasses import dataclass, field

from cocotb import start_soon
from cocotb.triggers import RisingEdge

from golden.muon import BAD_REQUEST, ReservationModel, is_stale, zero_load_latency
from hdl.muon import regmap
from hdl.muon.layouts import DropLayout, FlitLayout
from hdl.top.muon import caps_word
from spec.codes import BlockId, ErrorCode, MuonVc

from . import fcov
from .bfm import PERIOD_NS, KernelBench
from .bfm.credit import codec
from .blocks import descriptor
from .muon_capture import write_capture

__all__ = ["PERIOD_NS", "FLIT", "DROP", "Packet", "MuonBench", "ScoreboardError",
           "MUON_GTKW_GROUPS"]


# GTKWave groups of a v4hw_muon run (``WAVES=1``; patterns of ``sim.waves``): node 0's
# ports, the reservation arbiter, the windows, and router (0, 0) inside.
MUON_GTKW_GROUPS = [
    ("clock, reset, interrupt", ["ap_clk", "ap_rst_n", "interrupt"]),
    ("node 0 ports", ["inject0_valid", "inject0_ready", "inject0_payload",
                      "eject0_valid", "eject0_ready", "eject0_payload", "dropped0_valid"]),
    ("reservation arbiter", ["rbr.launch", "rbr.busy", "rbr.done", "rbr.fsm_state", "rbr.req",
                             "rbr.cand", "rbr.bump", "rbr.conflict", "rbr.port", "rbr.hop",
                             "rbr.walk_route", "rbr.result"]),
    ("reservation windows (block per router output)", ["mesh.block_*"]),
    ("router (0,0) outputs", ["mesh.r0_0.out_*.grant", "mesh.r0_0.out_*.locked?",
                              "mesh.r0_0.out_*.credits?", "mesh.r0_0.out_*.link__valid"]),
    ("router (0,0) inputs", ["mesh.r0_0.in_*.valid", "mesh.r0_0.in_*.port",
                             "mesh.r0_0.in_*.key", "mesh.r0_0.in_*.fifo?.level"]),
    ("s_axi_control", ["s_axi_control_*"]),
]


class ScoreboardError(AssertionError):
    pass


# Flits and drop events through their layouts (sim.bfm.credit's one packing path).
FLIT = codec(FlitLayout)
DROP = codec(DropLayout)
_BODY_INDEX_BITS = 16


@dataclass(eq=False)
class Packet:
    """One packet a test sends. ``vc`` RESERVED packets carry ``rsv_id`` and are sent at
    ``at`` (the cycle of their head), one flit per cycle."""
    serial: int
    src: tuple
    dst: tuple
    cls: int
    length: int
    vc: int = MuonVc.BEST_EFFORT
    rsv_id: int = 0
    at: int = None
    created: int = None
    tx: int = None
    rx: int = None
    rx_tail: int = None
    dropped: int = None
    bad_dst: bool = False
    flits_seen: int = 0
    sampled: bool = False
    waited: bool = False        # a flit of it was offered and not taken (the mesh was busy)
    stalled: bool = False       # the ejection ports had random back-pressure when it was made

    def flit(self, index):
        head, tail = index == 0, index == self.length - 1
        common = {"vc": self.vc, "head": int(head), "tail": int(tail)}
        if head:
            return FLIT.pack({**common, "data": {"header": {
                "src_x": self.src[0], "src_y": self.src[1], "dst_x": self.dst[0],
                "dst_y": self.dst[1], "cls": self.cls, "rsv_id": self.rsv_id}}})
        return FLIT.pack({**common, "data": {"payload": self.serial << _BODY_INDEX_BITS | index}})

    def record(self):
        """The packet as a capture record (``sim.muon_capture``)."""
        return {"src": list(self.src), "dst": list(self.dst), "cls": self.cls,
                "rsv_id": self.rsv_id if self.vc == MuonVc.RESERVED else None,
                "flits": self.length, "tx": self.tx, "rx": self.rx,
                "dropped": self.dropped is not None, "created": self.created}


@dataclass(eq=False)
class _Node:
    index: int
    xy: tuple
    queue: deque = field(default_factory=deque)       # best-effort packets not yet sent
    current: Packet = None                              # best-effort packet being sent
    sent: int = 0                                       # its flits already taken
    scheduled: dict = field(default_factory=dict)       # cycle → (packet, flit index)
    offered: tuple = None                               # (packet, index) offered this cycle
    ready: int = 1
    shown: int = None                                   # ejection: flit shown since
    rx: dict = field(default_factory=dict)              # vc → packet being received


class MuonBench(KernelBench):
    """The ``v4hw_muon`` top with a source and a sink on every node.

    ``cols``, ``rows``, ``slots``: the DUT's parameters (checked against CAPS).
    ``rng``: a ``random.Random`` from :func:`sim.seed.test_seed`.
    """

    BLOCK = BlockId.MUON
    REGMAP = regmap
    CAPS_LAYOUT = descriptor("muon").caps_layout
    RESET_EDGES = 4

    def __init__(self, dut, *, cols, rows, slots=8, be_depth=8, rsv_depth=4, rng=None):
        self.cols, self.rows = cols, rows
        self._caps_word = caps_word(cols, rows, slots, be_depth, rsv_depth)
        super().__init__(dut, rng=rng)
        self.golden = ReservationModel(cols, rows, slots)
        self.nodes = [_Node(n, (n % cols, n // cols)) for n in range(cols * rows)]
        self._ports = [(getattr(dut, f"inject{n}_valid"), getattr(dut, f"inject{n}_payload"),
                        getattr(dut, f"inject{n}_ready"), getattr(dut, f"eject{n}_valid"),
                        getattr(dut, f"eject{n}_payload"), getattr(dut, f"eject{n}_ready"),
                        getattr(dut, f"dropped{n}_valid"), getattr(dut, f"dropped{n}_payload"))
                       for n in range(cols * rows)]
        self.cycle = None           # timebase value of the cycle being driven
        self.max_age = 100
        self.eject_stall = 0.0
        self.packets = []
        self.by_key = {}            # (src node, ts) → packet
        self.reservations = []
        self.errors = []
        self._stopped = False
        self.generator = None       # optional: called each cycle to create packets
        self._serial = 0

    # -- set-up
    def idle_inputs(self):
        for valid, _, _, _, _, ready, _, _ in self._ports:
            valid.value = 0
            ready.value = 1

    async def after_reset(self):
        """The per-cycle loop runs from the falling edge that releases reset."""
        start_soon(self._loop())

    def expected_caps(self, caps):
        return self.decode_caps(self._caps_word)

    async def set_max_age(self, cycles):
        await self.regs.write("MAX_AGE", cycles)
        self.max_age = cycles

    def node(self, xy):
        return self.nodes[xy[1] * self.cols + xy[0]]

    def new_packet(self, src, dst, cls, length, **kwargs):
        self._serial += 1
        packet = Packet(self._serial, tuple(src), tuple(dst), cls, length,
                        stalled=self.eject_stall > 0, **kwargs)
        self.packets.append(packet)
        return packet

    def send(self, src, dst, cls, length=1):
        """Queue a best-effort packet at node ``src``."""
        packet = self.new_packet(src, dst, cls, length, created=self.cycle)
        self.node(src).queue.append(packet)
        return packet

    def send_reserved(self, src, dst, rsv_id, at, length=1, cls=7):
        """Schedule a reserved packet whose flits are injected in cycles at..at+length-1."""
        packet = self.new_packet(src, dst, cls, length, vc=MuonVc.RESERVED, rsv_id=rsv_id,
                                 at=at, created=at)
        node = self.node(src)
        for i in range(length):
            assert at + i not in node.scheduled, f"two reserved flits in cycle {at + i}"
            node.scheduled[at + i] = (packet, i)
        return packet

    # -- the per-cycle loop
    async def _loop(self):
        clk = self.dut.ap_clk
        while not self._stopped:
            await RisingEdge(clk)
            if self.cycle is None:
                self.cycle = 0      # the first cycle out of reset: timebase 0
            n = self.cycle
            for node, (_, _, ir, ev, ep, _, dv, dp) in zip(self.nodes, self._ports, strict=True):
                if node.offered is not None:
                    taken = int(ir.value)
                    if taken:
                        self._injected(node, *node.offered, n)
                    elif node.offered[0].vc == MuonVc.RESERVED:
                        self._error(f"cycle {n}: node {node.xy} did not take a reserved flit")
                    else:
                        node.offered[0].waited = True
                if int(ev.value):
                    if node.shown is None:
                        node.shown = n      # first cycle this flit is on the port
                    if node.ready:
                        self._ejected(node, int(ep.value), node.shown, n)
                        node.shown = None
                if int(dv.value):
                    self._dropped(node, int(dp.value), n)
            self.cycle = n + 1
            if self.generator is not None:
                self.generator(self, self.cycle)
            for node, (iv, ip, _, _, _, er, _, _) in zip(self.nodes, self._ports, strict=True):
                self._offer(node, iv, ip)
                ready = 1 if self.eject_stall == 0 else int(self.rng.random() >= self.eject_stall)
                if ready != node.ready:
                    er.value = ready
                    node.ready = ready

    def _offer(self, node, valid, payload):
        offer = node.scheduled.pop(self.cycle, None)
        if offer is None:
            if node.current is None and node.queue:
                node.current, node.sent = node.queue.popleft(), 0
            if node.current is not None:
                offer = (node.current, node.sent)
        if offer != node.offered:
            if offer is None:
                valid.value = 0
            else:
                if node.offered is None:
                    valid.value = 1
                payload.value = offer[0].flit(offer[1])
        node.offered = offer

    def _error(self, message):
        self.errors.append(message)

    def _injected(self, node, packet, index, n):
        if index == 0:
            packet.tx = n
            self.by_key[node.index, n] = packet
        if packet.vc == MuonVc.BEST_EFFORT:
            node.sent += 1
            if node.sent == packet.length:
                node.current = None

    def _ejected(self, node, word, n, taken):
        """A flit first shown on the ejection port in cycle ``n``, taken in ``taken``."""
        vc, head = FLIT.get(word, "vc"), FLIT.get(word, "head")
        tail = FLIT.get(word, "tail")
        if head:
            src = (FLIT.get(word, "data.header.src_x"), FLIT.get(word, "data.header.src_y"))
            ts = FLIT.get(word, "data.header.ts")
            packet = self.by_key.get((src[1] * self.cols + src[0], ts))
            if packet is None:
                self._error(f"cycle {n}: node {node.xy} got a head from {src} with time stamp "
                            f"{ts}, which no packet was injected with")
                return
            if node.rx.get(vc) is not None:
                self._error(f"cycle {n}: node {node.xy}: head of a new packet on VC {vc} "
                            f"before the tail of the last")
            if packet.rx is not None or packet.dropped is not None:
                self._error(f"cycle {n}: packet {packet.serial} arrived twice")
            dst = (FLIT.get(word, "data.header.dst_x"), FLIT.get(word, "data.header.dst_y"))
            if (dst != packet.dst or node.xy != packet.dst or vc != packet.vc
                    or FLIT.get(word, "data.header.cls") != packet.cls):
                self._error(f"cycle {n}: packet {packet.serial} ({packet.src}→{packet.dst}, "
                            f"VC {packet.vc}) arrived at {node.xy} as dst {dst}, VC {vc}")
            # It won the ejection port in the cycle before it was shown there.
            if vc == MuonVc.BEST_EFFORT and is_stale(packet.tx, n - 1, self.max_age):
                self._error(f"cycle {n}: packet {packet.serial} was delivered although "
                            f"{n - 1 - packet.tx} cycles old (MAX_AGE {self.max_age})")
            packet.rx, packet.flits_seen = n, 1
            node.rx[vc] = packet
        else:
            packet = node.rx.get(vc)
            if packet is None:
                self._error(f"cycle {n}: node {node.xy}: body flit on VC {vc} with no head")
                return
            payload = FLIT.get(word, "data.payload")
            expected = packet.serial << _BODY_INDEX_BITS | packet.flits_seen
            if payload != expected:
                self._error(f"cycle {n}: packet {packet.serial} flit {packet.flits_seen}: "
                            f"payload {payload:#x}, expected {expected:#x}")
            packet.flits_seen += 1
        if tail:
            if packet.flits_seen != packet.length:
                self._error(f"packet {packet.serial}: tail after {packet.flits_seen} of "
                            f"{packet.length} flits")
            packet.rx_tail = taken
            node.rx[vc] = None

    def _dropped(self, node, word, n):
        src = (DROP.get(word, "header.src_x"), DROP.get(word, "header.src_y"))
        ts = DROP.get(word, "header.ts")
        bad = DROP.get(word, "bad_dst")
        packet = self.by_key.get((src[1] * self.cols + src[0], ts))
        if packet is None:
            self._error(f"cycle {n}: node {node.xy} dropped an unknown packet {src}@{ts}")
            return
        if packet.rx is not None or packet.dropped is not None:
            self._error(f"cycle {n}: packet {packet.serial} dropped after delivery or twice")
        packet.dropped, packet.bad_dst = n, bool(bad)
        in_mesh = packet.dst[0] < self.cols and packet.dst[1] < self.rows
        if bad:
            if in_mesh or node.xy != packet.src:
                self._error(f"cycle {n}: packet {packet.serial} to {packet.dst} dropped at "
                            f"{node.xy} as a bad destination")
        elif packet.vc == MuonVc.RESERVED:
            self._error(f"cycle {n}: reserved packet {packet.serial} was dropped")
        elif node.xy != packet.dst or not is_stale(packet.tx, n, self.max_age):
            self._error(f"cycle {n}: packet {packet.serial} dropped at {node.xy}, "
                        f"{n - packet.tx} cycles old (MAX_AGE {self.max_age})")

    # -- waiting and checking
    def idle(self):
        """Nothing left to send and nothing in flight."""
        if any(node.queue or node.current or node.scheduled for node in self.nodes):
            return False
        return all(p.tx is not None and (p.rx_tail is not None or p.dropped is not None)
                   for p in self.packets)

    async def stop(self):
        """End the per-cycle loop (the node ports are left idle: nothing offered, ejection
        ready), e.g. before letting the clock run free; ``cycle`` is no longer counted."""
        self._stopped = True
        await RisingEdge(self.dut.ap_clk)
        for valid, _, _, _, _, ready, _, _ in self._ports:
            valid.value = 0
            ready.value = 1
        await RisingEdge(self.dut.ap_clk)

    async def drain(self, limit=100_000):
        """Wait until every packet has arrived or been dropped (or fail after ``limit``)."""
        for _ in range(limit):
            if self.idle():
                return
            await RisingEdge(self.dut.ap_clk)
        missing = [p.serial for p in self.packets if p.rx_tail is None and p.dropped is None]
        raise ScoreboardError(f"after {limit} cycles {len(missing)} packets are still "
                              f"missing (serials {missing[:10]}...)")

    async def finish(self):
        """Drain, then check everything the scoreboard knows; returns the packets."""
        await self.drain()
        self._sample()
        by_flow = defaultdict(list)
        for p in self.packets:
            if p.rx is not None:
                by_flow[p.src, p.dst, p.cls, p.vc].append(p)
            if p.vc == MuonVc.RESERVED:
                if p.tx != p.at:
                    self._error(f"reserved packet {p.serial} injected at {p.tx}, not {p.at}")
                if p.rx is not None and p.rx - p.tx != zero_load_latency(p.src, p.dst):
                    self._error(f"reserved packet {p.serial} took {p.rx - p.tx} cycles, "
                                f"not {zero_load_latency(p.src, p.dst)} (jitter)")
        for flow, packets in by_flow.items():
            txs = [p.tx for p in sorted(packets, key=lambda p: p.rx)]
            if txs != sorted(txs):
                self._error(f"flow {flow}: packets arrived out of order")
        for cls in range(8):
            count = await self.regs.read(f"DROPPED_{cls}")
            seen = sum(1 for p in self.packets
                       if p.dropped is not None and not p.bad_dst and p.cls == cls)
            if count != seen:
                self._error(f"DROPPED_{cls} = {count}, but {seen} drops of class {cls} seen")
        bad = await self.regs.read("BAD_DST")
        seen = sum(1 for p in self.packets if p.bad_dst)
        if bad != seen:
            self._error(f"BAD_DST = {bad}, but {seen} seen")
        self.check()
        return self.packets

    def _sample(self):
        """Functional coverage (:mod:`sim.fcov`): every packet sent, once, at its end."""
        if not fcov.enabled():
            return
        for p in self.packets:
            if p.tx is None or p.sampled:
                continue
            p.sampled = True
            outcome = ("delivered" if p.rx is not None else "bad_dst" if p.bad_dst
                       else "stale_drop")
            fcov.sample("muon", vc=MuonVc(p.vc).name, cls=p.cls,
                        length=fcov.muon_length_class(p.length), outcome=outcome,
                        waited=p.waited, bp=p.stalled)

    def check(self):
        if self.errors:
            raise ScoreboardError(f"{len(self.errors)} scoreboard errors; the first ones:\n  "
                                  + "\n  ".join(self.errors[:10]))

    # -- reservations
    async def reserve(self, src, dst, start, duration, bandwidth):
        """Request a reservation; checks the answer against the golden model and returns
        the capture record (``granted``, ``id``, ``retry_after``, cycles)."""
        await self.regs.write_fields("RSV_SRC", x=src[0], y=src[1])
        await self.regs.write_fields("RSV_DST", x=dst[0] & 0xF, y=dst[1] & 0xF)
        await self.regs.write("RSV_START_LO", start & 0xFFFF_FFFF)
        await self.regs.write("RSV_START_HI", start >> 32)
        await self.regs.write("RSV_DURATION", duration)
        await self.regs.write("RSV_BANDWIDTH", bandwidth)
        await self.regs.write("REQUEST", 1)
        while True:
            status = await self.regs.read_fields("STATUS")
            if not status["BUSY"]:
                break
        req_cycle = await self._read64("RSV_REQ_CYCLE")
        expected = self.golden.request(req_cycle, src, dst, start, duration, bandwidth)
        if expected == BAD_REQUEST:
            code = await self.regs.read("ERROR")
            assert status["ERROR"] and code == ErrorCode.BAD_COMMAND, (
                f"request {src}→{dst} start {start} duration {duration} bandwidth "
                f"{bandwidth}: expected BAD_COMMAND, STATUS {status}, ERROR {code}")
            fcov.sample("muon", "rsv", answer="bad_request")
            return None
        assert status["DONE"] and not status["ERROR"], f"request not done: {status}"
        result = await self.regs.read_fields("RSV_RESULT")
        retry = await self._read64("RSV_RETRY")
        grant_cycle = await self._read64("RSV_GRANT_CYCLE")
        got = (bool(result["GRANTED"]), bool(result["FULL"]), result["ID"], retry)
        want = (expected.granted, expected.full, expected.id, expected.retry_after)
        assert got == want, (f"request {src}→{dst} start {start} duration {duration} at "
                             f"cycle {req_cycle}: RTL (granted, full, id, retry) {got}, "
                             f"golden {want}")
        fcov.sample("muon", "rsv",
                    answer="granted" if got[0] else "full" if got[1] else "retry")
        record = {"src": list(src), "dst": list(dst), "start": start, "duration": duration,
                  "bandwidth": bandwidth, "req_cycle": req_cycle, "grant_cycle": grant_cycle,
                  "granted": got[0], "full": got[1], "id": got[2] if got[0] else None,
                  "retry_after": None if got[0] else retry}
        self.reservations.append(record)
        return record

    async def _read64(self, name):
        lo = await self.regs.read(f"{name}_LO")
        hi = await self.regs.read(f"{name}_HI")
        return hi << 32 | lo

    def capture(self, path):
        """Write the sniffer's records (``sim.muon_capture``)."""
        write_capture(path, {"cols": self.cols, "rows": self.rows, "max_age": self.max_age},
                      [p.record() for p in self.packets if p.tx is not None],
                      self.reservations)
