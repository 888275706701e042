"""Cycle bookkeeping shared by the block benches: :class:`Timing` numbers the rising edges
of the bench clock, :func:`random_pauses` feeds cocotbext-axi's pause generators.

Rising edges of the clock are numbered from the one :meth:`Timing.mark` is called at
(edge 0); :data:`PERIOD_NS` is the period every bench drives its clock with.
"""

from cocotb.triggers import Timer
from cocotb.utils import get_sim_steps, get_sim_time

__all__ = ["PERIOD_NS", "Timing", "random_pauses"]

PERIOD_NS = 10

def random_pauses(rng, probability):
    """Endless pause pattern for cocotbext-axi's ``set_pause_generator``: each cycle is
    idle (a source) or back-pressured (a sink) with ``probability``, drawn from ``rng``."""
    while True:
        yield rng.random() < probability


class Timing:
    """Numbers the rising edges of a free-running clock and waits for given ones."""

    def __init__(self, period_ns):
        self.period = get_sim_steps(period_ns, "ns")
        self._t0 = None

    def mark(self):
        """Call at a rising edge: it becomes edge 0."""
        self._t0 = int(get_sim_time("step"))

    def edge(self):
        """Number of the last rising edge at or before now."""
        return (int(get_sim_time("step")) - self._t0) // self.period

    def at_edge(self):
        """Whether now is exactly the time of a rising edge."""
        return (int(get_sim_time("step")) - self._t0) % self.period == 0

    async def present_at(self, edge):
        """Wait so that an item handed to a cocotbext-axi source when this returns is
        driven from rising edge ``edge - 1`` and can be taken at edge ``edge``; return at
        once if that time has passed.

        A source drives a queued item at its next rising edge; waking up at the falling
        edge before ``edge - 1`` makes that edge ``edge - 1`` whatever order cocotb runs
        coroutines in within one time step.
        """
        target = self._t0 + (edge - 2) * self.period + self.period // 2
        now = int(get_sim_time("step"))
        if target > now:
            await Timer(target - now, "step")
