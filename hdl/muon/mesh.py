"""The Muon mesh: ``cols`` × ``rows`` routers joined by credit-flow-controlled links,
and the reservation windows that keep best-effort flits off reserved links."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from spec.codes import MUON_HOP_CYCLES, MUON_INJECT_CYCLES, MuonPort

from .layouts import FLIT_DATA_BITS, DropSignature, FlitStreamSignature, check_flit_data_bits
from .rbr import DURATION_BITS, SlotLayout, check_rbr_parameters, router_on_path
from .router import PORTS, Router, at_least, check_router_parameters

__all__ = ["Mesh", "node_index"]

# Window positions are compared on this many bits of (now - start - 1); beyond it every
# window of a slot has ended (hops · 2 + duration < 2^17).
_REL_BITS = DURATION_BITS + 1


def node_index(x, y, cols):
    """Index of router (x, y) in the mesh's port arrays: row-major."""
    return y * cols + x


class Mesh(wiring.Component):
    """A ``cols`` × ``rows`` mesh of :class:`hdl.muon.router.Router`.

    Ports are arrays indexed by :func:`node_index`: ``inject[n]``, ``eject[n]``,
    ``dropped[n]``. ``now`` is the timebase, ``max_age`` the TSP limit (cycles), and
    ``slots`` the reservation table: a router output on a slot's path is blocked for
    best-effort flits in the slot's window there (``hdl.muon.rbr``). ``flit_data_bits``
    is the flits' data width (:func:`hdl.muon.layouts.flit_layout`), 91..1024 bits;
    ``stale_drop=False`` builds routers without TSP's stale drop (the tile's memory
    traffic, which must never be lost).
    """

    def __init__(self, cols, rows, *, slots=8, be_depth=8, rsv_depth=4, starve_limit=4,
                 flit_data_bits=FLIT_DATA_BITS, stale_drop=True):
        check_router_parameters(cols, rows, be_depth, rsv_depth, starve_limit)
        check_rbr_parameters(slots)
        check_flit_data_bits(flit_data_bits)
        self.cols, self.rows, self.n_slots = cols, rows, slots
        self.flit_data_bits = fb = flit_data_bits
        self._depths = dict(be_depth=be_depth, rsv_depth=rsv_depth, starve_limit=starve_limit,
                            flit_data_bits=fb, stale_drop=bool(stale_drop))
        nodes = cols * rows
        # Per router: its outputs inside a reservation window (read by the unit tests).
        self._blocks = {(x, y): Signal(PORTS, name=f"block_{x}_{y}")
                        for y in range(rows) for x in range(cols)}
        super().__init__({
            "inject": In(FlitStreamSignature(fb)).array(nodes),
            "eject": Out(FlitStreamSignature(fb)).array(nodes),
            "dropped": Out(DropSignature()).array(nodes),
            "now": In(64), "max_age": In(32),
            "slots": In(data.ArrayLayout(SlotLayout, slots)),
        })

    def elaborate(self, platform):
        m = Module()
        cols, rows = self.cols, self.rows
        # Per slot, shared by all routers: bit k of `hop_active` is set when this switch
        # cycle is inside the slot's window at hop k, i.e. 2k <= now - start - 1 < 2k +
        # duration; a router on the path then only picks the bit of its hop.
        hops = cols + rows - 1
        windows = []
        for e, slot in enumerate(self.slots):
            rel = Signal(65, name=f"rel{e}")
            live = Signal(name=f"live{e}")
            m.d.comb += [rel.eq(self.now - slot.start - MUON_INJECT_CYCLES),
                         live.eq(slot.valid & (self.now >= slot.start + MUON_INJECT_CYCLES)
                                 & (rel[_REL_BITS:] == 0))]
            near = rel[:_REL_BITS]
            hop_active = Signal(hops, name=f"hop_active{e}")
            for k in range(hops):
                m.d.comb += hop_active[k].eq(live & at_least(near, MUON_HOP_CYCLES * k)
                                             & (near < MUON_HOP_CYCLES * k + slot.duration))
            windows.append((slot, hop_active))
        routers = {}
        for y in range(rows):
            for x in range(cols):
                r = routers[x, y] = Router(x, y, cols, rows, **self._depths)
                m.submodules[f"r{x}_{y}"] = r
                n = node_index(x, y, cols)
                wiring.connect(m, wiring.flipped(self.inject[n]), r.inject)
                wiring.connect(m, r.eject, wiring.flipped(self.eject[n]))
                wiring.connect(m, r.dropped, wiring.flipped(self.dropped[n]))
                m.d.comb += [r.now.eq(self.now), r.max_age.eq(self.max_age),
                             r.block.eq(self._block(m, x, y, windows))]
        for (x, y), r in routers.items():
            if x + 1 < cols:
                wiring.connect(m, r.out_east, routers[x + 1, y].in_west)
                wiring.connect(m, routers[x + 1, y].out_west, r.in_east)
            if y + 1 < rows:
                wiring.connect(m, r.out_south, routers[x, y + 1].in_north)
                wiring.connect(m, routers[x, y + 1].out_north, r.in_south)
        return m

    def _block(self, m, x, y, windows):
        """Bit per output of router (x, y): inside some slot's window this cycle. Switch
        cycle t is in the window of hop k when 2k <= t - start - 1 < 2k + duration."""
        block = self._blocks[x, y]
        for e, (slot, hop_active) in enumerate(windows):
            on, hop, route = router_on_path(m, x, y, slot, f"w{e}_{x}_{y}")
            active = on & hop_active.bit_select(hop, 1)
            for port in MuonPort:
                with m.If(active & (route == port)):
                    m.d.comb += block[port].eq(1)
        return block
