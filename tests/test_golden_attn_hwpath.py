"""Hardware-exact path of the ``notes`` layer (golden MA + VA) against the float64 chain."""

import numpy as np
import pytest

from golden.hwpath import bf16_value, run_notes_layer, to_bf16
from golden.presets.notes import NotesModel, random_weights

from .test_golden_attn_notes import tiny

SEED = 5


@pytest.fixture(scope="module")
def layer():
    cfg = tiny(hidden_size=32, num_hidden_layers=1, hca_chunks=2, moe_intermediate_size=16)
    return NotesModel(cfg, random_weights(cfg, SEED)).layers[0]


@pytest.fixture(scope="module")
def x():
    return np.random.default_rng(SEED).standard_normal((34, 32))  # SWA, HCA and CSA all engaged


@pytest.fixture(scope="module")
def traces(layer, x):
    return {mode: run_notes_layer(layer, x, mode) for mode in ("bf16", "int8")}


def test_float64_chain_is_the_golden_layer(layer, x, traces):
    """The stage-by-stage float64 values are the float64 layer's, so each stage's error
    is measured against the reference model itself."""
    xr = bf16_value(to_bf16(x))
    ref = layer.forward(layer.init_state(), xr, np.arange(x.shape[0]))
    for tr in traces.values():
        np.testing.assert_allclose(tr.out_ref, ref, rtol=0, atol=1e-12)


def test_stage_errors_are_bf16_sized(traces):
    """bf16 keeps 8 significant bits (relative step 2**-8): each stage, carrying every
    earlier stage's rounding, stays within a few steps of float64; int8 within a few of
    its 1/127 quantization step. A wrong mapping (pairs, scale, order) is off by O(1)."""
    print("\n" + traces["bf16"].table())
    for mode, bound in (("bf16", 0.03), ("int8", 0.08)):
        for st in traces[mode].stages:
            assert st.rel < bound, f"{mode} {st.stage}: relative error {st.rel:.3g}"
            if st.agree is not None:
                assert st.agree >= 0.85, f"{mode} {st.stage}: sets agree on {st.agree:.0%} of tokens"
    names = [s.stage for s in traces["bf16"].stages]
    assert "HCA summaries" in names and "attention softmax" in names


def test_int8_projections_are_coarser_than_bf16(traces):
    err = {m: {s.stage: s.rel for s in traces[m].stages} for m in traces}
    for st in ("q projection", "router logits"):
        assert err["int8"][st] > err["bf16"][st]


def test_exact_path_is_deterministic(layer, x, traces):
    again = run_notes_layer(layer, x[:12], "bf16")
    first = run_notes_layer(layer, x[:12], "bf16")
    np.testing.assert_array_equal(again.out_bits, first.out_bits)
