"""Committed generated files (hdl/<block>/regmap.py, docs/<block>/regmap.*) are up to date.

Every file is regenerated from the SystemRDL into a temporary directory and compared
byte for byte with the committed one. The IP-XACT export parses and holds every register
and field of the model; each block's CAPS fields are its descriptor's ``caps_layout``.
"""

import difflib
import importlib
import json
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest
from systemrdl import RDLCompiler

from sim import regmap as generator
from sim.blocks import descriptor, registry

FIX = ("run `v4hw regmap --update` (until the command line is wired: "
       "`python -m sim.regmap --update`) and commit the result")


def _diff(committed, fresh, path):
    lines = difflib.unified_diff(committed.splitlines(keepends=True),
                                 fresh.splitlines(keepends=True),
                                 f"{path} (committed)", f"{path} (generated now)")
    return "".join(list(lines)[:40])


def test_there_are_blocks():
    assert "ma" in generator.blocks()


@pytest.mark.parametrize("block", generator.blocks())
def test_committed_files_are_up_to_date(block, tmp_path):
    files = generator.generated_files([block])
    assert sorted(files) == sorted([generator.module_path(block), *(
        f"{generator.docs_dir(block)}/regmap.{ext}" for ext in generator.extensions(block))])
    for path, text in files.items():
        fresh = tmp_path / path
        fresh.parent.mkdir(parents=True, exist_ok=True)
        fresh.write_text(text, encoding="utf-8", newline="\n")
    for path in files:
        committed = generator.ROOT / path
        assert committed.is_file(), f"{path} is missing: {FIX}"
        fresh = (tmp_path / path).read_bytes()
        assert committed.read_bytes() == fresh, (
            f"{path} is stale: {FIX}\n"
            + _diff(committed.read_text(encoding="utf-8"), fresh.decode("utf-8"), path))


@pytest.mark.parametrize("block", generator.blocks())
def test_generation_is_deterministic(block):
    assert generator.generated_files([block]) == generator.generated_files([block])


@pytest.mark.parametrize("block", generator.blocks())
def test_python_and_json_carry_the_model(block):
    model = generator.build_model(block)
    module = importlib.import_module(generator.module_name(block))
    assert module.BLOCK == block and module.SOURCE == model["source"]
    assert [dict(register, fields=list(register["fields"])) for register in module.REGISTERS] \
        == model["registers"]
    committed = json.loads((generator.ROOT / f"{generator.docs_dir(block)}/regmap.json")
                           .read_text())
    assert committed == json.loads(generator.render_json(model))


def test_ma_map_follows_design():
    registers = {register["name"]: register
                 for register in generator.build_model("ma")["registers"]}
    offsets = {name: register["offset"] for name, register in registers.items()}
    assert offsets["STATUS"] == 0x0008 and offsets["TIME_LO"] == 0x0040
    assert offsets["MODE"] == 0x0020 and offsets["M"] == 0x2000 and offsets["CTR_HI"] == 0x2014
    assert [offsets[f"TAT_PHYS_HI_{i}"] for i in range(4)] == [0x1008 + 16 * i for i in range(4)]
    access = {name: register["access"] for name, register in registers.items()}
    assert (access["IRQ_STATUS"], access["START"], access["CTR_LO"], access["TIME_LO"],
            access["MODE"]) == ("W1C", "WO", "RC", "RO", "RW")
    assert {name for name, register in registers.items() if register["read_strobe"]} \
        == {"CTR_LO", "TIME_LO"}
    assert all(register["description"] and all(field["description"]
                                               for field in register["fields"])
               for register in registers.values())


def _model_of(tmp_path, text):
    source = tmp_path / "t.rdl"
    source.write_text(text)
    compiler = RDLCompiler()
    compiler.compile_file(str(source))
    return generator.build_model("t", compiler.elaborate(top_def_name="t").top)


def test_unsupported_semantics_are_refused(tmp_path):
    with pytest.raises(generator.RegmapError, match="none of RW, RO, RC, W1C, WO"):
        _model_of(tmp_path, 'addrmap t { reg { desc = "r"; field { sw = rw; hw = rw; '
                            'desc = "f"; } F[0:0] = 0; } R @ 0; };')
    with pytest.raises(generator.RegmapError, match="no desc"):
        _model_of(tmp_path, 'addrmap t { reg { field { sw = rw; hw = r; desc = "f"; } '
                            'F[0:0] = 0; } R @ 0; };')


def test_command_line(capsys):
    assert generator.main(["ma", "--json"]) == 0
    assert capsys.readouterr().out == \
        (generator.ROOT / "docs/ma/regmap.json").read_text(encoding="utf-8")
    assert generator.main(["--check"]) == 0
    with pytest.raises(SystemExit):
        generator.main([])
    result = subprocess.run([sys.executable, "-m", "sim.regmap", "ma", "--c"],
                            cwd=generator.ROOT, capture_output=True, text=True, check=True)
    assert result.stdout == (generator.ROOT / "docs/ma/regmap.h").read_text(encoding="utf-8")


