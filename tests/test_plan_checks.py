"""The IR's checks (plan/checks.py): LatencyBoundViolated from the blocks' latency models
(the MA's is golden/ma_latency.py), MaskLayoutMismatch, STDGCycleDetected."""

import pytest

from golden.ma_latency import MaCommand, ma_cycles
from plan.checks import check_graph, check_latency, check_masks, find_cycle
from plan.dstp import plan
from plan.errors import IRError, LatencyBoundViolated, MaskLayoutMismatch, STDGCycleDetected
from plan.ir import BarrierOp, DecodeOp, Graph, PrefillOp, SparsityMask, Tensor
from plan.machine import LatencyModel, LinearLatency, Machine
from plan.synthetic import random_graph
from sim.seed import test_seed


def q_proj(bound, precision="bf16"):
    tensors = (Tensor("x", (16, 64), precision), Tensor("wq", (64, 32), precision),
               Tensor("q", (16, 32), "fp32"))
    op = PrefillOp(name="q_proj", op_type="gemm", inputs=("x", "wq"), outputs=("q",),
                   precision=precision, tile_shape=(16, 64, 32), latency_bound=bound)
    return Graph(tensors, (op,))


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_latency_bound_from_the_ma_model(precision):
    es = 2 if precision == "bf16" else 1
    model = ma_cycles(MaCommand(m=16, k=64, n=32, bf16=precision == "bf16", lda=64 * es,
                                ldb=32 * es, ldc=32 * 4, b_addr=16 * 64 * es,
                                c_addr=16 * 64 * es + 64 * 32 * es),
                      p=8, data_width=128, latency=6)
    assert check_latency(q_proj(model, precision), Machine()) == {"q_proj": model}
    with pytest.raises(LatencyBoundViolated) as info:
        check_latency(q_proj(120, precision), Machine())
    assert str(info.value) == (f"LatencyBoundViolated: op q_proj requires 120 cycles but "
                               f"the MA guarantees {model}")
    assert (info.value.op, info.value.bound, info.value.cycles) == ("q_proj", 120, model)
    with pytest.raises(LatencyBoundViolated):
        check_latency(q_proj(model - 1, precision), Machine())


def test_ma_command_limits():
    t = (Tensor("a", (129, 8), "int8"), Tensor("b", (8, 8), "int8"), Tensor("c", (129, 8), "fp32"))
    g = Graph(t, (PrefillOp(name="big", op_type="gemm", inputs=("a", "b"), outputs=("c",),
                            precision="int8", tile_shape=(129, 8, 8), latency_bound=99_999),))
    with pytest.raises(IRError, match=r"op big: the MA takes M, K and N in 1..128, not "
                                      r"\(129, 8, 8\)"):
        check_latency(g, Machine())
    g = Graph(t, (PrefillOp(name="flat", op_type="gemm", inputs=("a", "b"), outputs=("c",),
                            tile_shape=(8, 8), latency_bound=99_999),))
    with pytest.raises(IRError, match=r"op flat: a gemm's tile_shape is \(m, k, n\)"):
        check_latency(g, Machine())


def test_other_models_plug_in():
    class Fixed(LatencyModel):
        block, msu = "va", "one row"

        def cycles(self, op, graph):
            return 340

    t = (Tensor("x", (4,), "bf16"), Tensor("y", (4,), "bf16"))
    g = Graph(t, (DecodeOp(name="norm0", op_type="norm", inputs=("x",), outputs=("y",),
                           latency_bound=339),))
    machine = Machine(models={"ma": Machine().models["ma"], "va": Fixed(),
                              "cme": LinearLatency("cme")})
    with pytest.raises(LatencyBoundViolated, match="op norm0 requires 339 cycles but the VA "
                                                   "guarantees 340"):
        check_latency(g, machine)
    # The linear model: setup + bytes moved / bytes per cycle, rounded up.
    assert check_latency(Graph(t, (DecodeOp(name="n", op_type="norm", inputs=("x",),
                                            outputs=("y",), latency_bound=99),)),
                         Machine(models={"ma": Machine().models["ma"],
                                         "va": LinearLatency("va", setup=10, bytes_per_cycle=3),
                                         "cme": LinearLatency("cme")})) == {"n": 10 + 6}


def test_unknown_op_type_and_bad_model():
    t = (Tensor("x", (4,), "bf16"),)
    g = Graph(t, (DecodeOp(name="f", op_type="fuse", inputs=("x",), latency_bound=9),))
    with pytest.raises(IRError, match="op f: no block runs op_type 'fuse'"):
        check_latency(g, Machine())

    class Broken(LatencyModel):
        def cycles(self, op, graph):
            return 0

    g = Graph(t, (DecodeOp(name="n", op_type="norm", inputs=("x",), latency_bound=9),))
    machine = Machine(models={"ma": Machine().models["ma"], "va": Broken(),
                              "cme": LinearLatency("cme")})
    with pytest.raises(IRError, match="the va latency model gave 0"):
        check_latency(g, machine)


