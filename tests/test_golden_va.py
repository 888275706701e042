"""Tests of the VA golden model (golden.va): pure numpy, no hardware.

The approximated functions are checked exhaustively over all 65 536 bf16 inputs against
float64 references rounded once to bf16 (:func:`golden.fp.float_to_bf16_rne`), with the
flush rule applied to the exact value (|v| < 2**-126 → signed zero). Each prints its worst
input and error (``pytest -s``). Random tests draw from a seeded Generator named in the
test id and the assertion message.
"""

import numpy as np
import pytest

from golden.fp import bf16_to_f32, float_to_bf16_rne
from golden.va import (
    MAX_K,
    SUM_INTERLEAVE,
    MemoryWindow,
    VaCommand,
    add_bf16,
    bf16_in,
    bf16_ulp_distance,
    clamp_bf16,
    clamp_scalar,
    dequantize_int32,
    execute,
    exp2_table,
    exp_bf16,
    f32_to_bf16,
    ln_fixed,
    ln_table,
    max_bf16,
    mul_bf16,
    quantize_bf16,
    recip_f32,
    recip_table,
    rmsnorm_bf16,
    rope_bf16,
    rsqrt_f32,
    rsqrt_table,
    silu_bf16,
    softmax_bf16,
    softplus_bf16,
    softplus_f32,
    sqrt_bf16,
    sqrt_f32,
    sum_bf16,
    topk_bf16,
)
from spec.codes import ErrorCode, VaOpcode

ALL_BF16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)


def seeds(n):
    return pytest.mark.parametrize("seed", range(n), ids=lambda s: f"seed{s}")


def as_f64(bits16):
    """bf16 bits → float64 values, subnormals read as zeros (the VA's input rule)."""
    with np.errstate(invalid="ignore"):     # signalling NaNs become quiet: fine here
        return bf16_in(bits16).view(np.float32).astype(np.float64)


def reference(values):
    """Correctly rounded bf16 of float64 values, flushed where |v| < 2**-126."""
    r = float_to_bf16_rne(values)
    with np.errstate(invalid="ignore"):
        tiny = np.abs(values) < 2.0 ** -126
    return np.where(tiny, r & 0x8000, r).astype(np.uint16)


def is_nan16(bits):
    b = np.asarray(bits, np.uint16)
    return ((b & 0x7F80) == 0x7F80) & ((b & 0x7F) != 0)


def ulp_errors(result, ref):
    """Per-element bf16 ulp distance; NaN must meet NaN (else a huge error)."""
    nan_r, nan_f = is_nan16(result), is_nan16(ref)
    d = bf16_ulp_distance(result, ref)
    return np.where(nan_r | nan_f, np.where(nan_r == nan_f, 0, 1 << 20), d)


def check_exhaustive(name, result, exact, bound):
    err = ulp_errors(result, reference(exact))
    worst = int(np.argmax(err))
    print(f"{name}: worst input {worst:#06x} ({as_f64(worst)!r}) error {int(err[worst])} ulp; "
          f"{int((err > 0).sum())} inputs not correctly rounded")
    assert err.max() <= bound, f"{name}({worst:#06x}) is {int(err[worst])} ulps off"


def test_tables_exact():
    """The integer-built tables are the rounded values they claim (float64 check)."""
    for i, v in enumerate(exp2_table()):
        assert abs(v - 2.0 ** (i / 256) * 2 ** 30) <= 0.5 + 1e-6
    for i, v in enumerate(recip_table()):
        assert abs(v - 2 ** 30 / (1 + (i + 0.5) / 256)) <= 0.5 + 1e-6
    for odd, row in enumerate(rsqrt_table()):
        for j, v in enumerate(row):
            assert abs(v - 2 ** 30 / np.sqrt((1 + (j + 0.5) / 128) * (1 + odd))) <= 0.5 + 1e-6


def test_exp_exhaustive():
    with np.errstate(all="ignore"):
        exact = np.exp(as_f64(ALL_BF16))
    check_exhaustive("exp", exp_bf16(ALL_BF16), exact, 1)


