"""The Muon router: five ports (local, north, east, south, west), XY routing, wormhole
switching, two virtual channels with credit-based flow control per link.

A flit that reaches an input buffer in cycle t crosses the switch in cycle t + 1 at the
earliest and is on the next link in cycle t + 2 (``spec.codes.MUON_HOP_CYCLES``).

Arbitration of an output, each cycle:

1. A flit of the reserved VC goes first (reservations never overlap on a link, so at
   most one input has one; round-robin among inputs all the same).
2. Otherwise a best-effort flit, unless the output is inside a granted reservation
   window (``block``): best-effort traffic then waits, whatever its class.
3. Wormhole: once a head flit holds an output on a VC, only that input sends on that
   VC of that output until the tail has passed.
4. Among best-effort head flits: the highest key wins, round-robin among equal keys.
   The key is the class (decode 7 > prefill 5 > cache-migrate 3), except that an input
   whose head has been passed over ``starve_limit`` times at this output is promoted
   above every class. **Starvation bound**: a head flit waiting for an output sees at
   most ``starve_limit + 3`` other packets allocated that output before it (``limit``
   pass-overs to promotion, then at most the other three promoted inputs that can use
   the same output before it in round-robin order, XY routing never turning a flit
   back the way it came). In cycles this is that many packets' transfer times.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hdl.common.credit import CreditReceiver, CreditSender
from spec.codes import MuonPort, MuonVc

from .layouts import (
    CLASS_BITS,
    FLIT_DATA_BITS,
    MAX_MESH_SIDE,
    VC_COUNT,
    DropLayout,
    DropSignature,
    FlitStreamSignature,
    MuonLinkSignature,
    check_flit_data_bits,
    flit_layout,
)

__all__ = ["Router", "InputUnit", "OutputUnit", "xy_port", "check_router_parameters",
           "router_ports", "PORTS", "DIRECTIONS", "FEEDS", "KEY_BITS"]

PORTS = len(MuonPort)
DIRECTIONS = (MuonPort.NORTH, MuonPort.EAST, MuonPort.SOUTH, MuonPort.WEST)
KEY_BITS = CLASS_BITS + 1
_PROMOTED = 1 << CLASS_BITS

# The inputs whose flits can ever want each output, in port order. XY routing never
# sends a flit back the way it came, nor from a column back onto a row: a flit that
# arrived travelling east (input WEST) leaves east, north, south or locally, one that
# arrived travelling south (input NORTH) leaves south or locally. The other pairs of the
# crossbar are left out (a leaner switch, the same behaviour).
FEEDS = {
    MuonPort.LOCAL: tuple(MuonPort),
    MuonPort.NORTH: (MuonPort.LOCAL, MuonPort.EAST, MuonPort.SOUTH, MuonPort.WEST),
    MuonPort.EAST: (MuonPort.LOCAL, MuonPort.WEST),
    MuonPort.SOUTH: (MuonPort.LOCAL, MuonPort.NORTH, MuonPort.EAST, MuonPort.WEST),
    MuonPort.WEST: (MuonPort.LOCAL, MuonPort.EAST),
}


def router_ports(x, y, cols, rows):
    """The ports of router (x, y) that lead somewhere: the local port and the links to
    its neighbours (a router on the mesh's edge has no link off the edge)."""
    beyond = {MuonPort.NORTH: y == 0, MuonPort.SOUTH: y == rows - 1,
              MuonPort.WEST: x == 0, MuonPort.EAST: x == cols - 1}
    return tuple(port for port in MuonPort if not beyond.get(port, False))


def check_router_parameters(cols, rows, be_depth, rsv_depth, starve_limit):
    for name, value, low, high in (("cols", cols, 1, MAX_MESH_SIDE),
                                   ("rows", rows, 1, MAX_MESH_SIDE),
                                   ("be_depth", be_depth, 2, 64), ("rsv_depth", rsv_depth, 4, 64),
                                   ("starve_limit", starve_limit, 1, 255)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an integer, not {value!r}")
        if not low <= value <= high:
            raise ValueError(f"{name} must be in {low}..{high}, not {value}")


def _is_zero(value):
    return isinstance(value, int) and value == 0


def less(a, b):
    """``a < b`` on unsigned values, folded where one side is the constant 0 (Verilator
    rejects a comparison that is constant through unsigned arithmetic)."""
    if _is_zero(b):
        return Const(0)
    if _is_zero(a):
        return b != 0
    return a < b


def at_least(a, b):
    """``a >= b`` on unsigned values, folded like :func:`less`."""
    return ~less(a, b)


def xy_port(m, x, y, dst_x, dst_y, name):
    """Output port (a ``MuonPort`` value) of router (x, y) for a packet to (dst_x, dst_y):
    first along the row, then along the column."""
    port = Signal(3, name=name)
    choices = [(less(x, dst_x), MuonPort.EAST), (less(dst_x, x), MuonPort.WEST),
               (less(y, dst_y), MuonPort.SOUTH), (less(dst_y, y), MuonPort.NORTH)]
    # Branches that can never be taken (an edge router) are left out altogether.
    choices = [(cond, value) for cond, value in choices
               if not (isinstance(cond, Const) and cond.value == 0)]
    m.d.comb += port.eq(MuonPort.LOCAL)
    for i, (cond, value) in enumerate(choices):
        with (m.If if i == 0 else m.Elif)(cond):
            m.d.comb += port.eq(value)
    return port


def outside(header, cols, rows):
    """The header's destination is not a router of a ``cols`` × ``rows`` mesh."""
    terms = [coord >= size for coord, size in ((header.dst_x, cols), (header.dst_y, rows))
             if size < MAX_MESH_SIDE]
    return Cat(*terms).any() if terms else Const(0)


def rr_pick(m, candidates, pointer, name):
    """One-hot: the first set bit of ``candidates`` after index ``pointer``, wrapping."""
    n = len(candidates)
    pick = Signal(n, name=name)
    with m.Switch(pointer):
        for p in range(n):
            with m.Case(p):
                for j in range(n):
                    i = (p + 1 + j) % n
                    with (m.If if j == 0 else m.Elif)(candidates[i]):
                        m.d.comb += pick.eq(1 << i)
    return pick


def onehot_index(m, onehot, name):
    index = Signal(range(max(len(onehot), 2)), name=name)
    for i in range(len(onehot)):
        with m.If(onehot[i]):
            m.d.comb += index.eq(i)
    return index


class InputUnit(wiring.Component):
    """One router input: a FIFO per VC, the route of the front flit, TSP and
    bad-destination drops, the best-effort head's arbitration key.

    Each cycle it presents at most one flit (``valid``, ``flit``, ``port``, ``key``):
    the reserved VC's front flit if any, else the best-effort one. ``pop`` takes it.
    A front head flit is discarded instead of presented when its destination is outside
    the mesh (any input), or, on the best-effort VC, when this router is its
    destination and ``now - ts > max_age`` (TSP; not with ``stale_drop=False``). A
    discard asks ``drop_req`` and starts when ``drop_ack`` answers; the packet's body
    flits are then discarded one a cycle. The buffers are a
    :class:`hdl.common.credit.CreditReceiver`: ``credit`` pulses one cycle after each
    freed slot, per VC; ``w_rdy`` (the injection port's ready) says a VC's buffer has
    room.
    """

    def __init__(self, x, y, cols, rows, be_depth, rsv_depth, starve_limit, *, local,
                 flit_data_bits=FLIT_DATA_BITS, stale_drop=True):
        self._stale_drop = stale_drop
        self._pos, self._size = (x, y), (cols, rows)
        self._depths = (be_depth, rsv_depth)
        self._limit, self._local = starve_limit, local
        self._flit = flit = flit_layout(flit_data_bits)
        # The buffers, one per VC (their levels are read by the formal proofs).
        self._receiver = CreditReceiver(flit, self._depths, vcs=VC_COUNT)
        super().__init__({
            "w_valid": In(1), "w_flit": In(flit), "w_rdy": Out(VC_COUNT),
            "credit": Out(VC_COUNT),
            "now": In(64), "max_age": In(32),
            "valid": Out(1), "flit": Out(flit), "port": Out(3), "key": Out(KEY_BITS),
            "pop": In(1), "passed": In(1),
            "drop_req": Out(1), "drop": Out(DropLayout), "drop_ack": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        (x, y), (cols, rows) = self._pos, self._size
        m.submodules.rx = rx = self._receiver
        flit = self._flit
        incoming = flit(Signal(data.Layout.cast(flit).size, name="incoming"))
        m.d.comb += incoming.eq(self.w_flit)
        if self._local:  # TSP: the injection port writes the injection time
            with m.If(self.w_flit.head):
                m.d.comb += incoming.data.header.ts.eq(self.now)
        m.d.comb += [rx.i.valid.eq(self.w_valid), rx.i.payload.eq(incoming),
                     self.credit.eq(rx.i.credit)]

        pops, drop_cands, fronts, ports = [], [], [], []
        for vc, depth in enumerate(self._depths):
            buffer = rx.o[vc]
            front = buffer.payload
            header = front.data.header
            m.d.comb += self.w_rdy[vc].eq(rx.occupancy(vc) != depth)
            route = Signal(3, name=f"route{vc}")       # port of the packet being sent
            dropping = Signal(name=f"dropping{vc}")    # discarding the body of a packet
            head_port = xy_port(m, x, y, header.dst_x, header.dst_y, f"head_port{vc}")
            port = Signal(3, name=f"port{vc}")
            m.d.comb += port.eq(Mux(front.head, head_port, route))
            bad = outside(header, cols, rows)
            if vc == MuonVc.BEST_EFFORT and self._stale_drop:
                age = Signal(64, name="age")
                m.d.comb += age.eq(self.now - header.ts)
                bad = bad | ((head_port == MuonPort.LOCAL) & (age > self.max_age))
            cand = Signal(name=f"drop_cand{vc}")
            m.d.comb += cand.eq(buffer.valid & front.head & ~dropping & bad)
            pop = Signal(name=f"pop{vc}")
            m.d.comb += buffer.ready.eq(pop)
            with m.If(pop & front.head):
                m.d.sync += route.eq(head_port)
            with m.If(dropping & buffer.valid):
                m.d.comb += pop.eq(1)
                with m.If(front.tail):
                    m.d.sync += dropping.eq(0)
            pops.append((pop, dropping, cand))
            drop_cands.append((cand, front, outside(header, cols, rows)))
            fronts.append(front)
            ports.append(port)

        # One discard per input per cycle; the reserved VC's first.
        for vc in reversed(range(VC_COUNT)):
            cand, front, bad_dst = drop_cands[vc]
            with (m.If if vc == VC_COUNT - 1 else m.Elif)(cand):
                m.d.comb += [self.drop_req.eq(1), self.drop.header.eq(front.data.header),
                             self.drop.bad_dst.eq(bad_dst)]
                with m.If(self.drop_ack):
                    m.d.comb += pops[vc][0].eq(1)
                    m.d.sync += pops[vc][1].eq(~front.tail)

        # Present one flit: the reserved VC first.
        presentable = [rx.o[vc].valid & ~pops[vc][1] & ~pops[vc][2] for vc in range(VC_COUNT)]
        passed = Signal(range(self._limit + 1))
        sel = Signal(name="sel_rsv")
        m.d.comb += [sel.eq(presentable[MuonVc.RESERVED]),
                     self.valid.eq(presentable[0] | presentable[1])]
        with m.If(sel):
            m.d.comb += [self.flit.eq(fronts[1]), self.port.eq(ports[1])]
            with m.If(self.pop):
                m.d.comb += pops[1][0].eq(1)
        with m.Else():
            m.d.comb += [self.flit.eq(fronts[0]), self.port.eq(ports[0]),
                         self.key.eq(Mux(passed >= self._limit, _PROMOTED,
                                         fronts[0].data.header.cls))]
            with m.If(self.pop):
                m.d.comb += pops[0][0].eq(1)
        with m.If(pops[0][0] & fronts[0].head):
            m.d.sync += passed.eq(0)
        with m.Elif(self.passed & (passed < self._limit)):
            m.d.sync += passed.eq(passed + 1)
        return m


class OutputUnit(wiring.Component):
    """One router output: per-VC wormhole locks and arbitration, and the link's
    :class:`hdl.common.credit.CreditSender` (its credits, its output register) or the
    ejection stream (``local``).

    Inputs, one bit (or key) per router input that can feed this output (``inputs`` of
    them, in port order): ``valid`` (a flit wants this output), ``vc``, ``head``,
    ``tail``, ``key``. ``grant`` (one-hot) says whose flit crosses this cycle, and
    ``flit`` is that flit (the router's crossbar selects it by ``grant``); ``passed``
    which best-effort heads lost an allocation. ``block``: inside a granted reservation
    window, no best-effort flit is sent.
    """

    def __init__(self, be_depth, rsv_depth, *, local, inputs=PORTS,
                 flit_data_bits=FLIT_DATA_BITS):
        if not isinstance(inputs, int) or not 1 <= inputs <= PORTS:
            raise ValueError(f"an output has 1..{PORTS} inputs, not {inputs!r}")
        self._depths, self._local, self._n = (be_depth, rsv_depth), local, inputs
        # The link's credit counters and output register (a link output only; the
        # formal proofs read its counters).
        self._sender = None if local else CreditSender(
            flit_layout(flit_data_bits), self._depths, vcs=VC_COUNT, registered=True)
        n = inputs
        members = {
            "valid": In(n), "vc": In(n), "head": In(n), "tail": In(n),
            "key": In(data.ArrayLayout(KEY_BITS, n)),
            "flit": In(flit_layout(flit_data_bits)),
            "block": In(1), "grant": Out(n), "passed": Out(n),
        }
        if local:
            members["eject"] = Out(FlitStreamSignature(flit_data_bits))
        else:
            members["link"] = Out(MuonLinkSignature(flit_data_bits, be_depth, rsv_depth))
        super().__init__(members)

    def _lane(self, m, vc, requests, can_send, arbitrate):
        """Lock state and grant of one VC; returns its grant (one-hot)."""
        n = self._n
        locked, owner = Signal(name=f"locked{vc}"), Signal(n, name=f"owner{vc}")
        pointer = Signal(range(max(n, 2)), name=f"rr{vc}")
        heads = Signal(n, name=f"heads{vc}")
        m.d.comb += heads.eq(requests & self.head)
        cands = Signal(n, name=f"cands{vc}")
        m.d.comb += cands.eq(Mux(locked, requests & owner, arbitrate(heads)))
        pick = rr_pick(m, cands, pointer, f"pick{vc}")
        grant = Signal(n, name=f"grant{vc}")
        m.d.comb += grant.eq(Mux(can_send, pick, 0))
        with m.If(grant.any()):
            with m.If(~locked):
                m.d.sync += pointer.eq(onehot_index(m, grant, f"winner{vc}"))
            with m.If((grant & self.tail).any()):
                m.d.sync += locked.eq(0)
            with m.Else():
                m.d.sync += [locked.eq(1), owner.eq(grant)]
        return grant, heads, locked

    def _best_key(self, m, heads):
        best = 0
        for i in range(self._n):
            key = self.key[i]
            better = Signal(KEY_BITS, name=f"best_key{i}")
            m.d.comb += better.eq(Mux(heads[i] & (key > best), key, best))
            best = better
        best_key = best
        return Cat(heads[i] & (self.key[i] == best_key) for i in range(self._n))

    def elaborate(self, platform):
        m = Module()
        if self._local:
            free = ~self.eject.valid | self.eject.ready
            can = (free, free)
        else:
            m.submodules.tx = tx = self._sender
            can = tuple(tx.count(vc) != 0 for vc in range(VC_COUNT))
        grant1, _, _ = self._lane(m, 1, self.valid & self.vc, can[1], lambda heads: heads)
        send1 = grant1.any()
        grant0, heads0, locked0 = self._lane(m, 0, self.valid & ~self.vc,
                                             can[0] & ~send1 & ~self.block,
                                             lambda heads: self._best_key(m, heads))
        m.d.comb += [self.grant.eq(grant1 | grant0),
                     self.passed.eq(Mux(grant0.any() & ~locked0, heads0 & ~grant0, 0))]

        flit = self.flit
        sent = self.grant.any()
        if self._local:
            with m.If(sent):
                m.d.sync += [self.eject.valid.eq(1), self.eject.payload.eq(flit)]
            with m.Elif(self.eject.ready):
                m.d.sync += self.eject.valid.eq(0)
        else:
            # A grant only goes to a VC with a credit, so the sender takes every flit.
            m.d.comb += [tx.i.valid.eq(sent), tx.i.payload.eq(flit)]
            wiring.connect(m, tx.o, wiring.flipped(self.link))
        return m


class Router(wiring.Component):
    """A five-port Muon router at column ``x``, row ``y`` of a ``cols`` × ``rows`` mesh.

    Ports: ``inject`` / ``eject`` (the local node's flit streams), ``out_<dir>`` and
    ``in_<dir>`` for north, east, south, west (:class:`MuonLinkSignature`),
    ``dropped`` (discarded packets), ``now`` (timebase), ``max_age`` (TSP limit, cycles),
    ``block`` (bit per ``MuonPort``: that output is inside a reservation window).

    A router on the mesh's edge builds no input or output unit for a link off the edge
    (those ports stay idle), and each output's switch only takes the inputs of
    :data:`FEEDS`.

    ``be_depth`` / ``rsv_depth``: input buffer depth of the best-effort / reserved VC, in
    flits (the credit loop is 4 cycles, so 4 sustain one flit a cycle). ``starve_limit``:
    pass-overs before a best-effort head is promoted above every class.
    ``flit_data_bits``: the flits' data width (:func:`hdl.muon.layouts.flit_layout`),
    91..1024 bits. ``stale_drop``: TSP drops stale best-effort packets (the tile turns it
    off: its memory traffic must never be lost, and it never ages out of use).
    """

    def __init__(self, x, y, cols, rows, *, be_depth=8, rsv_depth=4, starve_limit=4,
                 flit_data_bits=FLIT_DATA_BITS, stale_drop=True):
        check_router_parameters(cols, rows, be_depth, rsv_depth, starve_limit)
        check_flit_data_bits(flit_data_bits)
        if not (0 <= x < cols and 0 <= y < rows):
            raise ValueError(f"router ({x}, {y}) is outside a {cols}×{rows} mesh")
        self.x, self.y = x, y
        self.flit_data_bits = fb = flit_data_bits
        self.stale_drop = bool(stale_drop)
        self._args = (cols, rows, be_depth, rsv_depth, starve_limit)
        members = {"inject": In(FlitStreamSignature(fb)), "eject": Out(FlitStreamSignature(fb))}
        for port in DIRECTIONS:
            members[f"out_{port.name.lower()}"] = Out(MuonLinkSignature(fb, be_depth, rsv_depth))
            members[f"in_{port.name.lower()}"] = In(MuonLinkSignature(fb, be_depth, rsv_depth))
        members.update({"dropped": Out(DropSignature()), "now": In(64), "max_age": In(32),
                        "block": In(PORTS)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cols, rows, be_depth, rsv_depth, starve_limit = self._args
        present = router_ports(self.x, self.y, cols, rows)
        # Off-edge links get no units: their outputs stay idle, their credits 0.
        ins, outs = {}, {}
        for port in present:
            local = port == MuonPort.LOCAL
            unit = InputUnit(self.x, self.y, cols, rows, be_depth, rsv_depth, starve_limit,
                             local=local, flit_data_bits=self.flit_data_bits,
                             stale_drop=self.stale_drop)
            m.submodules[f"in_{port.name.lower()}"] = unit
            m.d.comb += [unit.now.eq(self.now), unit.max_age.eq(self.max_age)]
            if local:
                m.d.comb += [unit.w_valid.eq(self.inject.valid),
                             unit.w_flit.eq(self.inject.payload),
                             self.inject.ready.eq(unit.w_rdy.bit_select(self.inject.payload.vc, 1))]
            else:
                link = getattr(self, f"in_{port.name.lower()}")
                m.d.comb += [unit.w_valid.eq(link.valid), unit.w_flit.eq(link.payload),
                             link.credit.eq(unit.credit)]
            ins[port] = unit
        feeds = {o: [i for i in FEEDS[o] if i in ins] for o in present}
        for port in present:
            local = port == MuonPort.LOCAL
            out = OutputUnit(be_depth, rsv_depth, local=local, inputs=len(feeds[port]),
                             flit_data_bits=self.flit_data_bits)
            m.submodules[f"out_{port.name.lower()}"] = out
            if local:
                wiring.connect(m, wiring.flipped(self.eject), out.eject)
            else:
                wiring.connect(m, wiring.flipped(getattr(self, f"out_{port.name.lower()}")),
                               out.link)
            outs[port] = out

        for o, out in outs.items():
            m.d.comb += out.block.eq(self.block[o])
            crossbar = 0
            for j, i in enumerate(feeds[o]):
                unit = ins[i]
                m.d.comb += [out.valid[j].eq(unit.valid & (unit.port == o)),
                             out.vc[j].eq(unit.flit.vc), out.head[j].eq(unit.flit.head),
                             out.tail[j].eq(unit.flit.tail), out.key[j].eq(unit.key)]
                crossbar = crossbar | Mux(out.grant[j], unit.flit.as_value(), 0)
            m.d.comb += out.flit.eq(crossbar)
        for i, unit in ins.items():
            users = [(out, feeds[o].index(i)) for o, out in outs.items() if i in feeds[o]]
            m.d.comb += [unit.pop.eq(Cat(out.grant[j] for out, j in users).any()),
                         unit.passed.eq(Cat(out.passed[j] for out, j in users).any())]

        # At most one discard per router per cycle: the lowest input asking.
        for n, unit in enumerate(ins.values()):
            with (m.If if n == 0 else m.Elif)(unit.drop_req):
                m.d.comb += [unit.drop_ack.eq(1), self.dropped.valid.eq(1),
                             self.dropped.payload.eq(unit.drop)]
        return m
