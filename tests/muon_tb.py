"""cocotb tests of the ``v4hw_muon`` top, on Icarus and Verilator.

``tests/test_muon_cocotb.py`` runs each test below per mesh size and simulator; the mesh
size comes in ``V4HW_MUON_COLS`` / ``V4HW_MUON_ROWS``. Every test draws its random
choices from :func:`sim.seed.test_seed` and checks through :class:`sim.muon_driver.MuonBench`
(scoreboard against ``golden.muon``). Icarus is about fifty times slower, so it runs
fewer packets (``ICARUS``).
"""

import os

import cocotb

from golden.muon import hops
from hdl.common.axi import AxiResp
from hdl.top.muon import MUON_VERSION
from sim.muon_driver import MuonBench
from sim.seed import test_seed
from spec.codes import TrafficClass

ICARUS = cocotb.SIM_NAME.lower().startswith("icarus")
COLS = int(os.environ.get("V4HW_MUON_COLS", "2"))
ROWS = int(os.environ.get("V4HW_MUON_ROWS", "2"))
CLASSES = list(TrafficClass)


async def new_bench(dut):
    rng = test_seed()
    bench = MuonBench(dut, cols=COLS, rows=ROWS, rng=rng)
    await bench.start()
    return bench, rng


def random_node(rng):
    return (rng.randrange(COLS), rng.randrange(ROWS))


def random_traffic(bench, rng, count, *, max_length=4):
    for _ in range(count):
        bench.send(random_node(rng), random_node(rng), rng.choice(CLASSES),
                   rng.randint(1, max_length))


@cocotb.test()
async def registers(dut):
    """ID, CAPS, MAX_AGE's reset value, RSV_LEAD, an unmapped offset answers SLVERR."""
    bench, _ = await new_bench(dut)
    ident = await bench.regs.read_fields("ID")
    assert ident["VERSION"] == MUON_VERSION
    assert await bench.regs.read("MAX_AGE") == 100
    assert await bench.regs.read("RSV_LEAD") == bench.golden.lead
    _, resp = await bench.regs.read_resp(bench.regs.unmapped_offset())
    assert resp == AxiResp.SLVERR
    await bench.set_max_age(12345)
    assert await bench.regs.read("MAX_AGE") == 12345


@cocotb.test()
async def random_traffic_backpressure(dut):
    """Random best-effort packets (1..4 flits, all classes) between random nodes, with
    random back-pressure on every ejection port: each arrives once, intact, in order per
    (source, destination, class); MAX_AGE is high enough that none may be dropped."""
    bench, rng = await new_bench(dut)
    await bench.set_max_age(1 << 30)
    bench.eject_stall = 0.3
    random_traffic(bench, rng, 120 if ICARUS else 200 * COLS * ROWS)
    packets = await bench.finish()
    assert all(p.dropped is None for p in packets)


@cocotb.test()
async def stale_drops(dut):
    """TSP: with a small MAX_AGE and heavy back-pressure some packets grow stale; each
    is dropped exactly when the golden rule says (older than MAX_AGE in the cycle of the
    drop, at its destination), the per-class counters match, and no delivered packet
    was stale when it won the ejection port."""
    bench, rng = await new_bench(dut)
    await bench.set_max_age(6 + 2 * (COLS + ROWS))
    bench.eject_stall = 0.7
    random_traffic(bench, rng, 100 if ICARUS else 150 * COLS * ROWS)
    packets = await bench.finish()
    assert any(p.dropped is not None for p in packets), "the test made no stale packet"
    assert any(p.rx is not None for p in packets)


@cocotb.test()
async def bad_destination(dut):
    """A packet to a router outside the mesh is discarded at its source and counted in
    BAD_DST; the traffic around it is unaffected."""
    bench, rng = await new_bench(dut)
    random_traffic(bench, rng, 20)
    bench.send((0, 0), (COLS, 0), TrafficClass.DECODE, 3)
    bench.send((COLS - 1, ROWS - 1), (0, 15), TrafficClass.PREFILL, 1)
    random_traffic(bench, rng, 20)
    packets = await bench.finish()
    assert sum(p.bad_dst for p in packets) == 2


@cocotb.test()
async def every_class_under_backpressure(dut):
    """Best-effort packets of all eight classes (not only the three named ones) with a
    small MAX_AGE and heavy back-pressure on every ejection port, and packets to routers
    outside the mesh among them: every class has packets delivered and dropped stale, each
    DROPPED_<class> counter and BAD_DST equal the drops seen (the scoreboard checks every
    packet against the golden rules). (The functional coverage's class × outcome and
    outcome × back-pressure bins: sim/fcov.py.)"""
    bench, rng = await new_bench(dut)
    await bench.set_max_age(6 + 2 * (COLS + ROWS))
    bench.eject_stall = 0.7
    per_class = 6 if ICARUS else 40
    for _ in range(per_class):
        for cls in range(8):
            bench.send(random_node(rng), random_node(rng), cls, rng.randint(1, 4))
    bench.send((0, 0), (COLS, 0), 1, 3)
    bench.send((COLS - 1, ROWS - 1), (0, 15), 6, 1)
    packets = await bench.finish()
    assert sum(p.bad_dst for p in packets) == 2
    if not ICARUS:
        for cls in range(8):
            mine = [p for p in packets if p.cls == cls and not p.bad_dst]
            assert any(p.dropped is not None for p in mine), f"class {cls}: none dropped"
            assert any(p.rx is not None for p in mine), f"class {cls}: none delivered"


