"""The processor-time plugin (``sim/cputime.py``): a subprocess's processor seconds are
counted to the test that waited for it, a failure is recorded as one, and the summary
adds them up per file."""

import json
import os
import subprocess
import sys

from sim import cputime
from sim.runner import REPO_ROOT

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n"


def test_a_subprocess_is_counted_to_its_test(tmp_path):
    (tmp_path / "test_sample.py").write_text(
        "import subprocess, sys\n"
        f"BURN = {BURN!r}\n"
        "def test_burns():\n"
        "    subprocess.run([sys.executable, '-c', BURN], check=True)\n"
        "def test_fails():\n"
        "    assert False\n"
        "def test_idle():\n"
        "    pass\n")
    log = tmp_path / "cpu.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "sim.cputime", "-p", "no:cacheprovider",
         "-c", "/dev/null", "--rootdir", str(tmp_path), str(tmp_path / "test_sample.py")],
        cwd=REPO_ROOT, capture_output=True, text=True,
        env={**os.environ, cputime.LOG_VARIABLE: str(log),
             "PYTHONPATH": str(REPO_ROOT)})
    assert result.returncode == 1, result.stdout + result.stderr
    records = {r["test"].split("::")[-1]: r for r in map(json.loads, log.read_text().splitlines())}
    assert set(records) == {"test_burns", "test_fails", "test_idle"}
    assert records["test_burns"]["cpu_children"] >= 0.55
    assert records["test_idle"]["cpu_children"] < 0.05
    assert records["test_fails"]["outcome"] == "failed"
    assert records["test_burns"]["outcome"] == records["test_idle"]["outcome"] == "passed"


def test_summary_adds_up_per_file():
    records = [
        {"test": "tests/a.py::x", "outcome": "passed", "wall": 3.0, "cpu_own": 1.0, "cpu_children": 2.0},
        {"test": "tests/a.py::y", "outcome": "failed", "wall": 1.0, "cpu_own": 0.5, "cpu_children": 0.0},
        {"test": "tests/b.py::z", "outcome": "passed", "wall": 9.0, "cpu_own": 0.0, "cpu_children": 9.0},
    ]
    lines = cputime.summary(records, top=2)
    assert lines[0].startswith("3 tests, 12 processor seconds")
    files = [line.split() for line in lines[3:5]]
    assert files == [["9.0", "9.0", "1", "tests/b.py"], ["3.5", "4.0", "2", "tests/a.py"]]
    assert lines[-2].split()[-1] == "tests/b.py::z" and lines[-1].split()[2] == "tests/a.py::x"


def test_a_missing_log_is_one_line_and_exit_2(tmp_path, capsys):
    assert cputime.main([str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
