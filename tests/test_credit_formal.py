"""Bounded proof (yosys-smtbmc + Yices) of the project's credit protocol,
``hdl.common.credit``: a :class:`CreditSender` and a :class:`CreditReceiver` joined by
their link, every input of the pair free, in the shapes the project uses (the MC's
single-VC client channels with reservations, the Muon links' two VCs behind an output
register). The solver tries every input sequence up to ``STEPS`` cycles and fails the
test with a counterexample trace (``build/formal/<name>/trace.vcd``).

Properties, per VC, in every cycle:

* credits are conserved: the sender's credits + the credits reserved (``take``) + the
  item in the sender's output register + the receiver's occupancy + the credit pulse on
  its way back = the depth;
* the sender never holds more than the depth, the receiver never more than the depth,
  and an arriving item always finds room (no overflow; the pair's own ``checks``);
* items arrive in the order sent, none lost or repeated.
"""

import pytest
from amaranth.hdl import Assert, Assume, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.utils import ceil_log2

from hdl.common.credit import CreditReceiver, CreditSender
from sim.formal import harness_module, prove

SEQ_BITS = 8       # items carry a sequence number of their VC, so order and loss show
STEPS = 16         # bounded-proof length in cycles (> 2 · the largest depth + the pipeline)


def credit_harness(depth, vcs, max_take, *, registered=False, spurious_credit=False):
    """The pair with free inputs: the sender's stream (``valid`` and the VC), the
    reservations (``take``), sends of reserved items and each output's ready. With
    ``spurious_credit`` a free input can add a credit pulse on the link (a broken
    receiver)."""
    depths = (depth,) * vcs if isinstance(depth, int) else depth
    layout = SEQ_BITS if vcs == 1 else data.StructLayout({"vc": ceil_log2(vcs),
                                                         "seq": SEQ_BITS})
    m = harness_module()
    m.submodules.tx = tx = CreditSender(layout, depth, vcs=vcs, max_take=max_take,
                                        registered=registered, checks=True)
    m.submodules.rx = rx = CreditReceiver(layout, depth, vcs=vcs, checks=True)
    glitch = Signal(vcs)
    if spurious_credit:
        m.d.comb += [rx.i.payload.eq(tx.o.payload), rx.i.valid.eq(tx.o.valid),
                     tx.o.credit.eq(rx.i.credit | glitch)]
    else:
        wiring.connect(m, tx.o, rx.i)

    def field(value, name):
        return value if vcs == 1 else getattr(value, name)

    want_send, want_vc, use_reserved = Signal(), Signal(range(vcs)), Signal()
    wants_take = [Signal(range(max_take + 1), name=f"want_take{v}") for v in range(vcs)]
    readies = [Signal(name=f"ready{v}") for v in range(vcs)]
    reserved = [Signal(range(d + 1), name=f"reserved{v}") for v, d in enumerate(depths)]
    sent = [Signal(SEQ_BITS, name=f"sent{v}") for v in range(vcs)]
    received = [Signal(SEQ_BITS, name=f"received{v}") for v in range(vcs)]
    vc = Signal(range(vcs))
    m.d.comb += vc.eq(want_vc)
    seq = sent[0]
    for v in range(1, vcs):
        seq = Mux(vc == v, sent[v], seq)
    m.d.comb += [tx.i.valid.eq(want_send), field(tx.i.payload, "seq").eq(seq)]
    if vcs > 1:
        m.d.comb += [tx.i.payload.vc.eq(vc), Assume(want_vc < vcs)]
    held = reserved[0]
    for v in range(1, vcs):
        held = Mux(vc == v, reserved[v], held)
    m.d.comb += tx.send_reserved.eq(use_reserved & (held != 0))
    transfer = tx.i.valid & tx.i.ready

    for v, d in enumerate(depths):
        mine = transfer & (vc == v)
        out = rx.o if vcs == 1 else rx.o[v]
        m.d.comb += [out.ready.eq(readies[v]),
                     (tx.take if vcs == 1 else tx.take[v]).eq(wants_take[v]),
                     # The environment reserves only what the sender holds beyond this
                     # cycle's send.
                     Assume(wants_take[v] + (mine & ~tx.send_reserved) <= tx.count(v))]
        with m.If(mine):
            m.d.sync += sent[v].eq(sent[v] + 1)
        m.d.sync += reserved[v].eq(reserved[v] + wants_take[v] - (mine & tx.send_reserved))
        with m.If(out.valid & out.ready):
            m.d.sync += received[v].eq(received[v] + 1)
            m.d.comb += Assert(field(out.payload, "seq") == received[v],
                               "items arrive in order, none lost")
        on_link = tx.o.valid & (vcs == 1 or field(tx.o.payload, "vc") == v)
        in_flight = on_link if registered else 0
        level = rx.occupancy(v)
        m.d.comb += [
            Assert(tx.count(v) <= d, "sender never holds more than the depth"),
            Assert(tx.count(v) + reserved[v] + in_flight + level + rx.i.credit[v] == d,
                   "credits conserved"),
            Assert(level <= d, "receiver never holds more than the depth"),
            Assert(~on_link | (level != d), "an arriving item finds room"),
        ]
    ports = [want_send, use_reserved, *wants_take, *readies]
    if vcs > 1:
        ports.append(want_vc)
    if spurious_credit:
        ports.append(glitch)
    # A 0-bit input (no reservations) is no port: yosys' SMT back end refuses it.
    return m, [port for port in ports if len(port)]


# The MC's client channels (one VC, reservations of up to 2 credits a cycle), and the
# Muon links' shape (two VCs of different depths behind an output register), and both
# features together.
SHAPES = [
    pytest.param(1, 1, 0, False, id="d1"),
    pytest.param(2, 1, 0, False, id="d2"),
    pytest.param(3, 1, 0, False, id="d3"),
    pytest.param(3, 1, 2, False, id="d3-take2"),
    pytest.param(2, 1, 0, True, id="d2-registered"),
    pytest.param((2, 3), 2, 0, True, id="vc2-d2-3-registered"),
    pytest.param((2, 3), 2, 1, False, id="vc2-d2-3-take1"),
]


@pytest.mark.parametrize("depth, vcs, max_take, registered", SHAPES)
def test_credit_protocol(depth, vcs, max_take, registered):
    harness, ports = credit_harness(depth, vcs, max_take, registered=registered)
    name = f"credit-{'-'.join(map(str, (depth,) if isinstance(depth, int) else depth))}" \
           f"-vc{vcs}-take{max_take}{'-reg' if registered else ''}"
    result = prove(harness, ports=ports, depth=STEPS, name=name)
    assert result.ok, result.log


@pytest.mark.parametrize("depth, vcs, registered", [(3, 1, False), ((2, 3), 2, True)])
def test_the_proof_catches_a_spurious_credit(depth, vcs, registered):
    """The properties are not vacuous: a receiver that may return a credit it does not
    owe is caught."""
    harness, ports = credit_harness(depth, vcs, 0, registered=registered,
                                    spurious_credit=True)
    result = prove(harness, ports=ports, depth=STEPS, name=f"credit-spurious-vc{vcs}")
    assert not result.ok
    assert "Assert failed" in result.log or "FAILED" in result.log
