"""cocotb tests of the VA's extension commands CLAMP, SOFTPLUS, SQRT (``hdl/va/extfunc.py``)
on the ``v4hw_va`` top (the configuration of ``tests/test_va_cocotb.py``), on Icarus and Verilator.

``tests/test_va_ext_cocotb.py`` runs each test below on both simulators. Every command goes
through ``VaBench.check``: outcome and ERR_ADDR against :func:`golden.va.execute`, the
whole memory window byte for byte. ``V4HW_SEED=<n>`` reruns a case.
"""

import os

import cocotb
import numpy as np

from golden.fp import float_to_bf16_rne
from golden.va import VaCommand, clamp_scalar
from sim.seed import test_seed
from sim.va_driver import VaBench
from spec.codes import ErrorCode, VaOpcode

ICARUS = cocotb.SIM_NAME.lower().startswith("icarus")
L = int(os.environ.get("V4HW_VA_LANES", "32"))     # the DUT's L (tests/test_va_cocotb.py)
FN_LANES = int(os.environ.get("V4HW_VA_FN_LANES", "0")) or None    # None: DATA_WIDTH/16
BUS = 16


async def new_bench(dut, **kwargs):
    rng = test_seed()
    bench = VaBench(dut, lanes=L, data_width=8 * BUS, fn_lanes=FN_LANES, rng=rng, **kwargs)
    await bench.start()
    return bench, rng


def bounds(lo, hi):
    lo_b, hi_b = float_to_bf16_rne(np.array([lo, hi]))
    return clamp_scalar(lo_b, hi_b)


@cocotb.test()
async def ext_functions_exhaustive(dut):
    """SOFTPLUS, SQRT and CLAMP (three bound pairs, one-sided and subnormal ones among
    them) over every bf16 bit pattern (one 65 536-element command each) on Verilator, bit
    for bit against the golden model (whose bounds tests/test_golden_va.py checks over the
    same inputs); on Icarus a random 2048-pattern vector, random alignments."""
    bench, rng = await new_bench(dut, window=(0x7F00_0000_0000, 1 << 19))
    patterns = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    if ICARUS:
        patterns = np.array(rng.sample(range(65536), 2048), np.uint16)
    n = len(patterns)
    cases = [(VaOpcode.SOFTPLUS, 0), (VaOpcode.SQRT, 0), (VaOpcode.CLAMP, bounds(-10.0, 10.0)),
             (VaOpcode.CLAMP, bounds(-np.inf, 1.0)), (VaOpcode.CLAMP, bounds(1e-39, np.inf))]
    for op, scalar in cases:
        src = bench.origin + 2 * rng.randrange(0, 1000)
        dst = bench.origin + (1 << 18) + 2 * rng.randrange(0, 1000)
        bench.place(src, patterns[rng.sample(range(n), n)] if rng.random() < 0.5 else patterns)
        await bench.check(VaCommand(op, n, src=src, dst=dst, scalar=scalar))


@cocotb.test()
async def ext_lengths_and_bounds(dut):
    """The three commands at lengths 1, 7, 8, 9, 33 and a random one, random alignments,
    random bits (NaNs, infinities, subnormals included); CLAMP with random valid bounds;
    CLAMP with a NaN bound or lo > hi is refused with BAD_COMMAND, writes nothing, and the
    next command runs."""
    bench, rng = await new_bench(dut)
    o = bench.origin
    lengths = [1, 7, 8, 9, 33, rng.randrange(34, 200 if ICARUS else 3000)]
    for n in lengths:
        for op in (VaOpcode.CLAMP, VaOpcode.SOFTPLUS, VaOpcode.SQRT):
            a, b = sorted(rng.sample(range(-200, 200), 2))
            src = o + 2 * rng.randrange(0, 4000)
            dst = o + 0x10000 + 2 * rng.randrange(0, 4000)
            bench.place(src, np.array([rng.getrandbits(16) for _ in range(n)], np.uint16))
            await bench.check(VaCommand(op, n, src=src, dst=dst, scalar=bounds(a / 8, b / 8)))
    for scalar in (clamp_scalar(0x4000, 0x3F80), clamp_scalar(0x7FC0, 0x3F80),
                   clamp_scalar(0xBF80, 0xFF81)):
        outcome = await bench.check(VaCommand(VaOpcode.CLAMP, 8, src=o, dst=o + 64, scalar=scalar))
        assert outcome.code == ErrorCode.BAD_COMMAND
    await bench.check(VaCommand(VaOpcode.CLAMP, 8, src=o, dst=o + 64, scalar=bounds(-1, 1)))
