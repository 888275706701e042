"""``plan.cli_main(argv)``: plan a CircuitFlow graph from a JSON file, a synthetic one, or
one decode step of a tile preset lowered from its op program (:mod:`plan.lower`), and
print the schedule; or, with ``--tiles``, estimate one decode step of a deepseek-v4
model on N tiles (:mod:`plan.estimate`). Every user error is one line on stderr and exit
status 2."""

import argparse
import random
import sys
import time

from golden.program import BlockConfig, decode_steps
from spec.sequencer import VERSION as FORMAT_VERSION

from .commands import command_list, encode_command_list
from .dstp import DEFAULT_MAX_CYCLES, plan
from .errors import IRError
from .estimate import (
    DEFAULT_CLOCK_MHZ,
    DEFAULT_POSITION,
    PARTITIONS,
    SCHEDULES,
    TileParams,
    estimate,
    read_config,
)
from .gantt import write_gantt
from .ir import BarrierOp, graph_from_json
from .lower import lower_decode, model_note
from .machine import Machine
from .synthetic import random_graph

__all__ = ["cli_main", "add_arguments", "run"]


def add_arguments(parser):
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("graph", nargs="?", help="a CircuitFlow graph (JSON, graph_to_json)")
    source.add_argument("--synthetic", type=int, metavar="N",
                        help="plan a random graph of N ops instead")
    source.add_argument("--preset", choices=("deepseek-v4", "notes"),
                        help="lower one decode step of this tile preset (every layer, at "
                        "its decode position) from its op program and plan it")
    parser.add_argument("--seed", type=int, default=0, help="seed of --synthetic (default 0)")
    parser.add_argument("--barriers", type=int, default=0, help="barriers in --synthetic")
    parser.add_argument("--max-cycles", type=int, default=DEFAULT_MAX_CYCLES,
                        help=f"planning horizon in cycles (default {DEFAULT_MAX_CYCLES})")
    parser.add_argument("--json", metavar="OUT", help="write the plan (and stamped graph) here")
    parser.add_argument("--gantt", metavar="PNG", help="write a Gantt chart (one row per "
                        "block, Muon link and MC channel) here")
    parser.add_argument("--commands", metavar="OUT.bin", help="with --preset: write the "
                        "tile sequencer's command list of the plan here "
                        "(docs/tile/sequencer.md)")
    parser.add_argument("--origin", type=int, default=0, help="with --commands: cycles after "
                        "the sequencer's T0 at which the plan's cycle 0 falls (default 0)")
    parser.add_argument("--ma-p", type=int, default=BlockConfig.p, metavar="P",
                        help=f"with --preset: the tile's MA array size (default "
                        f"{BlockConfig.p}; the tests' small tile: 4)")
    parser.add_argument("--va-lanes", type=int, default=BlockConfig.lanes, metavar="L",
                        help=f"with --preset: the tile's VA lanes (default {BlockConfig.lanes}; "
                        "the tests' small tile: 8)")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    est = parser.add_argument_group(
        "the multi-tile estimate (with --preset deepseek-v4 and --tiles; docs/plan.md)")
    est.add_argument("--tiles", type=int, metavar="N", help="estimate one decode step on N "
                     "tiles from the latency models (--partition) instead of "
                     "planning the tile preset's step")
    est.add_argument("--config", metavar="FILE", help="a DeepSeek-V4 config.json (e.g. "
                     "tests/data/deepseek_v4_flash_config.json); default the tile preset's "
                     "3-layer configuration")
    est.add_argument("--bus-bytes", type=int, metavar="B", help="a tile's memory bus, bytes "
                     f"a cycle: 8, 16, 32 or 64 (default {TileParams.bus_bytes})")
    est.add_argument("--clock-mhz", type=float, metavar="F", help="the tiles' clock "
                     f"(default {DEFAULT_CLOCK_MHZ:g} MHz, the FPGA flow's design clock)")
    est.add_argument("--position", type=int, metavar="T", help="the decode position (default "
                     f"the preset's, or {DEFAULT_POSITION} with --config)")
    est.add_argument("--schedule", choices=SCHEDULES, help="planned (the DSTP planner with "
                     "the tile's sequencer, the default) or sequential (the commands one "
                     "after another, as the host runtime runs them)")
    est.add_argument("--partition", choices=PARTITIONS, help="layers (whole layers on tiles, "
                     "consecutive ones together; the default) or experts (every layer on "
                     "tile 0, its token's routed experts spread over the tiles)")
    est.add_argument("--link-bytes", type=int, metavar="B", help="bytes a cycle of the link "
                     "between two tiles (default the bus's)")
    est.add_argument("--link-latency", type=int, metavar="C", help="cycles of that link's "
                     "latency (default one Muon hop's zero-load latency)")


_ESTIMATE_ONLY = ("config", "bus_bytes", "clock_mhz", "position", "schedule", "partition",
                  "link_bytes", "link_latency")