@cocotb.test()
async def reservations_against_golden(dut):
    """Random reservation requests (colliding paths, past starts, bad fields, a full
    table, expiry and id reuse): every answer (grant and id, or retry_after, or full, or
    BAD_COMMAND) equals the golden model's."""
    bench, rng = await new_bench(dut)
    lead = bench.golden.lead
    answers = []
    for round_ in range(3 if ICARUS else 6):
        base = bench.cycle + lead + 40
        for _ in range(6 if ICARUS else 12):
            src, dst = random_node(rng), random_node(rng)
            start = base + rng.randrange(0, 60)
            duration = rng.randint(1, 24)
            bandwidth = rng.randint(1, duration)
            if rng.random() < 0.1:   # a bad field: refused at START
                choice = rng.randrange(3)
                duration = 0 if choice == 0 else duration
                bandwidth = duration + 1 if choice == 1 else bandwidth
                dst = (COLS, dst[1]) if choice == 2 else dst
            elif rng.random() < 0.1:
                start = max(0, bench.cycle - rng.randrange(0, 50))   # already past
            record = await bench.reserve(src, dst, start, duration, bandwidth)
            answers.append(record)
            if record and not record["granted"] and not record["full"] and rng.random() < 0.5:
                answers.append(await bench.reserve(src, dst, record["retry_after"],
                                                   duration, bandwidth))
        # Let the round's reservations expire before the next one reuses the slots.
        if round_ % 2:
            await bench.cycles(200)
    granted = [a for a in answers if a and a["granted"]]
    assert granted and any(a and not a["granted"] for a in answers)
    assert any(a and a["full"] for a in answers) or len(granted) <= bench.golden.n_slots * 6


@cocotb.test()
async def reserved_flows_zero_jitter(dut):
    """Reserved flows under random best-effort load (ejection always ready): every
    reserved packet is injected in its cycle and arrives exactly the zero-load latency
    later, none is dropped, while best-effort packets are delivered or (tiny MAX_AGE)
    dropped by TSP. The scoreboard checks both."""
    bench, rng = await new_bench(dut)
    await bench.set_max_age(3 * (COLS + ROWS) + 8)
    flows = []
    for _ in range(3):
        src, dst = random_node(rng), random_node(rng)
        start = bench.cycle + bench.golden.lead + 200
        record = await bench.reserve(src, dst, start, 40, 12)
        if not record["granted"]:
            record = await bench.reserve(src, dst, record["retry_after"], 40, 12)
        assert record["granted"], record
        flows.append(record)
    for f in flows:   # 3 packets of 4 flits in each window
        for i in range(3):
            bench.send_reserved(tuple(f["src"]), tuple(f["dst"]), f["id"],
                                f["start"] + 10 * i + rng.randrange(0, 4), length=4)

    def load(bench, cycle):
        for node in bench.nodes:
            if len(node.queue) < 4 and rng.random() < 0.15:
                bench.send(node.xy, random_node(rng), rng.choice(CLASSES), rng.randint(1, 4))

    bench.generator = load
    await bench.cycles(max(f["start"] + 60 + 2 * hops(f["src"], f["dst"]) for f in flows)
                       - bench.cycle)
    bench.generator = None
    packets = await bench.finish()
    reserved = [p for p in packets if p.vc]
    assert reserved and all(p.rx is not None for p in reserved)
    # The sniffer's capture, beside results.xml: `v4hw muon analyze muon.capture`.
    bench.capture("muon.capture")


@cocotb.test()
async def priority_and_starvation_bound(dut):
    """Two inputs keep a node's ejection port busy with decode packets; a cache-migrate
    packet injected there waits behind at least starve_limit (4) of them (class
    priority), and at most starve_limit + 3 more plus the one holding the port (the
    documented starvation bound); without the promotion it would wait for ever."""
    bench, rng = await new_bench(dut)
    await bench.set_max_age(1 << 30)
    target, west, south = (1, 0), (0, 0), (1, 1)

    def keep_busy(bench, cycle):
        for src in (west, south):
            if len(bench.node(src).queue) < 2:
                bench.send(src, target, TrafficClass.DECODE, rng.randint(1, 3))

    bench.generator = keep_busy
    await bench.cycles(40)
    waiting = []
    for _ in range(3):
        waiting.append(bench.send(target, target, TrafficClass.CACHE_MIGRATE, 1))
        while waiting[-1].rx is None:
            await bench.cycles(1)
        await bench.cycles(rng.randrange(5, 20))
    bench.generator = None
    packets = await bench.finish()
    for low in waiting:
        overtaking = [p for p in packets if p.dst == target and p is not low
                      and p.rx is not None and low.tx < p.rx < low.rx]
        assert 4 <= len(overtaking) <= 4 + 3 + 1, (
            f"cache-migrate packet {low.serial} waited for {len(overtaking)} packets")
