"""The U280 constraints and Vivado script, checked as far as a machine without Vivado can.

* ``constraints/u280/build.tcl`` runs under a plain ``tclsh`` against
  ``constraints/u280/vivado_stub.tcl``, a stub of every Vivado command it calls that
  refuses unknown options and missing files; the calls must form the non-project flow.
* Every ``get_ports`` pattern of ``constraints/u280/v4hw_kernel.xdc`` matches ports of each
  block's generated Verilog, with the direction its filter asks for, and every port of
  the kernel interface is constrained.
* ``constraints/ulx3s-85f.lpf`` is the LPF the ULX3S build writes (no stale copy).
"""

import fnmatch
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hdl.board.harness import is_kernel_port
from sim.blocks import registry
from sim.cli import BLOCKS, verilog_text
from sim.verilog_cache import disk_cached

REPO = Path(__file__).resolve().parent.parent
U280 = REPO / "constraints" / "u280"
TCLSH = shutil.which("tclsh")


def run_stub(tmp_path, slack, *args):
    result = subprocess.run([TCLSH, str(U280 / "vivado_stub.tcl"), str(slack),
                             str(U280 / "build.tcl"), *args],
                            capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    calls = lines[lines.index("CALLS") + 1:-1]
    status = int(lines[-1].split()[1])
    return [call.split()[0] for call in calls], calls, status, result.stderr


@pytest.fixture(scope="module")
def ma_verilog_file(tmp_path_factory):
    """An MA's Verilog for the script to read (the smoke parameters': the stub checks the
    flow's calls and files, not the design)."""
    path = tmp_path_factory.mktemp("u280") / "v4hw_ma.v"
    path.write_text(smoke_verilog("ma"))
    return path


@pytest.mark.skipif(TCLSH is None, reason="tclsh missing: `make setup` installs it (apt-get install tcl)")
@pytest.mark.parametrize("slack, status", [(0.125, 0), (-0.2, 1)])
def test_vivado_script_flow_against_stub(tmp_path, ma_verilog_file, slack, status):
    out = tmp_path / "out"
    names, calls, code, stderr = run_stub(tmp_path, slack, str(ma_verilog_file), "v4hw_ma", str(out))
    assert code == status, stderr
    flow = ["read_verilog", "read_xdc", "synth_design", "opt_design", "place_design",
            "route_design", "report_timing_summary", "write_checkpoint", "get_timing_paths"]
    positions = [names.index(step) for step in flow]
    assert positions == sorted(positions), names
    synth = calls[names.index("synth_design")]
    assert "-top v4hw_ma" in synth and "-part xcu280-" in synth
    assert (out / "v4hw_ma_timing.rpt").is_file() and (out / "v4hw_ma_utilization.rpt").is_file()
    assert (out / "v4hw_ma_routed.dcp").is_file()


@pytest.mark.skipif(TCLSH is None, reason="tclsh missing: `make setup` installs it (apt-get install tcl)")
def test_vivado_script_refuses_bad_arguments(tmp_path):
    names, _, status, stderr = run_stub(tmp_path, 0, str(tmp_path / "missing.v"), "top", "out")
    assert status == 2 and "no such Verilog file" in stderr and "synth_design" not in names
    names, _, status, _ = run_stub(tmp_path, 0, "only-one")
    assert status == 2 and not names


def verilog_ports(text, module):
    """{port name: "IN" | "OUT"} of ``module`` in Amaranth's Verilog output."""
    body = text[text.index(f"module {module}("):]
    body = body[:body.index("endmodule")]
    ports = {}
    for direction, name in re.findall(r"^\s*(input|output)\b[^;]*?(\\?\S+)\s*;", body, re.MULTILINE):
        ports[name.lstrip("\\")] = "IN" if direction == "input" else "OUT"
    return ports


def xdc_port_patterns(text):
    """[(pattern, direction or None)] of every ``get_ports`` in an XDC."""
    found = []
    for match in re.finditer(r"\[get_ports\s+([^\]]*)\]", text):
        words = match.group(1)
        direction = re.search(r"-filter \{DIRECTION == (IN|OUT)\}", words)
        words = re.sub(r"-filter \{[^}]*\}", "", words).split()
        found += [(word, direction.group(1) if direction else None) for word in words]
    return found


@disk_cached
def smoke_verilog(block):
    """The block's standalone top at its smoke parameters: the ports' names are those of
    every configuration (the default tile alone takes minutes to elaborate). Also the
    synthesis smoke's input (tests/test_fpga_flow.py), elaborated once for both."""
    return verilog_text(block, registry()[block].params_for(smoke=True), emit_src=False)


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_xdc_names_ports_of_every_block(block):
    name = BLOCKS[block][0]
    ports = verilog_ports(smoke_verilog(block), name)
    assert "ap_clk" in ports and "ap_rst_n" in ports
    patterns = xdc_port_patterns((U280 / "v4hw_kernel.xdc").read_text())
    assert patterns
    for pattern, direction in patterns:
        if block == "muon" and pattern.startswith("m_axi_gmem"):
            continue   # the NoC has no memory master: memory traffic rides its packets
        hits = [p for p in fnmatch.filter(ports, pattern) if direction in (None, ports[p])]
        assert hits, f"{pattern} ({direction or 'any direction'}) matches no port of {name}"
    # Every port of the kernel interface is constrained by some pattern. (The MC's
    # client channels are not kernel ports: in the tile they join other blocks.)
    kernel = {p for p in ports if is_kernel_port(p)}
    covered = {p for pattern, _ in patterns for p in fnmatch.filter(ports, pattern)}
    assert kernel <= covered, sorted(kernel - covered)
