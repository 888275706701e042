"""Testbench access to a block's registers, by name, through an AXI4-Lite master.

The offsets and field layouts come from the block's generated register map
(``hdl/<block>/regmap.py``), so a test never writes an offset or a bit position::

    regs = Registers(AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control"),
                                   dut.ap_clk, dut.ap_rst_n, reset_active_level=False),
                     hdl.ma.regmap)
    await regs.write("M", 128)
    await regs.write_fields("MODE", mode=MaMode.BF16, accumulate=1)
    await regs.write("START", 1)
    status = await regs.read("STATUS")
    if regs.field("STATUS", "DONE", status): ...
    value, resp = await regs.read_resp(regs.unmapped_offset())   # resp is AxiResp.SLVERR

``master`` is anything with cocotbext-axi's ``AxiLiteMaster`` coroutines
``read(address, length)`` and ``write(address, data)`` that return objects with ``.data``
(reads) and ``.resp``; register values are little-endian 32-bit words.
"""

from hdl.common.axi import AxiResp

__all__ = ["RegisterAccessError", "Registers"]

_WORD_BYTES = 4


def _axi_resp(resp):
    """cocotbext-axi answers with its own IntEnum, an Amaranth testbench with AxiResp."""
    return resp if isinstance(resp, AxiResp) else AxiResp(int(resp))


class RegisterAccessError(Exception):
    """A register access answered with a response other than OKAY (``.resp``)."""

    def __init__(self, message, resp):
        super().__init__(message)
        self.resp = resp


class Registers:
    """Registers of one block, by name. Names are case-insensitive."""

    def __init__(self, master, regmap, *, base=0):
        self._master = master
        self._base = base
        self._registers = {register["name"].upper(): register
                           for register in getattr(regmap, "REGISTERS", regmap)}

    def register(self, name):
        """The register's generated description (dict: name, offset, access, fields...)."""
        try:
            return self._registers[name.upper()]
        except KeyError:
            raise KeyError(f"No register named {name!r}") from None

    def _field(self, name, field):
        for desc in self.register(name)["fields"]:
            if desc["name"] == field.upper():
                return desc
        raise KeyError(f"Register {name.upper()} has no field {field!r}")

    def offset(self, name):
        """Byte offset of the register (relative to the block, without ``base``)."""
        return self.register(name)["offset"]

    def unmapped_offset(self):
        """An aligned offset with no register: the lowest hole in the map."""
        used = {register["offset"] for register in self._registers.values()}
        return next(offset for offset in range(0, 1 << 16, _WORD_BYTES)
                    if offset not in used)

    def field(self, name, field, value):
        """Decode field ``field`` of register ``name`` from the register value ``value``."""
        desc = self._field(name, field)
        return (value >> desc["lsb"]) & ((1 << desc["width"]) - 1)

    def fields(self, name, value):
        """All fields of the register value, ``{FIELD: value}``."""
        return {desc["name"]: self.field(name, desc["name"], value)
                for desc in self.register(name)["fields"]}

    def encode(self, name, **fields):
        """Register value with the given fields; the others take their reset value (0
        where the core drives them)."""
        values = {desc["name"]: desc["reset"] or 0 for desc in self.register(name)["fields"]}
        for field, value in fields.items():
            desc = self._field(name, field)
            value = int(value)
            if not 0 <= value < 1 << desc["width"]:
                raise ValueError(f"{name.upper()}.{desc['name']} is {desc['width']} bits "
                                 f"wide; {value} does not fit")
            values[desc["name"]] = value
        word = 0
        for desc in self.register(name)["fields"]:
            word |= values[desc["name"]] << desc["lsb"]
        return word

    def _address(self, target):
        return self._base + (self.offset(target) if isinstance(target, str) else target)

    async def read_resp(self, target):
        """Read register ``target`` (a name or a byte offset); returns ``(value, AxiResp)``."""
        response = await self._master.read(self._address(target), _WORD_BYTES)
        return int.from_bytes(bytes(response.data), "little"), _axi_resp(response.resp)

    async def write_resp(self, target, value):
        """Write a whole word to ``target`` (a name or a byte offset); returns the AxiResp."""
        return await self.write_bytes(target, value.to_bytes(_WORD_BYTES, "little"))

    async def write_bytes(self, target, data, byte=0):
        """Write ``data`` at byte ``byte`` of register ``target``, so only those byte
        strobes are set; returns the AxiResp."""
        if not data or not (0 <= byte and byte + len(data) <= _WORD_BYTES):
            raise ValueError(f"{len(data)} bytes at byte {byte} do not fit in a register")
        response = await self._master.write(self._address(target) + byte, bytes(data))
        return _axi_resp(response.resp)

    async def read(self, name):
        """Read register ``name``; raises :class:`RegisterAccessError` unless OKAY."""
        value, resp = await self.read_resp(name)
        if resp != AxiResp.OKAY:
            raise RegisterAccessError(f"Read of {name.upper()} answered {resp.name}", resp)
        return value

    async def write(self, name, value):
        """Write register ``name``; raises :class:`RegisterAccessError` unless OKAY."""
        resp = await self.write_resp(name, value)
        if resp != AxiResp.OKAY:
            raise RegisterAccessError(f"Write of {name.upper()} answered {resp.name}", resp)

    async def write_fields(self, name, **fields):
        """Write register ``name`` from field values (see :meth:`encode`): a plain write,
        not a read-modify-write."""
        await self.write(name, self.encode(name, **fields))

    async def read_fields(self, name):
        """Read register ``name`` and decode it, ``{FIELD: value}``."""
        return self.fields(name, await self.read(name))
