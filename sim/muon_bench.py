"""``v4hw bench muon``: the Muon NoC's performance figures, BookSim's way, under Verilator.

Builds ``v4hw_muon_bench`` (``sim.muon_traffic``: the ``v4hw_muon`` top with RTL traffic
sources and latency sinks on every node), runs ``sim.muon_bench_tb`` on it and writes,
into ``--out`` (default ``build/bench/muon-<cols>x<rows>``):

* ``zero_load.csv``   head latency per hop count, one packet in the mesh at a time;
* ``load_latency.csv``  per traffic pattern and offered load (flits/node/cycle): accepted
  throughput, average and greatest packet latency (creation → tail ejection), packets
  refused by full source queues, whether the measured packets all drained;
* ``jitter.csv``      a reserved flow's least and greatest latency per best-effort load;
* ``grant.csv``       reservation request → answer cycles per table occupancy;
* ``latency.png``, ``throughput.png``, ``jitter.png``: the curves;
* ``bench.json``      everything the testbench measured.

It prints a summary: zero-load latency per hop, saturation throughput (accepted at full
offered load, uniform random) beside BookSim2's 0.76 flits/node/cycle for a 4×4 mesh
with 2 VCs of 8 flits, the reserved flow's min = max, and request → grant cycles.
"""

import argparse
import csv
import json
import statistics
import sys
import tempfile
from pathlib import Path

from amaranth.back import verilog as amaranth_verilog

from sim.muon_traffic import QUEUE, MuonBenchTop

__all__ = ["main", "default_plan", "run", "BOOKSIM_SATURATION"]

TOPLEVEL = "v4hw_muon_bench"
BOOKSIM_SATURATION = 0.76   # BookSim2, 4×4 mesh, uniform random, 2 VCs × 8 flits


def default_plan(*, quick=False, seed=1, length=4):
    """The sweep: loads in flits/node/cycle, phase lengths in cycles."""
    steps = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    return {
        "seed": seed, "length": length,
        "warmup": 300 if quick else 1000, "measure": 600 if quick else 3000,
        "drain": 5000 if quick else 20000, "empty": 5000 if quick else 20000,
        "hotspot": [0, 0], "hot_frac": 0.2,
        "zero_load": True, "grant": True,
        "sweep": ({"uniform": [0.3]} if quick else
                  {"uniform": steps, "transpose": steps[:8], "hotspot": steps[:8]}),
        "jitter_loads": [0.5] if quick else [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0],
        "rsv_count": 8 if quick else 20, "rsv_period": 4 * length,
    }


def bench_verilog(cols, rows, length):
    return amaranth_verilog.convert(MuonBenchTop(cols, rows, length=length), name=TOPLEVEL,
                                    emit_src=False)


def run(cols, rows, plan, *, timeout_s=None):
    """Build (cached), simulate the plan; returns the testbench's results (a dict)."""
    from sim.runner import run_cocotb
    text = bench_verilog(cols, rows, plan["length"])
    with tempfile.TemporaryDirectory() as tmp:
        plan_path, out_path = Path(tmp) / "plan.json", Path(tmp) / "out.json"
        plan_path.write_text(json.dumps(plan))
        run_cocotb("verilator", text, TOPLEVEL, "sim.muon_bench_tb",
                   config_name=f"muon-bench-{cols}x{rows}-l{plan['length']}",
                   timeout_s=timeout_s, verilator_public="top", verilator_opt="-O1",
                   extra_env={"V4HW_MUON_COLS": str(cols), "V4HW_MUON_ROWS": str(rows),
                              "V4HW_MUON_BENCH_PLAN": str(plan_path),
                              "V4HW_MUON_BENCH_OUT": str(out_path)})
        return json.loads(out_path.read_text())


def zero_load_by_hop(results):
    by_hop = {}
    for row in results["zero_load"]:
        by_hop.setdefault(row["hops"], []).append(row["latency"])
    return {h: (len(v), min(v), max(v), statistics.mean(v)) for h, v in sorted(by_hop.items())}


def per_hop_slope(by_hop):
    """Least-squares cycles per hop of the head's zero-load latency."""
    xs = [h for h, (n, *_rest) in by_hop.items() for _ in range(n)]
    ys = [lat for h, (n, lo, hi, mean) in by_hop.items() for lat in [mean] * n]
    return statistics.linear_regression(xs, ys).slope if len(set(xs)) > 1 else None


