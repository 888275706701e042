"""Golden model of Muon (``golden.muon``): paths, timing contract, the reservation table.

The reservation model is checked against a brute-force oracle: every candidate start
cycle tried in turn, every window of every link compared.
"""

import random

import pytest

from golden.muon import (
    BAD_REQUEST,
    INJECT,
    ReservationModel,
    hops,
    path_links,
    window,
    xy_route,
    zero_load_latency,
)
from sim.seed import test_seed
from spec.codes import MUON_HOP_CYCLES, MuonPort


def test_xy_path_goes_along_the_row_first():
    links = path_links((0, 2), (3, 0))
    ports = [link.port for link, _ in links]
    assert ports[0] == INJECT
    assert ports[1:] == [MuonPort.EAST] * 3 + [MuonPort.NORTH] * 2 + [MuonPort.LOCAL]
    assert [hop for _, hop in links[1:]] == list(range(6))
    assert links[-1][0].x == 3 and links[-1][0].y == 0


def test_path_to_self_is_injection_then_ejection():
    assert [link.port for link, _ in path_links((1, 1), (1, 1))] == [INJECT, MuonPort.LOCAL]
    assert xy_route(1, 1, (1, 1)) == MuonPort.LOCAL


def test_zero_load_latency_is_two_cycles_per_hop():
    assert zero_load_latency((0, 0), (3, 3)) - zero_load_latency((0, 0), (0, 0)) \
        == MUON_HOP_CYCLES * hops((0, 0), (3, 3)) == 12


def _collides(model, src, dst, start, duration):
    mine = {link: window(start, duration, link, hop) for link, hop in path_links(src, dst)}
    for other in model.slots:
        if other is None:
            continue
        for link, (lo, hi) in other.windows().items():
            if link in mine and mine[link][0] < hi and lo < mine[link][1]:
                return True
    return False


def _brute_force_fit(model, src, dst, duration, earliest):
    t = earliest
    while _collides(model, src, dst, t, duration):
        t += 1
    return t


@pytest.mark.parametrize("size", [(2, 2), (4, 4), (3, 5)])
def test_reservation_answers_match_brute_force(size):
    rng = test_seed()
    cols, rows = size
    model = ReservationModel(cols, rows, slots=6)
    now = 0
    grants = 0
    for _ in range(400):
        now += rng.randrange(0, 30)
        src = (rng.randrange(cols), rng.randrange(rows))
        dst = (rng.randrange(cols), rng.randrange(rows))
        duration = rng.randint(1, 30)
        start = now + rng.randrange(0, 150)
        live = model.live(now)
        fit = _brute_force_fit(model, src, dst, duration, max(start, now + model.lead))
        answer = model.request(now, src, dst, start, duration, duration)
        if len(live) == model.n_slots:
            assert answer.full and answer.retry_after == min(r.end for r in model.slots)
        elif fit == start:
            grants += 1
            slot = model.slots[answer.id & ((1 << model.slot_bits) - 1)]
            assert answer.granted and (slot.start, slot.src, slot.dst) == (start, src, dst)
        else:
            assert not answer.granted and answer.retry_after == fit
    assert grants > 20


def test_granted_reservations_never_share_a_link_cycle():
    rng = random.Random(5)
    model = ReservationModel(4, 4, slots=8)
    for _ in range(300):
        src = (rng.randrange(4), rng.randrange(4))
        dst = (rng.randrange(4), rng.randrange(4))
        answer = model.request(0, src, dst, model.lead + rng.randrange(0, 100), 8, 8)
        if not answer.granted and not answer.full:
            model.request(0, src, dst, answer.retry_after, 8, 8)
    used = {}
    for r in model.slots:
        for link, (lo, hi) in r.windows().items():
            for cycle in range(lo, hi):
                assert (link, cycle) not in used, f"{r} and {used[link, cycle]} share {link}"
                used[link, cycle] = r


def test_ids_change_when_a_slot_is_reused():
    model = ReservationModel(2, 2, slots=2)
    first = model.request(0, (0, 0), (1, 1), 100, 5, 5)
    model.request(0, (1, 0), (0, 1), 100, 5, 5)
    full = model.request(0, (0, 1), (0, 1), 300, 5, 5)
    assert full.full and full.retry_after == model.slots[0].end
    later = model.request(full.retry_after, (0, 1), (0, 1), 400, 5, 5)
    assert later.granted and later.id != first.id and later.id & 1 == first.id & 1


@pytest.mark.parametrize("fields", [dict(duration=0, bandwidth=0), dict(duration=4, bandwidth=5),
                                    dict(duration=4, bandwidth=0), dict(dst=(2, 0))])
def test_bad_requests_are_refused(fields):
    request = dict(src=(0, 0), dst=(1, 1), start=100, duration=4, bandwidth=4) | fields
    assert ReservationModel(2, 2).request(0, **request) == BAD_REQUEST
