"""Shards of the regression across machines: whole build groups, balanced by duration.

``make test SHARD=k/N`` runs shard ``k`` of ``N`` of ``make test``'s selection through
pytest-split (``--splits N --group k``); ``tests/conftest.py`` hands it the collection laid
out by :func:`plan`, so that pytest-split's contiguous cut (its default
``duration_based_chunks`` algorithm) falls only between groups:

* a **group** is the set of tests that share a simulator build, closed under sharing
  (union-find over build keys), or a single test that uses none; every test that uses
  one Verilator or Icarus build is in the group of that build, so each build is made in
  one shard only;
* a test's build keys are :func:`build_key` of the builds ``tests/data/durations.json``
  recorded for it (``sim.runner.BUILDS_USED``); a test the file does not know is
  predicted by :func:`predicted_keys` from its node id (the block and the simulator);
* each group's cost is its tests' recorded times (the median of the known tests that
  used a build for an unknown cocotb test, the median of all known tests for another)
  plus its builds' recorded times (:data:`DEFAULT_BUILD_SECONDS` for a build the file
  does not know);
* the groups are dealt to the shards longest first, each to the least loaded one
  (LPT), and laid out shard after shard, each shard's longest group first; within a group
  every test but the last weighs 0 and the last the whole group, so a cut never splits it.

A key covers every build of one block on one simulator (``ma-verilator``: the MA's
builds under Verilator), which is coarser than one build and so never splits one.
"""

import contextlib
import json
import os
import statistics

__all__ = ["BLOCKS", "DEFAULT_BUILD_SECONDS", "build_key", "predicted_keys", "groups",
           "plan", "Plan"]

BLOCKS = ("ma", "va", "mc", "muon", "tile", "board")
SIMULATORS = ("icarus", "verilator")

DEFAULT_BUILD_SECONDS = {"verilator": 300.0, "icarus": 10.0}
"""The cost given to a build ``tests/data/durations.json`` has no time for: a scheduling
estimate only, of the order of the Verilator builds measured in docs/testing.md (149 to
429 s on the loaded 2-core machine) and of most Icarus builds (1 to 10 s)."""


def build_key(build):
    """``<family>-<simulator>`` of a build name ``<config_name>-<simulator>[-cov]``:
    the family is the first word of the configuration name (``ma-p8-dw128-verilator`` ->
    ``ma-verilator``, ``muon-bench-2x2-l4-verilator`` -> ``muon-verilator``)."""
    name = build.removesuffix("-cov")
    config, _, simulator = name.rpartition("-")
    return f"{config.split('-', 1)[0]}-{simulator}"


def _tokens(text):
    return [token for part in text.replace("[", "-").replace("]", "-").split("-")
            for token in part.split("_") if token]


def predicted_keys(nodeid):
    """The build key of a cocotb test that ``tests/data/durations.json`` does not know.

    The family: a block named by the test's parameters (``test_conformance[icarus-ma]``,
    ``test_tile_vs_standalone[ma-short]``), else the word after ``test_`` in its file
    name (``tests/test_mc_jitter_cocotb.py`` -> ``mc``). The simulator: one named by its
    parameters or its function's name (``test_tile_icarus_smoke``), else Verilator (the
    tests that run one simulator only and do not say which are Verilator's)."""
    path, _, name = nodeid.partition("::")
    function, _, params = name.partition("[")
    param_tokens = [token for token in params.rstrip("]").split("-") if token]
    stem = path.rsplit("/", 1)[-1].removesuffix(".py")
    words = stem.split("_")
    family = next((token for token in param_tokens if token in BLOCKS), None)
    if family is None:
        family = words[1] if len(words) > 1 and words[0] == "test" else stem
    simulator = next((token for token in param_tokens + _tokens(function)
                      if token in SIMULATORS), "verilator")
    return {f"{family}-{simulator}"}


class _UnionFind:
    def __init__(self):
        self.parent = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        self.parent[self.find(a)] = self.find(b)


def test_keys(nodes, tests, cocotb):
    """``{node: set of build keys}``: recorded builds for a known test, a prediction for
    an unknown test in ``cocotb`` (the node ids marked ``cocotb``), none otherwise."""
    keys = {}
    for node in nodes:
        if node in tests:
            keys[node] = {build_key(b) for b in tests[node].get("builds", [])}
        elif node in cocotb:
            keys[node] = predicted_keys(node)
        else:
            keys[node] = set()
    return keys


