"""plan.lower: a layer's op program (golden.program) as a CircuitFlow graph. Every
command is exactly one node; the graph orders every two accesses of a tensor that the
program orders and at least one of which writes (checked here from the commands'
operands, not from the lowering); the plan of a decode step of each tiny preset keeps
every planner invariant (tests/test_plan_dstp.verify), finishes each command before any
later command that conflicts with it starts, and is the same plan bit for bit when
planned again."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from golden.program import (
    BlockConfig,
    MaCmd,
    Operand,
    Program,
    VaCmd,
    decode_steps,
    ma_command_cycles,
    va_command_cycles,
)
from golden.program import Tensor as ProgramTensor
from plan import cli_main
from plan.dstp import plan
from plan.errors import IRError
from plan.ir import BarrierOp, DecodeOp, PrefillOp, graph_from_json, graph_to_json
from plan.lower import (
    command_cycles,
    ir_name,
    lower_decode,
    lower_prefill,
    lower_program,
    lower_programs,
    machine_for,
    with_sequencer,
    with_tile,
)
from plan.machine import TILE_MARGINS, TILE_PATH
from spec.codes import MaMode, VaOpcode
from spec.tile import DEFAULT_NODES
from tests.test_plan_dstp import verify

PRESETS = ("notes", "deepseek-v4")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module", params=PRESETS)
def lowered(request):
    """(preset, the layers' step programs, graph, machine, plan): planned with the tile
    machine model, as lower_decode does."""
    cfg = BlockConfig()
    programs = [step for _, step in decode_steps(request.param, config=cfg)]
    machine = machine_for(cfg, tile=True)
    from golden.presets.tile import PRESETS as TILE

    graph = lower_programs(programs, machine, token=TILE[request.param].position)
    graph, machine = with_tile(machine, programs, graph)
    machine = with_sequencer(machine, programs, graph)
    return request.param, programs, graph, machine, plan(graph, machine)


def _accesses(cmd):
    """(tensors read, tensors written) of a command, from its operands."""
    if isinstance(cmd, MaCmd):
        return ({cmd.a.tensor, cmd.b.tensor} | ({cmd.c.tensor} if cmd.accumulate else set()),
                {cmd.c.tensor})
    return ({o.tensor for o in (cmd.src, cmd.src2, cmd.src3) if o is not None},
            {o.tensor for o in (cmd.dst, cmd.dst2) if o is not None})


def _conflicts(programs):
    """Pairs (i, j), i < j global command indices, that touch one tensor with at least
    one write (RAW, WAR, WAW), over the programs in order."""
    cmds = [cmd for prog in programs for cmd in prog.commands]
    by_tensor = {}
    for i, cmd in enumerate(cmds):
        reads, writes = _accesses(cmd)
        for t in reads | writes:
            by_tensor.setdefault(t, []).append((i, t in writes))
    pairs = set()
    for accesses in by_tensor.values():
        for a, (i, wi) in enumerate(accesses):
            for j, wj in accesses[a + 1:]:
                if wi or wj:
                    pairs.add((i, j))
    return pairs


def _compute_ops(graph):
    return [op for op in graph.ops if not isinstance(op, BarrierOp)]


def test_every_command_is_one_node(lowered):
    _, programs, graph, machine, _ = lowered
    cmds = [cmd for prog in programs for cmd in prog.commands]
    ops = _compute_ops(graph)
    assert len(ops) == len(cmds)
    assert sum(isinstance(op, BarrierOp) for op in graph.ops) == len(programs) - 1
    assert len({op.name for op in ops}) == len(ops)
    for cmd, op in zip(cmds, ops, strict=True):
        assert isinstance(op, DecodeOp)
        assert op.name.endswith("." + cmd.opname.lower())
        if isinstance(cmd, MaCmd):
            assert op.op_type == "gemm" and op.tile_shape == (cmd.m, cmd.k, cmd.n)
            es = 2 if MaMode(cmd.mode) is MaMode.BF16 else 1
            c = cmd.m * cmd.n * 4
            assert op.traffic == (cmd.m * cmd.k * es + cmd.k * cmd.n * es
                                  + (c if cmd.accumulate else 0), c)
        else:
            assert op.tile_shape == (cmd.repeat, cmd.length)
            assert op.traffic[0] > 0 and op.traffic[1] > 0
        reads, writes = _accesses(cmd)
        assert set(op.inputs) == {ir_name(t) for t in reads}
        assert set(op.outputs) == {ir_name(t) for t in writes}
        assert op.latency_bound == machine.cycles(op, graph)
    assert all(graph.tensor[t].ordered for t in graph.tensor)


def _reach(graph):
    """Bit sets: bit i of reach[j] when op i precedes op j through the STDG's edges and
    the barriers (program indices of graph.ops)."""
    index = {op.name: i for i, op in enumerate(graph.ops)}
    preds = {i: set() for i in range(len(graph.ops))}
    for src, dst, _ in graph.edges():
        preds[index[dst]].add(index[src])
    barrier, since = None, []
    for i, op in enumerate(graph.ops):
        if isinstance(op, BarrierOp):
            preds[i] |= set(since) | ({barrier} if barrier is not None else set())
            barrier, since = i, []
        else:
            if barrier is not None:
                preds[i].add(barrier)
            since.append(i)
    reach = []
    for j in range(len(graph.ops)):
        assert all(p < j for p in preds[j]), "an edge goes against program order"
        bits = 0
        for p in preds[j]:
            bits |= reach[p] | (1 << p)
        reach.append(bits)
    return reach


def test_edges_keep_program_order_for_every_tensor(lowered):
    _, programs, graph, _, _ = lowered
    ops = graph.ops
    compute = [i for i, op in enumerate(ops) if not isinstance(op, BarrierOp)]
    cmds = [cmd for prog in programs for cmd in prog.commands]
    # every edge joins two commands that touch its tensor, one of them writing it
    index = {op.name: i for i, op in enumerate(ops)}
    position = {g: c for c, g in enumerate(compute)}
    for src, dst, tensor in graph.edges():
        (r0, w0), (r1, w1) = (_accesses(cmds[position[index[n]]]) for n in (src, dst))
        names0 = {ir_name(t) for t in r0 | w0}
        names1 = {ir_name(t) for t in r1 | w1}
        assert tensor in names0 and tensor in names1
        assert tensor in {ir_name(t) for t in w0 | w1}
    reach = _reach(graph)
    pairs = _conflicts(programs)
    assert pairs
    for i, j in pairs:
        gi, gj = compute[i], compute[j]
        assert reach[gj] >> gi & 1, f"{ops[gi].name} and {ops[gj].name} are not ordered"


def test_decode_plan_is_valid_and_deterministic(lowered):
    preset, programs, graph, machine, result = lowered
    verify(result, graph, machine)
    entries = [e for e in result.entries if e.block is not None]
    for i, j in _conflicts(programs):
        assert entries[i].finish <= entries[j].start, (entries[i], entries[j])
    again = plan(lower_decode(preset)[0], machine)
    assert again.to_json(graph) == result.to_json(graph)
    print(f"{preset}: {len(entries)} ops, {result.summary()}")


def test_graph_json_round_trip(lowered):
    graph = lowered[2]
    text = graph_to_json(graph)
    assert graph_to_json(graph_from_json(text)) == text


def test_bounds_and_models_from_the_block_config():
    cfg = BlockConfig(p=4, bus_bits=64, latency=12)
    machine = machine_for(cfg)
    ma = machine.models["ma"]
    assert (ma.p, ma.data_width, ma.memory_latency) == (4, 64, 12)
    graph, _ = lower_decode("notes", config=cfg, tile=False)
    assert all(op.latency_bound == machine.cycles(op, graph) for op in _compute_ops(graph))
    default = lower_decode("notes", tile=False)[0]
    gemms = [(a.latency_bound, b.latency_bound) for a, b in
             zip(_compute_ops(graph), _compute_ops(default), strict=True) if a.op_type == "gemm"]
    assert all(small > big for small, big in gemms)     # P=4 on a 64-bit bus is slower


def test_the_tile_machine_model():
    """lower_decode's default: the blocks at the tile's nodes, each model with the tile's
    memory path for its hops to the MC, every op's bound its command's cycles on its own
    addresses and the block's margin (each START at the longest repetition's)."""
    cfg = BlockConfig(p=4, lanes=8)
    graph, machine = lower_decode("notes", config=cfg)
    nodes = {b.kind: b.node for b in machine.blocks}
    assert nodes == {"ma": DEFAULT_NODES["ma"], "va": DEFAULT_NODES["va"],
                     "cme": DEFAULT_NODES["migrate"]}
    assert machine.mc_node == DEFAULT_NODES["mc"]
    ma, va = machine.models["ma"].base, machine.models["va"].base
    assert ma.path == TILE_PATH.path(2) and va.path == TILE_PATH.path(1)
    programs = [step for _, step in decode_steps("notes", config=cfg)]
    per = command_cycles(machine, programs)
    ops = _compute_ops(graph)
    kinds = [machine.kind_of(op) for op in ops]
    assert [op.latency_bound for op in ops] == [
        len(c) * (max(c) + TILE_MARGINS[kind]) for c, kind in zip(per, kinds, strict=True)]
    assert [len(c) for c in per] == [1 if isinstance(cmd, MaCmd) else cmd.repeat
                                     for cmd in programs[0].commands]
    # The standalone path is the standalone model: the program's own cycles (the MA's;
    # the VA's first command, from reset: the later ones carry the VA's state).
    standalone = machine_for(cfg)
    plain = command_cycles(standalone, programs)
    cmds = programs[0].commands
    assert [sum(c) for c, cmd in zip(plain, cmds, strict=True) if isinstance(cmd, MaCmd)] == [
        ma_command_cycles(programs[0], cmd) for cmd in cmds if isinstance(cmd, MaCmd)]
    first = next(i for i, cmd in enumerate(cmds) if isinstance(cmd, VaCmd))
    assert sum(plain[first]) == va_command_cycles(programs[0], cmds[first])
    # The tile's path only adds cycles (to every command of the step).
    assert all(sum(t) > sum(s) for t, s in zip(per, plain, strict=True))


def _program(commands, tensors):
    table, addr = {}, 0
    for name, shape, dtype in tensors:
        t = ProgramTensor(name, shape, dtype, addr, "act")
        table[name] = t
        addr += -(-t.nbytes // 64) * 64
    return Program(BlockConfig(), table, tuple(commands), {})


def test_gather_csr_carries_its_mask():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class CsrCmd(VaCmd):            # a VaCmd with the ROWS register GATHER_CSR needs
        rows: int = 1

    prog = _program(
        [CsrCmd(VaOpcode.GATHER_CSR, 5, src=Operand("m"), src2=Operand("rp"),
                src3=Operand("col"), dst=Operand("out"), stride=1, index_limit=8, rows=3)],
        [("m", (3, 8), "bf16"), ("rp", (4,), "int32"), ("col", (5,), "int32"),
         ("out", (5,), "bf16")])
    machine = machine_for()
    tensors, ops = lower_program(prog, machine)
    op = ops[0]
    assert op.op_type == "gather" and op.tile_shape == (3, 8, 5)
    assert op.sparsity_mask.layout == "csr" and op.sparsity_mask.shape == (3, 8)
    assert op.sparsity_mask.tensors == ("rp", "col")
    assert op.traffic == (4 * 4 + 4 * 5 + 2 * 5, 2 * 5)
    graph = lower_programs([prog], machine)
    assert plan(graph, machine).makespan > 0        # check_masks accepts it
    plain = _program([VaCmd(VaOpcode.GATHER_CSR, 5, src=Operand("m"), src2=Operand("rp"),
                            src3=Operand("col"), dst=Operand("out"), index_limit=8)],
                     [("m", (3, 8), "bf16"), ("rp", (4,), "int32"), ("col", (5,), "int32"),
                      ("out", (5,), "bf16")])
    with pytest.raises(IRError, match="GATHER_CSR command needs its ROWS"):
        lower_program(plain, machine)


def test_names_and_bad_input():
    assert ir_name("l0.d63.attn_hc.aff0#2") == "l0.d63.attn_hc.aff0-2"
    assert ir_name("0x") == "_0x"
    machine = machine_for()
    prog = _program([VaCmd(VaOpcode.SCALE, 4, src=Operand("a"), dst=Operand("nowhere"))],
                    [("a", (4,), "bf16")])
    with pytest.raises(IRError, match="tensor 'nowhere'"):
        lower_program(prog, machine)
    prog = _program([VaCmd(99, 4, src=Operand("a"), dst=Operand("a"))], [("a", (4,), "bf16")])
    with pytest.raises(IRError, match="VA opcode 99"):
        lower_program(prog, machine)
    with pytest.raises(ValueError, match="unknown preset"):
        lower_decode("nope")
    with pytest.raises(ValueError, match="phase"):
        lower_program(prog, machine, phase="later")


def test_prefill_lowers_to_prefill_ops():
    graph, machine = lower_prefill("notes", 3)
    ops = _compute_ops(graph)
    assert ops and all(isinstance(op, PrefillOp) for op in ops)
    assert graph.stages == (("prefill_start", 0),)
    result = plan(graph, machine)
    verify(result, graph, machine)


def test_cli_plans_a_preset(capsys):
    assert cli_main(["--preset", "notes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    graph = lower_decode("notes")[0]
    n = len(_compute_ops(graph))
    assert lines[0].startswith(f"preset notes: one decode step (decode_token_28_start), "
                               f"1 layer(s), {n} commands as {n} ops")
    assert lines[1].split() == ["op", "kind", "block", "start", "finish", "bound"]
    graph, machine = lower_decode("notes")
    result = plan(graph, machine)
    assert lines[2 + len(graph.ops)] == result.summary()
    assert lines[3 + len(graph.ops)].startswith(f"planned {n} ops in ")
    assert lines[4 + len(graph.ops)] == (
        f"makespan / larger lower bound = {result.makespan} / {result.lower_bound} = "
        f"{result.makespan / result.lower_bound:.3f}")
    assert "golden/va_latency.py" in lines[-1]
    assert np.all([line.split()[0] in {op.name for op in graph.ops}
                   for line in lines[2:2 + len(graph.ops)]])


def test_preset_plan_is_the_same_across_processes(tmp_path):
    """Lowering and planning in two interpreters with other hash seeds: the same bytes."""
    texts = set()
    for hash_seed in ("1", "2"):
        out = tmp_path / f"plan{hash_seed}.json"
        subprocess.run([sys.executable, "-m", "plan", "--preset", "notes", "--json", str(out),
                        "--quiet"], cwd=ROOT, check=True, capture_output=True,
                       env=os.environ | {"PYTHONHASHSEED": hash_seed})
        texts.add(out.read_text())
    assert len(texts) == 1
    graph, machine = lower_decode("notes")
    assert next(iter(texts)) == plan(graph, machine).to_json(graph)
