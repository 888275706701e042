"""The memory controller (MC): client channels, arbitration, AXI path, prefetch."""
