"""The RTL's enum shapes (hdl/common/codes.py) against spec.codes and the register maps:
the same members and values as spec's, the width of the register field that carries
them (every field whose encoding names the enum), and decode()'s flags against
membership over every value of the shape."""

from enum import Enum as PyEnum

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import enum
from amaranth.sim import Simulator

from hdl.common import codes as rtl_codes
from hdl.ma import regmap as ma_regmap
from hdl.mc import regmap as mc_regmap
from hdl.muon import regmap as muon_regmap
from hdl.va import regmap as va_regmap
from spec import codes as spec_codes

# The members an RTL shape has beyond spec's: the VA's reset value of OPCODE.OP.
EXTRA = {"VaOpcode": {"NONE": 0}, "MaMode": {}, "ErrorCode": {}}
REGMAPS = (ma_regmap, va_regmap, mc_regmap, muon_regmap)


@pytest.mark.parametrize("name", sorted(EXTRA))
def test_shape_has_specs_members(name):
    shaped, source = getattr(rtl_codes, name), getattr(spec_codes, name)
    assert isinstance(shaped, enum.EnumType) and issubclass(shaped, enum.IntEnum)
    assert {m.name: m.value for m in shaped} == {
        **EXTRA[name], **{m.name: m.value for m in source}}
    fields = [field for regmap in REGMAPS for register in regmap.REGISTERS
              for field in register["fields"] if field["encode"] == name]
    assert fields, f"no register field is encoded as {name}"
    assert {field["width"] for field in fields} == {enum.Shape.cast(shaped).width}


@pytest.mark.parametrize("name", sorted(EXTRA))
def test_decode_flags_match_membership(name):
    shaped = getattr(rtl_codes, name)
    members = list(shaped)
    groups = {"first": members[0], "odd": [m for m in members if m.value % 2],
              "all": members}
    m = Module()
    value = Signal(shaped)
    flags = rtl_codes.decode(m, value, groups, "t")
    width = enum.Shape.cast(shaped).width
    sim = Simulator(m)

    async def bench(ctx):
        for raw in range(1 << width):
            ctx.set(value.as_value(), raw)
            for key, group in groups.items():
                group = [group] if isinstance(group, PyEnum) else group
                assert ctx.get(flags[key]) == (raw in [g.value for g in group]), (key, raw)

    sim.add_testbench(bench)
    sim.run()
