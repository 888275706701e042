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
the whole memory image does. ``decode_step`` runs the preset's decode step (from a zero
state, as :func:`golden.program.decode_steps`); ``decode_steps`` consecutive steps, each
generated from the memory the tile left (:class:`sim.tile_runtime.DecodeSession`).

Environment (set by ``tests/test_tile_step_cocotb.py`` and ``v4hw demo``):

``V4HW_TS_PRESET``   tile preset (``notes``, ``deepseek-v4``)
``V4HW_TS_LIMIT``    run only the first N commands of the step (all layers counted; 0: all)
``V4HW_TS_STEPS``    ``decode_steps``, ``prefill_then_decode``: how many consecutive steps
                     (default 2)
``V4HW_TS_P``, ``V4HW_TS_L``  the DUT's MA P and VA L (checked against PARAMS)
``V4HW_TS_LATENCY``  the bench memory's read and write latency (default 9)
``V4HW_TS_PAUSE``    probability of a pause cycle on each of ``m_axi_gmem``'s five channels
                     (random back-pressure on AR, AW, W and idle cycles on R, B; default 0),
                     drawn from the test's seed (:func:`sim.seed.test_seed`)
``V4HW_TS_TOKENS``   ``prefill``, ``prefill_then_decode``: the prompt's tokens (default 16)
``V4HW_TS_REPORT``   a JSON file for the records, the tables and the figures

``prefill`` runs the preset's prefill of ``V4HW_TS_TOKENS`` tokens (every layer's whole
program, :func:`prefill_programs`); ``prefill_then_decode`` that prefill and then
``V4HW_TS_STEPS`` decode steps on the state it wrote; ``tests/tile_faults_tb.py`` injects
faults into a step.
"""

import json
import os
import random
import time

import cocotb
import numpy as np

from golden.program import BlockConfig
from sim.seed import test_seed
from sim.tile_driver import TileBench
from sim.tile_runtime import (
    DecodeSession,
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


async def run_layers(bench, programs, records, *, keep_first, limit=None):
    """Run each layer's program in turn through the tile (the first over zeros unless
    ``keep_first``, the others over the memory the one before left); the records go into
    ``records`` (stages prefixed ``l<i>.``). Returns ``(failure or None, last runtime)``."""
    blocks = {"ma": bench.block_regs("ma"), "va": bench.block_regs("va")}
    stamp = start_stamp(bench)
    left, rt = limit, None
    for i, (_, program, _) in enumerate(programs):
        n = len(program.commands) if left is None else min(left, len(program.commands))
        if n == 0:
            break
        rt = TileRuntime(program, bench.ram.mem, blocks, now=bench.now,
                         interrupt=bench.dut.interrupt, start_time=stamp,
                         mc=bench.block_regs("mc"))
        failure = None
        try:
            await rt.run(range(n), keep=keep_first or i > 0)
        except RuntimeFailure as error:
            failure = f"layer {i}: {error}"
        if failure is None and n == len(program.commands):
            bad = rt.final_mismatches()
            if bad:
                failure = f"layer {i}: memory differs from the golden run in {bad[:5]}"
        for r in rt.records:
            r.stage = f"l{i}.{r.stage}" if len(programs) > 1 else r.stage
        records += rt.records
        if failure is not None:
            return failure, rt
        if left is not None:
            left -= n
    return None, rt


def figures(bench, records, failure, first_edge, marks, **extra):
    """The run's figures (see :func:`report`)."""
    reads0, writes0 = marks
    beats = (sum(b.beats for b in bench.ram.reads[reads0:])
             + sum(b.beats for b in bench.ram.writes[writes0:]))
    rtl = [r for r in records if r.host is None]
    busy = sum(r.cycles for r in rtl)
    if bench.ram.violations and failure is None:
        failure = "AXI rule violations: " + "; ".join(bench.ram.violations[:5])
    return {
        "commands": len(records), "rtl_ops": len(rtl), "starts": sum(r.repeat for r in rtl),
        "cycles": busy, "predicted": sum(r.predicted for r in rtl),
        "step_cycles": bench.timing.edge() - first_edge, "gmem_beats": beats,
        "bus_bytes": bench.data_width // 8, "roofline": beats / busy if busy else 0.0,
        "bit_exact": failure is None, "failure": failure, **extra,
    }