def test_codes_rdl_is_up_to_date():
    committed = (generator.ROOT / generator.CODES_RDL).read_text(encoding="utf-8")
    fresh = generator.render_codes_rdl()
    assert committed == fresh, (f"{generator.CODES_RDL} is stale: {FIX}\n"
                                + _diff(committed, fresh, generator.CODES_RDL))
    assert generator.generated_files()[generator.CODES_RDL] == fresh


# The fields that hold a code of spec.codes, and the enumeration each one must name.
ENCODED = {"ID.BLOCK": "BlockId", "ERROR.CODE": "ErrorCode"}
BLOCK_ENCODED = {"ma": {"MODE.MODE": "MaMode"}, "va": {"OPCODE.OP": "VaOpcode"}}


@pytest.mark.parametrize("block", generator.blocks())
def test_fields_carry_the_codes(block):
    """The encoded fields name their spec.codes class, the model's enumerations are that
    class member for member, and the C header defines each value under the field."""
    from spec import codes
    model = generator.build_model(block)
    encoded = {f"{register['name']}.{field['name']}": field["encode"]
               for register in model["registers"] for field in register["fields"]
               if field["encode"] is not None}
    assert encoded == {**ENCODED, **BLOCK_ENCODED.get(block, {})}
    assert set(model["enums"]) == set(encoded.values())
    header = (generator.ROOT / f"{generator.docs_dir(block)}/regmap.h").read_text()
    markdown = (generator.ROOT / f"{generator.docs_dir(block)}/regmap.md").read_text()
    for name, members in model["enums"].items():
        enum = getattr(codes, name)
        assert [(member["name"], member["value"]) for member in members] \
            == [(member.name, member.value) for member in enum]
        assert f"### {name}" in markdown
    for path, name in encoded.items():
        register, field = path.split(".")
        for member in getattr(codes, name):
            assert f"#define {block.upper()}__{register}__{field}__{member.name} " \
                   f"{member.value:#x}\n" in header


def test_a_foreign_encoding_is_refused(tmp_path):
    with pytest.raises(generator.RegmapError, match="not an enumeration of spec.codes"):
        _model_of(tmp_path, 'enum Colour { RED = 0; }; addrmap t { reg { desc = "r"; '
                            'field { sw = rw; hw = r; desc = "f"; encode = Colour; } '
                            'F[1:0] = 0; } R @ 0; };')
    with pytest.raises(generator.RegmapError, match="does not fit in 2 bits"):
        _model_of(tmp_path, 'enum ErrorCode { NONE = 0; AXI_WRITE_ERROR = 3; }; addrmap t '
                            '{ reg { desc = "r"; field { sw = rw; hw = r; desc = "f"; '
                            'encode = ErrorCode; } F[1:0] = 0; } R @ 0; };')


@pytest.mark.parametrize("block", generator.blocks())
def test_c_registers_are_volatile(block):
    header = (generator.ROOT / f"{generator.docs_dir(block)}/regmap.h").read_text()
    members = [line.strip() for line in header.splitlines()
               if line.startswith("    ") and line.rstrip().endswith(";")
               and "RESERVED_" not in line and "uint" in line]
    assert members and all(line.startswith("volatile uint32_t ") for line in members), members


def _caps_fields(name):
    caps = next(register for register in generator.build_model(name)["registers"]
                if register["name"] == "CAPS")
    return [(field["name"], field["lsb"], field["width"], field["access"])
            for field in caps["fields"]]


@pytest.mark.parametrize("name", sorted(registry()))
def test_caps_fields_are_the_descriptors_layout(name):
    """CAPS in the RDL (so in the C header, the Markdown, the JSON) has the fields of
    ``sim.blocks``' ``caps_layout``, bit for bit, and the default build's CAPS word sets
    no bit outside them."""
    block = descriptor(name)
    fields = _caps_fields(name)
    assert fields == sorted(((field.name, field.lsb, field.width, "RO")
                             for field in block.caps_layout), key=lambda f: f[1])
    word = block.caps(block.defaults)
    assert word and block.encode_caps(block.decode_caps(word)) == word
    held = sum(((1 << width) - 1) << lsb for _, lsb, width, _ in fields)
    assert word & ~held == 0


