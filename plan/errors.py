"""The errors of the CircuitFlow IR and the DSTP planner (the design notes' names).

Every one is a ``ValueError`` (a bad input, not a bug) whose message names the op and the
numbers, so a command line can print it as one line.
"""

__all__ = ["IRError", "IRFormatError", "LatencyBoundViolated", "STDGCycleDetected",
           "MaskLayoutMismatch", "ScheduleInfeasible"]


class IRError(ValueError):
    """A graph that breaks a rule of the IR (unknown tensor, duplicate name, ...)."""


class IRFormatError(IRError):
    """A JSON file that is not a valid serialised graph or plan; the message names the
    offending field by its path (``ops[3].latency_bound``)."""


class LatencyBoundViolated(IRError):
    """A block's latency model exceeds an op's ``latency_bound``."""

    def __init__(self, op, bound, block, cycles):
        self.op, self.bound, self.block, self.cycles = op, bound, block, cycles
        super().__init__(f"LatencyBoundViolated: op {op} requires {bound} cycles but the "
                         f"{block.upper()} guarantees {cycles}")


class STDGCycleDetected(IRError):
    """The spatio-temporal dependency graph has a cycle; ``ops`` lists it in order (the
    first op again at the end) and ``tensors`` the tensor of each edge."""

    def __init__(self, ops, tensors):
        self.ops, self.tensors = tuple(ops), tuple(tensors)
        edges = " ".join(f"{a} -[{t}]->" for a, t in zip(ops, tensors, strict=False))
        super().__init__(f"STDGCycleDetected: STDG cycle {edges} {ops[-1]}; a BarrierOp "
                         "between two of these ops breaks it")


class MaskLayoutMismatch(IRError):
    """A sparsity mask the VA's gather cannot take: not CSR, or the wrong shape."""


class ScheduleInfeasible(IRError):
    """No temporal mapping fits within ``max_cycles``."""

    def __init__(self, detail, max_cycles):
        self.max_cycles = max_cycles
        super().__init__(f"ScheduleInfeasible: No feasible temporal mapping found within "
                         f"max_cycles={max_cycles}: {detail}")
