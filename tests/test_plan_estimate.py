"""plan.estimate: one decode step of a deepseek-v4 model on N tiles from the latency
models (docs/plan.md, "The multi-tile estimate").

Checked against the measured steps through the tile (the figures and their sources are
below), against golden's own op program of the tiny preset (the programs made from the
shapes have the same commands), against the planner's invariants, against a brute force
for the partition, and for the published V4-Flash configuration's run time.
"""

import itertools
import json
import time
from pathlib import Path

import pytest

from golden.presets.tile import PRESETS
from golden.program import MaCmd, decode_steps, ma_command_cycles, va_command_cycles
from plan import cli_main
from plan.dstp import plan
from plan.estimate import (
    TileParams,
    _cycles,
    _layer_figures,
    _layer_graph,
    _machine,
    command_cycles,
    estimate,
    layer_programs,
    moe_split,
    partition_layers,
    read_config,
)
from plan.lower import machine_for
from plan.machine import TILE_PATH, SequencerTiming
from sim.seed import test_seed
from tests.test_plan_dstp import verify

DATA = Path(__file__).resolve().parent / "data"
FLASH = DATA / "deepseek_v4_flash_config.json"
# The tile the measurements were made on: hdl.tile.top.SMALL (MA P=4, VA L=8, 128-bit bus),
# memory latency 9 behind m_axi_gmem (the programs' 8 at the core's port).
SMALL = TileParams(p=4, lanes=8, bus_bytes=16)

# docs/tile/runtime.md, "Measured through the tile", the row "deepseek-v4 step after
# 203c9d3 ... and 74e1b46" (`v4hw demo --no-waves` on 3495a23, Verilator 5.048): the
# 3-layer step at position 63, 1 981 commands, every one on the RTL and bit-exact, run by
# the host runtime one after another; cycles START -> CTR summed over the commands.
DSV4_COMMAND_CYCLES = 499_727
# docs/tile/sequencer.md, "Measured on the tile", the row "whole step, 98 commands"
# (tests/test_tile_seq_cocotb.py::test_tile_sequencer_notes_step): the `notes` step planned
# with the tile's sequencer timing and run by the sequencer in the tile, START -> DONE,
# the plan's cycle 0 at T0 + 400 (--origin 400).
NOTES_SEQUENCER_RUN = 46_085
NOTES_ORIGIN = 400


def _signature(cmd):
    if isinstance(cmd, MaCmd):
        return ("ma", cmd.mode, cmd.m, cmd.k, cmd.n, cmd.lda, cmd.ldb, cmd.ldc, cmd.accumulate,
                cmd.b_transposed, cmd.stage)
    return ("va", cmd.op, cmd.length, cmd.repeat, cmd.stride, cmd.k, cmd.index_limit, cmd.stage)


@pytest.fixture(scope="module")
def tiny_programs():
    """The tiny preset's step as golden makes it and as the estimate makes it, for SMALL."""
    block = SMALL.block_config()
    golden = [step for _, step in decode_steps("deepseek-v4", config=block)]
    shapes = layer_programs(PRESETS["deepseek-v4"].config, PRESETS["deepseek-v4"].position, block)
    return golden, [shapes[i] for i in range(len(golden))]


def test_programs_from_shapes_are_golden_programs(tiny_programs):
    """The estimate's programs (golden's generator on shapes alone) are golden's programs,
    command for command, except the MoE's dispatch: the tiny preset's random hash table
    sends layer 0's token to one expert twice, the estimate to k different experts."""
    golden, shapes = tiny_programs
    moe = "MoE output (tokens routed alike)"
    for i, (g, s) in enumerate(zip(golden, shapes, strict=True)):
        if i == 0:
            assert ([_signature(c) for c in g.commands if c.stage != moe]
                    == [_signature(c) for c in s.commands if c.stage != moe])
            experts = [c for c in s.commands if c.stage == moe and isinstance(c, MaCmd)]
            assert len(experts) == 3 * PRESETS["deepseek-v4"].config.num_experts_per_tok
        else:
            assert [_signature(c) for c in g.commands] == [_signature(c) for c in s.commands]


def test_the_tile_is_the_planners_tile_machine_model():
    """The estimate times commands with the planner's tile machine model (plan.lower's
    machine_for with tile=True: plan.machine.TILE_PATH from each block's node, MA 2 hops
    and VA 1 from the MC), not a model of its own; without the path, with the standalone
    tops' models (golden.program's own cycles)."""
    ma, va = SMALL.models()
    planner = machine_for(SMALL.block_config(), tile=True).models
    assert (ma, va) == (planner["ma"], planner["va"])
    assert ma.path == TILE_PATH.path(2) and va.path == TILE_PATH.path(1)
    assert ma.memory_latency == va.memory_latency == 8
    standalone = TileParams(p=4, lanes=8, path=None).models()
    assert not any(m.path.read or m.path.write for m in standalone)


