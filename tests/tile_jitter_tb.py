"""cocotb testbench: the jitter of a decode step through ``v4hw_tile`` while the
cache-migrate engine copies in the background (docs/tile/README.md, "Reserved
commands"), run by ``tests/test_tile_jitter_cocotb.py``.

``decode_jitter`` runs the same decode step of the ``notes`` preset (the same programs,
each repetition loaded from the same initial image: same state, same tokens) ``STEPS``
times through the host runtime (:func:`sim.tile_demo_tb.run_layers`, bit for bit
against the golden interpreter every time), while one long copy of the migrate engine
runs from before the first step to after the last. The memory has a fixed latency
(``V4HW_TS_LATENCY``, as the decode-step bench). With ``V4HW_JITTER_RESERVE=1`` the
decode class (7) is reserved (RESERVE.CLASSES, RSV_GUARD = ``V4HW_JITTER_GUARD``), else
nothing is; ``V4HW_JITTER_RESERVED`` and ``V4HW_JITTER_BACKGROUND`` (cycles, default 0:
no sharing) set RSV_SHARE for the reserved commands. Per step it records the step's
cycles (first register access to the last command's end, host setup included) and the
background's ``m_axi_gmem`` beats (the copy's read bursts, by address, and its write
bursts) in the step. Prints ``PERF
jitter`` lines; ``V4HW_JITTER_REPORT`` names a JSON file for the figures.
"""

import json
import os

import cocotb

from sim.tile_demo_tb import _bench, block_config, run_layers
from sim.tile_runtime import decode_programs
from spec.codes import TrafficClass

STEPS = int(os.environ.get("V4HW_JITTER_STEPS", "20"))
RESERVE = os.environ.get("V4HW_JITTER_RESERVE", "0") == "1"
GUARD = int(os.environ.get("V4HW_JITTER_GUARD", "0"))
SHARE = (int(os.environ.get("V4HW_JITTER_RESERVED", "0")),
         int(os.environ.get("V4HW_JITTER_BACKGROUND", "0")))
COPY_SRC, COPY_DST = 0x4000_0000_0000, 0x5000_0000_0000
COPY_LENGTH = 0xFFFF_0000        # longer than any run: the copy never ends in the run
CHECKED = 1 << 20                # bytes of the source given random data (and checked)


async def start_copy(bench):
    regs = bench.block_regs("migrate")
    bench.ram.mem.write(COPY_SRC, bench.rng.randbytes(CHECKED))
    for name, value in (("SRC", COPY_SRC), ("DST", COPY_DST)):
        await regs.write(f"{name}_LO", value & 0xFFFF_FFFF)
        await regs.write(f"{name}_HI", value >> 32)
    await regs.write("LENGTH", COPY_LENGTH)
    await regs.write("START", 1)
    return regs


def background_beats(bench, reads0, writes0):
    """The copy's read and write beats on ``m_axi_gmem`` since the marks."""
    rd = sum(b.beats for b in bench.ram.reads[reads0:]
             if COPY_SRC <= b.addr < COPY_SRC + COPY_LENGTH)
    wr = sum(b.beats for b in bench.ram.writes[writes0:]
             if COPY_DST <= b.addr < COPY_DST + COPY_LENGTH)
    return rd, wr


@cocotb.test()
async def decode_jitter(dut):
    """``STEPS`` repetitions of the notes decode step beside a background copy."""
    bench = _bench(dut)
    await bench.start()
    cfg = await block_config(bench)
    tile = bench.regs
    if RESERVE:
        await tile.write_fields("RESERVE", classes=1 << TrafficClass.DECODE)
        await tile.write("RSV_GUARD", GUARD)
        await tile.write_fields("RSV_SHARE", reserved=SHARE[0], background=SHARE[1])
    assert await tile.read_fields("TRAFFIC_CLASS") == {
        "MA": TrafficClass.DECODE, "VA": TrafficClass.DECODE,
        "MIGRATE": TrafficClass.CACHE_MIGRATE}
    programs = decode_programs("notes", cfg)
    migrate = await start_copy(bench)
    await bench.cycles(2000)                 # the copy at full speed before the first step
    steps = []
    for k in range(STEPS):
        records = []
        reads0, writes0 = len(bench.ram.reads), len(bench.ram.writes)
        first = bench.timing.edge()
        failure, _ = await run_layers(bench, programs, records, keep_first=False)
        cycles = bench.timing.edge() - first
        assert failure is None, f"step {k}: {failure}"
        rd, wr = background_beats(bench, reads0, writes0)
        steps.append({"cycles": cycles, "bg_read_beats": rd, "bg_write_beats": wr,
                      "rtl_ops": sum(r.host is None for r in records),
                      "busy": sum(r.cycles for r in records if r.host is None)})
        dut._log.info("step %d: %d cycles, background %d read / %d write beats", k, cycles,
                      rd, wr)
    status = await migrate.read_fields("STATUS")
    assert status["BUSY"] and not status["ERROR"], f"the copy did not run throughout: {status}"
    copied = sum(b.beats for b in bench.ram.writes
                 if COPY_DST <= b.addr < COPY_DST + COPY_LENGTH) * bench.data_width // 8
    n = min(copied, CHECKED)
    assert bytes(bench.ram.mem.read(COPY_DST, n)) == bytes(bench.ram.mem.read(COPY_SRC, n)), \
        "the background copy differs from its source"
    assert not bench.ram.violations, "\n".join(bench.ram.violations[:5])
    counters = {name: await tile.read(name)
                for name in ("RSV_STARTS", "RSV_LATE", "RSV_DRAIN_MAX", "RSV_GUARD")}
    cycles = [s["cycles"] for s in steps]
    shares = [(s["bg_read_beats"] / s["cycles"], s["bg_write_beats"] / s["cycles"])
              for s in steps]
    figures = {
        "reserve": RESERVE, "guard": GUARD if RESERVE else None,
        "share": list(SHARE) if RESERVE else None, "steps": STEPS,
        "latency": bench.ram.read_latency, "cycles": cycles,
        "spread": max(cycles) - min(cycles), "min": min(cycles), "max": max(cycles),
        "bg_read_share_min": min(r for r, _ in shares),
        "bg_write_share_min": min(w for _, w in shares),
        "bg_bytes_per_cycle_min": min(w for _, w in shares) * bench.data_width // 8,
        "copied_bytes": copied, "counters": counters, "per_step": steps,
    }
    label = f"reserved guard {GUARD} share {SHARE}" if RESERVE else "unreserved"
    print(f"PERF jitter {label}: {STEPS} steps, cycles min {figures['min']} max "
          f"{figures['max']} spread {figures['spread']}; background read share min "
          f"{figures['bg_read_share_min']:.3f}, write share min "
          f"{figures['bg_write_share_min']:.3f} of the bus; counters {counters}")
    dut._log.info("jitter %s: cycles %s", label, cycles)
    path = os.environ.get("V4HW_JITTER_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(figures, f, indent=1)