def report(dut, title, records, fig, steps=None):
    """Log the tables and write the JSON report (``V4HW_TS_REPORT``)."""
    stage_table = format_by_stage(records)
    by_opcode = format_by_opcode(records)
    summary = (format_summary(records, title) if fig["failure"] is None
               else title + "\nFAILED: " + fig["failure"])
    dut._log.info("\n%s\n\n%s\n%s", stage_table, by_opcode, summary)
    path = os.environ.get("V4HW_TS_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump({"title": title, "stages": stage_table, "by_opcode": by_opcode,
                       "summary": summary, "figures": fig, "steps": steps or [],
                       "records": [vars(r) for r in records]}, f, indent=1)


def _seed():
    """The test's seed (:func:`sim.seed.test_seed`, which prints it with the command that
    reruns it), drawn once: the seed of the bench's ``random.Random``."""
    return test_seed().getrandbits(32)


def _bench(dut):
    pause = float(os.environ.get("V4HW_TS_PAUSE", "0"))
    seed = _seed() if pause else None
    bench = TileBench(dut, p=int(os.environ.get("V4HW_TS_P", "4")),
                      lanes=int(os.environ.get("V4HW_TS_L", "8")), latency=MEMORY_LATENCY,
                      rng=None if seed is None else random.Random(seed))
    bench.pause_probability, bench.seed = pause, seed
    return bench


async def _start(bench):
    """Reset and identity, then the random pauses on ``m_axi_gmem`` (``V4HW_TS_PAUSE``)."""
    await bench.start()
    if bench.pause_probability:
        bench.pause(bench.ram.channels(), bench.pause_probability)


def _title(what, cfg):
    return (f"{what} through v4hw_tile, P={cfg.p}, L={cfg.lanes}, bus {cfg.bus_bits} bits, "
            f"memory latency {MEMORY_LATENCY} (predicted: the latency models at the core's "
            f"{cfg.latency}, i.e. the standalone block)")


@cocotb.test()
async def decode_step(dut):
    """One decode step of every layer of the preset through the tile."""
    preset = os.environ.get("V4HW_TS_PRESET", "notes")
    limit = int(os.environ.get("V4HW_TS_LIMIT", "0"))
    bench = _bench(dut)
    await _start(bench)
    cfg = await block_config(bench)
    wall = time.monotonic()
    programs = decode_programs(preset, cfg)
    generate_s = time.monotonic() - wall
    records = []
    first_edge, marks = bench.timing.edge(), (len(bench.ram.reads), len(bench.ram.writes))
    wall = time.monotonic()
    failure, _ = await run_layers(bench, programs, records, keep_first=False, limit=limit or None)
    fig = figures(bench, records, failure, first_edge, marks, generate_s=round(generate_s, 1),
                  run_s=round(time.monotonic() - wall, 1), pause=bench.pause_probability,
                  seed=bench.seed)
    what = f"{preset}: one decode step ({'first ' + str(limit) if limit else 'all'} commands)" + (
        f", random pauses on m_axi_gmem (p = {bench.pause_probability})"
        if bench.pause_probability else "")
    report(dut, _title(what, cfg), records, fig)
    assert fig["failure"] is None, fig["failure"]
    assert fig["rtl_ops"], "no command ran on the tile"


