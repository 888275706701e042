"""The shards of ``make test SHARD=k/N`` (``sim/shards.py``, pytest-split): together they
run every test of the selection exactly once, and each build group in one shard only."""

import json
import subprocess
import sys
from collections import defaultdict
from types import SimpleNamespace

import pytest

from sim import shards
from sim.runner import REPO_ROOT


def test_build_key_is_family_and_simulator():
    assert shards.build_key("ma-p8-dw128-verilator") == "ma-verilator"
    assert shards.build_key("muon-bench-2x2-l4-verilator") == "muon-verilator"
    assert shards.build_key("mc-c4-dw128-credits1-icarus") == "mc-icarus"
    assert shards.build_key("tile-p4-l8-dw128-verilator-cov") == "tile-verilator"


@pytest.mark.parametrize("node, key", [
    ("tests/test_ma_cocotb.py::test_ma[verilator-gemm_random]", "ma-verilator"),
    ("tests/test_conformance_cocotb.py::test_conformance[icarus-va]", "va-icarus"),
    ("tests/test_tile_cocotb.py::test_tile_icarus_smoke", "tile-icarus"),
    ("tests/test_tile_cocotb.py::test_tile_vs_standalone[ma-short]", "ma-verilator"),
    ("tests/test_tile_runtime_cocotb.py::test_runtime_slice[va]", "va-verilator"),
    ("tests/test_va_cocotb.py::test_va_performance", "va-verilator"),
    ("tests/test_mc_jitter_cocotb.py::test_jitter[icarus-3]", "mc-icarus"),
    ("tests/test_runner.py::test_counter[icarus]", "runner-icarus"),
])
def test_an_unknown_cocotb_test_is_predicted_from_its_node_id(node, key):
    assert shards.predicted_keys(node) == {key}


def _pytest_split():
    try:
        from pytest_split import algorithms
    except ImportError:
        pytest.fail("pytest-split is not installed (requirements.txt pins it; `make setup`)")
    return algorithms


def _synthetic(seed):
    """A collection of cocotb tests on a few builds, some recorded, some not, and other
    tests: (nodes, tests, builds, cocotb)."""
    import random

    rng = random.Random(seed)
    nodes, tests, cocotb = [], {}, set()
    for block in ("ma", "va", "mc", "muon", "tile"):
        for simulator in ("icarus", "verilator"):
            for index in range(rng.randint(1, 6)):
                node = f"tests/test_{block}_cocotb.py::test_{block}[{simulator}-case{index}]"
                nodes.append(node)
                cocotb.add(node)
                if rng.random() < 0.5:
                    tests[node] = {"seconds": rng.uniform(1, 90),
                                   "builds": [f"{block}-x-{simulator}"]}
    for index in range(rng.randint(20, 60)):
        node = f"tests/test_unit_{index}.py::test_unit"
        nodes.append(node)
        if rng.random() < 0.8:
            tests[node] = {"seconds": rng.uniform(0, 40), "builds": []}
    rng.shuffle(nodes)
    builds = {f"{b}-x-{s}": rng.uniform(5, 400) for b in ("ma", "va", "mc") for s in ("icarus", "verilator")}
    return nodes, tests, builds, cocotb


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("splits", [1, 2, 3, 5])
def test_plan_keeps_groups_whole_and_matches_pytest_split(seed, splits):
    algorithms = _pytest_split()
    DurationBasedChunksAlgorithm = algorithms.DurationBasedChunksAlgorithm

    nodes, tests, builds, cocotb = _synthetic(seed)
    plan = shards.plan(nodes, tests, builds, splits, cocotb)
    assert sorted(plan.order) == sorted(nodes)
    # pytest-split's own cut of the laid-out collection with the plan's weights
    items = [SimpleNamespace(nodeid=node) for node in plan.order]
    cut = DurationBasedChunksAlgorithm()(splits, items, plan.weights)
    seen = defaultdict(int)
    for k, group in enumerate(cut):
        for item in group.selected:
            seen[item.nodeid] += 1
            assert plan.shard[item.nodeid] == k
    assert set(seen) == set(nodes) and set(seen.values()) == {1}
    # every build key in one shard, and every group
    where = defaultdict(set)
    for node in nodes:
        for key in plan.keys[node]:
            where[key].add(plan.shard[node])
    assert all(len(s) == 1 for s in where.values()), where
    for group in plan.groups:
        assert len({plan.shard[node] for node in group}) == 1
    # a block's tests on one simulator, recorded or predicted, are in one shard
    by_key = defaultdict(set)
    for node in cocotb:
        block = node.split("test_", 2)[1].split("_")[0]
        simulator = node.split("[")[1].split("-")[0]
        by_key[block, simulator].add(plan.shard[node])
    assert all(len(s) == 1 for s in by_key.values())


