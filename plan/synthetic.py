"""Random CircuitFlow graphs for the planner's tests and its timing: a layered data flow
of GEMMs and vector ops in the three paths, with CSR-masked gathers and barriers.

Every choice is drawn from the ``random.Random`` passed in, so a seed gives one graph.
"""

from .ir import BarrierOp, CacheMigrateOp, DecodeOp, Dependency, Graph, PrefillOp, SparsityMask, Tensor

__all__ = ["random_graph"]

_VA_TYPES = ("norm", "rope", "softmax", "activation", "elementwise", "quantize")


def random_graph(rng, n_ops, *, barriers=0, dim_choices=(8, 16, 32), bound_slack=4,
                 max_offset=64, tokens=2, accumulators=0):
    """A random acyclic graph of ``n_ops`` ops (plus ``barriers`` barriers): each op
    reads one or two tensors written earlier (or graph inputs) and writes one new tensor,
    or (with ``accumulators`` ordered tensors) adds a tensor into one of those;
    ``latency_bound`` is ``bound_slack`` times a generous estimate."""
    tensors, ops = [], []
    written = []        # tensors written so far, in the current phase or earlier
    counter = [0]
    accs = [Tensor(f"acc{i}", (16, 16), "bf16", ordered=True) for i in range(accumulators)]
    tensors += accs

    def tensor(shape, dtype):
        counter[0] += 1
        t = Tensor(f"t{counter[0]}", tuple(shape), dtype)
        tensors.append(t)
        return t

    barrier_at = sorted(rng.sample(range(1, max(n_ops, 2)), min(barriers, max(n_ops - 1, 0))))
    for index in range(n_ops):
        if barrier_at and index == barrier_at[0]:
            barrier_at.pop(0)
            ops.append(BarrierOp(name=f"barrier{index}"))
        cls = rng.choice((DecodeOp, DecodeOp, PrefillOp, CacheMigrateOp))
        extra = {"token": rng.randrange(tokens)} if cls is DecodeOp else {}
        precision = rng.choice(("bf16", "int8"))
        m, k, n = (rng.choice(dim_choices) for _ in range(3))
        es = 2 if precision == "bf16" else 1
        pick = (lambda: rng.choice(written)) if written and rng.random() < 0.8 else None
        mask = None
        if cls is CacheMigrateOp:
            op_type = "migrate"
            src = pick() if pick else tensor((m, k), "bf16")
            inputs, out, shape = (src.name,), tensor(src.shape, src.dtype), ()
        elif accs and rng.random() < 0.2:
            # acc += src, as the MoE adds each expert's rows into the layer output.
            op_type, precision, shape = "elementwise", "bf16", (16, 16, 2)
            m, n = 16, 16
            out = rng.choice(accs)
            src = pick() if pick else tensor((16, 16), "bf16")
            inputs = (src.name, out.name) if src is not out else (out.name,)
        elif rng.random() < 0.5:
            # The MA reads int8/bf16 operands; A is an earlier result of that precision.
            fits = [t for t in written if t.dtype == precision and len(t.shape) == 2]
            if fits and rng.random() < 0.8:
                a = rng.choice(fits)
                m, k = a.shape
            else:
                a = tensor((m, k), precision)
            shape = (m, k, n)
            op_type = "gemm"
            b = tensor((k, n), precision)
            inputs, out = (a.name, b.name), tensor((m, n), "fp32")
        else:
            op_type = rng.choice(_VA_TYPES + ("gather",))
            src = pick() if pick else tensor((m, n), "bf16")
            m, n = (src.shape + (1,))[:2]
            inputs, out = (src.name,), tensor(src.shape, precision)
            shape = (m, n, es)
            if op_type == "gather":
                row_ptr = tensor((m + 1,), "int32")
                col_idx = tensor((rng.randrange(1, m * n + 1),), "int32")
                inputs += (row_ptr.name, col_idx.name)
                mask = SparsityMask("csr", (m, n), (row_ptr.name, col_idx.name))
        nbytes = sum(t.nbytes for t in tensors if t.name in inputs) + out.nbytes
        estimate = 200 + (m * k * n) // 4 + 4 * nbytes
        deps = tuple(Dependency(t, "read", rng.randrange(max_offset + 1))
                     for t in inputs if rng.random() < 0.3)
        ops.append(cls(name=f"op{index}", op_type=op_type, inputs=inputs,
                       outputs=(out.name,), precision=precision, tile_shape=shape,
                       latency_bound=bound_slack * estimate, dependency=deps,
                       sparsity_mask=mask, **extra))
        written.append(out)
    stages = {"prefill_start": rng.randrange(0, 200)}
    for token in range(tokens):
        stages[f"decode_token_{token}_start"] = rng.randrange(0, 200)
    return Graph(tuple(tensors), tuple(ops), stages)
