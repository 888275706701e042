"""Register maps: from each block's SystemRDL to its generated data and docs.

Every block ``B`` with a ``hdl/B/B.rdl`` gets

=========================  ==========================================================
``hdl/B/regmap.py``        plain data read by ``hdl.common.regblock.RegisterBlock`` and
                           by the testbench helper ``sim.regs.Registers``
``docs/B/regmap.md``       Markdown (PeakRDL-markdown)
``docs/B/regmap.h``        C header (PeakRDL-cheader)
``docs/B/regmap.json``     JSON export of the same data as ``regmap.py``
``docs/B/regmap.html``     one self-contained HTML page (ours; see :func:`render_html`)
``docs/B/regmap.xml``      IP-XACT (IEEE 1685-2014) component (PeakRDL-ipxact)
=========================  ==========================================================

A unit inside a block's package with a map of its own (:data:`UNIT_MAPS`: the tile's
cache-migrate engine) has ``hdl/P/U.rdl`` and gets ``hdl/P/U_regmap.py`` and
``docs/P/U/regmap.*``.

All outputs are deterministic and committed; ``tests/test_generated.py`` fails when one
is stale. Command line (``v4hw regmap`` or ``python -m sim.regmap``)::

    v4hw regmap BLOCK [--md | --c | --json | --html | --xml | --python]   # print one
    v4hw regmap --update [BLOCK]                                  # rewrite committed files
    v4hw regmap --check                                           # exit 1 if any is stale

The RDL field semantics this flow supports, and the access code each one gets:

====  ================================================  ==================================
code  SystemRDL                                         meaning
====  ================================================  ==================================
RW    ``sw = rw; hw = r;``                              storage the core reads
RO    ``sw = r; hw = w;``                               a value the core drives
RC    ``sw = r; hw = w; rclr;``                         the core drives it and clears it
                                                        when the register is read
W1C   ``sw = rw; hw = r; woclr; hwset;``                set by the core, writing 1 clears
WO    ``sw = w; hw = r; singlepulse;``                  a one-cycle pulse per written 1
====  ================================================  ==================================

A register whose fields include an RC field, or that sets the user-defined property
``v4hw_read_strobe`` (declared in ``hdl/common/common.rdl``), has ``read_strobe``: the
register block tells the core, with a one-cycle strobe, that software has read it.
Anything else is refused with :class:`RegmapError`.
"""

import argparse
import html
import inspect
import json
import re
import sys
import tempfile
from enum import IntEnum
from pathlib import Path

from systemrdl import RDLCompiler
from systemrdl.node import RegNode
from systemrdl.rdltypes import AccessType, OnReadType, OnWriteType

__all__ = ["RegmapError", "ROOT", "FORMATS", "UNIT_MAPS", "CODES_RDL", "code_enums",
           "render_codes_rdl", "blocks", "rdl_source",
           "module_name", "module_path", "docs_dir", "compile_block", "build_model",
           "render_python", "render_json", "render_markdown", "render_c", "render_html",
           "render_ipxact", "render", "extensions", "generated_files",
           "stale_files", "update", "main"]

ROOT = Path(__file__).resolve().parent.parent

ADDR_WIDTH = 16  # s_axi_control byte address (docs/design.md, "Control")
DATA_WIDTH = 32

# Access code: (sw, hw, onread, onwrite, singlepulse, hwset) of its fields.
_ACCESS_CODES = {
    "RW": (AccessType.rw, AccessType.r, None, None, False, False),
    "RO": (AccessType.r, AccessType.w, None, None, False, False),
    "RC": (AccessType.r, AccessType.w, OnReadType.rclr, None, False, False),
    "W1C": (AccessType.rw, AccessType.r, None, OnWriteType.woclr, False, True),
    "WO": (AccessType.w, AccessType.r, None, None, True, False),
}

# Properties that would give a field behaviour the register block does not implement.
_UNSUPPORTED = ("hwclr", "swmod", "swacc", "counter", "intr", "we", "wel", "paritycheck")


class RegmapError(Exception):
    """A register description the v4hw register block cannot implement."""


