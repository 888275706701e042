"""cocotb testbench: decode steps of a tile preset through the integrated tile
``v4hw_tile``, run by the host runtime (:mod:`sim.tile_runtime`), bit for bit against
the golden interpreter.

One :class:`sim.tile_driver.TileBench` owns the clock, the control master and the memory
behind ``m_axi_gmem``; the runtime gets the MA's and the VA's :class:`sim.regs.Registers`
at their windows (``spec.tile.base("ma")`` / ``base("va")``) and the tile's one
``interrupt``. The program's :class:`golden.program.BlockConfig` is read off the tile
itself (PARAMS.MA_P, PARAMS.VA_L, CAPS.BUS_BYTES); its ``latency`` is the bench memory's
minus 1 (the latency models count the latency at a core's memory port, as on the
standalone tops: ``sim.program_tb.MEMORY_LATENCY``), so each op's ``predicted`` is what
the block would take on its standalone top and ``cycles − predicted`` is the tile's own
cost (NIs, mesh, memory NI, MC). Every VA and MA command the RTL has runs on the tile in
program order; the others are played by the host (the record says why). After each RTL
command every tensor it wrote equals the golden interpreter's; at the end of each layer
the whole memory image does.

Environment (set by ``tests/test_tile_step_cocotb.py`` and ``v4hw demo``):

``V4HW_TS_PRESET``   tile preset (``notes``, ``deepseek-v4``)
``V4HW_TS_LIMIT``    run only the first N commands of the step (all layers counted; 0: all)
``V4HW_TS_P``, ``V4HW_TS_L``  the DUT's MA P and VA L (checked against PARAMS)
``V4HW_TS_LATENCY``  the bench memory's read and write latency (default 9)
``V4HW_TS_REPORT``   a JSON file for the records, the tables and the figures
"""

import json
import os
import time

import cocotb

from golden.program import BlockConfig
from sim.tile_driver import TileBench
from sim.tile_runtime import (
    RuntimeFailure,
    TileRuntime,
    decode_programs,
    format_by_opcode,
    format_by_stage,
    format_summary,
)

MEMORY_LATENCY = int(os.environ.get("V4HW_TS_LATENCY", "9"))
DECODER_DELAY = 2
"""A control write is performed 2 cycles after the later of its AW and W handshakes on
the tile: the register block's one (``sim.program_tb.StartStamp``) and the tile's
decoder's one (``hdl/tile/control.py``)."""


def start_stamp(bench):
    """The timebase of the cycle in which the latest control write (START) was performed."""
    writes = bench._control_writes

    def stamp():
        return bench.timebase_at(max(writes["aw"][-1], writes["w"][-1]) + DECODER_DELAY)

    return stamp


async def block_config(bench):
    """The program's BlockConfig, from the tile's own PARAMS and CAPS registers."""
    params = await bench.regs.read_fields("PARAMS")
    bus_bytes = await bench.regs.read("CAPS") >> 24       # CAPS bits 31:24: bus bytes
    return BlockConfig(p=params["MA_P"], lanes=params["VA_L"], bus_bits=8 * bus_bytes,
                       latency=MEMORY_LATENCY - 1)


@cocotb.test()
async def decode_step(dut):
    """One decode step of every layer of the preset through the tile."""
    preset = os.environ.get("V4HW_TS_PRESET", "notes")
    limit = int(os.environ.get("V4HW_TS_LIMIT", "0"))
    bench = TileBench(dut, p=int(os.environ.get("V4HW_TS_P", "4")),
                      lanes=int(os.environ.get("V4HW_TS_L", "8")), latency=MEMORY_LATENCY)
    await bench.start()
    cfg = await block_config(bench)
    wall = time.monotonic()
    programs = decode_programs(preset, cfg)
    generate_s = time.monotonic() - wall
    blocks = {"ma": bench.block_regs("ma"), "va": bench.block_regs("va")}
    stamp = start_stamp(bench)
    records, left, failure, layers = [], limit or None, None, []
    first_edge = bench.timing.edge()
    reads0, writes0 = len(bench.ram.reads), len(bench.ram.writes)
    wall = time.monotonic()
    for i, (_, program, _) in enumerate(programs):
        n = len(program.commands) if left is None else min(left, len(program.commands))
        if n == 0:
            break
        rt = TileRuntime(program, bench.ram.mem, blocks, now=bench.now,
                         interrupt=dut.interrupt, start_time=stamp)
        try:
            await rt.run(range(n))
        except RuntimeFailure as error:
            failure = f"layer {i}: {error}"
        if failure is None and n == len(program.commands):
            bad = rt.final_mismatches()
            if bad:
                failure = f"layer {i}: memory differs from the golden run in {bad[:5]}"
        for r in rt.records:
            r.stage = f"l{i}.{r.stage}" if len(programs) > 1 else r.stage
        records += rt.records
        layers.append(n)
        if failure is not None:
            break
        if left is not None:
            left -= n
    run_s = time.monotonic() - wall
    step_cycles = bench.timing.edge() - first_edge
    beats = (sum(b.beats for b in bench.ram.reads[reads0:])
             + sum(b.beats for b in bench.ram.writes[writes0:]))
    rtl = [r for r in records if r.host is None]
    busy = sum(r.cycles for r in rtl)
    name = f"{preset}: one decode step ({'first ' + str(limit) if limit else 'all'} commands)"
    title = (f"{name} through v4hw_tile, P={cfg.p}, L={cfg.lanes}, bus {cfg.bus_bits} bits, "
             f"memory latency {MEMORY_LATENCY} (predicted: the latency models at the core's "
             f"{cfg.latency}, i.e. the standalone block)")
    figures = {
        "commands": len(records), "rtl_ops": len(rtl), "starts": sum(r.repeat for r in rtl),
        "cycles": busy, "predicted": sum(r.predicted for r in rtl),
        "step_cycles": step_cycles, "gmem_beats": beats, "bus_bytes": cfg.bus_bits // 8,
        "roofline": beats / busy if busy else 0.0,
        "generate_s": round(generate_s, 1), "run_s": round(run_s, 1),
        "bit_exact": failure is None, "failure": failure,
        "violations": list(bench.ram.violations[:5]),
    }
    if bench.ram.violations and failure is None:
        failure = "AXI rule violations:\n" + "\n".join(bench.ram.violations[:5])
        figures["bit_exact"], figures["failure"] = False, failure
    stage_table = format_by_stage(records)
    summary = format_summary(records, title) if failure is None else title + "\nFAILED: " + failure
    dut._log.info("\n%s\n\n%s\n%s", stage_table, format_by_opcode(records), summary)
    path = os.environ.get("V4HW_TS_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump({"title": title, "stages": stage_table, "by_opcode": format_by_opcode(records),
                       "summary": summary, "figures": figures,
                       "records": [vars(r) for r in records]}, f, indent=1)
    assert failure is None, failure
    assert rtl, "no command ran on the tile"
