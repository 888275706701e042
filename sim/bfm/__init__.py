"""The testbench layer the block tests share: bus models and cycle bookkeeping.

* :mod:`sim.bfm.clock`: :class:`Timing` (numbered rising edges), :func:`random_pauses`
  and the bench clock's :data:`PERIOD_NS`;
* :mod:`sim.bfm.axi_mem`: :class:`GmemModel`, the memory behind a block's ``m_axi_gmem``;
* :mod:`sim.bfm.kernel`: :class:`KernelBench`, the base of the block benches (clock,
  reset, register master, ID and CAPS, interrupt, pauses);
* :mod:`sim.bfm.memport`: :class:`PortMemory`, a memory on a block's memory port in the
  Amaranth simulator (the core-level tests);
* :mod:`sim.bfm.credit`: credit links, payloads packed and unpacked through their ``data``
  layouts (:func:`~sim.bfm.credit.pack`, :func:`~sim.bfm.credit.unpack`), and the
  source and sink ends for cocotb and for the Amaranth simulator.
"""

from .axi_mem import PAGE, PHYS_BITS, ErrorRange, GmemModel, ReadBurst, WriteBurst
from .clock import PERIOD_NS, Timing, random_pauses
from .kernel import KernelBench
from .memport import PortMemory

__all__ = ["PAGE", "PHYS_BITS", "PERIOD_NS", "ErrorRange", "GmemModel", "KernelBench",
           "PortMemory", "ReadBurst", "Timing", "WriteBurst", "random_pauses"]