# The SystemRDL enumerations, generated from spec.codes (included by common.rdl).
CODES_RDL = "hdl/common/codes.rdl"


def code_enums():
    """The ``IntEnum`` classes of ``spec.codes``, in its ``__all__`` order."""
    from spec import codes
    return [value for value in (getattr(codes, name) for name in codes.__all__)
            if isinstance(value, type) and issubclass(value, IntEnum)]


_MEMBER_COMMENT = re.compile(r"^\s+([A-Z][A-Z0-9_]*)\s*=\s*[^#]*#\s*(.*?)\s*$")


def _member_comments(enum):
    """``{member: its trailing comment in spec/codes.py}``, for the members that have one."""
    lines, _ = inspect.getsourcelines(enum)
    return {match[1]: match[2] for match in map(_MEMBER_COMMENT.match, lines) if match}


def _rdl_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_codes_rdl():
    """``hdl/common/codes.rdl``: one SystemRDL ``enum`` per ``IntEnum`` of ``spec.codes``,
    named as the Python class, so a field's ``encode = VaOpcode;`` carries the values
    into every generated file without writing them twice."""
    out = ["// SystemRDL enumerations of spec/codes.py, the numeric contract.\n",
           _generated_note({"source": "spec/codes.py"}, "// "),
           "// A field names one as its encoding: `encode = ErrorCode;`.\n"]
    for enum in code_enums():
        comments = _member_comments(enum)
        out.append(f"\nenum {enum.__name__} {{\n")
        for member in enum:
            desc = comments.get(member.name)
            props = f" {{ desc = {_rdl_string(desc)}; }}" if desc else ""
            out.append(f"    {member.name} = {member.value:#x}{props};\n")
        out.append("};\n")
    return "".join(out)


# Units with a register map of their own inside another block's package: name -> package.
UNIT_MAPS = {"migrate": "tile", "sequencer": "tile"}


def blocks():
    """Names of the blocks that have a register map (``hdl/<name>/<name>.rdl``) and of the
    :data:`UNIT_MAPS`, sorted.

    ``hdl/common/common.rdl`` is included by the blocks, not a block itself.
    """
    return sorted([path.parent.name for path in ROOT.glob("hdl/*/*.rdl")
                   if path.stem == path.parent.name != "common"] + list(UNIT_MAPS))


def _package(block):
    return UNIT_MAPS.get(block, block)


def rdl_source(block):
    """Path of the block's RDL source, relative to the repository root (a string)."""
    return f"hdl/{_package(block)}/{block}.rdl"


def module_name(block):
    """Dotted name of the generated register-map module (``hdl.ma.regmap``)."""
    return (f"hdl.{block}.regmap" if block not in UNIT_MAPS
            else f"hdl.{_package(block)}.{block}_regmap")


def module_path(block):
    """Path of the generated register-map module, relative to the repository root."""
    return module_name(block).replace(".", "/") + ".py"


def docs_dir(block):
    """Folder of the generated docs (``docs/ma``; ``docs/tile/migrate`` for a unit)."""
    return f"docs/{block}" if block not in UNIT_MAPS else f"docs/{_package(block)}/{block}"


def compile_block(block):
    """Compile and elaborate the block's RDL; returns the top ``AddrmapNode``."""
    compiler = RDLCompiler()
    compiler.compile_file(str(ROOT / rdl_source(block)))
    return compiler.elaborate(top_def_name=block).top


def _text(node):
    """The node's ``desc``, whitespace collapsed to single spaces."""
    desc = node.get_property("desc")
    if desc is None:
        raise RegmapError(f"{node.get_path()} has no desc")
    return " ".join(desc.split())


def _register_name(node, top):
    """``TAT[2].LOGIC`` -> ``TAT_LOGIC_2``: path below the top joined with ``_``, then
    the array indices in path order."""
    names, indices = [], []
    for segment in reversed(list(_ancestry(node, top))):
        names.append(segment.inst_name)
        indices.extend(segment.current_idx or ())
    return "_".join([*names, *(str(index) for index in indices)])


def _ancestry(node, top):
    while node.get_path() != top.get_path():
        yield node
        node = node.parent


