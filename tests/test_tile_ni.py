# amaranth: UnusedElaboratable=no
"""The network interfaces of the tile in the Amaranth simulator: requester NIs on a 2×2
Muon mesh, the memory NI in front of an ``McCore`` and a memory model, random reads and
writes (random strobes, lengths, back-pressure) checked against a dict memory; the NIs'
protocol checkers (``checks=True``) run throughout."""

import random
from collections import deque

import pytest
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib import wiring
from amaranth.sim import Simulator

from hdl.mc.core import McCore
from hdl.muon.layouts import flit_layout
from hdl.muon.mesh import Mesh, node_index
from hdl.muon.router import Router
from hdl.tile.memni import MemoryNi
from hdl.tile.ni import RequesterNi
from hdl.tile.packets import min_flit_data_bits
from spec.codes import McOp, TrafficClass

DW = 128
LANES = DW // 8
FB = min_flit_data_bits(DW)
MEM_NODE = (1, 1)
REGION = 0x400          # bytes of each requester's region (inside one 4 KiB page)


class _Tile(Elaboratable):
    """Requester NIs at ``nodes``, the memory NI and an MC (a read channel and a write
    channel) at (1, 1) of a 2×2 mesh."""

    def __init__(self, nodes, mem_credits=None, **ni_args):
        self.mesh = Mesh(2, 2, flit_data_bits=FB, stale_drop=False)
        self.nis = [RequesterNi(DW, FB, node, MEM_NODE, checks=True, **ni_args)
                    for node in nodes]
        self.mc = McCore(2, DW, checks=True)
        self.mem_ni = MemoryNi(DW, FB, MEM_NODE, nodes, channel=self.mc.channel_signature,
                               credits=mem_credits or self.nis[0].credit_count, checks=True)
        self.now = Signal(64)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mesh, m.submodules.mc = self.mesh, self.mc
        m.d.sync += self.now.eq(self.now + 1)
        m.d.comb += [self.mesh.now.eq(self.now), self.mesh.max_age.eq(0)]  # all would be stale
        ends = [(ni, ni.node) for ni in self.nis] + [(self.mem_ni, MEM_NODE)]
        for k, (ni, (x, y)) in enumerate(ends):
            m.submodules[f"ni{k}"] = ni
            n = node_index(x, y, 2)
            wiring.connect(m, ni.inject, self.mesh.inject[n])
            wiring.connect(m, self.mesh.eject[n], ni.eject)
        wiring.connect(m, self.mem_ni.rd_chan, self.mc.chans[0])
        wiring.connect(m, self.mem_ni.wr_chan, self.mc.chans[1])
        return m


class _Memory:
    """The MC's memory port: reads answered ``latency`` cycles after their address, in
    order; a write lands when its address and all its words are in."""

    def __init__(self, port, rng, mem, latency=(3, 8), ready=0.7):
        self.port, self.rng, self.mem = port, rng, mem
        self.latency, self.ready = latency, ready
        self.reads, self.writes, self.acks, self.beats = deque(), deque(), deque(), deque()

    def drive(self, ctx, cycle):
        p, rng = self.port, self.rng
        for s in (p.rd_req, p.wr_req, p.wr_data):
            ctx.set(s.ready, rng.random() < self.ready)
        self.r_word = None
        if self.reads and self.reads[0][0] <= cycle and rng.random() < self.ready:
            _, addr, beats = self.reads[0]
            word = int.from_bytes(bytes(self.mem.get(addr + i, 0) for i in range(LANES)),
                                  "little")
            self.r_word = {"data": word, "last": int(beats == 1), "error": 0}
        ctx.set(p.rd_resp.valid, self.r_word is not None)
        if self.r_word is not None:
            ctx.set(p.rd_resp.payload, self.r_word)
        self.b_valid = bool(self.acks) and rng.random() < self.ready
        ctx.set(p.wr_resp.valid, self.b_valid)

    def sample(self, ctx, cycle):
        p = self.port
        if ctx.get(p.rd_req.valid) and ctx.get(p.rd_req.ready):
            req = ctx.get(p.rd_req.payload)
            self.reads.append([cycle + self.rng.randint(*self.latency), req.addr, req.len + 1])
        if self.r_word is not None and ctx.get(p.rd_resp.ready):
            self.reads[0][1] += LANES
            self.reads[0][2] -= 1
            if self.reads[0][2] == 0:
                self.reads.popleft()
        if ctx.get(p.wr_req.valid) and ctx.get(p.wr_req.ready):
            req = ctx.get(p.wr_req.payload)
            self.writes.append([req.addr, req.len + 1])
        if ctx.get(p.wr_data.valid) and ctx.get(p.wr_data.ready):
            self.beats.append(ctx.get(p.wr_data.payload))
        while self.writes and len(self.beats) >= self.writes[0][1]:
            addr, count = self.writes.popleft()
            for k in range(count):
                word = self.beats.popleft()
                assert bool(word.last) == (k == count - 1)
                data = word.data.to_bytes(LANES, "little")
                for i in range(LANES):
                    if word.strb >> i & 1:
                        self.mem[addr + k * LANES + i] = data[i]
            self.acks.append(cycle)
        if self.b_valid and ctx.get(p.wr_resp.ready):
            self.acks.popleft()


