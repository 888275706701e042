"""``make soak`` (``sim/soak.py``): rounds with new seeds, every failure saved with the
seed that reruns it."""

import json
import random
import re
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from sim import soak
from sim.runner import ap_verilog
from sim.seed import default_seed
from tests.test_runner import TB, TOP, Counter

CASES = '''
from sim.seed import test_seed


def test_draws_and_fails():
    rng = test_seed()
    assert False, f"drew {rng.random()!r}"


def test_draws_and_passes():
    test_seed()
'''


def test_rounds_save_each_failure_with_its_seed(tmp_path, monkeypatch, capsys):
    cases = tmp_path / "test_cases.py"
    cases.write_text(CASES)
    out = tmp_path / "soak"
    monkeypatch.setenv("V4HW_SEED", "5")         # a soak round ignores it
    status = soak.main(["--minutes", "10", "--rounds", "2", "--jobs", "1", "--out", str(out),
                        "--", str(cases)])
    assert status == 1
    failures = soak.read_failures(out / "failures.jsonl")
    assert [f["round"] for f in failures] == [1, 2]
    assert all(f["node"].endswith("test_cases.py::test_draws_and_fails") for f in failures)
    assert failures[0]["salt"] != failures[1]["salt"]
    for failure in failures:
        # The saved seed is the one the test drew: it reruns the case.
        assert failure["seed"] == default_seed(failure["node"], failure["salt"])
        drawn = float(re.search(r"drew ([0-9.e-]+)", failure["message"])[1])
        assert drawn == random.Random(failure["seed"]).random()
        assert (out / f"round-{failure['round']}.log").is_file()
    text = capsys.readouterr().out
    assert "soak: 2 round(s), 2 failure(s)" in text
    assert f"rerun: V4HW_SEED={failures[0]['seed']} python -m pytest" in text


def test_arguments():
    with pytest.raises(SystemExit):
        soak.parse([])
    with pytest.raises(SystemExit):
        soak.parse(["--minutes", "0"])
    args = soak.parse(["--hours", "0.5", "--", "tests/test_x.py"])
    assert args.seconds == 1800 and args.pytest_args == ["tests/test_x.py"]


# --- The seeds form ---------------------------------------------------------------------------

SMOKE_NODE = "tests/test_soak.py::smoke"


def cocotb_args(simulator, crash="", hang=""):
    """The soak's build and run of the smoke counter (``tests/test_runner.py``'s build)."""
    return dict(verilog=ap_verilog(Counter(), TOP), toplevel=TOP, test_module=TB,
                config_name="runner-smoke", timeout_s=60,
                extra_env={"V4HW_SMOKE_SOAK_CRASH": crash, "V4HW_SMOKE_SOAK_HANG": hang})


def smoke_test(*args):
    return soak.SoakTest("smoke", "counter_soak", "tests.test_soak", args, SMOKE_NODE, 0.1)


@pytest.mark.cocotb
def test_seeds_many_per_process_each_failure_with_its_seed(tmp_path, monkeypatch, capsys):
    seeds = [default_seed("x", str(i)) for i in range(12)]
    crash, hang = seeds[2], seeds[9]
    bad = {s for s in seeds if random.Random(s).random() < 0.3} | {crash, hang}
    assert 0 < len(bad) < len(seeds)
    monkeypatch.setattr(soak, "SOAK_TESTS", [smoke_test(str(crash), str(hang))])
    monkeypatch.setattr(soak, "BLOCKS", ("smoke",))
    out = tmp_path / "soak"
    status = soak.main(["--seed-list", ",".join(map(str, seeds)), "--jobs", "2",
                        "--per-process", "8", "--out", str(out)])
    assert status == 1
    text = capsys.readouterr().out
    # Two processes of 6 seeds (the seeds spread over the jobs); the first ends at the
    # crash, the 3 seeds after it run in a third.
    assert len(re.findall(r"^soak smoke\.counter_soak #\d+:", text, re.MULTILINE)) == 3
    assert f"smoke.counter_soak: {len(seeds)} seed(s) run, {len(bad)} failed" in text
    for seed in bad:
        assert f"rerun: V4HW_SEED={seed} python -m pytest {SMOKE_NODE}" in text
        assert f"python -m sim.soak --tests smoke.counter_soak --seed-list {seed}" in text
    outcomes = {o["seed"]: o for o in map(json.loads, (out / "seeds.jsonl").read_text().splitlines())}
    assert sorted(outcomes) == sorted(seeds)
    assert {s for s, o in outcomes.items() if not o["passed"]} == bad
    assert "ended during this seed" in outcomes[crash]["message"]
    assert outcomes[hang]["message"].startswith("hung:")
    for seed in bad - {crash, hang}:
        assert f"seed {seed} fails on purpose" in outcomes[seed]["message"]
    suite = ElementTree.parse(out / "soak.xml").getroot().find("testsuite")
    assert suite.get("name") == "smoke.counter_soak"
    assert (suite.get("tests"), suite.get("failures")) == (str(len(seeds)), str(len(bad)))
    failed = {case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None}
    assert failed == {f"seed={s}" for s in bad}


def test_seeds_arguments():
    args = soak.parse(["--seeds", "10", "--blocks", "ma,mc"])
    assert [t.block for t in args.selected] == ["ma", "mc"] and args.seconds is None
    args = soak.parse(["--seed-list", "3,0x10", "--tests", "va.backpressure", "--minutes", "5"])
    assert args.seed_list == [3, 16] and [t.name for t in args.selected] == ["va.backpressure"]
    for bad in (["--seeds", "0"], ["--seeds", "5", "--blocks", "xx"], ["--seeds", "5", "--tests", "ma.x"],
                ["--seed-list", "1,-2"], ["--seeds", "5", "--per-process", "0"],
                ["--seeds", "5", "--blocks", "ma", "--tests", "va.backpressure"],
                ["--seeds", "5", "--", "tests/x.py"], ["--minutes", "5", "--blocks", "ma"],
                ["--seeds", "5", "--seed-list", "1"]):
        with pytest.raises(SystemExit):
            soak.parse(bad)


def test_seeds_draws():
    test = soak.SOAK_TESTS[0]
    seeds = soak.draw_seeds(7, test, 1000)
    assert len(set(seeds)) == 1000 and all(0 <= s < 1 << 32 for s in seeds)
    assert soak.draw_seeds(7, test, 1000) == seeds != soak.draw_seeds(8, test, 1000)


def test_soak_tests_run_make_tests_builds():
    """Every soak test names the node of ``make test`` that runs it once, and takes its
    build from that node's module (so the soak adds no build)."""
    modules = sorted({t.node.split("::")[0] for t in soak.SOAK_TESTS})
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                             "-p", "no:cacheprovider", *modules], cwd=soak.REPO_ROOT,
                            capture_output=True, text=True).stdout.split()
    for test in soak.SOAK_TESTS:
        assert test.node in listed, test.node
        assert test.node.endswith((f"-{test.test}]", f"[{test.test}]"))
        assert test.module.replace(".", "/") + ".py" == test.node.split("::")[0]