def _field_access(field):
    sw, hw = field.get_property("sw"), field.get_property("hw")
    onread, onwrite = field.get_property("onread"), field.get_property("onwrite")
    pulse, hwset = field.get_property("singlepulse"), field.get_property("hwset")
    for prop in _UNSUPPORTED:
        if field.get_property(prop):
            raise RegmapError(f"{field.get_path()}: property {prop!r} is not supported")
    for code, pattern in _ACCESS_CODES.items():
        if (sw, hw, onread, onwrite, pulse, hwset) == pattern:
            return code
    raise RegmapError(
        f"{field.get_path()}: sw={sw.name} hw={hw.name} onread={onread} onwrite={onwrite} "
        f"singlepulse={pulse} hwset={hwset} is none of RW, RO, RC, W1C, WO")


def _field(field):
    access = _field_access(field)
    reset = field.get_property("reset")
    if reset is not None and not isinstance(reset, int):
        raise RegmapError(f"{field.get_path()}: reset must be a constant")
    if access in ("RW", "W1C", "WO") and reset is None:
        raise RegmapError(f"{field.get_path()}: a {access} field needs a reset value")
    encode = field.get_property("encode")
    if encode is not None:
        codes = {enum.__name__: enum for enum in code_enums()}
        if encode.type_name not in codes:
            raise RegmapError(f"{field.get_path()}: encode {encode.type_name} is not an "
                              f"enumeration of spec.codes ({CODES_RDL})")
        if max(codes[encode.type_name]) >> field.width:
            raise RegmapError(f"{field.get_path()}: {encode.type_name} does not fit in "
                              f"{field.width} bits")
    return {
        "name": field.inst_name,
        "lsb": field.lsb,
        "width": field.width,
        "access": access,
        "reset": reset,
        "encode": None if encode is None else encode.type_name,
        "description": _text(field),
    }


