"""Host-level cocotb driver of the ``v4hw_tile`` top: :class:`TileBench`.

One bench owns the tile's clock, reset, ``s_axi_control`` master and the memory behind
``m_axi_gmem`` (:class:`sim.bfm.GmemModel`, as every block's bench). Each block is driven
by its own standalone bench class through a *view* that shares all of that and reaches
the block's registers at its window (:func:`spec.tile.base`):

* :attr:`TileBench.ma`: a :class:`sim.ma_driver.MaBench` (``gemm`` checks C against
  ``golden.ma`` bit for bit, nothing else written, CTR after the last write);
* :attr:`TileBench.va`: a :class:`sim.va_driver.VaBench` (``check`` runs a command and
  compares its whole memory window with ``golden.va.execute``);
* :meth:`TileBench.migrate_copy`: a copy by the cache-migrate engine, checked byte for
  byte.

Cycle counts through the tile are comparable with the standalone tops' (same bench
code, same memory latency). The tile's control decoder performs a register write one
cycle later than a standalone top (``hdl/tile/control.py``): the MA's ``Outcome.cycles``
(CTR − the cycle the bench computes START was performed) therefore includes that one
cycle; the VA's (CTR − the timebase at START's B response) does not, both moving alike.
"""

import logging

import numpy as np

from hdl.ma import regmap as ma_regmap
from hdl.mc import regmap as mc_regmap
from hdl.muon import regmap as muon_regmap
from hdl.tile import migrate_regmap, sequencer_regmap
from hdl.tile import regmap as tile_regmap
from hdl.tile.control import caps_word
from hdl.va import regmap as va_regmap
from spec.codes import BlockId, ErrorCode
from spec.tile import TileBlock, base

from .bfm import KernelBench
from .blocks import descriptor
from .ma_driver import NO_TAT_ENTRY, TAT_ENTRIES, MaBench
from .regs import Registers
from .va_driver import VaBench

__all__ = ["TILE_GTKW_GROUPS", "TileBench", "WINDOWS"]

WINDOWS = (TileBlock.TILE, TileBlock.MA, TileBlock.VA, TileBlock.MC, TileBlock.MIGRATE,
           TileBlock.MESH, TileBlock.SEQUENCER)
"""The windows the tile answers (CAPS.WINDOWS)."""
MAPS = {"tile": tile_regmap, "ma": ma_regmap, "va": va_regmap, "mc": mc_regmap,
        "migrate": migrate_regmap, "mesh": muon_regmap, "sequencer": sequencer_regmap}
ACK_TO_CTR = 40
"""Cycles from the last ``m_axi_gmem`` write response of an MA command to its CTR, at
most, on the tile's 2×2 mesh: the MC's answer, the memory NI, two mesh hops, the MA's NI
and the core's own 2 or 3 cycles."""
IDS = {"tile": BlockId.TILE, "ma": BlockId.MA, "va": BlockId.VA, "mc": BlockId.MC,
       "migrate": BlockId.MIGRATE, "mesh": BlockId.MUON, "sequencer": BlockId.SEQUENCER}


class _View:
    """A block's standalone bench on the tile: the tile bench's clock, control master,
    memory and time origin; the block's registers at its window."""

    def _share(self, tile, name):
        self.tile = tile
        self.dut, self.rng, self.timing = tile.dut, tile.rng, tile.timing
        self.axil, self.ram = tile.axil, tile.ram
        self.regs = tile.block_regs(name)
        self.caps = None

    @property
    def pausing(self):
        """The tile's: a block's view shares the tile's bus models and their pauses."""
        return self.tile.pausing

    @property
    def _reset_edge(self):
        return self.tile._reset_edge

    @property
    def _time_offset(self):
        return self.tile._time_offset


class _MaView(_View, MaBench):
    def __init__(self, tile, p):
        self._share(tile, "ma")
        self.p, self.data_width = p, tile.data_width
        self._control_writes = tile._control_writes
        self.tat = [NO_TAT_ENTRY] * TAT_ENTRIES

    async def run(self, cmd, **kwargs):
        """:meth:`MaBench.run`, with the CTR checked against the last ``m_axi_gmem``
        write response by the tile's bound: that response reaches the MA through the MC,
        the memory NI, the mesh and the MA's NI (``gmem_ack_to_ctr`` keeps the figure;
        ``ack_to_ctr`` is then given relative to the bound, as :meth:`MaBench.gemm`
        checks it for a standalone top)."""
        outcome = await super().run(cmd, **kwargs)
        outcome.gmem_ack_to_ctr = outcome.ack_to_ctr
        if outcome.ack_to_ctr is not None:
            assert 0 <= outcome.ack_to_ctr <= ACK_TO_CTR, (
                f"CTR is {outcome.ack_to_ctr} cycles after the last m_axi_gmem write "
                f"response (the tile's bound: {ACK_TO_CTR})")
            outcome.ack_to_ctr = 0
        return outcome


class _VaView(_View, VaBench):
    def __init__(self, tile, lanes, fn_lanes, window):
        self._share(tile, "va")
        self.lanes, self.data_width, self.fn_lanes = lanes, tile.data_width, fn_lanes
        self.origin, self.size = window
        self.image = np.frombuffer(self.rng.randbytes(self.size), np.uint8).copy()
        self.ram.mem.write(self.origin, self.image.tobytes())


