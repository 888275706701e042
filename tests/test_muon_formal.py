"""Bounded proofs (yosys-smtbmc + Yices) of a Muon link: a router output joined to the
next router's input by its credit link, every other input free.

Properties, in every cycle up to ``STEPS``:

* link credits are conserved per VC (credits held + flit on the link + flits buffered
  + credit pulse on its way back = buffer depth) and never exceed the depth, and a flit
  on the link always finds room in its buffer;
* one grant per output per cycle (the grant is one-hot or zero);
* no best-effort flit is granted an output inside a reservation window (``block``).
"""

import pytest
from amaranth.hdl import Assert, Assume, Mux, Signal

from hdl.muon.layouts import FlitLayout
from hdl.muon.router import PORTS, InputUnit, OutputUnit
from sim.formal import harness_module, prove
from spec.codes import MuonVc

BE_DEPTH, RSV_DEPTH = 2, 4
STEPS = 14     # > the 4-cycle credit loop times the larger depth


def link_harness(*, spurious_credit=False):
    m = harness_module()
    m.submodules.out = out = OutputUnit(BE_DEPTH, RSV_DEPTH, local=False)
    m.submodules.inp = inp = InputUnit(0, 0, 2, 2, BE_DEPTH, RSV_DEPTH, 2, local=False)
    valid, vc, head, tail, block, pop = (Signal(PORTS), Signal(PORTS), Signal(PORTS),
                                         Signal(PORTS), Signal(), Signal())
    keys = [Signal(4, name=f"key{i}") for i in range(PORTS)]
    flits = [Signal(out.flit.as_value().shape(), name=f"flit{i}") for i in range(PORTS)]
    glitch = Signal()
    m.d.comb += [out.valid.eq(valid), out.vc.eq(vc), out.head.eq(head), out.tail.eq(tail),
                 out.block.eq(block), inp.pop.eq(pop & inp.valid),
                 inp.w_valid.eq(out.link.valid), inp.w_flit.eq(out.link.payload),
                 out.link.credit.eq(inp.credit | (glitch if spurious_credit else 0))]
    crossbar = 0     # the router's crossbar: the granted input's flit
    for i in range(PORTS):
        m.d.comb += [out.key[i].eq(keys[i]), Assume(FlitLayout(flits[i]).vc == vc[i])]
        crossbar = crossbar | Mux(out.grant[i], flits[i], 0)
    m.d.comb += out.flit.eq(crossbar)
    for v, depth in enumerate((BE_DEPTH, RSV_DEPTH)):
        on_link = out.link.valid & (out.link.payload.vc == v)
        held, buffered = out._sender.count(v), inp._receiver.occupancy(v)
        m.d.comb += [
            Assert(held <= depth, "a sender never holds more credits than the depth"),
            Assert(held + on_link + buffered + inp.credit[v] == depth,
                   "credits conserved"),
            Assert(~on_link | (buffered != depth), "a flit on the link finds room"),
        ]
    grant = out.grant
    m.d.comb += Assert((grant & (grant - 1)) == 0, "one grant per output per cycle")
    for i in range(PORTS):
        m.d.comb += Assert(~(grant[i] & (vc[i] == MuonVc.BEST_EFFORT) & block),
                           "no best-effort flit inside a reservation window")
    return m, [valid, vc, head, tail, block, pop, glitch, *keys, *flits]


def test_link_credits_grants_and_windows():
    harness, ports = link_harness()
    result = prove(harness, ports=ports, depth=STEPS, name="muon-link")
    assert result.ok, result.log


@pytest.mark.parametrize("broken", ["spurious_credit"])
def test_the_proof_catches_a_broken_receiver(broken):
    """Not vacuous: a receiver that may return a credit it does not owe is caught."""
    harness, ports = link_harness(spurious_credit=True)
    result = prove(harness, ports=ports, depth=STEPS, name="muon-link-spurious")
    assert not result.ok
