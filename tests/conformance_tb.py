"""cocotb conformance test of the common registers, the same for every block.

``tests/test_conformance_cocotb.py`` runs :func:`common_registers` on each block's default
test build (``V4HW_BLOCK`` names the block; its own testbench module, ``tests/<block>_tb.py``,
builds and starts the bench with its ``new_bench``, which checks ID.BLOCK and CAPS through
:class:`sim.bfm.KernelBench`). What is checked comes from the block's register map:

* ID (BLOCK and VERSION) and CAPS, read-only: a write answers OKAY and changes nothing,
  as for STATUS, ERROR and ERR_ADDR, all 0 after reset;
* IRQ_ENABLE reads back what was written (whole words and single bytes), IRQ_STATUS is
  0 after reset and writing ones to it while clear leaves it clear, ``interrupt`` low;
* TIME_LO/TIME_HI: the timebase, counting the cycles between two reads;
* unmapped offsets (the word after every register and the map's first and last holes)
  answer SLVERR to reads (data 0) and writes, and the writes change no RW register;
* for a block with a START register: START with the command registers at reset is
  refused (STATUS.ERROR, ERROR = BAD_COMMAND, ERR_ADDR 0, IRQ_STATUS.ERROR and, enabled,
  the interrupt until W1C); START while a command runs (the block testbench's
  ``load_long_command``) is dropped (STATUS.START_DROPPED) and the command ends DONE.
"""

import importlib
import os

import cocotb

from hdl.common.axi import AxiResp
from spec.codes import BlockId, ErrorCode

BLOCK = os.environ.get("V4HW_BLOCK", "ma")
TB = importlib.import_module(f"tests.{BLOCK}_tb")
VERSION = getattr(importlib.import_module(f"hdl.top.{BLOCK}"), f"{BLOCK.upper()}_VERSION")
WORD = 4
ADDRESS_SPACE = 1 << 16
RO_COMMON = ("ID", "CAPS", "STATUS", "ERROR", "ERR_ADDR")


def field_mask(regs, name):
    mask = 0
    for desc in regs.register(name)["fields"]:
        mask |= ((1 << desc["width"]) - 1) << desc["lsb"]
    return mask


def holes(regmap):
    """Unmapped offsets: the word after each register, the first and the last hole."""
    used = {register["offset"] for register in regmap.REGISTERS}
    after = {offset + WORD for offset in used} - used
    first = next(o for o in range(0, ADDRESS_SPACE, WORD) if o not in used)
    last = next(o for o in range(ADDRESS_SPACE - WORD, -1, -WORD) if o not in used)
    return sorted((after | {first, last}) & set(range(0, ADDRESS_SPACE, WORD)))


async def read_time(bench):
    """``(value, first edge, last edge)``: TIME_LO/TIME_HI and the edges between which
    the TIME_LO read was made."""
    first = bench.timing.edge()
    lo = await bench.regs.read("TIME_LO")
    last = bench.timing.edge()
    hi = await bench.regs.read("TIME_HI")
    return hi << 32 | lo, first, last


async def wait_status(bench, field, limit=100_000):
    for _ in range(limit):
        status = await bench.regs.read_fields("STATUS")
        if status[field]:
            return status
    raise AssertionError(f"STATUS.{field} not set within {limit} reads: {status}")


@cocotb.test()
async def common_registers(dut):
    bench, rng = await TB.new_bench(dut)
    regs, regmap = bench.regs, bench.REGMAP
    names = {register["name"] for register in regmap.REGISTERS}

    assert await regs.read_fields("ID") == {"VERSION": VERSION, "BLOCK": BlockId[BLOCK.upper()]}
    assert bench.decode_caps(await regs.read("CAPS")) == bench.caps
    for name in ("STATUS", "ERROR", "ERR_ADDR", "IRQ_ENABLE", "IRQ_STATUS"):
        assert await regs.read(name) == 0, f"{name} is not 0 after reset"
    before = {name: await regs.read(name) for name in RO_COMMON}
    for name in RO_COMMON:
        assert await regs.write_resp(name, 0xFFFF_FFFF) == AxiResp.OKAY, name
    for name, value in before.items():
        assert await regs.read(name) == value, f"a write changed read-only {name}"

    # IRQ_ENABLE reads back words and bytes; IRQ_STATUS stays clear; no interrupt.
    mask = field_mask(regs, "IRQ_ENABLE")
    for value in (mask, 0, rng.getrandbits(32) & mask):
        await regs.write("IRQ_ENABLE", value)
        assert await regs.read("IRQ_ENABLE") == value
    await regs.write_bytes("IRQ_ENABLE", bytes([0xFF]), 0)
    assert await regs.read("IRQ_ENABLE") == mask & 0xFF
    await regs.write_resp("IRQ_STATUS", 0xFFFF_FFFF)
    assert await regs.read("IRQ_STATUS") == 0
    assert not int(dut.interrupt.value), "interrupt high with IRQ_STATUS clear"

    # TIME counts cycles.
    t1, f1, l1 = await read_time(bench)
    await bench.cycles(100)
    t2, f2, l2 = await read_time(bench)
    assert 0 < t1 <= l1, f"TIME {t1} after {l1} edges"
    assert f2 - l1 <= t2 - t1 <= l2 - f1, (
        f"TIME went from {t1} to {t2}; the reads were {f2 - l1} to {l2 - f1} cycles apart")

    # Unmapped offsets: SLVERR; RW registers unchanged.
    rw = sorted(r["name"] for r in regmap.REGISTERS if r["access"] == "RW")
    values = {name: await regs.read(name) for name in rw}
    for offset in holes(regmap):
        value, resp = await regs.read_resp(offset)
        assert resp == AxiResp.SLVERR and value == 0, (hex(offset), value, resp)
        assert await regs.write_resp(offset, 0xFFFF_FFFF) == AxiResp.SLVERR, hex(offset)
    for name in rw:
        assert await regs.read(name) == values[name], f"{name} changed by an unmapped write"

    if "START" not in names:
        return
    await regs.write("IRQ_ENABLE", 0)
    await regs.write_fields("IRQ_ENABLE", error=1)
    await regs.write("START", 1)
    status = await wait_status(bench, "ERROR")
    assert not status["BUSY"] and not status["DONE"], status
    assert ErrorCode(await regs.read("ERROR")) is ErrorCode.BAD_COMMAND
    assert await regs.read("ERR_ADDR") == 0
    assert await regs.read_fields("IRQ_STATUS") == {"DONE": 0, "ERROR": 1}
    await bench.cycles(2)
    assert int(dut.interrupt.value), "no interrupt with IRQ_STATUS.ERROR enabled"
    await regs.write_fields("IRQ_STATUS", error=1)
    assert not int(dut.interrupt.value), "interrupt stays high after W1C"
    assert await regs.read("IRQ_STATUS") == 0

    await TB.load_long_command(bench, rng)
    await regs.write("START", 1)
    await regs.write("START", 1)
    status = await regs.read_fields("STATUS")
    assert status["BUSY"] and status["START_DROPPED"], f"STATUS {status}"
    status = await wait_status(bench, "DONE")
    assert not status["BUSY"] and not status["ERROR"] and status["START_DROPPED"], status
    assert ErrorCode(await regs.read("ERROR")) is ErrorCode.NONE
