"""cocotb testbench: one planned command list run by the tile's command sequencer
(``hdl/tile/sequencer.py``) ``STEPS`` times on ``v4hw_tile`` while the cache-migrate
engine copies in the background, run by ``tests/test_tile_seq_cocotb.py``.

The determinism the planner rests on, end to end: the list of the ``notes`` decode step
(its first ``V4HW_SQJ_LIMIT`` commands; 0: the whole step) planned with the tile
machine model, each START's margin (``plan.machine.TILE_MARGINS``) plus ``RSV_GUARD``
(the reserved command's own bursts wait that long after its START,
docs/tile/README.md, "Reserved commands"), is loaded once; then, ``STEPS`` times, the
host reloads the step's memory image (the same state and tokens every time), zeroes
the log and starts the sequencer, which runs the whole list while one long copy of the
migrate engine (``tests/tile_jitter_tb.py``'s, started before the first step, running
past the last) competes for the memory path; before each step the host waits a random
0 .. ``V4HW_SQJ_GAP`` − 1 cycles (seeded, the seed printed), so that every step starts
at another phase of the copy. The decode class (7, the MA's and the VA's TRAFFIC_CLASS)
is reserved (RESERVE.CLASSES, RSV_GUARD = ``V4HW_SQJ_GUARD``), as
``test_tile_jitter_reserved`` does for host-driven steps; with ``V4HW_SQJ_RESERVE`` 0
nothing is (and the guard is not in the plan): the figures are reported, the
determinism not asserted.

Asserted, every step: the sequencer DONE without error, every record VALID and
launched, the memory image bit for bit the golden interpreter's; across the steps: the
same cycles (the last record's DONE less T0), every entry's launch and CTR at the same
cycle after T0, the same LATE of every entry; RSV_LATE 0 and RSV_DRAIN_MAX within the
guard; the copy still running, its bytes its source's. Late entries (launched after
their planned cycle) are counted and reported, not asserted (the list is planned with
upper bounds; with the guard in the margins none is expected).

Environment: ``V4HW_SQJ_STEPS`` (3), ``V4HW_SQJ_LIMIT`` (12), ``V4HW_SQJ_GUARD`` (160),
``V4HW_SQJ_RESERVE`` (1), ``V4HW_SQJ_GAP`` (1000), ``V4HW_SQJ_ORIGIN`` (400: the plan's
cycle 0 after T0), ``V4HW_SQJ_REPORT`` (a JSON file for the figures).
"""

import json
import os
import time

import cocotb

from plan.commands import decode_log, encode_command_list, preset_command_list
from plan.machine import TILE_MARGINS
from sim.seed import test_seed
from sim.tile_demo_tb import MEMORY_LATENCY, block_config, start_stamp
from sim.tile_driver import TileBench
from sim.tile_runtime import TileRuntime, decode_programs
from spec.codes import TrafficClass
from spec.sequencer import RECORD_BYTES, RecordFlag
from tests.tile_jitter_tb import (
    CHECKED,
    COPY_DST,
    COPY_LENGTH,
    COPY_SRC,
    background_beats,
    start_copy,
)
from tests.tile_seq_tb import LIST, LOG, L, P


def _env(name, default):
    return int(os.environ.get(f"V4HW_SQJ_{name}", str(default)))


