"""``plan.cli_main(argv)``: plan a CircuitFlow graph from a JSON file, a synthetic one, or
one decode step of a tile preset lowered from its op program (:mod:`plan.lower`), and
print the schedule. Every user error is one line on stderr and exit status 2."""

import argparse
import random
import sys
import time

from golden.program import BlockConfig, decode_steps
from spec.sequencer import VERSION as FORMAT_VERSION

from .commands import command_list, encode_command_list
from .dstp import DEFAULT_MAX_CYCLES, plan
from .errors import IRError
from .gantt import write_gantt
from .ir import BarrierOp, graph_from_json
from .lower import VA_MODEL_NOTE, lower_decode
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


def run(args, out=None):
    """Plan as ``args`` say; raises ValueError / OSError on a user error."""
    out = sys.stdout if out is None else out
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
        ma = machine.models["ma"]
        out.write(f"MA cycles: golden/ma_latency.py (P={ma.p}, bus {ma.data_width} bits, "
                  f"memory latency {ma.memory_latency} cycles, operands taken as dense); "
                  f"{VA_MODEL_NOTE}\n")
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
