"""cocotb module of ``v4hw demo``: one full 128×128×128 tile per mode on the MA top.

Runs, on the ``v4hw_ma`` top it is given (meant for Verilator; Icarus works, slowly),
an int8 and a bf16 tile of M = K = N = 128 with a memory latency of :data:`LATENCY`
cycles on reads and writes, through :class:`sim.ma_driver.MaBench` (so C is checked
against ``golden.ma.gemm`` bit for bit, and no byte outside C may change). For each
tile it prints the cycles from START to CTR (as :mod:`sim.ma_driver` defines them) and
the MAC utilization M·N·K / (P² · cycles).

If ``V4HW_DEMO_SUMMARY`` names a file, a JSON list is written there, one object per
tile with the keys ``mode`` ("int8" / "bf16"), ``m``, ``k``, ``n``, ``p``,
``data_width``, ``latency``, ``cycles`` (null if the tile did not finish), ``utilization``
(null likewise) and ``match`` (C equals the golden model and all checks passed). The
summary is written before the test fails, so it also reports a mismatch. Random
operands come from :func:`sim.seed.test_seed`.
"""

import json
import os
from pathlib import Path

import cocotb
import numpy as np

from golden.ma import TatEntry
from sim.ma_driver import MaBench
from sim.seed import test_seed
from spec.codes import MaMode

__all__ = ["LATENCY", "SHAPE", "SUMMARY_VARIABLE"]

LATENCY = 20
SHAPE = (128, 128, 128)
SUMMARY_VARIABLE = "V4HW_DEMO_SUMMARY"


def _operands(rng, mode, m, k, n):
    g = np.random.default_rng(rng.getrandbits(64))
    if mode == MaMode.INT8:
        return (g.integers(-128, 128, (m, k)).astype(np.int8),
                g.integers(-128, 128, (k, n)).astype(np.int8))
    # bf16 values of moderate size, both signs: finite sums with rounding at every step.
    def bf16(rows, cols):
        sign = g.integers(0, 2, (rows, cols)) << 15
        exponent = g.integers(127 - 6, 127 + 7, (rows, cols)) << 7
        return (sign | exponent | g.integers(0, 128, (rows, cols))).astype(np.uint16)
    return bf16(m, k), bf16(k, n)


@cocotb.test()
async def demo(dut):
    """An int8 and a bf16 128×128×128 tile: cycles, utilization, golden match."""
    rng = test_seed()
    bench = MaBench(dut, p=None, data_width=None, latency=LATENCY, rng=rng)
    await bench.start()
    m, k, n = SHAPE
    # One 2 GiB region of logical space on a physical base with high address bits.
    await bench.set_tat([TatEntry(True, 0, 19, 0x4000_0000_0000)])
    # A, B and C on their own 64 KiB-aligned areas, rows packed.
    addresses = dict(a_addr=0x0001_0000, b_addr=0x0002_0000, c_addr=0x0004_0000)
    summary, failures = [], []
    for mode in (MaMode.INT8, MaMode.BF16):
        a, b = _operands(rng, mode, m, k, n)
        entry = {"mode": mode.name.lower(), "m": m, "k": k, "n": n, "p": bench.p,
                 "data_width": bench.data_width, "latency": LATENCY, "cycles": None,
                 "utilization": None, "match": False}
        try:
            outcome = await bench.gemm(mode, a, b, **addresses)
        except AssertionError as error:
            failures.append(f"{entry['mode']}: {error}")
            dut._log.error("%s tile: %s", entry["mode"], error)
        else:
            utilization = m * n * k / (bench.p ** 2 * outcome.cycles)
            entry.update(cycles=outcome.cycles, utilization=round(utilization, 4), match=True)
        summary.append(entry)
        cycles = "-" if entry["cycles"] is None else entry["cycles"]
        utilization = "-" if entry["utilization"] is None else f"{entry['utilization']:.1%}"
        print(f"{entry['mode']:>5} {m}x{k}x{n} tile, P={bench.p}, {bench.data_width}-bit "
              f"bus, memory latency {LATENCY} cycles: {cycles} cycles START->CTR, MAC "
              f"utilization {utilization}, matches golden: "
              f"{'yes' if entry['match'] else 'NO'}", flush=True)
    path = os.environ.get(SUMMARY_VARIABLE)
    if path:
        Path(path).write_text(json.dumps(summary, indent=2) + "\n")
    assert not failures, "; ".join(failures)
