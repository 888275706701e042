"""Functional coverage (``sim/fcov.py``) and its merge and report (``sim/coverage.py``):
the figures are those of the records sampled, counted here independently."""

import json
import os
import random
import subprocess
import sys
from collections import Counter

import pytest
import yaml

from sim import coverage, fcov
from sim.runner import REPO_ROOT
from spec.va import MAX_LENGTH

SAMPLE = """
import json, sys
from sim import fcov
for block, group, record in json.loads(sys.argv[2]):
    fcov.sample(block, group, **record)
print(fcov.export(sys.argv[1]))
"""


def _run_samples(path, records, *, enabled=True):
    """Sample ``records`` ([(block, group, {point: value})]) in a process of its own (a
    fresh cocotb-coverage database, as a simulation has) and export it to ``path``."""
    env = dict(os.environ)
    env.pop(fcov.ENV, None)
    if enabled:
        env[fcov.ENV] = "1"
    result = subprocess.run([sys.executable, "-c", SAMPLE, str(path), json.dumps(records)],
                            cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def _random_mc(rng, count):
    spec = fcov._model_table()["mc"]["points"]
    records = []
    for _ in range(count):
        record = {name: rng.choice(bins) for name, bins in spec.items()}
        record["bp"] = record["bp"] == "on"
        records.append(("mc", None, record))
    return records


def test_merged_report_counts_the_samples(tmp_path):
    rng = random.Random(7)
    runs = [_random_mc(rng, 40), _random_mc(rng, 25)
            + [("muon", "rsv", {"answer": "full"})] * 3]
    files = []
    for index, records in enumerate(runs):
        path = tmp_path / f"run{index}" / fcov.DB_NAME
        path.parent.mkdir()
        assert _run_samples(path, records) == str(path)
        files.append(path)
    text, figures = coverage.functional_report(out_root=tmp_path / "out", databases=files)

    # Count the bins by hand: every point's value, every cross's pair not ignored.
    spec = fcov._model_table()["mc"]
    hits = Counter()
    for _, _, record in (r for run in runs for r in run if r[0] == "mc"):
        values = dict(record, bp=fcov.BP[record["bp"]])
        for name in spec["points"]:
            hits[f"mc.{name}", str(values[name])] += 1
        for a, b in spec["crosses"]:
            pair = (values[a], values[b])
            if pair not in spec["ignore"].get((a, b), ()):
                hits[f"mc.{a}_x_{b}", str(pair)] += 1
    total = sum(len(bins) for bins in fcov.model_bins("mc").values())
    assert figures["mc"] == (len(hits), total)
    assert figures["muon"] == (1, sum(len(b) for b in fcov.model_bins("muon").values())
                               + len(fcov.model_bins("muon", "rsv")["muon.rsv.answer"]))
    assert "va" not in figures and "va: no samples" in text

    merged = yaml.safe_load((tmp_path / "out" / "functional" / "merged.yml").read_text())
    for (name, label), count in hits.items():
        assert {str(k): v for k, v in merged[name]["bins:_hits"].items()}[label] == count
    assert merged["muon.rsv.answer"]["bins:_hits"]["full"] == 3
    # every bin never hit is listed as a hole, and only those
    lines = (tmp_path / "out" / "functional.txt").read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("mc: bins"))
    end = next((i for i in range(first + 1, len(lines)) if not lines[i].startswith(" ")),
               len(lines))
    section = lines[first:end]
    for name, bins in fcov.model_bins("mc").items():
        holes = [coverage._bin_label(b) for b in bins if (name, str(b)) not in hits]
        line = next((line for line in section
                     if line.startswith(f"  holes of {name.removeprefix('mc.')} (")), None)
        if holes:
            assert line == f"  holes of {name.removeprefix('mc.')} ({len(holes)}): " + ", ".join(holes)
        else:
            assert line is None


def test_off_samples_nothing_and_bad_values_fail(tmp_path):
    path = tmp_path / fcov.DB_NAME
    record = [("ma", None, {"mode": "INT8", "accumulate": False, "shape": "=P",
                            "code": "NONE", "bp": False})]
    assert _run_samples(path, record, enabled=False) == "None"
    assert not path.exists()
    with pytest.raises(AssertionError, match="mode = 'INT9' is in no bin"):
        _run_samples(path, [("ma", None, dict(record[0][2], mode="INT9"))])
    with pytest.raises(AssertionError, match="samples"):
        _run_samples(path, [("ma", None, {"mode": "INT8"})])


def test_a_database_of_another_model_is_left_out(tmp_path):
    good, old = tmp_path / "good.yml", tmp_path / "old.yml"
    _run_samples(good, [("muon", "rsv", {"answer": "retry"})])
    db = yaml.safe_load(good.read_text())
    db["muon.rsv.answer"]["bins:_hits"]["refused"] = 1   # a bin the model no longer has
    old.write_text(yaml.safe_dump(db))
    text, figures = coverage.functional_report(out_root=tmp_path / "out",
                                               databases=[good, old])
    assert "1 of an older model left out" in text
    assert figures["muon"][0] == 1
    with pytest.raises(SystemExit, match="older model"):
        coverage.functional_report(out_root=tmp_path / "out", databases=[old])


def test_length_classes_meet_their_bounds():
    p, lanes, word, line = 8, 8, 16, 64
    assert [fcov.ma_shape_class(*s, p) for s in
            [(0, 1, 1), (1, 1, 1), (1, 7, 3), (8, 8, 1), (16, 8, 24), (9, 8, 8),
             (128, 1, 1), (129, 1, 1)]] == ["bad", "1x1x1", "<P", "=P", "kP", "ragged",
                                            "max", "bad"]
    assert [fcov.va_length_class(n, lanes, MAX_LENGTH) for n in
            [0, 1, 7, 8, 16, 17, fcov.VA_LONG, fcov.VA_LONG + 1, MAX_LENGTH,
             MAX_LENGTH + 1]] == ["bad", "1", "<L", "L", "kL", "ragged", "kL", "long", "max",
                                  "bad"]
    assert [fcov.mc_length_class(n, word, line) for n in [0, 1, 15, 16, 17, 63, 64, 4096]] \
        == ["0", "1", "<word", "word", "<line", "<line", ">=line", ">=line"]
    assert [fcov.muon_length_class(n) for n in [1, 2, 3, 4, 8]] == ["1", "2-3", "2-3", "4+", "4+"]
    # every class is a bin of its model
    for block, point, classes in (("ma", "shape", fcov.MA_SHAPES), ("va", "length", fcov.VA_LENGTHS),
                                  ("mc", "length", fcov.MC_LENGTHS),
                                  ("muon", "length", fcov.MUON_LENGTHS)):
        assert fcov._model_table()[block]["points"][point] == classes

