"""Traffic generators and latency sinks in RTL, for the Muon bench (``v4hw bench muon``).

``MuonBenchTop`` (Verilog module ``v4hw_muon_bench``) is the ``v4hw_muon`` top with, on
every node, a best-effort traffic source and a sink that keeps statistics, plus one
reserved-flow source, so a load sweep runs with the clock free (no Python per cycle).
With ``gen_enable`` low the node ports are those of ``v4hw_muon`` (same names), so the
cocotb bench of the plain top (``sim.muon_driver.MuonBench``) drives it unchanged.

Methodology (BookSim's): each source creates a packet of ``length`` flits in a cycle with
probability ``gen_rate / 2^16`` (Bernoulli), into a source queue of ``QUEUE`` packets (a
packet that finds it full is refused and counted); offered load = rate · length
flits/node/cycle. Packets created while ``gen_measure`` is high are *measured*: their
first body flit carries the creation cycle and a tag; a sink takes every flit at once
(ejection always ready) and, on a measured packet's tail, adds its latency (tail
ejection cycle − creation cycle, so source queueing counts) to its statistics. The bench
warms up, measures, then drains until every measured packet has arrived.

Destinations (``gen_pattern``): 0 uniform random (any node, itself included), 1
transpose (node (x, y) sends to (y, x); square meshes), 2 hotspot (a fraction
``gen_hot_frac / 2^16`` of packets go to node ``gen_hot``, the others uniform).

Zero-load packet latency of this set-up: the head is offered the cycle after its
creation, is on its destination's ejection port ``golden.muon.zero_load_latency`` later,
and the tail ``length - 1`` cycles after it: ``zero_load_packet(hops, length)``. Each sink
keeps the least ``latency - zero_load_packet`` (``slack_min``, never negative).

Reserved flow: ``rsv_enable`` sends ``rsv_count`` packets of ``length`` flits on the
reserved VC from node ``rsv_src`` to ``rsv_dst``, the k-th head in cycle ``rsv_start +
k · rsv_period``, each flit in exactly its cycle (it takes the injection port before a
best-effort flit). A flit the port does not take at once is counted in ``rsv_late``.
Each sink keeps, for reserved heads, the count and least and greatest ``now - ts``.
"""

from amaranth.hdl import (
    Cat,
    ClockDomain,
    ClockSignal,
    Const,
    DomainRenamer,
    Module,
    Mux,
    ResetSignal,
    Signal,
    signed,
)
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from golden.muon import zero_load_latency
from hdl.muon.layouts import (
    COORD_BITS,
    FLIT_DATA_BITS,
    RSV_ID_BITS,
    FlitDataLayout,
    FlitLayout,
)
from hdl.top.muon import MuonTop
from spec.codes import MuonVc, TrafficClass

__all__ = ["MuonBenchTop", "STATS", "PATTERNS", "QUEUE", "zero_load_packet"]

QUEUE = 16                      # source queue, packets
PATTERNS = {"uniform": 0, "transpose": 1, "hotspot": 2}
STAMP_BITS = 32                 # creation cycle carried in the first body flit
# Per node statistics (output ports ``stat<n>_<name>``), cleared by ``gen_clear``.
STATS = {
    "created": 32,      # measured packets created
    "refused": 32,      # packets refused, source queue full
    "sent": 32,         # best-effort packets injected (heads taken)
    "received": 32,     # best-effort packets received (tails)
    "delivered": 32,    # measured packets received
    "lat_sum": 48,      # sum of their latencies
    "lat_max": 32,
    "rx_flits": 32,     # flits received while gen_measure is high
    "rsv_count": 32,    # reserved heads received
    "rsv_min": 16,
    "rsv_max": 16,
}
_SIGNED_STATS = {"slack_min": 32}


def zero_load_packet(hops, length):
    """Creation to tail ejection of a ``length``-flit packet over ``hops`` hops, alone in
    the mesh: one cycle in the source queue, the head's zero-load latency, the body."""
    return 1 + zero_load_latency((0, 0), (hops, 0)) + length - 1