def test_plan_balances_whole_groups():
    # four groups of 100 s and small tests: two shards of 200 s and their share of the rest
    nodes, tests = [], {}
    for block in ("ma", "va", "mc", "muon"):
        node = f"tests/test_{block}_cocotb.py::test_{block}[verilator-a]"
        nodes.append(node)
        tests[node] = {"seconds": 40.0, "builds": [f"{block}-x-verilator"]}
    for index in range(40):
        node = f"tests/test_unit.py::test_{index}"
        nodes.append(node)
        tests[node] = {"seconds": 1.0, "builds": []}
    builds = {f"{block}-x-verilator": 60.0 for block in ("ma", "va", "mc", "muon")}
    plan = shards.plan(nodes, tests, builds, 2, ())
    assert sorted(plan.loads) == [220.0, 220.0]
    assert plan.build_seconds == [120.0, 120.0]


SPLITS = 3


def test_shards_run_every_test_exactly_once(tmp_path):
    """`make test SHARD=k/3` for k = 1, 2, 3 (collection only, one process): each test of
    `make test`'s selection in exactly one shard, the shard its plan says, and every
    build key (each simulator build) in one shard only."""
    _pytest_split()
    out = tmp_path / "shards.json"
    run = subprocess.run([sys.executable, "-m", "sim.shards", "--splits", str(SPLITS),
                          "--json", str(out)], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"each in exactly one of {SPLITS} shards" in run.stdout
    data = json.loads(out.read_text())
    everything, parts, plan = data["all"], data["shards"], data["plan"]["tests"]
    assert everything and len(parts) == SPLITS and all(parts)
    counts = defaultdict(int)
    for nodes in parts:
        for node in nodes:
            counts[node] += 1
    assert sorted(counts) == sorted(everything)
    assert [node for node, n in counts.items() if n != 1] == []
    for k, nodes in enumerate(parts, 1):
        assert all(plan[node]["shard"] == k for node in nodes)
    where = defaultdict(set)
    for entry in plan.values():
        for key in entry["keys"]:
            where[key].add(entry["shard"])
    assert where and all(len(s) == 1 for s in where.values()), dict(where)
    # the conformance test of each block is in the shard of the block's own tests
    for simulator in ("icarus", "verilator"):
        own = plan[f"tests/test_ma_cocotb.py::test_ma[{simulator}-ctr_and_time]"]["shard"]
        assert plan[f"tests/test_conformance_cocotb.py::test_conformance[{simulator}-ma]"]["shard"] == own


def test_check_finds_a_test_run_twice_or_never():
    plan = {"tests": {"a": {"shard": 1, "keys": ["ma-verilator"]},
                      "b": {"shard": 2, "keys": ["ma-verilator"]},
                      "c": {"shard": 2, "keys": []}}}
    problems = shards.check(["a", "b", "c", "d"], [["a", "c"], ["b", "c"]], plan)
    assert "in no shard: d" in problems
    assert "in 2 shards: c" in problems
    assert "in shard 1, planned for 2: c" in problems
    assert "build key ma-verilator in shards [1, 2]" in problems
