"""The VA (vector accelerator): ``v4hw_va``."""

from sim.blocks import Block, CapsField, Param


def _fn_lanes(params):
    return params["FN_LANES"] or None          # 0: DATA_WIDTH/16, the bus rate


def _check(params):
    from hdl.va.core import check_parameters
    check_parameters(params["L"], params["DATA_WIDTH"], _fn_lanes(params))


def _top(params):
    from hdl.top.va import VaTop
    return VaTop(lanes=params["L"], data_width=params["DATA_WIDTH"], fn_lanes=_fn_lanes(params))


def _caps(params):
    from hdl.top.va import caps_word
    return caps_word(params["L"], params["DATA_WIDTH"], _fn_lanes(params))


DESCRIPTOR = Block(
    name="va",
    verilog_name="v4hw_va",
    summary="vector accelerator: element-wise, row and indexed commands on L lanes",
    params=(
        Param("L", 32, "lanes, a power of two in 4..64, at least DATA_WIDTH/16"),
        Param("DATA_WIDTH", 128, "memory bus width in bits: 64, 128, 256 or 512"),
        Param("FN_LANES", 0, "elements a cycle through the function units, a power of two "
                             "in 2..DATA_WIDTH/16; 0: DATA_WIDTH/16"),
    ),
    check=_check,
    top=_top,
    caps_layout=(
        CapsField("L", 0, 8, "lanes", param="L"),
        CapsField("BUS_BYTES", 8, 8, "memory bus width in bytes"),
        CapsField("FN_LANES", 16, 8, "function lanes"),
    ),
    caps=_caps,
    bench="sim.va_driver:VaBench",
    gtkw_groups="sim.va_driver:VA_GTKW_GROUPS",
    smoke_params={"L": 8, "FN_LANES": 2},
    # The ECP5-85 has 156 multiplier blocks: the VA's function units fit at two lanes
    # (docs/fpga.md, "Timing: the VA").
    board_defaults={"ulx3s-85f": {"FN_LANES": 2}},
)
