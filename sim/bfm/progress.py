"""A progress line for long simulations: the cycles simulated so far, now and then."""

import os
import time

from cocotb.triggers import Timer

from .clock import PERIOD_NS

__all__ = ["PROGRESS_VARIABLE", "DEFAULT_SECONDS", "report_progress"]

PROGRESS_VARIABLE = "V4HW_PROGRESS_S"
DEFAULT_SECONDS = 60.0
# Simulated cycles between two looks at the wall clock: rare enough to cost nothing.
STEP_CYCLES = 10_000


async def report_progress(timing, every_s=None):
    """Print ``v4hw: <N> cycles simulated in <S> s`` every ``every_s`` seconds of wall
    clock (default: ``V4HW_PROGRESS_S``, else :data:`DEFAULT_SECONDS`; 0: never), so a
    run of minutes shows it is moving. ``timing``: the bench's
    :class:`~sim.bfm.clock.Timing`, already marked. Start it with ``cocotb.start_soon``;
    it draws no random number and drives nothing."""
    if every_s is None:
        every_s = float(os.environ.get(PROGRESS_VARIABLE, DEFAULT_SECONDS))
    if every_s <= 0:
        return
    started = last = time.monotonic()
    while True:
        await Timer(STEP_CYCLES * PERIOD_NS, "ns")
        now = time.monotonic()
        if now - last >= every_s:
            last = now
            print(f"v4hw: {timing.edge()} cycles simulated in {now - started:.0f} s",
                  flush=True)
