"""Scheduling of the regression: the longest tests first, each simulator build early.

``tests/data/durations.json`` records, for each test, its run time apart from any
simulator build it did, and the builds it used (``sim.runner.BUILDS_USED``); for each
build, its time. Before a run the tests are put in the order that a greedy schedule on
the run's workers (pytest-xdist's ``-n``) finishes soonest: every build's first user
goes first (the builds in parallel, the longest first), then the other tests, the
longest first, none before its build is done. pytest-xdist's ``worksteal`` gives each
worker a contiguous share of the collection, so the order lays out each worker's share
of the schedule in turn. Tests the file does not know get the median time of their kind
and go first among theirs.

``pytest --store-durations`` writes the file from the run (merging it with the
recorded entries); ``make durations`` runs `make test`'s selection that way. The order
never changes what runs, only when.
"""

import json
import os
import re
import statistics
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent / "data" / "durations.json"


def pytest_addoption(parser, pluginmanager):
    # pytest-split (the shards, sim/shards.py) has an option of this name: then it is the
    # one option, and `make durations` also gives pytest-split's file a place in build/.
    if not pluginmanager.has_plugin("pytest-split"):
        parser.addoption("--store-durations", action="store_true",
                         help="record each test's run time and builds in "
                              "tests/data/durations.json")
    parser.addoption("--shard-plan", metavar="FILE",
                     help="with --splits/--group: write the shard plan of the collection "
                          "(each test's group, build keys and shard) to FILE as JSON")


def _load():
    try:
        data = json.loads(DURATIONS.read_text())
    except FileNotFoundError:
        return {}, {}
    return data.get("tests", {}), data.get("builds", {})


def _workers(config):
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if count:
        return max(1, int(count))
    option = getattr(config.option, "numprocesses", None)
    return option if isinstance(option, int) and option > 0 else 1