def test_cached_cycles_are_the_models(tiny_programs):
    """The cache of command cycles gives every command its model's own cycles; without the
    tile's path those are golden.program's (the standalone tops')."""
    for tile in (SMALL, TileParams(p=4, lanes=8, path=None)):
        models, cache = tile.models(), {}
        for prog in tiny_programs[1]:
            for cmd in prog.commands:
                cycles = command_cycles(prog, cmd, models)
                assert _cycles(prog, cmd, cache, models) == cycles
                if tile.path is None:
                    model = ma_command_cycles if isinstance(cmd, MaCmd) else va_command_cycles
                    assert cycles == model(prog, cmd)
        assert len(cache) < sum(len(p.commands) for p in tiny_programs[1])


def test_cached_cycles_of_a_full_size_layer():
    """The same on commands of a V4-Flash layer (seeded sample): a command that shares a
    cache entry with another has that one's cycles by its own model too."""
    cfg = read_config(FLASH)
    models = TileParams().models()
    prog = layer_programs(cfg, 4095, TileParams().block_config(), [2])[2]
    rng = test_seed()
    ma = [c for c in prog.commands if isinstance(c, MaCmd)]
    va = [c for c in prog.commands if not isinstance(c, MaCmd) and c.repeat * c.length <= 4096]
    cache = {}
    for cmd in rng.sample(ma, 300) + rng.sample(va, 60):
        assert _cycles(prog, cmd, cache, models) == command_cycles(prog, cmd, models)
    assert len(cache) < 360


def test_sequential_estimate_within_10_percent_of_the_measured_step():
    """The tiny preset on one small tile, the commands one after another (as the host
    runtime ran them) against the measured command cycles (DSV4_COMMAND_CYCLES; the host's
    own register accesses are outside both)."""
    result = estimate(tiles=1, tile=SMALL, schedule="sequential")
    assert result.tile.path == TILE_PATH
    ratio = result.step_cycles / DSV4_COMMAND_CYCLES
    print(f"sequential estimate {result.step_cycles} / measured {DSV4_COMMAND_CYCLES} = "
          f"{ratio:.3f}")
    assert abs(ratio - 1) <= 0.10
    # without the tile's path the models are the standalone blocks', a third short
    standalone = estimate(tiles=1, tile=TileParams(p=4, lanes=8, path=None),
                          schedule="sequential")
    assert standalone.step_cycles / DSV4_COMMAND_CYCLES < 0.7


def test_planned_step_within_10_percent_of_the_sequencer_run():
    """The estimate's planning of a layer (_layer_graph, plan with the tile's sequencer at
    the tile's memory latency) on the `notes` step, the one step the sequencer has run
    through the tile, against that run (NOTES_SEQUENCER_RUN)."""
    (step,) = [s for _, s in decode_steps("notes", config=SMALL.block_config())]
    kind = _layer_figures("notes", (0,), step, PRESETS["notes"].position, SMALL, "planned", {})
    ratio = (kind.cycles + NOTES_ORIGIN) / NOTES_SEQUENCER_RUN
    print(f"planned {kind.cycles} + {NOTES_ORIGIN} / measured {NOTES_SEQUENCER_RUN} = {ratio:.3f}")
    assert abs(ratio - 1) <= 0.10


def test_layer_plans_keep_the_planner_invariants(tiny_programs):
    """A layer's graph (one node per VA command, one per GEMM) planned on the estimate's
    machine keeps every invariant of tests/test_plan_dstp.verify, each node's cycles
    its commands' cycles and, for a GEMM, the sequencer's gap between its commands."""
    prog = tiny_programs[1][1]
    graph, cycles, writes, tiles = _layer_graph(prog, 63, {}, SMALL.models())
    gap = SequencerTiming().gap
    held = {n: c + (tiles[n] - 1) * gap for n, c in cycles.items()}
    machine = _machine(SMALL, held, writes)
    result = plan(graph, machine, max_cycles=10**9)
    verify(result, graph, machine)
    assert sum(tiles.values()) == len(prog.commands)
    assert result.makespan >= max(result.critical_path, result.busiest[1])


