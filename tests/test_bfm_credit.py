"""The credit-link BFMs and their packing (``sim.bfm.credit``), without a simulator.

Packing must give exactly the bits of the layout's own ``const(...).as_bits()`` for the
MC's and the Muon's payloads, and refuse what ``const`` would truncate; unpacking must
give back every field. The source and the sink, joined by a model link whose credit
pulses take a cycle, keep the link's rules; a sink that returns a credit it never freed,
a source that sends without a credit, a lost credit and an item out of order are caught.
"""

import random
from collections import deque

import pytest
from amaranth.lib import data

from hdl.mc.channel import RequestLayout, ResponseLayout, WriteWordLayout
from hdl.muon.layouts import DropLayout, FlitLayout
from sim.bfm.credit import CreditError, CreditSink, CreditSource, codec, pack, unpack


def random_fields(rng, layout):
    """Random values for every field of ``layout`` (one member of each union)."""
    fields = {}
    members = list(layout)
    if isinstance(layout, data.UnionLayout):
        members = [rng.choice(members)]
    for name, field in members:
        try:
            inner = data.Layout.cast(field.shape)
        except TypeError:
            inner = None
        fields[name] = (random_fields(rng, inner) if inner is not None
                        else rng.getrandbits(field.width))
    return fields


def leaves(fields, prefix=""):
    for name, value in fields.items():
        if isinstance(value, dict):
            yield from leaves(value, f"{prefix}{name}.")
        else:
            yield prefix + name, value


LAYOUTS = [RequestLayout(), ResponseLayout(128), ResponseLayout(512), WriteWordLayout(64),
           FlitLayout, DropLayout]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: getattr(layout, "__name__",
                                                                         type(layout).__name__))
def test_pack_is_the_layouts_const_and_unpack_its_inverse(layout):
    rng = random.Random(5)
    cast = data.Layout.cast(layout)
    for _ in range(200):
        fields = random_fields(rng, cast)
        bits = pack(layout, fields)
        assert bits == cast.const(fields).as_bits(), fields
        item = unpack(layout, bits)
        for path, value in leaves(fields):
            node = item
            for step in path.split("."):
                node = getattr(node, step)
            assert node == value == codec(layout).get(bits, path), path


def test_pack_refuses_what_const_would_truncate():
    flit = codec(FlitLayout)
    assert flit is codec(FlitLayout)
    with pytest.raises(ValueError, match="vc = 2 does not fit in 1 bits"):
        flit.pack({"vc": 2})
    with pytest.raises(ValueError, match="data.payload = -1 does not fit in 96 bits"):
        flit.pack({"data": {"payload": -1}})
    with pytest.raises(ValueError, match="one member of a union"):
        flit.pack({"data": {"payload": 1, "header": {"ts": 1}}})
    with pytest.raises(ValueError, match="no such field"):
        pack(RequestLayout(), {"address": 1})
    with pytest.raises(ValueError, match="id = 256 does not fit in 8 bits"):
        pack(RequestLayout(), {"id": 256})


class Link:
    """A model credit link: an item sent in a cycle reaches the sink's buffer at its
    end; a credit pulse driven in a cycle is seen by the source in that cycle (after its
    choice), as on the RTL's links."""

    def __init__(self, source, sink):
        self.source, self.sink = source, sink
        self.pulses = 0
        self.delivered = []

    def cycle(self):
        item = self.source.choose()
        taken, pulses = self.sink.take()
        if taken is not None:
            self.delivered.append(taken)
        if item is not None:
            self.sink.receive(item)
        self.source.returned(pulses)


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_source_and_sink_keep_the_rules_under_random_pauses(depth):
    rng = random.Random(depth)
    source = CreditSource(depth, pause=lambda: rng.random() < 0.3, name="src")
    sink = CreditSink(depth, pause=lambda: rng.random() < 0.5, ordered=True, name="dst")
    items = list(range(200))
    for item in items:
        source.send(item)
        sink.expect(item)
    link = Link(source, sink)
    for _ in range(2000):
        link.cycle()
        assert 0 <= source.credits[0] and source.credits[0] + len(sink.buffer) <= depth
    assert link.delivered == items and source.idle and sink.idle
    source.check_all_back()


def test_a_credit_never_spent_is_caught():
    source = CreditSource((2, 1), lanes=2, name="west")
    source.returned(0)
    with pytest.raises(CreditError, match="west: a credit came back that was never spent "
                                          r"\(lane 1, depth 1\)"):
        source.returned(0b10)


def test_a_lost_credit_and_an_overflow_are_caught():
    source = CreditSource(2, name="req")
    source.send("a")
    assert source.choose() == "a"
    with pytest.raises(CreditError, match=r"req: credits \[1\] at rest, not \[2\]"):
        source.check_all_back()
    sink = CreditSink((1, 2), lanes=2, lane=lambda item: item[0], name="north")
    sink.receive((1, "x"))
    sink.receive((1, "y"))
    sink.receive((0, "z"))
    with pytest.raises(CreditError, match="north: buffer overflow on lane 0"):
        sink.receive((0, "w"))
    assert sink.take() == ((1, "x"), 0b10)


def test_an_item_out_of_order_is_caught():
    sink = CreditSink(4, ordered=True, name="resp")
    sink.expect(1)
    sink.expect(2)
    with pytest.raises(CreditError, match="resp: item 2 received, expected 1"):
        sink.receive(2)
    with pytest.raises(ValueError, match="ordered sink"):
        CreditSink(4).expect(1)
    with pytest.raises(ValueError, match="depth must be"):
        CreditSource((4,), lanes=2)


def test_pauses_are_drawn_only_when_the_link_could_move():
    draws = deque()

    def pause():
        draws.append(1)
        return False

    source = CreditSource(1, pause=pause)
    assert source.choose() is None and not draws          # nothing queued
    source.send(1)
    source.send(2)
    assert source.choose() == 1 and len(draws) == 1
    assert source.choose() is None and len(draws) == 1    # no credit
    assert source.choose(hold=True) is None
    source.returned(1)
    assert source.choose(hold=True) is None and len(draws) == 1   # held
    sink = CreditSink(2, pause=pause)
    assert sink.take() == (None, 0) and len(draws) == 1    # nothing buffered
