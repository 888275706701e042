"""cocotb tests of the ``v4hw_mc`` top, on Icarus and Verilator.

``tests/test_mc_cocotb.py`` runs each test below on both simulators (the long ones on
Verilator only). Every test builds a :class:`sim.mc_driver.McBench`, which checks every
response item against the reference model and the credit rules every cycle; random
choices come from :func:`sim.seed.test_seed` (``V4HW_SEED=<n>`` reruns a case).
"""

import os

import cocotb

from hdl.codes import ErrorCode, McOp, TrafficClass
from hdl.mc.core import OUTSTANDING
from hdl.mc.frontend import MAX_BURST
from hdl.top.mc import MC_VERSION, caps_word
from sim.ma_driver import ErrorRange
from sim.mc_driver import McBench
from sim.seed import test_seed

ICARUS = cocotb.SIM_NAME.lower().startswith("icarus")
CLASSES = list(TrafficClass)
AGE_LIMIT = 8              # the build's (the v4hw_mc default)
BASE = 0x3_0000_0000       # bits above 32 set: the full 48-bit address path is used
SPAN = 0x3000              # the region random traffic shares (overlapping addresses)


def bench_params():
    """The DUT's depths, from the environment the pytest side sets."""
    return {name: int(os.environ.get(f"V4HW_MC_{name.upper()}", default))
            for name, default in (("req_depth", 4), ("wdata_depth", 16), ("resp_depth", 32))}


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
    assert await regs.read("CAPS") == caps_word(bench.channels, bench.data_width, 0)
    assert await regs.read("WINDOW") == 4096
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
            random_request(rng, client, span=0x700)
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
