# amaranth: UnusedElaboratable=no
"""The cache-migrate engine (hdl/tile/migrate.py) in the Amaranth simulator.

The engine runs on :class:`sim.bfm.memport.PortMemory` (in-order answers after a random
latency, random back-pressure on every stream) and is driven through its register block
by the AXI4-Lite master of ``tests/test_regblock.py`` and ``sim.regs.Registers``. Every
copy is checked byte for byte against a Python model of the whole memory (so nothing
outside DST may change), refusals and AXI errors against the rules of
docs/tile/migrate.md, and the cycles of a copy against ``golden/migrate_latency.py``.
Seeds are printed; ``V4HW_SEED=<n>`` reruns one.
"""

import pytest
from amaranth.sim import Simulator

from golden.migrate_latency import bursts
from hdl.common.axi import AxiResp
from hdl.tile import migrate_regmap
from hdl.tile.migrate import MigrateEngine, caps_word
from sim.bfm.memport import PortMemory
from sim.regs import Registers
from sim.seed import test_seed
from spec.codes import BlockId, ErrorCode
from spec.memory import ADDRESS_LIMIT, PAGE_BYTES
from tests.test_regblock import SimAxiLiteMaster

ORIGIN = 0x5A00_0000_0000      # the memory model's first byte (any 4 KiB-aligned address)
SIZE = 1 << 16
TIMEOUT = 200_000              # cycles a copy may take before the test fails


class Bench:
    """The engine, its memory and the registers, inside one simulation."""

    def __init__(self, ctx, dut, memory, image, log, errors):
        self.ctx, self.dut, self.memory, self.image = ctx, dut, memory, image
        self.log, self.errors = log, errors
        self.master = SimAxiLiteMaster(ctx, dut.bus)
        self.regs = Registers(self.master, migrate_regmap)

    def now(self):
        return self.ctx.get(self.dut.now)

    async def set_copy(self, src, dst, length):
        for name, value in (("SRC_LO", src & 0xFFFF_FFFF), ("SRC_HI", src >> 32),
                            ("DST_LO", dst & 0xFFFF_FFFF), ("DST_HI", dst >> 32),
                            ("LENGTH", length)):
            await self.regs.write(name, value)

    async def start(self):
        """Write START; returns the cycle in which the write was performed."""
        await self.master.send_write(self.regs.offset("START"), 1)
        cycle = self.now()
        assert await self.master.receive_b() == AxiResp.OKAY
        return cycle

    async def wait(self):
        """Poll STATUS until BUSY is clear; returns STATUS's fields."""
        for _ in range(TIMEOUT // 8):
            status = await self.regs.read_fields("STATUS")
            if not status["BUSY"]:
                return status
        raise AssertionError(f"the copy did not end within {TIMEOUT} cycles")

    async def copy(self, src, dst, length):
        """Run one copy; returns (code, ERR_ADDR, cycles from START to the CTR)."""
        await self.set_copy(src, dst, length)
        started = await self.start()
        status = await self.wait()
        code = ErrorCode(await self.regs.read("ERROR"))
        assert status["ERROR"] == (code != ErrorCode.NONE) and status["DONE"] == (not status["ERROR"])
        addr = await self.regs.read("ERR_ADDR")
        ctr = await self.regs.read("CTR_LO") | await self.regs.read("CTR_HI") << 32
        return code, addr, (ctr - started if code == ErrorCode.NONE else None)


def simulate(program, *, data_width=128, latency=(1, 12), pause=0.2, rng=None, size=SIZE,
             seed_image=True, **params):
    """Run ``program(bench)`` on a fresh engine and memory; returns what it returns."""
    import random
    rng = rng or random.Random(0)
    dut = MigrateEngine(data_width, **params)
    image = bytearray(rng.getrandbits(8) for _ in range(size)) if seed_image else bytearray(size)
    log, errors, result = [], [], {}
    memory = PortMemory(dut.mem, data_width, image, origin=ORIGIN, latency=latency,
                        pause=pause, rng=rng if pause else None, errors=errors, log=log)

    async def clock(ctx):
        cycle = 0
        async for _ in ctx.tick():
            cycle += 1
            ctx.set(dut.now, cycle)

    async def bench(ctx):
        result["value"] = await program(Bench(ctx, dut, memory, image, log, errors))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_process(clock)
    sim.add_testbench(bench)
    memory.add_to(sim)
    sim.run()
    return result["value"]


def model_copy(image, src, dst, length):
    """The memory after a successful copy (a snapshot copy: DST ≤ SRC overlaps too)."""
    after = bytearray(image)
    after[dst - ORIGIN:dst - ORIGIN + length] = image[src - ORIGIN:src - ORIGIN + length]
    return after


def first_difference(got, expected):
    for i, (a, b) in enumerate(zip(got, expected, strict=True)):
        if a != b:
            return f"byte {ORIGIN + i:#x}: {a:#04x}, expected {b:#04x}"
    return None


def test_smoke():
    async def program(bench):
        before = bytes(bench.image)
        src, dst, length = ORIGIN + 0x100, ORIGIN + 0x8000, 0x400
        result = await bench.copy(src, dst, length)
        return result, before, bytes(bench.image)

    (code, addr, cycles), before, after = simulate(program)
    assert code == ErrorCode.NONE, (code, hex(addr))
    assert first_difference(after, model_copy(before, ORIGIN + 0x100, ORIGIN + 0x8000, 0x400)) is None
    print(cycles)
