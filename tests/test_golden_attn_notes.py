"""Preset ``notes`` (project-defined tiered cache): tiers, decode state, mHC padding."""

import numpy as np
import pytest

from golden.attn.primitives import apply_rope, attention, causal_mask, rms_norm, rope_angles
from golden.presets.notes import NotesConfig, NotesModel, random_weights, tier_ranges

SEED = 11


def tiny(**changes):
    base = dict(
        vocab_size=50,
        hidden_size=24,
        num_hidden_layers=2,
        num_heads=4,
        num_kv_heads=2,
        head_dim=8,
        csa_window=8,
        hca_chunks=3,
        hca_chunk=4,
        swa_window=8,
        swa_overlap=2,
        refresh=4,
        mhc_chunk=16,
        n_experts=8,
        primary_topk=4,
        final_topk=2,
        moe_intermediate_size=12,
    )
    base.update(changes)
    return NotesConfig(**base)


def test_defaults_are_the_notes():
    c = NotesConfig()
    assert (c.csa_window, c.hca_chunks, c.hca_chunk, c.swa_window, c.swa_overlap, c.refresh, c.mhc_chunk) == (
        4096,
        6,
        2048,
        4096,
        512,
        128,
        1024,
    )
    assert (c.n_experts, c.primary_topk, c.final_topk) == (64, 8, 2)


@pytest.mark.parametrize(
    "bad, msg",
    [
        (dict(swa_overlap=8), "swa_overlap"),
        (dict(final_topk=5), "final_topk"),
        (dict(num_kv_heads=3), "multiple"),
    ],
)
def test_config_errors(bad, msg):
    with pytest.raises(ValueError, match=msg):
        tiny(**bad)


@pytest.mark.parametrize("p", [0, 3, 9, 20, 27, 40, 63, 64, 65, 97, 130])
def test_tiers_cover_the_past_without_gaps(p):
    cfg = tiny()
    windows, chunks, csa = tier_ranges(p, cfg)
    r = p // cfg.refresh * cfg.refresh
    covered = np.zeros(p + 1, int)
    for lo, hi in windows + chunks + csa:
        covered[lo:hi] += 1
    assert np.all(covered >= 1), "every past token is in some tier"
    # only SWA overlaps count twice; CSA and HCA never overlap anything
    assert csa[0] == (max(0, r - cfg.csa_window), p + 1)
    assert all(hi - lo <= cfg.hca_chunk for lo, hi in chunks) and len(chunks) <= cfg.hca_chunks
    for (lo1, hi1), (lo2, hi2) in zip(windows, windows[1:], strict=False):
        assert hi2 - lo1 == cfg.swa_overlap or lo2 == 0
        assert hi1 - lo1 == cfg.swa_window
    if windows:
        assert windows[0][1] == chunks[-1][0] and len(chunks) == cfg.hca_chunks
        assert np.all(covered[: windows[0][1]] <= 2)
    assert np.all(covered[windows[0][1] if windows else 0 :] == 1)


@pytest.fixture(scope="module")
def model():
    cfg = tiny()
    return NotesModel(cfg, random_weights(cfg, SEED))


def test_streaming_decode_equals_full_sequence(model):
    ids = np.random.default_rng(SEED).integers(0, 50, 90)
    full_rec = []
    full = model.forward(model.init_state(), ids, full_rec)
    st = model.init_state()
    steps = [model.forward(st, ids[t : t + 1]) for t in range(ids.size)]
    np.testing.assert_allclose(np.concatenate(steps), full, rtol=0, atol=1e-12)
    st = model.init_state()
    cuts = [0, 3, 4, 17, 41, 42, 90]
    parts = [model.forward(st, ids[a:b]) for a, b in zip(cuts, cuts[1:], strict=False)]
    np.testing.assert_allclose(np.concatenate(parts), full, rtol=0, atol=1e-12)
    # the MoE's final experts are among the primary candidates
    rec = full_rec[0]
    assert all(set(f) <= set(c) for f, c in zip(rec["router_idx"], rec["router_candidates"], strict=True))


def test_mhc_padding_never_changes_real_tokens(model):
    ids = np.random.default_rng(SEED + 1).integers(0, 50, 37)  # 2 chunks of 16 + 5 padded to 16
    st = model.init_state()
    out = model.prefill(st, ids)
    np.testing.assert_allclose(out, model.forward(model.init_state(), ids), rtol=0, atol=1e-12)
    assert st[0].n_tokens == 37
    # the state holds the real tokens only: the next decode step is unaffected
    ref_st = model.init_state()
    model.forward(ref_st, ids)
    np.testing.assert_allclose(model.forward(st, [7]), model.forward(ref_st, [7]), rtol=0, atol=1e-12)


def test_degenerate_tiers_are_plain_causal_attention():
    """With one-token HCA chunks (log 1 = 0 bias, mean = the token) and no SWA overlap,
    the tiers partition the past exactly: the layer's attention is dense causal attention."""
    cfg = tiny(hca_chunk=1, hca_chunks=5, swa_overlap=0, num_hidden_layers=1)
    m = NotesModel(cfg, random_weights(cfg, SEED))
    layer = m.layers[0]
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((60, cfg.hidden_size))
    pos = np.arange(60)
    rec = {}
    layer.forward(layer.init_state(), x, pos, rec)
    xn = rms_norm(x, layer.p("input_layernorm.weight"), cfg.rms_norm_eps)
    ang = rope_angles(pos, layer.inv)[:, None, :]
    q = apply_rope(
        (xn @ layer.p("attn.q_proj.weight").T).reshape(60, 4, 8), ang, pairs="half", where="leading"
    )
    k = apply_rope(
        (xn @ layer.p("attn.k_proj.weight").T).reshape(60, 2, 8), ang, pairs="half", where="leading"
    )
    v = (xn @ layer.p("attn.v_proj.weight").T).reshape(60, 2, 8)
    dense = (
        attention(q, k, v, causal_mask(pos, pos), 8**-0.5).reshape(60, -1) @ layer.p("attn.o_proj.weight").T
    )
    np.testing.assert_allclose(rec["attn_out"], dense, rtol=0, atol=1e-12)


def test_summaries_refresh_every_r_tokens(model):
    """Between two refresh points the summaries are fixed; at a refresh they change."""
    layer = model.layers[0]
    st = layer.init_state()
    rng = np.random.default_rng(SEED)
    seen = {}
    for p in range(70):
        layer.forward(st, rng.standard_normal((1, 24)), [p])
        seen.setdefault(st.anchor, []).append(st.summaries[0].copy())
    for anchor, sums in seen.items():
        assert all(np.array_equal(s, sums[0]) for s in sums), f"summaries changed inside anchor {anchor}"
    firsts = [v[0] for k, v in sorted(seen.items()) if v[0].size]
    assert any(
        a.shape != b.shape or not np.array_equal(a, b) for a, b in zip(firsts, firsts[1:], strict=False)
    )
