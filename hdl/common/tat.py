"""Tile address translation (TAT): logical → physical through a few region entries."""

from amaranth.hdl import Cat, Const, Signal
from amaranth.lib import data

__all__ = ["LOGICAL_BITS", "MAX_SIZE", "TAT_ENTRIES", "TatEntryLayout", "TatTableLayout",
           "tat_entry_ok", "tat_translate"]

LOGICAL_BITS = 32   # logical addresses are register values: 32 bits
MAX_SIZE = 19       # region = 4 KiB << SIZE, at most 2 GiB
PAGE_BITS = 12
TAT_ENTRIES = 4     # fully associative; where entries overlap the lowest index wins


class TatEntryLayout(data.StructLayout):
    """One entry: a naturally aligned logical region of 4 KiB << ``size`` mapped to a
    physical base aligned the same way. Bases are in 4 KiB pages."""
    def __init__(self):
        super().__init__({
            "valid": 1,
            "size": 5,
            "logical_page": LOGICAL_BITS - PAGE_BITS,   # logical base bits 31:12
            "physical_page": 48 - PAGE_BITS,            # physical base bits 47:12
        })


class TatTableLayout(data.ArrayLayout):
    """The whole table: ``TAT_ENTRIES`` entries, index 0 first."""
    def __init__(self):
        super().__init__(TatEntryLayout(), TAT_ENTRIES)


def _page_mask(size):
    """Mask of the page-number bits inside a region of 4 KiB << ``size``: bit n is set
    when n < size (all 20 bits for the refused sizes above 19)."""
    return Cat(*(size > n for n in range(LOGICAL_BITS - PAGE_BITS)))


def tat_entry_ok(entry):
    """True when an entry may be used: invalid, or SIZE <= 19 with both bases aligned."""
    mask = _page_mask(entry.size)
    aligned = ((entry.logical_page & mask) == 0) & ((entry.physical_page & mask) == 0)
    return ~entry.valid | ((entry.size <= MAX_SIZE) & aligned)


def tat_translate(m, entries, address, name="tat"):
    """Translate ``address`` (a logical byte address of any width) through ``entries``.

    Returns ``(hit, physical)``: the lowest-index valid entry covering the address wins;
    an address at or above 2**32 is covered by no entry. Combinational.
    """
    page = address[PAGE_BITS:]
    in_range = address[LOGICAL_BITS:] == 0 if len(address) > LOGICAL_BITS else Const(1)
    hit = Signal(name=f"{name}_hit")
    physical = Signal(48, name=f"{name}_phys")
    for index in reversed(range(len(entries))):   # the lowest index is assigned last: wins
        entry = entries[index]
        mask = _page_mask(entry.size)
        covers = entry.valid & in_range & (
            (page[:LOGICAL_BITS - PAGE_BITS] & ~mask) == (entry.logical_page & ~mask))
        with m.If(covers):
            m.d.comb += [
                hit.eq(1),
                physical.eq(Cat(address[:PAGE_BITS],
                                entry.physical_page | (page[:LOGICAL_BITS - PAGE_BITS] & mask))),
            ]
    return hit, physical
