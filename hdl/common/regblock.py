"""The AXI4-Lite register block every v4hw block puts behind ``s_axi_control``."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axi import AXI4LiteSignature, AxiResp

__all__ = ["RegisterBlock"]

_DATA_WIDTH = 32
_ADDR_WIDTH = 16
_ACCESS_CODES = ("RW", "RO", "RC", "W1C", "WO")
_WORD_LSB = 2  # registers are decoded on address bits 15:2


def _check_registers(registers):
    """Validate the generated register data; returns it as a tuple."""
    try:
        registers = tuple(registers)
    except TypeError:
        raise TypeError(f"Register map must be a generated regmap module or a sequence of "
                        f"register dicts, not {registers!r}") from None
    offsets, names = set(), {"bus"}
    for register in registers:
        name = register["name"]
        if name.lower() in names:
            raise ValueError(f"Register name {name!r} is used twice or clashes with 'bus'")
        names.add(name.lower())
        offset = register["offset"]
        if offset % 4 or not 0 <= offset < 1 << _ADDR_WIDTH or offset in offsets:
            raise ValueError(f"Register {name}: offset 0x{offset:X} is not a free aligned "
                             f"{_ADDR_WIDTH}-bit byte address")
        offsets.add(offset)
        used = 0
        for field in register["fields"]:
            lsb, width = field["lsb"], field["width"]
            mask = ((1 << width) - 1) << lsb
            if width < 1 or lsb < 0 or lsb + width > _DATA_WIDTH or used & mask:
                raise ValueError(f"Register {name}: field {field['name']} at bits "
                                 f"{lsb + width - 1}:{lsb} overlaps or is out of range")
            used |= mask
            if field["access"] not in _ACCESS_CODES:
                raise ValueError(f"Register {name}: field {field['name']} has access "
                                 f"{field['access']!r}, not one of {_ACCESS_CODES}")
    return registers


def _register_signature(register):
    """Sub-signature of one register, seen from the register block (``Out`` to the core)."""
    members = {}

    def add(name, member):
        if name in members:
            raise ValueError(f"Register {register['name']}: member {name!r} is defined twice "
                             f"(a field clashes with a '<field>_set' or 'rd_stb' member)")
        members[name] = member

    for field in register["fields"]:
        name, width, access = field["name"].lower(), field["width"], field["access"]
        if access == "RW":
            add(name, Out(width, init=field["reset"]))
        elif access in ("RO", "RC"):
            add(name, In(width))
        elif access == "W1C":
            add(name, Out(width, init=field["reset"]))
            add(f"{name}_set", In(width))
        else:  # WO: a pulse
            add(name, Out(width))
    if register["read_strobe"]:
        add("rd_stb", Out(1))
    return wiring.Signature(members)


def _decode(m, address, registers, enable, name):
    """One bit a register, registered when ``enable``: the word address of the
    accepted request equals the register's. The read and the write then select a
    register by one flip-flop instead of comparing 14 address bits in the cycle they are
    performed (on the ECP5, the read select behind the compare was a block's slowest
    path)."""
    hits = Signal(len(registers), name=name)
    with m.If(enable):
        m.d.sync += hits.eq(Cat(address[_WORD_LSB:] == register["offset"] >> _WORD_LSB
                                for register in registers))
    return hits


class RegisterBlock(wiring.Component):
    """AXI4-Lite slave holding a block's control registers.

    Built from the plain-data register map that ``v4hw regmap --update`` generates from
    the block's SystemRDL (``hdl/<block>/regmap.py``); the core sees typed per-register
    members, never the bus.

    Members
    -------
    bus : In(AXI4LiteSignature(16, 32))
        The slave side of ``s_axi_control``.
    <register> : Out(Signature)
        One member per register, named after it in lower case (``mode``, ``status``,
        ``tat_logic_0``, ``ctr_lo``), with one member per field, named after the field in
        lower case. Field access (code in the register map) gives the direction:

        ======  =======================================================================
        RW      ``Out(width)``: the current value, ``init`` = the reset value. A write
                changes only the bytes whose ``wstrb`` bit is set.
        RO      ``In(width)``: the value the core drives; a read returns it.
        RC      ``In(width)``, as RO; the core clears the value on ``rd_stb``.
        W1C     ``Out(width)``: the latched value, and ``In(width)`` ``<field>_set``.
                A bit is set in the cycle after its ``_set`` bit is high, and cleared
                by a write of 1 to it (with its byte strobe). A set and a clear of the
                same bit in the same cycle: the set wins, so no event is lost.
        WO      ``Out(1)``: high for exactly one cycle, the cycle the write is performed,
                when the write has this bit set (and its byte strobe); reads return 0.
        ======  =======================================================================

        A register with a read side effect (an RC field, or the RDL property
        ``v4hw_read_strobe``, as TIME_LO) also has ``rd_stb: Out(1)``, high for one
        cycle, the cycle its read is performed (the core clears or latches on it).

        For example, a core reads ``regs.mode.accumulate``, drives
        ``regs.status.busy`` and pulses ``regs.irq_status.done_set``.

    Protocol rules (the AXI4-Lite rules of :class:`~hdl.common.axi.AXI4LiteSignature`
    hold; these are what this slave adds):

    1. The address is decoded on bits 15:2; bits 1:0 are ignored.
    2. AW and W are accepted independently, in either order or together, and held. The
       write is *performed* in the first cycle in which both are held (the cycle after
       the later of the two transfers): RW and W1C values change at the end of that
       cycle, and WO pulses are high during it.
    3. ``bvalid`` rises in the cycle after the write is performed, so a core that
       registers state on a WO pulse (BUSY on START) shows it before the master can see
       the B response.
    4. The read is performed in the cycle after AR is accepted: the register's value is
       sampled in that cycle (``rd_stb`` is high in it), and ``rvalid`` rises in the next.
    5. One write and one read are outstanding at most: an AW (or W) is not accepted
       while another is held or while a B response waits; an AR is not accepted while
       another is held or while an R response waits. Reads and writes are independent.
    6. An offset with no register: SLVERR, and nothing changes (no pulse, no strobe).
       A write to a register without writable fields (RO, RC): OKAY, ignored. A read of
       a WO field returns 0, OKAY. Bits outside every field read as 0.

    Parameters
    ----------
    regmap : module or sequence of dict
        A generated register-map module (its ``REGISTERS``) or the register list itself.
    """

    def __init__(self, regmap):
        self._registers = _check_registers(getattr(regmap, "REGISTERS", regmap))
        members = {"bus": In(AXI4LiteSignature(_ADDR_WIDTH, _DATA_WIDTH))}
        for register in self._registers:
            members[register["name"].lower()] = Out(_register_signature(register))
        super().__init__(members)

    @property
    def registers(self):
        """The register map this block implements (tuple of register dicts)."""
        return self._registers

    def _port(self, register):
        return getattr(self, register["name"].lower())

    def elaborate(self, platform):
        m = Module()
        write = self._write_channel(m)
        for index, register in enumerate(self._registers):
            self._write_effects(m, index, register, write)
        self._read_channel(m)
        return m

    def _write_channel(self, m):
        """AW/W holding registers, the write strobe, and B (rules 2, 3, 5, 6)."""
        bus = self.bus
        aw_full = Signal()
        w_full = Signal()
        data = Signal(_DATA_WIDTH)
        strb = Signal(_DATA_WIDTH // 8)
        perform = Signal()

        m.d.comb += [
            bus.awready.eq(~aw_full & ~bus.bvalid),
            bus.wready.eq(~w_full & ~bus.bvalid),
            perform.eq(aw_full & w_full),
        ]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += aw_full.eq(1)
        hits = _decode(m, bus.awaddr, self._registers, bus.awvalid & bus.awready, "aw_hit")
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_full.eq(1), data.eq(bus.wdata), strb.eq(bus.wstrb)]

        with m.If(perform):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), bus.bvalid.eq(1),
                         bus.bresp.eq(Mux(hits.any(), AxiResp.OKAY, AxiResp.SLVERR))]
        with m.Elif(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)

        # Bit mask of the written bytes.
        mask = Cat(strb[lane].replicate(8) for lane in range(len(strb)))
        return perform, hits, data, mask

    def _write_effects(self, m, index, register, write):
        """What a write to ``register`` (the ``index``-th) does to its fields (and W1C
        sets, which any cycle may bring)."""
        perform, hits, data, mask = write
        port = self._port(register)
        name = register["name"].lower()
        selected = Signal(name=f"{name}_wr")
        m.d.comb += selected.eq(perform & hits[index])
        for field in register["fields"]:
            bits = slice(field["lsb"], field["lsb"] + field["width"])
            value = getattr(port, field["name"].lower())
            written = data[bits] & mask[bits]  # the 1s that this write sets in the field
            if field["access"] == "RW":
                with m.If(selected):
                    m.d.sync += value.eq((value & ~mask[bits]) | written)
            elif field["access"] == "W1C":
                clear = Signal(field["width"], name=f"{name}_{field['name'].lower()}_clr")
                m.d.comb += clear.eq(written & selected.replicate(field["width"]))
                set_ = getattr(port, f"{field['name'].lower()}_set")
                m.d.sync += value.eq((value & ~clear) | set_)
            elif field["access"] == "WO":
                m.d.comb += value.eq(selected & written)

    def _read_value(self, register):
        """The 32-bit word a read of ``register`` returns."""
        port = self._port(register)
        word, lsb = [], 0
        for field in register["fields"]:  # sorted by lsb, disjoint
            word.append(Const(0, field["lsb"] - lsb))
            if field["access"] == "WO":
                word.append(Const(0, field["width"]))
            else:
                word.append(getattr(port, field["name"].lower()))
            lsb = field["lsb"] + field["width"]
        word.append(Const(0, _DATA_WIDTH - lsb))
        return Cat(*word)

    def _read_channel(self, m):
        """AR holding register, the read, read strobes, and R (rules 4, 5, 6)."""
        bus = self.bus
        ar_full = Signal()

        m.d.comb += bus.arready.eq(~ar_full & ~bus.rvalid)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += ar_full.eq(1)
        hits = _decode(m, bus.araddr, self._registers, bus.arvalid & bus.arready, "ar_hit")

        # The word read: the OR of every register's value gated by its hit (at most one).
        word = 0
        for index, register in enumerate(self._registers):
            word = word | (self._read_value(register) & hits[index].replicate(_DATA_WIDTH))
            if register["read_strobe"]:
                m.d.comb += self._port(register).rd_stb.eq(ar_full & hits[index])

        with m.If(ar_full):
            m.d.sync += [ar_full.eq(0), bus.rvalid.eq(1), bus.rdata.eq(word),
                         bus.rresp.eq(Mux(hits.any(), AxiResp.OKAY, AxiResp.SLVERR))]
        with m.Elif(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