def _unit_caps():
    """The CAPS words of the tile's units with maps of their own, at the tile's build and
    at the extremes of their parameters, with the field values each must read."""
    from hdl.tile import migrate, sequencer
    from spec import sequencer as fmt
    for data_width, burst, outstanding in ((64, 1, 2), (128, 16, 4),
                                           (512, migrate.MAX_BURST, migrate.MAX_OUTSTANDING)):
        migrate.check_parameters(data_width, burst, outstanding)
        yield "migrate", migrate.caps_word(data_width, burst, outstanding), {
            "MAX_OUTSTANDING": outstanding, "BUS_BYTES": data_width // 8, "MAX_BURST": burst}
    for data_width, targets, deps in ((64, [1], 1), (128, [1, 2, 3, 4], 4),
                                      (512, list(range(16)), fmt.MAX_NDEPS)):
        yield "sequencer", sequencer.caps_word(data_width, targets, deps), {
            "TARGETS": sum(1 << t for t in targets), "BUS_BYTES": data_width // 8,
            "MAX_DEPS": deps, "FORMAT": fmt.VERSION}


@pytest.mark.parametrize("name, word, values", list(_unit_caps()),
                         ids=lambda v: v if isinstance(v, str) else None)
def test_unit_caps_fields_decode_their_word(name, word, values):
    """The cache-migrate engine's and the sequencer's CAPS fields cut their ``caps_word``
    into its parameters, and no bit of the word lies outside the fields."""
    fields = _caps_fields(name)
    assert all(access == "RO" for *_, access in fields)
    held = sum(((1 << width) - 1) << lsb for _, lsb, width, _ in fields)
    assert word & ~held == 0, f"{name} CAPS 0x{word:08X}: bits outside its fields"
    assert {field: word >> lsb & (1 << width) - 1 for field, lsb, width, _ in fields} == values


def test_caps_fields_reach_the_c_header():
    header = (generator.ROOT / "docs/ma/regmap.h").read_text()
    for field in descriptor("ma").caps_layout:
        mask = ((1 << field.width) - 1) << field.lsb
        assert f"#define MA__CAPS__{field.name}_bm {mask:#x}\n" in header
        assert f"#define MA__CAPS__{field.name}_bp {field.lsb}\n" in header


_IPXACT = {"ipxact": "http://www.accellera.org/XMLSchema/IPXACT/1685-2014"}


def _number(text):
    """An IP-XACT number: ``'h2018`` or decimal."""
    return int(text[2:], 16) if text.startswith("'h") else int(text)


def _ipxact_registers(block_element, base=0, prefix=(), indices=()):
    """``{name: (offset, [(field, lsb, width)])}`` of an address block or register file,
    arrays (``dim``) unrolled and named as the model names them (``TAT_LOGIC_2``)."""
    registers = {}
    for element in block_element:
        tag = element.tag.rpartition("}")[2]
        if tag not in ("register", "registerFile"):
            continue
        name = element.findtext("ipxact:name", namespaces=_IPXACT)
        offset = base + _number(element.findtext("ipxact:addressOffset", namespaces=_IPXACT))
        dims = [int(dim.text) for dim in element.findall("ipxact:dim", _IPXACT)] or [None]
        assert len(dims) == 1, f"{name}: one array dimension at most"
        stride = (_number(element.findtext("ipxact:range", namespaces=_IPXACT))
                  if tag == "registerFile" else 4)
        for index in range(dims[0] or 1):
            where = offset + index * stride
            more = indices if dims[0] is None else (*indices, index)
            if tag == "registerFile":
                registers.update(_ipxact_registers(element, where, (*prefix, name), more))
                continue
            fields = [(field.findtext("ipxact:name", namespaces=_IPXACT),
                       int(field.findtext("ipxact:bitOffset", namespaces=_IPXACT)),
                       int(field.findtext("ipxact:bitWidth", namespaces=_IPXACT)))
                      for field in element.findall("ipxact:field", _IPXACT)]
            full = "_".join([*prefix, name, *(str(i) for i in more)])
            assert full not in registers, f"two registers are named {full}"
            registers[full] = (where, sorted(fields, key=lambda field: field[1]))
    return registers


@pytest.mark.parametrize("block", generator.blocks())
def test_ipxact_names_every_register(block):
    """docs/<block>/regmap.xml parses as XML, is an IP-XACT 1685-2014 component of the
    block, and holds every register of the model at its offset with its fields' bits."""
    model = generator.build_model(block)
    root = ElementTree.parse(generator.ROOT / f"{generator.docs_dir(block)}/regmap.xml") \
        .getroot()
    assert root.tag == f"{{{_IPXACT['ipxact']}}}component"
    assert root.findtext("ipxact:name", namespaces=_IPXACT) == block
    blocks = root.findall("ipxact:memoryMaps/ipxact:memoryMap/ipxact:addressBlock", _IPXACT)
    assert len(blocks) == 1
    assert _ipxact_registers(blocks[0]) == {
        register["name"]: (register["offset"],
                           [(field["name"], field["lsb"], field["width"])
                            for field in register["fields"]])
        for register in model["registers"]}

