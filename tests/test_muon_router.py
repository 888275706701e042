"""One Muon router (``hdl.muon.router.Router``) in the Amaranth simulator.

Router (1, 1) of a 3×3 mesh, its neighbours played by the test: the west and east
neighbours send on their links within the credits the router returns, the local node
injects, and the north neighbour takes every flit of ``out_north`` and returns a credit
for each. All traffic goes to router (1, 0), so three inputs compete for one network
output. Checked:

* a lone flit crosses in ``MUON_HOP_CYCLES`` (2): injected in cycle t, on the link in t + 2;
* every flit leaves on ``out_north``, each input's packets whole and in order, and the
  credits the router holds for its west/east inputs never go negative (the buffers never
  overflow);
* class priority and the starvation bound at a network output: a cache-migrate packet
  from the local input waits while decode packets from west and east keep the output
  busy, for at least ``starve_limit`` allocations of other packets and at most
  ``starve_limit + 3`` plus the packet holding the output.
"""

from amaranth.sim import Simulator

from hdl.muon.router import Router
from sim.muon_driver import FLIT
from sim.seed import test_seed
from spec.codes import MUON_HOP_CYCLES, MuonPort, TrafficClass

BE_DEPTH, STARVE = 8, 4
TARGET = (1, 0)


def flits_of(src, serial, length, cls):
    """The flits of a best-effort packet to TARGET (body flits carry serial and index)."""
    out = []
    for i in range(length):
        common = {"vc": 0, "head": int(i == 0), "tail": int(i == length - 1)}
        if i == 0:
            out.append(FLIT.pack(**common, **{
                "data.header.src_x": src[0], "data.header.src_y": src[1],
                "data.header.dst_x": TARGET[0], "data.header.dst_y": TARGET[1],
                "data.header.cls": cls}))
        else:
            out.append(FLIT.pack(**common, **{"data.payload": serial << 8 | i}))
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
    dut = Router(1, 1, 3, 3, be_depth=BE_DEPTH, starve_limit=STARVE)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    state = {"queues": {MuonPort.LOCAL: [], MuonPort.WEST: [], MuonPort.EAST: []},
             "out": [], "taken": [], "errors": []}
    links = {MuonPort.WEST: dut.in_west, MuonPort.EAST: dut.in_east}

    async def bench(ctx):
        ctx.set(dut.max_age, (1 << 32) - 1)
        credits = {port: BE_DEPTH for port in links}
        current = {port: [] for port in state["queues"]}     # flits of the packet being sent
        credit_back = 0
        for cycle in range(cycles):
            ctx.set(dut.now, cycle)
            schedule(cycle, state)
            offers = {}
            for port, queue in state["queues"].items():
                if not current[port] and queue:
                    current[port] = list(queue.pop(0))
                offers[port] = current[port][0] if current[port] else None
            for port, link in links.items():
                send = offers[port] is not None and credits[port] > 0
                ctx.set(link.valid, send)
                if send:
                    ctx.set(link.flit.as_value(), offers[port])
            ctx.set(dut.inject.valid, offers[MuonPort.LOCAL] is not None)
            if offers[MuonPort.LOCAL] is not None:
                ctx.set(dut.inject.payload.as_value(), offers[MuonPort.LOCAL])
            ctx.set(dut.out_north.credit, credit_back)
            # What happens at this cycle's edge.
            for port, link in links.items():
                credits[port] += ctx.get(link.credit) & 1
                if ctx.get(link.valid):
                    credits[port] -= 1
                    state["taken"].append((cycle, port, current[port].pop(0)))
                if not 0 <= credits[port] <= BE_DEPTH:
                    state["errors"].append(f"cycle {cycle}: {port.name} credits {credits[port]}")
            if offers[MuonPort.LOCAL] is not None and ctx.get(dut.inject.ready):
                state["taken"].append((cycle, MuonPort.LOCAL, current[MuonPort.LOCAL].pop(0)))
            credit_back = 0
            if ctx.get(dut.out_north.valid):
                state["out"].append((cycle, ctx.get(dut.out_north.flit.as_value())))
                credit_back = 1
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