def run_estimate(args, out):
    """The multi-tile estimate (:mod:`plan.estimate`) as ``args`` say."""
    if args.preset != "deepseek-v4":
        raise ValueError("--tiles estimates a deepseek-v4 model: give --preset deepseek-v4")
    for flag in ("json", "gantt", "commands"):
        if getattr(args, flag):
            raise ValueError(f"--{flag} plans the tile preset's step, not with --tiles")
    if args.tiles < 1:
        raise ValueError(f"--tiles must be at least 1, not {args.tiles}")
    bus = TileParams.bus_bytes if args.bus_bytes is None else args.bus_bytes
    if bus < 1 or bus & (bus - 1):
        raise ValueError(f"--bus-bytes must be a power of two, not {bus}")
    if args.link_bytes is not None and (args.link_bytes < 1 or args.link_bytes & (args.link_bytes - 1)):
        raise ValueError(f"--link-bytes must be a power of two, not {args.link_bytes}")
    clock = DEFAULT_CLOCK_MHZ if args.clock_mhz is None else args.clock_mhz
    if not clock > 0 or clock == float("inf"):
        raise ValueError(f"--clock-mhz must be a positive number, not {clock:g}")
    if args.position is not None and args.position < 0:
        raise ValueError(f"--position must be >= 0, not {args.position}")
    tile = TileParams(p=args.ma_p, lanes=args.va_lanes, bus_bytes=bus)
    cfg, source = None, "the tile preset"
    if args.config is not None:
        cfg, source = read_config(args.config), args.config
    result = estimate(cfg, source=source, position=args.position, tiles=args.tiles, tile=tile,
                      clock_mhz=clock, schedule=args.schedule or "planned",
                      partition=args.partition or "layers",
                      link_bytes=args.link_bytes, link_latency=args.link_latency)
    out.write(result.report() + "\n")
    return result


def run(args, out=None):
    """Plan as ``args`` say; raises ValueError / OSError on a user error."""
    out = sys.stdout if out is None else out
    if getattr(args, "tiles", None) is not None:
        return run_estimate(args, out)
    given = [f"--{name.replace('_', '-')}" for name in _ESTIMATE_ONLY
             if getattr(args, name, None) is not None]
    if given:
        raise ValueError(f"{given[0]} is for the multi-tile estimate: give --tiles N too")
    machine = Machine()
    if args.commands is not None and args.preset is None:
        raise ValueError("--commands needs --preset (a command list is made from an op "
                         "program)")
    if args.origin < 0:
        raise ValueError(f"--origin must be >= 0, not {args.origin}")
    config = BlockConfig(p=args.ma_p, lanes=args.va_lanes)
    if args.preset is not None:
        graph, machine = lower_decode(args.preset, config=config)
        stage = graph.stages[0][0]
        nodes = sum(1 for op in graph.ops if not isinstance(op, BarrierOp))
        layers = 1 + sum(1 for op in graph.ops if isinstance(op, BarrierOp))
        out.write(f"preset {args.preset}: one decode step ({stage}), {layers} layer(s), "
                  f"{nodes} commands as {nodes} ops"
                  + (", a barrier between consecutive layers\n" if layers > 1 else "\n"))
    elif args.synthetic is not None:
        if args.synthetic < 1:
            raise ValueError("--synthetic needs at least 1 op")
        graph = random_graph(random.Random(args.seed), args.synthetic, barriers=args.barriers)
    else:
        with open(args.graph, encoding="utf-8") as f:
            graph = graph_from_json(f.read())
    began = time.perf_counter()
    result = plan(graph, machine, max_cycles=args.max_cycles)
    took = time.perf_counter() - began
    out.write(result.summary() + "\n" if args.quiet else result.table())
    ops = sum(1 for e in result.entries if e.block is not None)
    out.write(f"planned {ops} ops in {took:.3f} s\n")
    if args.preset is not None:
        out.write(f"makespan / larger lower bound = {result.makespan} / "
                  f"{result.lower_bound} = {result.makespan / result.lower_bound:.3f}\n")
        out.write(model_note(machine) + "\n")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(result.to_json(graph))
    if args.gantt:
        write_gantt(result, machine, args.gantt)
    if args.commands:
        programs = [step for _, step in decode_steps(args.preset, config=config)]
        entries = command_list(programs, graph, result, origin=args.origin)
        data = encode_command_list(entries)
        with open(args.commands, "wb") as f:
            f.write(data)
        writes = sum(len(e.writes) for e in entries)
        out.write(f"command list: {len(entries)} entries, {writes} register writes, "
                  f"{len(data)} bytes (format {FORMAT_VERSION}) to {args.commands}\n")
    return result


def cli_main(argv=None):
    parser = argparse.ArgumentParser(prog="v4hw plan", description="DSTP planner")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        run(args)
    except (IRError, ValueError, OSError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        print(f"v4hw plan: {message}", file=sys.stderr)
        return 2
    return 0