def test_silu_exhaustive():
    x = as_f64(ALL_BF16)
    with np.errstate(all="ignore"):
        exact = x / (1 + np.exp(-x))
    exact[ALL_BF16 == 0xFF80] = -0.0          # the limit at -inf
    check_exhaustive("silu", silu_bf16(ALL_BF16), exact, 1)


def test_recip_exhaustive():
    with np.errstate(all="ignore"):
        exact = 1 / as_f64(ALL_BF16)
    check_exhaustive("recip", f32_to_bf16(recip_f32(bf16_in(ALL_BF16))), exact, 1)


def test_rsqrt_exhaustive():
    with np.errstate(all="ignore"):
        exact = 1 / np.sqrt(as_f64(ALL_BF16))
    check_exhaustive("rsqrt", f32_to_bf16(rsqrt_f32(bf16_in(ALL_BF16))), exact, 1)


def test_ln_table_exact():
    """``LN[i]`` is ``ln(2**30 / R[i])`` rounded (float64 check, far from any tie)."""
    for r, v in zip(recip_table(), ln_table(), strict=True):
        assert abs(v - np.log(2 ** 30 / r) * 2 ** 30) <= 0.5 + 1e-3


def test_ln_fixed_absolute_error():
    """The fixed-point logarithm is within 2**-27 (absolute) of ln on random binary32
    values in [1, 2**24) — the range SOFTPLUS uses — and on every bf16 value there."""
    rng = np.random.default_rng(5)
    bits = np.concatenate([rng.integers(0x3F800000, 0x4B800000, 100_000),
                           np.arange(0x3F80, 0x4B80) << 16]).astype(np.uint32)
    exact = np.log(bits.view(np.float32).astype(np.float64))
    err = np.abs(ln_fixed(bits) / 2.0 ** 30 - exact)
    print(f"ln_fixed: max abs error 2**{np.log2(err.max()):.2f}")
    assert err.max() < 2.0 ** -27


def test_softplus_exhaustive():
    x = as_f64(ALL_BF16)
    with np.errstate(all="ignore"):
        exact = np.logaddexp(0.0, x)
    check_exhaustive("softplus", softplus_bf16(ALL_BF16), exact, 1)


def test_sqrt_exhaustive():
    x = as_f64(ALL_BF16)
    with np.errstate(all="ignore"):
        exact = np.sqrt(x)                # sqrt(-0) = -0, negatives and NaN → NaN
    check_exhaustive("sqrt", sqrt_bf16(ALL_BF16), exact, 1)


def test_softplus_sqrt_binary32_accuracy():
    """Inside (before bf16): softplus within 2**-12 relative on random binary32 x in
    [-100, 100] (worst near the -8 branch point), sqrt within 2**-16 on positive normals."""
    rng = np.random.default_rng(2)
    x = rng.uniform(-100, 100, 100_000).astype(np.float32)
    got = softplus_f32(x.view(np.uint32)).view(np.float32).astype(np.float64)
    exact = np.logaddexp(0.0, x.astype(np.float64))
    ok = exact >= 2.0 ** -126                        # results that are not flushed
    rel = np.abs(got - exact)[ok] / exact[ok]
    print(f"softplus binary32: max relative 2**{np.log2(rel.max()):.2f} "
          f"at x = {x[ok][np.argmax(rel)]!r}")
    assert rel.max() < 2.0 ** -12
    assert np.all(got[~ok] == 0)
    bits = rng.integers(0x00800000, 0x7F800000, 100_000).astype(np.uint32)
    xs = bits.view(np.float32).astype(np.float64)
    rel = np.abs(sqrt_f32(bits).view(np.float32).astype(np.float64) / np.sqrt(xs) - 1)
    print(f"sqrt binary32: max relative 2**{np.log2(rel.max()):.2f}")
    assert rel.max() < 2.0 ** -16


CLAMP_BOUNDS = [(-10.0, 10.0), (-np.inf, 1.0), (0.0, np.inf), (-0.0, 0.0), (2.5, 2.5),
                (-np.inf, np.inf), (1e-39, 3.0), (-7.0, -1e-39)]


