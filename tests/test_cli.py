"""The `v4hw` command line: Verilog generation and its parameter errors."""

import re

import pytest

from sim.cli import main


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


@pytest.mark.parametrize("argv", [["bench"], ["bench", "ma"]])
def test_bench_names_a_known_bench(argv, capsys):
    assert main(argv) == 2
    assert "usage: v4hw bench muon" in capsys.readouterr().err


def test_bench_muon_bad_length(capsys):
    """A bad packet length is refused before anything is built."""
    assert main(["bench", "muon", "--length", "1", "--out", "unused"]) == 1
    assert "2..16 flits" in capsys.readouterr().err