@cocotb.test()
async def planned_jitter(dut):
    """The planned list ``STEPS`` times beside a background copy (see the module)."""
    steps, limit = _env("STEPS", 3), _env("LIMIT", 12)
    guard, origin = _env("GUARD", 160), _env("ORIGIN", 400)
    reserve_on, gap = bool(_env("RESERVE", 1)), _env("GAP", 1000)
    rng = test_seed()
    bench = TileBench(dut, p=P, lanes=L, latency=MEMORY_LATENCY)
    await bench.start()
    cfg = await block_config(bench)
    programs = decode_programs("notes", cfg)
    program = programs[-1][1]          # holds every tensor and the step's host image
    commands = [cmd for _, prog, _ in programs for cmd in prog.commands]
    n_cmds = len(commands) if limit == 0 else min(limit, len(commands))
    margins = {kind: cycles + (guard if reserve_on else 0)
               for kind, cycles in TILE_MARGINS.items()}
    entries, result, _, planned = preset_command_list(
        "notes", cfg, origin=origin, margins=margins,
        commands=None if n_cmds == len(commands) else n_cmds)
    assert [cmd for prog in planned for cmd in prog.commands] == commands[:n_cmds], \
        "the planned program is not the runtime's"
    count = len(entries)
    bench.ram.mem.write(LIST, encode_command_list(entries))

    tile, seq = bench.regs, bench.block_regs("sequencer")
    if reserve_on:
        await tile.write_fields("RESERVE", classes=1 << TrafficClass.DECODE)
        await tile.write("RSV_GUARD", guard)
    assert await tile.read_fields("TRAFFIC_CLASS") == {
        "MA": TrafficClass.DECODE, "VA": TrafficClass.DECODE,
        "MIGRATE": TrafficClass.CACHE_MIGRATE}
    for name, value in (("LIST_LO", LIST & 0xFFFFFFFF), ("LIST_HI", LIST >> 32),
                        ("LOG_LO", LOG & 0xFFFFFFFF), ("LOG_HI", LOG >> 32), ("COUNT", count)):
        await seq.write(name, value)
    await seq.write_fields("IRQ_ENABLE", done=1, error=1)
    migrate = await start_copy(bench)
    await bench.cycles(2000)                 # the copy at full speed before the first step

    rt = TileRuntime(program, bench.ram.mem, {}, now=bench.now)
    expected = None
    runs, gaps, wall = [], [rng.randrange(gap) for _ in range(steps)], time.monotonic()
    for k in range(steps):
        await bench.cycles(gaps[k])
        rt.load()                            # the same image every step (and the golden's)
        bench.ram.mem.write(LOG, bytes(RECORD_BYTES * count))
        reads0, writes0 = len(bench.ram.reads), len(bench.ram.writes)
        await seq.write("START", 1)
        started = start_stamp(bench)()
        await bench.wait_interrupt(200_000 + 4 * (result.makespan + origin),
                                   f" (step {k}'s run)")
        status = await seq.read_fields("STATUS")
        counters = {name: await seq.read(name) for name in ("LAUNCHED", "COMPLETED", "LATE")}
        t0 = await seq.read("T0_LO") | await seq.read("T0_HI") << 32
        log = decode_log(bytes(bench.ram.mem.read(LOG, RECORD_BYTES * count)), count)
        await seq.write_fields("IRQ_STATUS", done=1, error=1)
        assert status["DONE"] and not status["ERROR"], f"step {k}: the run ended {status}"
        assert counters["LAUNCHED"] == counters["COMPLETED"] == count, (k, counters)
        assert t0 == started + 1, f"step {k}: T0 {t0}, START performed at {started}"
        assert sorted(log) == list(range(count)), f"step {k}: {len(log)} records of {count}"
        for i, rec in log.items():
            assert not rec.flags & (RecordFlag.ERROR | RecordFlag.NOT_LAUNCHED), (k, i, rec)
            assert rec.ctr == rec.done - 1 and rec.launch >= t0 + entries[i].planned, (k, i, rec)
        if expected is None:
            for cmd in commands[:n_cmds]:
                rt.golden.execute(cmd)
            bad = rt.final_mismatches()
            assert not bad, f"step {k}: memory differs from the golden run in {bad[:5]}"
            expected = rt.image().tobytes()
        else:
            assert rt.image().tobytes() == expected, f"step {k}: memory differs from step 0's"
        rd, wr = background_beats(bench, reads0, writes0)
        runs.append({"t0": t0, "cycles": max(r.done for r in log.values()) - t0,
                     "launch": [log[i].launch - t0 for i in range(count)],
                     "ctr": [log[i].ctr - t0 for i in range(count)],
                     "late": [log[i].late for i in range(count)],
                     "bg_read_beats": rd, "bg_write_beats": wr})
        dut._log.info("step %d: %d cycles, %d late entries, background %d read / %d write "
                      "beats", k, runs[-1]["cycles"], sum(map(bool, runs[-1]["late"])), rd, wr)
    run_s = time.monotonic() - wall

    status = await migrate.read_fields("STATUS")
    copied = sum(b.beats for b in bench.ram.writes
                 if COPY_DST <= b.addr < COPY_DST + COPY_LENGTH) * bench.data_width // 8
    reserve = {name: await tile.read(name)
               for name in ("RSV_STARTS", "RSV_LATE", "RSV_DRAIN_MAX", "RSV_GUARD")}
    cycles = [r["cycles"] for r in runs]
    late = [sum(map(bool, r["late"])) for r in runs]
    fig = {"steps": steps, "commands": n_cmds, "entries": count, "reserve": reserve_on,
           "guard": guard if reserve_on else None, "gaps": gaps,
           "origin": origin, "makespan": result.makespan, "cycles": cycles,
           "spread": max(cycles) - min(cycles),
           "launches_identical": all(r["launch"] == runs[0]["launch"] for r in runs),
           "ctrs_identical": all(r["ctr"] == runs[0]["ctr"] for r in runs),
           "late_entries": late, "late_max": max(max(r["late"]) for r in runs),
           "t0": [r["t0"] for r in runs],
           "bg_read_beats": [r["bg_read_beats"] for r in runs],
           "bg_write_beats": [r["bg_write_beats"] for r in runs],
           "copied_bytes": copied, "counters": reserve, "run_s": round(run_s, 1),
           "launch": runs[0]["launch"], "ctr": runs[0]["ctr"]}
    path = os.environ.get("V4HW_SQJ_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(fig, f, indent=1)
    dut._log.info("planned jitter: %d steps of %d entries, cycles %s (spread %d), late %s, "
                  "reserve %s", steps, count, cycles, fig["spread"], late, reserve)

    assert status["BUSY"] and not status["ERROR"], f"the copy did not run throughout: {status}"
    n = min(copied, CHECKED)
    assert bytes(bench.ram.mem.read(COPY_DST, n)) == bytes(bench.ram.mem.read(COPY_SRC, n)), \
        "the background copy differs from its source"
    assert all(r["bg_read_beats"] > 0 and r["bg_write_beats"] > 0 for r in runs), \
        "a step ran without the background"
    assert not bench.ram.violations, "\n".join(bench.ram.violations[:5])
    if not reserve_on:
        assert reserve["RSV_STARTS"] == 0, reserve
        return
    assert reserve["RSV_STARTS"] > 0 and reserve["RSV_LATE"] == 0, reserve
    assert reserve["RSV_DRAIN_MAX"] <= guard, reserve
    assert fig["spread"] == 0, f"step cycles {cycles}"
    for k, r in enumerate(runs[1:], start=1):
        for what in ("launch", "ctr", "late"):
            diff = [i for i, (a, b) in enumerate(zip(r[what], runs[0][what], strict=True))
                    if a != b]
            assert not diff, (f"step {k}: entry {diff[0]}'s {what} {r[what][diff[0]]} after "
                              f"T0, step 0's {runs[0][what][diff[0]]} ({len(diff)} differ)")
