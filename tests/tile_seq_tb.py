"""cocotb testbench: a planned decode step run by the tile's command sequencer
(``hdl/tile/sequencer.py``, docs/tile/sequencer.md) on ``v4hw_tile``, run by
``tests/test_tile_seq_cocotb.py``.

The host only loads the memory (the step's image, every layer's: the layers share one
memory, and the last layer's program holds every tensor and its host image; as the host
runtime :class:`sim.tile_runtime.TileRuntime` does; the command list and a zeroed log), writes
the sequencer's LIST, COUNT, LOG and START, and waits for its interrupt. The list is the
preset's planned decode step (:func:`plan.commands.preset_command_list`, what
``v4hw plan --preset notes --commands`` writes, for the tile's own P, L and bus read off
its PARAMS and CAPS; checked equal to ``v4hw plan --preset notes --commands OUT.bin
--origin 400 --ma-p 4 --va-lanes 8``'s bytes). Then:

* every record of the log is VALID, without ERROR, and its CTR is the target's (CTR =
  DONE − 1);
* what the tile machine model promises (``plan.machine.TILE_ERROR``), asserted when
  ``V4HW_SQ_ON_TIME`` is 1, else counted and reported: every entry launched at its
  planned cycle, T0 + PLANNED (LATE 0), and each op's CTR within its block's error of
  the planned CTR (never after it);
* the memory is bit for bit the golden interpreter's after the commands the entries run
  (every layer's in turn on that image, or with ``V4HW_SQ_LIMIT`` N a list planned for the step's first N
  commands only, ``preset_command_list(..., commands=N)``);
* the report (``V4HW_SQ_REPORT``, JSON): each op's CTR against its planned CTR
  (``ctr − (T0 + planned launch of its last entry + 2 + its cycles a START)``) and its
  planned finish, their distribution, the run's cycles, every record (``log``: target,
  command, repetition, planned, launch, CTR, late; what the model's constants are
  fitted on) and, with the host's run, its per-command cycles.

With ``V4HW_SQ_HOST`` 1 the same step is then run by the host runtime (command after
command, as ``sim/tile_demo_tb.py``, over a reloaded memory), for the
planned-vs-sequential ratio.

Environment: ``V4HW_SQ_PRESET`` (``notes``), ``V4HW_SQ_LIMIT`` (the first N commands'
list, 0: the whole step's),
``V4HW_SQ_ORIGIN`` (the plan's cycle 0 after T0, default 400), ``V4HW_SQ_PLAN_LATENCY``
(the memory latency the planner's models assume, default the program's),
``V4HW_SQ_ON_TIME``, ``V4HW_SQ_HOST``, ``V4HW_SQ_REPORT``.
"""

import argparse
import collections
import io
import json
import os
import time
from dataclasses import replace
from pathlib import Path

import cocotb

from golden.program import BlockConfig
from plan.cli import add_arguments, run
from plan.commands import decode_log, encode_command_list, entry_commands, preset_command_list
from plan.ir import BarrierOp
from plan.machine import TILE_ERROR, TILE_MARGINS
from sim.tile_demo_tb import MEMORY_LATENCY, block_config, run_layers, start_stamp
from sim.tile_driver import TileBench
from sim.tile_runtime import TileRuntime, decode_programs
from spec.sequencer import RECORD_BYTES, RecordFlag
from spec.tile import TileBlock

P, L = 4, 8
LIST = 0x2_0000_0000            # beside the program's memory (at 4 GiB)
LOG = 0x2_0100_0000


def _env(name, default):
    return int(os.environ.get(f"V4HW_SQ_{name}", str(default)))


