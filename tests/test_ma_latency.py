"""The MA latency model (golden/ma_latency.py) against the RTL core's cycle counts.

Cycles are counted in the Amaranth simulator from the launch (the START write) to the
finish pulse, for random shapes, strides and alignments; the model must be within 2 %.
"""

import numpy as np
import pytest

from golden import ma_latency
from golden.ma_latency import MaCommand, ma_cycles
from hdl.ma.array import PE_LATENCY, array_timing
from hdl.ma.buffers import STEP_LATENCY
from hdl.ma.layouts import INTERLEAVE
from hdl.ma.results import RESULT_STAGES
from tests.test_ma_core import layout, run_core

LATENCY = 6          # the test memory's response latency, cycles
SEEDS = range(20)
B_T_SEEDS = range(6)


@pytest.mark.parametrize("seed", SEEDS)
def test_model_within_two_percent(seed):
    check_model(1000 + seed, b_t=False)


@pytest.mark.parametrize("seed", B_T_SEEDS)
def test_model_b_transposed(seed):
    """B transposed (MODE bit 1): B loaded as N rows of K, the walk over 2·M + N rows."""
    check_model(2000 + seed, b_t=True)


def check_model(seed, b_t):
    rng = np.random.default_rng(seed)
    p = int(rng.choice([2, 4]))
    data_width = int(rng.choice([64, 128]))
    m, k, n = (int(x) for x in rng.integers(4, 41, 3))
    bf16, accumulate = bool(rng.integers(2)), bool(rng.integers(2))
    cmd, image, _, _ = layout(m, k, n, bf16, rng, accumulate, b_t)
    result, _ = run_core(p, data_width, cmd, image)
    assert result["outcome"] == "done", result
    model = ma_cycles(MaCommand(m=m, k=k, n=n, bf16=bf16, accumulate=accumulate,
                                b_transposed=b_t,
                                **{key: cmd[key] for key in
                                   ("a_addr", "b_addr", "c_addr", "lda", "ldb", "ldc")}),
                      p=p, data_width=data_width, latency=LATENCY)
    error = abs(model - result["cycles"]) / result["cycles"]
    print(f"seed={seed} P={p} bus={data_width} {m}x{k}x{n} bf16={bf16} "
          f"acc={accumulate} b_t={b_t}: RTL {result['cycles']} model {model} "
          f"({100 * error:.2f} %)")
    assert error <= 0.02, (f"seed={seed}: model {model} cycles, RTL "
                           f"{result['cycles']} cycles ({100 * error:.2f} % off)")


@pytest.mark.parametrize("p", [2, 8, 32])
def test_model_constants_follow_the_array(p):
    """The model's view of the array (it may not import the RTL) is the array's own:
    group size, PE pipeline depth, drain delay and how long old C is held."""
    min_spacing, drain_delay, init_hold = array_timing(p)
    assert ma_latency.INTERLEAVE == INTERLEAVE
    assert ma_latency.PE_LATENCY == PE_LATENCY
    # The operand buffers' registers, then the array's drain delay.
    assert ma_latency.BUFFER_STAGES == STEP_LATENCY
    assert STEP_LATENCY + drain_delay == 2 * p + ma_latency.DRAIN_OFFSET
    assert init_hold == 2 * p + INTERLEAVE + ma_latency.INIT_HOLD_OFFSET
    assert min_spacing == (INTERLEAVE + 1) * p
    assert ma_latency.RESULT_STAGES == RESULT_STAGES
