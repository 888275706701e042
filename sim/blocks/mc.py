"""The MC (memory controller front end): ``v4hw_mc``."""

from sim.blocks import Block, CapsField, Param


def _check(params):
    from hdl.mc.core import check_parameters
    from hdl.mc.prefetch import check_lines
    check_parameters(params["CHANNELS"], params["DATA_WIDTH"], params["AGE_LIMIT"])
    check_lines(params["PREFETCH_LINES"])


def _top(params):
    from hdl.top.mc import McTop
    return McTop(channels=params["CHANNELS"], data_width=params["DATA_WIDTH"],
                 age_limit=params["AGE_LIMIT"], prefetch_lines=params["PREFETCH_LINES"])


def _caps(params):
    from hdl.top.mc import caps_word
    return caps_word(params["CHANNELS"], params["DATA_WIDTH"], params["PREFETCH_LINES"])


DESCRIPTOR = Block(
    name="mc",
    verilog_name="v4hw_mc",
    summary="memory controller: client channels onto one AXI4 master, with prefetch",
    params=(
        Param("CHANNELS", 4, "client channels, 1..8"),
        Param("DATA_WIDTH", 128, "memory bus width in bits: 64, 128, 256 or 512"),
        Param("AGE_LIMIT", 8, "arbitration rounds a request may wait, 1..255"),
        Param("PREFETCH_LINES", 32, "lines of the prefetch buffer"),
    ),
    check=_check,
    top=_top,
    caps_layout=(
        CapsField("CHANNELS", 0, 4, "client channels", param="CHANNELS"),
        CapsField("BUS_BYTES", 8, 8, "memory bus width in bytes"),
        CapsField("MAX_BURST", 16, 8, "the largest burst in beats"),
        CapsField("PREFETCH_LINES", 24, 8, "prefetch-buffer lines", param="PREFETCH_LINES"),
    ),
    caps=_caps,
    bench="sim.mc_driver:McBench",
    gtkw_groups="sim.mc_driver:MC_GTKW_GROUPS",
)
