"""Amaranth-simulator tests of the VA's extension functions (hdl/va/extfunc.py: CLAMP,
SOFTPLUS, SQRT) against the golden model (golden.va): the logarithm's table and helper on
random binary32 inputs, and the pipelined unit on random bf16 words. The cocotb
regression (tests/test_va_ext_cocotb.py) checks the three commands over every bf16 input.
Seeds are in the test ids.
"""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator

from golden import va as golden
from hdl.va import extfunc
from spec.codes import VaOpcode

from .test_va_functions import check, inputs, stream_words, unpack


def positive_normals(seed):
    x = inputs(seed) & np.uint32(0x7FFFFFFF)
    e = (x >> 23) & 0xFF
    return x[(e != 0) & (e != 0xFF)]


@pytest.mark.parametrize("seed", range(2), ids=lambda s: f"seed{s}")
def test_ln_fixed(seed):
    x = positive_normals(seed)
    m = Module()
    a = Signal(32)
    out = Signal(signed(42))
    m.d.comb += out.eq(extfunc.ln_fixed(m, a, "ln"))
    got = []

    async def bench(ctx):
        for v in x:
            ctx.set(a, int(v))
            got.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    expect = golden.ln_fixed(x)
    bad = np.nonzero(np.array(got) != expect)[0]
    assert not len(bad), f"ln_fixed({int(x[bad[0]]):#010x}) = {got[bad[0]]}, golden {expect[bad[0]]}"


def run_unit(op, scalar, words16, data_width=64):
    """Push bf16 elements through ExtUnit (output stalls now and then); the results."""
    lanes = data_width // 16
    dut = extfunc.ExtUnit(data_width)

    def setup(ctx):
        ctx.set(dut.op, op)
        ctx.set(dut.scalar, scalar)

    out = stream_words(dut, words16.reshape(-1, lanes), setup,
                       put=lambda ctx, word: ctx.set(dut.i.payload, word),
                       take=lambda ctx: unpack(ctx.get(dut.o.payload), lanes),
                       stall=lambda cycle: cycle % 5 == 3)
    return np.array(out, np.uint16).ravel()


@pytest.mark.parametrize("op", [VaOpcode.CLAMP, VaOpcode.SOFTPLUS, VaOpcode.SQRT], ids=lambda o: o.name)
def test_ext_unit_matches_golden(op):
    rng = np.random.default_rng(int(op))
    x = rng.integers(0, 65536, 256).astype(np.uint16)
    # edges: zeros, subnormals, infinities, NaNs, the softplus branch points, 1
    x[:12] = [0x0000, 0x8000, 0x0001, 0x8001, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1,
              0x4180, 0xC100, 0x3F80, 0xC0FF]
    lo, hi = 0xC120, 0x3F80                              # [-10, 1]
    got = run_unit(op, golden.clamp_scalar(lo, hi), x)
    expect = {VaOpcode.CLAMP: golden.clamp_bf16(x, lo, hi), VaOpcode.SOFTPLUS: golden.softplus_bf16(x),
              VaOpcode.SQRT: golden.sqrt_bf16(x)}[op]
    check(op.name, got.astype(np.uint32), expect.astype(np.uint32), x)
