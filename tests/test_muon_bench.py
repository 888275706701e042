"""Smoke run of ``v4hw bench muon`` (``sim.muon_bench``) on a 2×2 mesh: one load point of
uniform random traffic, the zero-load latencies, reservation request → answer times and
one reserved flow under load, with the invariants every point of the full sweep must
meet.

Verilator only: the load point runs the RTL traffic sources with the clock free for a
few thousand cycles, which is the bench's purpose; the functions it measures are
checked on both simulators by ``tests/test_muon_cocotb.py``.
"""

import pytest

from golden.muon import decision_lead, zero_load_latency
from sim import perf
from sim.muon_bench import default_plan, run, summary


@pytest.mark.cocotb
def test_muon_bench_smoke():
    plan = default_plan(quick=True)
    results = run(2, 2, plan, timeout_s=600)
    print(summary(results))
    # Zero load: every pair, the head exactly 2 + 2·hops cycles after its injection.
    assert len(results["zero_load"]) == 16
    for row in results["zero_load"]:
        assert row["latency"] == zero_load_latency(row["src"], row["dst"]), row
    # Request → answer: every answer (checked against the golden model by the bench)
    # came within the decision lead, with 0 up to all slots but one taken.
    grant = results["grant"]
    assert {g["slots_taken"] for g in grant} == set(range(8))
    assert all(0 < g["cycles"] < decision_lead(8, 2, 2) for g in grant)
    (point,) = results["sweep"]
    # Nothing lost: every measured packet arrived, and after the sources stopped every
    # injected packet did (no drop: MAX_AGE is at its maximum).
    assert point["drained"] and point["emptied"]
    assert point["created"] > 0 and point["delivered"] == point["created"]
    assert point["received_total"] == point["sent_total"]
    # No packet beat the zero-load latency of its hop count, and the mesh carried the
    # offered load (below saturation nothing is refused).
    assert point["slack_min"] >= 0
    assert point["refused"] == 0
    assert 0.5 * point["offered"] < point["accepted"] < 1.5 * point["offered"]
    # The reserved flow: every packet injected in its cycle and none late or lost, all
    # at the same latency, the zero-load one.
    (flow,) = results["jitter"]
    assert flow["sent"] == plan["rsv_count"] == flow["received"]
    assert flow["late"] == 0
    assert flow["latency_min"] == flow["latency_max"] == zero_load_latency(flow["src"],
                                                                          flow["dst"])
    # The figures against the committed baseline (sim/perf.py).
    where = f"muon.bench.2x2.{point['pattern']}"
    perf.check_all(where, {"latency_avg": point["latency_avg"], "latency_max": point["latency_max"],
                           "grant_cycles_max": max(g["cycles"] for g in grant)}, simulator="verilator")
    perf.check(f"{where}.accepted", point["accepted"], better="higher", simulator="verilator")


def test_bench_outputs_from_results(tmp_path):
    """CSV and PNG files from a bench's results: the figures land where the summary and
    the CSV say (saturation = accepted throughput at offered 1.0, per-hop slope)."""
    import csv

    from sim.muon_bench import saturation, write_outputs

    zero = [{"src": [0, 0], "dst": [h, 0], "hops": h, "latency": 2 + 2 * h} for h in range(4)]
    point = {"delivered": 10, "created": 10, "latency_max": 30, "slack_min": 0, "drained": True,
             "emptied": True, "sent_total": 50, "received_total": 50}
    sweep = [dict(point, pattern="uniform", offered=o, accepted=min(o, 0.4), refused=int(o > 0.4),
                  latency_avg=10 + 20 * o) for o in (0.2, 0.6, 1.0)]
    jitter = [{"offered": o, "src": [0, 0], "dst": [3, 0], "sent": 5, "received": 5, "late": 0,
               "latency_min": 8, "latency_max": 8} for o in (0.0, 1.0)]
    grant = [{"slots_taken": 0, "case": "free", "granted": True, "cycles": 6}]
    results = {"plan": default_plan(), "cols": 4, "rows": 1, "zero_load": zero, "sweep": sweep,
               "jitter": jitter, "grant": grant}
    write_outputs(results, tmp_path)
    for name in ("latency.png", "throughput.png", "jitter.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    with open(tmp_path / "load_latency.csv") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["accepted"]) for r in rows] == [0.2, 0.4, 0.4]
    top, first_refusal = saturation(results)
    assert (top["accepted"], first_refusal) == (0.4, 0.6)
    text = summary(results)
    assert "saturation throughput, uniform random: 0.400" in text
    assert "per hop: 2.00 cycles" in text and "jitter 0" in text