class TileBench(KernelBench):
    """Clock, reset, bus models and host operations for one ``v4hw_tile`` DUT.

    ``p``, ``lanes``, ``fn_lanes``, ``data_width``, ``cols``, ``rows``: the DUT's
    parameters (checked against CAPS and PARAMS). ``latency``: memory read and write
    latency in cycles. ``va_window``: (origin, bytes) of the VA's memory window.
    ``prefetch_window``: the MC's WINDOW after reset (see :meth:`start`).
    """

    BLOCK = BlockId.TILE
    REGMAP = tile_regmap
    CAPS_LAYOUT = descriptor("tile").caps_layout

    def __init__(self, dut, *, p=4, lanes=8, fn_lanes=None, data_width=128, cols=2, rows=2,
                 latency=20, rng=None, va_window=(0x7F00_0000_0000, 1 << 18),
                 prefetch_window=0, bus_log_level=logging.WARNING):
        self.p, self.lanes, self.data_width = p, lanes, data_width
        self.fn_lanes = fn_lanes
        self.cols, self.rows = cols, rows
        self.prefetch_window = prefetch_window
        super().__init__(dut, rng=rng, memory=(latency, latency), bus_log_level=bus_log_level)
        self.watch_control_writes()
        self.ma = _MaView(self, p)
        self.va = _VaView(self, lanes, fn_lanes, va_window)

    async def start(self):
        """Clock, reset, identity (:meth:`check_identity`), then the MC's prefetch
        window: ``prefetch_window`` bytes (0, the default, turns the prefetch off, so
        that every ``m_axi_gmem`` access is a block's own and the blocks' benches can
        check that none follows a command's end)."""
        await super().start()
        await self.block_regs("mc").write("WINDOW", self.prefetch_window)

    def block_regs(self, name):
        """:class:`sim.regs.Registers` of block ``name`` at its window."""
        return Registers(self.axil, MAPS[name], base=base(name))

    def expected_caps(self, caps):
        return self.decode_caps(caps_word(WINDOWS, self.cols, self.rows, self.data_width))

    async def check_identity(self):
        """The tile's ID and CAPS, PARAMS, and every block's ID at its window."""
        await super().check_identity()
        fn_lanes = self.data_width // 16 if self.fn_lanes is None else self.fn_lanes
        params = await self.regs.read_fields("PARAMS")
        assert params == {"MA_P": self.p, "VA_L": self.lanes, "VA_FN_LANES": fn_lanes,
                          "MC_CHANNELS": 2}, f"PARAMS {params}"
        for name, block in IDS.items():
            ident = await self.block_regs(name).read_fields("ID")
            assert ident["BLOCK"] == block, f"window {name}: ID.BLOCK {ident['BLOCK']:#x}"
        await self.ma.check_identity()
        await self.va.check_identity()

    async def migrate_copy(self, src, dst, length, *, max_cycles=200_000):
        """Copy ``length`` bytes from ``src`` to ``dst`` with the cache-migrate engine
        (random source bytes first); check DONE, the destination byte for byte and that
        nothing else changed; return the cycles from START's response to the CTR."""
        regs = self.block_regs("migrate")
        data = self.rng.randbytes(length)
        self.ram.mem.write(src, data)
        before = self.ram.snapshot()
        for name, value in (("SRC", src), ("DST", dst)):
            await regs.write(f"{name}_LO", value & 0xFFFFFFFF)
            await regs.write(f"{name}_HI", value >> 32)
        await regs.write("LENGTH", length)
        await regs.write("START", 1)
        started = self.now()
        deadline = self.timing.edge() + max_cycles
        while True:
            status = await regs.read_fields("STATUS")
            if status["DONE"] or status["ERROR"]:
                break
            assert self.timing.edge() < deadline, f"the copy did not end in {max_cycles} cycles"
        code = ErrorCode(await regs.read("ERROR"))
        assert status["DONE"] and code is ErrorCode.NONE, f"copy ended {code.name} {status}"
        lo = await regs.read("CTR_LO")
        hi = await regs.read("CTR_HI")
        assert bytes(self.ram.mem.read(dst, length)) == data, "the copy differs from its source"
        stray = [a for a in self.ram.changed_bytes(before) if not dst <= a < dst + length]
        assert not stray, f"{len(stray)} bytes outside the destination changed"
        assert not self.ram.violations, "\n".join(self.ram.violations)
        return (hi << 32 | lo) - started


TILE_GTKW_GROUPS = [
    ("clock, reset, interrupt", ["ap_clk", "ap_rst_n", "interrupt"]),
    ("s_axi_control", ["s_axi_control_*"]),
    ("m_axi_gmem read", ["m_axi_gmem_ar*", "m_axi_gmem_r*"]),
    ("m_axi_gmem write", ["m_axi_gmem_aw*", "m_axi_gmem_w*", "m_axi_gmem_b*"]),
    ("control", ["control.decoder.*", "control.regs.irq_source*"]),
    ("MA", ["ma.status.busy", "ma.status.done", "ma.status.error", "ma.core.fsm_state"]),
    ("VA", ["va.status.busy", "va.status.done", "va.status.error", "va.core.fsm_state"]),
    ("migrate", ["migrate.status.busy", "migrate.status.done", "migrate.status.error"]),
    ("NIs", ["ni_ma.inject*", "ni_va.inject*", "ni_migrate.inject*", "ni_mem.inject*",
             "ni_mem.eject*"]),
]
