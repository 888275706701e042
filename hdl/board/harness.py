"""The board harness: a standalone block with a UART bridge and on-chip memory."""

from amaranth.hdl import ClockDomain, DomainRenamer, Module, Shape
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.board.axi_ram import AxiRam
from hdl.board.bridge import UartBridge
from hdl.board.uart import UartRx, UartTx, check_divisor
from hdl.common.axi import AXI4LiteSignature, AXI4Signature, flat_interface

__all__ = ["BoardHarness", "is_kernel_port"]


def is_kernel_port(name):
    """Whether ``name`` is a port of the standalone-top (RTL kernel) interface."""
    return (name in ("ap_clk", "ap_rst_n", "interrupt")
            or name.startswith(("s_axi_control_", "m_axi_gmem_")))


class BoardHarness(wiring.Component):
    """Wraps a standalone top (``v4hw_*``: ``ap_clk``, ``ap_rst_n``, ``s_axi_control_*``,
    ``m_axi_gmem_*``, ``interrupt``) for a board.

    * ``clk`` / ``rst`` (active high, synchronous) clock the harness and become the
      block's ``ap_clk`` and ``ap_rst_n``. The block defines its own domain from those
      ports (renamed ``block`` here, so it stays apart from the harness's ``sync``); both
      are the same clock net.
    * ``uart_rx`` / ``uart_tx``: the :class:`~hdl.board.bridge.UartBridge` protocol at
      ``divisor`` clock cycles per bit; it reaches ``s_axi_control`` and the memory.
    * ``m_axi_gmem`` goes to :class:`~hdl.board.axi_ram.AxiRam` of ``mem_size`` bytes, whose
      physical addresses start at 0.
    * ``interrupt`` is passed out (for a LED).
    """

    def __init__(self, block, data_width, *, divisor, mem_size=64 * 1024):
        check_divisor(divisor)
        extra = sorted(name for name in block.signature.members if not is_kernel_port(name))
        if extra:
            # Ports left open on a board would let synthesis remove what they feed.
            raise ValueError(f"{type(block).__name__} has ports beyond the kernel interface "
                             f"({', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''}), "
                             "so it does not stand alone on a board")
        self.block, self.data_width = block, data_width
        # The control port's address width is the block's (16; the tile's 20): a narrower
        # bridge would leave the windows above the first unreachable, and synthesis would
        # remove the blocks behind them.
        self.ctrl_addr_bits = Shape.cast(
            block.signature.members["s_axi_control_awaddr"].shape).width
        self.divisor, self.mem_size = divisor, mem_size
        super().__init__({
            "clk": In(1),
            "rst": In(1),
            "uart_rx": In(1, init=1),
            "uart_tx": Out(1, init=1),
            "interrupt": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = sync = ClockDomain()
        m.d.comb += [sync.clk.eq(self.clk), sync.rst.eq(self.rst)]
        block = self.block
        m.submodules.block = DomainRenamer({"sync": "block"})(block)
        m.submodules.uart_rx = rx = UartRx(self.divisor)
        m.submodules.uart_tx = tx = UartTx(self.divisor)
        m.submodules.bridge = bridge = UartBridge(timeout=16 * 10 * self.divisor,
                                                  ctrl_addr_bits=self.ctrl_addr_bits)
        m.submodules.ram = ram = AxiRam(self.data_width, self.mem_size)
        m.d.comb += [block.ap_clk.eq(self.clk), block.ap_rst_n.eq(~self.rst),
                     rx.rx.eq(self.uart_rx), self.uart_tx.eq(tx.tx),
                     self.interrupt.eq(block.interrupt)]
        wiring.connect(m, rx.data, bridge.rx)
        wiring.connect(m, bridge.tx, tx.data)
        wiring.connect(m, bridge.mem, ram.host)
        control = flat_interface(m, block, "s_axi_control",
                                 AXI4LiteSignature(self.ctrl_addr_bits, 32).flip())
        wiring.connect(m, bridge.ctrl, control)
        gmem = flat_interface(m, block, "m_axi_gmem", AXI4Signature(64, self.data_width, 1))
        wiring.connect(m, gmem, ram.axi)
        return m