def groups(nodes, keys):
    """The groups of ``nodes`` (in collection order), each a list of node ids in
    collection order: the tests joined by a shared build key, every other test alone."""
    uf = _UnionFind()
    for node in nodes:
        for key in keys[node]:
            uf.union(("node", node), ("key", key))
    members = {}
    for node in nodes:
        members.setdefault(uf.find(("node", node)), []).append(node)
    return list(members.values())


class Plan:
    """The layout of one split: ``order`` (node ids, the shards' groups in turn),
    ``weights`` (``{node: seconds}`` for pytest-split), ``shard`` (``{node: index}``, from
    0), ``groups`` (lists of node ids), ``loads`` (estimated seconds per shard) and
    ``build_seconds`` (estimated build seconds per shard)."""

    def __init__(self, order, weights, shard, groups, loads, build_seconds, keys):
        self.order, self.weights, self.shard = order, weights, shard
        self.groups, self.loads, self.build_seconds = groups, loads, build_seconds
        self.keys = keys


def _costs(nodes, tests, cocotb):
    known = [t["seconds"] for t in tests.values() if "seconds" in t]
    built = [t["seconds"] for t in tests.values() if "seconds" in t and t.get("builds")]
    typical = statistics.median(known) if known else 1.0
    typical_cocotb = statistics.median(built) if built else typical
    return {node: tests[node].get("seconds", typical) if node in tests
            else typical_cocotb if node in cocotb else typical for node in nodes}


def _key_seconds(keys_used, builds):
    """Estimated build seconds of each key: the recorded builds it covers, else the
    default of its simulator."""
    seconds = {}
    for key in keys_used:
        recorded = [s for name, s in builds.items() if build_key(name) == key]
        simulator = key.rpartition("-")[2]
        seconds[key] = (sum(recorded) if recorded
                        else DEFAULT_BUILD_SECONDS.get(simulator, DEFAULT_BUILD_SECONDS["verilator"]))
    return seconds


def plan(nodes, tests, builds, splits, cocotb=()):
    """Split ``nodes`` (collection order) into ``splits`` shards of whole groups.

    ``tests``/``builds``: ``tests/data/durations.json``'s sections; ``cocotb``: the node
    ids marked ``cocotb``. Deterministic for the same arguments (every machine of a CI
    matrix computes the same plan)."""
    if splits < 1:
        raise ValueError(f"splits must be at least 1, not {splits}")
    nodes = list(nodes)
    cocotb = set(cocotb)
    keys = test_keys(nodes, tests, cocotb)
    grouped = groups(nodes, keys)
    cost = _costs(nodes, tests, cocotb)
    key_seconds = _key_seconds({k for ks in keys.values() for k in ks}, builds)

    def group_keys(group):
        return {k for node in group for k in keys[node]}

    def group_cost(group):
        return sum(cost[n] for n in group) + sum(key_seconds[k] for k in group_keys(group))

    costs = [group_cost(g) for g in grouped]
    loads = [0.0] * splits
    dealt = [[] for _ in range(splits)]
    # Longest first; ties by collection position (deterministic).
    for index in sorted(range(len(grouped)), key=lambda i: (-costs[i], i)):
        k = min(range(splits), key=lambda k: (loads[k], k))
        dealt[k].append(index)
        loads[k] += costs[index]
    order, weights = [], {}
    for indices in dealt:
        # The longest groups in the middle of the shard, the short ones at both ends:
        # where pytest-split's cut falls off the deal, it moves short groups only.
        middle_out = indices[::2][::-1] + indices[1::2]
        for index in middle_out:
            group = grouped[index]
            for node in group:
                weights[node] = 0.0
            # A positive weight on the last test: a cut comes only after a whole group.
            weights[group[-1]] = max(costs[index], 1e-3)
            order.extend(group)
    shard = chunks(order, weights, splits)
    loads, build_seconds = [0.0] * splits, [0.0] * splits
    for index, group in enumerate(grouped):
        k = shard[group[0]]
        loads[k] += costs[index]
        build_seconds[k] += sum(key_seconds[key] for key in group_keys(group))
    return Plan(order, weights, shard, grouped, loads, build_seconds, keys)