def _strobes(rng):
    kind = rng.random()
    if kind < 0.4:
        return (1 << LANES) - 1
    if kind < 0.5:
        return 0
    if kind < 0.7:      # one run
        lo = rng.randrange(LANES)
        return ((1 << (rng.randint(lo + 1, LANES))) - 1) & ~((1 << lo) - 1)
    return rng.getrandbits(LANES)


class _Block:
    """A block on a requester NI's memory port: random read and write bursts inside its
    own region, never a read over a write in flight nor a write over a read in flight
    (so every read has one right answer), random back-pressure on the answers."""

    def __init__(self, port, rng, mem, base, count, max_beats=24, ready=0.7):
        self.port, self.rng, self.mem, self.base = port, rng, mem, base
        self.left, self.max_beats, self.ready = count, max_beats, ready
        self.rd = self.wr = None                  # the request being offered
        self.words = deque()                      # write words to offer, in order
        self.reads = deque()                      # expected words of reads in flight
        self.writes = deque()                     # writes in flight: (lo, hi, words)
        self.read_ranges = deque()
        self.done_reads = self.done_writes = 0

    def _range_free(self, lo, hi, ranges):
        return all(hi <= a or b <= lo for a, b in ranges)

    def _reading(self):
        offered = [] if self.rd is None else [
            (self.rd["addr"], self.rd["addr"] + (self.rd["len"] + 1) * LANES)]
        return list(self.read_ranges) + offered

    def _new(self):
        rng = self.rng
        beats = rng.randint(1, self.max_beats)
        addr = self.base + LANES * rng.randrange(REGION // LANES - beats + 1)
        lo, hi = addr, addr + beats * LANES
        if rng.random() < 0.5:
            if self.rd is None and self._range_free(lo, hi, [w[:2] for w in self.writes]):
                self.rd = {"addr": addr, "len": beats - 1}
                self.left -= 1
        elif self.wr is None and self._range_free(lo, hi, self._reading()):
            self.wr = {"addr": addr, "len": beats - 1}
            words = [(rng.getrandbits(DW), _strobes(rng), int(k == beats - 1))
                     for k in range(beats)]
            self.words.extend(words)
            self.writes.append((lo, hi, addr, words))
            self.left -= 1

    def drive(self, ctx):
        p, rng = self.port, self.rng
        if self.left and rng.random() < 0.5:
            self._new()
        ctx.set(p.rd_req.valid, self.rd is not None)
        if self.rd is not None:
            ctx.set(p.rd_req.payload, self.rd)
        ctx.set(p.wr_req.valid, self.wr is not None)
        if self.wr is not None:
            ctx.set(p.wr_req.payload, self.wr)
        self.w_valid = bool(self.words) and rng.random() < self.ready
        ctx.set(p.wr_data.valid, self.w_valid)
        if self.w_valid:
            data, strb, last = self.words[0]
            ctx.set(p.wr_data.payload, {"data": data, "strb": strb, "last": last})
        ctx.set(p.rd_resp.ready, rng.random() < self.ready)
        ctx.set(p.wr_resp.ready, rng.random() < self.ready)

    def sample(self, ctx):
        p = self.port
        if self.rd is not None and ctx.get(p.rd_req.ready):
            addr, beats = self.rd["addr"], self.rd["len"] + 1
            words = [int.from_bytes(bytes(self.mem.get(addr + k * LANES + i, 0)
                                          for i in range(LANES)), "little")
                     for k in range(beats)]
            self.reads.append(words)
            self.read_ranges.append((addr, addr + beats * LANES))
            self.rd = None
        if self.wr is not None and ctx.get(p.wr_req.ready):
            self.wr = None
        if self.w_valid and ctx.get(p.wr_data.ready):
            self.words.popleft()
        if ctx.get(p.rd_resp.valid) and ctx.get(p.rd_resp.ready):
            item = ctx.get(p.rd_resp.payload)
            assert self.reads, "read word that nobody asked for"
            expected = self.reads[0].pop(0)
            assert item.error == 0
            assert item.data == expected, f"read word {item.data:#x}, expected {expected:#x}"
            assert bool(item.last) == (not self.reads[0])
            if item.last:
                self.reads.popleft()
                self.read_ranges.popleft()
                self.done_reads += 1
        if ctx.get(p.wr_resp.valid) and ctx.get(p.wr_resp.ready):
            assert self.writes, "write answer that nobody asked for"
            assert ctx.get(p.wr_resp.payload).error == 0
            _, _, addr, words = self.writes.popleft()
            for k, (data, strb, _) in enumerate(words):       # the memory has them now
                for i in range(LANES):
                    if strb >> i & 1:
                        self.mem[addr + k * LANES + i] = data >> (8 * i) & 0xFF
            self.done_writes += 1

    def idle(self):
        return not (self.left or self.rd or self.wr or self.words or self.reads or self.writes)


def _run(dut, blocks, memory, limit, cls=TrafficClass.DECODE, after=None):
    """Clock the tile until every block is idle; returns the cycles taken."""
    result = {}

    async def bench(ctx):
        for ni in dut.nis:
            ctx.set(ni.cls, cls)
        for cycle in range(limit):
            memory.drive(ctx, cycle)
            for block in blocks:
                block.drive(ctx)
            memory.sample(ctx, cycle)
            for block in blocks:
                block.sample(ctx)
            for n in range(4):
                assert not ctx.get(dut.mesh.dropped[n].valid), "the mesh dropped a packet"
            await ctx.tick()
            if all(block.idle() for block in blocks):
                break
        else:
            raise AssertionError(f"the traffic did not finish in {limit} cycles")
        result["cycles"] = cycle + 1
        if after is not None:
            await after(ctx)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return result["cycles"]


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.regress)])
def test_three_requesters_random_traffic(seed):
    rng = random.Random(seed)
    print(f"seed {seed}")
    nodes = [(0, 0), (1, 0), (0, 1)]
    dut = _Tile(nodes, rd_buffer=32, rd_piece=8, wr_chunk=8, credits=24)
    mem = {}
    memory = _Memory(dut.mc.mem, random.Random(rng.getrandbits(32)), mem)
    # The blocks' view of the memory is the same dict: they write it when a write is
    # answered, and the memory model has written it by then.
    check_mem = {}
    for k in range(len(nodes)):
        for i in range(REGION):
            check_mem[0x1000 * (k + 1) + i] = mem[0x1000 * (k + 1) + i] = rng.getrandbits(8)
    blocks = [_Block(ni.port, random.Random(rng.getrandbits(32)), check_mem, 0x1000 * (k + 1),
                     40) for k, ni in enumerate(dut.nis)]

    async def settle(ctx):
        for _ in range(40):      # the last credits come home
            await ctx.tick()
        for ni in dut.nis:
            assert ctx.get(ni._credits) == ni.credit_count, "request credits not conserved"
        assert ctx.get(dut.mem_ni.owed) == 0, "credits still owed"

    cycles = _run(dut, blocks, memory, 30000, after=settle)
    print(f"{cycles} cycles, reads {[b.done_reads for b in blocks]}, "
          f"writes {[b.done_writes for b in blocks]}")
    assert all(b.done_reads and b.done_writes for b in blocks)
    assert mem == check_mem