def masked(layout="csr", shape=(1, 64), op_type="attention", row_ptr=(2,), col_idx=(16,),
           tensors=("row_ptr", "col_idx")):
    t = (Tensor("k", (64, 32), "bf16"), Tensor("row_ptr", row_ptr, "int32"),
         Tensor("col_idx", col_idx, "int32"), Tensor("o", (1, 32), "bf16"))
    op = DecodeOp(name="decode_attn", op_type=op_type, inputs=("k", "row_ptr", "col_idx"),
                  outputs=("o",), tile_shape=(1, 64, 32), latency_bound=10_000,
                  sparsity_mask=SparsityMask(layout, shape, tensors))
    return Graph(t, (op,))


def test_csr_mask_passes():
    check_masks(masked())
    check_graph(masked(), Machine())


@pytest.mark.parametrize("kwargs, message", [
    ({"layout": "dense"}, "op decode_attn's sparsity mask is dense; the VA's gather needs CSR"),
    ({"shape": (1, 128)}, "op decode_attn's mask has shape (1, 128), the op gathers (1, 64)"),
    ({"op_type": "gemm"}, "op decode_attn (gemm) takes no sparsity mask"),
    ({"row_ptr": (1,)}, "row pointers row_ptr are int32[1], not int32[2]"),
    ({"col_idx": (65,)}, "column indices col_idx are int32[65], not int32[n] with n <= 64"),
    ({"tensors": ("row_ptr",)}, "names 1 tensors, not (row_ptr, col_idx)"),
])
def test_mask_layout_mismatch(kwargs, message):
    with pytest.raises(MaskLayoutMismatch) as info:
        check_masks(masked(**kwargs))
    assert str(info.value).startswith("MaskLayoutMismatch: op decode_attn")
    assert message in str(info.value)


def chain(names, barrier_after=None):
    """Op i reads tensor names[i-1] and writes names[i]; the first reads the last's
    output, which closes a cycle unless a barrier cuts it."""
    tensors = tuple(Tensor(f"t_{n}", (8,), "bf16") for n in names)
    ops = []
    for i, n in enumerate(names):
        ops.append(DecodeOp(name=n, op_type="norm", inputs=(f"t_{names[i - 1]}",),
                            outputs=(f"t_{n}",), latency_bound=999))
        if n == barrier_after:
            ops.append(BarrierOp(name="cut"))
    return Graph(tensors, tuple(ops))


def test_cycle_named_in_order():
    with pytest.raises(STDGCycleDetected) as info:
        check_graph(chain(["a", "b", "c"]), Machine())
    assert info.value.ops == ("a", "b", "c", "a")
    assert info.value.tensors == ("t_a", "t_b", "t_c")
    assert str(info.value) == ("STDGCycleDetected: STDG cycle a -[t_a]-> b -[t_b]-> c "
                               "-[t_c]-> a; a BarrierOp between two of these ops breaks it")
    with pytest.raises(STDGCycleDetected):
        plan(chain(["a", "b", "c"]), Machine())


@pytest.mark.parametrize("cut", ["a", "b"])
def test_barrier_breaks_the_cycle(cut):
    assert find_cycle(chain(["a", "b", "c"], barrier_after=cut)) is None
    check_graph(chain(["a", "b", "c"], barrier_after=cut), Machine())


def test_reading_and_writing_one_tensor_is_no_cycle():
    t = (Tensor("a", (8, 8), "bf16"), Tensor("b", (8, 8), "bf16"), Tensor("c", (8, 8), "fp32"))
    acc = DecodeOp(name="acc", op_type="gemm", inputs=("a", "b", "c"), outputs=("c",),
                   tile_shape=(8, 8, 8), latency_bound=10_000)
    assert find_cycle(Graph(t, (acc,))) is None


def test_random_cycles_found():
    """Random acyclic graphs have no cycle; adding one edge that closes a path gives a
    cycle whose every step is a real edge of the graph."""
    rng = test_seed()
    for _ in range(20):
        g = random_graph(rng, rng.randrange(2, 40), accumulators=rng.randrange(3))
        assert find_cycle(g) is None
        # An ordered tensor's edges follow program order and close no cycle.
        edges = [(src, dst, t) for src, dst, t in g.edges()
                 if not g.tensor[g.op(dst).outputs[0]].ordered
                 and g.op(dst).outputs[0] not in g.op(src).inputs]
        if not edges:
            continue
        # Close a cycle: the producer of some edge now also reads the consumer's output.
        src, dst, _ = rng.choice(edges)
        old = g.op(src)
        out = g.op(dst).outputs[0]
        new = type(old)(**{f: getattr(old, f) for f in
                           ("name", "op_type", "outputs", "precision", "tile_shape",
                            "latency_bound", "dependency", "sparsity_mask")},
                        inputs=old.inputs + (out,),
                        **({"token": old.token} if isinstance(old, DecodeOp) else {}))
        cyclic = Graph(g.tensors, tuple(new if op.name == src else op for op in g.ops),
                       dict(g.stages))
        ops, tensors = find_cycle(cyclic)
        assert ops[0] == ops[-1] and len(set(ops[:-1])) == len(ops) - 1
        real = set(cyclic.edges())
        assert all((a, b, t) in real for a, b, t in zip(ops[:-1], ops[1:], tensors, strict=True))
