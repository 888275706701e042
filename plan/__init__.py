"""CircuitFlow IR and the DSTP planner: the design notes' scheduling layer (CSA), in
clock cycles, from the blocks' latency models. Pure Python: ``plan`` imports ``spec``
and ``golden`` (the latency models), never the RTL or a simulator (docs/plan.md).
"""

from .checks import check_acyclic, check_graph, check_latency, check_masks, find_cycle
from .cli import cli_main
from .dstp import Plan, plan, plan_from_json
from .errors import (
    IRError,
    IRFormatError,
    LatencyBoundViolated,
    MaskLayoutMismatch,
    ScheduleInfeasible,
    STDGCycleDetected,
)
from .ir import (
    BarrierOp,
    CacheMigrateOp,
    DecodeOp,
    Dependency,
    Graph,
    PrefillOp,
    SparsityMask,
    Tensor,
    graph_from_json,
    graph_to_json,
)
from .machine import Block, LatencyModel, LinearLatency, Machine, MaLatency, VaLatency

__all__ = ["IRError", "IRFormatError", "LatencyBoundViolated", "STDGCycleDetected",
           "MaskLayoutMismatch", "ScheduleInfeasible", "Tensor", "Dependency",
           "SparsityMask", "PrefillOp", "DecodeOp", "CacheMigrateOp", "BarrierOp", "Graph",
           "graph_to_json", "graph_from_json", "LatencyModel", "MaLatency", "VaLatency",
           "LinearLatency", "Block", "Machine", "check_graph", "check_latency", "check_masks", "find_cycle",
           "check_acyclic", "Plan", "plan", "plan_from_json",
           "cli_main"]
