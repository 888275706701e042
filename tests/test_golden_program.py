"""The layer as a program of block commands: the interpreter reproduces the hardware-exact
path (golden/hwpath.py) bit for bit, and the proposed VA commands keep their contracts."""

import numpy as np
import pytest

from golden import program as pg
from golden import va
from golden.hwpath import HwTrace, run_notes_layer
from golden.hwpath_dsv4 import run_dsv4_layer
from golden.presets import deepseek_v4 as dsv4
from golden.presets.notes import NotesModel, random_weights
from golden.program_dsv4 import dsv4_layer_prefill
from golden.program_notes import notes_prefill, notes_stage_bits
from spec.codes import ErrorCode, VaOpcode

from .test_golden_attn_dsv4 import tiny as dsv4_tiny
from .test_golden_attn_notes import tiny

SEED = 5
X = VaOpcode


@pytest.fixture(scope="module")
def notes_layer():
    cfg = tiny(hidden_size=32, num_hidden_layers=1, hca_chunks=2, moe_intermediate_size=16)
    return NotesModel(cfg, random_weights(cfg, SEED)).layers[0]


@pytest.fixture(scope="module")
def notes_x():
    return np.random.default_rng(SEED).standard_normal((34, 32))  # SWA, HCA and CSA all engaged


@pytest.mark.parametrize("mode", ["bf16", "int8"])
def test_notes_program_is_the_hardware_exact_path(notes_layer, notes_x, mode):
    """Every stage hwpath records equals the interpreter's tensor bit for bit, so the
    per-stage error table built from the interpreter's bits is hwpath's table."""
    tr = run_notes_layer(notes_layer, notes_x, mode)
    b = pg.Builder(pg.BlockConfig(lanes=32))
    _, names = notes_prefill(notes_layer, notes_x, mode=mode, builder=b)
    got = notes_stage_bits(b.m, names)
    _same_table(tr, got)
    assert len(tr.stages) == 18
    np.testing.assert_array_equal(got["layer output (tokens routed alike)"], tr.out_bits)


def _same_table(tr, got):
    """Compare every stage of hwpath's trace ``tr`` with the interpreter's bits ``got``
    (stage → array, unmasked) and rebuild the error table from the latter."""
    again = HwTrace()
    moe_mask = tr.masks.get("MoE output (tokens routed alike)")
    for st in tr.stages:
        bits = got[st.stage]
        mask = tr.masks.get(st.stage)
        if mask is not None:
            bits = bits.reshape(mask.shape + bits.shape[mask.ndim:]) if bits.ndim < mask.ndim else bits
            bits = bits[mask]
        if st.stage.startswith("routing weights"):   # hwpath sorts each token's weights
            bits = np.sort(bits[moe_mask], 1)
        want = tr.bits[st.stage]
        assert bits.size == want.size, st.stage
        np.testing.assert_array_equal(bits.ravel(), want.ravel(), err_msg=st.stage)
        again.add(st.stage, st.unit, bits.reshape(want.shape), tr.refs[st.stage], st.agree)
    assert again.table() == tr.table()


@pytest.fixture(scope="module")
def dsv4_model():
    # CSA rate 2 so that 20 tokens give 10 entries and index_topk = 9 needs TOPK_WIDE; a
    # short Sinkhorn keeps the test in seconds (the mapping of a round does not change)
    cfg = dsv4_tiny(index_topk=9, compress_rates={dsv4.CSA: 2, dsv4.HCA: 4}, hc_sinkhorn_iters=4)
    return dsv4.DeepseekV4Model(cfg, dsv4.random_weights(cfg, 3))


