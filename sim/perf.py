"""The performance baseline: every figure a performance test measures, checked against
the committed ``tests/data/perf_baseline.json``.

A performance test calls :func:`check` once per figure, in the pytest process or in a
cocotb simulation::

    perf.check("va.performance.SILU.n65536", outcome.cycles)           # cycles: lower is better
    perf.check("muon.bench.2x2.uniform.accepted", point["accepted"], better="higher")

The figure's key is the name with the simulator appended (``...@verilator``); figures
are checked under Verilator (and outside a simulation) only, see :data:`CHECKED`. The check
fails when the figure is more than :data:`TOLERANCE` (1 %) worse than the baseline, and
also when it is more than 1 % better: an improvement is recorded in the same commit,
so the baseline always states what the RTL does. It fails too when the baseline has no
such figure. The message names the figure, both values, the change in per cent and the
command that records the new value:

``V4HW_PERF_UPDATE=1 python -m pytest <test id>`` writes the measured figures into the
file instead of comparing them (the file is locked, so parallel workers may update it).

The figures are those of the fixed per-test seeds (:mod:`sim.seed`); a run with
``V4HW_SEED`` or ``V4HW_SEED_SALT`` draws other operands, so it prints the comparison and
checks nothing.
"""

import fcntl
import json
import math
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from .seed import SALT_VARIABLE, SEED_VARIABLE, current_node

__all__ = ["BASELINE", "TOLERANCE", "UPDATE_VARIABLE", "PerfRegression", "check", "check_all",
           "load_baseline"]

BASELINE = Path(__file__).resolve().parent.parent / "tests" / "data" / "perf_baseline.json"
TOLERANCE = 0.01
UPDATE_VARIABLE = "V4HW_PERF_UPDATE"
CHECKED = ("verilator", None)
"""Where figures are checked: under Verilator and outside a simulation. Icarus runs the
shorter variants of some tests (e.g. the MA's gemm_large), and the performance tests
proper run on Verilator only; an Icarus figure is printed."""
_BETTER = ("lower", "higher")


class PerfRegression(AssertionError):
    """A figure moved by more than the tolerance, or has no baseline."""


def _simulator():
    """``"icarus"`` or ``"verilator"`` in a cocotb simulation, else ``None``."""
    cocotb = sys.modules.get("cocotb")
    if cocotb is None:
        return None
    name = (getattr(cocotb, "SIM_NAME", None) or "").lower()
    if "icarus" in name:
        return "icarus"
    if "verilator" in name:
        return "verilator"
    return None


def load_baseline(path=BASELINE):
    """The baseline's figures: ``{key: {"value": number, "better": "lower"|"higher"}}``."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return {}
    return json.loads(text)["figures"] if text.strip() else {}


@contextmanager
def _locked(path):
    # The baseline file itself is the lock (no other file next to it).
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _write(path, key, entry):
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        figures = load_baseline(path)
        figures[key] = entry
        lines = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}"
                           for k, v in sorted(figures.items()))
        path.write_text(f'{{\n "tolerance": {TOLERANCE},\n "figures": {{\n{lines}\n }}\n}}\n')


def _env_flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "yes", "true", "on")


def check(name, value, *, better="lower", simulator=None, path=BASELINE):
    """Compare figure ``name`` (``value``, a number) with the baseline; see the module.

    ``better`` says which way is an improvement (``"lower"`` for cycles and latencies,
    ``"higher"`` for rates). ``simulator`` goes into the key; by default the simulator
    this runs in (none outside a simulation). Returns the change against the baseline
    as a fraction (positive: worse), or ``None`` when nothing was compared.
    """
    if better not in _BETTER:
        raise ValueError(f"better must be 'lower' or 'higher', not {better!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"the figure {name} must be a finite number, not {value!r}")
    simulator = simulator or _simulator()
    if simulator not in CHECKED:
        print(f"perf: {name} = {value:g} on {simulator} (not checked: the baseline is "
              f"{', '.join(s for s in CHECKED if s)}'s)", flush=True)
        return None
    key = f"{name}@{simulator}" if simulator else name
    path = Path(path)
    node = current_node()
    rerun = (f"{UPDATE_VARIABLE}=1 python -m pytest '{node}'" if node
             else f"{UPDATE_VARIABLE}=1 <the same command>")
    if _env_flag(UPDATE_VARIABLE):
        _write(path, key, {"value": value, "better": better})
        print(f"perf: {key} = {value:g} recorded in {path.name}", flush=True)
        return None
    entry = load_baseline(path).get(key)
    if entry is None:
        raise PerfRegression(f"perf: {key} = {value:g} has no baseline in {path.name}; "
                             f"record it with: {rerun}")
    if entry["better"] != better:
        raise PerfRegression(f"perf: {key}: the baseline says {entry['better']} is better, "
                             f"the test {better}; record it again with: {rerun}")
    base = entry["value"]
    sign = 1 if better == "lower" else -1
    change = sign * (value - base) / abs(base) if base else sign * (value - base)
    print(f"perf: {key} = {value:g} (baseline {base:g}, {100 * change:+.2f} % "
          f"{'worse' if change > 0 else 'better' if change < 0 else 'the same'})", flush=True)
    if os.environ.get(SEED_VARIABLE, "").strip() or os.environ.get(SALT_VARIABLE, "").strip():
        return None  # other operands than the baseline's: shown, not checked
    if change > TOLERANCE:
        raise PerfRegression(
            f"perf: {key} got {100 * change:.2f} % worse: {value:g} against the baseline's "
            f"{base:g} ({better} is better, tolerance {100 * TOLERANCE:g} %); if that is "
            f"intended, record it with: {rerun}, and commit {path.name}")
    if change < -TOLERANCE:
        raise PerfRegression(
            f"perf: {key} got {-100 * change:.2f} % better: {value:g} against the baseline's "
            f"{base:g}; record the improvement in the same commit: {rerun}, and commit "
            f"{path.name}")
    return change


def check_all(prefix, figures, *, better="lower", simulator=None, path=BASELINE):
    """:func:`check` each ``{name: value}`` of ``figures`` as ``<prefix>.<name>``; every
    figure is compared (and printed) before the first failure is raised."""
    failures = []
    for name, value in figures.items():
        try:
            check(f"{prefix}.{name}", value, better=better, simulator=simulator, path=path)
        except PerfRegression as error:
            failures.append(str(error))
    if failures:
        raise PerfRegression("\n".join(failures))