def saturation(results):
    """The uniform point of the highest offered load (its accepted throughput is the
    saturation throughput when that load is 1.0), and the first offered load whose
    source queues refused packets."""
    uniform = [p for p in results["sweep"] if p["pattern"] == "uniform"]
    if not uniform:
        return None, None
    top = max(uniform, key=lambda p: p["offered"])
    refusing = [p["offered"] for p in uniform if p["refused"]]
    return top, (min(refusing) if refusing else None)


def _write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def write_outputs(results, out):
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(results, indent=1) + "\n")
    by_hop = zero_load_by_hop(results)
    _write_csv(out / "zero_load.csv", ["hops", "pairs", "min", "max", "mean"],
               [(h, n, lo, hi, f"{mean:.2f}") for h, (n, lo, hi, mean) in by_hop.items()])
    _write_csv(out / "load_latency.csv",
               ["pattern", "offered", "accepted", "latency_avg", "latency_max",
                "zero_load_slack_min", "created", "delivered", "refused", "drained"],
               [(p["pattern"], p["offered"], f"{p['accepted']:.4f}",
                 "" if p["latency_avg"] is None else f"{p['latency_avg']:.2f}",
                 p["latency_max"], p["slack_min"], p["created"], p["delivered"],
                 p["refused"], p["drained"]) for p in results["sweep"]])
    _write_csv(out / "jitter.csv",
               ["be_offered", "sent", "received", "late", "latency_min", "latency_max",
                "jitter"],
               [(j["offered"], j["sent"], j["received"], j["late"], j["latency_min"],
                 j["latency_max"], j["latency_max"] - j["latency_min"])
                for j in results["jitter"]])
    _write_csv(out / "grant.csv", ["slots_taken", "case", "granted", "cycles"],
               [(g["slots_taken"], g["case"], g["granted"], g["cycles"])
                for g in results["grant"]])
    _plots(results, out)


def _plots(results, out):
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    size = f"{results['cols']}×{results['rows']}"
    fig, ax = plt.subplots(figsize=(6, 4))
    for pattern in ("uniform", "transpose", "hotspot"):
        pts = [p for p in results["sweep"] if p["pattern"] == pattern and p["latency_avg"]]
        if pts:
            ax.plot([p["offered"] for p in pts], [p["latency_avg"] for p in pts], "o-",
                    label=pattern)
    ax.set_xlabel("offered load (flits/node/cycle)")
    ax.set_ylabel("average packet latency (cycles)")
    ax.set_title(f"Muon {size}: latency vs offered load "
                 f"(source queues of {QUEUE} packets)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "latency.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for pattern in ("uniform", "transpose", "hotspot"):
        pts = [p for p in results["sweep"] if p["pattern"] == pattern]
        if pts:
            ax.plot([p["offered"] for p in pts], [p["accepted"] for p in pts], "o-",
                    label=pattern)
    ax.axhline(BOOKSIM_SATURATION, color="gray", ls="--",
               label="BookSim2 uniform, 2 VCs × 8 flits")
    ax.set_xlabel("offered load (flits/node/cycle)")
    ax.set_ylabel("accepted throughput (flits/node/cycle)")
    ax.set_title(f"Muon {size}: throughput")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "throughput.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    jit = results["jitter"]
    if jit:
        ax.plot([j["offered"] for j in jit], [j["latency_min"] for j in jit], "v-", label="min")
        ax.plot([j["offered"] for j in jit], [j["latency_max"] for j in jit], "^--",
                label="max")
    ax.set_xlabel("best-effort offered load (flits/node/cycle)")
    ax.set_ylabel("reserved packet head latency (cycles)")
    ax.set_title(f"Muon {size}: reserved flow corner to corner")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "jitter.png", dpi=120)
    plt.close(fig)


