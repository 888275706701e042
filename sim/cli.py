"""The ``v4hw`` command line: Verilog, register maps, the demo and the regressions.

Thin glue: each command calls a function of ``hdl``, ``sim`` or ``golden`` and turns a
bad argument into one error line and exit status 2.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = ["main", "BLOCKS", "parse_params"]

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


class UsageError(Exception):
    """A bad command line: reported as one line, exit status 2."""


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


def verilog_text(block, params, *, emit_src=True):
    from amaranth.back import verilog
    name = _registry()[block].verilog_name
    return verilog.convert(elaborate(block, params), name=name, emit_src=emit_src)


def cmd_verilog(args):
    params = parse_params(args.block, args.param)
    text = verilog_text(args.block, params)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    name = _registry()[args.block].verilog_name
    print(f"wrote {out} (module {name}, "
          + ", ".join(f"{k}={v}" for k, v in sorted(params.items())) + ")")
    return 0


def cmd_regmap(args, rest):
    from sim import regmap
    return regmap.main(rest)


# The demo's two tiles run ~70 000 cycles: its VCD leaves out the inside of the
# systolic array and of the operand buffers (every PE, every buffer word), which would
# make it gigabytes.
DEMO_TRACE_EXCLUDE = ("*.core.array*", "*.core.buffers*")


def cmd_demo(args):
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
    name = _registry()[args.block].verilog_name
    text = verilog_text(args.block, params, emit_src=False)
    out = fpga.run_dir(args.block, params, args.target)
    print(f"v4hw synth: {name} ({_param_text(params)}) for {args.target}, in {out}")
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
    print(f"v4hw build: {_registry()[args.block].verilog_name} ({_param_text(params)}) for {args.board} "
          f"at {args.freq} MHz, in {out} (place and route takes minutes)")
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
    """Rerun one test with waveform recording; the runner prints the VCD/.gtkw paths."""
    env = dict(os.environ, WAVES="1")
    command = [sys.executable, "-m", "pytest", "-s", args.test, *rest]
    return subprocess.call(command, cwd=REPO_ROOT, env=env)


def build_parser():
    parser = argparse.ArgumentParser(prog="v4hw", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("verilog", help="write a block's standalone top as Verilog")
    p.add_argument("block", choices=sorted(BLOCKS))
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="a block parameter (repeatable), e.g. P=8, DATA_WIDTH=128")
    p.add_argument("-o", "--output", required=True, metavar="FILE")

    sub.add_parser("regmap", add_help=False,
                   help="register maps: `v4hw regmap BLOCK --md|--c|--json|--html`, "
                        "`v4hw regmap --update`")

    p = sub.add_parser("synth", help="yosys synthesis only: LUT/FF/DSP/BRAM estimates")
    p.add_argument("block", choices=sorted(BLOCKS))
    p.add_argument("--target", required=True, choices=("ecp5", "xcup"),
                   help="ecp5 (Lattice ECP5) or xcup (AMD UltraScale+, e.g. the Alveo U280)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE")

    p = sub.add_parser("build", help="bitstream for a board (yosys, nextpnr, ecppack), "
                                     "with Fmax and resources")
    p.add_argument("block", choices=sorted(BLOCKS))
    p.add_argument("--board", required=True, choices=("ulx3s-85f",))
    p.add_argument("--param", action="append", metavar="NAME=VALUE")
    p.add_argument("--freq", type=int, default=100, metavar="MHZ",
                   help="clock of the design (default 100)")
    p.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")

    p = sub.add_parser("demo", help="run the MA on a 128³ int8 and bf16 tile (Verilator)")
    p.add_argument("--no-waves", action="store_true", help="record no VCD / .gtkw")

    sub.add_parser("muon", add_help=False,
                   help="Muon tools: `v4hw muon analyze CAPTURE [--show-rbr] [--show-conflict] "
                        "[--stats] [--distribution]`")
    sub.add_parser("bench", add_help=False,
                   help="performance benches: `v4hw bench muon [--cols C] [--rows R] "
                        "[--quick] [--out DIR]` (Verilator; CSV and PNG)")
    sub.add_parser("sim", add_help=False,
                   help="run the cocotb regressions (arguments go to pytest)")
    p = sub.add_parser("waves", help="rerun one pytest test with waveforms recorded")
    p.add_argument("test", help="pytest node id, e.g. tests/test_ma_cocotb.py::test_x")
    return parser


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv[:1] == ["muon"]:
        if argv[1:2] != ["analyze"]:
            print("v4hw: error: usage: v4hw muon analyze CAPTURE [options]", file=sys.stderr)
            return 2
        from sim import muon_analyze
        return muon_analyze.main(argv[2:])
    if argv[:1] == ["bench"]:
        if argv[1:2] != ["muon"]:
            print("v4hw: error: usage: v4hw bench muon [options]", file=sys.stderr)
            return 2
        from sim import muon_bench
        return muon_bench.main(argv[2:])
    # regmap and sim pass their arguments through untouched.
    if argv and argv[0] in ("regmap", "sim"):
        handler = {"regmap": cmd_regmap, "sim": cmd_sim}[argv[0]]
        return handler(None, argv[1:])
    args, rest = parser.parse_known_args(argv)
    try:
        if args.command == "waves":
            return cmd_waves(args, rest)
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return {"verilog": cmd_verilog, "demo": cmd_demo, "synth": cmd_synth,
                "build": cmd_build}[args.command](args)
    except UsageError as error:
        print(f"v4hw: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
