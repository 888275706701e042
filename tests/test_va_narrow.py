"""The VA's FN_LANES (hdl/va/narrow.py): the parameter's checks, and a narrow function
unit behind :class:`WidthAdapter` giving the golden model's results for bus-wide words,
in order, under random input gaps and output back-pressure. The commands at FN_LANES=2
run bit for bit against the golden model in tests/test_va_cocotb.py::test_va_narrow."""

import random

import numpy as np
import pytest
from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from golden import va as golden
from hdl.top.va import caps_word
from hdl.va.core import check_parameters
from hdl.va.extfunc import ExtUnit
from hdl.va.narrow import WidthAdapter, check_fn_lanes
from sim.cli import UsageError, elaborate, parse_params
from spec.codes import VaOpcode

WIDTH = 128


@pytest.mark.parametrize("bad", [0, 1, 3, 6, 16, 2.0, None])
def test_fn_lanes_refused(bad):
    with pytest.raises(ValueError, match="FN_LANES must be a power of two in 2..8"):
        check_fn_lanes(bad, WIDTH)
    if bad is not None:       # (not VaTop: a refused Elaboratable warns when collected)
        with pytest.raises(ValueError, match="FN_LANES"):
            check_parameters(8, WIDTH, bad)


def test_fn_lanes_in_caps():
    assert caps_word(8, WIDTH) == caps_word(8, WIDTH, WIDTH // 16)
    for fn_lanes in (2, 4, 8):
        check_fn_lanes(fn_lanes, WIDTH)
        assert caps_word(8, WIDTH, fn_lanes) >> 16 == fn_lanes


@pytest.mark.parametrize("fn_lanes", [2, 4])
def test_adapter_with_ext_unit(fn_lanes):
    """SQRT of random bf16 words (edges included) through ExtUnit(16 · fn_lanes) with its
    small partial products in logic, behind a WidthAdapter: each wide result is
    golden.va.sqrt_bf16 of its word."""
    rng = np.random.default_rng(fn_lanes)
    lanes, narrow = WIDTH // 16, 16 * fn_lanes
    x = rng.integers(0, 65536, 24 * lanes).astype(np.uint16)
    x[:8] = [0x0000, 0x8000, 0x0001, 0x7F80, 0xFF80, 0x7FC0, 0x3F80, 0xC0FF]
    words = x.reshape(-1, lanes)

    m = Module()
    m.submodules.unit = unit = ExtUnit(narrow, lut_products=True)    # as narrowed in the VA
    m.submodules.adapter = adapter = WidthAdapter(
        WIDTH, WIDTH, narrow, narrow, WIDTH // narrow,
        lambda payload, piece: payload.word_select(piece, narrow), lambda parts: Cat(*parts))
    wiring.connect(m, adapter.narrow_i, unit.i)
    wiring.connect(m, unit.o, adapter.narrow_o)
    pauses = random.Random(fn_lanes)
    out = []

    async def bench(ctx):
        ctx.set(unit.op, VaOpcode.SQRT)
        sent = 0
        held = False                        # a stream payload holds still until taken
        while len(out) < len(words):
            ctx.set(adapter.o.ready, pauses.random() < 0.7)
            offer = held or (sent < len(words) and pauses.random() < 0.8)
            ctx.set(adapter.i.valid, offer)
            if offer:
                ctx.set(adapter.i.payload,
                        sum(int(v) << (16 * k) for k, v in enumerate(words[sent])))
            await ctx.delay(1e-9)
            took = offer and ctx.get(adapter.i.ready)
            if ctx.get(adapter.o.valid) and ctx.get(adapter.o.ready):
                w = ctx.get(adapter.o.payload)
                out.append([(w >> (16 * k)) & 0xFFFF for k in range(lanes)])
            await ctx.tick()
            held = offer and not took
            sent += bool(took)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    got = np.array(out, np.uint16).ravel()
    expect = golden.sqrt_bf16(x)
    bad = np.nonzero(got != expect)[0]
    assert not len(bad), (f"element {bad[0]}: sqrt({int(x[bad[0]]):#06x}) = "
                          f"{int(got[bad[0]]):#06x}, golden {int(expect[bad[0]]):#06x}")


def test_fn_lanes_params():
    """``--param FN_LANES``: 0 (DATA_WIDTH/16) by default, 2 for the ULX3S-85F board build
    unless given; a bad value is refused with the parameter's message."""
    assert parse_params("va", [])["FN_LANES"] == 0
    assert parse_params("va", [], "ulx3s-85f")["FN_LANES"] == 2
    assert parse_params("va", ["FN_LANES=4"], "ulx3s-85f")["FN_LANES"] == 4
    with pytest.raises(UsageError, match="FN_LANES must be a power of two"):
        elaborate("va", parse_params("va", ["FN_LANES=3"]))
