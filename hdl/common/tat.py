"""Tile address translation (TAT): logical → physical through a few region entries."""

from amaranth.hdl import Cat, Const, Signal
from amaranth.lib import data

from spec.memory import TAT_MAX_SIZE

__all__ = ["LOGICAL_BITS", "MAX_SIZE", "TAT_ENTRIES", "TatEntryLayout", "TatTableLayout",
           "tat_entry_ok", "tat_masks", "tat_covers", "tat_select", "tat_translate"]

LOGICAL_BITS = 32   # logical addresses are register values: 32 bits
MAX_SIZE = TAT_MAX_SIZE    # region = 4 KiB << SIZE, at most 2 GiB (spec.memory)
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


def tat_masks(m, entries, name="tat"):
    """The page masks of ``entries`` (see ``_page_mask``), registered: for a table that
    stays put while it is used (a command's copy), so they lag it by one cycle."""
    masks = []
    for index, entry in enumerate(entries):
        mask = Signal(LOGICAL_BITS - PAGE_BITS, name=f"{name}_mask{index}")
        m.d.sync += mask.eq(_page_mask(entry.size))
        masks.append(mask)
    return masks


def tat_covers(m, entries, address, masks=None, name="tat"):
    """Per entry (bit ``i`` for entry ``i``): whether it is valid and covers ``address``
    (a logical byte address of any width; one at or above 2**32 is covered by none).
    ``masks``: the entries' page masks, e.g. from :func:`tat_masks`. Combinational."""
    page = address[PAGE_BITS:]
    in_range = address[LOGICAL_BITS:] == 0 if len(address) > LOGICAL_BITS else Const(1)
    covers = Signal(len(entries), name=f"{name}_covers")
    for index, entry in enumerate(entries):
        mask = _page_mask(entry.size) if masks is None else masks[index]
        m.d.comb += covers[index].eq(entry.valid & in_range & (
            ((page[:LOGICAL_BITS - PAGE_BITS] ^ entry.logical_page) & ~mask) == 0))
    return covers


def tat_select(m, entries, covers, address, masks=None, name="tat"):
    """``(hit, physical)`` of ``address`` from the entries that cover it (``covers``, as
    :func:`tat_covers` gives it, possibly registered while ``address`` and the table stay
    put): the lowest-index covering entry wins. Combinational."""
    page = address[PAGE_BITS:]
    hit = Signal(name=f"{name}_hit")
    physical = Signal(48, name=f"{name}_phys")
    m.d.comb += hit.eq(covers.any())
    for index in reversed(range(len(entries))):   # the lowest index is assigned last: wins
        entry = entries[index]
        mask = _page_mask(entry.size) if masks is None else masks[index]
        with m.If(covers[index]):
            m.d.comb += physical.eq(Cat(address[:PAGE_BITS],
                                        entry.physical_page
                                        | (page[:LOGICAL_BITS - PAGE_BITS] & mask)))
    return hit, physical


def tat_translate(m, entries, address, name="tat"):
    """Translate ``address`` (a logical byte address of any width) through ``entries``.

    Returns ``(hit, physical)``: the lowest-index valid entry covering the address wins;
    an address at or above 2**32 is covered by no entry. Combinational.
    """
    covers = tat_covers(m, entries, address, name=name)
    return tat_select(m, entries, covers, address, name=name)
