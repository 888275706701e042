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
        # A request offered and not taken stays offered when the hold comes, until taken.
        ctx.set(down.rd_req.ready, 0)
        ctx.set(up.rd_req.valid, 1)
        await ctx.tick()
        ctx.set(dut.hold, 1)
        for _ in range(3):
            assert ctx.get(down.rd_req.valid) and not ctx.get(up.rd_req.ready)
            await ctx.tick()
        ctx.set(down.rd_req.ready, 1)
        assert ctx.get(down.rd_req.valid) and ctx.get(up.rd_req.ready)
        await ctx.tick()                    # taken while held: the next one is held
        assert not ctx.get(down.rd_req.valid) and not ctx.get(up.rd_req.ready)
        assert not ctx.get(dut.idle)
    simulate(dut, bench)


class _Model:
    """The docstring's rules, cycle by cycle, for the MA, the VA and the migrate engine:
    each reserved command's position ``t`` from the cycle after its START, its phases
    from the guard and RSV_SHARE taken at the START."""

    def __init__(self, classes, guard, reserved=0, background=0):
        self.classes, self.guard = classes, guard
        self.reserved, self.background = reserved, background
        self.run = {"ma": False, "va": False}
        self.t = {"ma": 0, "va": 0}
        self.first = {"ma": False, "va": False}
        self.plan = {"ma": (0, 0, 0), "va": (0, 0, 0)}     # guard, RESERVED, BACKGROUND

    def phases(self, n):
        """(guarding, closed, open) of n now."""
        g, r, b = self.plan[n]
        t = self.t[n]
        guarding = self.first[n] and t < g
        if b == 0:
            return guarding, False, False
        return guarding, not g <= t < g + r, t >= 2 * g + r

    def step(self, launch, busy, cls):
        go = {n: launch[n] and bool(self.classes >> cls[n] & 1) for n in self.run}
        running = dict(self.run)        # the holds are registers: from the cycle after
        flags = {n: self.phases(n) for n in self.run}
        shut = {n: running[n] and not flags[n][2] for n in self.run}
        hold = {n: flags[n][0] or (running[n] and flags[n][1])
                or (not running[n] and any(shut[k] for k in shut if k != n))
                for n in self.run}
        hold["migrate"] = any(shut.values())
        for n in self.run:
            g, r, b = self.plan[n]
            period = 2 * g + r + b
            if go[n]:
                self.run[n], self.t[n], self.first[n] = True, 0, True
                self.plan[n] = (self.guard, max(self.reserved, 1) if self.background else 0,
                                self.background)
                continue
            if b and running[n] and self.t[n] == period - 1:
                self.t[n], self.first[n] = 0, False
            elif self.t[n] < (period - 1 if b else g):
                self.t[n] += 1
            if not busy[n]:
                self.run[n] = False
        return hold, any(running.values()), sum(go.values())


@pytest.mark.parametrize("seed, classes, guard, reserved, background", [
    (0, 1 << DECODE, 17, 0, 0), (1, 1 << DECODE | 1 << PREFILL, 5, 0, 0),
    (2, 1 << DECODE, 0, 0, 0), (3, 1 << DECODE | 1 << PREFILL, 1, 0, 0), (4, 0, 5, 0, 0),
    (5, 1 << DECODE, 6, 9, 4), (6, 1 << DECODE | 1 << PREFILL, 3, 2, 7),
    (7, 1 << DECODE, 0, 5, 3), (8, 1 << DECODE, 4, 0, 6), (9, 0, 4, 5, 6)])
def test_reserve_control_against_a_model(seed, classes, guard, reserved, background):
    """Random commands of the MA and VA (random classes, lengths and gaps) under
    RESERVE.CLASSES ``classes``, RSV_GUARD ``guard`` and RSV_SHARE ``reserved`` /
    ``background``: every cycle's holds and prefetch-off as the model's, and RSV_STARTS
    counts the reserved STARTs. The register values change between commands (taken at
    each START)."""
    rng = random.Random(seed)
    print(f"seed {seed}")
    dut = ReserveControl()
    model = _Model(classes, guard, reserved, background)

    async def bench(ctx):
        ctx.set(dut.classes, classes)
        for n in ("ma", "va", "migrate"):
            ctx.set(getattr(dut, f"idle_{n}"), 1)
        left = {"ma": 0, "va": 0}
        cls = {"ma": DECODE, "va": DECODE}
        starts = 0
        for cycle in range(1200):
            if cycle % 150 == 0:        # new values, sometimes while a command runs
                model.guard = rng.choice([guard, guard + 1])
                model.reserved = rng.choice([reserved, reserved + 2])
                model.background = rng.choice([background, background + 1]) \
                    if background else 0
            ctx.set(dut.guard, model.guard)
            ctx.set(dut.reserved, model.reserved)
            ctx.set(dut.shared, model.background)
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
                assert ctx.get(getattr(dut, f"hold_{n}")) == hold[n], (cycle, n)
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