@cocotb.test()
async def decode_steps(dut):
    """``V4HW_TS_STEPS`` consecutive decode steps of the preset through the tile, the
    last at the preset's position; each generated from the memory the tile wrote in the
    step before (:class:`sim.tile_runtime.DecodeSession`), and the memory the tile leaves
    after each step equal to the generator's own golden run from the same start."""
    preset = os.environ.get("V4HW_TS_PRESET", "notes")
    n_steps = int(os.environ.get("V4HW_TS_STEPS", "2"))
    bench = _bench(dut)
    await _start(bench)
    cfg = await block_config(bench)
    session = DecodeSession(preset, cfg, n_steps)
    records, steps = [], []
    first_edge, marks = bench.timing.edge(), (len(bench.ram.reads), len(bench.ram.writes))
    wall = time.monotonic()
    failure = await run_session(dut, bench, session, n_steps, records, steps, keep_first=False)
    fig = figures(bench, records, failure, first_edge, marks,
                  run_s=round(time.monotonic() - wall, 1))
    what = f"{preset}: {n_steps} consecutive decode steps from position {session.t - len(steps)}"
    report(dut, _title(what, cfg), records, fig, steps)
    assert fig["failure"] is None, fig["failure"]
    assert len(steps) == n_steps


async def run_session(dut, bench, session, n_steps, records, steps, *, keep_first, outputs=None):
    """Run ``n_steps`` steps of ``session`` through the tile (the first over zeros unless
    ``keep_first``), each from the memory the one before left, checking after each that
    the memory equals the generator's; records go into ``records`` (stages prefixed
    ``t<position>.``), one dict a step into ``steps`` (its ops, its cycles START → CTR
    summed, ``step_cycles``: the bench's cycles with the host's register accesses).
    ``outputs``: a dict that gets each step's layer output as the tile wrote it (the
    ``notes`` preset: {position: bf16 row}). Returns the failure or None."""
    for k in range(n_steps):
        t = session.t
        programs = session.step()
        step_records = []
        edge = bench.timing.edge()
        failure, rt = await run_layers(bench, programs, step_records,
                                       keep_first=keep_first or k > 0)
        for r in step_records:
            r.stage = f"t{t}.{r.stage}"
        records += step_records
        rtl = [r for r in step_records if r.host is None]
        steps.append({"position": t, "ops": len(step_records), "rtl_ops": len(rtl),
                      "cycles": sum(r.cycles for r in rtl),
                      "predicted": sum(r.predicted for r in rtl),
                      "step_cycles": bench.timing.edge() - edge})
        if failure is not None:
            return failure
        got, want = rt.image(), session.expected()
        if got.size < want.size or not np.array_equal(got[: want.size], want):
            return (f"step at position {t}: the memory the tile left differs from the "
                    "generator's golden run")
        session.sync(got)
        if outputs is not None:
            outputs[t] = rt.read(programs[-1][2]["layer output"])[0]
        dut._log.info("step at position %d: %d ops (%d on the RTL), %d cycles (%d with the "
                      "host's accesses), bit-exact", t, len(step_records), len(rtl),
                      steps[-1]["cycles"], steps[-1]["step_cycles"])
    return None


def prefill_programs(preset, config, tokens, mode="bf16"):
    """The prefill of ``tokens`` tokens (positions 0..tokens-1, empty cache) of tile
    preset ``preset`` (the ``notes`` layer: :func:`golden.program_notes.notes_prefill`,
    its random input from the preset's seed): ``[(layer, program, stage names)]``, the
    program complete (``init``: weights, constants, the input)."""
    from golden.presets.tile import PRESETS
    from golden.program_notes import notes_prefill

    pre = PRESETS[preset]
    if pre.kind != "notes" or pre.config.num_hidden_layers != 1:
        raise ValueError(f"prefill through the tile: the one-layer notes preset, not {preset!r}")
    if tokens < 1:
        raise ValueError(f"tokens must be >= 1, got {tokens}")
    (layer,) = pre.model().layers
    x = np.random.default_rng(pre.seed).standard_normal((tokens, pre.config.hidden_size))
    program, names = notes_prefill(layer, x, config, mode)
    return [(layer, program, names)]


