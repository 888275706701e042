"""MC parameters, command line and bounds: fast checks without a simulator."""

import re

import pytest

from golden.mc import arbiter_grant_bound
from hdl.common.credit import CreditSignature
from hdl.mc.arbiter import grant_bound
from hdl.mc.channel import ClientChannelSignature, RequestLayout
from sim.cli import main


@pytest.mark.parametrize("param", ["CHANNELS=0", "CHANNELS=9", "DATA_WIDTH=96", "AGE_LIMIT=0",
                                   "AGE_LIMIT=256"])
def test_bad_parameter(param, tmp_path, capsys):
    status = main(["verilog", "mc", "--param", param, "-o", str(tmp_path / "x.v")])
    err = capsys.readouterr().err.strip()
    assert status == 2 and err.startswith("v4hw: error: mc:"), err
    assert not (tmp_path / "x.v").exists()


def test_verilog_ports(tmp_path):
    out = tmp_path / "mc.v"
    assert main(["verilog", "mc", "--param", "CHANNELS=2", "-o", str(out)]) == 0
    header = out.read_text().split("module v4hw_mc(", 1)[1].split(";", 1)[0]
    for port in ("ap_clk", "ap_rst_n", "interrupt", "s_axi_control_awaddr",
                 "m_axi_gmem_arvalid", "ch0__req__payload", "ch1__resp__credit",
                 "ch1__wdata__valid"):
        assert re.search(rf"\b{port}\b", header), port
    assert "ch2__req__valid" not in header


def test_depths_are_checked():
    with pytest.raises(ValueError, match="resp_depth"):
        ClientChannelSignature(128, resp_depth=0)
    with pytest.raises(ValueError, match="depth"):
        CreditSignature(RequestLayout(), 257)
    assert ClientChannelSignature(128) == ClientChannelSignature(128, 4, 16, 64)


@pytest.mark.parametrize("channels", [1, 2, 4, 8])
@pytest.mark.parametrize("age_limit", [1, 3, 8])
def test_golden_and_rtl_agree_on_the_grant_bound(channels, age_limit):
    assert grant_bound(channels, age_limit) == arbiter_grant_bound(channels, age_limit)
