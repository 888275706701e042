"""One Muon router (``hdl.muon.router.Router``) in the Amaranth simulator.

Router (1, 1) of a 3×3 mesh, its neighbours played by the test: the west and east
neighbours send on their links within the credits the router returns, the local node
injects, and the north neighbour takes every flit of ``out_north`` and returns a credit
for each (the neighbours are :mod:`sim.bfm.credit`'s BFMs). All traffic goes to router
(1, 0), so three inputs compete for one network output. Checked:

* a lone flit crosses in ``MUON_HOP_CYCLES`` (2): injected in cycle t, on the link in t + 2;
* every flit leaves on ``out_north``, each input's packets whole and in order, the
  router never sends on ``out_north`` without a credit (the north buffer never
  overflows) and never returns a credit to its west/east neighbours that they did not
  spend (their credits never exceed the buffer depths);
* class priority and the starvation bound at a network output: a cache-migrate packet
  from the local input waits while decode packets from west and east keep the output
  busy, for at least ``starve_limit`` allocations of other packets and at most
  ``starve_limit + 3`` plus the packet holding the output.
"""

from amaranth.sim import Simulator

from hdl.muon.layouts import FlitLayout
from hdl.muon.router import Router
from sim.bfm.credit import SimCreditSink, SimCreditSource, codec
from sim.seed import test_seed
from spec.codes import MUON_HOP_CYCLES, MuonPort, TrafficClass

BE_DEPTH, RSV_DEPTH, STARVE = 8, 4, 4
TARGET = (1, 0)
FLIT = codec(FlitLayout)


def flits_of(src, serial, length, cls):
    """The flits of a best-effort packet to TARGET (body flits carry serial and index)."""
    out = []
    for i in range(length):
        common = {"vc": 0, "head": int(i == 0), "tail": int(i == length - 1)}
        if i == 0:
            out.append(FLIT.pack({**common, "data": {"header": {
                "src_x": src[0], "src_y": src[1], "dst_x": TARGET[0], "dst_y": TARGET[1],
                "cls": cls}}}))
        else:
            out.append(FLIT.pack({**common, "data": {"payload": serial << 8 | i}}))
    return out


def same(a, b):
    """Equal flits, ignoring a head's time stamp (the injection port writes it)."""
    offset, width = FLIT.fields["data.header.ts"]
    mask = ~(((1 << width) - 1) << offset)
    if FLIT.get(a, "head") and FLIT.get(b, "head"):
        return a & mask == b & mask
    return a == b


def run_router(schedule, cycles):
    """``schedule(cycle, state) → None``: may append packets (lists of flits) to
    ``state['queues'][port]``. Returns what left on out_north, per cycle, and events."""
    dut = Router(1, 1, 3, 3, be_depth=BE_DEPTH, rsv_depth=RSV_DEPTH, starve_limit=STARVE)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    state = {"queues": {MuonPort.LOCAL: [], MuonPort.WEST: [], MuonPort.EAST: []},
             "out": [], "taken": [], "errors": []}

    def vc(flit):
        return FLIT.get(flit, "vc")

    # The west and east neighbours send within the router's credits; the north one
    # takes every flit the cycle after it arrived (:mod:`sim.bfm.credit`).
    links = {port: SimCreditSource(link, (BE_DEPTH, RSV_DEPTH), lanes=2, lane=vc,
                                   name=f"in_{port.name.lower()}")
             for port, link in ((MuonPort.WEST, dut.in_west), (MuonPort.EAST, dut.in_east))}
    north = SimCreditSink(dut.out_north, (BE_DEPTH, RSV_DEPTH), lanes=2, lane=vc,
                          decode=int, name="out_north")

    async def bench(ctx):
        ctx.set(dut.max_age, (1 << 32) - 1)
        local = []                          # flits of the local packet being sent
        for cycle in range(cycles):
            ctx.set(dut.now, cycle)
            schedule(cycle, state)
            for port, source in links.items():
                if source.idle and state["queues"][port]:
                    for flit in state["queues"][port].pop(0):
                        source.send(flit)
            if not local and state["queues"][MuonPort.LOCAL]:
                local = list(state["queues"][MuonPort.LOCAL].pop(0))
            for port, source in links.items():
                flit = source.drive(ctx)
                if flit is not None:
                    state["taken"].append((cycle, port, flit))
            ctx.set(dut.inject.valid, bool(local))
            if local:
                ctx.set(dut.inject.payload.as_value(), local[0])
            north.drive(ctx)
            # What happens at this cycle's edge.
            for source in links.values():
                source.sample(ctx)
            if local and ctx.get(dut.inject.ready):
                state["taken"].append((cycle, MuonPort.LOCAL, local.pop(0)))
            flit = north.sample(ctx)
            if flit is not None:
                state["out"].append((cycle, flit))
            for name in ("out_east", "out_west", "out_south"):
                if ctx.get(getattr(dut, name).valid):
                    state["errors"].append(f"cycle {cycle}: a flit left on {name}")
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    return state


