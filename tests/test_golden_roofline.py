"""The memory-bound limit of a program (:mod:`golden.roofline`): a small program whose
bytes are counted by hand, the rule's edge cases (partial, strided and indexed reads, an
accumulator, state read and written, a tensor read twice), and invariants on both tile
presets' decode steps."""

from functools import cache

import numpy as np
import pytest

from golden import program as pg
from golden.program import Builder, Operand
from golden.roofline import (
    READ_ROLES,
    Traffic,
    decode_step_traffic,
    roofline_ratio,
    step_traffic,
    traffic,
)
from spec.codes import MaMode, VaOpcode


def bf16(rng, shape):
    return pg.to_bf16(rng.standard_normal(shape))


def small_program():
    """A GEMM on a weight, its conversion, a state row updated in place, an output, a
    strided gather of the state and a second read of the input; the bytes by hand below."""
    rng = np.random.default_rng(3)
    b = Builder(pg.BlockConfig())
    w = b.const("w", bf16(rng, (16, 8)), role="weight")                 # 256 bytes
    x = b.const("x", bf16(rng, (1, 16)), role="input")                  # 32 bytes
    s = b.tensor("s", (4, 8), "bf16", "state", data=bf16(rng, (4, 8)))  # 64 bytes
    acc = b.tensor("acc", (1, 8), "binary32")
    y, out = b.tensor("y", (1, 8), "bf16"), b.tensor("out", (1, 8), "bf16")
    picked, scaled = b.tensor("picked", (4,), "bf16"), b.tensor("scaled", (1, 16), "bf16")
    b.gemm(MaMode.BF16, Operand(x), Operand(w), Operand(acc), 1, 16, 8, 16, 8, 8)
    b.va(VaOpcode.CVT_F32, 8, src=acc, dst=y)
    b.va(VaOpcode.ADD, 8, src=y, src2=(s, 16), dst=(s, 16))     # row 2 of s, in place
    b.va(VaOpcode.ADD, 8, src=y, src2=(s, 16), dst=out)
    b.va(VaOpcode.GATHER, 4, src=s, dst=picked, stride=2)       # s[0], s[2], s[4], s[6]
    b.va(VaOpcode.SCALE, 16, src=x, dst=scaled, scalar=0x4000)  # x again: no new bytes
    return b.program(), out


def test_small_program_by_hand():
    program, out = small_program()
    tr = traffic(program, [out])
    # read once: the weight (256), the input (32), row 2 of the state (16) and the
    # gathered elements 0, 2, 4, 6 of row 0 (8); written once: row 2 of the state (16)
    # and the output (16). acc, y, picked, scaled stay on chip.
    assert tr.read == {"w": 256, "x": 32, "s": 24}
    assert tr.written == {"s": 16, "out": 16}
    assert (tr.read_bytes, tr.written_bytes, tr.required) == (312, 32, 344)
    assert tr.parts == ((312, 32),)
    assert tr.by_role() == {"act": (0, 16), "input": (32, 0), "state": (24, 16),
                            "weight": (256, 0)}
    # every load and store each time: GEMM 32 + 256 + 32, CVT 32 + 16, the ADDs
    # 3 · 16 each, GATHER 4 · 2 + 8, SCALE 32 + 32
    assert tr.accessed == 320 + 48 + 48 + 48 + 16 + 64
    assert tr.bound_cycles(16) == 22 and tr.bound_cycles(344) == 1
    assert roofline_ratio(tr.required, 16, 43) == pytest.approx(344 / 16 / 43)
    # without outputs only the state's bytes outlive the program
    assert traffic(program).written == {"s": 16}


def test_parts_split_the_counts():
    program, out = small_program()
    tr = traffic(program, [out], parts=[2, 2, 2])
    # part 0: GEMM + CVT (w, x read); part 1: the ADDs (row 2 of s read and written, out
    # written); part 2: the gather (8 bytes of s) and the SCALE (nothing new)
    assert tr.parts == ((288, 0), (16, 32), (8, 0))
    assert tr.required == traffic(program, [out]).required
    with pytest.raises(ValueError, match="parts"):
        traffic(program, parts=[2, 2])
    with pytest.raises(ValueError, match="not tensors"):
        traffic(program, ["nope"])


def test_accumulate_into_state_and_into_an_accumulator():
    """An MA accumulate reads C: a state C is read and written once; a program's own
    accumulator starts at zero and costs nothing; a transposed B reads its N×K."""
    rng = np.random.default_rng(5)
    b = Builder(pg.BlockConfig())
    a = b.const("a", bf16(rng, (2, 4)), role="input")
    wt = b.const("wt", bf16(rng, (3, 4)), role="weight")     # B transposed: N=3 rows of K=4
    c = b.tensor("c", (2, 3), "binary32", "state", data=np.zeros((2, 3), np.uint32))
    tmp = b.tensor("tmp", (2, 3), "binary32")
    for dst in (c, tmp):
        b.emit(pg.MaCmd(MaMode.BF16, 2, 4, 3, Operand(a), Operand(wt), Operand(dst), 4, 4, 3,
                        accumulate=True, b_transposed=True))
    tr = traffic(b.program())
    assert tr.read == {"a": 16, "wt": 24, "c": 24} and tr.written == {"c": 24}
    assert tr.accessed == 2 * (16 + 24 + 24 + 24)


