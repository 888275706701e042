"""The MC latency model (golden/mc_latency.py) against ``McCore`` in the Amaranth simulator.

A client per channel sends its requests through the credit links, sends a write's words
one a cycle from the request's cycle and takes every answer at once (its credit back the
next cycle); :class:`sim.bfm.PortMemory` answers at a fixed latency, without
back-pressure; the prefetcher is off (WINDOW 0). Random reads and writes alone on an
idle MC, then random pairs: a long read of a lower class on one channel and a decode
request a few cycles later on another, which waits for the other class's bursts already
granted. Each request's cycles (request sent → last answer seen) must be within 2 % of
the model; the model is exact on all of them (the test prints both).
"""

import random

from amaranth.sim import Simulator

from golden.mc_latency import McRequest, mc_cycles
from hdl.mc.core import McCore
from sim.bfm.memport import PortMemory
from spec.codes import McOp, TrafficClass

LATENCY = 6
DEPTHS = dict(req_depth=4, wdata_depth=16, resp_depth=64)


def run_requests(reqs, channels, data_width, max_cycles=20_000):
    """``reqs``: McRequests; returns {index: cycles from its sending to its last answer}."""
    dut = McCore(channels, data_width, **DEPTHS)
    lanes = data_width // 8
    memory = PortMemory(dut.mem, data_width, bytearray(1 << 20), latency=LATENCY,
                        w_before_aw=True)
    sent, done = {}, {}

    async def bench(ctx):
        ctx.set(dut.window, 0)
        order = sorted(range(len(reqs)), key=lambda i: (reqs[i].cycle, i))
        queues = {c: [] for c in range(channels)}
        words = {c: 0 for c in range(channels)}
        waiting = {c: [] for c in range(channels)}
        credits = {c: DEPTHS["req_depth"] for c in range(channels)}
        wcredits = {c: DEPTHS["wdata_depth"] for c in range(channels)}
        for cycle in range(max_cycles):
            while order and reqs[order[0]].cycle <= cycle:
                i = order.pop(0)
                queues[reqs[i].chan].append(i)
            for c in range(channels):
                chan = dut.chans[c]
                ctx.set(chan.resp.credit, 0)
                go = bool(queues[c]) and credits[c] > 0
                ctx.set(chan.req.valid, go)
                if go:
                    r = reqs[queues[c][0]]
                    ctx.set(chan.req.payload, {"op": r.op, "addr": r.addr, "length": r.length,
                                               "cls": r.cls, "id": queues[c][0] & 0xFF})
                ctx.set(chan.wdata.valid, words[c] > 0 and wcredits[c] > 0)
                ctx.set(chan.wdata.payload, {"data": cycle})
            await ctx.delay(1e-9)
            for c in range(channels):
                chan = dut.chans[c]
                if ctx.get(chan.req.valid):
                    i = queues[c].pop(0)
                    credits[c] -= 1
                    sent[i] = cycle
                    waiting[c].append(i)
                    r = reqs[i]
                    if r.op == McOp.WRITE:
                        words[c] += (r.addr + r.length - 1) // lanes - r.addr // lanes + 1
                if ctx.get(chan.wdata.valid):
                    words[c] -= 1
                    wcredits[c] -= 1
                if ctx.get(chan.resp.valid):
                    ctx.set(chan.resp.credit, 1)
                    if ctx.get(chan.resp.payload.last):
                        i = waiting[c].pop(0)
                        done[i] = cycle - sent[i]
            await ctx.tick()
            for c in range(channels):
                credits[c] += ctx.get(dut.chans[c].req.credit)
                wcredits[c] += ctx.get(dut.chans[c].wdata.credit)
            if len(done) == len(reqs):
                return
        raise AssertionError(f"{len(reqs) - len(done)} requests unanswered")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    memory.add_to(sim)
    sim.add_testbench(bench)
    sim.run()
    return done


def random_requests(rng, data_width):
    lanes = data_width // 8
    reqs, t = [], 0
    for _ in range(10):                              # alone on an idle MC
        op = rng.choice(list(McOp))
        length = rng.randint(1, 300)
        reqs.append(McRequest(t, 0, op, 0x1000 + rng.randrange(0x4000), length,
                              rng.choice(list(TrafficClass))))
        t += 2 * (length // lanes) + 40
    for _ in range(6):                               # a decode request behind a burst train
        low = rng.choice([TrafficClass.CACHE_MIGRATE, TrafficClass.PREFILL])
        reqs.append(McRequest(t, 1, McOp.READ, 0x8000 + lanes * rng.randrange(64),
                              rng.randint(200, 1500), low))
        reqs.append(McRequest(t + rng.randrange(0, 30), 0, McOp.READ,
                              0x1000 + rng.randrange(0x1000), rng.randint(1, 100),
                              TrafficClass.DECODE))
        t += 1600 // lanes * 2 + 60
    return reqs


def check(seed, channels, data_width):
    rng = random.Random(seed)
    reqs = random_requests(rng, data_width)
    rtl = run_requests(reqs, channels, data_width)
    model = mc_cycles(reqs, data_width=data_width, latency=LATENCY,
                      resp_depth=DEPTHS["resp_depth"])
    errors = []
    for i, r in enumerate(reqs):
        error = abs(model[i] - rtl[i]) / rtl[i]
        errors.append(error)
        print(f"{McOp(r.op).name:5} {r.length:5} bytes at {r.addr:#x}, "
              f"{TrafficClass(r.cls).name:13} chan {r.chan}: RTL {rtl[i]}, model {model[i]}")
        assert error <= 0.02, (r, rtl[i], model[i])
    print(f"bus {data_width}: max {100 * max(errors):.2f} %, "
          f"mean {100 * sum(errors) / len(errors):.2f} %")


def test_model_within_two_percent():
    check(1, 2, 64)


def test_model_within_two_percent_wide_bus():
    check(2, 2, 128)
