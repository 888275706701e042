"""The MA (matrix accelerator): ``v4hw_ma``."""

from sim.blocks import Block, CapsField, Param


def _check(params):
    from hdl.ma.core import check_parameters
    check_parameters(params["P"], params["DATA_WIDTH"])


def _top(params):
    from hdl.top.ma import MaTop
    return MaTop(p=params["P"], data_width=params["DATA_WIDTH"])


def _caps(params):
    from hdl.top.ma import caps_word
    return caps_word(params["P"], params["DATA_WIDTH"])


DESCRIPTOR = Block(
    name="ma",
    verilog_name="v4hw_ma",
    summary="matrix accelerator: a P×P systolic array for int8 and bf16 GEMM tiles",
    params=(
        Param("P", 8, "array size, a power of two in 2..32"),
        Param("DATA_WIDTH", 128, "memory bus width in bits: 64, 128, 256 or 512"),
    ),
    check=_check,
    top=_top,
    caps_layout=(
        CapsField("P", 0, 8, "array size", param="P"),
        CapsField("BUS_BYTES", 8, 8, "memory bus width in bytes"),
        CapsField("MAX_DIM", 16, 8, "the largest M, K and N (128 reads as 0x80)"),
        CapsField("TAT_ENTRIES", 24, 4, "translation table entries"),
    ),
    caps=_caps,
    bench="sim.ma_driver:MaBench",
    gtkw_groups="sim.ma_driver:MA_GTKW_GROUPS",
    smoke_params={"P": 2, "DATA_WIDTH": 64},
)
