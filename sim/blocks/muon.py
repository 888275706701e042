"""Muon (the on-chip network: a mesh of routers with reserved slots): ``v4hw_muon``."""

from sim.blocks import Block, CapsField, Param


def _args(params):
    return (params["COLS"], params["ROWS"], params["SLOTS"], params["BE_DEPTH"],
            params["RSV_DEPTH"])


def _check(params):
    from hdl.top.muon import check_parameters
    check_parameters(*_args(params))


def _top(params):
    from hdl.top.muon import MuonTop
    cols, rows, slots, be_depth, rsv_depth = _args(params)
    return MuonTop(cols, rows, slots=slots, be_depth=be_depth, rsv_depth=rsv_depth)


def _caps(params):
    from hdl.top.muon import caps_word
    return caps_word(*_args(params))


DESCRIPTOR = Block(
    name="muon",
    verilog_name="v4hw_muon",
    summary="Muon: a COLS×ROWS mesh of routers with a reservation arbiter",
    params=(
        Param("ROWS", 4, "mesh rows"),
        Param("COLS", 4, "mesh columns"),
        Param("SLOTS", 8, "reservation slots"),
        Param("BE_DEPTH", 8, "best-effort virtual channel depth in flits"),
        Param("RSV_DEPTH", 4, "reserved virtual channel depth in flits"),
    ),
    check=_check,
    top=_top,
    caps_layout=(
        CapsField("COLS", 0, 4, "mesh columns (16 reads as 0)", param="COLS"),
        CapsField("ROWS", 4, 4, "mesh rows (16 reads as 0)", param="ROWS"),
        CapsField("SLOTS", 8, 8, "reservation slots", param="SLOTS"),
        CapsField("BE_DEPTH", 16, 8, "best-effort depth", param="BE_DEPTH"),
        CapsField("RSV_DEPTH", 24, 8, "reserved-VC depth", param="RSV_DEPTH"),
    ),
    caps=_caps,
    bench="sim.muon_driver:MuonBench",
    gtkw_groups="sim.muon_driver:MUON_GTKW_GROUPS",
    smoke_params={"ROWS": 2, "COLS": 2, "SLOTS": 1, "BE_DEPTH": 2},
)
