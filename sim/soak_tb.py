"""cocotb side of ``make soak``'s seeds form: one random test over many seeds in one
simulation (:mod:`sim.soak` starts it).

The environment names the test and the seeds:

``V4HW_SOAK_MODULE``, ``V4HW_SOAK_TEST``
    The cocotb test module and test (``tests.ma_tb``, ``gemm_random``) whose body runs.
``V4HW_SOAK_SEEDS``
    The seeds, comma-separated, in the order they run.
``V4HW_SOAK_LOG``
    A JSON-lines file: a ``start`` line before each seed, an ``end`` line after it
    (``passed``, the failure's message, simulated and wall time), written as they happen,
    so a simulator that dies leaves the seed it died in.
``V4HW_SOAK_SIM_LIMIT_MS``
    Simulated time a seed may take (ms) before it fails as hung; unset: no limit.

Each seed is a cocotb test of its own (``gemm_random/seed=<N>``), so cocotb ends every
task the previous one started (its clock, bus models, monitors) and reports each seed in
``results.xml``; the body starts its bench anew, which drives reset and starts the clock,
so the design is reset between seeds (``ap_clk`` is first driven low, so the clock starts
with a rising edge as at time 0, and the seed runs cycle for cycle as in a simulation of
its own). The body draws from the seed as in a run of
``make test`` with ``V4HW_SEED=<N>``: :func:`sim.seed.test_seed` returns
``random.Random(N)`` (the seed is forced, :func:`sim.seed.forced_seed`), and the module
``random`` is seeded the way cocotb seeds it for that test in a simulation of its own.
"""

import hashlib
import json
import os
import random
import time
from importlib import import_module

import cocotb
from cocotb.triggers import Timer
from cocotb.utils import get_sim_time

from .seed import forced_seed

_MODULE = os.environ.get("V4HW_SOAK_MODULE", "")
_TEST = os.environ.get("V4HW_SOAK_TEST", "")
_SEEDS = [int(s) for s in os.environ.get("V4HW_SOAK_SEEDS", "").split(",") if s.strip()]
_LOG = os.environ.get("V4HW_SOAK_LOG", "")
_LIMIT = os.environ.get("V4HW_SOAK_SIM_LIMIT_MS", "").strip()


def _log(**entry):
    if _LOG:
        with open(_LOG, "a") as log:
            log.write(json.dumps(entry) + "\n")


def _message(error):
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _body():
    generator = getattr(import_module(_MODULE), _TEST, None)
    func = getattr(generator, "func", None)
    if func is None:
        raise ValueError(f"{_MODULE} has no cocotb test {_TEST!r}")
    return func


if _MODULE and _TEST and _SEEDS:
    _FUNC = _body()
    # cocotb seeds `random` per test with COCOTB_RANDOM_SEED plus a hash of the test's
    # full name (cocotb.regression); the test's own simulation has the seed as the former.
    _NAME_HASH = int(hashlib.sha1(f"{_MODULE}.{_TEST}".encode()).hexdigest(), 16)

    @cocotb.test(name=_TEST, timeout_time=float(_LIMIT) if _LIMIT else None,
                 timeout_unit="ms")
    @cocotb.parametrize(seed=_SEEDS)
    async def soak(dut, seed):
        started, test_started = time.monotonic(), get_sim_time("ns")
        # The previous seed's clock may have stopped high: drive it low first, so that the
        # body's clock starts with a rising edge, as at time 0 of a simulation of its own
        # (else every edge would come a cycle later than in make test's run of the seed).
        clock = getattr(dut, "ap_clk", None)
        if clock is not None:
            clock.value = 0
            await Timer(1, "ns")
        sim_started = get_sim_time("ns")
        random.seed(seed + _NAME_HASH)
        _log(event="start", seed=seed)
        entry = dict(event="end", seed=seed, passed=True, message="")
        try:
            with forced_seed(seed):
                await _FUNC(dut)
        except BaseException as error:
            entry.update(passed=False, message=_message(error))
            raise
        finally:
            now = get_sim_time("ns")
            sim_ns = now - sim_started
            if not entry["passed"] and _LIMIT and now - test_started >= 1e6 * float(_LIMIT):
                entry["message"] = (f"hung: the seed did not end within {_LIMIT} ms of "
                                    f"simulated time ({entry['message']})")
            entry.update(wall_s=round(time.monotonic() - started, 3), sim_ns=round(sim_ns))
            _log(**entry)