def test_partition_is_the_best_split():
    """partition_layers against every split of random layer cycles: consecutive layers,
    each tile at least one, the busiest tile the least it can be."""
    rng = test_seed()
    for _ in range(40):
        n = rng.randint(1, 8)
        cycles = [rng.randint(1, 100) for _ in range(n)]
        tiles = rng.randint(1, n)
        spans = partition_layers(cycles, tiles)
        assert len(spans) == tiles and spans[0][0] == 0 and spans[-1][1] == n - 1
        assert all(a <= b for a, b in spans)
        assert all(spans[i][1] + 1 == spans[i + 1][0] for i in range(tiles - 1))
        best = min(max(sum(cycles[a:b]) for a, b in zip((0,) + cuts, cuts + (n,), strict=True))
                   for cuts in _cuts(n, tiles))
        assert max(sum(cycles[a:b + 1]) for a, b in spans) == best


def _cuts(n, tiles):
    return (tuple(c) for c in itertools.combinations(range(1, n), tiles - 1))


@pytest.fixture(scope="module")
def flash():
    began = time.perf_counter()
    result = estimate(read_config(FLASH), source=str(FLASH), tiles=4,
                      tile=TileParams(bus_bytes=32), clock_mhz=1000.0)
    return result, time.perf_counter() - began


def test_flash_layers_partition_and_traffic(flash):
    """The published V4-Flash configuration (43 layers) on 4 tiles: every layer on one
    tile, consecutive; one program per layer kind, the kinds as the config's
    compress_ratios and num_hash_layers say; the hand-over the residual streams."""
    result, _ = flash
    raw = json.loads(FLASH.read_text())
    assert result.cfg.num_hidden_layers == 43 == len(result.layer_cycles)
    assert [a for a, _ in result.spans] == [0] + [b + 1 for _, b in result.spans[:-1]]
    assert result.spans[-1][1] == 42
    names = {0: "sliding_attention", 4: "compressed_sparse_attention",
             128: "heavily_compressed_attention"}
    for kind in result.kinds:
        for i in kind.layers:
            routing = "hash MoE" if i < raw["num_hash_layers"] else "top-k MoE"
            assert kind.kind == f"{names[raw['compress_ratios'][i]]} + {routing}"
            assert result.layer_cycles[i] == kind.cycles
    assert sorted(i for k in result.kinds for i in k.layers) == list(range(43))
    assert result.handoff_bytes == 2 * raw["hc_mult"] * raw["hidden_size"]
    assert result.handoff_cycles == result.link_latency + 2 * 4 * 4096 // 32
    assert result.step_cycles == sum(result.tile_cycles) + 3 * result.handoff_cycles
    assert result.stage_cycles == max(result.tile_cycles)
    text = result.report()
    for what in ("assumptions:", "partition:", "inter-tile traffic a step: 3 hand-over(s) x "
                 "32768 bytes = 98304 bytes", "tokens/s", "tile 3: layers"):
        assert what in text


def test_flash_planner_under_10_seconds(flash):
    """The issue's bound: the planner's run time for the 43-layer configuration."""
    result, wall = flash
    print(f"planner {result.plan_seconds:.2f} s, programs {result.generate_seconds:.2f} s, "
          f"estimate {wall:.2f} s")
    assert result.plan_seconds < 10


def test_moe_split_is_the_program(tiny_programs):
    """moe_split cuts a layer's step into the commands before the routed experts, one run
    per expert the token is routed to, and the commands after them, in program order."""
    for programs in tiny_programs:
        for prog in programs:
            pre, experts, post = moe_split(prog)
            assert list(pre) + [c for e in experts for c in e] + list(post) == list(prog.commands)
            picked = {int(c.b.tensor.split(".e")[1].split(".")[0]) for e in experts for c in e
                      if isinstance(c, MaCmd)}
            assert len(experts) == len(picked)
            assert all(c.stage == "MoE output (tokens routed alike)" for e in experts for c in e)
    k = PRESETS["deepseek-v4"].config.num_experts_per_tok
    assert all(len(moe_split(p)[1]) == k for p in tiny_programs[1])


