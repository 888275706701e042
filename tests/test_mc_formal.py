"""Bounded proofs (yosys-smtbmc + Yices) of the MC's arbiter. (The MC's credit links
are the project's credit protocol, proved in ``tests/test_credit_formal.py``.)

The harness below wires the real component to free inputs; the solver tries every
input sequence up to the depth given and fails the test with a counterexample trace
(``build/formal/<name>/trace.vcd``) if an assertion can be violated.
"""

from amaranth.hdl import Assert, Assume, Signal

from hdl.mc.arbiter import ClassArbiter, grant_bound
from sim.formal import harness_module, prove

ARBITER_STEPS = 18  # > the longest wait (grant_bound(4, 3) = 5 grants) plus the ageing


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
