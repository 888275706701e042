"""The IR's checks, each raising the design notes' error with the op and the numbers.

- :func:`check_latency`: every op's block model against its ``latency_bound``
  (:class:`LatencyBoundViolated`);
- :func:`check_masks`: sparsity masks are CSR, on an op whose block gathers through one,
  of the op's ``(rows, length)`` (:class:`MaskLayoutMismatch`);
- :func:`find_cycle` / :func:`check_acyclic`: the STDG has no cycle
  (:class:`STDGCycleDetected`);
- :func:`check_graph`: all three, masks and cycles first.
"""

from .errors import LatencyBoundViolated, MaskLayoutMismatch, STDGCycleDetected
from .ir import BarrierOp
from .machine import MASKED_OP_TYPES

__all__ = ["check_latency", "check_masks", "find_cycle", "check_acyclic", "check_graph"]


def check_latency(graph, machine):
    """``{op name: model cycles}``; raises LatencyBoundViolated for the first op (in
    program order) whose model exceeds its bound."""
    cycles = {}
    for op in graph.ops:
        if isinstance(op, BarrierOp):
            continue
        need = machine.cycles(op, graph)
        if need > op.latency_bound:
            raise LatencyBoundViolated(op.name, op.latency_bound, machine.kind_of(op), need)
        cycles[op.name] = need
    return cycles


def check_masks(graph):
    tensors = graph.tensor
    for op in graph.ops:
        mask = getattr(op, "sparsity_mask", None)
        if mask is None:
            continue
        if op.op_type not in MASKED_OP_TYPES:
            raise MaskLayoutMismatch(f"MaskLayoutMismatch: op {op.name} ({op.op_type}) "
                                     f"takes no sparsity mask; only "
                                     f"{', '.join(sorted(MASKED_OP_TYPES))} gather through one")
        if mask.layout != "csr":
            raise MaskLayoutMismatch(f"MaskLayoutMismatch: op {op.name}'s sparsity mask is "
                                     f"{mask.layout}; the VA's gather needs CSR")
        if len(op.tile_shape) < 2 or mask.shape != tuple(op.tile_shape[:2]):
            raise MaskLayoutMismatch(f"MaskLayoutMismatch: op {op.name}'s mask has shape "
                                     f"{mask.shape}, the op gathers "
                                     f"{tuple(op.tile_shape[:2])} (rows, length)")
        if len(mask.tensors) != 2:
            raise MaskLayoutMismatch(f"MaskLayoutMismatch: op {op.name}'s CSR mask names "
                                     f"{len(mask.tensors)} tensors, not (row_ptr, col_idx)")
        rows, cols = mask.shape
        row_ptr, col_idx = (tensors[t] for t in mask.tensors)
        if row_ptr.dtype != "int32" or row_ptr.shape != (rows + 1,):
            raise MaskLayoutMismatch(f"MaskLayoutMismatch: op {op.name}'s row pointers "
                                     f"{row_ptr.name} are {row_ptr.dtype}{list(row_ptr.shape)}, "
                                     f"not int32[{rows + 1}]")
        if col_idx.dtype != "int32" or len(col_idx.shape) != 1 or col_idx.shape[0] > rows * cols:
            raise MaskLayoutMismatch(f"MaskLayoutMismatch: op {op.name}'s column indices "
                                     f"{col_idx.name} are {col_idx.dtype}{list(col_idx.shape)}, "
                                     f"not int32[n] with n <= {rows * cols}")


def find_cycle(graph):
    """A cycle of the STDG as ``(ops, tensors)`` (the first op repeated at the end), or
    None. Deterministic: the search starts from ops in program order."""
    succ = {}
    for src, dst, tensor in graph.edges():
        succ.setdefault(src, []).append((dst, tensor))
    state = {}          # name -> 1 on the path, 2 done
    for root in (op.name for op in graph.ops if not isinstance(op, BarrierOp)):
        if root in state:
            continue
        path, via = [root], []
        stack = [iter(succ.get(root, ()))]
        state[root] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
                if via:
                    via.pop()
                continue
            nxt, tensor = step
            if state.get(nxt) == 1:
                start = path.index(nxt)
                return path[start:] + [nxt], via[start:] + [tensor]
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                via.append(tensor)
                stack.append(iter(succ.get(nxt, ())))
    return None


def check_acyclic(graph):
    cycle = find_cycle(graph)
    if cycle is not None:
        raise STDGCycleDetected(*cycle)


def check_graph(graph, machine):
    """Every check; returns the model cycles of every op."""
    check_masks(graph)
    check_acyclic(graph)
    return check_latency(graph, machine)
