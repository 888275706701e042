"""cocotb tests of the ``v4hw_mc`` top, on Icarus and Verilator.

``tests/test_mc_cocotb.py`` runs each test below on both simulators (the long ones on
Verilator only). Every test builds a :class:`sim.mc_driver.McBench`, which checks every
response item against the reference model and the credit rules every cycle; random
choices come from :func:`sim.seed.test_seed` (``V4HW_SEED=<n>`` reruns a case).
"""

import os

import cocotb

from hdl.mc.core import OUTSTANDING
from hdl.mc.frontend import MAX_BURST
from hdl.top.mc import MC_VERSION, caps_word
from sim import perf
from sim.bfm import ErrorRange
from sim.mc_driver import McBench
from sim.seed import test_seed
from spec.codes import ErrorCode, McOp, TrafficClass

ICARUS = cocotb.SIM_NAME.lower().startswith("icarus")
CLASSES = list(TrafficClass)
AGE_LIMIT = 8              # the build's (the v4hw_mc default)
BASE = 0x3_0000_0000       # bits above 32 set: the full 48-bit address path is used
SPAN = 0x3000              # the region random traffic shares (overlapping addresses)


def bench_params():
    """The DUT's depths, from the environment the pytest side sets."""
    return {name: int(os.environ.get(f"V4HW_MC_{name.upper()}", default))
            for name, default in (("req_depth", 4), ("wdata_depth", 16), ("resp_depth", 64),
                                  ("prefetch_lines", 32))}


async def new_bench(dut, **kwargs):
    rng = test_seed()
    bench = McBench(dut, rng=rng, **bench_params(), **kwargs)
    await bench.start()
    bench.preload(BASE, rng.randbytes(SPAN + 0x1000))
    return bench, rng


def random_request(rng, client, *, span=SPAN, max_length=300):
    op = rng.choice((McOp.READ, McOp.WRITE))
    addr = BASE + rng.randrange(span)
    length = rng.choice((rng.randint(1, 16), rng.randint(1, 64), rng.randint(1, max_length)))
    return client.submit(op, addr, length, rng.choice(CLASSES))


@cocotb.test()
async def registers(dut):
    bench, _ = await new_bench(dut)
    regs = bench.regs
    assert await regs.read_fields("ID") == {"VERSION": MC_VERSION, "BLOCK": 0x4D43}
    assert await regs.read("CAPS") == caps_word(bench.channels, bench.data_width,
                                                bench.prefetch_lines)
    assert await regs.read("WINDOW") == 4096
    for window, bad in ((100, 1), (32, 1), (1 << 17, 1), (0, 0), (64, 0), (1 << 16, 0),
                        (4096, 0)):
        await regs.write("WINDOW", window)
        assert (await regs.read_fields("ATP_STATUS"))["WINDOW_BAD"] == bad, window
    _, resp = await regs.read_resp(regs.unmapped_offset())
    assert resp.name == "SLVERR"
    assert (await regs.read_fields("STATUS"))["BUSY"] == 0


@cocotb.test()
async def random_traffic(dut):
    """Random reads and writes of random lengths and classes on every channel, to
    overlapping addresses, with random back-pressure on every link and AXI channel."""
    bench, rng = await new_bench(dut)
    bench.back_pressure(0.3)
    count = 25 if ICARUS else 250
    for client in bench.clients:
        for _ in range(count):
            random_request(rng, client)
    await bench.drain()
    bench.check_memory(range(BASE, BASE + SPAN + 400))
    reads = sum(r.op == McOp.READ for c in bench.clients for r in c.answered)
    assert await bench.regs.read("READS") == reads
    assert await bench.regs.read("WRITES") == bench.channels * count - reads
    await bench.regs.write_fields("CLEAR", counters=1)
    assert await bench.regs.read("READS") == 0 and await bench.regs.read("WRITES") == 0


@cocotb.test()
async def credits_stress(dut):
    """Back-to-back traffic with no idle cycles and a slow response side: the credit
    counts (1 in the credits=1 build) are the only limit."""
    bench, rng = await new_bench(dut)
    for client in bench.clients:
        client.stall = 0.5
        for _ in range(10 if ICARUS else 60):
            random_request(rng, client, max_length=100)
    await bench.drain()
    bench.check_memory(range(BASE, BASE + SPAN + 200))