@pytest.mark.parametrize("i", [0, 1, 2])  # sliding + hash MoE, CSA + top-k MoE, HCA + top-k MoE
def test_dsv4_program_is_the_hardware_exact_path(dsv4_model, i):
    layer = dsv4_model.layers[i]
    cfg = dsv4_model.cfg
    rng = np.random.default_rng(3)
    streams = rng.standard_normal((20, cfg.hc_mult, cfg.hidden_size))
    ids = rng.integers(0, cfg.vocab_size, 20)
    tr = run_dsv4_layer(layer, streams, ids)
    b = pg.Builder(pg.BlockConfig(lanes=32))
    prog, names = dsv4_layer_prefill(layer, streams, ids, builder=b)
    assert set(names) >= {st.stage for st in tr.stages}
    _same_table(tr, {k: b.read(v) for k, v in names.items()})
    np.testing.assert_array_equal(b.read(names["layer output (all tokens)"]), tr.out_bits)
    ops = pg.count_commands(prog)
    assert (("va", "TOPK_WIDE") in ops) == (layer.type == dsv4.CSA)
    assert (("va", "GATHER_IDX") in ops)


def test_run_replays_the_builder(notes_layer, notes_x):
    """The program alone (initial image + commands) reproduces what its builder computed:
    no state outside the list."""
    b = pg.Builder(pg.BlockConfig())
    prog, _ = notes_prefill(notes_layer, notes_x[:9], builder=b)
    m = pg.run(prog)
    np.testing.assert_array_equal(m.mem[: prog.memory_bytes], b.m.mem[: prog.memory_bytes])


def test_program_commands_are_well_formed(notes_layer, notes_x):
    prog, _ = notes_prefill(notes_layer, notes_x[:6])
    for cmd in prog.commands:
        assert cmd.block in ("ma", "va")
        if cmd.block == "ma":
            assert max(cmd.m, cmd.k, cmd.n) <= pg.MA_MAX
            tensors = (cmd.a.tensor, cmd.b.tensor, cmd.c.tensor)
        else:
            assert 1 <= cmd.length <= va.MAX_LENGTH and cmd.repeat >= 1
            tensors = [o.tensor for o in (cmd.src, cmd.src2, cmd.src3, cmd.dst, cmd.dst2) if o is not None]
        assert all(t in prog.tensors for t in tensors)
    spans = sorted((t.addr, t.addr + t.nbytes) for t in prog.tensors.values())
    assert all(a % pg.ALIGN == 0 for a, _ in spans)
    assert all(e <= a for (_, e), (a, _) in zip(spans, spans[1:], strict=False))  # no overlap
    counts = pg.count_commands(prog)
    assert sum(counts.values()) == sum(c.repeat if c.block == "va" else 1 for c in prog.commands)
    text = pg.program_summary(prog)
    assert "RECIP" in text and "golden/va_latency.py" in text


@pytest.mark.parametrize("lanes", [8, 32])
def test_sum_follows_the_lane_count(lanes):
    """SUM's bits depend on L; the interpreter takes L from the block configuration."""
    rng = np.random.default_rng(lanes)
    vals = rng.standard_normal(600) * 2.0 ** rng.integers(-8, 8, 600)
    x = va.f32_to_bf16(vals.astype(np.float32).view(np.uint32))
    b = pg.Builder(pg.BlockConfig(lanes=lanes))
    b.const("x", x)
    b.tensor("s", (1,), "binary32")
    b.va(VaOpcode.SUM, 600, src="x", dst="s")
    got = int(pg.run(b.program()).read("s")[0])
    assert got == va.sum_bf16(x, lanes)
    assert va.sum_bf16(x, 8) != va.sum_bf16(x, 32)   # the input tells the two apart


def _mem_run(cmd_fields, data):
    mem = np.zeros(4096, np.uint8)
    for addr, arr in data:
        raw = np.ascontiguousarray(arr).view(np.uint8)
        mem[addr: addr + raw.size] = raw
    code, _ = va.execute_proposed(va.VaCommand(**cmd_fields), mem)
    return code, mem


def test_recip_exhaustive():
    x = np.arange(65536, dtype=np.uint16)
    want = va.f32_to_bf16(va.recip_f32(va.bf16_in(x)))
    np.testing.assert_array_equal(va.recip_bf16(x), want)
    code, mem = _mem_run(dict(op=X.RECIP, length=1024, src=0, dst=2048), [(0, x[4096:5120])])
    assert code == ErrorCode.NONE
    np.testing.assert_array_equal(mem[2048:4096].view(np.uint16), want[4096:5120])


