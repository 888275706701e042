"""The ``v4hw`` command line: Verilog, register maps, the demo and the regressions.

Thin glue: each command calls a function of ``hdl``, ``sim`` or ``golden``. Every bad
argument is one error line on standard error and exit status 2 (:mod:`sim.usage`),
found before any slow work (elaboration, a simulator build) starts; ``--help`` works at
every level. The blocks are those of :mod:`sim.blocks`.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from sim.usage import UsageError, check_output_file, one_line_errors

__all__ = ["main", "BLOCKS", "parse_params", "UsageError"]

REPO_ROOT = Path(__file__).resolve().parent.parent


def _registry():
    from sim.blocks import registry
    return registry()


class _Blocks(Mapping):
    """block name → (Verilog module name, parameter defaults, top factory), read from the
    descriptors of :mod:`sim.blocks` (the factory checks the parameters first)."""

    def __getitem__(self, block):
        desc = _registry()[block]
        return desc.verilog_name, desc.defaults, desc.elaborate

    def __iter__(self):
        return iter(_registry())

    def __len__(self):
        return len(_registry())


BLOCKS = _Blocks()


def parse_params(block, pairs, board=None):
    """``["P=8", ...]`` → ``{"P": 8}``, checked against the block's parameter names; the
    others at their defaults (for ``board``: the descriptor's board defaults first)."""
    desc = _registry()[block]
    defaults = desc.defaults
    params = desc.params_for(board)
    for pair in pairs or ():
        name, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(f"--param wants NAME=VALUE, not {pair!r}")
        if name not in defaults:
            raise UsageError(f"unknown parameter {name!r} for {block} "
                             f"(known: {', '.join(sorted(defaults))})")
        try:
            params[name] = int(value, 0)
        except ValueError:
            raise UsageError(f"parameter {name} wants an integer, not {value!r}") from None
    return params


def elaborate(block, params):
    """The block's standalone top, or UsageError for parameters it refuses."""
    try:
        return _registry()[block].elaborate(params)
    except (ValueError, TypeError) as error:
        raise UsageError(f"{block}: {error}") from None


def check_params(block, params):
    """UsageError for parameters the block refuses (before anything is built)."""
    try:
        _registry()[block].check(params)
    except (ValueError, TypeError) as error:
        raise UsageError(f"{block}: {error}") from None


def verilog_text(block, params, *, emit_src=True, progress=False):
    """The Verilog of the block's standalone top; ``progress``: say so on standard error
    first (the VA takes about a minute)."""
    from amaranth.back import verilog
    name = _registry()[block].verilog_name
    top = elaborate(block, params)
    if progress:
        print(f"v4hw: elaborating {block} ({_param_text(params)}) ...", file=sys.stderr,
              flush=True)
    return verilog.convert(top, name=name, emit_src=emit_src)


def cmd_verilog(args):
    params = parse_params(args.block, args.param)
    check_params(args.block, params)
    to_stdout = args.output == "-"
    if not to_stdout:
        check_output_file(args.output)
    text = verilog_text(args.block, params, progress=True)
    if to_stdout:
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0
    out = Path(args.output)
    try:
        out.write_text(text)
    except OSError as error:
        raise UsageError(f"cannot write {out} ({error.strerror})") from None
    name = _registry()[args.block].verilog_name
    print(f"wrote {out} (module {name}, {_param_text(params)})")
    return 0


def cmd_regmap(args, rest):
    from sim import regmap
    return regmap.main(rest)


def cmd_muon(args, rest):
    from sim import muon_analyze
    return muon_analyze.main(rest)


def cmd_bench(args, rest):
    from sim import muon_bench
    return muon_bench.main(rest)


def cmd_plan(args, rest):
    """The DSTP planner (:mod:`plan.cli`): its own arguments and --help."""
    from plan.cli import add_arguments, run
    from plan.errors import IRError
    parser = argparse.ArgumentParser(prog="v4hw plan", description="Plan a CircuitFlow graph "
                                     "(a JSON file, a synthetic one, or one decode step of a "
                                     "tile preset) with the DSTP planner; print the schedule.")
    add_arguments(parser)
    options = parser.parse_args(rest)
    for path in (options.json, options.gantt):
        if path:
            check_output_file(path)
    try:
        run(options)
    except (IRError, ValueError, OSError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UsageError(f"plan: {message}") from None
    return 0


def cmd_program(args):
    """One decode step of a tile preset as block commands: counts and predicted cycles."""
    from golden.program import summary
    try:
        text = summary(args.preset, position=args.position)
    except (ValueError, KeyError) as error:
        raise UsageError(f"program: {str(error).strip(chr(39))}") from None
    print(text)
    return 0


def cmd_golden(args):
    """One layer of a checkpoint in float64 and on the hardware-exact path."""
    from golden.checkpoint import layer_report
    if args.random is not None and args.random < 1:
        raise UsageError("golden layer: --random wants at least 1 token")
    tokens = args.tokens if args.tokens is not None else (
        args.random if args.random is not None else 64)
    try:
        text = layer_report(args.checkpoint, args.layer, tokens=tokens, mode=args.mode,
                            as_json=args.json)
    except (ValueError, OSError, KeyError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UsageError(f"golden layer: {message}") from None
    print(text)
    return 0


# The demo's two tiles run ~70 000 cycles: its VCD leaves out the inside of the
# systolic array and of the operand buffers (every PE, every buffer word), which would
# make it gigabytes.
DEMO_TRACE_EXCLUDE = ("*.core.array*", "*.core.buffers*")


def cmd_demo(args):
    """``v4hw demo [tile]``: a decode step through the tile; ``v4hw demo ma``: the MA's."""
    if args.what == "ma":
        return cmd_demo_ma(args)
    return cmd_demo_tile(args)


# The tile demo's VCD: the ports, the tile's own wires between its blocks (the NIs' and
# the mesh's flits, the MC's channels, the timebase), the control decoder and each block's
# register block and command status; the insides of the cores, the MC, the mesh and the
# NIs are left out. Most of what remains is the tile's wires, which trace_exclude cannot
# reach (they are the top's): about 1.5 kB of VCD a cycle.
DEMO_TILE_TRACE_EXCLUDE = ("*.ma.core*", "*.va.core*", "*.mc.core*", "*.mesh.*", "*.ni_ma.*",
                           "*.ni_va.*", "*.ni_mem.*", "*.ni_migrate.*", "*.migrate.*",
                           "*.bridge*")
DEMO_TILE_GTKW_GROUPS = [
    ("clock, reset, interrupt", ["ap_clk", "ap_rst_n", "interrupt"]),
    ("s_axi_control", ["s_axi_control_*"]),
    ("m_axi_gmem read", ["m_axi_gmem_ar*", "m_axi_gmem_r*"]),
    ("m_axi_gmem write", ["m_axi_gmem_aw*", "m_axi_gmem_w*", "m_axi_gmem_b*"]),
    ("control", ["control.decoder.*", "control.regs.irq_source*"]),
    ("MA", ["ma.status.busy", "ma.status.done", "ma.status.error"]),
    ("VA", ["va.status.busy", "va.status.done", "va.status.error"]),
    ("NIs (flits into and out of the mesh)", ["inject__*", "eject__*"]),
]


def cmd_demo_tile(args):
    """Generate the small tile, run one decode step of a tile preset through it under
    Verilator with the host runtime, print the per-stage table and the verdict."""
    from hdl.tile.top import SMALL
    from sim import tile_build as tile
    from sim.runner import CocotbTestFailure, SimulationError, run_cocotb

    if args.limit < 0:
        raise UsageError(f"demo: --limit must be >= 0, not {args.limit}")
    started = time.monotonic()
    print(f"v4hw demo: generating v4hw_tile (MA P={SMALL['p']}, VA L={SMALL['lanes']}, "
          f"DATA_WIDTH={SMALL['data_width']}, {SMALL['cols']}x{SMALL['rows']} mesh; the "
          "tests' configuration)", flush=True)
    text = tile.tile_verilog()
    waves = not args.no_waves
    print(f"v4hw demo: one decode step of {args.preset!r} through the tile under Verilator "
          f"(the build is cached; a first one takes minutes{', with waves' if waves else ''})",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        env = {"V4HW_TS_PRESET": args.preset, "V4HW_TS_LIMIT": str(args.limit),
               "V4HW_TS_REPORT": str(report), "V4HW_TS_P": str(SMALL["p"]),
               "V4HW_TS_L": str(SMALL["lanes"])}
        failure, results = None, None
        try:
            results = run_cocotb(
                "verilator", text, tile.TOPLEVEL, "sim.tile_demo_tb",
                config_name=tile.CONFIG_NAME, testcase="decode_step", waves=waves,
                trace_exclude=DEMO_TILE_TRACE_EXCLUDE if waves else (),
                gtkw_groups=DEMO_TILE_GTKW_GROUPS, extra_env=env, **tile.VERILATOR)
        except (CocotbTestFailure, SimulationError, ValueError) as error:   # ValueError: .gtkw
            failure = error
        out = json.loads(report.read_text()) if report.exists() else None
    if out is None:
        print(f"v4hw demo: FAILED: {str(failure).splitlines()[0] if failure else 'no report'}",
              file=sys.stderr)
        return 1
    fig = out["figures"]
    print()
    print(out["stages"])
    print()
    print(out["by_opcode"])
    print()
    print(out["summary"])
    print(f"\nstep: {fig['rtl_ops']} of {fig['commands']} ops on the RTL ({fig['starts']} STARTs), "
          f"{fig['cycles']} cycles START to CTR summed ({fig['predicted']} predicted for the "
          f"standalone blocks, tile / standalone {fig['cycles'] / max(fig['predicted'], 1):.3f}); "
          f"{fig['step_cycles']} cycles in all with the host's register accesses")
    moved = fig["gmem_beats"] * fig["bus_bytes"]
    print(f"moved: {fig['gmem_beats']} m_axi_gmem beats ({moved} bytes at {fig['bus_bytes']} bytes "
          f"a cycle) in {fig['cycles']} command cycles: beats / cycles = {fig['roofline']:.3f}")
    problem = (print_roofline(args.preset, fig, args.limit)
               if failure is None and fig["bit_exact"] else None)
    verdict = "bit-exact" if fig["bit_exact"] and failure is None else "MISMATCH"
    print(f"verdict: {verdict} (every tensor each RTL command wrote, and each layer's whole "
          f"memory, against the golden interpreter)")
    if results is not None:
        run_dir = Path(results).parent
        vcd, gtkw = sorted(run_dir.glob("*.vcd")), sorted(run_dir.glob("*.gtkw"))
        if vcd and gtkw:
            print(f"waves: {vcd[0]} ({vcd[0].stat().st_size / 1e6:.0f} MB)\ngtkw:  {gtkw[0]}\n"
                  f"open with: gtkwave {vcd[0]} {gtkw[0]}")
    print(f"wall time: {time.monotonic() - started:.0f} s")
    if failure is not None or not fig["bit_exact"]:
        message = fig["failure"] or str(failure).splitlines()[0]
        print(f"v4hw demo: FAILED: {message.splitlines()[0]}", file=sys.stderr)
        return 1
    if problem:
        print(f"v4hw demo: FAILED: {problem}", file=sys.stderr)
        return 1
    return 0


def print_roofline(preset, fig, limit):
    """Print the demo step's roofline ratio: the bytes it must move
    (:func:`golden.roofline.step_traffic` of the program the bench ran: the same
    generators on the tile's configuration, whose memory latency changes no command; cut
    to ``limit`` commands) over the bus's bytes a cycle, against its measured cycles.
    Returns what is wrong (another program than the run's, or a run that moved fewer
    bytes than it must), else None."""
    from golden.program import BlockConfig, decode_step_parts
    from golden.roofline import step_traffic
    from hdl.tile.top import SMALL

    bus = fig["bus_bytes"]
    config = BlockConfig(p=SMALL["p"], lanes=SMALL["lanes"], bus_bits=8 * bus)
    builder, steps = decode_step_parts(preset, config=config)
    total = sum(len(step.commands) for _, step, _ in steps)
    if fig["commands"] != (min(limit, total) if limit else total):
        return (f"the run had {fig['commands']} commands and the {preset!r} step {total}: "
                "the roofline's program is not the run's")
    need = step_traffic(builder, steps, limit or None)
    bound, moved = need.bound_cycles(bus), fig["gmem_beats"] * bus
    cycles, step_cycles = max(fig["cycles"], 1), max(fig["step_cycles"], 1)
    print(f"roofline: the step must move {need.required} bytes ({need.read_bytes} read once, "
          f"{need.written_bytes} written once; golden/roofline.py), {bound} cycles at {bus} bytes "
          f"a cycle: roofline ratio {bound} / {fig['cycles']} command cycles = "
          f"{bound / cycles:.3f} ({bound / step_cycles:.3f} of the {fig['step_cycles']} step "
          f"cycles); it moved {moved / max(need.required, 1):.2f}× the bytes it must")
    if fig["rtl_ops"] == fig["commands"] and moved < need.required:
        return (f"the step moved {moved} bytes, fewer than the {need.required} it must move: "
                "the roofline's count is wrong")
    return None


def cmd_demo_ma(args):
    """Generate the MA, run a 128³ int8 and a bf16 tile under Verilator, check both."""
    from sim.runner import CocotbTestFailure, SimulationError, run_cocotb
    params = {"P": 8, "DATA_WIDTH": 128}
    print("v4hw demo: generating v4hw_ma (P=8, DATA_WIDTH=128)")
    # Without source locations the Verilog (and so the cached build) only changes when
    # the hardware does.
    text = verilog_text("ma", params, emit_src=False)
    with tempfile.TemporaryDirectory() as tmp:
        summary_path = Path(tmp) / "summary.json"
        failure = None
        try:
            results = run_cocotb(
                "verilator", text, "v4hw_ma", "sim.ma_demo_tb",
                config_name="demo-ma-p8-dw128", waves=not args.no_waves,
                trace_exclude=DEMO_TRACE_EXCLUDE, gtkw_groups=_registry()["ma"].load_gtkw_groups(),
                extra_env={"V4HW_DEMO_SUMMARY": str(summary_path)})
        except (CocotbTestFailure, SimulationError) as error:
            failure = error
        # The summary is written even when a check fails.
        runs = json.loads(summary_path.read_text()) if summary_path.exists() else []
    print()
    print(f"{'mode':<6}{'M×K×N':>14}{'cycles':>10}{'MAC util.':>11}  golden")
    for run in runs:
        shape = f"{run['m']}×{run['k']}×{run['n']}"
        if run["cycles"] is None:
            print(f"{run['mode']:<6}{shape:>14}{'-':>10}{'-':>11}  did not finish")
            continue
        print(f"{run['mode']:<6}{shape:>14}{run['cycles']:>10}"
              f"{100 * run['utilization']:>10.1f}%  {'match' if run['match'] else 'MISMATCH'}")
    if failure is not None:
        print(f"v4hw demo: FAILED: {failure}", file=sys.stderr)
        return 1
    print(f"\nP={params['P']}, {params['DATA_WIDTH']}-bit bus, memory latency "
          f"{runs[0]['latency']} cycles; results: {results}")
    run_dir = Path(results).parent
    vcd, gtkw = sorted(run_dir.glob("*.vcd")), sorted(run_dir.glob("*.gtkw"))
    if vcd and gtkw:
        print(f"waves: {vcd[0]}\ngtkw:  {gtkw[0]}\nopen with: gtkwave {vcd[0]} {gtkw[0]}")
    return 0 if all(run["match"] for run in runs) else 1


def _print_resources(label, res):
    print(f"{label}: LUT {res.lut:g}  FF {res.ff:g}  DSP {res.dsp:g}  BRAM {res.bram:g}")


def cmd_synth(args):
    """yosys synthesis only: resource estimates for one block and parameter set."""
    from sim import fpga
    params = parse_params(args.block, args.param)
    check_params(args.block, params)
    name = _registry()[args.block].verilog_name
    out = fpga.run_dir(args.block, params, args.target)
    print(f"v4hw synth: {name} ({_param_text(params)}) for {args.target}, in {out}",
          flush=True)
    text = verilog_text(args.block, params, emit_src=False, progress=True)
    try:
        res = fpga.synthesize(text, name, out, args.target)
    except fpga.FpgaToolError as error:
        print(f"v4hw synth: FAILED: {error}", file=sys.stderr)
        return 1
    _print_resources(f"{name} {args.target}", res)
    return 0


def cmd_build(args):
    """Bitstream for a board: the block in the board harness, place and route, report."""
    from sim import fpga
    params = parse_params(args.block, args.param, args.board)
    if args.freq not in fpga.board_clocks(args.board):
        raise UsageError(f"--freq must be one of {sorted(fpga.board_clocks(args.board))} "
                         f"MHz on {args.board}, not {args.freq}")
    top = elaborate(args.block, params)
    from hdl.board.harness import is_kernel_port
    extra = sorted(name for name in top.signature.members if not is_kernel_port(name))
    if extra:
        top._MustUse__silence = True          # refused on purpose: never elaborated
        raise UsageError(f"{args.block} has ports beyond the kernel interface ({extra[0]}, ...) "
                         "and does not stand alone on a board; `v4hw synth` estimates it")
    out = fpga.run_dir(args.block, params, args.board)
    name = _registry()[args.block].verilog_name
    print(f"v4hw build: {name} ({_param_text(params)}) for {args.board} at {args.freq} MHz, "
          f"in {out} (place and route takes minutes)", flush=True)
    try:
        report = fpga.build_bitstream(top, params["DATA_WIDTH"], out, args.board,
                                      freq_mhz=args.freq, seed=args.seed)
    except fpga.FpgaToolError as error:
        print(f"v4hw build: FAILED: {error}", file=sys.stderr)
        return 1
    verdict = "met" if report.met else "NOT MET"
    print(f"Fmax {report.fmax:.2f} MHz, constraint {report.constraint:.2f} MHz: {verdict}")
    for kind in ("lut", "ff", "dsp", "bram"):
        used, avail = getattr(report, kind), getattr(report, f"{kind}_available")
        print(f"  {kind.upper():<5}{used:>7} / {avail:<7} ({100 * used / avail:.1f} %)")
    print(f"bitstream: {report.bitstream}")
    (out / "v4hw-report.json").write_text(fpga.report_json(report) + "\n")
    return 0 if report.met else 1


def _param_text(params):
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))


def cmd_sim(args, rest):
    """Run the cocotb regressions (pytest); extra arguments go to pytest."""
    command = [sys.executable, "-m", "pytest", "-m", "cocotb", *rest]
    return subprocess.call(command, cwd=REPO_ROOT)


def cmd_waves(args, rest):
    """Rerun one test with waveform recording; the runner prints the VCD/.gtkw paths.

    Refused before it runs when the node id names no test that runs a cocotb simulation
    (pytest marker ``cocotb``); an error too when the test ran and recorded no waves."""
    path = args.test.split("::", 1)[0]
    if not (REPO_ROOT / path).exists():
        raise UsageError(f"waves: no test file {path} (node ids are relative to {REPO_ROOT})")
    pytest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    print(f"v4hw waves: collecting {args.test} ...", file=sys.stderr, flush=True)
    collect = subprocess.run([*pytest, "--collect-only", "-q", "-m", "cocotb", args.test, *rest],
                             cwd=REPO_ROOT, capture_output=True, text=True)
    if collect.returncode == 5:                   # pytest: no test collected
        raise UsageError(f"waves: {args.test} runs no cocotb simulation (no test marked "
                         "cocotb), so there are no waves to record")
    if collect.returncode != 0:
        lines = (collect.stdout + collect.stderr).strip().splitlines() or ["(no output)"]
        errors = [line for line in lines if line.startswith(("ERROR", "E "))]
        raise UsageError(f"waves: pytest cannot collect {args.test}: {(errors or lines)[-1]}")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "waves.log"
        env = dict(os.environ, WAVES="1", V4HW_WAVES_LOG=str(log))
        status = subprocess.call([*pytest, "-s", "-m", "cocotb", args.test, *rest],
                                 cwd=REPO_ROOT, env=env)
        recorded = log.read_text().split() if log.exists() else []
    if status == 0 and not recorded:
        print(f"v4hw: error: waves: {args.test} ran but no simulation recorded waves "
              "(skipped?)", file=sys.stderr)
        return 1
    return status


# Commands whose arguments go, untouched, to another tool's own parser (which prints its
# own --help); the value says where.
PASS_THROUGH = {"regmap": cmd_regmap, "sim": cmd_sim, "plan": cmd_plan}


def build_parser():
    parser = argparse.ArgumentParser(
        prog="v4hw", description="The v4hw command line: Verilog, register maps, the demo "
                                 "and the regressions.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    blocks = sorted(BLOCKS)

    p = sub.add_parser("verilog", help="write a block's standalone top as Verilog",
                       description="Write a block's standalone top as Verilog.")
    p.add_argument("block", choices=blocks)
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="a block parameter (repeatable), e.g. P=8, DATA_WIDTH=128")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the Verilog file; - writes to standard output")

    sub.add_parser("regmap", add_help=False,
                   help="register maps: `v4hw regmap BLOCK --md|--c|--json|--html|--xml`, "
                        "`v4hw regmap --update`")

    p = sub.add_parser("synth", help="yosys synthesis only: LUT/FF/DSP/BRAM estimates",
                       description="yosys synthesis only: LUT/FF/DSP/BRAM estimates.")
    p.add_argument("block", choices=blocks)
    p.add_argument("--target", required=True, choices=("ecp5", "xcup"),
                   help="ecp5 (Lattice ECP5) or xcup (AMD UltraScale+, e.g. the Alveo U280)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE")

    p = sub.add_parser("build", help="bitstream for a board (yosys, nextpnr, ecppack), "
                                     "with Fmax and resources",
                       description="Bitstream for a board (yosys, nextpnr, ecppack), with "
                                   "Fmax and resources.")
    p.add_argument("block", choices=blocks)
    p.add_argument("--board", required=True, choices=("ulx3s-85f",))
    p.add_argument("--param", action="append", metavar="NAME=VALUE")
    p.add_argument("--freq", type=int, default=100, metavar="MHZ",
                   help="clock of the design (default 100)")
    p.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")

    p = sub.add_parser("demo", help="a decode step of deepseek-v4 through the tile (Verilator); "
                                    "`demo ma`: the MA on 128³ int8 and bf16 tiles",
                       description="`v4hw demo` (or `demo tile`): one decode step of a tiny "
                                   "preset through v4hw_tile under Verilator, bit for bit "
                                   "against the golden interpreter. `v4hw demo ma`: the MA on a "
                                   "128³ int8 and a bf16 tile.")
    p.add_argument("what", nargs="?", choices=("tile", "ma"), default="tile",
                   help="tile (default) or ma")
    p.add_argument("--preset", choices=("deepseek-v4", "notes"), default="deepseek-v4",
                   help="tile preset of the decode step (default deepseek-v4, 3 layers)")
    p.add_argument("--limit", type=int, default=0, metavar="N",
                   help="run only the first N commands of the step (0: all)")
    p.add_argument("--no-waves", action="store_true", help="record no VCD / .gtkw")

    p = sub.add_parser("muon", help="Muon tools: `v4hw muon analyze CAPTURE ...`",
                       description="Muon tools.")
    tools = p.add_subparsers(dest="tool", required=True, metavar="TOOL")
    tools.add_parser("analyze", add_help=False,
                     help="read a sniffer capture: `v4hw muon analyze CAPTURE [--show-rbr] "
                          "[--show-conflict] [--stats] [--distribution]` (--help: all)")
    p = sub.add_parser("bench", help="performance benches: `v4hw bench muon ...`",
                       description="Performance benches.")
    tools = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    tools.add_parser("muon", add_help=False,
                     help="Muon NoC sweeps under Verilator, CSV and PNG: `v4hw bench muon "
                          "[--cols C] [--rows R] [--quick] [--out DIR]` (--help: all)")
    sub.add_parser("sim", add_help=False,
                   help="run the cocotb regressions (arguments go to pytest)")
    sub.add_parser("plan", add_help=False,
                   help="the DSTP planner: `v4hw plan --preset deepseek-v4|notes [--json OUT] "
                        "[--gantt PNG]`, or a graph file (--help: all)")
    p = sub.add_parser("program", help="one decode step of a tile preset as block commands",
                       description="One decode step of a tile preset as MA / VA commands: "
                                   "their counts per layer, block and opcode, and the MA's "
                                   "predicted cycles.")
    p.add_argument("--preset", required=True, choices=("deepseek-v4", "notes"))
    p.add_argument("--summary", action="store_true",
                   help="print the summary (the only output so far; the default)")
    p.add_argument("--position", type=int, metavar="T",
                   help="the decode position (default: the preset's own)")
    p = sub.add_parser("golden", help="golden-model tools: `v4hw golden layer --checkpoint "
                                      "DIR --layer N ...`",
                       description="Golden-model tools.")
    tools = p.add_subparsers(dest="tool", required=True, metavar="TOOL")
    q = tools.add_parser("layer", help="one layer of a checkpoint in float64 and on the "
                                       "hardware-exact path: the per-stage error table",
                         description="One layer of a checkpoint (config.json and safetensors) "
                                     "in float64 and on the hardware-exact path: the per-stage "
                                     "error table, expert-selection agreement, peak memory.")
    q.add_argument("--checkpoint", required=True, metavar="DIR")
    q.add_argument("--layer", required=True, type=int, metavar="N")
    tokens = q.add_mutually_exclusive_group()
    tokens.add_argument("--tokens", metavar="FILE",
                        help="token ids: .npy, a JSON list, or integers separated by spaces")
    tokens.add_argument("--random", type=int, metavar="T",
                        help="T random token ids (the default: 64)")
    q.add_argument("--mode", choices=("bf16", "int8"), default="bf16",
                   help="the MA's mode on the hardware-exact path (default bf16)")
    q.add_argument("--json", action="store_true", help="JSON instead of text")
    p = sub.add_parser("waves", help="rerun one pytest test with waveforms recorded",
                       description="Rerun one cocotb test with waveforms recorded "
                                   "(further arguments go to pytest).")
    p.add_argument("test", help="pytest node id, e.g. tests/test_ma_cocotb.py::test_x")
    return parser


def _run(argv):
    if argv and argv[0] in PASS_THROUGH:
        return PASS_THROUGH[argv[0]](None, argv[1:])
    args, rest = build_parser().parse_known_args(argv)
    if args.command == "muon":
        return cmd_muon(args, rest)
    if args.command == "bench":
        return cmd_bench(args, rest)
    if args.command == "waves":
        return cmd_waves(args, rest)
    if rest:
        raise UsageError(f"{args.command}: unrecognized arguments: {' '.join(rest)}")
    return {"verilog": cmd_verilog, "demo": cmd_demo, "synth": cmd_synth,
            "build": cmd_build, "program": cmd_program, "golden": cmd_golden}[args.command](args)


def main(argv=None):
    """Entry point; returns the exit status (2 and one error line for a bad command line;
    0 after ``--help``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        with one_line_errors():
            return _run(argv)
    except UsageError as error:
        print(f"v4hw: error: {error}", file=sys.stderr)
        return 2
    except SystemExit as done:                    # --help (and tools that exit)
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)


if __name__ == "__main__":
    sys.exit(main())
