"""Preset ``deepseek-v4``: configuration reading and the decode-state API (decode = prefill)."""

import numpy as np
import pytest

from golden.presets.deepseek_v4 import CSA, HCA, SWA, DeepseekV4Config, DeepseekV4Model, random_weights

SEED = 7


def tiny(**changes):
    base = dict(vocab_size=64, hidden_size=32, moe_intermediate_size=16, num_hidden_layers=4,
                num_attention_heads=2, head_dim=16, q_lora_rank=16, num_experts_per_tok=2, n_routed_experts=4,
                layer_types=[SWA, CSA, HCA, CSA], mlp_layer_types=["hash_moe", "moe", "moe", "moe"],
                compress_rates={CSA: 4, HCA: 8}, partial_rotary_factor=0.5, sliding_window=6, o_groups=2,
                o_lora_rank=8, index_n_heads=2, index_head_dim=8, index_topk=3,
                rope_scaling={"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 16})
    base.update(changes)
    return DeepseekV4Config(**base)


def test_defaults_are_the_published_layout():
    cfg = DeepseekV4Config()
    assert cfg.layer_types[:4] == [HCA, HCA, HCA, CSA] and len(cfg.layer_types) == 43
    assert cfg.mlp_layer_types[:4] == ["hash_moe"] * 3 + ["moe"] and cfg.rope_dim == 64


def test_from_hf_legacy_keys():
    cfg = DeepseekV4Config.from_hf({
        "num_hidden_layers": 3, "compress_ratios": [0, 4, 128], "num_hash_layers": 1,
        "qk_rope_head_dim": 64, "head_dim": 512, "compress_rate_hca": 64,
        "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536},
        "unrelated_key": 1})
    assert cfg.layer_types == [SWA, CSA, HCA] and cfg.mlp_layer_types == ["hash_moe", "moe", "moe"]
    assert cfg.rope_dim == 64 and cfg.compress_rates[HCA] == 64 and cfg.rope_scaling["factor"] == 16


@pytest.mark.parametrize("bad, msg", [
    (dict(layer_types=[SWA]), "entries each"),
    (dict(layer_types=[SWA, "full", HCA, CSA]), "unknown layer types"),
    (dict(partial_rotary_factor=0.7), "rope dim"),
    (dict(num_experts_per_tok=9), "exceeds"),
    (dict(o_groups=3), "o_groups"),
])
def test_config_errors(bad, msg):
    with pytest.raises(ValueError, match=msg):
        tiny(**bad)


@pytest.fixture(scope="module")
def model():
    cfg = tiny()
    return DeepseekV4Model(cfg, random_weights(cfg, SEED))


def test_streaming_decode_equals_full_sequence(model):
    """Window eviction, pending compressor groups, the CSA overlap half and the indexer
    carry across calls: token by token, and in uneven chunks, equals one pass."""
    ids = np.random.default_rng(SEED).integers(0, 64, 70)
    full_rec = []
    full = model.forward(model.init_state(), ids, full_rec)
    st = model.init_state()
    steps, step_recs = [], []
    for t in range(ids.size):
        rec = []
        steps.append(model.forward(st, ids[t:t + 1], rec))
        step_recs.append(rec)
    np.testing.assert_allclose(np.concatenate(steps), full, rtol=0, atol=1e-12)
    for li in (1, 3):  # the indexer picks the same entries, token by token
        for t in range(ids.size):
            g = step_recs[t][li]["index_topk"][0]
            f = full_rec[li]["index_topk"][t]
            assert set(g[g >= 0]) == set(f[f >= 0])
    st = model.init_state()
    cuts = [0, 5, 6, 13, 31, 32, 70]
    chunks = [model.forward(st, ids[a:b]) for a, b in zip(cuts, cuts[1:], strict=False)]
    np.testing.assert_allclose(np.concatenate(chunks), full, rtol=0, atol=1e-12)
    assert st[0].window_kv.shape[0] == model.cfg.sliding_window - 1
    assert st[2].compressor.entries.n == 70 // 8 and st[2].compressor.pending_kv.shape[0] == 70 % 8


def test_window_and_groups_matter(model):
    """The test above would pass for a model that ignores its state; this one would not:
    a token far back changes the output only through the compressed entries."""
    rng = np.random.default_rng(SEED + 1)
    ids = rng.integers(0, 64, 40)
    other = ids.copy()
    other[0] = (ids[0] + 1) % 64
    a = model.forward(model.init_state(), ids)
    b = model.forward(model.init_state(), other)
    assert np.max(np.abs(a[-1] - b[-1])) > 1e-6


def test_position_must_follow_state(model):
    st = model.init_state()
    model.forward(st, [1, 2, 3])
    layer = model.layers[0]
    with pytest.raises(ValueError, match="expects position 3"):
        layer.forward(st[0], np.zeros((1, 4, 32)), [5], [1])