@cocotb.test()
async def planned_step(dut):
    """The preset's planned decode step, launched by the sequencer (see the module)."""
    preset = os.environ.get("V4HW_SQ_PRESET", "notes")
    limit, origin = _env("LIMIT", 0), _env("ORIGIN", 400)
    bench = TileBench(dut, p=P, lanes=L, latency=MEMORY_LATENCY)
    await bench.start()
    cfg = await block_config(bench)
    programs = decode_programs(preset, cfg)
    # The layers share one memory; the last layer's program holds every tensor and the
    # host's image of all of them (its init), so one runtime loads the whole step.
    program = programs[-1][1]
    commands = [cmd for _, prog, _ in programs for cmd in prog.commands]
    plan_cfg = replace(cfg, latency=_env("PLAN_LATENCY", cfg.latency))
    n_cmds = len(commands) if limit == 0 else min(limit, len(commands))
    wall = time.monotonic()
    entries, result, graph, planned = preset_command_list(
        preset, plan_cfg, origin=origin,
        commands=None if n_cmds == len(commands) else n_cmds)
    plan_s = time.monotonic() - wall
    assert [cmd for prog in planned for cmd in prog.commands] == commands[:n_cmds], \
        "the planned program is not the runtime's"
    links = entry_commands(planned, graph, result)
    count = len(entries)
    data = encode_command_list(entries)
    if n_cmds == len(commands) and plan_cfg == BlockConfig(p=cfg.p, lanes=cfg.lanes):
        # the same list as the command line writes it
        out = Path(os.environ.get("V4HW_SQ_REPORT", "report.json")).with_suffix(".bin")
        args = argparse.ArgumentParser()
        add_arguments(args)
        run(args.parse_args(["--preset", preset, "--quiet", "--commands", str(out),
                             "--origin", str(origin), "--ma-p", str(cfg.p),
                             "--va-lanes", str(cfg.lanes)]), out=io.StringIO())
        assert out.read_bytes() == data, "v4hw plan --commands writes another list"

    # The host: the program's image, the list, a zeroed log; LIST, COUNT, LOG, START.
    rt = TileRuntime(program, bench.ram.mem, {}, now=bench.now)
    rt.load()
    bench.ram.mem.write(LIST, data)
    bench.ram.mem.write(LOG, bytes(RECORD_BYTES * len(entries)))
    seq = bench.block_regs("sequencer")
    for name, value in (("LIST_LO", LIST & 0xFFFFFFFF), ("LIST_HI", LIST >> 32),
                        ("LOG_LO", LOG & 0xFFFFFFFF), ("LOG_HI", LOG >> 32), ("COUNT", count)):
        await seq.write(name, value)
    await seq.write_fields("IRQ_ENABLE", done=1, error=1)
    before = bench.ram.snapshot()
    await seq.write("START", 1)
    started = start_stamp(bench)()
    wall = time.monotonic()
    budget = 200_000 + 4 * (result.makespan + origin)
    await bench.wait_interrupt(budget, " (the sequencer's run)")
    run_s = time.monotonic() - wall
    status = await seq.read_fields("STATUS")
    code = await seq.read("ERROR")
    err_addr = await seq.read("ERR_ADDR")
    counters = {name: await seq.read(name) for name in ("LAUNCHED", "COMPLETED", "LATE")}
    t0 = await seq.read("T0_LO") | await seq.read("T0_HI") << 32
    end = await seq.read("CTR_LO") | await seq.read("CTR_HI") << 32
    log = decode_log(bytes(bench.ram.mem.read(LOG, RECORD_BYTES * count)), count)
    golden_wall = time.monotonic()
    for cmd in commands[:n_cmds]:
        rt.golden.execute(cmd)
    bad = rt.final_mismatches()
    golden_s = time.monotonic() - golden_wall

    # Plan against measurement: each op's CTR (its last entry's) against its finish.
    timing = {e.op: (e.start, e.finish) for e in result.entries}
    bounds = {op.name: op.latency_bound for op in graph.ops if not isinstance(op, BarrierOp)}
    spans = {}
    for i, (_, _, op) in enumerate(links):
        lo, _ = spans.get(op.name, (i, i))
        spans[op.name] = (lo, i)
    ops = []
    for name, (first, last) in spans.items():
        if first not in log or last not in log:
            continue
        start, finish = timing[name]
        rec, n = log[last], last - first + 1
        # The plan's CTR of the op's last command: its launch, the START through the
        # decoder (2 cycles), then the command's cycles (the op's bound over its entries)
        # and the list reads the plan gives it (the rest of its window before the finish
        # but the sequencer's gap of 4): the finish less 2.
        each = bounds[name] // n
        reads = origin + finish - entries[last].planned - 4 - each
        planned_ctr = entries[last].planned + 2 + each + reads
        ops.append({"op": name, "block": TileBlock(entries[last].target).name,
                    "entries": n, "planned_start": origin + start,
                    "planned_finish": origin + finish, "planned_ctr": planned_ctr,
                    "list_reads": reads,
                    "launch": log[first].launch - t0,
                    "ctr": rec.ctr - t0, "ctr_minus_finish": rec.ctr - (t0 + origin + finish),
                    "ctr_minus_planned": rec.ctr - (t0 + planned_ctr),
                    "planned": finish - start, "measured": rec.ctr - log[first].launch})
    late = [(i, r.late, str(RecordFlag(r.flags))) for i, r in sorted(log.items()) if r.late]
    diffs = collections.Counter(o["ctr_minus_planned"] for o in ops)
    by_block = {}
    for o in ops:
        by_block.setdefault(o["block"], []).append(o["ctr_minus_planned"])
    fig = {
        "preset": preset, "entries": len(entries), "count": count, "commands": n_cmds,
        "program_commands": len(commands), "layers": len(programs), "origin": origin,
        "plan_latency": plan_cfg.latency, "makespan": result.makespan,
        "status": status, "error": code, "err_addr": err_addr, **counters,
        "t0": t0, "started": started, "run_cycles": end - t0,
        "last_ctr": max((r.ctr - t0 for r in log.values()), default=None),
        "records": len(log), "late_entries": len(late),
        "late_max": max((n for _, n, _ in late), default=0), "late_first": late[:10],
        "ctr_minus_planned": {str(k): v for k, v in sorted(diffs.items())},
        "ctr_minus_planned_by_block": {b: {"min": min(v), "median": sorted(v)[len(v) // 2],
                                           "max": max(v), "mean": round(sum(v) / len(v), 1),
                                           "ops": len(v)}
                                       for b, v in by_block.items()},
        "bit_exact": not bad, "mismatches": bad[:5],
        "plan_s": round(plan_s, 1), "run_s": round(run_s, 1), "golden_s": round(golden_s, 1),
        "ops": ops,
        "log": [[TileBlock(entries[i].target).name, links[i][0], links[i][1], entries[i].planned,
                 r.launch - t0, r.ctr - t0, r.late] for i, r in sorted(log.items())],
    }

    def save():
        path = os.environ.get("V4HW_SQ_REPORT")
        if path:
            with open(path, "w") as f:
                json.dump(fig, f, indent=1)

    save()
    dut._log.info("sequencer run: %d entries (%d commands), %d late (max %d); run %d cycles, "
                  "last CTR at T0 + %s (makespan %d + origin %d); CTR - planned CTR: %s",
                  count, n_cmds, len(late), fig["late_max"], fig["run_cycles"],
                  fig["last_ctr"], result.makespan, origin, fig["ctr_minus_planned_by_block"])

    assert status["DONE"] and not status["ERROR"], \
        f"the run ended {status}, ERROR {code}, ERR_ADDR {err_addr:#x}"
    assert counters["LAUNCHED"] == counters["COMPLETED"] == count, counters
    assert t0 == started + 1, f"T0 {t0}: START performed at {started}"
    # The log: every record VALID, no error, CTR = DONE - 1, never launched early.
    assert sorted(log) == list(range(count)), f"{len(log)} records of {count}"
    for i in range(count):
        rec, e = log[i], entries[i]
        assert not rec.flags & (RecordFlag.ERROR | RecordFlag.NOT_LAUNCHED), (i, rec)
        assert rec.ctr == rec.done - 1 and rec.launch < rec.ctr, (i, rec)
        assert rec.launch >= t0 + e.planned, (i, rec)
        assert rec.late == rec.launch - (t0 + e.planned), (i, rec)
        assert bool(rec.flags & RecordFlag.LATE) == bool(rec.late), (i, rec)
    assert len(late) == counters["LATE"], (len(late), counters)
    # The results: the whole memory image as the golden interpreter's.
    assert not bad, f"memory differs from the golden run in {bad[:5]}"
    stray = [a for a in bench.ram.changed_bytes(before)
             if not (rt.layout.phys_base <= a < rt.layout.phys_base + rt.layout.size
                     or LOG <= a < LOG + RECORD_BYTES * count)]
    assert not stray, f"{len(stray)} bytes outside the program and the log changed"
    assert not bench.ram.violations, "\n".join(bench.ram.violations)
    if _env("ON_TIME", 0):
        # What the tile machine model promises (plan.machine.TILE_ERROR, planned with
        # TILE_MARGINS): every entry launched at its planned cycle, and each op's CTR
        # within its block's error of the planned one (never after it).
        assert not late, f"{len(late)} entries launched late: {late[:5]}"
        for o in ops:
            lo, hi = TILE_ERROR[o["block"].lower()]
            least = lo - TILE_MARGINS[o["block"].lower()] - o["list_reads"]
            most = hi - TILE_MARGINS[o["block"].lower()]
            assert least <= o["ctr_minus_planned"] <= most, \
                f"op {o['op']}: CTR {o['ctr_minus_planned']:+d} cycles from the planned " \
                f"CTR, outside [{least}, {most}]"

    # The same step from the host, command after command, for the ratio.
    if _env("HOST", 0):
        await seq.write_fields("IRQ_ENABLE", done=0, error=0)
        await seq.write_fields("IRQ_STATUS", done=1, error=1)
        records = []
        first = bench.timing.edge()
        failure, _ = await run_layers(bench, programs, records, keep_first=False)
        assert failure is None, failure
        fig["host_cycles"] = bench.timing.edge() - first
        fig["host_busy"] = sum(r.cycles for r in records if r.host is None)
        fig["host_records"] = [[r.index, r.block, r.opcode, r.repeat, r.cycles, r.predicted]
                               for r in records]
        save()
        dut._log.info("host-driven step: %d cycles (%d in commands)", fig["host_cycles"],
                      fig["host_busy"])
