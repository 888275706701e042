"""The `v4hw` command line: Verilog generation and its parameter errors; the block
descriptors it reads (``sim.blocks``)."""

import json
import re
from pathlib import Path

import pytest

from sim.blocks import Block, CapsField, Param, registry
from sim.cli import BLOCKS, main


@pytest.mark.parametrize("param", ["P=1", "P=33", "P=6", "DATA_WIDTH=96", "Q=3", "P=x", "P"])
def test_bad_parameter_is_one_line_and_exit_2(param, tmp_path, capsys):
    status = main(["verilog", "ma", "--param", param, "-o", str(tmp_path / "x.v")])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert len(err.splitlines()) == 1 and err.startswith("v4hw: error:"), err
    assert not (tmp_path / "x.v").exists()


def test_verilog_module_name_and_ports(tmp_path):
    out = tmp_path / "ma.v"
    assert main(["verilog", "ma", "--param", "P=2", "--param", "DATA_WIDTH=64",
                 "-o", str(out)]) == 0
    text = out.read_text()
    assert re.search(r"^module v4hw_ma\(", text, re.MULTILINE)
    header = text[text.index("module v4hw_ma("):].split(";", 1)[0]
    for port in ("ap_clk", "ap_rst_n", "interrupt", "s_axi_control_awaddr",
                 "s_axi_control_rdata", "m_axi_gmem_arvalid", "m_axi_gmem_wstrb"):
        assert re.search(rf"\b{port}\b", header), port
    assert re.search(r"input \[63:0\] m_axi_gmem_rdata|\[63:0\] m_axi_gmem_rdata", text)


def test_muon_verilog_has_a_port_set_per_node(tmp_path):
    out = tmp_path / "muon.v"
    assert main(["verilog", "muon", "--param", "ROWS=2", "--param", "COLS=2",
                 "-o", str(out)]) == 0
    header = out.read_text().split("module v4hw_muon(", 1)[1].split(";", 1)[0]
    for n in range(4):
        for port in (f"inject{n}_valid", f"inject{n}_ready", f"inject{n}_payload",
                     f"eject{n}_valid", f"eject{n}_ready", f"dropped{n}_valid"):
            assert re.search(rf"\b{port}\b", header), port
    assert not re.search(r"\binject4_valid\b", header)
    assert re.search(r"\bs_axi_control_awaddr\b", header)


@pytest.mark.parametrize("param", ["ROWS=0", "COLS=17", "SLOTS=33", "RSV_DEPTH=2", "BE_DEPTH=1"])
def test_muon_bad_parameter(param, tmp_path, capsys):
    assert main(["verilog", "muon", "--param", param, "-o", str(tmp_path / "x.v")]) == 2
    assert capsys.readouterr().err.startswith("v4hw: error: muon:")
    assert not (tmp_path / "x.v").exists()


# --- User errors: one line, exit status 2, before any slow work -------------------------------

def _bad_command_lines(tmp):
    plain_file = tmp / "plain"
    plain_file.write_text("")
    return [
        [], ["frob"], ["verilog"], ["verilog", "zz", "-o", "x.v"],
        ["verilog", "ma", "-o", str(tmp / "x.v"), "extra"],
        ["verilog", "ma", "-o", str(tmp)],                          # a directory
        ["verilog", "ma", "-o", "/proc/v4hw-x.v"],                  # cannot be created
        ["verilog", "ma", "-o", str(plain_file / "x.v")],           # folder is a file
        ["verilog", "ma", "--param", "P=3", "-o", "-"],
        ["synth", "ma"], ["synth", "ma", "--target", "ecp5", "--param", "P=3"],
        ["synth", "va", "--target", "zz"],
        ["build", "va", "--board", "ulx3s-85f", "--freq", "90"], ["build", "ma"],
        ["demo", "--frob"],
        ["muon"], ["muon", "x"], ["muon", "analyze"],
        ["muon", "analyze", str(tmp / "no-such-capture")],
        ["bench"], ["bench", "ma"],
        ["bench", "muon", "--cols", "0"], ["bench", "muon", "--rows", "17"],
        ["bench", "muon", "--cols", "x"], ["bench", "muon", "--length", "1"],
        ["bench", "muon", "--out", "/proc/v4hw-x"], ["bench", "muon", "--frob"],
        ["regmap"], ["regmap", "zz", "--md"], ["regmap", "ma", "--md", "--c"],
        ["waves"], ["waves", "tests/no_such_test.py"],
        ["plan"], ["plan", "--preset", "zz"], ["plan", str(tmp / "no-such-graph.json")],
        ["plan", "--synthetic", "0"], ["plan", "--synthetic", "3", "--json", str(tmp)],
        ["program"], ["program", "--preset", "zz"], ["program", "--preset", "notes", "-x"],
        ["golden"], ["golden", "layer"], ["golden", "layer", "--layer", "0"],
        ["golden", "layer", "--checkpoint", str(tmp / "no-such-dir"), "--layer", "0"],
        ["golden", "layer", "--checkpoint", str(CHECKPOINT), "--layer", "99"],
        ["golden", "layer", "--checkpoint", str(CHECKPOINT), "--layer", "0", "--random", "0"],
        ["golden", "layer", "--checkpoint", str(CHECKPOINT), "--layer", "0",
         "--tokens", str(tmp / "no-such-tokens")],
    ]


