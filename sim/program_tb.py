"""cocotb testbench: one decode step of a tile preset run by the host runtime
(:mod:`sim.tile_runtime`) on a standalone block top, bit for bit against the golden
interpreter.

``program_on_va`` (top ``v4hw_va``) runs every VA command on the RTL in program order;
the MA's commands are played by the host (the golden result written into memory).
``program_on_ma`` (top ``v4hw_ma``) is the converse. Commands the RTL cannot run yet
(:class:`sim.tile_runtime.Capabilities`) are played by the host too. After each RTL
command every tensor it wrote equals the golden interpreter's; after the run the whole
memory image does.

Environment (set by ``tests/test_tile_runtime_cocotb.py``):

``V4HW_RT_PRESET``  tile preset (``notes``, ``deepseek-v4``)
``V4HW_RT_MODE``    the MA mode of a ``notes`` step (``bf16``, ``int8``)
``V4HW_RT_LIMIT``   run only the first N commands of the step (all layers counted; 0: all)
``V4HW_RT_LANES``   the VA build's L (the program's BlockConfig.lanes)
``V4HW_RT_REPORT``  a JSON file to write the records, the table and the summary into
``V4HW_RT_MEMORY_LATENCY``  the bench memory's latency (default :data:`MEMORY_LATENCY`)
"""

import json
import os

import cocotb
from cocotbext.axi import AxiLiteBus
from cocotbext.axi.axil_channels import AxiLiteAWMonitor, AxiLiteWMonitor

from golden.program import BlockConfig
from sim.ma_driver import MaBench
from sim.tile_runtime import (
    TileRuntime,
    decode_programs,
    format_by_opcode,
    format_summary,
    format_table,
)
from sim.va_driver import VaBench

LATENCY = 8          # memory latency of the latency models' BlockConfig
MEMORY_LATENCY = int(os.environ.get("V4HW_RT_MEMORY_LATENCY", LATENCY + 1))
"""The bench memory's read and write latency (:class:`sim.bfm.GmemModel`). The latency
models count the latency at the core's memory port (as :class:`sim.bfm.PortMemory` does);
behind a standalone top's ``m_axi_gmem`` the GmemModel's ``L + 1`` is the core's ``L``
(measured: with it every MA command and all but a few VA commands take exactly the
predicted cycles; with ``L`` each is 2 cycles shorter)."""


class StartStamp:
    """The timebase of the cycle in which the latest control-port write was performed:
    the register block performs a write in the cycle after the later of its AW and W
    handshakes (``hdl/common/regblock.py``), as :meth:`sim.ma_driver.MaBench.launch`
    dates START."""

    def __init__(self, dut, bench):
        self.bench, self.edges = bench, {"aw": 0, "w": 0}
        bus = AxiLiteBus.from_prefix(dut, "s_axi_control").write
        for kind, monitor in (("aw", AxiLiteAWMonitor), ("w", AxiLiteWMonitor)):
            cocotb.start_soon(self._stamp(kind, monitor(getattr(bus, kind), dut.ap_clk,
                                                        dut.ap_rst_n, reset_active_level=False)))

    async def _stamp(self, kind, monitor):
        while True:
            await monitor.recv()
            self.edges[kind] = self.bench.timing.edge()

    def __call__(self):
        return self.bench.timebase_at(max(self.edges.values()) + 1)


def config():
    return BlockConfig(p=8, lanes=int(os.environ.get("V4HW_RT_LANES", "8")), bus_bits=128,
                       latency=LATENCY)


async def run_program(dut, block, bench):
    preset = os.environ.get("V4HW_RT_PRESET", "notes")
    limit = int(os.environ.get("V4HW_RT_LIMIT", "0"))
    stamp = StartStamp(dut, bench)
    await bench.start()
    cfg = config()
    mode = os.environ.get("V4HW_RT_MODE", "bf16")
    programs = decode_programs(preset, cfg, mode=mode)
    records, left = [], limit or None
    for i, (_, program, _) in enumerate(programs):
        n = len(program.commands) if left is None else min(left, len(program.commands))
        if n == 0:
            break
        rt = TileRuntime(program, bench.ram.mem, {block: bench.regs}, now=bench.now,
                         interrupt=dut.interrupt, start_time=stamp)
        await rt.run(range(n))
        if n == len(program.commands):
            bad = rt.final_mismatches()
            assert not bad, f"layer {i}: memory differs from the golden run in {bad[:5]}"
        for r in rt.records:
            r.stage = f"l{i}.{r.stage}" if len(programs) > 1 else r.stage
        records += rt.records
        if left is not None:
            left -= n
    assert not bench.ram.violations, "AXI rule violations:\n" + "\n".join(bench.ram.violations)
    name = preset if mode == "bf16" else f"{preset} ({mode})"
    title = (f"{name}: one decode step ({'first ' + str(limit) if limit else 'all'} commands) "
             f"on the {block.upper()} RTL, P={cfg.p}, L={cfg.lanes}, bus {cfg.bus_bits} bits, "
             f"memory latency {cfg.latency} (the bench's GmemModel {MEMORY_LATENCY})")
    table = format_table(records) + "\n\n" + format_by_opcode(records)
    summary = format_summary(records, title)
    dut._log.info("\n%s\n%s", table, summary)
    ours = [r for r in records if r.block == block]
    assert any(r.host is None for r in ours), f"no {block.upper()} command ran on the RTL"
    path = os.environ.get("V4HW_RT_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump({"title": title, "table": table, "summary": summary,
                       "records": [vars(r) for r in records]}, f, indent=1)


@cocotb.test()
async def program_on_va(dut):
    """The step's VA commands on the VA RTL, the MA's played by the host."""
    await run_program(dut, "va", VaBench(dut, lanes=config().lanes, data_width=128,
                                         latency=MEMORY_LATENCY, window=(0x7F00_0000_0000, 4096)))


@cocotb.test()
async def program_on_ma(dut):
    """The step's MA commands on the MA RTL, the VA's played by the host."""
    await run_program(dut, "ma", MaBench(dut, p=8, data_width=128, latency=MEMORY_LATENCY))