def test_cvt_f32_and_scalar_from_memory():
    rng = np.random.default_rng(1)
    f = rng.integers(0, 2**32, 256, dtype=np.uint64).astype(np.uint32)
    code, mem = _mem_run(dict(op=X.CVT_F32, length=256, src=0, dst=1024), [(0, f)])
    assert code == ErrorCode.NONE
    np.testing.assert_array_equal(mem[1024:1536].view(np.uint16), va.f32_to_bf16(f))
    x = rng.integers(0, 65536, 100).astype(np.uint16)
    s = np.uint16(0x3FC0)        # 1.5
    wants = {X.MUL_MEM: va.scale_bf16(x, s), X.ADD_MEM: va.add_bf16(x, np.full(100, s, np.uint16))}
    for op, want in wants.items():
        code, mem = _mem_run(dict(op=op, length=100, src=0, src2=512, dst=1024),
                             [(0, x), (512, np.array([s]))])
        assert code == ErrorCode.NONE
        np.testing.assert_array_equal(mem[1024:1224].view(np.uint16), want)
    v = rng.integers(-2**20, 2**20, 64).astype(np.int32)
    rs, ws = np.uint32(0x3C800000), 0x3E000000
    code, mem = _mem_run(dict(op=X.DEQUANTIZE_MEM, length=64, src=0, src2=512, dst=1024, scalar=ws),
                         [(0, v), (512, np.array([rs]))])
    assert code == ErrorCode.NONE
    np.testing.assert_array_equal(mem[1024:1152].view(np.uint16),
                                  va.dequantize_int32(v, int(va.f32_mul(rs, np.uint32(ws)))))


def test_topk_wide_equals_repeated_topk_passes():
    """The contract's claim: TOPK_WIDE(k) is repeated TOP-K(8) passes that overwrite the
    picked entries with NaN (ties and -inf included)."""
    rng = np.random.default_rng(2)
    x = rng.choice(np.array([0x3F80, 0x4000, 0xBF80, 0xFF80, 0x0000, 0x8000], np.uint16), 40)
    k = 21
    code, mem = _mem_run(dict(op=X.TOPK_WIDE, length=40, src=0, dst=512, dst2=1024, k=k), [(0, x)])
    assert code == ErrorCode.NONE
    got = mem[1024:1024 + 4 * k].view(np.int32)
    work, picks = x.copy(), []
    while len(picks) < k:
        _, idx = va.topk_bf16(work, min(va.MAX_K, k - len(picks)))
        picks += list(idx)
        work[idx] = va.BF16_NAN
    np.testing.assert_array_equal(got, picks)
    np.testing.assert_array_equal(mem[512:512 + 2 * k].view(np.uint16), x[picks])


def test_proposed_commands_are_checked():
    assert va.execute_proposed(va.VaCommand(X.RECIP, 0), np.zeros(64, np.uint8))[0] == ErrorCode.BAD_COMMAND
    mem = np.zeros(64, np.uint8)
    assert va.execute_proposed(va.VaCommand(X.TOPK_WIDE, 4, k=5), mem)[0] == ErrorCode.BAD_COMMAND
    assert va.execute_proposed(va.VaCommand(X.CVT_F32, 4, src=2, dst=32), np.zeros(64, np.uint8)) == (
        ErrorCode.MISALIGNED, 2)
    # the proposed ones have no RTL: the VA's golden model refuses them as the RTL does;
    # the built ones it runs; together they follow SQRT = 21
    for op in va.PROGRAM_OPCODES:
        cmd = va.VaCommand(op, 4, src=0, src2=0, dst=32, dst2=48, k=1)
        code = va.execute(cmd, np.zeros(64, np.uint8))[0]
        want = ErrorCode.BAD_COMMAND if op in va.PROPOSED_OPCODES else ErrorCode.NONE
        assert code == want, op.name
    assert sorted(va.PROGRAM_OPCODES) == list(range(VaOpcode.SQRT + 1, VaOpcode.SQRT + 7))
    assert set(va.PROPOSED_OPCODES) < set(va.PROGRAM_OPCODES)
    assert set(va.PROPOSED_CONTRACTS) == set(va.PROGRAM_OPCODES)