def test_lone_flit_crosses_in_two_cycles():
    def schedule(cycle, state):
        if cycle == 3:
            state["queues"][MuonPort.WEST].append(flits_of((0, 1), 1, 1, TrafficClass.DECODE))
    state = run_router(schedule, 12)
    assert not state["errors"], state["errors"]
    (tx, _, flit), = state["taken"]
    (rx, out), = state["out"]
    assert (rx - tx, out) == (MUON_HOP_CYCLES, flit)


def test_three_inputs_priority_and_starvation_bound():
    rng = test_seed()
    serial = iter(range(1, 10_000))
    low = []

    def schedule(cycle, state):
        queues = state["queues"]
        for port, src in ((MuonPort.WEST, (0, 1)), (MuonPort.EAST, (2, 1))):
            if len(queues[port]) < 2 and cycle < 500:     # then the router drains
                queues[port].append(flits_of(src, next(serial), rng.randint(1, 3),
                                             TrafficClass.DECODE))
        # One cache-migrate packet at a time from the local node, once the output is busy.
        if cycle >= 20 and not queues[MuonPort.LOCAL] and len(low) < 4 and (
                not low or low[-1]["out"] is not None):
            if not low or cycle >= low[-1]["out"] + rng.randrange(3, 12):
                packet = flits_of((1, 1), next(serial), 1, TrafficClass.CACHE_MIGRATE)
                queues[MuonPort.LOCAL].append(packet)
                low.append({"flit": packet[0], "out": None})
        # When the low packet in flight left (they look alike: the first match after
        # the previous one left).
        if low and low[-1]["out"] is None:
            after = low[-2]["out"] if len(low) > 1 else -1
            for when, flit in state["out"]:
                if when > after and same(flit, low[-1]["flit"]):
                    low[-1]["out"] = when
                    break

    state = run_router(schedule, 600)
    assert not state["errors"], state["errors"]
    assert len(low) == 4 and all(item["out"] is not None for item in low), low

    # Every flit taken left on out_north, in order per input, packets whole: the
    # output's flits, split by the input each packet came from, are those inputs' flits.
    sent = {}
    for _, port, flit in state["taken"]:
        sent.setdefault(port, []).append(flit)
    port_of_src = {(0, 1): MuonPort.WEST, (2, 1): MuonPort.EAST, (1, 1): MuonPort.LOCAL}
    got, port = {}, None
    for _, flit in state["out"]:
        if FLIT.get(flit, "head"):
            port = port_of_src[FLIT.get(flit, "data.header.src_x"),
                               FLIT.get(flit, "data.header.src_y")]
        got.setdefault(port, []).append(flit)
    assert got.keys() == sent.keys()
    for port, flits in sent.items():
        assert len(got[port]) == len(flits) and all(map(same, got[port], flits)), port.name

    # Heads allocated the output before each low packet, since it reached the front of
    # its input (taken in cycle t: presented from t + 1, on the link from t + 2).
    taken_at = [cycle for cycle, port, _ in state["taken"] if port == MuonPort.LOCAL]
    for item, taken in zip(low, taken_at, strict=True):
        first = taken + MUON_HOP_CYCLES
        overtaking = [f for cycle, f in state["out"] if first <= cycle < item["out"]
                      and FLIT.get(f, "head") and not same(f, item["flit"])]
        assert STARVE <= len(overtaking) <= STARVE + 3 + 1, (
            f"a cache-migrate packet waited for {len(overtaking)} packets")
