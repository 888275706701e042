"""AXI4 and AXI4-Lite interfaces, and flat top-level ports for them.

Amaranth names a Verilog port after its signature path joined with ``__``
(``s_axi_control__awaddr``), but cocotbext-axi's ``AxiLiteBus.from_prefix(dut,
"s_axi_control")`` and the Vitis RTL-kernel convention expect ``s_axi_control_awaddr``.
A standalone top therefore declares its AXI ports flat, with :func:`flat_members`, and
joins them to the nested interface of a submodule with :func:`connect_flat`::

    class MaTop(wiring.Component):
        def __init__(self):
            super().__init__({
                **flat_members("s_axi_control", In(AXI4LiteSignature(16, 32))),
                **flat_members("m_axi_gmem", Out(AXI4Signature(64, 128))),
                "interrupt": Out(1),
            })

        def elaborate(self, platform):
            m = Module()
            m.submodules.regs = regs = RegisterBlock(regmap)
            connect_flat(m, self, "s_axi_control", regs.bus)
            ...
"""

from amaranth.hdl import Shape
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxiResp", "AXI4LiteSignature", "AXI4Signature", "flat_members", "connect_flat",
           "flat_interface"]


class AxiResp(enum.Enum, shape=2):
    """Response code on BRESP / RRESP."""
    OKAY = 0    # normal access success
    EXOKAY = 1  # exclusive access success (never used by v4hw)
    SLVERR = 2  # the slave saw the access and refused it (v4hw: no register at that offset)
    DECERR = 3  # no slave at that address


def _check_width(name, value, allowed):
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(allowed)}, not {value}")


class _ParametrizedSignature(wiring.Signature):
    """A signature equal to another of its class with the same parameters
    (``_parameters``: the names of its read-only properties)."""

    _parameters = ()

    def _values(self):
        return tuple(getattr(self, name) for name in self._parameters)

    def __eq__(self, other):
        return type(other) is type(self) and other._values() == self._values()

    def __hash__(self):
        return hash((type(self), self._values()))

    def __repr__(self):
        values = ", ".join(f"{name}={value}" for name, value in
                           zip(self._parameters, self._values(), strict=True))
        return f"{type(self).__name__}({values})"


