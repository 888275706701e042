"""``make soak`` (``sim/soak.py``): rounds with new seeds, every failure saved with the
seed that reruns it."""

import random
import re

import pytest

from sim import soak
from sim.seed import default_seed

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
