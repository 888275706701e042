# Timing constraints of a v4hw standalone top (v4hw_ma, ...) as an RTL kernel on the
# Alveo U280, for an out-of-context run of build.tcl. The port names are the ones every
# standalone top has (docs/design.md: ap_clk, ap_rst_n, s_axi_control_*, m_axi_gmem_*,
# interrupt); tests/test_fpga_constraints.py checks that each pattern below matches ports
# of every block's generated Verilog.
#
# Kernel clock: 300 MHz, the U280 shell's default kernel clock (Vitis may run it slower
# when the kernel does not close timing there). Inside the shell the AXI ports connect to
# interconnect registers; 30 % of the period is left to that side.

create_clock -period 3.333 -name ap_clk [get_ports ap_clk]

# ap_rst_n is synchronous to ap_clk (the Vitis RTL-kernel convention) and active low.
set_input_delay -clock ap_clk 1.000 [get_ports ap_rst_n]

set_input_delay  -clock ap_clk 1.000 [get_ports -filter {DIRECTION == IN} s_axi_control_*]
set_output_delay -clock ap_clk 1.000 [get_ports -filter {DIRECTION == OUT} s_axi_control_*]
set_input_delay  -clock ap_clk 1.000 [get_ports -filter {DIRECTION == IN} m_axi_gmem_*]
set_output_delay -clock ap_clk 1.000 [get_ports -filter {DIRECTION == OUT} m_axi_gmem_*]
set_output_delay -clock ap_clk 1.000 [get_ports interrupt]