class AXI4LiteSignature(_ParametrizedSignature):
    """AXI4-Lite link, master's view (``Out`` members are driven by the master).

    Members: ``awaddr``, ``awprot``[3], ``awvalid``, ``awready`` (write address);
    ``wdata``, ``wstrb``[data_width/8], ``wvalid``, ``wready`` (write data);
    ``bresp``, ``bvalid``, ``bready`` (write response); ``araddr``, ``arprot``[3],
    ``arvalid``, ``arready`` (read address); ``rdata``, ``rresp``, ``rvalid``, ``rready``
    (read data). ``bresp`` and ``rresp`` have the shape :class:`AxiResp`.

    Rules (AMBA AXI, part B):

    1. Each of the five channels is a valid/ready handshake: a transfer takes place in a
       cycle where both are high. Once valid is high, it and the channel's payload stay
       unchanged until the transfer; valid must not wait for ready, ready may wait for
       valid.
    2. A write's AW and W transfers are independent: either may come first, or both in
       the same cycle. Its B transfer comes after both.
    3. A read's R transfer comes after its AR transfer.
    4. ``wstrb`` bit *i* enables byte lane *i* of ``wdata``; a slave leaves the bytes of
       disabled lanes unchanged.

    Parameters
    ----------
    addr_width : int
        Byte-address width, 1..64 bits (v4hw control ports: 16).
    data_width : int
        32 or 64 bits.
    """

    _parameters = ("addr_width", "data_width")

    def __init__(self, addr_width=16, data_width=32):
        _check_width("addr_width", addr_width, range(1, 65))
        _check_width("data_width", data_width, {32, 64})
        self._addr_width = addr_width
        self._data_width = data_width
        super().__init__({
            "awaddr":  Out(addr_width),
            "awprot":  Out(3),
            "awvalid": Out(1),
            "awready": In(1),
            "wdata":   Out(data_width),
            "wstrb":   Out(data_width // 8),
            "wvalid":  Out(1),
            "wready":  In(1),
            "bresp":   In(AxiResp),
            "bvalid":  In(1),
            "bready":  Out(1),
            "araddr":  Out(addr_width),
            "arprot":  Out(3),
            "arvalid": Out(1),
            "arready": In(1),
            "rdata":   In(data_width),
            "rresp":   In(AxiResp),
            "rvalid":  In(1),
            "rready":  Out(1),
        })

    @property
    def addr_width(self):
        return self._addr_width

    @property
    def data_width(self):
        return self._data_width



class AXI4Signature(_ParametrizedSignature):
    """AXI4 link with bursts, master's view (``Out`` members are driven by the master).

    Members, per channel (widths in bits; ``ID`` = ``id_width``):

    - AW: ``awid``[ID], ``awaddr``, ``awlen``[8], ``awsize``[3], ``awburst``[2],
      ``awlock``, ``awcache``[4], ``awprot``[3], ``awqos``[4], ``awregion``[4],
      ``awvalid``, ``awready``
    - W: ``wdata``, ``wstrb``[data_width/8], ``wlast``, ``wvalid``, ``wready``
    - B: ``bid``[ID], ``bresp``, ``bvalid``, ``bready``
    - AR: as AW with the ``ar`` prefix
    - R: ``rid``[ID], ``rdata``, ``rresp``, ``rlast``, ``rvalid``, ``rready``

    These are the signals cocotbext-axi's ``AxiBus`` requires plus the optional ones it
    binds when present, except the ``*user`` signals.

    Rules (AMBA AXI, part A):

    1. Each channel is a valid/ready handshake, as in :class:`AXI4LiteSignature` rule 1.
    2. A burst moves ``len + 1`` beats of ``2**size`` bytes each; ``wlast`` / ``rlast``
       mark the last beat. W beats of a burst may precede its AW transfer.
    3. An INCR burst never crosses a 4 KiB boundary.
    4. Responses with the same ID return in request order; v4hw masters use one ID.

    Parameters
    ----------
    addr_width : int
        Byte-address width, 1..64 bits (v4hw: 64, of which 48 are used).
    data_width : int
        8..1024 bits, a power of two (v4hw ``m_axi_gmem``: 64..512, default 128).
    id_width : int
        1..32 bits (cocotbext-axi needs the ID signals, so the width is at least 1).
    """

    _parameters = ("addr_width", "data_width", "id_width")

    def __init__(self, addr_width=64, data_width=128, id_width=1):
        _check_width("addr_width", addr_width, range(1, 65))
        _check_width("data_width", data_width, {8 << i for i in range(8)})
        _check_width("id_width", id_width, range(1, 33))
        self._addr_width = addr_width
        self._data_width = data_width
        self._id_width = id_width
        members = {}
        for prefix in ("aw", "ar"):
            members.update({
                f"{prefix}id":     Out(id_width),
                f"{prefix}addr":   Out(addr_width),
                f"{prefix}len":    Out(8),
                f"{prefix}size":   Out(3),
                f"{prefix}burst":  Out(2),
                f"{prefix}lock":   Out(1),
                f"{prefix}cache":  Out(4),
                f"{prefix}prot":   Out(3),
                f"{prefix}qos":    Out(4),
                f"{prefix}region": Out(4),
                f"{prefix}valid":  Out(1),
                f"{prefix}ready":  In(1),
            })
        members.update({
            "wdata":  Out(data_width),
            "wstrb":  Out(data_width // 8),
            "wlast":  Out(1),
            "wvalid": Out(1),
            "wready": In(1),
            "bid":    In(id_width),
            "bresp":  In(AxiResp),
            "bvalid": In(1),
            "bready": Out(1),
            "rid":    In(id_width),
            "rdata":  In(data_width),
            "rresp":  In(AxiResp),
            "rlast":  In(1),
            "rvalid": In(1),
            "rready": Out(1),
        })
        super().__init__(members)

    @property
    def addr_width(self):
        return self._addr_width

    @property
    def data_width(self):
        return self._data_width

    @property
    def id_width(self):
        return self._id_width



def _flat_name(prefix, path):
    return "_".join((prefix, *(str(item) for item in path)))


def flat_members(prefix, member):
    """Flat component members for an interface: ``{f"{prefix}_{name}": leaf member}``.

    ``member`` is the member the interface would be as a whole, e.g.
    ``In(AXI4LiteSignature(16, 32))`` for a control slave; each port of its signature
    becomes one member with the same flow (as seen from the component), shape and
    ``init``. Nested paths are joined with ``_`` too. Put the result in a
    ``wiring.Component`` signature and join it to a submodule with :func:`connect_flat`.
    """
    if not isinstance(prefix, str) or not prefix.isidentifier():
        raise TypeError(f"Prefix must be a string that is a Python identifier, not {prefix!r}")
    if not isinstance(member, wiring.Member) or not member.is_signature:
        raise TypeError(f"Member must be In(signature) or Out(signature), not {member!r}")
    if member.dimensions:
        raise ValueError(f"Member {member!r} is an array; give each element its own prefix")
    return {_flat_name(prefix, path): leaf
            for path, leaf in member.signature.members.flatten()
            if leaf.is_port}


def connect_flat(m, outer, prefix, inner):
    """Join the flat ports ``<prefix>_<name>`` of component ``outer`` to ``inner``.

    ``inner`` is an interface on the same side of the link as the flat ports, normally a
    submodule's port (``regs.bus`` for ports made by ``flat_members("s_axi_control",
    In(AXI4LiteSignature()))``). Every port of ``inner`` that flows in is driven from the
    flat port of the same name, and every flat port that flows out is driven from
    ``inner``, in the ``comb`` domain of module ``m``.

    Raises
    ------
    TypeError
        If a flat port is missing, or its flow or shape differs from ``inner``'s.
    """
    members = outer.signature.members
    for path, leaf, value in inner.signature.flatten(inner):
        name = _flat_name(prefix, path)
        if name not in members:
            raise TypeError(f"{type(outer).__name__} has no port {name!r}")
        flat = members[name]
        if flat.flow != leaf.flow or Shape.cast(flat.shape) != Shape.cast(leaf.shape):
            raise TypeError(f"Port {name!r} is {flat!r}, but {'.'.join(map(str, path))} "
                            f"of the inner interface is {leaf!r}")
        port = getattr(outer, name)
        if leaf.flow == In:
            m.d.comb += value.eq(port)
        else:
            m.d.comb += port.eq(value)


def flat_interface(m, outer, prefix, signature):
    """An interface of ``signature`` joined to the flat ports ``<prefix>_<name>`` of
    ``outer``, seen from outside ``outer`` (the mirror of :func:`connect_flat`).

    ``signature`` is the link as ``outer`` declared it, e.g. ``AXI4Signature(64, 128)`` for
    ports made by ``flat_members("m_axi_gmem", Out(AXI4Signature(64, 128)))``. The result
    stands for ``outer``'s end of the link, so ``wiring.connect(m, result, ram.axi)`` joins
    a submodule's master ports to a slave. For ``In(...)`` ports pass
    ``signature.flip()``.
    """
    iface = signature.create()
    for path, leaf, value in signature.flatten(iface):
        name = _flat_name(prefix, path)
        port = getattr(outer, name, None)
        if port is None:
            raise TypeError(f"{type(outer).__name__} has no port {name!r}")
        if leaf.flow == Out:
            m.d.comb += value.eq(port)
        else:
            m.d.comb += port.eq(value)
    return iface
