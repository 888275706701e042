"""The FPGA flow's fast tier: a yosys synthesis smoke per block, the ULX3S LPF in use,
and the command line's refusals. Place and route is not run here (minutes to an hour):
``make fpga`` does it.
"""

from pathlib import Path

import pytest

from hdl.top.ma import MaTop
from sim import fpga
from sim.cli import BLOCKS, main, verilog_text

REPO = Path(__file__).resolve().parent.parent
# The smallest parameters of each block keep the smoke at tens of seconds; a block not
# listed is checked with its defaults.
SMOKE_PARAMS = {"ma": {"P": 2, "DATA_WIDTH": 64},
                "muon": {"ROWS": 2, "COLS": 2, "SLOTS": 1, "BE_DEPTH": 2}}


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_synthesis_smoke(block, tmp_path):
    name, defaults, _ = BLOCKS[block]
    params = {**defaults, **SMOKE_PARAMS.get(block, {})}
    cells = fpga.check_synthesizable(verilog_text(block, params, emit_src=False), name, tmp_path)
    assert cells > 0


def test_lpf_in_constraints_is_the_one_the_build_writes():
    plan = fpga.board_plan(MaTop(p=2, data_width=64), 64, "ulx3s-85f")
    committed = (REPO / "constraints" / "ulx3s-85f.lpf").read_text()
    assert plan.files["top.lpf"] == committed, (
        "constraints/ulx3s-85f.lpf is stale: copy top.lpf of a `v4hw build` run over it")


@pytest.mark.parametrize("argv", [
    ["build", "ma", "--board", "ulx3s-85f", "--freq", "90"],
    ["build", "ma", "--board", "ulx3s-85f", "--param", "P=3"],
    ["synth", "ma", "--target", "ecp5", "--param", "Q=1"],
    ["build", "mc", "--board", "ulx3s-85f"],        # client channels: not a board design
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
