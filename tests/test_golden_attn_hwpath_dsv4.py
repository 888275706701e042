"""Hardware-exact path of the ``deepseek-v4`` attention block, hyper-connections, MoE and
whole layer against the float64 chain."""

import numpy as np
import pytest

from golden.hwpath import bf16_value, to_bf16
from golden.hwpath_dsv4 import run_dsv4_attention, run_dsv4_hyper, run_dsv4_layer, run_dsv4_moe, va_gather_idx
from golden.presets.deepseek_v4 import DeepseekV4Model, random_weights

from .test_golden_attn_dsv4 import tiny

SEED = 3


@pytest.fixture(scope="module")
def model():
    cfg = tiny(index_topk=4)
    return DeepseekV4Model(cfg, random_weights(cfg, SEED))


@pytest.mark.parametrize("i", [0, 1, 2])  # sliding, CSA, HCA
def test_exact_attention_block(model, i):
    layer = model.layers[i]
    x = np.random.default_rng(SEED + i).standard_normal((40, model.cfg.hidden_size))
    tr = run_dsv4_attention(layer, x)
    # the float64 chain is the golden float64 block itself
    ref = layer.attention(layer.init_state(), bf16_value(to_bf16(x)), np.arange(40))
    np.testing.assert_allclose(tr.out_ref, ref, rtol=0, atol=1e-12)
    print("\n" + tr.table())
    for st in tr.stages:
        assert st.rel < 0.04, f"{st.stage}: relative error {st.rel:.3g}"
        if st.agree is not None:
            assert st.agree >= 0.8, f"{st.stage}: selections agree on {st.agree:.0%} of queries"
    assert len(tr.stages) == {0: 5, 1: 10, 2: 7}[i]


def test_exact_hyper_connection(model):
    from golden.attn import hyper

    layer = model.layers[1]
    rng = np.random.default_rng(SEED)
    streams = rng.standard_normal((20, model.cfg.hc_mult, model.cfg.hidden_size))
    out = rng.standard_normal((20, model.cfg.hidden_size))
    tr = run_dsv4_hyper(layer, streams, out, "ffn_hc")
    sr, orf = bf16_value(to_bf16(streams)), bf16_value(to_bf16(out))
    pre, post, comb = layer._hc("ffn_hc", sr)
    np.testing.assert_allclose(tr.out_ref, hyper.hc_merge(sr, orf, post, comb), rtol=0, atol=1e-12)
    print("\n" + tr.table())
    for st in tr.stages:
        assert st.rel < 0.05, f"{st.stage}: relative error {st.rel:.3g}"


@pytest.mark.parametrize("i", [0, 1, 2, 3])  # hash-routed, then top-k layers
def test_exact_moe(model, i):
    """The MoE on the golden MA / VA (SOFTPLUS, SQRT, bias ADD, TOP-K or the hash table's
    GATHER_IDX, clamped SwiGLU, shared expert): its float64 chain is ``layer.moe``; every
    stage stays within 4 % relative; the expert sets agree on >= 90 % of the tokens, and
    the tokens that differ are reported with the bf16 ties among them."""
    layer = model.layers[i]
    rng = np.random.default_rng(SEED + 10 + i)
    x = rng.standard_normal((48, model.cfg.hidden_size))
    ids = rng.integers(0, model.cfg.vocab_size, 48)
    tr, same = run_dsv4_moe(layer, x, ids)
    np.testing.assert_allclose(tr.out_ref, layer.moe(bf16_value(to_bf16(x)), ids), rtol=0, atol=1e-12)
    print("\n" + tr.table())
    if layer.hash:
        assert tr.router is None and same.all()
    else:
        print(tr.router.line())
        assert tr.router.tokens == 48 and tr.router.equal == int(same.sum())
        assert tr.router.differ_in_ties <= tr.router.boundary_ties
        assert same.mean() >= 0.9, tr.router.line()
    for st in tr.stages:
        assert st.rel < 0.04, f"{st.stage}: relative error {st.rel:.3g}"