@cocotb.test()
async def prefill(dut):
    """The preset's prefill of ``V4HW_TS_TOKENS`` tokens through the tile, every layer's
    whole program, bit for bit against the golden interpreter (every tensor each command
    wrote, each layer's whole memory)."""
    preset = os.environ.get("V4HW_TS_PRESET", "notes")
    tokens = int(os.environ.get("V4HW_TS_TOKENS", "16"))
    bench = _bench(dut)
    await _start(bench)
    cfg = await block_config(bench)
    wall = time.monotonic()
    programs = prefill_programs(preset, cfg, tokens)
    generate_s = time.monotonic() - wall
    records = []
    first_edge, marks = bench.timing.edge(), (len(bench.ram.reads), len(bench.ram.writes))
    wall = time.monotonic()
    failure, _ = await run_layers(bench, programs, records, keep_first=False)
    fig = figures(bench, records, failure, first_edge, marks, generate_s=round(generate_s, 1),
                  run_s=round(time.monotonic() - wall, 1), tokens=tokens)
    report(dut, _title(f"{preset}: prefill of {tokens} tokens", cfg), records, fig)
    assert fig["failure"] is None, fig["failure"]
    assert fig["rtl_ops"], "no command ran on the tile"


@cocotb.test()
async def prefill_then_decode(dut):
    """The ``notes`` prefill of ``V4HW_TS_TOKENS`` tokens through the tile, then
    ``V4HW_TS_STEPS`` decode steps on the state the prefill wrote (its caches and HCA
    summaries: :class:`sim.tile_runtime.DecodeSession` with ``prefill``), each from the
    memory the tile left; after each the whole memory equals the generator's, and each
    step's layer output as the tile wrote it equals, bit for bit, the row the golden
    prefill of all the tokens gives (the decode after a prefill is the longer prefill)."""
    from golden.program import Builder
    from golden.program_notes import notes_prefill

    preset = os.environ.get("V4HW_TS_PRESET", "notes")
    tokens = int(os.environ.get("V4HW_TS_TOKENS", "16"))
    n_steps = int(os.environ.get("V4HW_TS_STEPS", "2"))
    bench = _bench(dut)
    await _start(bench)
    cfg = await block_config(bench)
    session = DecodeSession(preset, cfg, n_steps, prefill=tokens)
    wall = time.monotonic()
    prefill = session.prefill()
    records, steps = [], []
    first_edge, marks = bench.timing.edge(), (len(bench.ram.reads), len(bench.ram.writes))
    failure, rt = await run_layers(bench, prefill, records, keep_first=False)
    for r in records:
        r.stage = f"prefill.{r.stage}"
    rtl = [r for r in records if r.host is None]
    steps.append({"position": f"prefill 0..{tokens - 1}", "ops": len(records),
                  "rtl_ops": len(rtl), "cycles": sum(r.cycles for r in rtl),
                  "predicted": sum(r.predicted for r in rtl),
                  "step_cycles": bench.timing.edge() - first_edge})
    if failure is None:
        got, want = rt.image(), session.expected()
        if got.size < want.size or not np.array_equal(got[: want.size], want):
            failure = "the prefill: the memory the tile left differs from the generator's"
        else:
            session.sync(got)
    outputs = {}
    if failure is None:
        dut._log.info("prefill of %d tokens: %d ops, %d cycles, bit-exact", tokens,
                      len(records), steps[-1]["cycles"])
        failure = await run_session(dut, bench, session, n_steps, records, steps,
                                    keep_first=True, outputs=outputs)
    if failure is None:
        # the layer outputs against the golden prefill of every token so far
        (layer, _, _), full = prefill[0], Builder(cfg)
        _, names = notes_prefill(layer, np.array(session.inputs), mode=session.mode, builder=full)
        want = full.read(names["layer output"])
        for t, row in outputs.items():
            if not np.array_equal(row, want[t]):
                failure = (f"step at position {t}: the layer output differs from row {t} of the "
                           f"prefill of {len(session.inputs)} tokens")
                break
    fig = figures(bench, records, failure, first_edge, marks, tokens=tokens,
                  run_s=round(time.monotonic() - wall, 1),
                  full_prefill_rows=sorted(outputs) if failure is None else [])
    what = f"{preset}: prefill of {tokens} tokens, then {n_steps} decode steps on its state"
    report(dut, _title(what, cfg), records, fig, steps)
    assert fig["failure"] is None, fig["failure"]
    assert len(steps) == n_steps + 1