def _flit(vc, head, tail, data):
    """A flit's bits from its fields (no signal with a constant VC bit, which would give
    Verilator an `always @*` with nothing to wait for)."""
    layout = FlitLayout.as_shape()
    assert [layout[name].offset for name in ("vc", "head", "tail", "data")] == [0, 1, 2, 3]
    return Cat(Const(vc, 1), head, tail, data)


def _xorshift64(state):
    a = state ^ (state << 13)[:64]
    b = a ^ (a >> 7)
    return b ^ (b << 17)[:64]


def _scale(bits, size):
    """A uniform value in 0..size-1 from uniform random ``bits`` (multiply-high)."""
    return (bits * size) >> len(bits)


class MuonBenchTop(wiring.Component):
    """``v4hw_muon`` (``MuonTop(cols, rows, slots=slots)``) with RTL traffic for the bench;
    see the module docstring. ``length``: flits per packet (2..16).

    Everything sits one level down (``bench``), so that a Verilator build that makes only
    the top public (``run_cocotb(verilator_public="top")``) registers the ports alone.
    """

    def __init__(self, cols=4, rows=4, *, slots=8, length=4):
        try:
            self._core = _BenchCore(cols, rows, slots=slots, length=length)
        except ValueError:
            self._MustUse__silence = True          # refused: never elaborated
            raise
        self.cols, self.rows, self.length = cols, rows, length
        super().__init__(dict(self._core.signature.members))

    def elaborate(self, platform):
        m = Module()
        m.submodules.bench = core = self._core
        for name, member in self.signature.members.items():
            if member.flow == In:
                m.d.comb += getattr(core, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(core, name))
        return m


