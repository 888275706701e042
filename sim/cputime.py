"""A pytest plugin that records each test's processor time, its own and its children's
(simulators, compilers, yosys), as the test ends: ``-p sim.cputime``.

Wall-clock times on a shared machine grow with its load; processor seconds do not, so
they are what a time budget on an idle machine is planned from (docs/testing.md,
"Times"). Each test appends one JSON line to the file named by ``V4HW_CPUTIME_LOG``
(default ``build/cputime.jsonl``): node id, outcome, wall seconds, processor seconds of
the pytest process and of the subprocesses it waited for. Lines are written as tests end,
so an interrupted run keeps what it measured. ``python -m sim.cputime FILE`` sums them
per file and lists the longest tests.
"""

import argparse
import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

LOG_VARIABLE = "V4HW_CPUTIME_LOG"
_REPORTS = pytest.StashKey[list]()
DEFAULT_LOG = Path(__file__).resolve().parent.parent / "build" / "cputime.jsonl"


def _cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start_wall, (start_own, start_children) = time.monotonic(), _cpu()
    reports = []
    item.stash[_REPORTS] = reports
    yield
    wall, (own, children) = time.monotonic() - start_wall, _cpu()
    if any(r.failed for r in reports):
        outcome = "failed"
    else:
        outcome = "passed" if any(r.when == "call" and r.passed for r in reports) else "skipped"
    record = {"test": item.nodeid, "outcome": outcome, "wall": round(wall, 3),
              "cpu_own": round(own - start_own, 3),
              "cpu_children": round(children - start_children, 3)}
    path = Path(os.environ.get(LOG_VARIABLE) or DEFAULT_LOG)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as log:
        log.write(json.dumps(record) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    reports = item.stash.get(_REPORTS, None)
    if reports is not None:
        reports.append(outcome.get_result())


def summary(records, top=40):
    """Lines: processor seconds per file (own + children), then the ``top`` longest tests."""
    by_file = defaultdict(lambda: [0, 0.0, 0.0])
    for r in records:
        entry = by_file[r["test"].split("::")[0]]
        entry[0] += 1
        entry[1] += r["cpu_own"] + r["cpu_children"]
        entry[2] += r["wall"]
    total = sum(e[1] for e in by_file.values())
    lines = [f"{len(records)} tests, {total:.0f} processor seconds "
             f"({total / 2:.0f} s on two cores, perfectly packed)", "",
             "processor s  wall s  tests  file"]
    for name, (count, cpu, wall) in sorted(by_file.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"{cpu:11.1f} {wall:7.1f} {count:6d}  {name}")
    lines += ["", "processor s  wall s  test"]
    for r in sorted(records, key=lambda r: -(r["cpu_own"] + r["cpu_children"]))[:top]:
        lines.append(f"{r['cpu_own'] + r['cpu_children']:11.1f} {r['wall']:7.1f}  {r['test']}"
                     + ("" if r["outcome"] == "passed" else f"  ({r['outcome']})"))
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m sim.cputime", description=__doc__.split("\n")[0])
    parser.add_argument("log", type=Path, nargs="?", default=DEFAULT_LOG)
    parser.add_argument("--top", type=int, default=40, help="how many tests to list")
    args = parser.parse_args(argv)
    try:
        records = [json.loads(line) for line in args.log.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as error:
        print(f"error: {args.log}: {error}", file=sys.stderr)
        return 2
    print("\n".join(summary(records, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
