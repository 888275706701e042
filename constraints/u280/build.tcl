# Vivado non-project flow for one v4hw standalone top on the Alveo U280 part:
# read the Verilog, synthesize out of context, place, route, report timing and
# utilization, write a checkpoint. Vivado is not available on the machines this
# repository is developed on: this script is checked only against a stub of the Vivado
# commands it calls (tests/test_fpga_constraints.py), never run by Vivado itself.
#
#   v4hw verilog ma -o build/u280/v4hw_ma.v
#   vivado -mode batch -source constraints/u280/build.tcl \
#       -tclargs build/u280/v4hw_ma.v v4hw_ma build/u280
#
# Arguments: the Verilog file, its top module, an output directory. Exit status 1 when
# the design does not meet timing (worst negative slack below 0), 2 on bad arguments.

if {[llength $argv] != 3} {
    puts stderr "usage: vivado -mode batch -source build.tcl -tclargs VERILOG TOP OUT_DIR"
    exit 2
}
lassign $argv verilog top out_dir
if {![file isfile $verilog]} {
    puts stderr "build.tcl: no such Verilog file: $verilog"
    exit 2
}

set part xcu280-fsvh2892-2L-e
set here [file dirname [file normalize [info script]]]
file mkdir $out_dir

read_verilog $verilog
read_xdc -mode out_of_context [file join $here v4hw_kernel.xdc]

synth_design -top $top -part $part -mode out_of_context
report_utilization -file [file join $out_dir ${top}_synth_utilization.rpt]

opt_design
place_design
phys_opt_design
route_design

report_timing_summary -max_paths 20 -file [file join $out_dir ${top}_timing.rpt]
report_utilization -file [file join $out_dir ${top}_utilization.rpt]
write_checkpoint -force [file join $out_dir ${top}_routed.dcp]

set wns [get_property SLACK [get_timing_paths -max_paths 1 -nworst 1 -setup]]
puts "build.tcl: $top on $part, worst negative slack $wns ns"
if {$wns < 0} {
    puts stderr "build.tcl: timing not met"
    exit 1
}
exit 0
