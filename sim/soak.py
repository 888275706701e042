"""``make soak``: random tests over many new seeds, or the regression in rounds of new seeds.

**Seeds** (``python -m sim.soak --seeds 1000 [--blocks ma,va,mc,muon,tile] [--tests NAME,...]
[--jobs N] [--per-process K] [--minutes M]``): each selected test of :data:`SOAK_TESTS`
(a block's randomized cocotb test) runs over that many new seeds on Verilator, on the
build ``make test`` uses for it (its test module's ``cocotb_args``), ``--per-process``
seeds (default 100) in one simulator process (:mod:`sim.soak_tb`: a cocotb test a seed,
the design reset between them), ``--jobs`` processes at a time (default: the cores).
The seeds are drawn from ``--salt`` (printed; the same salt draws the same seeds);
``--seed-list 1,2,3`` runs given ones. ``--minutes`` stops starting simulations after that
time (a started one runs to its end). The end prints, per test, the seeds run, the
failures and the rate, and for each failure its seed, its message and the command that
reruns it alone (``V4HW_SEED=<seed> python -m pytest '<make test's node id>'``, and the
soak's own form); ``<out>/soak.xml`` has a JUnit test case per seed, ``<out>/seeds.jsonl``
every seed's outcome, ``<out>/<test>-<n>.log`` each simulation's output. A simulator that
dies fails the seed it was running; the seeds after it run in a new process.

**Rounds** (``python -m sim.soak --minutes 30 [--jobs N] [--out DIR] [-- pytest arguments]``,
no ``--seeds``): each round runs pytest (by default `make test`'s selection) with a new
``V4HW_SEED_SALT``, so every random test draws a seed it has not drawn before
(:mod:`sim.seed`); the performance figures are then shown, not checked
(:mod:`sim.perf`). Every failure is appended to ``build/soak/failures.jsonl`` (test id,
seed, salt, round, the failure's message) as it happens (this module is also the
pytest plugin that writes it, ``-p sim.soak``), and listed at the end with the command that reruns it:
``V4HW_SEED=<seed> python -m pytest '<test id>'``. Each round's pytest output is kept
in ``build/soak/round-<n>.log``. A round that has begun when the time is up runs to its end.
"""

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from importlib import import_module
from itertools import zip_longest
from pathlib import Path
from xml.etree import ElementTree

from .seed import SALT_VARIABLE, default_seed, rerun_command

REPO_ROOT = Path(__file__).resolve().parent.parent
SOAK_DIR = REPO_ROOT / "build" / "soak"
LOG_VARIABLE = "V4HW_SOAK_LOG"
ROUND_VARIABLE = "V4HW_SOAK_ROUND"
DEFAULT_ARGS = ["-m", "not regress"]
PER_PROCESS = 100


@dataclass(frozen=True)
class SoakTest:
    """One randomized cocotb test of a block, as ``make soak`` runs it.

    ``module``'s ``cocotb_args("verilator", *args)`` gives the build and run (those of
    ``make test``); ``bench``.``test`` is the cocotb test; ``node`` is the pytest node id
    that runs it once in ``make test`` (``V4HW_SEED=<seed>`` reruns a seed there);
    ``sim_limit_ms``: simulated time after which a seed fails as hung (many times a
    seed's usual time)."""
    block: str
    test: str
    module: str
    args: tuple
    node: str
    sim_limit_ms: float

    @property
    def name(self):
        return f"{self.block}.{self.test}"


SOAK_TESTS = [
    SoakTest("ma", "gemm_random", "tests.test_ma_cocotb", (),
             "tests/test_ma_cocotb.py::test_ma[verilator-gemm_random]", 20),
    SoakTest("va", "backpressure", "tests.test_va_cocotb", (),
             "tests/test_va_cocotb.py::test_va[verilator-backpressure]", 5),
    SoakTest("mc", "random_traffic", "tests.test_mc_cocotb", ("default",),
             "tests/test_mc_cocotb.py::test_mc[verilator-random_traffic]", 5),
    SoakTest("muon", "random_traffic_backpressure", "tests.test_muon_cocotb", (2, 2),
             "tests/test_muon_cocotb.py::test_muon[verilator-2x2-random_traffic_backpressure]",
             1),
    SoakTest("tile", "random_traffic", "tests.test_tile_cocotb", (),
             "tests/test_tile_cocotb.py::test_tile_verilator[random_traffic]", 5),
]
"""The soak's tests: each block's main randomized test (``make test`` runs each once,
with its recorded seed). A seed of each simulates about 0.6 to 0.9 ms (MA), 0.12 ms
(VA), 0.06 ms (MC), 0.01 ms (Muon) and 0.03 to 0.1 ms (the tile): the limits are more than 20
times that."""

