"""The CircuitFlow IR (plan/ir.py): node fields and their validation, the STDG's edges
and phases, and the JSON form (exact round trip, versioned, every malformed input a
one-line IRFormatError naming the field)."""

import json

import pytest

from plan.errors import IRError, IRFormatError
from plan.ir import (
    FORMAT,
    VERSION,
    BarrierOp,
    CacheMigrateOp,
    DecodeOp,
    Dependency,
    Graph,
    PrefillOp,
    SparsityMask,
    Tensor,
    _stamp,
    graph_from_json,
    graph_to_json,
)
from plan.synthetic import random_graph
from sim.seed import test_seed


def small_graph():
    tensors = (Tensor("hidden_states", (4, 32), "bf16"), Tensor("qkv_weight", (32, 32), "bf16"),
               Tensor("qkv_output", (4, 32), "fp32"), Tensor("kv_cache_k", (64, 32), "bf16"),
               Tensor("row_ptr", (2,), "int32"), Tensor("col_idx", (16,), "int32"),
               Tensor("attn_output", (1, 32), "bf16"), Tensor("kv_old", (64, 32), "bf16"))
    ops = (
        PrefillOp(name="prefill_qkv", op_type="gemm", inputs=("hidden_states", "qkv_weight"),
                  outputs=("qkv_output",), precision="bf16", tile_shape=(4, 32, 32),
                  latency_bound=2000, traffic=(4 * 32 * 2 + 32 * 32 * 2, 4 * 32 * 4),
                  dependency=(Dependency("hidden_states", "read", 0),
                              Dependency("qkv_weight", "read", 1))),
        BarrierOp(name="sync"),
        DecodeOp(name="decode_attn", op_type="attention",
                 inputs=("kv_cache_k", "row_ptr", "col_idx"), outputs=("attn_output",),
                 precision="int8", tile_shape=(1, 64, 32), latency_bound=900, token=3,
                 sparsity_mask=SparsityMask("csr", (1, 64), ("row_ptr", "col_idx"))),
        CacheMigrateOp(name="migrate0", op_type="migrate", inputs=("kv_old",),
                       outputs=("kv_cache_k",), latency_bound=600),
    )
    return Graph(tensors, ops, {"prefill_start": 5, "decode_token_3_start": 40})


def test_stages_and_classes():
    g = small_graph()
    assert [op.stage for op in g.ops if not isinstance(op, BarrierOp)] == [
        "prefill_start", "decode_token_3_start", "cache_migrate_start"]
    assert g.stage_zero("prefill_start") == 5 and g.stage_zero("cache_migrate_start") == 0
    assert g.op("prefill_qkv").offset() == 1
    assert [op.traffic_class for op in (g.op("decode_attn"), g.op("prefill_qkv"),
                                        g.op("migrate0"))] == [7, 5, 3]


def test_timestamp_is_not_a_constructor_argument():
    with pytest.raises(TypeError):
        DecodeOp(name="a", op_type="gemm", latency_bound=5, timestamp=100)
    op = DecodeOp(name="a", op_type="gemm", latency_bound=5)
    assert op.timestamp is None and _stamp(op, 100).timestamp == 100 and op.timestamp is None


@pytest.mark.parametrize("kwargs, message", [
    ({"precision": "fp16"}, "precision must be one of"),
    ({"latency_bound": 0}, "latency_bound (cycles) must be an integer >= 1"),
    ({"latency_bound": 3.2e-9}, "latency_bound (cycles) must be an integer"),
    ({"tile_shape": (4, 0, 4)}, "tile_shape extent"),
    ({"inputs": ["x"]}, "inputs must be a tuple"),
    ({"inputs": ("x", "x")}, "listed twice"),
    ({"dependency": (Dependency("y", "read", 0),)}, "names a tensor not in its inputs"),
    ({"dependency": (Dependency("x", "write", 0),)}, "names a tensor not in its outputs"),
    ({"name": "bad name"}, "an op's name must be a name"),
    ({"traffic": (1, 2, 3)}, "traffic must be (bytes read, bytes written)"),
    ({"traffic": (1, -2)}, "traffic's bytes written must be an integer >= 0"),
    ({"sparsity_mask": SparsityMask("csr", (1, 4), ("r", "c"))}, "mask tensor r is not"),
])
def test_op_fields_are_validated(kwargs, message):
    args = {"name": "a", "op_type": "gemm", "inputs": ("x",), "outputs": ("y",),
            "latency_bound": 10} | kwargs
    with pytest.raises(IRError) as info:
        DecodeOp(**args)
    assert message in str(info.value)


