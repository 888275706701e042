"""Limits of the memory system every block shares: physical addresses and AXI pages."""

__all__ = ["PHYS_ADDR_BITS", "ADDRESS_LIMIT", "PAGE_BYTES"]

PHYS_ADDR_BITS = 48                  # physical byte addresses on m_axi_gmem
ADDRESS_LIMIT = 1 << PHYS_ADDR_BITS  # no access may reach or pass this byte address
PAGE_BYTES = 4096                    # an AXI burst never crosses a 4 KiB boundary
