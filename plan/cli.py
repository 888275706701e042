"""``plan.cli_main(argv)``: plan a CircuitFlow graph from a JSON file, or a synthetic one,
and print the schedule. Every user error is one line on stderr and exit status 2."""

import argparse
import random
import sys
import time

from .dstp import DEFAULT_MAX_CYCLES, plan
from .errors import IRError
from .gantt import write_gantt
from .ir import graph_from_json
from .machine import Machine
from .synthetic import random_graph

__all__ = ["cli_main", "add_arguments", "run"]


def add_arguments(parser):
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("graph", nargs="?", help="a CircuitFlow graph (JSON, graph_to_json)")
    source.add_argument("--synthetic", type=int, metavar="N",
                        help="plan a random graph of N ops instead")
    parser.add_argument("--seed", type=int, default=0, help="seed of --synthetic (default 0)")
    parser.add_argument("--barriers", type=int, default=0, help="barriers in --synthetic")
    parser.add_argument("--max-cycles", type=int, default=DEFAULT_MAX_CYCLES,
                        help=f"planning horizon in cycles (default {DEFAULT_MAX_CYCLES})")
    parser.add_argument("--json", metavar="OUT", help="write the plan (and stamped graph) here")
    parser.add_argument("--gantt", metavar="PNG", help="write a Gantt chart (one row per "
                        "block, Muon link and MC channel) here")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")


def run(args, out=None):
    """Plan as ``args`` say; raises ValueError / OSError on a user error."""
    out = sys.stdout if out is None else out
    if args.synthetic is not None:
        if args.synthetic < 1:
            raise ValueError("--synthetic needs at least 1 op")
        graph = random_graph(random.Random(args.seed), args.synthetic, barriers=args.barriers)
    else:
        with open(args.graph, encoding="utf-8") as f:
            graph = graph_from_json(f.read())
    began = time.perf_counter()
    machine = Machine()
    result = plan(graph, machine, max_cycles=args.max_cycles)
    took = time.perf_counter() - began
    out.write(result.summary() + "\n" if args.quiet else result.table())
    ops = sum(1 for e in result.entries if e.block is not None)
    out.write(f"planned {ops} ops in {took:.3f} s\n")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(result.to_json(graph))
    if args.gantt:
        write_gantt(result, machine, args.gantt)
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