@pytest.mark.parametrize("make, message", [
    (lambda: Dependency("x", "modify", 0), "access must be read or write"),
    (lambda: Dependency("x", "read", -1), "offset must be an integer >= 0"),
    (lambda: Tensor("x", (0,), "bf16"), "each extent"),
    (lambda: Tensor("x", (4,), "fp8"), "dtype must be one of"),
    (lambda: SparsityMask("csr", (4,), ("r", "c")), "shape must be (rows, cols)"),
    (lambda: DecodeOp(name="a", op_type="gemm", latency_bound=1, token=-1), "token"),
])
def test_parts_are_validated(make, message):
    with pytest.raises(IRError) as info:
        make()
    assert message in str(info.value)


def test_graph_rules():
    x, y = Tensor("x", (4,), "bf16"), Tensor("y", (4,), "bf16")
    a = DecodeOp(name="a", op_type="norm", inputs=("x",), outputs=("y",), latency_bound=9)
    b = DecodeOp(name="b", op_type="norm", inputs=("y",), outputs=("x",), latency_bound=9)
    c = DecodeOp(name="c", op_type="norm", inputs=("x",), outputs=("y",), latency_bound=9)
    with pytest.raises(IRError, match="tensor y is not declared"):
        Graph((x,), (a,))
    with pytest.raises(IRError, match="tensor x is declared twice"):
        Graph((x, x), ())
    with pytest.raises(IRError, match="op name a is used twice"):
        Graph((x, y), (a, a))
    with pytest.raises(IRError, match="tensor y is written by a and c in one phase"):
        Graph((x, y), (a, c))
    with pytest.raises(IRError, match="stage 'decode_start'"):
        Graph((x, y), (a,), {"decode_start": 1})
    g = Graph((x, y), (a, b, BarrierOp(name="bar"), c))
    # In phase 0 a and b feed each other; after the barrier c reads phase 1's x (none
    # written yet: the graph's input), so no edge crosses the barrier.
    assert g.edges() == [("b", "a", "x"), ("a", "b", "y")]
    assert [[op.name for op in ops] for ops in g.phases()] == [["a", "b"], ["c"]]


def test_json_round_trip_exact():
    g = small_graph()
    stamped = Graph(g.tensors, tuple(_stamp(op, 10 * i) for i, op in enumerate(g.ops)),
                    dict(g.stages))
    for graph in (g, stamped):
        text = graph_to_json(graph)
        back = graph_from_json(text)
        assert back == graph
        assert graph_to_json(back) == text
    obj = json.loads(graph_to_json(stamped))
    assert obj["format"] == FORMAT and obj["version"] == VERSION
    assert [op["timestamp"] for op in obj["ops"]] == [0, 10, 20, 30]


def test_json_round_trip_random_graphs():
    rng = test_seed()
    for _ in range(5):
        g = random_graph(rng, rng.randrange(1, 60), barriers=rng.randrange(3),
                         accumulators=rng.randrange(3))
        text = graph_to_json(g)
        assert graph_from_json(text) == g and graph_to_json(graph_from_json(text)) == text


def _corrupt(edit):
    obj = json.loads(graph_to_json(small_graph()))
    edit(obj)
    return json.dumps(obj)


