"""``DeepseekV4Config.from_hf`` against transformers' own reading of the same configurations.

``tests/data/dsv4_configs.json`` was made by ``tools/make_dsv4_fixture.py --only configs``
(transformers 5.23): for each configuration a user meets (the published ``compress_ratios``
layout with next-token-prediction entries, ``num_hash_layers``, a legacy ``rope_scaling``,
explicit lists longer than the layer count, nested and flat YaRN, ``truncate: false``, two
shared experts) transformers' layer schedules, compression rates, both RoPE tables, the
cos/sin scale and the shape of every parameter of the model it builds; or, for the ones it
refuses, the error it raised.
"""

import json
import pathlib

import numpy as np
import pytest

from golden.attn.primitives import rope_inv_freq
from golden.presets.deepseek_v4 import DeepseekV4Config, DeepseekV4Layer, weight_shapes

CASES = json.loads((pathlib.Path(__file__).parent / "data" / "dsv4_configs.json").read_text())
ACCEPTED = [k for k, v in CASES.items() if "error" not in v]
REFUSED = [k for k, v in CASES.items() if "error" in v]


def test_cases_cover_the_findings():
    assert {"published", "published_two_mtp", "explicit_longer", "yarn_truncate_false",
            "two_shared_experts", "rope_scaling_wins"} <= set(ACCEPTED)
    assert {"compress_ratio_unknown", "layer_types_short", "layer_type_unknown"} <= set(REFUSED)
    pub = CASES["published"]["config"]
    assert len(pub["compress_ratios"]) == pub["num_hidden_layers"] + pub["num_nextn_predict_layers"]
    assert "rope_scaling" in pub and "num_hash_layers" in pub and "layer_types" not in pub


@pytest.mark.parametrize("name", ACCEPTED)
def test_from_hf_reads_as_transformers(name):
    case = CASES[name]
    cfg = DeepseekV4Config.from_hf(case["config"])
    assert cfg.layer_types == case["layer_types"]
    assert cfg.mlp_layer_types == case["mlp_layer_types"]
    assert cfg.compress_rates == case["compress_rates"]
    assert cfg.rope_dim == case["rope_dim"]
    # transformers computes the tables in float32: agreement to float32 rounding
    comp = next(i for i, t in enumerate(cfg.layer_types) if t != "sliding_attention")
    layer = DeepseekV4Layer(cfg, {}, comp)
    np.testing.assert_allclose(layer.inv_main, case["main_inv_freq"], rtol=2e-7, atol=0)
    np.testing.assert_allclose(layer.inv_comp, case["compress_inv_freq"], rtol=2e-7, atol=0)
    assert layer.rope_scale == pytest.approx(case["compress_attention_scaling"], rel=1e-12)


@pytest.mark.parametrize("name", ACCEPTED)
def test_weight_shapes_are_transformers_state_dict(name):
    """Every parameter and buffer, named and shaped as in transformers' model: the shared
    expert is moe_intermediate_size wide whatever n_shared_experts says."""
    case = CASES[name]
    cfg = DeepseekV4Config.from_hf(case["config"])
    assert {k: list(v) for k, v in weight_shapes(cfg).items()} == case["shapes"]


def test_two_shared_experts_are_one_of_moe_intermediate_size():
    cfg = DeepseekV4Config.from_hf(CASES["two_shared_experts"]["config"])
    assert cfg.n_shared_experts == 2
    shapes = weight_shapes(cfg)
    gate = shapes["layers.0.mlp.shared_experts.gate_proj.weight"]
    assert gate == (cfg.moe_intermediate_size, cfg.hidden_size)


def test_yarn_truncate_false_follows_transformers():
    """The decision: ``truncate`` is not honoured (transformers reads it from the outer rope
    dictionary, where a V4 configuration never has it), so the correction range is rounded
    outwards. The case is one where that matters: ``truncate: false`` would give other
    frequencies."""
    case = CASES["yarn_truncate_false"]
    assert case["config"]["rope_parameters"]["truncate"] is False
    cfg = DeepseekV4Config.from_hf(case["config"])
    assert cfg.rope_scaling["truncate"] is True
    yarn = {k: cfg.rope_scaling[k] for k in ("factor", "original_max_position_embeddings")}
    honoured = rope_inv_freq(cfg.rope_dim, cfg.compress_rope_theta, {**yarn, "truncate": False})
    assert np.max(np.abs(honoured / np.asarray(case["compress_inv_freq"]) - 1)) > 0.05
    # given directly, the preset refuses what it would not honour
    with pytest.raises(ValueError, match="truncate must be true"):
        cfg.scaled(rope_scaling={**cfg.rope_scaling, "truncate": False})


@pytest.mark.parametrize("name, field", [
    ("compress_ratio_unknown", "compress_ratios"),
    ("layer_types_short", "layer_types"),
    ("layer_type_unknown", "layer types"),
])
def test_refused_configurations_name_the_field(name, field):
    """What transformers refuses, the preset refuses too, with a ValueError naming the field
    (transformers' own error for an unknown compression rate is a bare KeyError)."""
    with pytest.raises(ValueError, match=field):
        DeepseekV4Config.from_hf(CASES[name]["config"])


@pytest.mark.parametrize("change, field", [
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0}}, "rope_type 'linear'"),
    ({"rope_parameters": {"main": {"rope_type": "yarn", "factor": 2}, "compress": {}}},
     r"rope_parameters\['main'\]"),
    ({"rope_parameters": {"main": {"rope_theta": 1e4}}}, "both be dictionaries"),
    ({"rope_scaling": {"type": "yarn", "factor": 4}}, "original_max_position_embeddings"),
    ({"rope_parameters": {"main": {"partial_rotary_factor": 0.25},
                          "compress": {"partial_rotary_factor": 0.5}}}, "partial_rotary_factor"),
])
def test_rope_errors_name_the_field(change, field):
    raw = dict(CASES["defaults_no_yarn"]["config"], **change)
    with pytest.raises(ValueError, match=field):
        DeepseekV4Config.from_hf(raw)