@pytest.mark.parametrize("dtype, stride, base", [(np.uint16, 1, 0), (np.int32, 3, 2)])
def test_va_gather_idx(dtype, stride, base):
    rng = np.random.default_rng(stride)
    values = rng.integers(0, 30000, 50).astype(dtype)
    idx = rng.integers(0, (50 - 1 - base) // stride + 1, 37)
    assert np.array_equal(va_gather_idx(values, idx, stride, base), values[base + idx * stride])


@pytest.mark.parametrize("i", [0, 1])  # sliding + hash-routed, CSA + top-k
def test_exact_layer(model, i):
    """A whole layer on the exact path: the float64 chain ends exactly at
    ``layer.forward``; every stage (attention, hyper-connections, MoE, whole layer) stays
    within 4 % relative."""
    layer = model.layers[i]
    rng = np.random.default_rng(SEED)
    streams = rng.standard_normal((24, model.cfg.hc_mult, model.cfg.hidden_size))
    ids = rng.integers(0, model.cfg.vocab_size, 24)
    tr = run_dsv4_layer(layer, streams, ids)
    ref = layer.forward(layer.init_state(), bf16_value(to_bf16(streams)), np.arange(24), ids)
    np.testing.assert_allclose(tr.out_ref, ref, rtol=0, atol=1e-12)
    print("\n" + tr.table() + ("" if tr.router is None else "\n" + tr.router.line()))
    names = [st.stage for st in tr.stages]
    assert names[-2:] == ["layer output (all tokens)", "layer output (tokens selecting and routing alike)"]
    assert "router scores (SOFTPLUS, SQRT)" in names and "attn_hc: merge" in names
    for st in tr.stages:
        assert st.rel < 0.04, f"{st.stage}: relative error {st.rel:.3g}"


@pytest.fixture(scope="module")
def int8_layer(model):
    """Layer 1 (CSA, top-k MoE) on the exact path with the MA in int8 mode, and its input."""
    layer = model.layers[1]
    rng = np.random.default_rng(SEED)
    streams = rng.standard_normal((24, model.cfg.hc_mult, model.cfg.hidden_size))
    ids = rng.integers(0, model.cfg.vocab_size, 24)
    return layer, streams, ids, run_dsv4_layer(layer, streams, ids, "int8")


def test_exact_layer_int8(int8_layer):
    """int8 weight GEMMs: the float64 chain is unchanged (it ends at ``layer.forward``);
    every stage stays within 8 % relative (the notes layer's int8 bound) and the
    selections agree on >= 80 % of the queries / 90 % of the tokens."""
    layer, streams, ids, tr = int8_layer
    ref = layer.forward(layer.init_state(), bf16_value(to_bf16(streams)), np.arange(24), ids)
    np.testing.assert_allclose(tr.out_ref, ref, rtol=0, atol=1e-12)
    print("\n" + tr.table() + "\n" + tr.router.line())
    for st in tr.stages:
        assert st.rel < 0.08, f"{st.stage}: relative error {st.rel:.3g}"
        if st.agree is not None:
            assert st.agree >= 0.8, f"{st.stage}: selections agree on {st.agree:.0%}"
    assert tr.router.equal >= 0.9 * tr.router.tokens, tr.router.line()


def test_int8_gemm_is_quantized(int8_layer):
    """The router logits of the int8 run are, bit for bit, an independent int8 GEMM of the
    post-attention RMSNorm's bits: VA QUANTIZE per token row, the weight matrix quantized
    with one scale, an int64 matrix product (no overflow of int32 here), VA DEQUANTIZE with
    the binary32 product of the two scales; and they differ from the bf16 GEMM's."""
    from golden import va
    from golden.hwpath import ma_matmul

    layer, _, _, tr = int8_layer
    xb = tr.bits["post-attention RMSNorm"]
    w = layer.p("mlp.gate.weight")
    qw, sw = va.quantize_bf16(to_bf16(w).ravel())
    qw = qw.reshape(w.shape).astype(np.int64)
    want = []
    for row in xb:
        qa, sa = va.quantize_bf16(row)
        acc = qa.astype(np.int64) @ qw.T
        assert np.abs(acc).max() < 2**31
        want.append(va.dequantize_int32(acc.astype(np.int32), va.f32_mul(np.uint32(sa), np.uint32(sw))))
    got = tr.bits["router logits"]
    assert np.array_equal(got, np.stack(want))
    assert not np.array_equal(got, ma_matmul(xb, w, "bf16"))


def test_bad_mode(model):
    with pytest.raises(ValueError, match="mode must be 'bf16' or 'int8'"):
        run_dsv4_layer(model.layers[0], np.zeros((4, model.cfg.hc_mult, model.cfg.hidden_size)), [0] * 4,
                       "fp16")


@pytest.mark.parametrize("i, tokens", [(1, 3), (2, 7)])  # CSA rate 4, HCA rate 8
@pytest.mark.parametrize("mode", ["bf16", "int8"])
def test_fewer_tokens_than_the_rate(model, i, tokens, mode):
    """Fewer tokens than the compression rate: no complete group, so no compressed entries
    (as the float64 layer): the compressor and indexer rows are absent, the float64 chain
    still ends at ``layer.forward`` and the layer stays within its mode's bound."""
    layer = model.layers[i]
    assert tokens < layer.rate
    rng = np.random.default_rng(SEED)
    streams = rng.standard_normal((tokens, model.cfg.hc_mult, model.cfg.hidden_size))
    ids = rng.integers(0, model.cfg.vocab_size, tokens)
    tr = run_dsv4_layer(layer, streams, ids, mode)
    ref = layer.forward(layer.init_state(), bf16_value(to_bf16(streams)), np.arange(tokens), ids)
    np.testing.assert_allclose(tr.out_ref, ref, rtol=0, atol=1e-12)
    names = [st.stage for st in tr.stages]
    assert not [n for n in names if "compressor" in n or "indexer" in n], names
    assert "attention (queries selecting alike)" in names
    for st in tr.stages:
        assert st.rel < {"bf16": 0.04, "int8": 0.08}[mode], f"{st.stage}: relative error {st.rel:.3g}"
