"""The MC core in the Amaranth simulator, with its internal assertions on.

``McCore(checks=True)`` asserts every cycle that no credit buffer overflows, no credit
counter leaves its range, the arbiter grants one requester at a time, only to a
requester, and no channel gets two answers in one cycle (an assertion failure stops the
simulation). Two clients send random reads and writes (to overlapping bytes, a few of
them refused) through the credit links (:mod:`sim.bfm.credit`'s BFMs), with random idle
cycles; :class:`sim.bfm.PortMemory`
answers the memory port with random delays and back-pressure on all five streams. Every answer
is checked against ``golden.mc`` and every credit must be back at the end.
"""

import random
from collections import deque

import pytest
from amaranth.sim import Simulator

from golden.mc import ByteMemoryModel, check_request, word_span
from hdl.mc.core import McCore
from sim.bfm.credit import SimCreditSink, SimCreditSource
from sim.bfm.memport import PortMemory
from spec.codes import ErrorCode, McOp, TrafficClass

DEPTHS = dict(req_depth=2, wdata_depth=4, resp_depth=8)
BASE, SPAN = 0x1_0000, 0x400
MEMORY_REACH = 0x1_0000     # bytes of memory above the traffic's span (prefetches read there)


class _Client:
    """One channel's client: requests and words under credits (:mod:`sim.bfm.credit`'s
    sources), a response buffer (its sink). Each link moves with probability 0.7 in a
    cycle it could move in; a write's words may go from the cycle after its request."""

    def __init__(self, chan, rng, golden, count, lanes):
        self.chan, self.rng, self.golden, self.lanes = chan, rng, golden, lanes

        def pause():
            return rng.random() >= 0.7

        # Drawn in this order each cycle: a response taken, a request, a word.
        self.resp = SimCreditSink(chan.resp, DEPTHS["resp_depth"], pause=pause,
                                  name="the response buffer")
        self.req = SimCreditSource(chan.req, DEPTHS["req_depth"], pause=pause, name="req",
                                   fields=lambda r: dict(zip(("op", "addr", "length", "cls",
                                                              "id"), r, strict=True)))
        self.wdata = SimCreditSource(chan.wdata, DEPTHS["wdata_depth"], pause=pause,
                                     name="wdata", fields=lambda word: {"data": word})
        self.waiting = deque()
        for k in range(count):
            op = rng.choice(list(McOp))
            addr = BASE + rng.randrange(SPAN)
            length = 0 if rng.random() < 0.05 else rng.randint(1, 40)
            self.req.send((op, addr, length, rng.choice(list(TrafficClass)), k % 256))

    def drive(self, ctx):
        self.popped = self.resp.drive(ctx)
        self.sent = self.req.drive(ctx)
        self.wdata.drive(ctx)

    def sample(self, ctx):
        if self.popped is not None:
            self.answer(self.popped)
        self.resp.sample(ctx)
        if self.sent is not None:
            op, addr, length, cls, ident = self.sent
            good = check_request(op, addr, length) == ErrorCode.NONE
            first, count = word_span(addr, length, self.lanes)
            data = self.rng.randbytes(count * self.lanes)
            token = None
            if good and op == McOp.READ:
                token = self.golden.read_begin(addr, length)
            elif good:
                token = self.golden.write_begin(addr, data[addr - first:addr - first + length])
            if op == McOp.WRITE:
                for k in range(0, len(data), self.lanes):
                    self.wdata.send(int.from_bytes(data[k:k + self.lanes], "little"))
            self.waiting.append([op, addr, length, ident, token, []])
        self.req.sample(ctx)
        self.wdata.sample(ctx)

    def answer(self, item):
        op, addr, length, ident, token, words = self.waiting[0]
        assert item.id == ident, f"answer for id {item.id}, expected {ident}"
        words.append(item.data)
        code = check_request(op, addr, length)
        expected = 1 if code != ErrorCode.NONE or op == McOp.WRITE else \
            word_span(addr, length, self.lanes)[1]
        assert bool(item.last) == (len(words) == expected)
        if not item.last:
            return
        self.waiting.popleft()
        if code != ErrorCode.NONE:
            assert item.error == code
        elif op == McOp.WRITE:
            assert item.error == 0
            self.golden.write_end(token)
        else:
            first, _ = word_span(addr, length, self.lanes)
            raw = b"".join(w.to_bytes(self.lanes, "little") for w in words)
            bad = self.golden.read_check(token, raw[addr - first:addr - first + length])
            assert not bad, f"read {addr:#x}+{length}: {bad[:3]}"

    def idle(self):
        return self.req.idle and self.wdata.idle and not self.waiting and self.resp.idle


@pytest.mark.parametrize("seed, channels, data_width", [(0, 2, 64), (1, 2, 64), (2, 1, 512),
                                                         (3, 3, 128)])
def test_core_random_traffic_with_assertions(seed, channels, data_width):
    rng = random.Random(seed)
    lanes = data_width // 8
    dut = McCore(channels, data_width, age_limit=3, prefetch_lines=4, checks=True, **DEPTHS)
    initial = {BASE + i: b for i, b in enumerate(rng.randbytes(SPAN + 64))}
    golden = ByteMemoryModel(initial)
    image = bytearray(BASE + SPAN + MEMORY_REACH)
    image[BASE:BASE + SPAN + 64] = bytes(initial.values())
    mem = PortMemory(dut.mem, data_width, image, latency=(3, 8), pause=0.3,
                     rng=random.Random(rng.getrandbits(32)), w_before_aw=True)
    clients = [_Client(dut.chans[i], random.Random(rng.getrandbits(32)), golden, 40, lanes)
               for i in range(channels)]

    async def bench(ctx):
        ctx.set(dut.window, 256)
        for _ in range(20000):
            for client in clients:
                client.drive(ctx)
            for client in clients:
                client.sample(ctx)
            await ctx.tick()
            if all(client.idle() for client in clients) and mem.idle():
                break
        else:
            raise AssertionError("the traffic did not finish in 20000 cycles")
        for client in clients:
            client.drive(ctx)               # idle now: no request, word or credit pulse
        for _ in range(3):
            await ctx.tick()
        for client in clients:
            for link in (client.req, client.wdata):
                link.sample(ctx)            # the last credit pulses
                link.check_all_back()
        for addr in range(BASE, BASE + SPAN + 64):
            assert image[addr] in golden.legal(addr), hex(addr)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    mem.add_to(sim)
    sim.add_testbench(bench)
    sim.run()