def summary(results):
    lines = []
    plan = results["plan"]
    by_hop = zero_load_by_hop(results)
    if by_hop:
        lines.append("zero-load head latency (injection → ejection port), cycles per hop count:")
        lines.append("  " + "  ".join(f"{h}:{lo}" + ("" if lo == hi else f"-{hi}")
                                      for h, (n, lo, hi, mean) in by_hop.items()))
        slope = per_hop_slope(by_hop)
        if slope is not None:
            lines.append(f"  per hop: {slope:.2f} cycles (goal <= 2)")
    top, first_refusal = saturation(results)
    if top is not None:
        what = ("saturation throughput" if top["offered"] >= 1.0 else
                "accepted throughput (not saturated)")
        lines.append(
            f"{what}, uniform random: {top['accepted']:.3f} flits/node/cycle at offered "
            f"{top['offered']:.2f} (BookSim2: {BOOKSIM_SATURATION} with 2 VCs x 8 flits); "
            f"this mesh: {plan['length']}-flit packets, best effort on 1 VC of 8 flits (the "
            f"2nd VC, 4 flits, carries reserved traffic only), XY, wormhole; source queues "
            f"of {QUEUE} packets refuse from offered {first_refusal}")
    for p in results["sweep"]:
        lat = "-" if p["latency_avg"] is None else f"{p['latency_avg']:.1f}"
        lines.append(f"  {p['pattern']:<9} offered {p['offered']:.2f}  accepted "
                     f"{p['accepted']:.3f}  latency avg {lat} max {p['latency_max']}  "
                     f"refused {p['refused']}  drained {p['drained']}")
    for j in results["jitter"]:
        lines.append(f"reserved flow {tuple(j['src'])}->{tuple(j['dst'])} at BE load "
                     f"{j['offered']:.2f}: {j['received']}/{j['sent']} packets, latency "
                     f"min {j['latency_min']} max {j['latency_max']} (jitter "
                     f"{j['latency_max'] - j['latency_min']}), late injections {j['late']}")
    if results["grant"]:
        cycles = [g["cycles"] for g in results["grant"]]
        lines.append(f"reservation request -> answer: {min(cycles)}..{max(cycles)} cycles "
                     f"over {len(cycles)} requests (0..{max(g['slots_taken'] for g in results['grant'])} "
                     "slots taken)")
        for g in results["grant"]:
            lines.append(f"  {g['slots_taken']} taken, {g['case']:<15} "
                         f"{'granted' if g['granted'] else 'retry':<8} {g['cycles']} cycles")
    return "\n".join(lines)


def check_arguments(cols, rows, length, out):
    """UsageError for a mesh ``v4hw_muon`` refuses, a packet length the bench cannot
    make, or an output folder that cannot be written: before anything is built."""
    from sim.blocks import descriptor
    from sim.usage import UsageError, check_output_dir
    muon = descriptor("muon")
    try:
        muon.check({**muon.defaults, "COLS": cols, "ROWS": rows})
    except (ValueError, TypeError) as error:
        raise UsageError(str(error)) from None
    if not 2 <= length <= 16:
        raise UsageError(f"--length: bench packets have 2..16 flits, not {length}")
    check_output_dir(out, "--out")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="v4hw bench muon",
                                     description="Muon NoC performance (Verilator)")
    parser.add_argument("--cols", type=int, default=4)
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--length", type=int, default=4, help="flits per packet (2..16)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="one load point (a smoke run)")
    parser.add_argument("--out", metavar="DIR", help="default build/bench/muon-<cols>x<rows>")
    args = parser.parse_args(argv)
    from sim.runner import REPO_ROOT, CocotbTestFailure, SimulationError
    from sim.usage import UsageError
    out = Path(args.out) if args.out else REPO_ROOT / "build" / "bench" / f"muon-{args.cols}x{args.rows}"
    try:
        check_arguments(args.cols, args.rows, args.length, out)
    except UsageError as error:
        print(f"v4hw: error: bench muon: {error}", file=sys.stderr)
        return 2
    plan = default_plan(quick=args.quick, seed=args.seed, length=args.length)
    print(f"v4hw bench muon: {args.cols}x{args.rows} mesh, {args.length}-flit packets "
          f"(build and sweep under Verilator)", flush=True)
    try:
        results = run(args.cols, args.rows, plan)
    except (CocotbTestFailure, SimulationError, ValueError) as error:
        print(f"v4hw bench muon: FAILED: {error}", file=sys.stderr)
        return 1
    write_outputs(results, out)
    print(summary(results))
    print(f"wrote {out}/ (zero_load.csv load_latency.csv jitter.csv grant.csv latency.png "
          "throughput.png jitter.png bench.json)")
    return 0