class _Streamer:
    """A block streaming ``bursts`` bursts of ``beats`` words (reads, or full-strobe
    writes) through a region, back to back, never holding its answers back."""

    def __init__(self, port, op, bursts, beats, mem, base=0x1000):
        self.port, self.op, self.beats, self.mem = port, op, beats, mem
        span = REGION // (beats * LANES)
        self.addrs = deque(base + beats * LANES * (k % span) for k in range(bursts))
        self.written = {}                      # the last byte written at each address
        self.now, self.finished = None, None   # the cycle the last answer came
        self.words = deque()
        self.expect = deque()
        self.answers = 0
        self.bursts = bursts

    def drive(self, ctx):
        p = self.port
        req = p.rd_req if self.op == "read" else p.wr_req
        ctx.set(req.valid, bool(self.addrs))
        if self.addrs:
            ctx.set(req.payload, {"addr": self.addrs[0], "len": self.beats - 1})
        self.w_valid = bool(self.words)
        ctx.set(p.wr_data.valid, self.w_valid)
        if self.w_valid:
            ctx.set(p.wr_data.payload, self.words[0])
        ctx.set(p.rd_resp.ready, 1)
        ctx.set(p.wr_resp.ready, 1)

    def sample(self, ctx):
        p = self.port
        req = p.rd_req if self.op == "read" else p.wr_req
        if self.addrs and ctx.get(req.ready):
            addr = self.addrs.popleft()
            for k in range(self.beats):
                word = int.from_bytes(bytes(self.mem.get(addr + k * LANES + i, 0)
                                            for i in range(LANES)), "little")
                if self.op == "read":
                    self.expect.append(word)
                else:
                    word ^= 1 << (8 * (len(self.written) % LANES))
                    self.words.append({"data": word, "strb": (1 << LANES) - 1,
                                       "last": int(k == self.beats - 1)})
                    for i in range(LANES):
                        self.written[addr + k * LANES + i] = word >> (8 * i) & 0xFF
        if self.w_valid and ctx.get(p.wr_data.ready):
            self.words.popleft()
        if self.op == "read" and ctx.get(p.rd_resp.valid):
            assert ctx.get(p.rd_resp.payload).data == self.expect.popleft()
            self.answers += ctx.get(p.rd_resp.payload).last
        if self.op == "write" and ctx.get(p.wr_resp.valid):
            self.answers += 1
        if self.answers == self.bursts and self.finished is None:
            self.finished = ctx.get(self.now) if self.now is not None else 0

    def idle(self):
        return self.answers == self.bursts


