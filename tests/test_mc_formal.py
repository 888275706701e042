"""Bounded proofs (yosys-smtbmc + Yices) of the MC's credit links and arbiter.

Each harness below wires the real components to free inputs; the solver tries every
input sequence up to the depth given and fails the test with a counterexample trace
(``build/formal/<name>/trace.vcd``) if an assertion can be violated.
"""

import pytest
from amaranth.hdl import Assert, Assume, Signal
from amaranth.lib import wiring

from hdl.mc.arbiter import ClassArbiter, grant_bound
from hdl.mc.channel import CreditReceiver, CreditSender
from sim.formal import harness_module, prove

DEPTH = 3          # credit link depth in the proof: small, so every state is reached
STEPS = 16         # bounded-proof length in cycles (> 2·DEPTH + the pipeline)
ARBITER_STEPS = 18  # > the longest wait (grant_bound(4, 3) = 5 grants) plus the ageing


def credit_harness(depth, max_take, *, spurious_credit=False):
    """A sender and a receiver joined by their credit link; the sender's stream input,
    the reservation (``take``), sends of reserved items and the receiver's output ready
    are free. Items carry a sequence number so order and loss show. With
    ``spurious_credit`` a free input can add a credit pulse on the link (a broken
    receiver)."""
    m = harness_module()
    m.submodules.tx = tx = CreditSender(8, depth, max_take=max_take, checks=True)
    m.submodules.rx = rx = CreditReceiver(8, depth, checks=True)
    glitch = Signal()
    if spurious_credit:
        m.d.comb += [rx.i.payload.eq(tx.o.payload), rx.i.valid.eq(tx.o.valid),
                     tx.o.credit.eq(rx.i.credit | glitch)]
    else:
        wiring.connect(m, tx.o, rx.i)
    want_send, want_take, use_reserved, ready = Signal(), Signal(range(max_take + 1)), Signal(), Signal()
    reserved = Signal(range(depth + 1))
    sent, received = Signal(8), Signal(8)
    take = Signal.like(want_take)
    m.d.comb += [
        tx.i.valid.eq(want_send),
        tx.send_reserved.eq(use_reserved & (reserved != 0)),
        tx.i.payload.eq(sent),
        take.eq(want_take),
        rx.o.ready.eq(ready),
    ]
    # The environment reserves only what the sender holds beyond this cycle's send.
    m.d.comb += Assume(take + (tx.o.valid & ~tx.send_reserved) <= tx.credits)
    m.d.comb += tx.take.eq(take)
    with m.If(tx.o.valid):
        m.d.sync += sent.eq(sent + 1)
    m.d.sync += reserved.eq(reserved + take - (tx.o.valid & tx.send_reserved))
    with m.If(rx.o.valid & rx.o.ready):
        m.d.sync += received.eq(received + 1)
        m.d.comb += Assert(rx.o.payload == received, "items arrive in order, none lost")
    m.d.comb += [
        Assert(tx.credits <= depth, "sender never holds more than the depth"),
        Assert(tx.credits + reserved + rx.level + rx.i.credit == depth, "credits conserved"),
        Assert(rx.level <= depth),
    ]
    return m, [want_send, want_take, use_reserved, ready] + [glitch] * spurious_credit


@pytest.mark.parametrize("depth, max_take", [(1, 0), (2, 0), (DEPTH, 0), (DEPTH, 2)])
def test_credit_link(depth, max_take):
    harness, ports = credit_harness(depth, max_take)
    result = prove(harness, ports=ports, depth=STEPS, name=f"credit-d{depth}-take{max_take}")
    assert result.ok, result.log


def test_credit_link_catches_a_spurious_credit():
    """The properties are not vacuous: a receiver that may return a credit it does not
    owe is caught."""
    harness, ports = credit_harness(DEPTH, 0, spurious_credit=True)
    result = prove(harness, ports=ports, depth=STEPS, name="credit-spurious")
    assert not result.ok
    assert "Assert failed" in result.log or "FAILED" in result.log


def arbiter_harness(channels, age_limit, bound=None):
    """The arbiter with free requests, classes and ``advance``, under its rule 2
    (a request and its class are held until granted). Each channel's wait, counted in
    grants to others, must stay within the bound."""
    m = harness_module()
    m.submodules.arb = arb = ClassArbiter(channels, age_limit, checks=True)
    request, cls, advance = Signal(channels), Signal(3 * channels), Signal()
    m.d.comb += [arb.request.eq(request), arb.cls.eq(cls), arb.advance.eq(advance)]
    bound = grant_bound(channels, age_limit) if bound is None else bound
    taken = advance & (arb.grant != 0)
    prev_request, prev_cls, prev_grant = Signal(channels), Signal(3 * channels), Signal(channels)
    m.d.sync += [prev_request.eq(request), prev_cls.eq(cls),
                 prev_grant.eq(arb.grant & taken.replicate(channels))]
    for i in range(channels):
        held = prev_request[i] & ~prev_grant[i]
        m.d.comb += Assume(~held | request[i])
        m.d.comb += Assume(~held | (cls[3 * i:3 * i + 3] == prev_cls[3 * i:3 * i + 3]))
        wait = Signal(range(bound + 2), name=f"wait{i}")
        with m.If(~request[i] | (taken & arb.grant[i])):
            m.d.sync += wait.eq(0)
        with m.Elif(taken):
            m.d.sync += wait.eq(wait + 1)
        m.d.comb += Assert(wait <= bound, "starvation bound")
    return m, [request, cls, advance]


def test_arbiter_one_grant_and_starvation_bound():
    """Four channels, age limit 3: one-hot grants to requesters only (the arbiter's own
    assertions) and no wait beyond ``grant_bound`` grants, over ARBITER_STEPS cycles."""
    harness, ports = arbiter_harness(4, 3)
    result = prove(harness, ports=ports, depth=ARBITER_STEPS, name="arbiter")
    assert result.ok, result.log


def test_arbiter_bound_is_tight():
    """The bound is not loose: with one less the proof fails (the solver finds a wait of
    exactly ``grant_bound`` grants)."""
    harness, ports = arbiter_harness(4, 3, bound=grant_bound(4, 3) - 1)
    result = prove(harness, ports=ports, depth=ARBITER_STEPS, name="arbiter-tight")
    assert not result.ok
    assert "Assert failed in top:" in result.log  # the harness's bound, not the arbiter's own checks