def _schedule(guard, reserved, background, periods):
    """The phases of the module docstring, cycle by cycle from the cycle after START."""
    one = "G" * guard + "R" * reserved + "G" * guard + "B" * background
    return one * periods


@pytest.mark.parametrize("guard, reserved, background, delays", [
    (5, 7, 4, (0, 3, 11)), (0, 3, 2, (1, 4)), (2, 0, 5, (0, 7)), (3, 1, 1, (2, 5))])
def test_phase_schedule(guard, reserved, background, delays):
    """A long reserved MA command under RSV_SHARE: from the cycle after its START its
    bursts go only in the RESERVED phases, the migrate engine's and an unreserved VA's
    only in the BACKGROUND phases, nobody's in the guards; the same schedule whatever
    cycle the START came at (``delays``: idle cycles before it), RESERVED 0 read as 1
    (the command still issues once a period), the prefetch off throughout. When the
    command ends, the background issues at once."""
    dut = ReserveControl()
    phases = _schedule(guard, max(reserved, 1), background, 3)

    async def bench(ctx):
        ctx.set(dut.classes, 1 << DECODE)
        ctx.set(dut.cls_ma, DECODE)
        ctx.set(dut.cls_va, PREFILL)
        ctx.set(dut.guard, guard)
        ctx.set(dut.reserved, reserved)
        ctx.set(dut.shared, background)
        ctx.set(dut.busy_va, 1)
        for n in ("ma", "va", "migrate"):
            ctx.set(getattr(dut, f"idle_{n}"), 1)
        seen = []
        for delay in delays:
            for _ in range(delay):
                await ctx.tick()
            ctx.set(dut.launch_ma, 1)
            await ctx.tick()
            ctx.set(dut.launch_ma, 0)
            ctx.set(dut.busy_ma, 1)
            got = ""
            for _ in phases:
                ma, va, mig = (ctx.get(getattr(dut, f"hold_{n}")) for n in ("ma", "va", "migrate"))
                assert va == mig, "the unreserved VA is background"
                assert ctx.get(dut.prefetch_off)
                got += {(0, 1): "R", (1, 0): "B", (1, 1): "G"}[(ma, mig)]
                await ctx.tick()
            ctx.set(dut.busy_ma, 0)
            await ctx.tick()
            assert not ctx.get(dut.hold_migrate) and not ctx.get(dut.hold_va)
            assert not ctx.get(dut.prefetch_off)
            seen.append(got)
        assert seen == [phases] * len(delays), (phases, seen)
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


def test_late_guards_between_phases():
    """RSV_SHARE (guard 10, RESERVED 20, BACKGROUND 30: a period of 70 cycles): the
    command's own burst still unanswered after the guard that follows RESERVED counts
    one RSV_LATE, as the background's after the guard that follows BACKGROUND does; a
    drain within its guard does not; RSV_DRAIN_MAX is the longest drain of any guard
    (cycles from the guard's start)."""
    dut = ReserveControl()
    # (requester, first position unanswered, position answered): positions count from
    # the cycle after START; the guards are 0..9, 30..39, 70..79, 100..109.
    busy = [("ma", 25, 36), ("migrate", 65, 85), ("ma", 95, 112)]

    async def bench(ctx):
        ctx.set(dut.classes, 1 << DECODE)
        ctx.set(dut.cls_ma, DECODE)
        ctx.set(dut.guard, 10)
        ctx.set(dut.reserved, 20)
        ctx.set(dut.shared, 30)
        ctx.set(dut.launch_ma, 1)
        await ctx.tick()
        ctx.set(dut.launch_ma, 0)
        ctx.set(dut.busy_ma, 1)
        lates = []
        for t in range(130):
            for n in ("ma", "va", "migrate"):
                ctx.set(getattr(dut, f"idle_{n}"),
                        not any(k == n and a <= t < b for k, a, b in busy))
            await ctx.tick()
            lates.append(ctx.get(dut.late))
        # Counted the cycle after the two late guards end (positions 80 and 110).
        assert [t for t in range(1, 130) if lates[t] != lates[t - 1]] == [80, 110], lates
        assert ctx.get(dut.late) == 2 and ctx.get(dut.starts) == 1
        assert ctx.get(dut.drain_max) == 85 - 70
    simulate(dut, bench)
