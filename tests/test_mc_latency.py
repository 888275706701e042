"""The MC latency model (golden/mc_latency.py) against ``McCore`` in the Amaranth simulator.

A client per channel sends its requests through the credit links (:mod:`sim.bfm.credit`'s
BFMs), sends a write's words one a cycle from the request's cycle and takes every answer
at once (its credit back the next cycle); :class:`sim.bfm.PortMemory` answers at a fixed latency, without
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
from sim.bfm.credit import SimCreditSink, SimCreditSource
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
        cycle = 0
        links = []
        for chan in dut.chans:
            req = SimCreditSource(chan.req, DEPTHS["req_depth"], name="req",
                                  fields=lambda i: {"op": reqs[i].op, "addr": reqs[i].addr,
                                                    "length": reqs[i].length,
                                                    "cls": reqs[i].cls, "id": i & 0xFF})
            # A word's data is the cycle it is sent in.
            wdata = SimCreditSource(chan.wdata, DEPTHS["wdata_depth"], name="wdata",
                                    fields=lambda _: {"data": cycle})
            links.append((req, wdata, SimCreditSink(chan.resp, DEPTHS["resp_depth"],
                                                    name="resp"), []))
        for cycle in range(max_cycles):
            while order and reqs[order[0]].cycle <= cycle:
                i = order.pop(0)
                links[reqs[i].chan][0].send(i)
            for req, wdata, resp, waiting in links:
                wdata.drive(ctx)
                i = req.drive(ctx)
                if i is not None:       # its words go from the next cycle on
                    sent[i] = cycle
                    waiting.append(i)
                    r = reqs[i]
                    if r.op == McOp.WRITE:
                        for _ in range((r.addr + r.length - 1) // lanes - r.addr // lanes + 1):
                            wdata.send(i)
                # Every answer is taken in the cycle it arrives: its credit goes back the
                # next cycle.
                item = resp.sample(ctx)
                resp.drive(ctx)
                if item is not None and item.last:
                    i = waiting.pop(0)
                    done[i] = cycle - sent[i]
                req.sample(ctx)
                wdata.sample(ctx)
            await ctx.tick()
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
