"""The integrated tile (MA, VA, MC and the cache-migrate engine on a Muon mesh):
``v4hw_tile``."""

from sim.blocks import Block, CapsField, Param


def _args(params):
    return dict(p=params["P"], lanes=params["L"], fn_lanes=params["FN_LANES"] or None,
                data_width=params["DATA_WIDTH"], cols=params["COLS"], rows=params["ROWS"],
                flit_bits=params["FLIT_BITS"] or None, credits=params["CREDITS"],
                prefetch_lines=params["PREFETCH_LINES"], rsv_slots=params["RSV_SLOTS"])


def _check(params):
    from hdl.tile.top import check_parameters
    check_parameters(**_args(params))


def _top(params):
    from hdl.tile.top import TileTop
    return TileTop(**_args(params))


def _caps(params):
    from hdl.tile.control import caps_word
    from hdl.tile.top import BLOCKS
    from spec.tile import TileBlock
    return caps_word([TileBlock.TILE, *BLOCKS.values()], params["COLS"], params["ROWS"],
                     params["DATA_WIDTH"])


DESCRIPTOR = Block(
    name="tile",
    verilog_name="v4hw_tile",
    summary="the integrated tile: MA, VA, MC and cache-migrate engine on a Muon mesh",
    params=(
        Param("P", 8, "the MA's array size, a power of two in 2..32"),
        Param("L", 32, "the VA's lanes, a power of two in 4..64, at least DATA_WIDTH/16"),
        Param("FN_LANES", 0, "the VA's function lanes (0: DATA_WIDTH/16)"),
        Param("DATA_WIDTH", 128, "memory bus width in bits: 64, 128, 256 or 512"),
        Param("COLS", 2, "mesh columns, 2..8"),
        Param("ROWS", 2, "mesh rows, 2..8"),
        Param("FLIT_BITS", 0, "flit data bits (0: the least a bus word needs, DATA_WIDTH + 17 "
                              "at 128 bits)"),
        Param("CREDITS", 32, "flit credits of each requester NI, 24..255"),
        Param("PREFETCH_LINES", 32, "lines of the MC's prefetch buffer"),
        Param("RSV_SLOTS", 2, "reservation slots of the mesh's RBR arbiter, 1..32"),
    ),
    check=_check,
    top=_top,
    caps_layout=(
        CapsField("WINDOWS", 0, 16, "one bit per control window that answers"),
        CapsField("COLS", 16, 4, "mesh columns", param="COLS"),
        CapsField("ROWS", 20, 4, "mesh rows", param="ROWS"),
        CapsField("BUS_BYTES", 24, 8, "memory bus width in bytes"),
    ),
    caps=_caps,
    bench="sim.tile_driver:TileBench",
    gtkw_groups="sim.tile_driver:TILE_GTKW_GROUPS",
    smoke_params={"P": 2, "L": 4, "DATA_WIDTH": 64},
)