@pytest.mark.parametrize("lo, hi", CLAMP_BOUNDS, ids=str)
def test_clamp_exhaustive(lo, hi):
    """CLAMP is exact for all 65 536 inputs: float64 ``clip`` of the flushed input with
    flushed bounds, -0 kept where the input is -0 and inside, NaN in → NaN out."""
    lo_b, hi_b = float_to_bf16_rne(np.array([lo, hi]))
    got = clamp_bf16(ALL_BF16, lo_b, hi_b)
    x = as_f64(ALL_BF16)
    with np.errstate(invalid="ignore"):
        exact = np.clip(x, as_f64(lo_b), as_f64(hi_b))
    err = ulp_errors(got, reference(exact))
    worst = int(np.argmax(err))
    print(f"clamp [{lo}, {hi}]: worst input {worst:#06x} error {int(err[worst])} ulp")
    assert err.max() == 0
    inside = (x >= as_f64(lo_b)) & (x <= as_f64(hi_b))
    assert np.array_equal(got[inside], bf16_in(ALL_BF16[inside]) >> 16)   # the input's bits
    assert np.all(is_nan16(got) == is_nan16(ALL_BF16))


def test_recip_binary32_accuracy():
    """On random binary32 inputs with a normal reciprocal the unit is within 2**-16
    relative (before bf16)."""
    rng = np.random.default_rng(1)
    bits = rng.integers(0x00800000, 0x7E800000, 100_000).astype(np.uint32)
    x = bits.view(np.float32).astype(np.float64)
    r = recip_f32(bits).view(np.float32).astype(np.float64)
    assert np.max(np.abs(r * x - 1)) < 2.0 ** -16


def random_bf16(rng, n, scale=4.0):
    return float_to_bf16_rne(rng.normal(0, scale, n))


@seeds(3)
def test_softmax_row_4096(seed):
    rng = np.random.default_rng(seed)
    x = random_bf16(rng, 4096, 3.0)
    xf = as_f64(x)
    e = np.exp(xf - xf.max())
    err = ulp_errors(softmax_bf16(x), reference(e / e.sum()))
    print(f"softmax seed {seed}: max {err.max()} ulp")
    assert err.max() <= 1, f"seed {seed}"


@seeds(3)
def test_rmsnorm_row_4096(seed):
    rng = np.random.default_rng(seed)
    x = random_bf16(rng, 4096, 10.0 ** rng.uniform(-3, 3))
    gamma = random_bf16(rng, 4096, 1.0)
    eps = np.float32(1e-6)
    xf = as_f64(x)
    exact = xf / np.sqrt(np.mean(xf * xf) + float(eps)) * as_f64(gamma)
    err = ulp_errors(rmsnorm_bf16(x, gamma, int(eps.view(np.uint32))), reference(exact))
    print(f"rmsnorm seed {seed}: max {err.max()} ulp")
    assert err.max() <= 1, f"seed {seed}"


def test_softmax_and_rmsnorm_nonfinite_rows():
    x = float_to_bf16_rne(np.array([1.0, np.inf, 2.0]))
    assert np.all(is_nan16(softmax_bf16(x)))
    assert np.all(is_nan16(rmsnorm_bf16(x, x, 0)))
    # A NaN below a finite maximum spoils the sum too (the RTL does the same).
    y = np.array([0x3F80, 0x7FC1, 0x4000], np.uint16)
    assert np.all(is_nan16(softmax_bf16(y)))
    assert np.all(is_nan16(rmsnorm_bf16(y, x, 0)))


