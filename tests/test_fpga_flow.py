"""The FPGA flow's fast tier: a yosys synthesis smoke per block, the ULX3S LPF in use,
and the command line's refusals. Place and route is not run here (minutes to an hour):
``make fpga`` does it.
"""

from pathlib import Path

import pytest

from hdl.top.ma import MaTop
from sim import fpga
from sim.blocks import registry
from sim.cli import main
from tests.test_fpga_constraints import smoke_verilog

REPO = Path(__file__).resolve().parent.parent


# Each descriptor's smoke parameters (the smallest of the block) keep the smoke at tens
# of seconds; a block without them is checked at its defaults.
@pytest.mark.parametrize("block", sorted(registry()))
def test_synthesis_smoke(block, tmp_path):
    cells = fpga.check_synthesizable(smoke_verilog(block), registry()[block].verilog_name,
                                     tmp_path)
    assert cells > 0


@pytest.fixture(scope="module")
def plan():
    """The board build's files (nothing run) of the smallest MA."""
    return fpga.board_plan(MaTop(p=2, data_width=64), 64, "ulx3s-85f")


def test_lpf_in_constraints_is_the_one_the_build_writes(plan):
    committed = (REPO / "constraints" / "ulx3s-85f.lpf").read_text()
    assert plan.files["top.lpf"] == committed, (
        "constraints/ulx3s-85f.lpf is stale: copy top.lpf of a `v4hw build` run over it")


@pytest.mark.parametrize("argv", [
    ["build", "ma", "--board", "ulx3s-85f", "--freq", "90"],
    ["build", "ma", "--board", "ulx3s-85f", "--param", "P=3"],
    ["synth", "ma", "--target", "ecp5", "--param", "Q=1"],
    ["build", "mc", "--board", "ulx3s-85f"],        # client channels: not a board design
    ["synth", "tile", "--target", "ecp5", "--param", "P=3"],
    ["synth", "tile", "--target", "xcup", "--param", "L=4"],        # narrower than the bus
    ["synth", "tile", "--target", "ecp5", "--param", "COLS=9"],
    ["synth", "tile", "--target", "ecp5", "--param", "FLIT_BITS=144"],
    ["synth", "tile", "--target", "ecp5", "--param", "CREDITS=300"],
    ["synth", "tile", "--target", "ecp5", "--param", "PREFETCH_LINES=3"],
    ["build", "tile", "--board", "ulx3s-85f", "--param", "FN_LANES=3"],
    ["build", "tile", "--board", "ulx3s-85f", "--param", "P=4", "--freq", "90"],
])
def test_bad_build_arguments_are_one_line_and_exit_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("v4hw: error:"), err
    assert not any(fpga.BUILD_ROOT.glob("*-p3-*"))


def test_resource_counting_weights():
    cells = {"LUT4": 10, "CCU2C": 3, "TRELLIS_FF": 7, "MULT18X18D": 2, "DP16KD": 4, "X": 99}
    assert fpga.count_resources(cells, "ecp5") == fpga.Resources(lut=16, ff=7, dsp=2, bram=4)
    cells = {"LUT6": 5, "LUT2": 1, "RAM64M8": 2, "RAM32M": 1, "FDRE": 3, "FDCE": 1,
             "RAMB18E2": 3, "RAMB36E2": 1}
    assert fpga.count_resources(cells, "xcup") == fpga.Resources(lut=26, ff=4, dsp=0, bram=2.5)


def test_build_script_is_split_after_yosys_for_the_fit_check(plan):
    synth, place = fpga.split_build_script(plan.files["build_top.sh"])
    assert synth.rstrip().splitlines()[-1].startswith('"$YOSYS"')
    assert '"$YOSYS"' not in place and '"$NEXTPNR_ECP5"' in place and '"$ECPPACK"' in place
    assert "set -e" in synth and "set -e" in place
    assert "stat -json" in plan.files["top.ys"]        # the counts the check reads
    with pytest.raises(fpga.FpgaToolError):
        fpga.split_build_script("#!/bin/sh\nset -e\n")


def test_fit_check_refuses_what_the_ecp5_85_cannot_hold():
    # yosys's cells of the L=32 VA (FN_LANES=2) of 2026-12-01: nextpnr packed 126 535
    # TRELLIS_COMB of 83 640 and could not place it
    va = {"LUT4": 89_715, "CCU2C": 12_496, "TRELLIS_DPR16X4": 951, "MULT18X18D": 141,
          "DP16KD": 70, "TRELLIS_FF": 48_295}
    problems = fpga.fit_problems(va, "ulx3s-85f")
    assert len(problems) == 1 and problems[0].startswith("118511 LUT4 slots"), problems
    assert "83640" in problems[0] and "(142 %)" in problems[0]
    # the P=8 MA of 2d594bb: placed, 78 009 TRELLIS_COMB (93 %)
    ma = {"LUT4": 53_537, "CCU2C": 6_957, "TRELLIS_DPR16X4": 1_081, "MULT18X18D": 64,
          "DP16KD": 56}
    assert fpga.fit_problems(ma, "ulx3s-85f") == []
    over = fpga.fit_problems({"MULT18X18D": 157, "DP16KD": 209}, "ulx3s-85f")
    assert [line.split()[1] for line in over] == ["MULT18X18D", "DP16KD"]


def test_netlist_area_by_unit_and_by_signal():
    from tools.netlist_area import unit_slots
    cells = {
        "harness.block.core.engine.opa7_LUT4_Z": {"type": "LUT4"},
        "harness.block.core.engine.opa12[3]_CCU2C_S0": {"type": "CCU2C"},
        "harness.block.core.engine.add3_s2_norm$abc$9": {"type": "LUT4"},
        "harness.block.core.engine.add3_s2_norm_TRELLIS_FF_Q": {"type": "TRELLIS_FF"},
        "harness.block.core.rows.pipe.x0_LUT4_Z": {"type": "LUT4"},
        "harness.block.core.rows.top4_1_TRELLIS_DPR16X4": {"type": "TRELLIS_DPR16X4"},
    }
    assert unit_slots(cells) == {"harness.block.core.engine": 4, "harness.block.core.rows": 5}
    assert unit_slots(cells, under="harness.block.core.engine") == {"opa#": 3, "add#_s#_norm": 1}
    assert unit_slots(cells, under="harness.block.core.rows") == {"pipe": 1, "top#_#": 4}