def test_checker_catches_credit_overrun():
    """Requesters that hold more credits than the memory NI has room for: its checker
    reports the flit that finds the buffer full."""
    nodes = [(0, 0), (1, 0), (0, 1)]
    dut = _Tile(nodes, mem_credits=9, rd_buffer=32, rd_piece=8, wr_chunk=8, credits=24)
    mem = {}
    memory = _Memory(dut.mc.mem, random.Random(1), mem, ready=0.3)
    blocks = [_Block(ni.port, random.Random(k), dict(mem), 0x1000 * (k + 1), 40, ready=1.0)
              for k, ni in enumerate(dut.nis)]
    with pytest.raises(AssertionError, match="flit lost"):
        _run(dut, blocks, memory, 3000)


def _mc_alone(op, bursts, beats, latency):
    """The same stream straight on the MC's client channel (a client that always has
    its requests and words ready and frees each answer at once): cycles taken."""
    mc = McCore(1, DW)
    memory = _Memory(mc.mem, random.Random(0), {}, latency=(latency, latency), ready=1.0)
    chan, sig = mc.chans[0], mc.channel_signature
    result = {}

    async def bench(ctx):
        credits = {"req": sig.req_depth, "wdata": sig.wdata_depth}
        reqs, words, answers = bursts, 0, 0
        for cycle in range(20 * bursts * beats):
            memory.drive(ctx, cycle)
            send_req = reqs > 0 and credits["req"] > 0
            send_word = words > 0 and credits["wdata"] > 0
            ctx.set(chan.req.valid, send_req)
            ctx.set(chan.req.payload, {"op": McOp.READ if op == "read" else McOp.WRITE,
                                       "addr": 0x1000, "length": beats * LANES, "cls": 7})
            ctx.set(chan.wdata.valid, send_word)
            memory.sample(ctx, cycle)
            reqs -= send_req
            words += send_req * beats * (op == "write") - send_word
            credits["req"] += ctx.get(chan.req.credit) - send_req
            credits["wdata"] += ctx.get(chan.wdata.credit) - send_word
            answer = ctx.get(chan.resp.valid)
            ctx.set(chan.resp.credit, answer)
            answers += answer and ctx.get(chan.resp.payload.last)
            await ctx.tick()
            if answers == bursts:
                result["cycles"] = cycle + 1
                return
        raise AssertionError("the MC's stream did not finish")

    sim = Simulator(mc)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return result["cycles"]


