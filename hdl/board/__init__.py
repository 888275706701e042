"""Board-level gateware: what wraps a standalone block on an FPGA board (UART bridge to
the control port, on-chip memory behind the memory port, clock and reset)."""
