"""Float64 primitives of the golden attention / MoE datapath against their definitions."""

import numpy as np
import pytest

from golden.attn import hyper
from golden.attn import primitives as P
from golden.moe import moe_combine, route_hash, route_topk, route_two_stage, router_scores, swiglu

SEED = 1234


@pytest.fixture
def rng():
    return np.random.default_rng(SEED)


def test_rms_norm(rng):
    x = rng.standard_normal((5, 16)) * 3
    w = rng.standard_normal(16)
    y = P.rms_norm(x, eps=0.0)
    np.testing.assert_allclose(np.sqrt(np.mean(y * y, axis=-1)), 1.0, rtol=1e-12)
    np.testing.assert_allclose(P.rms_norm(7.5 * x, eps=0.0), y, rtol=1e-12)
    np.testing.assert_allclose(
        P.rms_norm(x, w, eps=1e-3), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-3) * w
    )


@pytest.mark.parametrize("pairs", ["interleaved", "half"])
@pytest.mark.parametrize("where", ["trailing", "leading"])
def test_rope_rotation_properties(rng, pairs, where):
    d, rd = 12, 8
    inv = P.rope_inv_freq(rd, 10000.0)
    q, k = rng.standard_normal(d), rng.standard_normal(d)
    pos = np.array([3, 10, 250])
    qs = P.apply_rope(np.tile(q, (3, 1)), P.rope_angles(pos, inv), pairs=pairs, where=where)
    ks = P.apply_rope(np.tile(k, (3, 1)), P.rope_angles(pos - 3, inv), pairs=pairs, where=where)
    # norm kept, the untouched channels unchanged, inverse rotation restores x
    np.testing.assert_allclose(np.linalg.norm(qs, axis=1), np.linalg.norm(q), rtol=1e-12)
    keep = slice(0, d - rd) if where == "trailing" else slice(rd, None)
    np.testing.assert_array_equal(qs[:, keep], np.tile(q[keep], (3, 1)))
    back = P.apply_rope(qs, -P.rope_angles(pos, inv), pairs=pairs, where=where)
    np.testing.assert_allclose(back, np.tile(q, (3, 1)), atol=1e-12)
    # q·k depends only on the distance (3 here, for every row)
    dots = np.sum(qs * ks, axis=1)
    np.testing.assert_allclose(dots, dots[0], rtol=1e-10)


def test_rope_pair_layouts_are_permutations(rng):
    rd = 8
    x = rng.standard_normal((4, rd))
    ang = P.rope_angles(np.arange(4), P.rope_inv_freq(rd, 500.0))
    perm = np.concatenate([np.arange(0, rd, 2), np.arange(1, rd, 2)])  # interleaved → half
    a = P.apply_rope(x, ang, pairs="interleaved")
    b = P.apply_rope(x[:, perm], ang, pairs="half")
    np.testing.assert_allclose(a[:, perm], b, atol=1e-14)


def test_yarn_frequencies():
    rd, theta, factor, orig = 32, 10000.0, 8.0, 256
    inv = P.rope_inv_freq(rd, theta)
    y = P.rope_inv_freq(rd, theta, {"factor": factor, "original_max_position_embeddings": orig})
    # short wavelengths (many rotations over the original context) are kept,
    # long ones are interpolated by the factor, with a monotone ramp between
    wavelength = 2 * np.pi / inv
    fast = wavelength * 32 < orig
    slow = wavelength > orig
    assert fast.any() and slow.any()
    np.testing.assert_allclose(y[fast], inv[fast], rtol=1e-12)
    np.testing.assert_allclose(y[slow], inv[slow] / factor, rtol=1e-12)
    ratio = y / inv
    assert np.all(np.diff(ratio) <= 1e-15) and np.all((ratio >= 1 / factor - 1e-15) & (ratio <= 1 + 1e-15))


def test_compress_mean_and_gated(rng):
    kv = rng.standard_normal((11, 6))
    np.testing.assert_allclose(P.compress_groups(kv, 4), kv[:8].reshape(2, 4, 6).mean(1))
    # a constant gate (and no bias) is the mean; a bias steers the weights per slot
    np.testing.assert_allclose(
        P.compress_groups(kv, 4, gate=np.zeros_like(kv)), kv[:8].reshape(2, 4, 6).mean(1)
    )
    gate, bias = rng.standard_normal((11, 6)), rng.standard_normal((4, 6))
    got = P.compress_groups(kv, 4, gate, bias)
    g = gate[:8].reshape(2, 4, 6) + bias
    want = (np.exp(g) / np.exp(g).sum(1, keepdims=True) * kv[:8].reshape(2, 4, 6)).sum(1)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_compress_overlap(rng):
    rate, d = 4, 3
    kv, gate = rng.standard_normal((16, 2 * d)), rng.standard_normal((16, 2 * d))
    bias = rng.standard_normal((rate, 2 * d))
    got = P.compress_groups(kv, rate, gate, bias, overlap=True)
    g = gate + np.tile(bias, (4, 1))
    for w in range(4):
        rows = [slice(w * rate, (w + 1) * rate)]
        k = [kv[rows[0], d:]]
        gg = [g[rows[0], d:]]
        if w:  # the A half of the group before
            prev = slice((w - 1) * rate, w * rate)
            k.insert(0, kv[prev, :d])
            gg.insert(0, g[prev, :d])
        k, gg = np.concatenate(k), np.concatenate(gg)
        want = (np.exp(gg) / np.exp(gg).sum(0) * k).sum(0)
        np.testing.assert_allclose(got[w], want, rtol=1e-12)
    # split in two calls, carrying the last group's A half, it is the same
    first = P.compress_groups(kv[:8], rate, gate[:8], bias, overlap=True)
    prev = (kv[4:8, :d], g[4:8, :d])
    second = P.compress_groups(kv[8:], rate, gate[8:], bias, overlap=True, prev=prev)
    np.testing.assert_allclose(np.concatenate([first, second]), got, rtol=1e-12)