@cocotb.test()
async def write_then_read(dut):
    """A write then a read of the same bytes from another channel, after the write's
    answer: the read returns the new bytes (never stale)."""
    bench, rng = await new_bench(dut)
    writer, reader = bench.clients[0], bench.clients[1]
    for _ in range(6 if ICARUS else 40):
        addr = BASE + rng.randrange(0, SPAN, 8)
        length = rng.randint(1, 200)
        reader.submit(McOp.READ, addr, length, TrafficClass.DECODE)    # warms any buffer
        await bench.drain()
        writer.submit(McOp.WRITE, addr, length, TrafficClass.PREFILL)
        await bench.drain()
        reader.submit(McOp.READ, addr, length, TrafficClass.DECODE)
        await bench.drain()


@cocotb.test()
async def errors(dut):
    """Refused requests (length 0, a range past 2**48) and memory errors are answered
    with an error on their own channel; the other channels' traffic is unaffected."""
    bench, rng = await new_bench(dut)
    await bench.regs.write_fields("IRQ_ENABLE", error=1)
    bad = bench.clients[0]
    top = (1 << 48) - 40
    bench.ram.error_ranges.append(ErrorRange(BASE + 0x800, BASE + 0x840))
    reqs = [bad.submit(McOp.READ, BASE, 0, TrafficClass.DECODE),
            bad.submit(McOp.WRITE, BASE, 0, TrafficClass.DECODE),
            bad.submit(McOp.READ, top, 41, TrafficClass.PREFILL),
            bad.submit(McOp.WRITE, top, 100, TrafficClass.PREFILL),
            bad.submit(McOp.READ, top, 40, TrafficClass.PREFILL),      # the last 40 bytes: fine
            bad.submit(McOp.READ, BASE + 0x7F0, 0x100, TrafficClass.DECODE),
            bad.submit(McOp.WRITE, BASE + 0x830, 8, TrafficClass.DECODE),
            bad.submit(McOp.READ, BASE + 0x100, 64, TrafficClass.DECODE)]
    for client in bench.clients[1:]:
        for _ in range(5 if ICARUS else 30):
            random_request(rng, client, span=0x400)      # ends below the error range
    await bench.drain()
    codes = [max(error for _, error in r.items) for r in reqs]
    assert codes == [ErrorCode.BAD_COMMAND] * 4 + [0, ErrorCode.AXI_READ_ERROR,
                                                  ErrorCode.AXI_WRITE_ERROR, 0], codes
    assert all(error == 0 for c in bench.clients[1:] for r in c.answered for _, error in r.items)
    status = await bench.regs.read_fields("STATUS")
    assert status["ERROR"] == 1
    assert int(dut.interrupt.value) == 1
    assert await bench.regs.read("ERRORS") >= 6
    await bench.regs.write_fields("CLEAR", error=1)
    await bench.regs.write_fields("IRQ_STATUS", error=1)
    assert (await bench.regs.read_fields("STATUS"))["ERROR"] == 0
    assert await bench.regs.read("ERROR") == 0
    assert int(dut.interrupt.value) == 0


@cocotb.test()
async def errors_on_every_channel(dut):
    """Every error on every channel at once, with random back-pressure on every link and
    AXI channel: each channel gets refusals (length 0; a read and a write, with its words,
    past 2**48) and memory errors (a read and a write into its own refused range) among
    good traffic; each is answered with its code on its own channel, every other request
    as the reference model says (the bench checks every item), and the count of ERRORS
    is theirs. (The functional coverage's channel × code and code × back-pressure bins:
    sim/fcov.py.)"""
    bench, rng = await new_bench(dut)
    bench.back_pressure(0.3)
    top = (1 << 48) - 40
    expected = []
    for client in bench.clients:
        refused = BASE + 0x800 + 0x100 * client.index
        bench.ram.error_ranges.append(ErrorRange(refused, refused + 0x40))
        for _ in range(3 if ICARUS else 10):
            random_request(rng, client, span=0x400)      # ends below every refused range
        cases = [(McOp.READ, BASE, 0, ErrorCode.BAD_COMMAND),
                 (McOp.READ, top, 41, ErrorCode.BAD_COMMAND),
                 (McOp.WRITE, top, 100, ErrorCode.BAD_COMMAND),
                 (McOp.READ, refused - 0x10, 0x20, ErrorCode.AXI_READ_ERROR),
                 (McOp.WRITE, refused + 0x30, 8, ErrorCode.AXI_WRITE_ERROR)]
        rng.shuffle(cases)
        for op, addr, length, code in cases:
            # any of the eight classes, not only the three named ones
            expected.append((client.submit(op, addr, length, rng.randrange(8)), code))
            random_request(rng, client, span=0x400)
    await bench.drain()
    codes = [max(error for _, error in r.items) for r, _ in expected]
    assert codes == [code for _, code in expected], codes
    assert await bench.regs.read("ERRORS") == len(expected)


