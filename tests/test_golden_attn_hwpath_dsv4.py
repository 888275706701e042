"""Hardware-exact path of the ``deepseek-v4`` attention block against the float64 chain."""

import numpy as np
import pytest

from golden.hwpath import bf16_value, to_bf16
from golden.hwpath_dsv4 import run_dsv4_attention, run_dsv4_hyper
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
