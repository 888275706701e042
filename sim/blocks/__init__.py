"""One descriptor per block, collected from the modules of this package (a plug-in registry).

Each module of ``sim.blocks`` describes one block in a module-level ``DESCRIPTOR`` (a
:class:`Block`): its Verilog module name, its parameters with their defaults and their
check, the layout of its CAPS register, its GTKWave groups, its testbench class, the
parameters of the synthesis smoke. The command line (``sim.cli``), the runner, the waves
tool and the FPGA flow read :func:`registry`; nothing else lists the blocks. A new block
(the tile) adds a module here and edits no table.

The testbench class and the GTKWave groups are named by dotted path
(``"package.module:attribute"``) and loaded on use, so that the testbench code can move
without this package importing cocotb, and so that listing the blocks imports neither
Amaranth nor the benches.
"""

import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType

__all__ = ["Param", "CapsField", "Block", "registry", "descriptor", "load"]


@dataclass(frozen=True)
class Param:
    """A block parameter: its name on the command line, its default and what it means."""
    name: str
    default: int
    doc: str


@dataclass(frozen=True)
class CapsField:
    """Bits ``lsb .. lsb + width - 1`` of the block's CAPS register."""
    name: str
    lsb: int
    width: int
    doc: str
    param: str | None = None     # the parameter it reports (modulo 2**width), if one


def load(path):
    """The object that ``"package.module:attribute"`` names (imported now)."""
    module, sep, attribute = path.partition(":")
    if not sep or not module or not attribute:
        raise ValueError(f"a dotted path is 'package.module:attribute', not {path!r}")
    value = importlib.import_module(module)
    for name in attribute.split("."):
        value = getattr(value, name)
    return value


@dataclass(frozen=True)
class Block:
    """What the tools know of one block.

    ``check(params)`` raises ``ValueError``/``TypeError`` for parameters the block refuses
    (``params``: every parameter by name); ``top(params)`` builds the standalone top after
    the check passed; ``caps(params)`` is the CAPS word the top reads back (the hardware's
    own function). ``bench`` and ``gtkw_groups`` are dotted paths (see :func:`load`).
    ``smoke_params`` override the defaults for the fast synthesis smoke;
    ``board_defaults`` override them on a board (``{board: {NAME: value}}``).
    """
    name: str
    verilog_name: str
    summary: str
    params: tuple
    check: object
    top: object
    caps_layout: tuple
    caps: object
    bench: str
    gtkw_groups: str
    smoke_params: dict = field(default_factory=dict)
    board_defaults: dict = field(default_factory=dict)

    def __post_init__(self):
        names = [param.name for param in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: a parameter is listed twice in {names}")
        for overrides in (self.smoke_params, *self.board_defaults.values()):
            unknown = sorted(set(overrides) - set(names))
            if unknown:
                raise ValueError(f"{self.name}: unknown parameters {unknown}")
        bits = 0
        for caps_field in self.caps_layout:
            mask = ((1 << caps_field.width) - 1) << caps_field.lsb
            if bits & mask or caps_field.lsb + caps_field.width > 32:
                raise ValueError(f"{self.name}: CAPS field {caps_field.name} overlaps "
                                 "another or leaves the 32-bit word")
            bits |= mask
        object.__setattr__(self, "smoke_params", MappingProxyType(dict(self.smoke_params)))
        object.__setattr__(self, "board_defaults", MappingProxyType(
            {board: MappingProxyType(dict(v)) for board, v in self.board_defaults.items()}))

    @property
    def defaults(self):
        """``{NAME: default}`` of every parameter."""
        return {param.name: param.default for param in self.params}

    def params_for(self, board=None, *, smoke=False):
        """The defaults, with the board's (or the smoke's) overrides."""
        return {**self.defaults, **(self.smoke_params if smoke else {}),
                **self.board_defaults.get(board, {})}

    def elaborate(self, params):
        """The standalone top for ``params`` (checked first: a refused top is never built,
        so Amaranth does not warn of an Elaboratable created and never used)."""
        self.check(params)
        return self.top(params)

    def decode_caps(self, word):
        """``{field name: value}`` of a CAPS word."""
        return {f.name: word >> f.lsb & ((1 << f.width) - 1) for f in self.caps_layout}

    def encode_caps(self, values):
        """The CAPS word with ``values`` (``{field name: value}``) in their fields."""
        word = 0
        for f in self.caps_layout:
            value = values[f.name]
            if not 0 <= value < 1 << f.width:
                raise ValueError(f"CAPS field {f.name} holds {f.width} bits, not {value}")
            word |= value << f.lsb
        return word

    def bench_class(self):
        return load(self.bench)

    def load_gtkw_groups(self):
        return load(self.gtkw_groups)


@cache
def _collect():
    blocks = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        block = getattr(module, "DESCRIPTOR", None)
        if block is None:
            continue
        if not isinstance(block, Block):
            raise TypeError(f"{module.__name__}.DESCRIPTOR is not a sim.blocks.Block")
        if block.name in blocks:
            raise ValueError(f"block {block.name!r} is described twice "
                             f"({module.__name__} and another module)")
        blocks[block.name] = block
    return MappingProxyType(blocks)


def registry():
    """``{block name: Block}`` of every module of this package, by name."""
    return _collect()


def descriptor(name):
    """The :class:`Block` named ``name``; ``KeyError`` names the known blocks."""
    blocks = registry()
    if name not in blocks:
        raise KeyError(f"unknown block {name!r} (known: {', '.join(blocks)})")
    return blocks[name]