BLOCKS = tuple(dict.fromkeys(t.block for t in SOAK_TESTS))


def _jobs():
    return max(1, os.cpu_count() or 1)


def _names(text, known, what):
    names = [name for name in re.split(r"[,\s]+", text) if name]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise ValueError(f"unknown {what} {', '.join(unknown) or repr(text)}; "
                         f"known: {', '.join(known)}")
    return names


def _seed_list(text):
    try:
        seeds = [int(s, 0) for s in text.split(",") if s.strip()]
    except ValueError:
        seeds = []
    if not seeds or any(not 0 <= s < 1 << 32 for s in seeds):
        raise ValueError(f"--seed-list takes comma-separated seeds in 0..2**32-1, not {text!r}")
    return seeds


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m sim.soak", description=__doc__.split("\n")[0])
    time_group = parser.add_mutually_exclusive_group()
    time_group.add_argument("--minutes", type=float, help="how long to start new rounds "
                            "(with --seeds: new simulations)")
    time_group.add_argument("--hours", type=float, help="the same in hours")
    seeds_group = parser.add_mutually_exclusive_group()
    seeds_group.add_argument("--seeds", type=int, help="new seeds per test (the seeds form)")
    seeds_group.add_argument("--seed-list", help="these seeds (comma-separated) per test")
    parser.add_argument("--blocks", help=f"blocks of the seeds form (default: {','.join(BLOCKS)})")
    parser.add_argument("--tests", help="tests of the seeds form: "
                        + ", ".join(t.name for t in SOAK_TESTS))
    parser.add_argument("--salt", type=int, help="draws the seeds (default: a new one)")
    parser.add_argument("--per-process", type=int, default=PER_PROCESS,
                        help=f"seeds per simulator process (default {PER_PROCESS})")
    parser.add_argument("--jobs", type=int, default=_jobs(),
                        help="simulator processes (seeds) or pytest-xdist workers (rounds)")
    parser.add_argument("--rounds", type=int, default=None, help="stop after this many rounds")
    parser.add_argument("--out", type=Path, default=SOAK_DIR,
                        help="where the logs go (default: build/soak)")
    parser.add_argument("pytest_args", nargs="*",
                        help=f"pytest arguments (after --); default: {' '.join(DEFAULT_ARGS)}")
    args = parser.parse_args(argv)
    args.seeds_form = args.seeds is not None or args.seed_list is not None
    minutes = args.minutes if args.minutes is not None else (
        60 * args.hours if args.hours is not None else None)
    if minutes is None and not args.seeds_form:
        parser.error("give --seeds (or --seed-list), or --minutes or --hours for rounds")
    if minutes is not None and not minutes > 0:
        parser.error("the duration must be positive")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")
    args.seconds = None if minutes is None else 60 * minutes
    if args.seeds_form:
        if args.pytest_args or args.rounds is not None:
            parser.error("pytest arguments and --rounds belong to the rounds form (no --seeds)")
        if args.seeds is not None and args.seeds < 1:
            parser.error("--seeds must be at least 1")
        if args.per_process < 1:
            parser.error("--per-process must be at least 1")
        if args.salt is not None and args.salt < 0:
            parser.error("--salt must be a non-negative integer")
        try:
            if args.seed_list is not None:
                args.seed_list = _seed_list(args.seed_list)
            blocks = _names(args.blocks, BLOCKS, "block(s)") if args.blocks else BLOCKS
            names = _names(args.tests, [t.name for t in SOAK_TESTS], "test(s)") \
                if args.tests else None
        except ValueError as error:
            parser.error(str(error))
        args.selected = [t for t in SOAK_TESTS if t.block in blocks
                         and (names is None or t.name in names)]
        if not args.selected:
            parser.error("no test of the chosen blocks is among --tests")
    elif any(v is not None for v in (args.blocks, args.tests, args.salt)):
        parser.error("--blocks, --tests and --salt belong to the seeds form (--seeds)")
    return args


