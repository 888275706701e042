"""Credit links in the testbenches: payloads packed through their ``data`` layouts, and
the two ends of a link, :class:`CreditSource` and :class:`CreditSink`.

A credit link (``hdl.common.credit.CreditSignature``: the MC's client channels, the Muon's links) has
``valid``, a payload and ``credit``, and no ready. Its rules, as the BFMs check them:

1. The source holds ``depth`` credits per lane at reset (one lane, or one per virtual
   channel; ``credit`` then has a bit per lane), spends one per item sent on its lane and
   never sends on a lane with no credit.
2. The sink takes an item in every cycle ``valid`` is high; its buffer holds ``depth``
   items per lane and an item sent to a full lane fails the bench.
3. The sink pulses ``credit`` (bit ``lane``) for one cycle per item it frees, at most one
   per cycle; the source counts the pulse after its choice of the same cycle, so it
   spends that credit from the next cycle on. A credit back beyond ``depth`` fails the
   bench (a credit created); :meth:`CreditSource.check_all_back` at rest fails if one
   was lost.

The shared logic (:class:`CreditSource`, :class:`CreditSink`) works on items and credit
pulses, once a cycle; the simulator parts are thin: :class:`CocotbCreditSource` and
:class:`CocotbCreditSink` drive and sample cocotb handles at a falling edge of the
clock; :class:`SimCreditSource` and :class:`SimCreditSink` the members of a link in an
Amaranth-simulator testbench (``ctx``), in the testbench's drive and sample phases.

Payloads are packed and unpacked with :func:`pack` and :func:`unpack` (a
:class:`Codec` per layout), at the offsets and widths of the layout's fields: the bits
of the layout's own ``const(fields).as_bits()`` (``tests/test_bfm_credit.py`` checks
they agree), in a few microseconds rather than ``const``'s milliseconds, which matters
at a flit per node and cycle. Both simulators use the same integers (cocotb handles,
``ctx.get(view.as_value())``), so the benches share the RTL's definition of the
encoding.
"""

from collections import deque
from collections.abc import Mapping
from types import SimpleNamespace

from amaranth.hdl import Shape, Value
from amaranth.lib import data

__all__ = ["Codec", "codec", "pack", "unpack", "CreditError", "CreditSource", "CreditSink",
           "CocotbCreditSource", "CocotbCreditSink", "SimCreditSource", "SimCreditSink"]


