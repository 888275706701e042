"""cocotb tests of ``tests/test_runner_lines.py``: cocotb's seed is the test's seed; the
progress line counts the cycles."""

import hashlib
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer

from sim.bfm.clock import PERIOD_NS, Timing
from sim.bfm.progress import STEP_CYCLES, report_progress
from sim.seed import current_node, seed_of


@cocotb.test()
async def one_seed(dut):
    """The run's seed (``COCOTB_RANDOM_SEED``) is the test's seed, the one the caller
    expects (``V4HW_EXPECT_SEED``): cocotb 2.1 seeds each test's ``random`` with it plus
    the SHA-1 of the test's full name, and ``random`` draws what that seed draws."""
    await Timer(1, "ns")
    expected = int(os.environ["V4HW_EXPECT_SEED"])
    assert seed_of(current_node()) == expected
    offset = int(hashlib.sha1(f"{__name__}.one_seed".encode()).hexdigest(), 16)
    assert cocotb.RANDOM_SEED == expected + offset
    fresh = random.Random(expected + offset)
    assert [random.random() for _ in range(3)] == [fresh.random() for _ in range(3)]


@cocotb.test()
async def progress(dut):
    """With a tiny interval, report_progress prints a line at every STEP_CYCLES cycles;
    the caller reads them."""
    Clock(dut.ap_clk, PERIOD_NS, unit="ns").start()
    dut.en.value = 0
    dut.ap_rst_n.value = 0
    await RisingEdge(dut.ap_clk)
    timing = Timing(PERIOD_NS)
    timing.mark()
    cocotb.start_soon(report_progress(timing, every_s=1e-9))
    for _ in range(3 * STEP_CYCLES + 1):
        await RisingEdge(dut.ap_clk)
