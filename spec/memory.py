"""Limits of the memory system every block shares: physical addresses and AXI pages."""

__all__ = ["PHYS_ADDR_BITS", "ADDRESS_LIMIT", "PAGE_BYTES", "TAT_MAX_SIZE", "tat_region_size"]

PHYS_ADDR_BITS = 48                  # physical byte addresses on m_axi_gmem
ADDRESS_LIMIT = 1 << PHYS_ADDR_BITS  # no access may reach or pass this byte address
PAGE_BYTES = 4096                    # an AXI burst never crosses a 4 KiB boundary
TAT_MAX_SIZE = 19                    # a TAT region is PAGE_BYTES << SIZE, at most 2 GiB


def tat_region_size(nbytes):
    """The SIZE of the smallest TAT region (``PAGE_BYTES << SIZE``) holding ``nbytes``."""
    size = 0
    while PAGE_BYTES << size < nbytes:
        size += 1
    if size > TAT_MAX_SIZE:
        raise ValueError(f"{nbytes} bytes need a TAT region beyond SIZE {TAT_MAX_SIZE}")
    return size
