"""The RBR arbiter (``hdl.muon.rbr.ReservationTable``) in the Amaranth simulator: every
answer equals the golden model's (``golden.muon.ReservationModel``)."""

import pytest
from amaranth.sim import Simulator

from golden.muon import BAD_REQUEST, ReservationModel
from hdl.muon.rbr import ReservationTable, decision_lead
from sim.seed import test_seed


def run_requests(cols, rows, slots, requests_of):
    """Run ``requests_of(now, log) → request dict or None`` until it returns None; returns
    [(request, RTL answer, golden answer, decision cycles)]."""
    dut = ReservationTable(cols, rows, slots)
    model = ReservationModel(cols, rows, slots)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    log = []

    async def timebase(ctx):
        cycle = 0
        ctx.set(dut.now, 0)
        async for _ in ctx.tick():
            cycle += 1
            ctx.set(dut.now, cycle)

    async def requester(ctx):
        while True:
            now = ctx.get(dut.now)
            request = requests_of(now, log)
            if request is None:
                return
            gap = request.pop("gap", 0)
            for _ in range(gap):
                await ctx.tick()
            r = dut.request
            ctx.set(r.src_x, request["src"][0])
            ctx.set(r.src_y, request["src"][1])
            ctx.set(r.dst_x, request["dst"][0])
            ctx.set(r.dst_y, request["dst"][1])
            ctx.set(r.start, request["start"])
            ctx.set(r.duration, request["duration"])
            ctx.set(r.bandwidth, request["bandwidth"])
            now = ctx.get(dut.now)
            expected = model.request(now, **request)
            if ctx.get(dut.refuse):
                log.append((request, BAD_REQUEST, expected, 0))
                await ctx.tick()
                continue
            ctx.set(dut.launch, 1)
            await ctx.tick()
            ctx.set(dut.launch, 0)
            cycles = 1
            while not ctx.get(dut.done):
                await ctx.tick()
                cycles += 1
            res = dut.result
            got = (ctx.get(res.granted), ctx.get(res.full), ctx.get(res.id),
                   ctx.get(res.retry_after))
            log.append((request, got, expected, cycles))
            await ctx.tick()

    sim.add_process(timebase)
    sim.add_testbench(requester)
    sim.run()
    return log, model


def _as_tuple(answer):
    if answer == BAD_REQUEST:
        return answer
    return (int(answer.granted), int(answer.full), answer.id, answer.retry_after)


@pytest.mark.parametrize("cols,rows,slots", [(2, 2, 4), (4, 4, 8), (3, 2, 3)])
def test_every_answer_matches_golden(cols, rows, slots):
    rng = test_seed()
    remaining = [250]
    lead = decision_lead(slots, cols, rows)

    def next_request(now, log):
        if remaining[0] == 0:
            return None
        remaining[0] -= 1
        duration = rng.randint(0 if rng.random() < 0.03 else 1, 8 * slots)
        return {"src": (rng.randrange(cols), rng.randrange(rows)),
                "dst": (rng.randrange(cols + (rng.random() < 0.03)), rng.randrange(rows)),
                "start": now + rng.randrange(0 if rng.random() < 0.2 else lead, lead + 200),
                "duration": duration,
                "bandwidth": rng.randint(1, duration + 1) if duration else 1,
                "gap": rng.choice([0, 0, 0, 5, 40])}

    log, _ = run_requests(cols, rows, slots, next_request)
    kinds = set()
    for request, got, expected, cycles in log:
        assert got == _as_tuple(expected), f"{request}: RTL {got}, golden {expected}"
        if got != BAD_REQUEST:
            kinds.add("granted" if got[0] else "full" if got[1] else "retry")
            # The decision ends before the earliest grantable start.
            assert cycles < decision_lead(slots, cols, rows)
        else:
            kinds.add("refused")
    assert kinds == {"granted", "full", "retry", "refused"}, kinds


def test_a_retry_after_answer_is_then_granted():
    """Asking again at retry_after gets a grant (nothing else changed meanwhile)."""
    script = [{"src": (0, 0), "dst": (3, 3), "start": 200, "duration": 10, "bandwidth": 3},
              {"src": (0, 1), "dst": (3, 3), "start": 200, "duration": 10, "bandwidth": 3}]

    def next_request(now, log):
        if script:
            return script.pop(0)
        if len(log) == 2:
            return dict(log[1][0], start=log[1][1][3])
        return None

    log, _ = run_requests(4, 4, 8, next_request)
    (_, first, _, _), (_, second, _, _), (_, third, _, _) = log
    assert first[0] == 1 and second[0] == 0 and second[3] > 200 and third[0] == 1
