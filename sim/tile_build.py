"""The tests' tile as a Verilator build: its Verilog, top name, build name and options.

The tile's tests (``tests/test_tile_*_cocotb.py``) and ``v4hw demo`` run the same small
tile (``hdl.tile.top.SMALL``) from these, so they share one build; an installed ``v4hw``
imports them without the repository's ``tests`` package on its path.
"""

from amaranth.back import verilog as amaranth_verilog

from hdl.tile.top import SMALL, TileTop
from sim.verilog_cache import disk_cached

__all__ = ["TOPLEVEL", "CONFIG_NAME", "VERILATOR", "LINT_WAIVERS", "tile_verilog"]

TOPLEVEL = "v4hw_tile"
CONFIG_NAME = "tile-p4-l8-dw128"
VERILATOR = dict(verilator_public="top", verilator_opt="-O1")
LINT_WAIVERS = ("/* verilator lint_off ASCRANGE */ /* verilator lint_off ALWNEVER */ "
                "/* verilator lint_off UNSIGNED */\n")
"""Verilator warnings the tile's Verilog gives and no standalone top does, waived for
this file only (a change of ``sim/waivers.vlt`` would rebuild every configuration):
ASCRANGE, a ``[-1:0]`` vector for the 0-bit ``take`` port of the memory NI's
``CreditSender``s (``max_take=0``); ALWNEVER, an ``always @*`` that only assigns the
constant VC bit of the NIs' flits; UNSIGNED, a window compare of the mesh's reservation
slots (waived when the tile's one slot was constant; kept since its RBR arbiter drives
them)."""


@disk_cached
def tile_verilog():
    """Verilog of the small tile, generated once (without ``src`` attributes, so an edit
    elsewhere in a Python file does not change the text and force a rebuild)."""
    return LINT_WAIVERS + amaranth_verilog.convert(TileTop(**SMALL), name=TOPLEVEL,
                                                   emit_src=False)