@cocotb.test()
async def starvation(dut):
    """Three decode channels keep the memory busy with full bursts; a cache-migrate
    channel, sending one read at a time, still gets each answered within the documented
    bound (golden.mc.arbiter_wait_bound); without the age limit it would wait for the
    decode queues to empty."""
    from golden.mc import arbiter_wait_bound
    bench, rng = await new_bench(dut)
    low = bench.clients[-1]
    low.max_outstanding = 1      # one at a time: each probe waits only for the arbiter
    burst_bytes = MAX_BURST * bench.lanes
    n = 8 if ICARUS else 40
    for k, client in enumerate(bench.clients[:-1]):
        for j in range(n * 4):
            client.submit(McOp.READ, BASE + (k * 4 + j % 4) * burst_bytes, burst_bytes,
                          TrafficClass.DECODE)
    probes = [low.submit(McOp.READ, BASE + 0x2000 + j * burst_bytes % 0x1000, burst_bytes,
                         TrafficClass.CACHE_MIGRATE) for j in range(n)]
    await bench.drain()
    bound = arbiter_wait_bound(bench.channels, AGE_LIMIT, MAX_BURST, bench.ram.read_latency,
                               OUTSTANDING)
    waits = [r.first - r.sent for r in probes]
    worst_decode = max(r.first - r.sent for c in bench.clients[:-1] for r in c.answered)
    dut._log.info("cache-migrate waits (request to first word): max %d, bound %d; "
                  "decode max %d", max(waits), bound, worst_decode)
    assert max(waits) <= bound, (waits, bound)


async def counters(bench):
    names = ("READS", "AXI_READS", "HITS", "MISSES", "PREFETCHES", "EVICTED_UNUSED")
    return {name: await bench.regs.read(name) for name in names}


