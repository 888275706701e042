"""The Muon transfer model (golden/muon_latency.py) on the Amaranth-simulator mesh.

Random transfers (source, destination, 1..12 flits) cross an otherwise empty
:class:`hdl.muon.mesh.Mesh`, one at a time, best-effort; each must take exactly
:func:`golden.muon_latency.transfer_cycles` from the head's injection to the tail's
arrival. Then reserved transfers: a slot of the reservation table (as the RBR arbiter
grants it) covers each flow's path, its flits are injected on the reserved VC one a
cycle from the window's start while best-effort packets from other sources cross the
same links; each reserved flit must arrive exactly the zero-load latency after its
injection (the model is exact; the check allows no error).
"""

import random

from amaranth.sim import Simulator

from golden.muon import zero_load_latency
from golden.muon_latency import reserved_transfer_end, transfer_cycles
from hdl.muon.layouts import FlitLayout
from hdl.muon.mesh import Mesh, node_index
from sim.bfm.credit import codec

COLS, ROWS = 3, 3
FLIT = codec(FlitLayout)


def packet(src, dst, flits, vc=0, rsv_id=0):
    out = []
    for i in range(flits):
        common = {"vc": vc, "head": int(i == 0), "tail": int(i == flits - 1)}
        if i == 0:
            out.append(FLIT.pack({**common, "data": {"header": {
                "src_x": src[0], "src_y": src[1], "dst_x": dst[0], "dst_y": dst[1], "cls": 7,
                "rsv_id": rsv_id}}}))
        else:
            out.append(FLIT.pack({**common, "data": {"payload": i}}))
    return out


def run_mesh(plan, cycles, slots=()):
    """``plan``: {cycle: [(node, flit), ...]} flits offered from that cycle on (held
    until taken, in order per node). Returns (taken: [(cycle, node, flit)],
    ejected: [(cycle, node, flit)])."""
    dut = Mesh(COLS, ROWS, slots=4)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    taken, ejected = [], []

    async def bench(ctx):
        ctx.set(dut.max_age, (1 << 32) - 1)
        for e, slot in enumerate(slots):
            for name, value in slot.items():
                ctx.set(getattr(dut.slots[e], name), value)
        queues = {n: [] for n in range(COLS * ROWS)}
        for cycle in range(cycles):
            ctx.set(dut.now, cycle)
            for node, flit in plan.get(cycle, ()):
                queues[node].append(flit)
            for n, q in queues.items():
                ctx.set(dut.inject[n].valid, bool(q))
                if q:
                    ctx.set(dut.inject[n].payload.as_value(), q[0])
                ctx.set(dut.eject[n].ready, 1)
            await ctx.delay(1e-9)
            for n, q in queues.items():
                if q and ctx.get(dut.inject[n].ready):
                    taken.append((cycle, n, q.pop(0)))
                if ctx.get(dut.eject[n].valid):
                    ejected.append((cycle, n, ctx.get(dut.eject[n].payload.as_value())))
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    return taken, ejected


def test_best_effort_transfers_take_the_zero_load_time():
    rng = random.Random(7)
    plan, transfers, cycle = {}, [], 2
    for _ in range(8):
        src = (rng.randrange(COLS), rng.randrange(ROWS))
        dst = (rng.randrange(COLS), rng.randrange(ROWS))
        flits = rng.randrange(1, 13)
        plan[cycle] = [(node_index(*src, COLS), f) for f in packet(src, dst, flits)]
        transfers.append((cycle, src, dst, flits))
        cycle += flits + 12              # the mesh is empty again before the next one
    taken, ejected = run_mesh(plan, cycle)
    for start, src, dst, flits in transfers:
        node = node_index(*src, COLS)
        head = next(c for c, n, _ in taken if n == node and c >= start)
        tail = max(c for c, n, _ in ejected if n == node_index(*dst, COLS)
                   and head <= c < head + flits + 12)
        measured = tail - head
        model = transfer_cycles(src, dst, flits)
        print(f"{src} -> {dst}, {flits} flits: RTL {measured}, model {model}")
        assert measured == model, (src, dst, flits, measured, model)


def test_reserved_transfers_keep_their_latency_under_best_effort_load():
    rng = random.Random(11)
    plan, slots, flows = {}, [], []
    start = 10
    for e in range(3):
        src = (rng.randrange(COLS), rng.randrange(ROWS))
        dst = (rng.randrange(COLS), rng.randrange(ROWS))
        flits = rng.randrange(2, 9)
        duration = flits
        slots.append({"valid": 1, "src_x": src[0], "src_y": src[1], "dst_x": dst[0],
                      "dst_y": dst[1], "start": start, "duration": duration,
                      "end": start + 2 * (COLS + ROWS) + duration + 2, "id": e + 1})
        node = node_index(*src, COLS)
        for i, flit in enumerate(packet(src, dst, flits, vc=1, rsv_id=e + 1)):
            plan.setdefault(start + i, []).append((node, flit))
        flows.append((start, src, dst, flits))
        start += flits + 2 * (COLS + ROWS) + 8
    # Best-effort load: long packets from every node to random destinations, throughout.
    for cycle in range(0, start, 6):
        src = (rng.randrange(COLS), rng.randrange(ROWS))
        dst = (rng.randrange(COLS), rng.randrange(ROWS))
        plan.setdefault(cycle, []).extend((node_index(*src, COLS), f)
                                          for f in packet(src, dst, 6))
    taken, ejected = run_mesh(plan, start + 40, slots)
    for t0, src, dst, flits in flows:
        node, out = node_index(*src, COLS), node_index(*dst, COLS)
        sent = [c for c, n, f in taken if n == node and FLIT.get(f, "vc") == 1
                and t0 <= c < t0 + flits + 4]
        got = [c for c, n, f in ejected if n == out and FLIT.get(f, "vc") == 1
               and t0 <= c < t0 + flits + 4 + zero_load_latency(src, dst)]
        print(f"reserved {src} -> {dst}, {flits} flits from {t0}: injected {sent}, "
              f"ejected {got}")
        assert sent == list(range(t0, t0 + flits))
        assert [g - s for s, g in zip(sent, got, strict=True)] == [zero_load_latency(src, dst)] * flits
        assert got[-1] == reserved_transfer_end(src, dst, flits, t0)