def test_bad_configuration_is_refused():
    with pytest.raises(ValueError, match="lanes"):
        pg.BlockConfig(lanes=12)
    with pytest.raises(ValueError, match="outside"):
        pg.MaCmd(0, 129, 1, 1, pg.Operand("a"), pg.Operand("b"), pg.Operand("c"), 1, 1, 1)


@pytest.mark.parametrize("i, s0, s1", [(0, 3, 9), (1, 14, 20), (2, 3, 9)])
def test_dsv4_decode_steps_equal_the_full_program(dsv4_model, i, s0, s1):
    """prefill(s0) then decode steps s0..s1-1 give the full program's rows bit for bit:
    the window ring wraps, CSA groups (rate 2) and HCA groups (rate 4) complete inside
    the decode (HCA's first group from the empty state at t = 3), and the CSA queries
    pick 9 of 9 or 10 entries (TOPK_WIDE); the state's entries are the full program's."""
    from golden.program_dsv4 import dsv4_decode_step, dsv4_state

    layer = dsv4_model.layers[i]
    cfg = dsv4_model.cfg
    rng = np.random.default_rng(7)
    streams = rng.standard_normal((s1, cfg.hc_mult, cfg.hidden_size))
    ids = rng.integers(0, cfg.vocab_size, s1)
    bf = pg.Builder(pg.BlockConfig())
    _, nf = dsv4_layer_prefill(layer, streams, ids, builder=bf)
    full = bf.read(nf["layer output (all tokens)"])
    b = pg.Builder(pg.BlockConfig())
    state = dsv4_state(b, layer, s1)
    _, n0 = dsv4_layer_prefill(layer, streams[:s0], ids[:s0], builder=b, state=state)
    np.testing.assert_array_equal(b.read(n0["layer output (all tokens)"]), full[:s0])
    ops = set()
    for t in range(s0, s1):
        step, names = dsv4_decode_step(layer, state, streams[t], ids[t], t, b)
        got = b.read(names["layer output (all tokens)"])[0]
        np.testing.assert_array_equal(got, full[t], err_msg=f"t={t}")
        ops |= {op for _, op in pg.count_commands(step)}
    if state.compressor is not None:
        n = s1 // layer.rate
        np.testing.assert_array_equal(b.read(state.compressor.entries)[:n],
                                      bf.read(nf["compressor: entries (norm + RoPE)"]))
    assert ("TOPK_WIDE" in ops) == (layer.type == dsv4.CSA)
    with pytest.raises(ValueError, match="capacity"):
        dsv4_decode_step(layer, state, streams[0], ids[0], s1, b)


@pytest.mark.parametrize("mode", ["bf16", "int8"])
def test_notes_decode_steps_equal_the_full_program(notes_layer, notes_x, mode):
    """prefill(22) then decode steps 22..29 give the program of 30 tokens at every new row,
    bit for bit; steps 24 and 28 start a refresh anchor (the HCA summaries are recomputed
    from the cache) and every tier (SWA windows, HCA chunks, CSA range) is non-empty."""
    from golden.presets.notes import tier_ranges
    from golden.program_notes import notes_decode_step, notes_state

    s0, s1 = 22, 30
    bf = pg.Builder(pg.BlockConfig())
    _, nf = notes_prefill(notes_layer, notes_x[:s1], mode=mode, builder=bf)
    full = bf.read(nf["layer output"])
    b = pg.Builder(pg.BlockConfig())
    state = notes_state(b, notes_layer, s1)
    notes_prefill(notes_layer, notes_x[:s0], mode=mode, builder=b, state=state)
    refreshed = []
    for t in range(s0, s1):
        assert all(tier_ranges(t, notes_layer.cfg)[:2])
        step, names = notes_decode_step(notes_layer, state, notes_x[t], t, b, mode)
        np.testing.assert_array_equal(b.read(names["layer output"])[0], full[t], err_msg=f"t={t}")
        if ("va", "SUM") in pg.count_commands(step) and pg.count_commands(step)["va", "SUM"] > 1:
            refreshed.append(t)
    assert refreshed == [24, 28]