@cocotb.test()
async def prefetch_sequential(dut):
    """A sequential stream of 64-byte reads on one channel: after the first miss the
    prefetcher runs ahead, so nearly every read is a hit (goal: 90 %), and the words
    returned are the memory's (the bench checks every byte)."""
    bench, rng = await new_bench(dut)
    client = bench.clients[0]
    n = 128 if ICARUS else 1024
    start = BASE + 0x10000
    bench.preload(start, rng.randbytes(n * 64))
    reqs = [client.submit(McOp.READ, start + 64 * k, 64, TrafficClass.DECODE) for k in range(n)]
    await bench.drain()
    await bench.cycles(300)                     # the last fills land
    c = await counters(bench)
    hit_rate = c["HITS"] / n
    dut._log.info("ARs seen %d, counters %s", len(bench.ram.reads), c)
    lat = sorted(r.done - r.sent for r in reqs)
    dut._log.info("MC figure: ATP sequential 64-byte reads: %d reads, %d hits (%.1f %%), %d misses, "
                  "%d prefetches, %d AXI read bursts (%d without ATP), %d prefetched lines never "
                  "used; latency min/median/max %d/%d/%d cycles", n, c["HITS"],
                  100 * hit_rate, c["MISSES"], c["PREFETCHES"], c["AXI_READS"], n,
                  c["PREFETCHES"] - c["HITS"], lat[0], lat[len(lat) // 2], lat[-1])
    assert c["READS"] == n and c["HITS"] + c["MISSES"] == n
    assert c["AXI_READS"] == c["MISSES"] + c["PREFETCHES"]
    assert hit_rate >= 0.9, c


@cocotb.test()
async def prefetch_invalidate(dut):
    """Lines prefetched, then written by another channel: after the write's answer a
    read of them is a miss that returns the new bytes; a write while the fills are still
    in flight poisons them; WINDOW 0 turns the prefetch off."""
    bench, rng = await new_bench(dut)
    reader, writer = bench.clients[0], bench.clients[1]
    start = BASE + 0x20000
    bench.preload(start, rng.randbytes(0x1000))
    reader.submit(McOp.READ, start, 64, TrafficClass.DECODE)
    await bench.drain()
    await bench.cycles(200)                     # the window's fills land
    before = await counters(bench)
    assert before["PREFETCHES"] == bench.prefetch_lines // 2, before
    writer.submit(McOp.WRITE, start + 64 * 3 + 5, 70, TrafficClass.PREFILL)   # lines 3 and 4
    await bench.drain()
    written = await counters(bench)
    assert written["EVICTED_UNUSED"] - before["EVICTED_UNUSED"] == 2, (before, written)
    reader.submit(McOp.READ, start + 64 * 3, 64, TrafficClass.DECODE)   # new bytes: a miss
    await bench.drain()
    after = await counters(bench)
    assert after["MISSES"] - written["MISSES"] == 1 and after["HITS"] == written["HITS"]
    reader.submit(McOp.READ, start + 64 * 5, 64, TrafficClass.DECODE)   # untouched: a hit
    await bench.drain()
    assert (await bench.regs.read("HITS")) == after["HITS"] + 1
    # A write right behind the trigger, while its fills are in flight.
    reader.submit(McOp.READ, start + 0x800, 64, TrafficClass.DECODE)
    writer.submit(McOp.WRITE, start + 0x840, 256, TrafficClass.DECODE)
    await bench.drain()
    for k in range(1, 8):
        reader.submit(McOp.READ, start + 0x800 + 64 * k, 64, TrafficClass.DECODE)
    await bench.drain()
    await bench.regs.write("WINDOW", 0)
    quiet = await counters(bench)
    for k in range(4):
        reader.submit(McOp.READ, start + 0xC00 + 64 * k, 64, TrafficClass.DECODE)
    await bench.drain()
    off = await counters(bench)
    assert off["PREFETCHES"] == quiet["PREFETCHES"] and off["HITS"] == quiet["HITS"]


async def sequential_reads(bench, clients, count, size=4096):
    """``count`` reads of ``size`` bytes per client, each client its own region; returns
    (words, cycles from the first request sent to the last word taken)."""
    for k, client in enumerate(clients):
        for j in range(count):
            client.submit(McOp.READ, BASE + 0x100000 * (k + 1) + j * size, size,
                          TrafficClass.PREFILL)
    reqs = [r for c in clients for r in c.queue]
    await bench.drain()
    words = sum(len(r.items) for r in reqs)
    return words, max(r.done for r in reqs) - min(r.sent for r in reqs)


@cocotb.test()
async def throughput(dut):
    """Sequential 4 KiB reads, prefetch off, memory latency 20 cycles: words delivered
    per cycle against the read bus's peak of one word a cycle (goal: 90 %), on one
    channel and on four together."""
    bench, _ = await new_bench(dut)
    await bench.regs.write("WINDOW", 0)
    for label, clients, count in (("one channel", bench.clients[:1], 4 if ICARUS else 64),
                                  ("four channels", bench.clients, 1 if ICARUS else 16)):
        words, cycles = await sequential_reads(bench, clients, count)
        dut._log.info("MC figure: sequential 4 KiB reads, %s: %d words in %d cycles = %.1f %% "
                      "of the read bus peak (latency %d)", label, words, cycles,
                      100 * words / cycles, bench.ram.read_latency)
        perf.check(f"mc.throughput.{label.replace(' ', '_')}.cycles", cycles)
        assert words / cycles >= (0.8 if ICARUS else 0.9), (label, words, cycles)


@cocotb.test()
async def latency_per_class(dut):
    """Full load: every channel keeps its request buffer full of random reads (64 to 512
    bytes), prefetch off (arbitration alone); request latency (request sent to last word)
    per class. Decode is served first, so its median is below cache-migrate's."""
    bench, rng = await new_bench(dut)
    await bench.regs.write("WINDOW", 0)
    classes = [TrafficClass.DECODE, TrafficClass.PREFILL, TrafficClass.CACHE_MIGRATE,
               TrafficClass.CACHE_MIGRATE]
    count = 20 if ICARUS else 300
    for client, cls in zip(bench.clients, classes, strict=True):
        for _ in range(count):
            client.submit(McOp.READ, BASE + rng.randrange(0, 0x40000, 64),
                          64 * rng.randint(1, 8), cls)
    await bench.drain()
    medians = {}
    for cls in sorted(set(classes), reverse=True):
        lat = sorted(r.done - r.sent for c, k in zip(bench.clients, classes, strict=True)
                     if k == cls for r in c.answered)
        medians[cls] = lat[len(lat) // 2]
        dut._log.info("MC figure: full-load latency %s: min %d, median %d, max %d cycles "
                      "(%d requests)", cls.name, lat[0], medians[cls], lat[-1], len(lat))
        perf.check_all(f"mc.latency_per_class.{cls.name}", {"median": medians[cls], "max": lat[-1]})
    assert medians[TrafficClass.DECODE] < medians[TrafficClass.CACHE_MIGRATE], medians