def test_every_user_error_is_one_line_and_exit_2(tmp_path, capsys):
    """Each subcommand fed bad arguments: one error line, status 2, nothing on standard
    output (no build banner) and no file left behind; found before any elaboration, so
    the whole list takes seconds."""
    for argv in _bad_command_lines(tmp_path):
        status = main(argv)
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert status == 2, (argv, status, err)
        assert len(lines) == 1 and lines[0].startswith("v4hw: error: "), (argv, err)
        assert out == "", (argv, out)
        assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain"]


def test_waves_on_a_test_that_simulates_nothing_says_so(capsys):
    assert main(["waves", "tests/test_cli.py::test_verilog_module_name_and_ports"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("v4hw: error: waves: ") and "no cocotb simulation" in err[-1]


@pytest.mark.parametrize("argv", [
    ["--help"], ["verilog", "--help"], ["synth", "--help"], ["build", "--help"],
    ["demo", "--help"], ["waves", "--help"], ["regmap", "--help"],
    ["muon", "--help"], ["muon", "analyze", "--help"],
    ["bench", "--help"], ["bench", "muon", "--help"],
    ["plan", "--help"], ["program", "--help"], ["golden", "--help"], ["golden", "layer", "--help"],
])
def test_help_at_every_level(argv, capsys):
    assert main(argv) == 0
    out = capsys.readouterr().out
    prog = " ".join(["v4hw", *(word for word in argv if word != "--help")])
    assert out.startswith(f"usage: {prog} "), out[:200]


def test_verilog_to_standard_output(tmp_path, monkeypatch, capsys):
    """``-o -`` writes the Verilog to standard output (no file named ``-``); the
    progress line goes to standard error."""
    monkeypatch.chdir(tmp_path)
    assert main(["verilog", "muon", "--param", "ROWS=1", "--param", "COLS=2",
                 "-o", "-"]) == 0
    out, err = capsys.readouterr()
    assert re.search(r"^module v4hw_muon\(", out, re.MULTILINE) and out.rstrip().endswith(
        "endmodule")
    assert err.strip() == "v4hw: elaborating muon (BE_DEPTH=8, COLS=2, ROWS=1, RSV_DEPTH=4, " \
        "SLOTS=8) ..."
    assert list(tmp_path.iterdir()) == []


# --- The block descriptors -----------------------------------------------------------------

def test_every_block_is_registered_once_by_its_own_module():
    blocks = registry()
    assert sorted(blocks) == ["ma", "mc", "muon", "tile", "va"]
    for name, block in blocks.items():
        assert type(block).__module__ == "sim.blocks" and block.name == name
        assert block.verilog_name == f"v4hw_{name}"
    assert sorted(BLOCKS) == sorted(blocks)
    assert BLOCKS["va"][:2] == ("v4hw_va", {"L": 32, "DATA_WIDTH": 128, "FN_LANES": 0})


@pytest.mark.parametrize("block", sorted(registry()))
def test_caps_layout_decodes_what_the_top_reports(block):
    """The layout's fields cover the bits the hardware's CAPS word sets, and each field
    tied to a parameter holds that parameter (modulo its width), at the defaults and at
    the smoke parameters."""
    desc = registry()[block]
    for params in (desc.defaults, desc.params_for(smoke=True)):
        word = desc.caps(params)
        fields = desc.decode_caps(word)
        assert desc.encode_caps(fields) == word, f"CAPS {word:#x} has bits outside the layout"
        for f in desc.caps_layout:
            if f.param is not None:
                assert fields[f.name] == params[f.param] % (1 << f.width), f.name
        if "DATA_WIDTH" in params:
            assert fields["BUS_BYTES"] == params["DATA_WIDTH"] // 8


@pytest.mark.parametrize("block", sorted(registry()))
def test_bench_and_waves_paths_resolve(block):
    desc = registry()[block]
    assert isinstance(desc.bench_class(), type)
    groups = desc.load_gtkw_groups()
    assert groups and all(isinstance(title, str) and patterns for title, patterns in groups)


@pytest.mark.parametrize("block", sorted(registry()))
def test_check_refuses_before_the_top_exists(block):
    desc = registry()[block]
    desc.check(desc.defaults)
    desc.check(desc.params_for(smoke=True))
    for board in desc.board_defaults:
        desc.check(desc.params_for(board))
    first = desc.params[0].name
    with pytest.raises((ValueError, TypeError)):
        desc.check({**desc.defaults, first: 0})


def test_descriptor_refuses_inconsistent_tables():
    common = dict(verilog_name="x", summary="", check=None, top=None, caps=None,
                  bench="a:b", gtkw_groups="a:c")
    with pytest.raises(ValueError, match="twice"):
        Block(name="x", params=(Param("A", 1, ""), Param("A", 2, "")), caps_layout=(),
              **common)
    with pytest.raises(ValueError, match="overlaps"):
        Block(name="x", params=(), caps_layout=(CapsField("A", 0, 8, ""),
                                                CapsField("B", 4, 8, "")), **common)
    with pytest.raises(ValueError, match="unknown parameters"):
        Block(name="x", params=(Param("A", 1, ""),), caps_layout=(), smoke_params={"B": 1},
              **common)


CHECKPOINT = Path(__file__).parent / "data" / "dsv4_ckpt" / "published_fp8_fp4"


def test_program_summary_counts_the_decode_step(capsys):
    """`v4hw program` prints golden.program.summary: its totals are the sums of its rows."""
    assert main(["program", "--preset", "notes", "--summary"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith(("ma ", "va "))]
    for block in ("ma", "va"):
        total = next(int(r[-1]) for r in rows if r[0] == block and r[1] == "(all)")
        parts = [int(r[-1]) for r in rows if r[0] == block and not r[1].startswith("(")
                 and r[1] != "cycles"]
        assert parts and total == sum(parts), (block, total, parts)


def test_program_summary_gives_the_memory_bound(capsys):
    """The summary's bound rows are golden.roofline's count of the step: bytes read and
    written per layer, and the bound in cycles at the bus's 16 bytes a cycle."""
    from golden.roofline import decode_step_traffic

    assert main(["program", "--preset", "notes", "--summary"]) == 0
    rows = {tuple(r[:3]): [int(v) for v in r[3:]] for r in
            (line.split() for line in capsys.readouterr().out.splitlines())
            if r[:1] == ["step"]}
    traffic, bus = decode_step_traffic("notes")
    assert rows[("step", "bytes", "read")] == [traffic.read_bytes] * 2
    assert rows[("step", "bytes", "written")] == [traffic.written_bytes] * 2
    assert rows[("step", "bound", "cycles")] == [traffic.bound_cycles(bus)] * 2
    assert traffic.bound_cycles(bus) == -(-traffic.required // 16) > 0


def test_plan_of_a_preset_step(tmp_path, capsys):
    out_json = tmp_path / "plan.json"
    assert main(["plan", "--preset", "notes", "--quiet", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "makespan" in out and "lower bounds" in out
    assert out_json.stat().st_size > 0


def test_golden_layer_on_the_tiny_checkpoint(capsys):
    assert main(["golden", "layer", "--checkpoint", str(CHECKPOINT), "--layer", "0",
                 "--random", "4", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["layer"], report["tokens"], report["mode"]) == (0, 4, "bf16")
    assert report["stages"] and all(stage["max_abs"] >= 0 for stage in report["stages"])