def chunks(order, weights, splits):
    """``{node: shard index}`` as pytest-split's ``duration_based_chunks`` cuts ``order``
    with these weights (its algorithm, for the plan's figures; the run uses pytest-split's
    own)."""
    target = sum(weights[node] for node in order) / splits
    shard, index, duration = {}, 0, 0.0
    for node in order:
        if duration >= target and index < splits - 1:
            index, duration = index + 1, 0.0
        shard[node] = index
        duration += weights[node]
    return shard


# --- Command line: collect every shard and check them --------------------------------------

def collect_shards(splits, marker="not regress", extra=()):
    """Collect ``make test``'s selection (``-m marker``) whole and as each of ``splits``
    shards, in this process (the test modules are imported once): returns
    ``(all node ids, [node ids of shard 1, ...], the plan as --shard-plan writes it)``."""
    import tempfile

    import pytest

    class _Grab:
        def __init__(self):
            self.nodes = None

        def pytest_collection_finish(self, session):
            self.nodes = [item.nodeid for item in session.items]

    def collect(*args):
        grab = _Grab()
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-m", marker,
                                *extra, *args], plugins=[grab])
        if code != 0 or grab.nodes is None:
            raise SystemExit(f"error: the collection {' '.join(args) or '(whole)'} failed "
                             f"(pytest exit {int(code)})")
        return grab.nodes

    everything = collect()
    parts, plans = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for k in range(1, splits + 1):
            path = f"{scratch}/plan{k}.json"
            parts.append(collect("--splits", str(splits), "--group", str(k),
                                 f"--shard-plan={path}"))
            with open(path) as f:
                plans.append(json.load(f))
    if any(p != plans[0] for p in plans):
        raise SystemExit("error: the shards' collections planned differently")
    return everything, parts, plans[0]


def check(everything, parts, plan):
    """The problems of a split, as lines (none when every test is in exactly one shard,
    the one its plan says, and each build key in one shard)."""
    problems = []
    counts = {}
    for nodes in parts:
        for node in nodes:
            counts[node] = counts.get(node, 0) + 1
    missing = sorted(set(everything) - set(counts))
    extra = sorted(set(counts) - set(everything))
    twice = sorted(node for node, n in counts.items() if n > 1)
    problems += [f"in no shard: {node}" for node in missing]
    problems += [f"not in the whole collection: {node}" for node in extra]
    problems += [f"in {counts[node]} shards: {node}" for node in twice]
    tests = plan["tests"]
    for k, nodes in enumerate(parts, 1):
        problems += [f"in shard {k}, planned for {tests[node]['shard']}: {node}"
                     for node in nodes if tests[node]["shard"] != k]
    where = {}
    for entry in tests.values():
        for key in entry["keys"]:
            where.setdefault(key, set()).add(entry["shard"])
    problems += [f"build key {key} in shards {sorted(s)}" for key, s in sorted(where.items())
                 if len(s) > 1]
    return problems


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m sim.shards",
        description="Collect make test's selection as N shards (pytest-split, whole build "
                    "groups), check that they run every test exactly once, print each "
                    "shard's tests, build keys and estimated seconds.")
    parser.add_argument("--splits", type=int, default=2, help="number of shards (default 2)")
    parser.add_argument("-m", dest="marker", default="not regress",
                        help="the marker expression (default: make test's, 'not regress')")
    parser.add_argument("--json", metavar="FILE", help="also write the collections and the plan")
    args = parser.parse_args(argv)
    if args.splits < 1:
        parser.exit(2, f"error: --splits must be at least 1, not {args.splits}\n")
    everything, parts, plan = collect_shards(args.splits, args.marker)
    for k, nodes in enumerate(parts, 1):
        keys = sorted({key for node in nodes for key in plan["tests"][node]["keys"]})
        print(f"shard {k}/{args.splits}: {len(nodes)} tests, estimated "
              f"{plan['loads'][k - 1]:.0f} s of which builds {plan['build_seconds'][k - 1]:.0f} s; "
              f"builds: {', '.join(keys) or '-'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"all": everything, "shards": parts, "plan": plan}, f, indent=1)
    problems = check(everything, parts, plan)
    for line in problems:
        print(f"error: {line}")
    if not problems:
        print(f"ok: {len(everything)} tests, each in exactly one of {args.splits} shards; "
              "each build key in one shard")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
