"""cocotb side of ``v4hw bench muon``: runs on ``v4hw_muon_bench`` (``sim.muon_traffic``).

The plan comes in the JSON file named by ``V4HW_MUON_BENCH_PLAN`` and the results go to
the JSON file ``V4HW_MUON_BENCH_OUT`` (``sim.muon_bench`` writes the one and reads the
other). Phases, in this order:

1. **zero load** (``sim.muon_driver.MuonBench`` drives the ports, one packet in the
   mesh at a time): a one-flit packet between every pair of nodes; head latency
   (ejection cycle − injection cycle) per hop count.
2. **request → grant**: reservation requests through AXI4-Lite, with 0..slots−1
   granted reservations on the same path; cycles from the request's START to its
   answer (RSV_REQ_CYCLE, RSV_GRANT_CYCLE), each answer checked against the golden model.
3. **load points** (the RTL sources and sinks, clock free): per point warm-up,
   measurement, drain (sources keep injecting until every measured packet has arrived,
   or a limit), then the sources stop and the mesh empties before the next point.
4. **reserved flow under load**: at each best-effort load a reservation from one
   corner to the other, ``count`` packets in its window; the destination's sink keeps
   the least and greatest head latency of the reserved packets.
"""

import json
import os
import random

import cocotb
from cocotb.triggers import RisingEdge, Timer

from golden.muon import hops
from sim.muon_driver import PERIOD_NS, MuonBench
from sim.muon_traffic import PATTERNS, STATS, zero_load_packet
from spec.codes import TrafficClass

COLS = int(os.environ.get("V4HW_MUON_COLS", "4"))
ROWS = int(os.environ.get("V4HW_MUON_ROWS", "4"))
NODES = COLS * ROWS


def _zero_gen_ports(dut):
    for name in ("gen_enable", "gen_clear", "gen_measure", "gen_rate", "gen_pattern",
                 "gen_hot_x", "gen_hot_y", "gen_hot_frac", "rsv_enable", "rsv_src",
                 "rsv_dst_x", "rsv_dst_y", "rsv_id", "rsv_start", "rsv_period", "rsv_count"):
        getattr(dut, name).value = 0


async def _cycles(dut, count):
    """Let the clock run ``count`` cycles with no Python in between."""
    await Timer(count * PERIOD_NS, unit="ns")
    await RisingEdge(dut.ap_clk)


def _stats(dut):
    """Per node statistics, and their sums."""
    per_node = []
    for n in range(NODES):
        per_node.append({name: int(getattr(dut, f"stat{n}_{name}").value)
                         for name in STATS} | {
                        "slack_min": getattr(dut, f"stat{n}_slack_min").value.to_signed()})
    total = {name: sum(s[name] for s in per_node) for name in STATS
             if name not in ("lat_max", "rsv_min", "rsv_max")}
    total["lat_max"] = max(s["lat_max"] for s in per_node)
    total["slack_min"] = min(s["slack_min"] for s in per_node)
    return per_node, total


async def _clear(dut):
    dut.gen_clear.value = 1
    await RisingEdge(dut.ap_clk)
    dut.gen_clear.value = 0


async def _empty(dut, limit):
    """Sources off; wait until every injected packet has arrived (or ``limit`` cycles)."""
    dut.gen_rate.value = 0
    waited, last = 0, None
    while waited < limit:
        await _cycles(dut, 200)
        waited += 200
        _, total = _stats(dut)
        state = (total["sent"], total["received"])
        if state == last and total["sent"] == total["received"]:
            return True
        last = state
    return False


def _rate(load, length):
    """gen_rate for ``load`` flits/node/cycle: packet probability · 2^16 (at most 65535)."""
    return min(65535, round(load / length * 65536))


async def _load_point(dut, plan, pattern, load):
    length = plan["length"]
    dut.gen_pattern.value = PATTERNS[pattern]
    dut.gen_hot_x.value, dut.gen_hot_y.value = plan["hotspot"]
    dut.gen_hot_frac.value = round(plan["hot_frac"] * 65535)
    await _clear(dut)
    dut.gen_rate.value = _rate(load, length)
    await _cycles(dut, plan["warmup"])
    dut.gen_measure.value = 1
    await _cycles(dut, plan["measure"])
    dut.gen_measure.value = 0
    drained, waited = False, 0
    while waited < plan["drain"]:
        _, total = _stats(dut)
        if total["delivered"] == total["created"]:
            drained = True
            break
        await _cycles(dut, 250)
        waited += 250
    per_node, total = _stats(dut)
    emptied = await _empty(dut, plan["empty"])
    _, after = _stats(dut)
    delivered = total["delivered"]
    return {
        "pattern": pattern, "offered": load, "rate": _rate(load, length),
        "accepted": total["rx_flits"] / (NODES * plan["measure"]),
        "created": total["created"], "delivered": delivered, "refused": total["refused"],
        "latency_avg": total["lat_sum"] / delivered if delivered else None,
        "latency_max": total["lat_max"] if delivered else None,
        "slack_min": total["slack_min"] if delivered else None,
        "drained": drained, "drain_cycles": waited, "emptied": emptied,
        "sent_total": after["sent"], "received_total": after["received"],
        "per_node_delivered": [s["delivered"] for s in per_node],
    }