def test_key_sets():
    q, k = np.arange(10), np.arange(10)
    sw = P.sliding_window_mask(q, k, 3)
    np.testing.assert_array_equal(sw.sum(1), np.minimum(q + 1, 3))
    assert sw[9, 7] and not sw[9, 6] and not sw[5, 6]
    dr = P.distance_range_mask(q, k, 2, 5)
    assert dr[9, 7] and dr[9, 5] and not dr[9, 4] and not dr[9, 8]
    ch = P.chunk_mask(q, k, 4)
    assert ch[5, 4] and not ch[5, 3] and not ch[5, 6]
    cm = P.compressed_causal_mask(q, 3, 4)
    np.testing.assert_array_equal(cm.sum(1), np.minimum((q + 1) // 4, 3))
    # entry w is visible exactly when its last token (4w + 3) is at or before the query
    np.testing.assert_array_equal(cm, (4 * np.arange(3) + 3)[None, :] <= q[:, None])


def test_topk_tie_rule_and_invalid(rng):
    s = np.array([[0.0, 2.0, 0.0, 2.0, 1.0, 0.0]])
    np.testing.assert_array_equal(P.topk_indices(s, 4), [[1, 3, 4, 0]])
    valid = np.array([[True, False, True, True, False, False]])
    np.testing.assert_array_equal(P.topk_indices(s, 4, valid), [[3, 0, 2, -1]])
    x = rng.standard_normal((7, 20))
    np.testing.assert_array_equal(P.topk_indices(x, 5), np.argsort(-x, axis=1)[:, :5])


def test_indexer_scores(rng):
    q, keys, w = rng.standard_normal((3, 4, 8)), rng.standard_normal((6, 8)), rng.standard_normal((3, 4))
    got = P.indexer_scores(q, keys, w, 0.25)
    want = np.zeros((3, 6))
    for s in range(3):
        for t in range(6):
            want[s, t] = sum(w[s, h] * 0.25 * max(q[s, h] @ keys[t], 0.0) for h in range(4))
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("sink", [False, True])
def test_attention_masked_equals_gathered(rng, shared, sink):
    s, t, h, d = 6, 9, 4, 5
    q = rng.standard_normal((s, h, d))
    k = rng.standard_normal((t, d) if shared else (t, 2, d))
    v = rng.standard_normal((t, d) if shared else (t, 2, d))
    mask = rng.random((s, t)) < 0.5
    mask[0] = False  # a query with no key
    sk = rng.standard_normal(h) if sink else None
    a = P.attention(q, k, v, mask, 0.3, sk)
    b = P.attention_gathered(q, k, v, P.mask_to_indices(mask), 0.3, sk)
    np.testing.assert_allclose(a, b, atol=1e-13)
    np.testing.assert_array_equal(a[0], 0.0)
    np.testing.assert_array_equal(P.indices_to_mask(P.mask_to_indices(mask), t), mask)
    # against the definition, one query and head
    kk = k if shared else k[:, 1]
    vv = v if shared else v[:, 1]
    logits = kk[mask[2]] @ q[2, 3] * 0.3
    if sink:
        logits = np.append(logits, sk[3])
    p = np.exp(logits - logits.max())
    p /= p.sum()
    np.testing.assert_allclose(a[2, 3], p[: mask[2].sum()] @ vv[mask[2]], rtol=1e-12)


def test_sinkhorn_and_hyper_connections(rng):
    n, d, s = 4, 8, 3
    m = rng.random((s, n, n)) + 0.1
    ds = hyper.sinkhorn(m, 50, 0.0)
    np.testing.assert_allclose(ds.sum(-1), 1.0, atol=1e-9)
    np.testing.assert_allclose(ds.sum(-2), 1.0, atol=1e-12)
    streams = rng.standard_normal((s, n, d))
    fn, base, scale = rng.standard_normal(((2 + n) * n, n * d)), rng.standard_normal((2 + n) * n), np.ones(3)
    pre, post, comb = hyper.hc_weights(streams, fn, base, scale, sinkhorn_iters=20, eps=1e-6, norm_eps=1e-6)
    assert np.all((pre > 0) & (pre < 1 + 1e-5)) and np.all((post > 0) & (post < 2))
    np.testing.assert_allclose(comb.sum(-2), 1.0, atol=1e-5)
    out = rng.standard_normal((s, d))
    merged = hyper.hc_merge(streams, out, post, comb)
    k = 2
    np.testing.assert_allclose(
        merged[:, k], post[:, k, None] * out + np.einsum("sj,sjd->sd", comb[:, :, k], streams)
    )
    np.testing.assert_allclose(hyper.hc_collapse(streams, pre), np.einsum("sn,snd->sd", pre, streams))


def test_routers(rng):
    logits = rng.standard_normal((5, 8))
    np.testing.assert_allclose(router_scores(logits, "softmax").sum(1), 1.0)
    np.testing.assert_allclose(router_scores(logits, "sqrtsoftplus"), np.sqrt(np.log1p(np.exp(logits))))
    np.testing.assert_allclose(router_scores(logits, "sigmoid"), 1 / (1 + np.exp(-logits)))
    sc = router_scores(logits, "sqrtsoftplus")
    bias = np.zeros(8)
    bias[7] = 100.0  # steers every token to expert 7, but its weight is its own score
    idx, w = route_topk(sc, 2, bias, normalize=False, scaling=1.5)
    assert np.all(idx[:, 0] == 7)
    np.testing.assert_allclose(w[:, 0], 1.5 * sc[:, 7])
    idx, w = route_topk(sc, 3)
    np.testing.assert_allclose(w.sum(1), 1.0)
    table = rng.integers(0, 8, (16, 2))
    ids = rng.integers(0, 16, 5)
    idx, _ = route_hash(sc, ids, table)
    np.testing.assert_array_equal(idx, table[ids])
    sec = rng.standard_normal((5, 8))
    final, w, cand = route_two_stage(router_scores(logits, "softmax"), 4, sec, 2)
    for r in range(5):
        assert set(final[r]) <= set(cand[r])
        best = cand[r][np.argsort(-sec[r, cand[r]], kind="stable")[:2]]
        np.testing.assert_array_equal(final[r], best)


def test_swiglu_and_combine(rng):
    d, i = 6, 4
    x = rng.standard_normal((5, d)) * 4
    wg, wu, wd = rng.standard_normal((i, d)), rng.standard_normal((i, d)), rng.standard_normal((d, i))
    g, u = np.minimum(x @ wg.T, 1.0), np.clip(x @ wu.T, -1.0, 1.0)
    np.testing.assert_allclose(swiglu(x, wg, wu, wd, 1.0), (g / (1 + np.exp(-g)) * u) @ wd.T)
    assert not np.allclose(swiglu(x, wg, wu, wd, 1.0), swiglu(x, wg, wu, wd))
    experts = [rng.standard_normal((d, d)) for _ in range(4)]
    idx = rng.integers(0, 4, (5, 2))
    idx[0] = [3, 3]  # the same expert twice counts twice
    idx[1, 1] = -1
    w = rng.random((5, 2))
    got = moe_combine(x, idx, w, lambda e, rows: rows @ experts[e].T, [lambda v: 2 * v])
    want = 2 * x
    for r in range(5):
        for j in range(2):
            if idx[r, j] >= 0:
                want[r] += w[r, j] * experts[idx[r, j]] @ x[r]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_attention_parts_equals_concatenated(rng):
    s, h, d = 3, 4, 5
    q = rng.standard_normal((s, h, d))
    k1, v1 = rng.standard_normal((7, 2, d)), rng.standard_normal((7, 2, d))
    k2, v2 = rng.standard_normal((4, 2, d)), rng.standard_normal((4, 2, d))
    b2 = rng.standard_normal(4)
    m1 = rng.random((s, 7)) < 0.6
    got = P.attention_parts(q, [(k1, v1, None, m1), (k2, v2, b2, None)], 0.4)
    mask = np.concatenate([m1, np.ones((s, 4), bool)], axis=1)
    bias = np.concatenate([np.zeros(7), b2])
    want = P.attention(q, np.concatenate([k1, k2]), np.concatenate([v1, v2]), mask, 0.4, key_bias=bias)
    np.testing.assert_allclose(got, want, atol=1e-13)
    # a key with bias log 2 weighs as the same key given twice
    twice = P.attention(
        q, np.concatenate([k1, k1[:1]]), np.concatenate([v1, v1[:1]]), np.ones((s, 8), bool), 0.4
    )
    once = P.attention_parts(q, [(k1, v1, np.log([2.0] + [1.0] * 6), None)], 0.4)
    np.testing.assert_allclose(once, twice, atol=1e-13)