@pytest.mark.parametrize("text, message", [
    ("{", "not JSON"),
    ("[]", "graph: expected an object, got list"),
    (_corrupt(lambda o: o.update(format="onnx")), "graph.format: expected 'v4hw-circuitflow'"),
    (_corrupt(lambda o: o.update(version=4)), "graph.version: this reader knows versions 1 to 3"),
    (_corrupt(lambda o: o.update(version=True)), "graph.version: this reader knows versions"),
    (_corrupt(lambda o: o["ops"][0].update(traffic=[1])),
     "graph.ops[0].traffic: expected [bytes read, bytes written]"),
    (_corrupt(lambda o: o["ops"][0].update(traffic=[1, -1])),
     "graph.ops[0].traffic[1]: expected an integer >= 0"),
    (_corrupt(lambda o: o.update(version=2)), "graph.ops[0]: unknown field 'traffic'"),
    (_corrupt(lambda o: o["tensors"][0].pop("ordered")), "graph.tensors[0]: missing field 'ordered'"),
    (_corrupt(lambda o: o["tensors"][0].update(ordered=1)),
     "graph.tensors[0].ordered: expected true or false, got 1"),
    (_corrupt(lambda o: [op.pop("traffic", None) for op in o["ops"]] and o.update(version=1)),
     "graph.tensors[0]: unknown field 'ordered'"),
    (_corrupt(lambda o: o.pop("ops")), "graph: missing field 'ops'"),
    (_corrupt(lambda o: o.update(extra=1)), "graph: unknown field 'extra'"),
    (_corrupt(lambda o: o["ops"][0].update(latency_bound="120")),
     "graph.ops[0].latency_bound: expected an integer >= 1, got '120'"),
    (_corrupt(lambda o: o["ops"][0].update(latency_bound=True)),
     "graph.ops[0].latency_bound: expected an integer"),
    (_corrupt(lambda o: o["ops"][0].update(kind="fuse")), "graph.ops[0].kind: expected one of"),
    (_corrupt(lambda o: o["ops"][1].update(op_type="gemm")), "graph.ops[1]: unknown field"),
    (_corrupt(lambda o: o["ops"][0]["dependency"][1].__setitem__(2, -3)),
     "graph.ops[0].dependency[1][2]: expected an integer >= 0"),
    (_corrupt(lambda o: o["ops"][0]["dependency"].append(["x", "read"])),
     "graph.ops[0].dependency[2]: expected [tensor, access, offset]"),
    (_corrupt(lambda o: o["ops"][0]["dependency"][0].__setitem__(1, "rw")),
     "graph: dependency on hidden_states: access must be read or write"),
    (_corrupt(lambda o: o["ops"][2]["sparsity_mask"].pop("shape")),
     "graph.ops[2].sparsity_mask: missing field 'shape'"),
    (_corrupt(lambda o: o["tensors"][0].update(shape=[4, "32"])),
     "graph.tensors[0].shape[1]: expected an integer >= 1"),
    (_corrupt(lambda o: o["ops"][0].update(inputs="hidden_states")),
     "graph.ops[0].inputs: expected a list, got str"),
    (_corrupt(lambda o: o["ops"][0].update(timestamp=-1)), "graph.ops[0].timestamp"),
    (_corrupt(lambda o: o["stages"].update(prefill_start="0")), "graph.stages.prefill_start"),
    (_corrupt(lambda o: o["ops"][0].update(inputs=["nothing"], dependency=[])),
     "graph: op prefill_qkv: tensor nothing is not declared"),
])
def test_json_reader_rejects_malformed_input(text, message):
    with pytest.raises(IRFormatError) as info:
        graph_from_json(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("version", [1, 2])
def test_older_files_read(version):
    """Version 1 had no ``ordered`` (its tensors read as dataflow tensors), versions 1
    and 2 no ``traffic``."""
    obj = json.loads(graph_to_json(small_graph()))
    for op in obj["ops"]:
        if op["kind"] != "barrier":
            op["traffic"] = None
    expected = graph_from_json(json.dumps(obj))
    obj["version"] = version
    for op in obj["ops"]:
        op.pop("traffic", None)
    for t in obj["tensors"]:
        if version == 1:
            del t["ordered"]
    assert graph_from_json(json.dumps(obj)) == expected


def test_ordered_tensor_keeps_program_order():
    """An accumulator written by several ops: reads after the last write before them,
    writes after that write and every read since (RAW, WAR, WAW)."""
    t = (Tensor("acc", (8,), "bf16", ordered=True), Tensor("x", (8,), "bf16"),
         Tensor("y", (8,), "bf16"), Tensor("z", (8,), "bf16"))

    def op(name, inputs, outputs):
        return DecodeOp(name=name, op_type="elementwise", inputs=inputs, outputs=outputs,
                        latency_bound=999)

    ops = (op("r0", ("acc",), ("x",)),            # reads the input value
           op("w1", ("acc", "x"), ("acc",)),      # acc += x
           op("r1", ("acc",), ("y",)),
           op("r2", ("acc",), ("z",)),
           op("w2", ("y",), ("acc",)),            # overwrites: after r1 and r2 read
           BarrierOp(name="bar"),
           op("w3", ("z",), ("acc",)))
    g = Graph(t, ops)
    assert g.edges() == [("r0", "w1", "x"), ("r0", "w1", "acc"), ("w1", "r1", "acc"),
                         ("w1", "r2", "acc"), ("r1", "w2", "y"), ("w1", "w2", "acc"),
                         ("r1", "w2", "acc"), ("r2", "w2", "acc")]
    assert graph_from_json(graph_to_json(g)) == g
    with pytest.raises(IRError, match="tensor acc2: ordered must be True or False"):
        Tensor("acc2", (1,), "bf16", ordered=1)