async def _jitter_point(dut, bench, plan, load):
    """A reserved flow corner to corner while uniform best-effort load ``load`` runs."""
    length, count, period = plan["length"], plan["rsv_count"], plan["rsv_period"]
    src, dst = (0, 0), (COLS - 1, ROWS - 1)
    dut.gen_pattern.value = PATTERNS["uniform"]
    await _clear(dut)
    dut.gen_rate.value = _rate(load, length)
    await _cycles(dut, plan["warmup"])
    now = int(dut.bench_now.value)
    start = now + bench.golden.lead + 400
    duration = count * period
    record = await bench.reserve(src, dst, start, duration, count * length)
    assert record["granted"], record
    dut.rsv_src.value = src[1] * COLS + src[0]
    dut.rsv_dst_x.value, dut.rsv_dst_y.value = dst
    dut.rsv_id.value = record["id"]
    dut.rsv_start.value = start
    dut.rsv_period.value = period
    dut.rsv_count.value = count
    dut.rsv_enable.value = 1
    end = start + duration + 4 * hops(src, dst) + 20
    await _cycles(dut, end - int(dut.bench_now.value))
    per_node, total = _stats(dut)
    sink = per_node[dst[1] * COLS + dst[0]]
    result = {
        "offered": load, "src": src, "dst": dst, "id": record["id"],
        "req_cycle": record["req_cycle"], "grant_cycle": record["grant_cycle"],
        "sent": int(dut.rsv_sent.value), "late": int(dut.rsv_late.value),
        "received": sink["rsv_count"], "latency_min": sink["rsv_min"],
        "latency_max": sink["rsv_max"],
        "be_accepted": total["rx_flits"] and None,
    }
    dut.rsv_enable.value = 0
    await _empty(dut, plan["empty"])
    return result


async def _zero_load(bench):
    rows = []
    for sy in range(ROWS):
        for sx in range(COLS):
            for dy in range(ROWS):
                for dx in range(COLS):
                    packet = bench.send((sx, sy), (dx, dy), TrafficClass.DECODE, 1)
                    while packet.rx is None:
                        await bench.cycles(1)
                    rows.append({"src": [sx, sy], "dst": [dx, dy],
                                 "hops": hops((sx, sy), (dx, dy)),
                                 "latency": packet.rx - packet.tx})
    return rows


async def _request_grant(bench, plan):
    """Answers with 0..slots-1 granted reservations on the path (0,0) → far corner."""
    src, dst = (0, 0), (COLS - 1, ROWS - 1)
    rows = []
    width = 8
    slots = bench.golden.n_slots
    # Far enough ahead that every request of the phase is still before its start.
    base = bench.cycle + bench.golden.lead + 400 * slots
    last = base
    for taken in range(slots):
        # A request for the first window collides with every earlier grant (retry_after);
        # asking again at retry_after is granted.
        record = await bench.reserve(src, dst, base, width, 1)
        rows.append(_grant_row(record, taken, "colliding" if taken else "free"))
        for _ in range(3):
            if record["granted"]:
                break
            record = await bench.reserve(src, dst, record["retry_after"], width, 1)
            rows.append(_grant_row(record, taken, "at retry_after"))
        assert record["granted"], record
        last = max(last, record["start"])
    # Wait until all of them have expired (the table is empty again).
    while bench.cycle < last + width + 4 * (COLS + ROWS) + 10:
        await bench.cycles(50)
    return rows


def _grant_row(record, taken, case):
    return {"slots_taken": taken, "case": case, "granted": record["granted"],
            "req_cycle": record["req_cycle"], "grant_cycle": record["grant_cycle"],
            "cycles": record["grant_cycle"] - record["req_cycle"]}


@cocotb.test()
async def bench(dut):
    """The whole plan (see the module docstring); results to V4HW_MUON_BENCH_OUT."""
    with open(os.environ["V4HW_MUON_BENCH_PLAN"]) as f:
        plan = json.load(f)
    _zero_gen_ports(dut)
    dut.gen_seed.value = plan["seed"]
    bench = MuonBench(dut, cols=COLS, rows=ROWS, rng=random.Random(plan["seed"]))
    await bench.start()
    await bench.set_max_age((1 << 32) - 1)     # no TSP drop in the bench
    out = {"plan": plan, "cols": COLS, "rows": ROWS,
           "zero_load_packet": {str(h): zero_load_packet(h, plan["length"])
                                for h in range(COLS + ROWS - 1)}}
    out["zero_load"] = await _zero_load(bench) if plan["zero_load"] else []
    out["grant"] = await _request_grant(bench, plan) if plan["grant"] else []
    await bench.finish()
    await bench.stop()
    dut.gen_enable.value = 1
    out["sweep"] = []
    for pattern, loads in plan["sweep"].items():
        for load in loads:
            point = await _load_point(dut, plan, pattern, load)
            out["sweep"].append(point)
            dut._log.info("%s %.2f: accepted %.3f latency %s drained %s", pattern, load,
                          point["accepted"], point["latency_avg"], point["drained"])
    out["jitter"] = []
    for load in plan["jitter_loads"]:
        out["jitter"].append(await _jitter_point(dut, bench, plan, load))
    dut.gen_enable.value = 0
    with open(os.environ["V4HW_MUON_BENCH_OUT"], "w") as f:
        json.dump(out, f, indent=1)