@pytest.mark.parametrize("schedule", ["sequential", "planned"])
def test_experts_partition(schedule):
    """Experts spread across tiles: on one tile a layer is its parts one after another;
    on k tiles (one expert each) the experts' phase is the slowest tile's, with the rows
    sent out and back one after another on tile 0's link, and the step is shorter; the
    traffic is the token's row to each other tile and each remote expert's row back."""
    cfg = PRESETS["deepseek-v4"].config
    k, row = cfg.num_experts_per_tok, 2 * cfg.hidden_size
    one = estimate(tiles=1, tile=SMALL, schedule=schedule, partition="experts")
    for kind in one.kinds:
        sp = kind.split
        assert sp.tiles == (k,) and sp.sent == 0 and sp.phase == sum(sp.experts)
        assert kind.cycles == sp.pre + sp.phase + sp.post
    many = estimate(tiles=k, tile=SMALL, schedule=schedule, partition="experts")
    flits = -(-row // many.link_bytes)
    for kind in many.kinds:
        sp = kind.split
        assert sp.tiles == (1,) * k
        assert sp.phase == max([sp.experts[0]] + [
            many.link_latency + m * flits + sp.experts[m] + many.link_latency + flits
            for m in range(1, k)])
        assert sp.sent == 2 * (k - 1) * row
    assert many.link_bytes_per_step == cfg.num_hidden_layers * 2 * (k - 1) * row
    assert many.step_cycles == sum(many.layer_cycles) < one.step_cycles
    assert sum(many.tile_cycles) == sum(sp for kd in many.kinds for sp in [
        (kd.split.pre + kd.split.post + sum(kd.split.experts))] * len(kd.layers))


def test_command_line_estimate(capsys):
    assert cli_main(["--preset", "deepseek-v4", "--tiles", "3", "--ma-p", "4", "--va-lanes",
                     "8", "--clock-mhz", "50", "--schedule", "sequential"]) == 0
    out = capsys.readouterr().out
    assert "on 3 tile(s), sequential" in out and "clock 50 MHz" in out
    assert "inter-tile traffic a step: 2 hand-over(s) x 512 bytes" in out


def _fails(argv, capsys, text):
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("v4hw plan: ") and text in err, err


def test_user_errors_are_one_line(tmp_path, capsys):
    dsv4 = ["--preset", "deepseek-v4"]
    _fails(dsv4 + ["--tiles", "0"], capsys, "--tiles must be at least 1")
    _fails(dsv4 + ["--tiles", "4"], capsys, "4 tiles for 3 layers")
    _fails(["--preset", "notes", "--tiles", "1"], capsys, "give --preset deepseek-v4")
    _fails(dsv4 + ["--tiles", "1", "--bus-bytes", "24"], capsys, "power of two, not 24")
    _fails(dsv4 + ["--tiles", "1", "--bus-bytes", "128"], capsys, "8..64 bytes")
    _fails(dsv4 + ["--tiles", "1", "--clock-mhz", "0"], capsys, "--clock-mhz must be")
    _fails(dsv4 + ["--tiles", "1", "--position", "-1"], capsys, "--position must be")
    _fails(dsv4 + ["--tiles", "1", "--link-bytes", "3"], capsys, "--link-bytes must be")
    _fails(dsv4 + ["--tiles", "1", "--json", str(tmp_path / "p.json")], capsys, "--json")
    _fails(dsv4 + ["--config", str(FLASH)], capsys, "give --tiles N too")
    _fails(dsv4 + ["--partition", "experts"], capsys, "give --tiles N too")
    _fails(dsv4 + ["--tiles", "9", "--partition", "experts"], capsys,
           "9 tiles for 8 routed experts")
    _fails(dsv4 + ["--tiles", "1", "--config", str(tmp_path / "none.json")], capsys,
           "no such file")
    text = tmp_path / "text.json"
    text.write_text("not json")
    _fails(dsv4 + ["--tiles", "1", "--config", str(text)], capsys, "not a JSON file")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2,
                                 "hidden_size": 64}))
    _fails(dsv4 + ["--tiles", "1", "--config", str(other)], capsys, "not a DeepSeek-V4")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(json.loads(FLASH.read_text()), compress_ratios=[3] * 44)))
    _fails(dsv4 + ["--tiles", "1", "--config", str(bad)], capsys, "compress_ratios")


def test_a_small_published_layout(tmp_path):
    """A config.json in the published layout (tests/data/dsv4_configs.json's "published":
    compress_ratios with a next-token-prediction entry, num_hash_layers) on 2 tiles."""
    case = json.loads((DATA / "dsv4_configs.json").read_text())["published"]["config"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(case))
    result = estimate(read_config(path), tiles=2, position=15, tile=TileParams())
    # compress_ratios [0, 4, 128, 4] (and the MTP layer's 0), the first 2 hash-routed
    assert [k.kind for k in result.kinds] == [
        "sliding_attention + hash MoE", "compressed_sparse_attention + hash MoE",
        "heavily_compressed_attention + top-k MoE", "compressed_sparse_attention + top-k MoE"]
    assert len(result.spans) == 2 and result.step_cycles > max(result.tile_cycles)


def test_tile_parameters_are_checked():
    for kwargs, text in (({"p": 3}, "P must be"), ({"lanes": 4, "bus_bytes": 16}, "lanes"),
                         ({"bus_bytes": 12}, "bus"), ({"memory_latency": 0}, "memory latency")):
        with pytest.raises(ValueError, match=text):
            TileParams(**kwargs)
    with pytest.raises(TypeError, match="TilePathModel"):
        TileParams(path=18)