class Codec:
    """Pack and unpack the payloads of one ``data`` layout (a layout or a ``data.Struct``
    class), with the field offsets and widths the layout gives, computed once.
    ``fields``: ``{"a.b.c": (offset, width)}`` of every leaf field, dotted paths through
    nested layouts (each alternative of a union)."""

    def __init__(self, layout):
        self.layout = data.Layout.cast(layout)
        self.width = self.layout.size
        self.fields = {}
        self._leaves = []
        self._tree = self._walk(self.layout, (), 0)

    def _walk(self, layout, path, base):
        """``(is a union, {name: (offset, width, signed, subtree or None)})``."""
        members = {}
        for name, field in layout:
            offset, inner = base + field.offset, _layout_of(field.shape)
            shape = Shape.cast(field.shape)
            subtree = None if inner is None else self._walk(inner, path + (name,), offset)
            members[name] = (offset, field.width, shape.signed, subtree)
            if inner is None:
                self.fields[".".join(path + (name,))] = (offset, field.width)
                self._leaves.append((path, name, offset, (1 << field.width) - 1))
        return isinstance(layout, data.UnionLayout), members

    def pack(self, fields):
        """The payload's bits (an ``int``), as the layout's ``const(fields).as_bits()``
        gives them: ``fields`` maps field names to integers (enums included), or to
        nested mappings for nested layouts (one member of a union); fields left out are
        0. Raises ``ValueError`` for an unknown field, two members of a union, or a value
        that does not fit in its field (where ``const`` would truncate it silently)."""
        return self._pack(self._tree, fields, "")

    def _pack(self, tree, fields, prefix):
        union, members = tree
        if union and len(fields) > 1:
            raise ValueError(f"{prefix or 'payload'}: one member of a union, not "
                             f"{', '.join(fields)}")
        bits = 0
        for name, value in fields.items():
            try:
                offset, width, signed, subtree = members[name]
            except KeyError:
                raise ValueError(f"{prefix}{name}: no such field in {self.layout!r}") from None
            if subtree is not None and isinstance(value, Mapping):
                bits |= self._pack(subtree, value, f"{prefix}{name}.")
                continue
            value = int(value)
            low = -(1 << width - 1) if signed else 0
            if not low <= value < low + (1 << width):
                raise ValueError(f"{prefix}{name} = {value} does not fit in {width} bits")
            bits |= (value & ((1 << width) - 1)) << offset
        return bits

    def unpack(self, bits):
        """The fields of the payload ``bits`` (an ``int``) as a namespace: ``item.data``,
        ``item.header.src_x`` (unsigned integers); every alternative of a union, sliced
        from the same bits."""
        root = SimpleNamespace()
        for path, name, offset, mask in self._leaves:
            node = root
            for step in path:
                child = getattr(node, step, None)
                if child is None:
                    child = SimpleNamespace()
                    setattr(node, step, child)
                node = child
            setattr(node, name, bits >> offset & mask)
        return root

    def get(self, bits, path):
        """One field of ``bits`` (unsigned) by its dotted path (``"data.header.ts"``)."""
        offset, width = self.fields[path]
        return bits >> offset & ((1 << width) - 1)


def _layout_of(shape):
    try:
        return data.Layout.cast(shape)
    except TypeError:
        return None


_CODECS = {}


def codec(layout):
    """The :class:`Codec` of ``layout``, made once per layout."""
    key = data.Layout.cast(layout)
    found = _CODECS.get(key)
    if found is None:
        found = _CODECS[key] = Codec(key)
    return found


def pack(layout, fields):
    """``codec(layout).pack(fields)``: the bits of a payload."""
    return codec(layout).pack(fields)


def unpack(layout, bits):
    """``codec(layout).unpack(bits)``: the fields of a payload."""
    return codec(layout).unpack(bits)


def _bits(codec, item, fields):
    """The payload bits of a source's item: ``fields(item)`` (or the item) is a mapping
    for :meth:`Codec.pack`, or the bits themselves as an ``int``."""
    value = item if fields is None else fields(item)
    if not isinstance(value, int):
        return codec.pack(value)
    if not 0 <= value < 1 << codec.width:
        raise ValueError(f"payload {value:#x} does not fit in {codec.width} bits")
    return value


class CreditError(AssertionError):
    """A credit link's rule was broken (the message names the link)."""


def _depths(depth, lanes):
    depths = (depth,) * lanes if isinstance(depth, int) else tuple(depth)
    if len(depths) != lanes or not all(isinstance(d, int) and d >= 1 for d in depths):
        raise ValueError(f"depth must be an integer >= 1 or one per lane ({lanes}), "
                         f"not {depth!r}")
    return depths