class _BenchCore(wiring.Component):
    """The bench proper (:class:`MuonBenchTop`'s only submodule)."""

    def __init__(self, cols=4, rows=4, *, slots=8, length=4):
        if not isinstance(length, int) or not 2 <= length <= 16:
            self._MustUse__silence = True          # refused: never elaborated
            raise ValueError(f"bench packets have 2..16 flits (the first body flit carries "
                             f"the creation cycle), not {length!r}")
        self.dut = MuonTop(cols, rows, slots=slots)
        self.cols, self.rows, self.length = cols, rows, length
        members = dict(self.dut.signature.members)
        members.update({
            "gen_enable": In(1), "gen_clear": In(1), "gen_measure": In(1),
            "gen_rate": In(16), "gen_pattern": In(2), "gen_seed": In(32),
            "gen_hot_x": In(COORD_BITS), "gen_hot_y": In(COORD_BITS), "gen_hot_frac": In(16),
            "rsv_enable": In(1), "rsv_src": In(8), "rsv_dst_x": In(COORD_BITS),
            "rsv_dst_y": In(COORD_BITS), "rsv_id": In(RSV_ID_BITS), "rsv_start": In(64),
            "rsv_period": In(16), "rsv_count": In(16),
            "rsv_late": Out(32), "rsv_sent": Out(32), "bench_now": Out(64),
        })
        for n in range(cols * rows):
            for name, width in STATS.items():
                members[f"stat{n}_{name}"] = Out(width)
            for name, width in _SIGNED_STATS.items():
                members[f"stat{n}_{name}"] = Out(signed(width))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        cols, rows = self.cols, self.rows
        nodes = cols * rows
        node_ports = {f"{kind}{n}" for n in range(nodes) for kind in ("inject", "eject")}
        for name, member in dut.signature.members.items():
            if name.rsplit("_", 1)[0] in node_ports:
                continue
            if member.flow == In:
                m.d.comb += getattr(dut, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(dut, name))

        # The bench's own domain on the top's clock and reset ("sync" is the top's).
        m.domains.bench = ClockDomain()
        m.d.comb += [ClockSignal("bench").eq(self.ap_clk), ResetSignal("bench").eq(~self.ap_rst_n)]
        now = Signal(64)            # the same count as the top's timebase (0 after reset)
        m.d.bench += now.eq(now + 1)
        m.d.comb += self.bench_now.eq(now)

        rsv_flit, rsv_valid, rsv_taken = self._reserved_source(m, now)
        for n in range(nodes):
            x, y = n % cols, n // cols
            outer = {f"{kind}_{name}": getattr(self, f"{kind}{n}_{name}")
                     for kind in ("inject", "eject") for name in ("valid", "ready", "payload")}
            inner = {f"{kind}_{name}": getattr(dut, f"{kind}{n}_{name}")
                     for kind in ("inject", "eject") for name in ("valid", "ready", "payload")}
            offer_valid, offer_flit, taken = self._source(m, n, x, y, now)
            mine = rsv_valid & (self.rsv_src == n)
            with m.If(self.gen_enable):
                # A reserved flit takes the injection port before a best-effort one.
                m.d.comb += [
                    inner["inject_valid"].eq(mine | offer_valid),
                    inner["inject_payload"].eq(Mux(mine, rsv_flit, offer_flit)),
                    taken.eq(~mine & offer_valid & inner["inject_ready"]),
                    inner["eject_ready"].eq(1),     # the sink takes every flit
                ]
                with m.If(mine & inner["inject_ready"]):
                    m.d.comb += rsv_taken.eq(1)
            with m.Else():
                m.d.comb += [inner["inject_valid"].eq(outer["inject_valid"]),
                             inner["inject_payload"].eq(outer["inject_payload"]),
                             inner["eject_ready"].eq(outer["eject_ready"])]
            m.d.comb += [outer["inject_ready"].eq(inner["inject_ready"] & ~self.gen_enable),
                         outer["eject_valid"].eq(inner["eject_valid"]),
                         outer["eject_payload"].eq(inner["eject_payload"])]
            self._sink(m, n, x, y, now, inner["eject_valid"] & self.gen_enable,
                       FlitLayout(inner["eject_payload"]))
        return m

    def _stats(self, m, n):
        """Node n's statistics registers (created on first use), cleared by gen_clear."""
        regs = self._stat_regs.get(n) if hasattr(self, "_stat_regs") else None
        if regs is None:
            regs = {}
            for name, width in STATS.items():
                init = (1 << width) - 1 if name == "rsv_min" else 0
                regs[name] = Signal(width, name=f"stat{n}_{name}_r", init=init)
            regs["slack_min"] = Signal(signed(32), name=f"stat{n}_slack_min_r",
                                       init=(1 << 31) - 1)
            for name, reg in regs.items():
                m.d.comb += getattr(self, f"stat{n}_{name}").eq(reg)
            self._stat_regs = getattr(self, "_stat_regs", {})
            self._stat_regs[n] = regs
        return regs

    def _clear_stats(self, m):
        """Last, so that it wins over every update of the same cycle."""
        for regs in self._stat_regs.values():
            with m.If(self.gen_clear):
                m.d.bench += [reg.eq(reg.init) for reg in regs.values()]

    # -- one reserved flow, from the node rsv_src
    def _reserved_source(self, m, now):
        length = self.length
        nxt = Signal(64, name="rsv_next")
        left = Signal(16, name="rsv_left")
        index = Signal(range(length), name="rsv_index")
        late, sent = Signal(32, name="rsv_late_r"), Signal(32, name="rsv_sent_r")
        armed = Signal(name="rsv_armed")
        taken = Signal(name="rsv_taken")
        m.d.comb += [self.rsv_late.eq(late), self.rsv_sent.eq(sent)]
        data = FlitDataLayout(Signal(FLIT_DATA_BITS, name="rsv_data"))
        valid = Signal(name="rsv_valid")
        header = data.header
        with m.If(index == 0):
            m.d.comb += [header.src_x.eq(self.rsv_src % self.cols),
                         header.src_y.eq(self.rsv_src // self.cols),
                         header.dst_x.eq(self.rsv_dst_x), header.dst_y.eq(self.rsv_dst_y),
                         header.cls.eq(TrafficClass.DECODE), header.rsv_id.eq(self.rsv_id)]
        with m.Else():
            m.d.comb += data.payload.eq(index)
        flit = _flit(MuonVc.RESERVED, index == 0, index == length - 1, data)
        due = armed & (left != 0) & (index == 0) & (now == nxt)
        m.d.comb += valid.eq(self.rsv_enable & armed & (due | (index != 0)))
        with m.If(due):
            m.d.bench += nxt.eq(nxt + self.rsv_period)
        with m.If(valid & ~taken):
            m.d.bench += late.eq(late + 1)
        with m.If(valid & taken):
            with m.If(index == length - 1):
                m.d.bench += [index.eq(0), left.eq(left - 1), sent.eq(sent + 1)]
            with m.Else():
                m.d.bench += index.eq(index + 1)
        with m.If(~self.rsv_enable):
            m.d.bench += [armed.eq(0), index.eq(0)]
        with m.Elif(~armed):
            m.d.bench += [armed.eq(1), nxt.eq(self.rsv_start), left.eq(self.rsv_count),
                         late.eq(0), sent.eq(0), index.eq(0)]
        return flit, valid, taken

    # -- best-effort source of node n
    def _source(self, m, n, x, y, now):
        cols, rows, length = self.cols, self.rows, self.length
        state = Signal(64, name=f"lfsr{n}")
        # Each node its own stream: the seed mixed with the node number (never all zero).
        seeded = Cat(self.gen_seed, Const(0x9E37_79B9 ^ (n * 0x6A09_E667 & 0xFFFF_FFFF), 32)) | 1
        with m.If(~self.gen_enable):
            m.d.bench += state.eq(seeded)
        with m.Else():
            m.d.bench += state.eq(_xorshift64(state))
        r_rate, r_hot, r_x, r_y = state[0:16], state[16:32], state[32:48], state[48:64]
        uni_x, uni_y = _scale(r_x, cols), _scale(r_y, rows)
        dst_x = Signal(COORD_BITS, name=f"gen_dst_x{n}")
        dst_y = Signal(COORD_BITS, name=f"gen_dst_y{n}")
        with m.Switch(self.gen_pattern):
            with m.Case(PATTERNS["transpose"]):
                m.d.comb += [dst_x.eq(y % cols), dst_y.eq(x % rows)]
            with m.Case(PATTERNS["hotspot"]):
                hot = r_hot < self.gen_hot_frac
                m.d.comb += [dst_x.eq(Mux(hot, self.gen_hot_x, uni_x)),
                             dst_y.eq(Mux(hot, self.gen_hot_y, uni_y))]
            with m.Default():
                m.d.comb += [dst_x.eq(uni_x), dst_y.eq(uni_y)]

        queue = DomainRenamer("bench")(SyncFIFO(width=STAMP_BITS + 1 + 2 * COORD_BITS,
                                                depth=QUEUE))
        m.submodules[f"queue{n}"] = queue
        fire = self.gen_enable & (r_rate < self.gen_rate)
        m.d.comb += [queue.w_en.eq(fire),
                     queue.w_data.eq(Cat(now[:STAMP_BITS], self.gen_measure, dst_x, dst_y))]
        stats = self._stats(m, n)
        with m.If(fire & ~queue.w_rdy):
            m.d.bench += stats["refused"].eq(stats["refused"] + 1)
        with m.Elif(fire & self.gen_measure):
            m.d.bench += stats["created"].eq(stats["created"] + 1)

        fields = queue.r_data
        stamp, measured = fields[:STAMP_BITS], fields[STAMP_BITS]
        q_dst_x = fields[STAMP_BITS + 1:][:COORD_BITS]
        q_dst_y = fields[STAMP_BITS + 1 + COORD_BITS:][:COORD_BITS]
        index = Signal(range(length), name=f"gen_index{n}")
        data = FlitDataLayout(Signal(FLIT_DATA_BITS, name=f"gen_data{n}"))
        header = data.header
        with m.If(index == 0):
            m.d.comb += [header.src_x.eq(x), header.src_y.eq(y), header.dst_x.eq(q_dst_x),
                         header.dst_y.eq(q_dst_y), header.cls.eq(TrafficClass.DECODE)]
        with m.Elif(index == 1):
            m.d.comb += data.payload.eq(Cat(stamp, measured))
        with m.Else():
            m.d.comb += data.payload.eq(index)
        flit = _flit(MuonVc.BEST_EFFORT, index == 0, index == length - 1, data)
        taken = Signal(name=f"gen_taken{n}")
        with m.If(taken):
            with m.If(index == length - 1):
                m.d.bench += index.eq(0)
                m.d.comb += queue.r_en.eq(1)
            with m.Else():
                m.d.bench += index.eq(index + 1)
            with m.If(index == 0):
                m.d.bench += stats["sent"].eq(stats["sent"] + 1)
        with m.If(~self.gen_enable):
            m.d.bench += index.eq(0)
        return queue.r_rdy, flit, taken

    # -- sink of node n
    def _sink(self, m, n, x, y, now, take, flit):
        stats = self._stats(m, n)
        header = flit.data.header
        hops = Signal(2 * COORD_BITS, name=f"sink_hops{n}")
        stamp = Signal(STAMP_BITS, name=f"sink_stamp{n}")
        measured = Signal(name=f"sink_measured{n}")
        first_body = Signal(name=f"sink_first_body{n}")   # the next BE flit carries the stamp
        # Stamp and tag of the packet whose tail this may be (a 2-flit packet's first body
        # flit is its tail).
        cur_stamp = Mux(first_body, flit.data.payload[:STAMP_BITS], stamp)
        cur_measured = Mux(first_body, flit.data.payload[STAMP_BITS], measured)
        latency = Signal(STAMP_BITS, name=f"sink_latency{n}")
        slack = Signal(signed(STAMP_BITS + 1), name=f"sink_slack{n}")
        m.d.comb += [latency.eq(now[:STAMP_BITS] - cur_stamp),
                     slack.eq(latency - zero_load_packet(0, self.length) - 2 * hops)]
        rsv_lat = Signal(64, name=f"sink_rsv_latency{n}")
        m.d.comb += rsv_lat.eq(now - header.ts)
        with m.If(take):
            with m.If(self.gen_measure):
                m.d.bench += stats["rx_flits"].eq(stats["rx_flits"] + 1)
            with m.If(flit.vc == MuonVc.BEST_EFFORT):
                with m.If(flit.head):
                    m.d.bench += [
                        hops.eq(Mux(header.src_x > x, header.src_x - x, x - header.src_x)
                                + Mux(header.src_y > y, header.src_y - y, y - header.src_y)),
                        first_body.eq(1)]
                with m.Elif(first_body):
                    m.d.bench += [stamp.eq(cur_stamp), measured.eq(cur_measured),
                                 first_body.eq(0)]
                with m.If(flit.tail):
                    m.d.bench += stats["received"].eq(stats["received"] + 1)
                    with m.If(cur_measured):
                        m.d.bench += [stats["delivered"].eq(stats["delivered"] + 1),
                                     stats["lat_sum"].eq(stats["lat_sum"] + latency)]
                        with m.If(latency > stats["lat_max"]):
                            m.d.bench += stats["lat_max"].eq(latency)
                        with m.If(slack < stats["slack_min"]):
                            m.d.bench += stats["slack_min"].eq(slack)
            with m.Elif(flit.head):
                m.d.bench += stats["rsv_count"].eq(stats["rsv_count"] + 1)
                with m.If(rsv_lat < stats["rsv_min"]):
                    m.d.bench += stats["rsv_min"].eq(rsv_lat)
                with m.If(rsv_lat > stats["rsv_max"]):
                    m.d.bench += stats["rsv_max"].eq(rsv_lat)
        if n == self.cols * self.rows - 1:
            self._clear_stats(m)
