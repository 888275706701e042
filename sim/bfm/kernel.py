"""What every block bench owns: :class:`KernelBench`.

A standalone top (``hdl/top/*.py``) has the same outside whatever the block: the clock
``ap_clk``, the active-low synchronous reset ``ap_rst_n``, the AXI4-Lite register slave
``s_axi_control`` with the common registers (ID, CAPS, STATUS, ...), a level
``interrupt``, and for the blocks with a memory port the AXI4 master ``m_axi_gmem``. The
base owns those: it builds the AXI4-Lite master and the :class:`~sim.regs.Registers`
helper, the :class:`~sim.bfm.GmemModel` when the block has a memory port, starts the
clock, holds reset, checks ID and CAPS (decoded by the block's CAPS layout), waits for the
interrupt, and puts random pauses on bus channels. A block's bench derives from it and adds
its host view (commands, traffic, scoreboards).

Reset and time. :meth:`KernelBench.start` drives ``ap_rst_n`` low, starts the clock, marks
the first rising edge as edge 0 (:class:`~sim.bfm.Timing`), holds reset for
:attr:`KernelBench.RESET_EDGES` rising edges, releases it at the falling edge after them,
runs :meth:`KernelBench.after_reset` (default: wait for the next rising edge, the first at
which the DUT samples reset high, and remember it as the timebase's origin), then checks
ID and CAPS.
"""

import logging
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, First, RisingEdge, Timer
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster
from cocotbext.axi.axil_channels import AxiLiteAWMonitor, AxiLiteWMonitor

from ..regs import Registers
from .axi_mem import GmemModel
from .clock import PERIOD_NS, Timing, random_pauses
from .progress import report_progress

__all__ = ["KernelBench"]