# --- The seeds form -------------------------------------------------------------------------

def draw_seeds(salt, test, count):
    """``count`` distinct 32-bit seeds of ``test`` (a :class:`SoakTest`) drawn from ``salt``."""
    return random.Random(f"{salt}\0{test.name}").sample(range(1 << 32), count)


def soak_rerun(test, seed):
    """The soak's command that reruns one seed of ``test`` alone."""
    return f"python -m sim.soak --tests {test.name} --seed-list {seed}"


def _run_args(test):
    return import_module(test.module).cocotb_args("verilator", *test.args)


def _run_chunk(test, args, seeds, index, out_dir):
    """One simulator process: ``seeds`` of ``test``. Runs in a worker process, its output
    in ``<out>/<test>-<index>.log``; returns what went wrong ("" if nothing but failed
    seeds)."""
    from .runner import CocotbTestFailure, run_cocotb

    log_path = out_dir / f"{test.name}-{index}.log"
    seeds_log = out_dir / f"{test.name}-{index}.jsonl"
    seeds_log.unlink(missing_ok=True)
    with open(log_path, "w") as out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
    sys.stdout = open(1, "w", closefd=False, buffering=1)
    sys.stderr = open(2, "w", closefd=False, buffering=1)
    args = dict(args)
    env = dict(args.pop("extra_env", None) or {})
    env.update(V4HW_PYTEST_NODE=test.node, V4HW_SOAK_MODULE=args["test_module"],
               V4HW_SOAK_TEST=test.test, V4HW_SOAK_SEEDS=",".join(map(str, seeds)),
               V4HW_SOAK_LOG=str(seeds_log), V4HW_SOAK_SIM_LIMIT_MS=f"{test.sim_limit_ms:g}")
    args["test_module"] = "sim.soak_tb"
    args["timeout_s"] = args["timeout_s"] * len(seeds)
    try:
        run_cocotb("verilator", **args, extra_env=env, run_name=f"soak-{test.name}-{index}")
    except CocotbTestFailure:
        return ""
    except Exception as error:        # a crash, a timeout: the seeds' log tells which seed
        return f"{type(error).__name__}: {error}"
    return ""


def _read_seeds(path):
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def _outcomes(test, seeds, entries, problem, index):
    """``(outcome per seed that ran, seeds that did not start)``: a seed that started and
    did not end failed with the simulation's problem."""
    ended = {e["seed"]: e for e in entries if e["event"] == "end"}
    started = [e["seed"] for e in entries if e["event"] == "start"]
    outcomes = []
    for seed in started:
        entry = ended.get(seed) or dict(seed=seed, passed=False, wall_s=None, sim_ns=None,
                                        message="the simulation ended during this seed: "
                                        + (problem or "no end was logged"))
        outcomes.append(dict(entry, test=test.name, process=index))
    return outcomes, [s for s in seeds if s not in set(started)]


def _junit(path, tests, outcomes):
    suites = ElementTree.Element("testsuites", name="make soak")
    for test in tests:
        mine = [o for o in outcomes if o["test"] == test.name]
        failed = [o for o in mine if not o["passed"]]
        suite = ElementTree.SubElement(
            suites, "testsuite", name=test.name, tests=str(len(mine)), failures=str(len(failed)),
            errors="0", time=f"{sum(o['wall_s'] or 0 for o in mine):.3f}")
        for o in mine:
            case = ElementTree.SubElement(suite, "testcase", classname=f"soak.{test.name}",
                                          name=f"seed={o['seed']}",
                                          time=f"{o['wall_s'] or 0:.3f}")
            if not o["passed"]:
                failure = ElementTree.SubElement(case, "failure",
                                                 message=o["message"].splitlines()[0][:500]
                                                 if o["message"] else "failed")
                failure.text = (f"{o['message']}\n\nrerun: {rerun_command(test.node, o['seed'])}"
                                f"\nor: {soak_rerun(test, o['seed'])}\n")
    ElementTree.indent(suites)
    ElementTree.ElementTree(suites).write(path, encoding="unicode", xml_declaration=True)