class CreditSource:
    """The sending end of a credit link, simulator-free: a queue of items, the credits.

    ``depth``: the sink's buffer in items (an integer, or one per lane); ``lanes``: the
    bits of ``credit``. ``pause``: a callable, called only when an item could be sent
    (an item queued, a credit for it, not held), that returns true to leave the cycle
    idle (e.g. ``lambda: rng.random() < 0.3``). ``lane``: the lane of an item (default
    0). ``name`` prefixes every error.
    """

    def __init__(self, depth, *, lanes=1, pause=None, lane=None, name="credit link"):
        self.depth = _depths(depth, lanes)
        self.lanes, self.pause, self.name = lanes, pause, name
        self._lane = lane
        self.credits = list(self.depth)
        self.queue = deque()

    def send(self, item):
        """Queue ``item``; it goes out in order, when a credit allows."""
        self.queue.append(item)

    def choose(self, hold=False):
        """This cycle's item: the queue's first, taken off the queue and paid for, if its
        lane holds a credit, ``hold`` is false and no pause is drawn; else ``None``."""
        if not self.queue:
            return None
        item = self.queue[0]
        lane = 0 if self._lane is None else self._lane(item)
        if not self.credits[lane] or hold or (self.pause is not None and self.pause()):
            return None
        self.queue.popleft()
        self.credits[lane] -= 1
        return item

    def returned(self, pulses):
        """Count the ``credit`` pulses of this cycle (bit ``lane`` per lane)."""
        for lane in range(self.lanes):
            if pulses >> lane & 1:
                self.credits[lane] += 1
                if self.credits[lane] > self.depth[lane]:
                    raise CreditError(f"{self.name}: a credit came back that was never "
                                      f"spent (lane {lane}, depth {self.depth[lane]})")

    def check_all_back(self):
        """At rest (no item in flight, the last pulses counted): every credit is back."""
        if self.credits != list(self.depth):
            raise CreditError(f"{self.name}: credits {self.credits} at rest, not "
                              f"{list(self.depth)}: a credit was lost")

    @property
    def idle(self):
        return not self.queue


class CreditSink:
    """The receiving end of a credit link, simulator-free: the buffer.

    ``depth``, ``lanes`` as :class:`CreditSource`'s; ``lane``: the lane of a received
    item. ``pause``: a callable, called only when an item is buffered, that returns true
    to take nothing this cycle (back-pressure). With ``ordered``, every item received must
    be the next one given to :meth:`expect`.
    """

    def __init__(self, depth, *, lanes=1, pause=None, lane=None, ordered=False,
                 name="credit link"):
        self.depth = _depths(depth, lanes)
        self.lanes, self.pause, self.name = lanes, pause, name
        self._lane = lane
        self.buffer = deque()
        self.level = [0] * lanes
        self.expected = deque() if ordered else None

    def expect(self, item):
        """The next item the sink must receive (``ordered`` sinks)."""
        if self.expected is None:
            raise ValueError(f"{self.name}: expect() needs an ordered sink")
        self.expected.append(item)

    def receive(self, item):
        """An item arrived (``valid`` was high): buffer it, or fail on a full lane."""
        lane = 0 if self._lane is None else self._lane(item)
        if self.level[lane] >= self.depth[lane]:
            raise CreditError(f"{self.name}: buffer overflow on lane {lane} (depth "
                              f"{self.depth[lane]}): the source spent a credit it did "
                              f"not hold")
        if self.expected is not None:
            if not self.expected:
                raise CreditError(f"{self.name}: item {item} received, none expected")
            want = self.expected.popleft()
            if item != want:
                raise CreditError(f"{self.name}: item {item} received, expected {want}")
        self.level[lane] += 1
        self.buffer.append((item, lane))

    def take(self):
        """Free the oldest buffered item unless a pause is drawn: ``(item, pulses)``,
        the ``credit`` bits to drive this cycle, or ``(None, 0)``."""
        if not self.buffer or (self.pause is not None and self.pause()):
            return None, 0
        item, lane = self.buffer.popleft()
        self.level[lane] -= 1
        return item, 1 << lane

    @property
    def idle(self):
        return not self.buffer