class KernelBench:
    """Clock, reset, register access and the memory of one standalone block top.

    Subclasses set :attr:`BLOCK` (a :class:`spec.codes.BlockId`), :attr:`REGMAP` (the
    block's generated register map module) and :attr:`CAPS_LAYOUT` (the fields of CAPS:
    the ``caps_layout`` of the block's descriptor, :mod:`sim.blocks`), and implement
    :meth:`expected_caps`.

    ``rng``: a ``random.Random`` (from :func:`sim.seed.test_seed`) for pause patterns and
    the bench's own choices. ``memory``: ``None`` for a block without ``m_axi_gmem``, else
    ``(read_latency, write_latency)`` in cycles for its :class:`~sim.bfm.GmemModel`
    (:attr:`ram`). ``bus_log_level``: level of the bus models' loggers (cocotbext-axi logs
    every access at INFO).
    """

    BLOCK = None
    REGMAP = None
    CAPS_LAYOUT = ()
    RESET_EDGES = 9
    """Rising edges of ``ap_clk`` with ``ap_rst_n`` low, the first included."""

    def __init__(self, dut, *, rng=None, memory=None, bus_log_level=logging.WARNING):
        self.dut = dut
        self.rng = rng or random.Random(0)
        self.timing = Timing(PERIOD_NS)
        prefixes = ("s_axi_control",) if memory is None else ("s_axi_control", "m_axi_gmem")
        for prefix in prefixes:
            logging.getLogger(f"cocotb.{dut._name}.{prefix}").setLevel(bus_log_level)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control"), dut.ap_clk,
                                  dut.ap_rst_n, reset_active_level=False)
        self.ram = None
        if memory is not None:
            read_latency, write_latency = memory
            self.ram = GmemModel(AxiBus.from_prefix(dut, "m_axi_gmem"), dut.ap_clk,
                                 dut.ap_rst_n, self.timing, read_latency=read_latency,
                                 write_latency=write_latency)
        self.regs = Registers(self.axil, self.REGMAP)
        self.caps = None
        self._paused = set()       # ids of the channels with a pause generator
        self._reset_edge = None
        self._time_offset = 0

    # -- clock, reset, identity
    def watch_control_writes(self):
        """Record the clock edge of every AW and W handshake on ``s_axi_control`` in
        ``self._control_writes["aw"]`` / ``["w"]``: the register block performs a write in
        the cycle after the later of the two, which dates a START write
        (:meth:`sim.ma_driver.MaBench.launch`)."""
        self._control_writes = {"aw": [], "w": []}
        axil_write = AxiLiteBus.from_prefix(self.dut, "s_axi_control").write
        for kind, monitor in (("aw", AxiLiteAWMonitor), ("w", AxiLiteWMonitor)):
            cocotb.start_soon(self._stamp(
                monitor(getattr(axil_write, kind), self.dut.ap_clk, self.dut.ap_rst_n,
                        reset_active_level=False), self._control_writes[kind]))

    async def _stamp(self, monitor, edges):
        while True:
            await monitor.recv()
            edges.append(self.timing.edge())

    def idle_inputs(self):
        """Drive the block's own inputs (beyond the buses) to their idle values; called
        with reset asserted, before the clock starts."""

    async def after_reset(self):
        """Runs at the falling edge where reset is released: by default waits for the
        first rising edge that samples it high and makes it the timebase's origin."""
        await RisingEdge(self.dut.ap_clk)
        self._reset_edge = self.timing.edge()

    async def start(self):
        """Start the clock, reset the DUT, run :meth:`after_reset`, check ID and CAPS."""
        dut = self.dut
        dut.ap_rst_n.value = 0
        self.idle_inputs()
        Clock(dut.ap_clk, PERIOD_NS, unit="ns").start()
        await RisingEdge(dut.ap_clk)
        self.timing.mark()
        cocotb.start_soon(report_progress(self.timing))
        for _ in range(self.RESET_EDGES - 1):
            await RisingEdge(dut.ap_clk)
        await FallingEdge(dut.ap_clk)
        dut.ap_rst_n.value = 1
        await self.after_reset()
        await self.check_identity()

    def decode_caps(self, word):
        """``{field: value}`` of a CAPS word by :attr:`CAPS_LAYOUT`; bits outside every
        field must be 0."""
        fields, used = {}, 0
        for f in self.CAPS_LAYOUT:
            mask = (1 << f.width) - 1
            fields[f.name] = word >> f.lsb & mask
            used |= mask << f.lsb
        assert not word & ~used, f"CAPS {word:#x} sets bits outside its fields ({used:#x})"
        return fields

    def expected_caps(self, caps):
        """The CAPS fields the DUT must report, given the fields it reported (``caps``,
        decoded): a bench whose parameters were left open takes them from ``caps`` here."""
        raise NotImplementedError

    async def check_identity(self):
        """ID.BLOCK is :attr:`BLOCK`; CAPS decodes to :meth:`expected_caps`."""
        ident = await self.regs.read_fields("ID")
        assert ident["BLOCK"] == self.BLOCK, (
            f"ID.BLOCK is {ident['BLOCK']:#x}, not the {self.BLOCK.name}'s ({self.BLOCK:#x})")
        self.caps = self.decode_caps(await self.regs.read("CAPS"))
        expected = self.expected_caps(self.caps)
        assert self.caps == expected, f"CAPS reads {self.caps}, expected {expected}"

    # -- time
    def timebase_at(self, edge):
        """The timebase value a register samples at rising edge ``edge``."""
        return edge - self._reset_edge + self._time_offset

    def now(self):
        """Timebase value at the latest rising edge."""
        return self.timebase_at(self.timing.edge())

    async def cycles(self, n):
        """Wait for ``n`` rising edges."""
        for _ in range(n):
            await RisingEdge(self.dut.ap_clk)

    async def wait_interrupt(self, max_cycles, what=""):
        """Return once ``interrupt`` is high; fail after ``max_cycles`` cycles."""
        if not int(self.dut.interrupt.value):
            timeout = Timer(max_cycles * PERIOD_NS, "ns")
            fired = await First(RisingEdge(self.dut.interrupt), timeout)
            assert fired is not timeout, f"no interrupt within {max_cycles} cycles{what}"

    # -- random pauses
    @property
    def pausing(self):
        """Whether some bus channel has random pauses on (:meth:`pause`): the back-pressure
        bin of the functional coverage (:mod:`sim.fcov`)."""
        return bool(self._paused)

    def axil_channels(self):
        """The five channel objects of the AXI4-Lite master (AW, W, B, AR, R)."""
        return [self.axil.write_if.aw_channel, self.axil.write_if.w_channel,
                self.axil.write_if.b_channel, self.axil.read_if.ar_channel,
                self.axil.read_if.r_channel]

    def pause(self, channels, probability):
        """Random idle (sources) or back-pressure (sinks) cycles with ``probability`` on
        each of ``channels``, each from its own ``random.Random`` seeded from :attr:`rng`;
        0 stops them."""
        for channel in channels:
            if probability:
                channel.set_pause_generator(
                    random_pauses(random.Random(self.rng.getrandbits(32)), probability))
                self._paused.add(id(channel))
            else:
                self._paused.discard(id(channel))
                channel.clear_pause_generator()
                # Clearing the generator leaves `pause` at its last value.
                channel.pause = False
