# A stub of the Vivado commands that build.tcl calls, for checking the script with a
# plain tclsh (Vivado is not available here). Each command checks its arguments the way
# Vivado would refuse them (unknown options, missing files) and appends one line to the
# list `::calls`; the test prints that list and compares it with the expected flow.
#
#   tclsh vivado_stub.tcl SLACK build.tcl VERILOG TOP OUT_DIR
#
# SLACK is the worst slack get_property returns, so both exits of the script are tested.

set ::calls {}

proc stub_check {command args allowed} {
    for {set i 0} {$i < [llength $args]} {incr i} {
        set word [lindex $args $i]
        if {[string match -* $word]} {
            if {![dict exists $allowed $word]} {
                error "$command: unknown option $word"
            }
            incr i [dict get $allowed $word]
        }
    }
    lappend ::calls [concat $command $args]
}

proc read_verilog {args} {
    stub_check read_verilog $args {-sv 0 -library 1}
    set file [lindex $args end]
    if {![file isfile $file]} { error "read_verilog: no such file $file" }
}
proc read_xdc {args} {
    stub_check read_xdc $args {-mode 1 -ref 1 -unmanaged 0}
    set file [lindex $args end]
    if {![file isfile $file]} { error "read_xdc: no such file $file" }
}
proc synth_design {args} {
    stub_check synth_design $args {-top 1 -part 1 -mode 1 -flatten_hierarchy 1 -directive 1}
    if {[lsearch $args -top] < 0 || [lsearch $args -part] < 0} {
        error "synth_design: -top and -part are required in a non-project run"
    }
}
foreach command {opt_design place_design phys_opt_design route_design} {
    proc $command {args} "stub_check $command \$args {-directive 1}"
}
proc report_utilization {args} {
    stub_check report_utilization $args {-file 1 -hierarchical 0}
    close [open [lindex $args [expr {[lsearch $args -file] + 1}]] w]
}
proc report_timing_summary {args} {
    stub_check report_timing_summary $args {-file 1 -max_paths 1 -delay_type 1}
    close [open [lindex $args [expr {[lsearch $args -file] + 1}]] w]
}
proc write_checkpoint {args} {
    stub_check write_checkpoint $args {-force 0}
    close [open [lindex $args end] w]
}
proc get_timing_paths {args} {
    stub_check get_timing_paths $args {-max_paths 1 -nworst 1 -setup 0 -hold 0}
    return path0
}
proc get_property {name object} {
    lappend ::calls [list get_property $name $object]
    if {$name ne "SLACK" || $object ne "path0"} { error "get_property: unexpected $name $object" }
    return $::stub_slack
}
rename exit tcl_exit
proc exit {{status 0}} {
    puts "CALLS"
    foreach call $::calls { puts $call }
    puts "EXIT $status"
    tcl_exit 0
}

lassign $argv ::stub_slack script
set argv [lrange $argv 2 end]
set argc [llength $argv]
set ::argv0 $script
source $script
exit 0