@seeds(5)
def test_topk_matches_stable_argsort(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    if seed % 2:    # tie-heavy: few distinct values, both zeros
        x = float_to_bf16_rne(rng.integers(-3, 4, n).astype(np.float64))
        x[rng.random(n) < 0.2] = 0x8000
    else:
        x = random_bf16(rng, n)
    k = int(rng.integers(1, min(MAX_K, n) + 1))
    values, index = topk_bf16(x, k)
    expect = np.argsort(-as_f64(x), kind="stable")[:k]
    assert list(index) == list(expect), f"seed {seed}"
    assert list(values) == list(x[expect]), f"seed {seed}"
    assert max_bf16(x) == x[expect[0]]


def test_topk_nan_is_lowest():
    x = np.array([0x7FC0, 0x3F80, 0xFF80], np.uint16)
    assert list(topk_bf16(x, 3)[1]) == [1, 2, 0]


@seeds(3)
def test_elementwise_are_correctly_rounded(seed):
    """add, mul: one binary32 operation then bf16: within one rounding of float64."""
    rng = np.random.default_rng(seed)
    a, b = random_bf16(rng, 10000), random_bf16(rng, 10000)
    assert ulp_errors(add_bf16(a, b), reference(as_f64(a) + as_f64(b))).max() <= 1
    assert ulp_errors(mul_bf16(a, b), reference(as_f64(a) * as_f64(b))).max() == 0


@pytest.mark.parametrize("n", [1, 3, 40, 1000])
@pytest.mark.parametrize("lanes", [1, 4, 32])
def test_sum_lane_order(lanes, n):
    """The sum follows the order of the docstring, written here in vectors: partial s of
    lane j adds element j of vectors s, s + D, s + 2D, ... (D = SUM_INTERLEAVE) from +0;
    then for each s the L lanes pairwise, then the D results pairwise."""
    rng = np.random.default_rng(lanes * 10000 + n)
    x = random_bf16(rng, n)
    xf = bf16_to_f32(x)
    d = SUM_INTERLEAVE
    part = [[np.float32(0)] * lanes for _ in range(d)]
    for v in range(-(-n // lanes)):
        for j, value in enumerate(xf[v * lanes:(v + 1) * lanes]):
            part[v % d][j] = np.float32(part[v % d][j] + value)

    def tree(values):
        while len(values) > 1:
            values = [np.float32(values[i] + values[i + 1]) for i in range(0, len(values), 2)]
        return values[0]

    total = tree([tree(part[s]) for s in range(d)])
    assert sum_bf16(x, lanes) == int(np.float32(total).view(np.uint32))


def test_sum_interleave_matters():
    """The interleave is visible in the result: in one lane, 1 then sixteen 2**-24 then
    -1 sum to 0 sequentially (each 2**-24 is lost against 1) but not interleaved (pairs
    of 2**-24 meet in partials of their own)."""
    one, tiny, minus = 0x3F80, 0x3380, 0xBF80
    x = np.array([one] + [tiny] * (2 * SUM_INTERLEAVE) + [minus], np.uint16)
    sequential = np.float32(0)
    for value in bf16_to_f32(x):
        sequential = np.float32(sequential + value)
    assert sequential == 0
    assert sum_bf16(x, 1) != int(np.float32(sequential).view(np.uint32))
    with pytest.raises(ValueError, match="power of two"):
        sum_bf16(x, 3)


@seeds(3)
def test_quantize_dequantize(seed):
    rng = np.random.default_rng(seed)
    x = random_bf16(rng, 777, 10.0 ** rng.uniform(-2, 2))
    q, scale = quantize_bf16(x)
    xf = as_f64(x)
    absmax = np.abs(xf).max()
    s = np.uint32(scale).view(np.float32)
    assert abs(float(s) - absmax / 127) <= absmax / 127 * 2.0 ** -22
    ideal = xf / (absmax / 127)
    assert np.all(np.abs(q - ideal) <= 0.5 + 1e-3), f"seed {seed}"
    assert np.abs(q).max() == 127
    back = dequantize_int32(q.astype(np.int32), scale)
    assert ulp_errors(back, reference(q * float(s))).max() == 0


def test_rope_rotates():
    rng = np.random.default_rng(7)
    x = random_bf16(rng, 64)
    theta = rng.uniform(0, 6.3, 32)
    c, s = float_to_bf16_rne(np.cos(theta)), float_to_bf16_rne(np.sin(theta))
    for split in (False, True):
        y = as_f64(rope_bf16(x, c, s, split))
        xa, xb = (as_f64(x)[:32], as_f64(x)[32:]) if split else (as_f64(x)[0::2], as_f64(x)[1::2])
        ya, yb = (y[:32], y[32:]) if split else (y[0::2], y[1::2])
        cf, sf = as_f64(c), as_f64(s)
        assert np.allclose(ya, xa * cf - xb * sf, rtol=2 ** -7, atol=1e-6)
        assert np.allclose(yb, xa * sf + xb * cf, rtol=2 ** -7, atol=1e-6)


# ---------------------------------------------------------------------------------------
# Commands on a memory image.

def test_execute_gather_scatter_strided():
    mem = np.arange(8192, dtype=np.uint32).astype(np.uint8)
    before = mem.copy()
    cmd = VaCommand(VaOpcode.GATHER, 10, src=100, stride=7, esize=0, dst=4000)
    assert execute(cmd, mem) == (ErrorCode.NONE, 0)
    assert list(mem[4000:4010]) == [before[100 + 7 * i] for i in range(10)]
    cmd = VaCommand(VaOpcode.SCATTER, 3, src=4000, stride=2048, esize=1, dst=2)
    assert execute(cmd, mem) == (ErrorCode.NONE, 0)
    for i in range(3):
        assert mem[2 + 2048 * i:4 + 2048 * i].tobytes() == mem[4000 + 2 * i:4002 + 2 * i].tobytes()


def test_execute_indexed_and_csr():
    mem = np.zeros(4096, np.uint8)
    mem[1000:1200] = np.arange(200)
    idx = np.array([3, -1, 0, 3], np.int32)
    mem[0:16] = idx.view(np.uint8)
    cmd = VaCommand(VaOpcode.GATHER_IDX, 4, src=1000, src2=0, stride=10, esize=1, dst=2000,
                    index_limit=10)
    mem[2000:2008] = 0xEE
    assert execute(cmd, mem) == (ErrorCode.NONE, 0)
    got = mem[2000:2008].view(np.uint16)
    assert got[1] == 0xEEEE          # skipped, not written
    assert got[0] == mem[1030:1032].view(np.uint16)[0] and got[3] == got[0]
    # CSR: rows [0, 2), [2, 2) (empty), [2, 3)
    mem[100:116] = np.array([0, 2, 2, 3], np.int32).view(np.uint8)
    mem[200:212] = np.array([1, 0, 4], np.int32).view(np.uint8)
    cmd = VaCommand(VaOpcode.GATHER_CSR, 3, src=1000, src2=100, src3=200, rows=3,
                    row_stride=50, stride=2, esize=0, dst=3000, index_limit=5)
    assert execute(cmd, mem) == (ErrorCode.NONE, 0)
    assert list(mem[3000:3003]) == [mem[1002], mem[1000], mem[1000 + 100 + 8]]


@pytest.mark.parametrize("case, code", [
    (dict(op=99, length=4), ErrorCode.BAD_COMMAND),
    (dict(op=VaOpcode.EXP, length=0), ErrorCode.BAD_COMMAND),
    (dict(op=VaOpcode.EXP, length=65537), ErrorCode.BAD_COMMAND),
    (dict(op=VaOpcode.TOPK, length=4, k=9), ErrorCode.BAD_COMMAND),
    (dict(op=VaOpcode.ROPE, length=5), ErrorCode.BAD_COMMAND),
    (dict(op=VaOpcode.GATHER, length=3, stride=1 << 47, esize=0), ErrorCode.BAD_COMMAND),
    (dict(op=VaOpcode.EXP, length=4, src=1), ErrorCode.MISALIGNED),
    (dict(op=VaOpcode.GATHER, length=4, stride=3, esize=1), ErrorCode.MISALIGNED),
    (dict(op=VaOpcode.GATHER_IDX, length=4, index_limit=3, src2=0), ErrorCode.BAD_COMMAND),
    (dict(op=VaOpcode.CLAMP, length=4, scalar=clamp_scalar(0x4000, 0x3F80)), ErrorCode.BAD_COMMAND),
    (dict(op=VaOpcode.CLAMP, length=4, scalar=clamp_scalar(0x7FC0, 0x3F80)), ErrorCode.BAD_COMMAND),
    (dict(op=VaOpcode.CLAMP, length=4, scalar=clamp_scalar(0x3F80, 0xFFC1)), ErrorCode.BAD_COMMAND),
    (dict(op=VaOpcode.SQRT, length=4, dst=513), ErrorCode.MISALIGNED),
])
def test_execute_bad_commands_write_nothing(case, code):
    mem = np.zeros(1024, np.uint8)
    mem[0:16] = np.array([0, 1, 2, 3], np.int32).view(np.uint8)
    before = mem.copy()
    cmd = VaCommand(**{"dst": 512, **case})
    assert execute(cmd, mem)[0] == code
    assert np.array_equal(mem, before)


@pytest.mark.parametrize("case, code, err_addr", [
    # The indexed forms' base must be element-aligned (an element must not straddle
    # bus words), and so must the CSR row stride.
    (dict(op=VaOpcode.GATHER_IDX, src=1, esize=1), ErrorCode.MISALIGNED, 1),
    (dict(op=VaOpcode.SCATTER_IDX, src=256, dst=6, esize=2), ErrorCode.MISALIGNED, 6),
    (dict(op=VaOpcode.GATHER_CSR, src3=64, rows=1, row_stride=3, esize=1),
     ErrorCode.MISALIGNED, 3),
    # The CSR source matrix (ROWS x INDEX_LIMIT) must lie below 2**48, whatever the
    # columns are.
    (dict(op=VaOpcode.GATHER_CSR, src=(1 << 48) - 40, src3=64, rows=2, row_stride=16,
          stride=8, index_limit=4), ErrorCode.BAD_COMMAND, ((1 << 48) - 40) & 0xFFFFFFFF),
    (dict(op=VaOpcode.GATHER_CSR, src=(1 << 48) - 44, src3=64, rows=2, row_stride=16,
          stride=8, index_limit=4), ErrorCode.NONE, 0),
])
def test_execute_indexed_base_and_extent(case, code, err_addr):
    low = np.zeros(1024, np.uint8)
    low[0:16] = np.array([0, 1, 2, 3], np.int32).view(np.uint8)     # indices, row pointers
    low[64:80] = np.array([0, 3, 1, 2], np.int32).view(np.uint8)    # columns
    if case["op"] == VaOpcode.GATHER_CSR:
        low[0:12] = np.array([0, 2, 4], np.int32).view(np.uint8)
    high = MemoryWindow((1 << 48) - 4096, np.zeros(4096, np.uint8))

    class TwoWindows:           # the first KiB and the last 4 KiB below 2**48
        def __getitem__(self, key):
            return (high if key.start >= high.origin else low)[key]

        def __setitem__(self, key, value):
            (high if key.start >= high.origin else low)[key] = value

    cmd = VaCommand(**{"length": 4, "src2": 0, "dst": 512, "index_limit": 4, **case})
    assert execute(cmd, TwoWindows()) == (code, err_addr)


def test_execute_every_arithmetic_command_matches_functions():
    rng = np.random.default_rng(3)
    mem = np.zeros(1 << 16, np.uint8)
    n = 40
    x, y = random_bf16(rng, n), random_bf16(rng, n)
    mem[0:2 * n] = x.view(np.uint8)
    mem[1024:1024 + 2 * n] = y.view(np.uint8)
    cases = {
        VaOpcode.ADD: add_bf16(x, y), VaOpcode.MUL: mul_bf16(x, y),
        VaOpcode.SILU: silu_bf16(x), VaOpcode.EXP: exp_bf16(x), VaOpcode.SOFTMAX: softmax_bf16(x),
        VaOpcode.SOFTPLUS: softplus_bf16(x), VaOpcode.SQRT: sqrt_bf16(x),
        VaOpcode.CLAMP: clamp_bf16(x, 0xC000, 0x3F80),       # [-2, 1]
    }
    for op, expect in cases.items():
        cmd = VaCommand(op, n, src=0, src2=1024, dst=8192, scalar=clamp_scalar(0xC000, 0x3F80))
        assert execute(cmd, mem)[0] == ErrorCode.NONE
        assert np.array_equal(mem[8192:8192 + 2 * n].view(np.uint16), expect), op.name