def _register(node, top):
    path = node.get_path()
    if node.get_property("regwidth") != DATA_WIDTH:
        raise RegmapError(f"{path}: registers are {DATA_WIDTH} bits wide")
    offset = node.absolute_address - top.absolute_address
    if offset % (DATA_WIDTH // 8) or offset >= 1 << ADDR_WIDTH:
        raise RegmapError(f"{path}: offset 0x{offset:X} is not an aligned "
                          f"{ADDR_WIDTH}-bit byte address")
    if node.external:
        raise RegmapError(f"{path}: external registers are not supported")
    fields = [_field(field) for field in node.fields()]
    accesses = sorted({field["access"] for field in fields})
    return {
        "name": _register_name(node, top),
        "offset": offset,
        "access": "/".join(accesses),
        "read_strobe": ("RC" in accesses or
                        bool(node.get_property("v4hw_read_strobe", default=False))),
        "description": _text(node),
        "fields": sorted(fields, key=lambda field: field["lsb"]),
    }


def build_model(block, top=None):
    """The block's register map as plain data (see the docstring of the generated module).

    Registers are in offset order; names must be unique and are upper case.
    """
    top = compile_block(block) if top is None else top
    registers = [_register(node, top)
                 for node in top.descendants(unroll=True) if isinstance(node, RegNode)]
    registers.sort(key=lambda register: register["offset"])
    seen = {}
    for register in registers:
        name = register["name"]
        if not name.isidentifier() or name != name.upper():
            raise RegmapError(f"Register name {name!r} is not an upper-case identifier")
        if name in seen:
            raise RegmapError(f"Two registers are named {name}")
        seen[name] = register
    used = {field["encode"] for register in registers for field in register["fields"]}
    return {
        "block": block,
        "title": top.get_property("name"),
        "source": rdl_source(block),
        "addr_width": ADDR_WIDTH,
        "data_width": DATA_WIDTH,
        "registers": registers,
        "enums": _enums([enum for enum in code_enums() if enum.__name__ in used]),
    }


def _enums(enums):
    """``{name: [{name, value, description}]}`` of the enumerations the fields use."""
    return {enum.__name__: [{"name": member.name, "value": member.value,
                             "description": _member_comments(enum).get(member.name, "")}
                            for member in enum]
            for enum in enums}


def _generated_note(model, comment):
    return f"{comment}Generated from {model['source']} by `v4hw regmap --update`; do not edit.\n"


def _q(text):
    """A double-quoted Python string literal (JSON's escapes are valid Python)."""
    return json.dumps(text)


def _py_string(text, indent, width=92):
    """``text`` as a Python literal, split into implicitly joined pieces to fit ``width``."""
    words = text.split(" ")
    lines, line = [], ""
    for word in words:
        candidate = f"{line} {word}" if line else word
        if line and len(_q(candidate)) + indent > width:
            lines.append(line + " ")
            line = word
        else:
            line = candidate
    lines.append(line)
    if len(lines) == 1:
        return _q(lines[0])
    pad = " " * (indent + 1)
    return "(" + f"\n{pad}".join(_q(piece) for piece in lines) + ")"


def _py_reset(value):
    return "None" if value is None else f"0x{value:X}"


def render_python(model):
    """The plain-data module committed as ``hdl/<block>/regmap.py``."""
    out = [
        f'"""Register map of the {model["title"]} ({model["block"]}).\n',
        "\n",
        _generated_note(model, ""),
        "\n",
        "REGISTERS lists the registers in offset order, each a dict with the keys\n",
        "  name         upper case; registers of an RDL array end in _<index> (TAT_LOGIC_0)\n",
        "  offset       byte offset on s_axi_control\n",
        "  access       the fields' access codes, '/'-joined when they differ\n",
        "  read_strobe  the register block strobes the core when software reads it\n",
        "  description  text\n",
        "  fields       tuple of dicts: name, lsb, width, access, reset, encode,\n",
        "               description; encode names the field's enumeration in ENUMS or is None\n",
        "Field access codes: RW storage the core reads; RO driven by the core; RC driven\n",
        "by the core, cleared by the core on the read strobe; W1C set by the core,\n",
        "cleared by writing 1; WO a one-cycle pulse per written 1, reads as 0.\n",
        "reset is None where the core drives the value.\n",
        "ENUMS maps the name of each enumeration the fields use (a class of spec.codes) to\n",
        "its members, a tuple of dicts: name, value, description.\n",
        '"""\n',
        "\n",
        f"BLOCK = {_q(model['block'])}\n",
        f"SOURCE = {_q(model['source'])}\n",
        f"ADDR_WIDTH = {model['addr_width']}\n",
        f"DATA_WIDTH = {model['data_width']}\n",
        "\n",
        "REGISTERS = (\n",
    ]
    for register in model["registers"]:
        out += [
            "    {\n",
            f"        \"name\": {_q(register['name'])},\n",
            f"        \"offset\": 0x{register['offset']:04X},\n",
            f"        \"access\": {_q(register['access'])},\n",
            f"        \"read_strobe\": {register['read_strobe']!r},\n",
            f"        \"description\": {_py_string(register['description'], 23)},\n",
            "        \"fields\": (\n",
        ]
        for field in register["fields"]:
            out += [
                f"            {{\"name\": {_q(field['name'])}, \"lsb\": {field['lsb']}, "
                f"\"width\": {field['width']}, \"access\": {_q(field['access'])}, "
                f"\"reset\": {_py_reset(field['reset'])}, \"encode\": "
                f"{'None' if field['encode'] is None else _q(field['encode'])},\n",
                f"             \"description\": "
                f"{_py_string(field['description'], 28)}}},\n",
            ]
        out += ["        ),\n", "    },\n"]
    out += [")\n", "\n", "ENUMS = {\n"]
    for name, members in model["enums"].items():
        out.append(f"    {_q(name)}: (\n")
        for member in members:
            head = (f"        {{\"name\": {_q(member['name'])}, \"value\": {member['value']:#x}, "
                    f"\"description\":")
            one_line = f"{head} {_q(member['description'])}}},"
            out.append(f"{one_line}\n" if len(one_line) <= 92 else
                       f"{head}\n         {_py_string(member['description'], 9)}}},\n")
        out.append("    ),\n")
    out.append("}\n")
    return "".join(out)


def render_json(model):
    """JSON export: the model, registers in offset order, offsets and resets as numbers."""
    return json.dumps(model, indent=2) + "\n"


def render_markdown(model, top):
    """Markdown from PeakRDL-markdown, after a one-line note saying how it was made."""
    from peakrdl_markdown import MarkdownExporter
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "regmap.md"
        MarkdownExporter().export(top, str(path), input_files=[model["source"]])
        body = path.read_text(encoding="utf-8")
    return (_generated_note(model, "<!-- ").rstrip("\n") + " -->\n" + body
            + _markdown_enums(model))


def _encoded_fields(model):
    """``{enum name: ["REGISTER.FIELD", ...]}`` in register order."""
    users = {}
    for register in model["registers"]:
        for field in register["fields"]:
            if field["encode"] is not None:
                users.setdefault(field["encode"], []).append(
                    f"{register['name']}.{field['name']}")
    return users


def _markdown_enums(model):
    """The enumerations section PeakRDL-markdown 1.0 does not write."""
    users = _encoded_fields(model)
    out = ["\n## Enumerations\n\n"
           "Values of the fields with an encoding (the classes of `spec/codes.py`).\n"]
    for name, members in model["enums"].items():
        out.append(f"\n### {name}\n\nField{'s' if len(users[name]) > 1 else ''}: "
                   + ", ".join(users[name]) + ".\n\n|Value|Identifier|Description|\n"
                   "|-----|----------|-----------|\n")
        for member in members:
            out.append(f"|{member['value']:#x}|{member['name']}|"
                       f"{member['description'].replace('|', '&#124;')}|\n")
    return "".join(out)


def render_c(model, top):
    """C header from PeakRDL-cheader (hierarchical names: ``MA__MODE__ACCUMULATE_bm``)."""
    from peakrdl_cheader.exporter import CHeaderExporter
    with tempfile.TemporaryDirectory() as tmp:
        # The include guard comes from the file name: MA_REGMAP_H.
        path = Path(tmp) / f"{model['block']}_regmap.h"
        CHeaderExporter().export(top, str(path), reuse_typedefs=False)
        body = path.read_text(encoding="utf-8")
    return _generated_note(model, "// ") + _c_volatile(_c_enums(model, body))


def _c_enums(model, body):
    """After each encoded field's ``_bm``/``_bp``/``_bw`` (``_reset``) macros, one macro per
    value of its enumeration: ``VA__OPCODE__OP__GATHER``. PeakRDL-cheader 1.1 writes
    none (its enum support is an open pull request)."""
    block = model["block"].upper()
    lines = body.splitlines(keepends=True)
    for register in model["registers"]:
        for field in register["fields"]:
            if field["encode"] is None:
                continue
            prefix = f"{block}__{register['name']}__{field['name']}"
            ends = [index for index, line in enumerate(lines)
                    if line.startswith((f"#define {prefix}_bw ", f"#define {prefix}_reset "))]
            if not ends:
                raise RegmapError(f"{register['name']}.{field['name']}: no {prefix}_bw macro "
                                  "in the PeakRDL-cheader output")
            values = [f"// {prefix}: spec.codes.{field['encode']}\n"] + [
                f"#define {prefix}__{member['name']} {member['value']:#x}\n"
                for member in model["enums"][field["encode"]]]
            lines[ends[-1] + 1:ends[-1] + 1] = values
    return "".join(lines)


_C_MEMBER = re.compile(r"^(\s+)(uint(?:8|16|32|64)_t (?!RESERVED_)\w+(?:\[\w+\])*;)$",
                       re.MULTILINE)


def _c_volatile(body):
    """Every register member of the structs ``volatile``, so that a plain
    ``ma_t *ma = (ma_t *)BASE;`` reads and writes the device on every access."""
    return _C_MEMBER.sub(r"\1volatile \2", body)


_HTML_STYLE = """\
body { font-family: sans-serif; margin: 2em auto; max-width: 60em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #bbb; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
th { background: #eee; }
td.num { font-family: monospace; white-space: nowrap; }
h2 { border-bottom: 1px solid #bbb; margin-top: 2em; }
"""


def _bits(field):
    msb = field["lsb"] + field["width"] - 1
    return str(msb) if msb == field["lsb"] else f"{msb}:{field['lsb']}"


def render_html(model):
    """One self-contained HTML page, written from the model.

    PeakRDL-html writes a directory of about 8 MB of JavaScript, fonts and data per
    block, too big to commit for every block; this page carries the same information
    (plus the read strobes, which PeakRDL-html does not know) with no scripts.
    """
    esc = html.escape
    title = f"{model['title']} ({model['block']}) registers"
    out = [
        "<!DOCTYPE html>\n",
        _generated_note(model, "<!-- ").rstrip("\n") + " -->\n",
        "<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        f"<title>{esc(title)}</title>\n<style>\n{_HTML_STYLE}</style>\n</head>\n<body>\n",
        f"<h1>{esc(title)}</h1>\n",
        f"<p>AXI4-Lite, {model['data_width']}-bit data, {model['addr_width']}-bit byte "
        f"address decoded on bits {model['addr_width'] - 1}:2. Access at an offset with no register: SLVERR. "
        "Write to a read-only register: ignored. Read of a write-only register: 0. "
        "Access codes: RW read/write; RO read-only, driven by the core; RC read-only, "
        "cleared by reading; W1C write 1 to clear; WO write-only, a one-cycle pulse.</p>\n",
        "<table>\n<tr><th>Offset</th><th>Name</th><th>Access</th><th>Description</th></tr>\n",
    ]
    for register in model["registers"]:
        name = esc(register["name"])
        out.append(f"<tr><td class=\"num\">0x{register['offset']:04X}</td>"
                   f"<td><a href=\"#{name}\">{name}</a></td><td>{register['access']}</td>"
                   f"<td>{esc(register['description'])}</td></tr>\n")
    out.append("</table>\n")
    for register in model["registers"]:
        name = esc(register["name"])
        out.append(f"<h2 id=\"{name}\">0x{register['offset']:04X} {name}</h2>\n"
                   f"<p>{esc(register['description'])}</p>\n")
        if register["read_strobe"]:
            out.append("<p>Reading this register strobes the core (side effect).</p>\n")
        out.append("<table>\n<tr><th>Bits</th><th>Field</th><th>Access</th><th>Reset</th>"
                   "<th>Description</th></tr>\n")
        for field in register["fields"]:
            reset = "&mdash;" if field["reset"] is None else f"0x{field['reset']:X}"
            values = ("" if field["encode"] is None else
                      f" Values: <a href=\"#{esc(field['encode'])}\">{esc(field['encode'])}</a>.")
            out.append(f"<tr><td class=\"num\">{_bits(field)}</td><td>{esc(field['name'])}</td>"
                       f"<td>{field['access']}</td><td class=\"num\">{reset}</td>"
                       f"<td>{esc(field['description'])}{values}</td></tr>\n")
        out.append("</table>\n")
    users = _encoded_fields(model)
    for name, members in model["enums"].items():
        out.append(f"<h2 id=\"{esc(name)}\">Enumeration {esc(name)}</h2>\n"
                   f"<p>Values of {esc(', '.join(users[name]))} (spec/codes.py).</p>\n"
                   "<table>\n<tr><th>Value</th><th>Identifier</th><th>Description</th></tr>\n")
        for member in members:
            out.append(f"<tr><td class=\"num\">{member['value']:#x}</td>"
                       f"<td>{esc(member['name'])}</td>"
                       f"<td>{esc(member['description'])}</td></tr>\n")
        out.append("</table>\n")
    out.append("</body>\n</html>\n")
    return "".join(out)


def render_ipxact(model, top):
    """An IP-XACT (IEEE 1685-2014) component from PeakRDL-ipxact: one memory map, one
    address block, the registers with their fields, resets and enumerations (the TAT
    entries as a register file of ``dim`` 4)."""
    from peakrdl_ipxact import IPXACTExporter
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "regmap.xml"
        IPXACTExporter(vendor="v4hw", library="v4hw").export(top, str(path))
        body = path.read_text(encoding="utf-8")
    declaration, newline, rest = body.partition("\n")
    if not declaration.startswith("<?xml"):
        raise RegmapError("PeakRDL-ipxact wrote no XML declaration first")
    # An XML comment may not hold "--": the note names `make regmap`, not its option.
    note = f"<!-- Generated from {model['source']} by `make regmap`; do not edit. -->\n"
    return declaration + newline + note + rest


# Command-line flag: renderer(model, top).
FORMATS = {
    "md": render_markdown,
    "c": render_c,
    "json": lambda model, top: render_json(model),
    "html": lambda model, top: render_html(model),
    "xml": render_ipxact,
    "python": lambda model, top: render_python(model),
}


def extensions(block):
    """The extensions of the block's committed ``docs/.../regmap.*`` files."""
    return ("md", "h", "json", "html", "xml")


def render(block, fmt):
    """The block's register map in one of :data:`FORMATS`, as text."""
    top = compile_block(block)
    return FORMATS[fmt](build_model(block, top), top)


def generated_files(selected=None):
    """``{path relative to the repository root: text}`` of every committed generated file
    (:data:`CODES_RDL` too when no block is selected).

    The blocks are compiled from the committed ``codes.rdl``: :func:`update` writes it
    first."""
    files = {} if selected is not None else {CODES_RDL: render_codes_rdl()}
    for block in (blocks() if selected is None else selected):
        top = compile_block(block)
        model = build_model(block, top)
        docs = docs_dir(block)
        files[module_path(block)] = render_python(model)
        files[f"{docs}/regmap.md"] = render_markdown(model, top)
        files[f"{docs}/regmap.h"] = render_c(model, top)
        files[f"{docs}/regmap.json"] = render_json(model)
        files[f"{docs}/regmap.html"] = render_html(model)
        if "xml" in extensions(block):
            files[f"{docs}/regmap.xml"] = render_ipxact(model, top)
    return files


def stale_files(files=None):
    """Paths of committed generated files that differ from what the generator makes now."""
    files = generated_files() if files is None else files
    stale = []
    for path, text in files.items():
        committed = ROOT / path
        if not committed.is_file() or committed.read_text(encoding="utf-8") != text:
            stale.append(path)
    return stale


def update(selected=None):
    """Rewrite the committed generated files; returns the paths that changed."""
    codes = ROOT / CODES_RDL
    changed = [CODES_RDL] if stale_files({CODES_RDL: render_codes_rdl()}) else []
    if changed:
        codes.write_text(render_codes_rdl(), encoding="utf-8", newline="\n")
    files = generated_files(selected)
    files.pop(CODES_RDL, None)
    stale = stale_files(files)
    for path in stale:
        target = ROOT / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(files[path], encoding="utf-8", newline="\n")
    return changed + stale


def main(argv=None):
    """``v4hw regmap`` command line; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="v4hw regmap",
        description="Print a block's register map, or regenerate the committed register "
                    "maps and docs from the SystemRDL sources.")
    parser.add_argument("block", nargs="?", choices=blocks(),
                        help="block whose register map to print (or to --update)")
    action = parser.add_mutually_exclusive_group()
    for fmt in FORMATS:
        action.add_argument(f"--{fmt}", dest="format", action="store_const", const=fmt,
                            help=f"print the {fmt} rendering")
    action.add_argument("--update", action="store_true",
                        help="rewrite every committed generated file (or only BLOCK's)")
    action.add_argument("--check", action="store_true",
                        help="exit with status 1 if a committed generated file is stale")
    args = parser.parse_args(argv)

    if args.update:
        for path in update(None if args.block is None else [args.block]):
            print(f"updated {path}")
        return 0
    if args.check:
        stale = stale_files(generated_files(None if args.block is None else [args.block]))
        for path in stale:
            print(f"stale: {path}", file=sys.stderr)
        return 1 if stale else 0
    if args.block is None:
        parser.error("give a BLOCK to print, or --update / --check")
    sys.stdout.write(render(args.block, args.format or "md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