def schedule(items, tests, builds, workers):
    """``items`` (node ids) in the order described in the module docstring.

    ``tests``: ``{node id: {"seconds": s, "builds": [name, ...]}}``; ``builds``:
    ``{name: seconds}``. Returns the node ids, worker 0's share first.
    """
    known = [t for t in tests.values() if "seconds" in t]
    typical = statistics.median(t["seconds"] for t in known) if known else 1.0
    cost = {item: tests.get(item, {}).get("seconds", typical) for item in items}
    uses = {item: [b for b in tests.get(item, {}).get("builds", []) if b in builds]
            for item in items}
    # The builder of each build: the longest of its users.
    builder = {}
    for item in sorted(items, key=lambda i: -cost[i]):
        for build in uses[item]:
            builder.setdefault(build, item)
    first = set(builder.values())
    unknown = [item for item in items if item not in tests]
    order = (unknown
             + sorted(first - set(unknown),
                      key=lambda i: -(cost[i] + sum(builds[b] for b in uses[i]
                                                     if builder[b] == i)))
             + sorted((i for i in items if i not in first and i in tests),
                      key=lambda i: -cost[i]))
    # worksteal's first split: worker k gets the next len(rest) // (workers - k) items.
    sizes, remaining = [], len(items)
    for k in range(workers):
        sizes.append(remaining // (workers - k))
        remaining -= sizes[-1]
    shares = [[] for _ in range(workers)]
    finish = [0.0] * workers
    ready = {}
    for item in order:
        own = [b for b in uses[item] if builder[b] == item]
        wait = max((ready.get(b, 0.0) for b in uses[item] if b not in own), default=0.0)
        free = [k for k in range(workers) if len(shares[k]) < sizes[k]]
        k = min(free, key=lambda k: (max(finish[k], wait), k))
        start = max(finish[k], wait)
        build_time = sum(builds[b] for b in own)
        for b in own:
            ready[b] = start + build_time
        finish[k] = start + build_time + cost[item]
        shares[k].append(item)
    return [item for share in shares for item in share]


FPGA_FILES = ("test_fpga_flow.py", "test_fpga_constraints.py")
"""The FPGA flow's checks (synthesis smoke per block, the constraint files against the
tops): marked ``fpga``, in `make test`, not in `make test-fast`, where they were a third
of the time (docs/testing.md)."""


FAST_LIMIT = 2.0
"""`make test-fast` is a verdict in minutes: of the tests that need no simulator build
(golden, planner, Amaranth simulator, formal, checks), those whose recorded time
(tests/data/durations.json) is :data:`FAST_LIMIT` seconds or more are marked ``slow``
and left to `make test` (every one of them still runs there). A test with no record
counts as fast."""


REGRESS_ONLY = Path(__file__).resolve().parent / "data" / "regress_only.txt"


def regress_only(path=REGRESS_ONLY):
    """The compiled patterns of ``tests/data/regress_only.txt``: node ids marked ``regress``."""
    lines = [line.strip() for line in Path(path).read_text().splitlines()]
    return [re.compile(line) for line in lines if line and not line.startswith("#")]


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    patterns = regress_only()
    tests, builds = _load()
    for item in items:
        if item.path.name in FPGA_FILES:
            item.add_marker(pytest.mark.fpga)
        if any(pattern.fullmatch(item.nodeid) for pattern in patterns):
            item.add_marker(pytest.mark.regress)
        record = tests.get(item.nodeid)
        if record and not record.get("builds") and record.get("seconds", 0) >= FAST_LIMIT:
            item.add_marker(pytest.mark.slow)
    # The selection by marker and keyword, then the shard's (_ShardLayout, pytest-split).
    yield
    if not tests:
        return
    by_id = {item.nodeid: item for item in items}
    order = schedule(list(by_id), tests, builds, _workers(config))
    items[:] = [by_id[node] for node in order]


class _ShardLayout:
    """With pytest-split's ``--splits N --group k``: lays the selected tests out as
    :func:`sim.shards.plan` says and gives pytest-split the plan's weights, just before
    pytest-split cuts the collection (registered after pytest-split's own plugin, so its
    ``trylast`` hook runs first of the two)."""

    def __init__(self, config):
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        from sim import shards

        split = config.pluginmanager.get_plugin("pytestsplitplugin")
        if split is None or not hasattr(split, "cached_durations"):
            raise pytest.UsageError("--splits needs pytest-split's plugin (pinned in "
                                    "requirements.txt; `make setup` installs it)")
        tests, builds = _load()
        nodes = [item.nodeid for item in items]
        cocotb = {item.nodeid for item in items if item.get_closest_marker("cocotb")}
        plan = shards.plan(nodes, tests, builds, config.option.splits, cocotb)
        by_id = {item.nodeid: item for item in items}
        items[:] = [by_id[node] for node in plan.order]
        split.cached_durations = plan.weights
        for item in items:
            item.user_properties.append(("v4hw_build_keys", sorted(plan.keys[item.nodeid])))
        path = config.getoption("shard_plan")
        # Under xdist the controller collects nothing: its first worker writes the plan.
        worker = getattr(config, "workerinput", {}).get("workerid")
        if path and worker in (None, "gw0"):
            group_of = {node: index for index, group in enumerate(plan.groups) for node in group}
            Path(path).write_text(json.dumps({
                "splits": config.option.splits,
                "loads": [round(x, 1) for x in plan.loads],
                "build_seconds": [round(x, 1) for x in plan.build_seconds],
                "tests": {node: {"group": group_of[node], "shard": plan.shard[node] + 1,
                                 "keys": sorted(plan.keys[node])} for node in nodes},
            }, indent=1, sort_keys=True) + "\n")


def _point_pytest_split_at_durations(config):
    """Give pytest-split the recorded times (its own format: ``{node id: seconds}``, in
    ``build/``) unless ``--durations-path`` names a file: it reads them when its plugin is
    made, and says it splits evenly when it finds none; the layout then replaces them
    with the plan's weights."""
    path = Path(config.option.durations_path)
    if path.exists():
        return
    tests, _ = _load()
    target = Path(config.rootpath) / "build" / "pytest-split" / "durations.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.with_name(f"durations.{os.getpid()}.json")
    scratch.write_text(json.dumps({node: entry["seconds"] for node, entry in tests.items()
                                   if "seconds" in entry}, sort_keys=True))
    scratch.replace(target)  # atomic: the xdist workers write it at the same time
    config.option.durations_path = str(target)


class _ShardCheck:
    """Reports, at the end of a shard's run, the builds it made (or waited for) and their
    seconds, and each test that used a build its planned group did not predict (a test
    ``tests/data/durations.json`` does not know yet, whose node id misled
    :func:`sim.shards.predicted_keys`): that build may be made in another shard too.
    ``make durations`` records the test's builds."""

    def __init__(self):
        self.surprises = []
        self.built = {}

    def pytest_runtest_logreport(self, report):
        if report.when != "call":
            return
        from sim import shards

        props = dict(report.user_properties)
        for name, seconds in props.get("v4hw_builds", ()):
            if seconds >= 1:
                self.built[name] = max(self.built.get(name, 0.0), seconds)
        predicted = set(props.get("v4hw_build_keys", ()))
        used = {shards.build_key(name) for name, _ in props.get("v4hw_builds", ())}
        if used - predicted:
            self.surprises.append((report.nodeid, sorted(used - predicted)))

    def pytest_terminal_summary(self, terminalreporter):
        # The builds this shard made or waited for, with their seconds: its build time.
        made = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in sorted(self.built.items()))
        terminalreporter.write_line(
            f"[shards] builds of this shard: {sum(self.built.values()):.0f} s"
            + (f" ({made})" if made else ""))
        for node, keys in self.surprises:
            terminalreporter.write_line(
                f"[shards] {node} used {', '.join(keys)}, not planned for its group: "
                "that build may be made in another shard too (`make durations` records it)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    from sim import runner

    start = len(runner.BUILDS_USED)
    try:
        return (yield)
    finally:
        used = runner.BUILDS_USED[start:]
        item.user_properties.append(("v4hw_builds", used))


class _Recorder:
    def __init__(self):
        self.tests = {}

    def pytest_runtest_logreport(self, report):
        if report.when != "call" or not report.passed:
            return
        used = dict(report.user_properties).get("v4hw_builds", [])
        build_seconds = sum(seconds for _, seconds in used)
        self.tests[report.nodeid] = {
            "seconds": round(max(0.0, report.duration - build_seconds), 2),
            "builds": sorted({name for name, _ in used}),
            "build_seconds": {name: seconds for name, seconds in used if seconds >= 1},
        }

    def pytest_sessionfinish(self, session):
        tests, builds = _load()
        measured = {}
        for node, entry in self.tests.items():
            for name, seconds in entry.pop("build_seconds").items():
                measured[name] = max(measured.get(name, 0), round(seconds, 1))
            tests[node] = entry
        builds.update(measured)
        DURATIONS.write_text(dumps(tests, builds))


def dumps(tests, builds):
    """The durations file's text: one line a test and a build, sorted (small diffs)."""
    def section(entries):
        return ",\n".join(f"  {json.dumps(key)}: {json.dumps(value, sort_keys=True)}"
                          for key, value in sorted(entries.items()))
    return f'{{\n "tests": {{\n{section(tests)}\n }},\n "builds": {{\n{section(builds)}\n }}\n}}\n'


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    from sim import coverage, runner

    if runner.coverage_enabled():
        coverage.emit_src_everywhere()
    # Before pytest-split's pytest_configure registers its plugin: of two `trylast` hooks
    # pluggy calls the one registered first... first, so the layout precedes the cut.
    if getattr(config.option, "splits", None) and getattr(config.option, "group", None):
        config.pluginmanager.register(_ShardLayout(config), "v4hw-shard-layout")
        _point_pytest_split_at_durations(config)
        if not hasattr(config, "workerinput"):
            config.pluginmanager.register(_ShardCheck(), "v4hw-shard-check")
    # The controller (or a run without xdist) records; workers only report.
    if hasattr(config, "workerinput"):
        return
    if config.getoption("store_durations"):
        config.pluginmanager.register(_Recorder(), "v4hw-durations")
