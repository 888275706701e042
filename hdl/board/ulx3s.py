"""The ULX3S (ECP5) board top: 25 MHz oscillator → PLL → the harness at ``freq``."""

from amaranth.hdl import ClockDomain, Instance, Module, Signal
from amaranth.lib import io, wiring

from hdl.board.harness import BoardHarness

__all__ = ["ULX3S_PLL", "Ulx3sTop", "pll_settings"]

OSC_HZ = 25_000_000
VCO_MIN, VCO_MAX = 400e6, 800e6

# The board's 25 MHz input is divided by 1 and multiplied by CLKFB_DIV; the VCO runs at
# output × CLKOP_DIV. Only frequencies with an exact setting are offered, so the clock
# the timing report checks is the clock the design gets.
ULX3S_PLL = {
    50: (2, 12), 75: (3, 8), 100: (4, 6), 125: (5, 5),
}


def pll_settings(freq_mhz):
    """(CLKFB_DIV, CLKOP_DIV) of EHXPLLL for an output of ``freq_mhz`` from 25 MHz."""
    if freq_mhz not in ULX3S_PLL:
        raise ValueError(f"the ULX3S clock must be one of {sorted(ULX3S_PLL)} MHz, not {freq_mhz!r}")
    return ULX3S_PLL[freq_mhz]


class Ulx3sTop(wiring.Component):
    """The harness on the ULX3S: PLL from ``clk25``, reset while the PLL is unlocked or
    the PWR button is held, the UART on the FTDI port, ``interrupt`` on LED 0 and
    "out of reset" on LED 7. No ports of its own: it asks the platform for resources."""

    def __init__(self, block, data_width, *, freq_mhz=100, baud=115_200, mem_size=64 * 1024):
        self.fb_div, self.op_div = pll_settings(freq_mhz)
        self.freq_mhz = freq_mhz
        self.harness = BoardHarness(block, data_width, divisor=round(freq_mhz * 1e6 / baud),
                                    mem_size=mem_size)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.harness = harness = self.harness
        clk25 = io.Buffer("i", platform.request("clk25", 0, dir="-"))
        m.submodules.clk25 = clk25
        clk, locked = Signal(name="pll_clk"), Signal(name="pll_locked")
        m.submodules.pll = Instance(
            "EHXPLLL",
            p_CLKI_DIV=1, p_CLKFB_DIV=self.fb_div, p_CLKOP_DIV=self.op_div,
            p_CLKOP_ENABLE="ENABLED", p_CLKOP_CPHASE=self.op_div // 2, p_CLKOP_FPHASE=0,
            p_FEEDBK_PATH="CLKOP", p_OUTDIVIDER_MUXA="DIVA",
            i_CLKI=clk25.i, i_CLKFB=clk, i_RST=0, i_STDBY=0, i_PHASESEL0=0, i_PHASESEL1=0,
            i_PHASEDIR=0, i_PHASESTEP=0, i_PHASELOADREG=0, i_PLLWAKESYNC=0, i_ENCLKOP=0,
            o_CLKOP=clk, o_LOCK=locked,
        )
        # No constraint on ``clk`` itself: nextpnr derives the PLL's output clock from the
        # 25 MHz input's constraint and the divider settings.

        # The reset request is asynchronous to the PLL clock: two flops bring it over.
        # They power up set, so the design starts in reset.
        m.domains.pll = pll = ClockDomain("pll", reset_less=True, local=True)
        uart = platform.request("uart", 0, dir="-")
        m.submodules.button = button = io.Buffer("i", platform.request("button_pwr", 0, dir="-"))
        m.submodules.uart_rx = uart_rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = uart_tx = io.Buffer("o", uart.tx)
        leds = [io.Buffer("o", platform.request("led", i, dir="-")) for i in (0, 7)]
        m.submodules.led_irq, m.submodules.led_run = leds
        request = Signal()
        sync1, sync2 = Signal(init=1), Signal(init=1)
        m.d.comb += [pll.clk.eq(clk), request.eq(~locked | button.i)]
        m.d.pll += [sync1.eq(request), sync2.eq(sync1)]
        m.d.comb += [harness.clk.eq(clk), harness.rst.eq(sync2),
                     harness.uart_rx.eq(uart_rx.i), uart_tx.o.eq(harness.uart_tx),
                     leds[0].o.eq(harness.interrupt), leds[1].o.eq(~sync2)]
        return m
