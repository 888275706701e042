# amaranth: UnusedElaboratable=no
"""Reserved commands (``hdl/tile/reserve.py``) in the Amaranth simulator: the port gate
(held bursts, its outstanding count) and the reservation control (who is held when, the
guard's length, the prefetch off, RSV_STARTS / RSV_LATE / RSV_DRAIN_MAX), each against
the rules of the module's docstring. The whole mechanism runs in the tile under cocotb
(``tests/test_tile_jitter_cocotb.py``)."""

import random

import pytest
from amaranth.sim import Simulator

from hdl.tile.reserve import PortGate, ReserveControl
from spec.codes import TrafficClass

DECODE, PREFILL = TrafficClass.DECODE, TrafficClass.PREFILL


def simulate(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_port_gate_holds_new_bursts_and_counts_outstanding():
    dut = PortGate(128)

    async def bench(ctx):
        up, down = dut.up, dut.down
        ctx.set(down.rd_req.ready, 1)
        ctx.set(down.wr_req.ready, 1)
        ctx.set(up.rd_req.valid, 1)
        ctx.set(up.rd_req.payload.addr, 0x1000)
        ctx.set(up.wr_req.valid, 1)
        ctx.set(dut.hold, 1)
        assert not ctx.get(down.rd_req.valid) and not ctx.get(up.rd_req.ready)
        assert not ctx.get(down.wr_req.valid) and not ctx.get(up.wr_req.ready)
        # Write data, responses pass while held (a burst already taken completes).
        ctx.set(up.wr_data.valid, 1)
        ctx.set(down.wr_data.ready, 1)
        assert ctx.get(down.wr_data.valid) and ctx.get(up.wr_data.ready)
        ctx.set(up.wr_data.valid, 0)
        assert ctx.get(dut.idle)
        ctx.set(dut.hold, 0)
        assert ctx.get(down.rd_req.valid) and ctx.get(down.rd_req.payload.addr) == 0x1000
        await ctx.tick()                    # one read and one write burst taken
        ctx.set(up.rd_req.valid, 0)
        ctx.set(up.wr_req.valid, 0)
        await ctx.tick()
        assert not ctx.get(dut.idle)
        ctx.set(up.rd_resp.ready, 1)
        ctx.set(down.rd_resp.valid, 1)
        ctx.set(down.rd_resp.payload.last, 0)
        await ctx.tick()
        assert not ctx.get(dut.idle)        # a word, not the last
        ctx.set(down.rd_resp.payload.last, 1)
        await ctx.tick()
        ctx.set(down.rd_resp.valid, 0)
        assert not ctx.get(dut.idle)        # the write is unanswered
        ctx.set(up.wr_resp.ready, 1)
        ctx.set(down.wr_resp.valid, 1)
        await ctx.tick()
        ctx.set(down.wr_resp.valid, 0)
        await ctx.tick()
        assert ctx.get(dut.idle)
    simulate(dut, bench)


class _Model:
    """The docstring's rules, cycle by cycle, for the MA, the VA and the migrate engine."""

    def __init__(self, classes, guard):
        self.classes, self.guard = classes, guard
        self.run = {"ma": False, "va": False}
        self.left = {"ma": 0, "va": 0}

    def step(self, launch, busy, cls):
        go = {n: launch[n] and bool(self.classes >> cls[n] & 1) for n in self.run}
        running = dict(self.run)        # the holds are registers: from the cycle after
        guarding = {n: self.left[n] != 0 for n in self.run}
        hold = {n: guarding[n] or (not running[n] and any(running[k] for k in running if k != n))
                for n in self.run}
        hold["migrate"] = any(running.values())
        for n in self.run:
            if go[n]:
                self.run[n] = True
                self.left[n] = self.guard
            else:
                if not busy[n]:
                    self.run[n] = False
                if self.left[n]:
                    self.left[n] -= 1
        return hold, any(running.values()), sum(go.values())


@pytest.mark.parametrize("seed, classes, guard", [
    (0, 1 << DECODE, 17), (1, 1 << DECODE | 1 << PREFILL, 5), (2, 1 << DECODE, 0),
    (3, 1 << DECODE | 1 << PREFILL, 1), (4, 0, 5)])
def test_reserve_control_against_a_model(seed, classes, guard):
    """Random commands of the MA and VA (random classes, lengths and gaps) under
    RESERVE.CLASSES ``classes`` and RSV_GUARD ``guard``: every cycle's holds and
    prefetch-off as the model's, and RSV_STARTS counts the reserved STARTs."""
    rng = random.Random(seed)
    print(f"seed {seed}")
    dut = ReserveControl()
    model = _Model(classes, guard)

    async def bench(ctx):
        ctx.set(dut.classes, classes)
        ctx.set(dut.guard, guard)
        for n in ("ma", "va", "migrate"):
            ctx.set(getattr(dut, f"idle_{n}"), 1)
        left = {"ma": 0, "va": 0}
        cls = {"ma": DECODE, "va": DECODE}
        starts = 0
        for _ in range(600):
            launch = {}
            for n in ("ma", "va"):
                launch[n] = left[n] == 0 and rng.random() < 0.05
                if launch[n]:
                    cls[n] = rng.choice([DECODE, PREFILL, TrafficClass.CACHE_MIGRATE])
                    ctx.set(getattr(dut, f"cls_{n}"), cls[n])
                ctx.set(getattr(dut, f"launch_{n}"), launch[n])
            busy = {n: left[n] > 0 for n in ("ma", "va")}
            for n in ("ma", "va"):
                ctx.set(getattr(dut, f"busy_{n}"), busy[n])
            hold, active, go = model.step(launch, busy, cls)
            starts += go
            for n in ("ma", "va", "migrate"):
                assert ctx.get(getattr(dut, f"hold_{n}")) == hold[n], n
            assert ctx.get(dut.prefetch_off) == active
            await ctx.tick()
            for n in ("ma", "va"):
                if launch[n]:
                    left[n] = rng.randrange(1, 60)
                elif left[n]:
                    left[n] -= 1
        assert ctx.get(dut.starts) == starts
        assert (starts > 0) == (classes != 0)
    simulate(dut, bench)


def test_late_and_drain_max():
    """A drain longer than the guard counts one RSV_LATE; RSV_DRAIN_MAX is the longest
    drain; credits owed to any requester (the reserved one's too) and a busy MC keep the
    drain going as an outstanding burst does."""
    dut = ReserveControl()

    async def start(ctx, drain, what):
        ctx.set(dut.launch_ma, 1)
        await ctx.tick()
        ctx.set(dut.launch_ma, 0)
        ctx.set(dut.busy_ma, 1)
        ctx.set(what, int(what is not dut.idle_migrate))
        for _ in range(drain - 1):
            await ctx.tick()
        ctx.set(what, int(what is dut.idle_migrate))
        for _ in range(30):
            await ctx.tick()
        ctx.set(dut.busy_ma, 0)
        await ctx.tick()

    async def bench(ctx):
        ctx.set(dut.classes, 1 << DECODE)
        ctx.set(dut.cls_ma, DECODE)
        ctx.set(dut.guard, 10)
        for n in ("ma", "va", "migrate"):
            ctx.set(getattr(dut, f"idle_{n}"), 1)
        ctx.set(dut.idle_migrate, 0)
        await start(ctx, 6, dut.idle_migrate)
        assert (ctx.get(dut.starts), ctx.get(dut.late)) == (1, 0)
        ctx.set(dut.idle_migrate, 0)
        await start(ctx, 14, dut.idle_migrate)
        assert (ctx.get(dut.starts), ctx.get(dut.late)) == (2, 1)
        await start(ctx, 12, dut.owed_migrate)
        assert (ctx.get(dut.starts), ctx.get(dut.late)) == (3, 2)
        await start(ctx, 9, dut.mc_busy)
        assert (ctx.get(dut.starts), ctx.get(dut.late)) == (4, 2)
        await start(ctx, 13, dut.owed_ma)       # the reserved NI's own credits too
        assert (ctx.get(dut.starts), ctx.get(dut.late)) == (5, 3)
        assert 13 <= ctx.get(dut.drain_max) <= 14
    simulate(dut, bench)