class CocotbCreditSource(CreditSource):
    """A :class:`CreditSource` on cocotb handles ``payload``, ``valid`` and ``credit``,
    stepped once a cycle at a falling edge of the clock (:meth:`cycle`). ``layout``: the
    payload's; ``fields(item)``: the mapping :func:`pack` takes, or the payload's bits as
    an ``int`` (default: the item itself)."""

    def __init__(self, payload, valid, credit, layout, depth, *, fields=None, **kwargs):
        super().__init__(depth, **kwargs)
        self._payload, self._valid, self._credit = payload, valid, credit
        self._codec, self._fields = codec(layout), fields

    def idle_inputs(self):
        self._valid.value = 0

    def cycle(self, hold=False):
        """Drive the item of the next clock edge (or none), count the credit pulse the
        sink drives now; returns the item sent or ``None``."""
        pulses = int(self._credit.value)
        item = self.choose(hold)
        self._valid.value = int(item is not None)
        if item is not None:
            self._payload.value = _bits(self._codec, item, self._fields)
        self.returned(pulses)
        return item


class CocotbCreditSink(CreditSink):
    """A :class:`CreditSink` on cocotb handles, stepped at a falling edge (:meth:`cycle`):
    it receives the item on the link, then frees one (which may be that item) and drives
    its credit pulse. ``decode(bits)``: the item buffered for the payload's bits
    (default: its fields, :meth:`Codec.unpack`)."""

    def __init__(self, payload, valid, credit, layout, depth, *, decode=None, **kwargs):
        super().__init__(depth, **kwargs)
        self._payload, self._valid, self._credit = payload, valid, credit
        self._decode = codec(layout).unpack if decode is None else decode

    def idle_inputs(self):
        self._credit.value = 0

    def cycle(self):
        """Returns the item freed this cycle, or ``None``."""
        if int(self._valid.value):
            self.receive(self._decode(int(self._payload.value)))
        item, pulses = self.take()
        self._credit.value = pulses
        return item


class SimCreditSource(CreditSource):
    """A :class:`CreditSource` on a link's members in an Amaranth-simulator testbench:
    ``link`` has ``valid``, ``credit`` and the payload member named ``payload``. Each
    cycle, :meth:`drive` before the clock edge's values are read, :meth:`sample` after
    (both before ``ctx.tick()``); ``fields`` as :class:`CocotbCreditSource`'s."""

    def __init__(self, link, depth, *, payload="payload", fields=None, **kwargs):
        super().__init__(depth, **kwargs)
        view = getattr(link, payload)
        self._valid, self._credit = link.valid, link.credit
        self._payload, self._codec, self._fields = Value.cast(view), codec(view.shape()), fields

    def drive(self, ctx, hold=False):
        """Drive this cycle's item (or none); returns it."""
        item = self.choose(hold)
        ctx.set(self._valid, item is not None)
        if item is not None:
            ctx.set(self._payload, _bits(self._codec, item, self._fields))
        return item

    def sample(self, ctx):
        """Count this cycle's credit pulses."""
        self.returned(ctx.get(self._credit))


class SimCreditSink(CreditSink):
    """A :class:`CreditSink` on a link's members in an Amaranth-simulator testbench, each
    cycle before ``ctx.tick()``: :meth:`drive` frees the oldest item buffered and drives
    its credit pulse, :meth:`sample` receives the cycle's item. Drive first, and an item
    is freed from the cycle after it arrived; sample first, and it may be freed in the
    cycle it arrives. ``decode`` as :class:`CocotbCreditSink`'s."""

    def __init__(self, link, depth, *, payload="payload", decode=None, **kwargs):
        super().__init__(depth, **kwargs)
        view = getattr(link, payload)
        self._valid, self._credit, self._payload = link.valid, link.credit, Value.cast(view)
        self._decode = codec(view.shape()).unpack if decode is None else decode

    def drive(self, ctx):
        """Returns the item freed this cycle, or ``None``."""
        item, pulses = self.take()
        ctx.set(self._credit, pulses)
        return item

    def sample(self, ctx):
        """Receive this cycle's item if ``valid`` is high; returns it (or ``None``)."""
        if not ctx.get(self._valid):
            return None
        item = self._decode(ctx.get(self._payload))
        self.receive(item)
        return item
