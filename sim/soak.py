"""``make soak``: the regression again and again with new seeds, for a given time.

Each round runs pytest (by default `make test`'s selection) with a new
``V4HW_SEED_SALT``, so every random test draws a seed it has not drawn before
(:mod:`sim.seed`); the performance figures are then shown, not checked
(:mod:`sim.perf`). Every failure is appended to ``build/soak/failures.jsonl`` (test id,
seed, salt, round, the failure's message) as it happens (this module is also the
pytest plugin that writes it, ``-p sim.soak``), and listed at the end with the command that reruns it:
``V4HW_SEED=<seed> python -m pytest '<test id>'``. Each round's pytest output is kept
in ``build/soak/round-<n>.log``.

Usage: ``python -m sim.soak --minutes 30 [--jobs N] [--out DIR] [-- pytest arguments]``.
A round that has begun when the time is up runs to its end.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from .seed import SALT_VARIABLE, default_seed, rerun_command

REPO_ROOT = Path(__file__).resolve().parent.parent
SOAK_DIR = REPO_ROOT / "build" / "soak"
LOG_VARIABLE = "V4HW_SOAK_LOG"
ROUND_VARIABLE = "V4HW_SOAK_ROUND"
DEFAULT_ARGS = ["-m", "not regress"]


def _jobs():
    return max(1, min(4, os.cpu_count() or 1))


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m sim.soak", description=__doc__.split("\n")[0])
    time_group = parser.add_mutually_exclusive_group(required=True)
    time_group.add_argument("--minutes", type=float, help="how long to start new rounds")
    time_group.add_argument("--hours", type=float, help="the same in hours")
    parser.add_argument("--jobs", type=int, default=_jobs(), help="pytest-xdist workers")
    parser.add_argument("--rounds", type=int, default=None, help="stop after this many rounds")
    parser.add_argument("--out", type=Path, default=SOAK_DIR,
                        help="where the logs go (default: build/soak)")
    parser.add_argument("pytest_args", nargs="*",
                        help=f"pytest arguments (after --); default: {' '.join(DEFAULT_ARGS)}")
    args = parser.parse_args(argv)
    minutes = args.minutes if args.minutes is not None else 60 * args.hours
    if not minutes > 0:
        parser.error("the duration must be positive")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")
    args.seconds = 60 * minutes
    return args


def read_failures(log):
    try:
        lines = Path(log).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    out_dir = args.out.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    log = out_dir / "failures.jsonl"
    log.unlink(missing_ok=True)
    deadline = time.monotonic() + args.seconds
    pytest_args = args.pytest_args or DEFAULT_ARGS
    rounds, status = 0, 0
    draw = random.SystemRandom()
    while time.monotonic() < deadline and (args.rounds is None or rounds < args.rounds):
        rounds += 1
        salt = draw.getrandbits(32)
        env = dict(os.environ, **{SALT_VARIABLE: str(salt), LOG_VARIABLE: str(log),
                                  ROUND_VARIABLE: str(rounds)})
        env.pop("V4HW_SEED", None)
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "sim.soak", "-q",
                   "-n", str(args.jobs), "--dist", "worksteal", *pytest_args]
        output = out_dir / f"round-{rounds}.log"
        started = time.monotonic()
        with open(output, "w") as out:
            status = subprocess.call(command, cwd=REPO_ROOT, env=env, stdout=out,
                                     stderr=subprocess.STDOUT)
        failed = sum(1 for f in read_failures(log) if f["round"] == rounds)
        print(f"soak round {rounds}: salt {salt}, pytest exit {status}, {failed} failure(s), "
              f"{time.monotonic() - started:.0f} s ({output})",
              flush=True)
        if status not in (0, 1):      # 1: tests failed; anything else: pytest could not run
            print(f"soak: pytest exited with {status}; see {output}", flush=True)
            break
    failures = read_failures(log)
    print(f"soak: {rounds} round(s), {len(failures)} failure(s)")
    for failure in failures:
        print(f"  round {failure['round']}: {failure['node']}\n"
              f"    rerun: {rerun_command(failure['node'], failure['seed'])}\n"
              f"    {failure['message']}")
    return 1 if failures or status not in (0, 1) else 0


# --- The pytest plugin (-p sim.soak) --------------------------------------------------------

class _FailureLog:
    def __init__(self, path):
        self.path = path

    def pytest_runtest_logreport(self, report):
        if not report.failed:
            return
        salt = os.environ.get(SALT_VARIABLE, "").strip()
        salt = str(int(salt, 0)) if salt else ""
        lines = [line.strip() for line in report.longreprtext.splitlines() if line.strip()]
        message = " | ".join(line for line in lines if line.startswith("E "))
        entry = {"node": report.nodeid, "when": report.when, "salt": salt,
                 "seed": default_seed(report.nodeid, salt),
                 "round": int(os.environ.get(ROUND_VARIABLE, "0")),
                 "message": (message or (lines[-1] if lines else report.outcome))[:2000]}
        with open(self.path, "a") as log:
            log.write(json.dumps(entry) + "\n")


def pytest_configure(config):
    # The controller (or a run without xdist) writes; the workers' reports reach it.
    if not hasattr(config, "workerinput") and os.environ.get(LOG_VARIABLE):
        config.pluginmanager.register(_FailureLog(os.environ[LOG_VARIABLE]), "v4hw-soak-log")


if __name__ == "__main__":
    sys.exit(main())