def test_decode_step_layers_each_use_their_own_weights():
    """The layers of one decode step share a builder (one memory); each layer's step gives
    the output that layer gives decoded alone in a builder of its own, bit for bit: a
    weight or constant of the same name and other values (the next layer's
    ``w.attn_hc.fn``, router bias, sinks) is a tensor of its own, not the first layer's."""
    from golden.presets.tile import PRESETS
    from golden.program_dsv4 import dsv4_decode_step, dsv4_state

    pre = PRESETS["deepseek-v4"]
    b, steps = pg.decode_step_parts("deepseek-v4")
    rng = np.random.default_rng(pre.seed)     # the rows and tokens decode_step_parts draws
    c, t = pre.config, pre.position
    for i, layer in enumerate(pre.model().layers):
        row = rng.standard_normal((c.hc_mult, c.hidden_size))
        token = int(rng.integers(c.vocab_size))
        own = pg.Builder(pg.BlockConfig())
        _, names = dsv4_decode_step(layer, dsv4_state(own, layer, t + 1), row, token, t, own)
        key = "layer output (all tokens)"
        np.testing.assert_array_equal(b.read(steps[i][2][key]), own.read(names[key]),
                                      err_msg=f"layer {i}")
    weights = [n for n in b.tensors if n.startswith("w.attn_hc.fn")]
    assert len(weights) == len(steps), weights


def test_tile_presets_engage_every_mechanism():
    from golden.presets.notes import tier_ranges
    from golden.presets.tile import PRESETS

    ds = PRESETS["deepseek-v4"]
    c = ds.config
    assert c.layer_types == [dsv4.SWA, dsv4.CSA, dsv4.HCA] and c.mlp_layer_types[0] == "hash_moe"
    assert c.index_topk >= 12 and (ds.position + 1) // c.compress_rates[dsv4.CSA] > c.index_topk
    for kind in (dsv4.CSA, dsv4.HCA):   # the step completes a group of each compressor
        assert (ds.position + 1) % c.compress_rates[kind] == 0
    nt = PRESETS["notes"]
    windows, chunks, csa = tier_ranges(nt.position, nt.config)
    assert windows and chunks and csa[0][1] > csa[0][0] and nt.position % nt.config.refresh == 0


@pytest.mark.parametrize("preset", ["deepseek-v4", "notes"])
def test_summary_counts_the_decode_step(preset):
    """summary() prints, per block and opcode, the commands of the decode step programs
    (:func:`golden.program.decode_steps`), and the MA's predicted cycles."""
    steps = pg.decode_steps(preset)
    text = pg.summary(preset)
    counts = [pg.count_commands(step) for _, step in steps]
    rows = [ln.split() for ln in text.splitlines()[len(steps) + 2:]]
    lines = {tuple(r[:2]): [int(v) for v in r[2:]] for r in rows
             if r[0] in ("ma", "va") and r[1] not in ("(all)", "cycles")}
    for (blk, op), row in lines.items():
        want = [cnt.get((blk, op), 0) for cnt in counts]
        assert row == want + [sum(want)]
    assert set(lines) == set().union(*counts)
    va_row = next(r for r in rows if r[:2] == ["va", "cycles"])
    want = [sum(pg.va_command_cycles(step, c) for c in step.commands if c.block == "va")
            for _, step in steps]
    assert [int(v) for v in va_row[2:]] == want + [sum(want)] and min(want) > 0
    ops = set().union(*counts)
    if preset == "deepseek-v4":
        assert {("va", "TOPK_WIDE"), ("va", "GATHER_IDX"), ("ma", "GEMM_BF16_BT")} <= ops
    with pytest.raises(ValueError, match="unknown preset"):
        pg.summary("nope")