def soak_seeds(args):
    out_dir = args.out.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    salt = args.salt if args.salt is not None else random.SystemRandom().getrandbits(32)
    tests = args.selected
    seeds = {t.name: list(args.seed_list) if args.seed_list is not None
             else draw_seeds(salt, t, args.seeds) for t in tests}
    if args.seed_list is None:
        print(f"soak: {args.seeds} seed(s) of {', '.join(t.name for t in tests)} "
              f"(salt {salt}; --salt {salt} draws them again)", flush=True)
    # The Verilog is generated here once; the workers (forked) inherit it.
    run_args = {t.name: _run_args(t) for t in tests}
    deadline = None if args.seconds is None else time.monotonic() + args.seconds
    chunks = []
    for t in tests:
        per = args.per_process
        if len(tests) == 1:       # one test: spread its seeds over the processes
            per = min(per, math.ceil(len(seeds[t.name]) / args.jobs))
        chunks.append([(t, seeds[t.name][i:i + per]) for i in range(0, len(seeds[t.name]), per)])
    # The tests take turns, so each makes progress from the start.
    queue = [item for turn in zip_longest(*chunks) for item in turn if item is not None]
    outcomes, not_run, counter = [], [], {t.name: 0 for t in tests}
    seeds_log = out_dir / "seeds.jsonl"
    seeds_log.unlink(missing_ok=True)
    started = time.monotonic()
    running = {}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        while queue or running:
            while queue and len(running) < args.jobs:
                if deadline is not None and time.monotonic() >= deadline:
                    not_run += [(t, s, "time") for t, chunk in queue for s in chunk]
                    queue = []
                    break
                test, chunk = queue.pop(0)
                counter[test.name] += 1
                index = counter[test.name]
                future = pool.submit(_run_chunk, test, run_args[test.name], chunk, index, out_dir)
                running[future] = (test, chunk, index, time.monotonic())
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                test, chunk, index, began = running.pop(future)
                try:
                    problem = future.result()
                except Exception as error:   # the worker itself died
                    problem = f"{type(error).__name__}: {error}"
                entries = _read_seeds(out_dir / f"{test.name}-{index}.jsonl")
                mine, rest = _outcomes(test, chunk, entries, problem, index)
                outcomes += mine
                with open(seeds_log, "a") as log:
                    for o in mine:
                        log.write(json.dumps(o) + "\n")
                failed = sum(1 for o in mine if not o["passed"])
                seconds = time.monotonic() - began
                print(f"soak {test.name} #{index}: {len(mine)} seed(s), {failed} failed, "
                      f"{seconds:.0f} s ({out_dir / f'{test.name}-{index}.log'})"
                      + (f"; {problem}" if problem else ""), flush=True)
                if rest and mine:         # it died in a seed: the rest in a new process
                    queue.insert(0, (test, rest))
                elif rest:
                    not_run += [(test, s, "error") for s in rest]
    wall = time.monotonic() - started
    _junit(out_dir / "soak.xml", tests, outcomes)
    print(f"soak: {len(outcomes)} seed(s) in {wall / 60:.1f} min "
          f"({60 * len(outcomes) / wall:.1f} seeds/min), {args.jobs} process(es) at a time")
    status = 0
    for t in tests:
        mine = [o for o in outcomes if o["test"] == t.name]
        failed = [o for o in mine if not o["passed"]]
        late = sum(1 for x, _, why in not_run if x is t and why == "time")
        lost = sum(1 for x, _, why in not_run if x is t and why == "error")
        if lost:
            status = 1
        busy = sum(o["wall_s"] or 0 for o in mine)
        rate = f", {60 * len(mine) / busy:.1f} seeds/min a process" if busy else ""
        print(f"  {t.name}: {len(mine)} seed(s) run, {len(failed)} failed"
              + (f", {late} not run (the time was up)" if late else "")
              + (f", {lost} not run (their simulation did not start a seed: see above)"
                 if lost else "") + rate)
        for o in failed:
            status = 1
            print(f"    seed {o['seed']}: {o['message'].splitlines()[0] if o['message'] else 'failed'}\n"
                  f"      rerun: {rerun_command(t.node, o['seed'])}\n"
                  f"      or:    {soak_rerun(t, o['seed'])}")
    print(f"soak: JUnit XML {out_dir / 'soak.xml'}; every seed's outcome {seeds_log}")
    if not outcomes:
        status = 1
    return status


# --- The rounds form ------------------------------------------------------------------------

def read_failures(log):
    try:
        lines = Path(log).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.seeds_form:
        return soak_seeds(args)
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