def test_indexed_gather_counts_the_rows_the_indices_name():
    """TOPK's indices (computed in the program) address a GATHER_IDX: only the two
    elements they pick of the table are read."""
    b = Builder(pg.BlockConfig())
    scores = b.const("scores", pg.to_bf16(np.array([0.5, 3.0, -1.0, 2.0, 0.0, 1.0, -2.0, 0.25])),
                     role="input")
    table = b.const("table", pg.to_bf16(np.arange(8.0)), role="weight")
    vals, idx = b.tensor("vals", (2,), "bf16"), b.tensor("idx", (2,), "int32")
    got = b.tensor("got", (2,), "bf16")
    b.va(VaOpcode.TOPK, 8, src=scores, dst=vals, dst2=idx, k=2)
    b.va(VaOpcode.GATHER_IDX, 2, src=table, src2=idx, dst=got, stride=1, index_limit=8)
    np.testing.assert_array_equal(b.read(idx), [1, 3])
    tr = traffic(b.program(), [got])
    assert tr.read == {"scores": 16, "table": 4} and tr.written == {"got": 4}
    # from a memory image in which the scores pick elements 6 and 7: the same count
    image = b.m.mem.copy()
    t = b.tensors[scores]
    image[t.addr:t.addr + 16] = pg.to_bf16(np.arange(8.0)).view(np.uint8)
    assert traffic(b.program(), [got], memory=image).read == {"scores": 16, "table": 4}


def test_refusals():
    with pytest.raises(TypeError, match="Program"):
        traffic("not a program")
    with pytest.raises(ValueError, match="bus_bytes"):
        roofline_ratio(100, 0, 10)
    with pytest.raises(ValueError, match="bus_bytes"):
        Traffic({}, {}, (), 0, {}).bound_cycles(0)


@cache
def step(preset):
    builder, steps = pg.decode_step_parts(preset)
    return builder, steps, step_traffic(builder, steps)


@pytest.mark.parametrize("preset", ["notes", "deepseek-v4"])
def test_decode_step_invariants(preset):
    builder, steps, tr = step(preset)
    tensors = builder.tensors
    # the parts are the layers and add up to the whole
    assert len(tr.parts) == len(steps)
    assert (sum(r for r, _ in tr.parts), sum(w for _, w in tr.parts)) == (tr.read_bytes,
                                                                          tr.written_bytes)
    # nothing is counted twice: the required bytes are at most every access
    assert 0 < tr.required <= tr.accessed
    for name, n in tr.read.items():
        assert tensors[name].role in READ_ROLES and 0 < n <= tensors[name].nbytes
    for name, n in tr.written.items():
        assert 0 < n <= tensors[name].nbytes
    # every layer reads its input row whole and writes its output whole
    outs = {names.get("layer output", names.get("layer output (all tokens)"))
            for _, _, names in steps}
    assert {n for n in tr.written if tensors[n].role != "state"} == outs
    for name in outs:
        assert tr.written[name] == tensors[name].nbytes
    for _, program, _ in steps:
        for cmd in program.commands:
            for opd in (getattr(cmd, f, None) for f in ("a", "b", "src", "src2", "src3")):
                if opd is not None and tensors[opd.tensor].role in ("input", "weight"):
                    assert opd.tensor in tr.read, (cmd, opd)
        inputs = {o.tensor for c in program.commands for o in (getattr(c, "src", None),
                  getattr(c, "a", None)) if o is not None and tensors[o.tensor].role == "input"}
        assert inputs and all(tr.read[n] == tensors[n].nbytes for n in inputs)
    # the state is read and written (the KV cache or the compressors' rows)
    assert tr.by_role()["state"][0] > 0 and tr.by_role()["state"][1] > 0
    # the bound is below the latency models' cycles of the commands one after another
    bound = tr.bound_cycles(builder.config.bus_bits // 8)
    predicted = sum(pg.ma_command_cycles(p, c) if c.block == "ma" else pg.va_command_cycles(p, c)
                    for _, p, _ in steps for c in p.commands)
    assert bound < predicted
    # a cut step counts what its commands touch, a prefix of the whole
    cut = step_traffic(builder, steps, limit=10)
    assert cut.required < tr.required and cut.parts[1:] == ((0, 0),) * (len(steps) - 1)


def test_decode_step_traffic_is_the_steps():
    tr, bus = decode_step_traffic("notes")
    assert bus == 16 and tr.required == step("notes")[2].required