@pytest.mark.parametrize("op", ["read", "write"])
def test_streaming_efficiency(op):
    """One NI pair, an always-ready memory of fixed latency, a stream of 16-word bursts:
    words per cycle through the NIs and the mesh, against the MC's own on its channel."""
    bursts, beats, latency = 32, 16, 10
    dut = _Tile([(0, 0)])
    mem = {0x1000 + i: (i * 37) & 0xFF for i in range(REGION)}
    memory = _Memory(dut.mc.mem, random.Random(0), mem, latency=(latency, latency), ready=1.0)
    streamer = _Streamer(dut.nis[0].port, op, bursts, beats, dict(mem))
    cycles = _run(dut, [streamer], memory, 20 * bursts * beats)
    alone = _mc_alone(op, bursts, beats, latency)
    words = bursts * beats
    print(f"{op}: {bursts} bursts of {beats} words, memory latency {latency}: through the NIs "
          f"{cycles} cycles ({words / cycles:.3f} words/cycle), MC alone {alone} cycles "
          f"({words / alone:.3f}): {alone / cycles:.1%}")
    assert alone / cycles >= 0.85


def test_saturation_every_node_streaming():
    """All three requesters stream at once (two reading, one writing, each its own
    region): everything arrives, right, and nothing deadlocks; prints the words per
    cycle the memory node moves."""
    bursts, beats = 16, 16
    nodes = [(0, 0), (1, 0), (0, 1)]
    dut = _Tile(nodes)
    mem = {0x1000 * (k + 1) + i: (i * 37 + k) & 0xFF for k in range(3) for i in range(REGION)}
    memory = _Memory(dut.mc.mem, random.Random(0), mem, latency=(10, 10), ready=1.0)
    streamers = [_Streamer(ni.port, op, bursts, beats, dict(mem), base=0x1000 * (k + 1))
                 for k, (ni, op) in enumerate(zip(dut.nis, ("read", "write", "read"), strict=True))]
    cycles = _run(dut, streamers, memory, 20 * 3 * bursts * beats)
    words = 3 * bursts * beats
    print(f"3 streams of {bursts} bursts of {beats} words: {cycles} cycles, "
          f"{words / cycles:.3f} words/cycle through the memory node")
    for streamer in streamers:
        assert all(mem[addr] == byte for addr, byte in streamer.written.items())
    assert streamers[1].written


def test_reads_do_not_starve_writes():
    """One block reading in one-word pieces (each a one-flit packet that spends a
    credit) while it writes: the write chunks, which need many credits at once, still
    take their turns, so the writes finish long before the reads."""
    dut = _Tile([(0, 0)], rd_piece=1, credits=24)
    mem = {0x1000 + i: (i * 37) & 0xFF for i in range(REGION)}
    memory = _Memory(dut.mc.mem, random.Random(0), mem, latency=(10, 10), ready=1.0)
    port = dut.nis[0].port
    reader = _Streamer(port, "read", 24, 16, dict(mem))
    writer = _Streamer(port, "write", 8, 16, dict(mem), base=0x1400)
    for streamer in (reader, writer):
        streamer.now = dut.now
    cycles = _run(dut, [reader, writer], memory, 20000)
    print(f"reads done at {reader.finished}, writes at {writer.finished} ({cycles} cycles)")
    assert writer.finished < reader.finished / 2
    assert all(mem[addr] == byte for addr, byte in writer.written.items())


def test_flit_width_checked():
    with pytest.raises(ValueError, match="at least 145"):
        RequesterNi(128, 144, (0, 0), (1, 1))
    with pytest.raises(ValueError, match="91..1024"):
        Mesh(2, 2, flit_data_bits=90)
    with pytest.raises(TypeError):
        Router(0, 0, 2, 2, flit_data_bits=96.0)
    assert flit_layout(200).size == 203
    with pytest.raises(ValueError, match="credits must be in 9..255"):
        RequesterNi(128, 145, (0, 0), (1, 1), wr_chunk=8, credits=8)
    with pytest.raises(ValueError, match="distinct nodes"):
        MemoryNi(128, 145, (1, 1), [(0, 0), (1, 1)])
    with pytest.raises(ValueError, match="pair"):
        RequesterNi(128, 145, (0, 16), (1, 1))


def test_memory_ni_run_words():
    """A write run is at most ``run_words`` words, by default half the MC's write buffer
    (so one run fills it while the one before drains), at most all of it."""
    assert MemoryNi(128, 145, (1, 1), [(0, 0)]).run_words == 8
    assert MemoryNi(128, 145, (1, 1), [(0, 0)], run_words=16).run_words == 16
    with pytest.raises(ValueError, match="run_words must be in 1..16, not 17"):
        MemoryNi(128, 145, (1, 1), [(0, 0)], run_words=17)
    with pytest.raises(ValueError, match="run_words must be in 1..16, not 0"):
        MemoryNi(128, 145, (1, 1), [(0, 0)], run_words=0)
