"""Build the DeepSeek-V4 reference fixture: a tiny random model run by Hugging Face transformers.

Writes ``tests/data/dsv4_tiny.npz``: the configuration (``config.json`` text), every
parameter and buffer the datapath reads (named as in ``DeepseekV4Model``'s state dict),
the input token ids, and per layer the reference's activations: the layer's output
streams, the streams after the attention's hyper-connection, the attention and MoE
block outputs, the indexer's top-k picks and scores (CSA layers), and the router's picks
and scores. ``tests/test_golden_attn_dsv4_ref.py`` compares the golden model against it. Also writes
``tests/data/dsv4_configs.json``: transformers' reading of a set of configurations
(``CONFIG_CASES``: the published layouts and their legacy keys; the layer schedules, rates,
RoPE tables and every parameter's shape, or the error raised), which
``tests/test_golden_checkpoint_config.py`` checks ``DeepseekV4Config.from_hf`` against.

This script is the only place that needs torch and transformers; CI needs only numpy and
the committed fixture. To rebuild the fixture (CPU only, no download; about 20 s):

    python3 -m venv /tmp/hfref
    /tmp/hfref/bin/pip install torch==2.13.0 transformers==5.23.0 numpy
    #   (torch 2.13.0 CPU; on these machines a local wheel:
    #    /tmp/hfref/bin/pip install /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl)
    /tmp/hfref/bin/python tools/make_dsv4_fixture.py [-o tests/data/dsv4_tiny.npz] [--seed 0] [--only configs]

What it does:
- a tiny ``DeepseekV4Config`` (4 layers: sliding, CSA, HCA, CSA; the first MoE layer
  hash-routed; YaRN on the compressed layers' RoPE) sized so that 300 tokens engage
  every mechanism: the sliding window (32) is shorter than the sequence, the CSA
  compressor emits 75 entries of which the indexer keeps 16, the HCA compressor 18;
- every parameter and buffer drawn at random, including those that transformers
  initialises to zero or one (sinks, position biases, the selection bias, hyper-connection
  bases and scales, the hash table), so that no term of the datapath is invisible;
- the model runs in float64 (``model.double()``), full sequence, no cache. Some steps of
  the reference still compute in float32 by design (RMSNorm, the indexer's scores, the
  compressor's softmax, cos/sin): those set the agreement the test can ask for;
- then transformers' own cached decode: tokens 0..249 in one call (its layer outputs:
  ``pre.*``), 250..299 one per call (each step's layer outputs and indexer picks:
  ``dec.*``), so that the golden decode state is checked against the reference's.
"""

import argparse
import json
import pathlib

import numpy as np
import torch
from transformers import DeepseekV4Config, DeepseekV4Model, DynamicCache

SEQ_LEN = 300
DECODE_FROM = 250  # transformers' cached decode: one call for these, then one token per call

TINY = dict(
    vocab_size=256,
    hidden_size=32,
    moe_intermediate_size=32,
    num_hidden_layers=4,
    num_attention_heads=4,
    head_dim=32,
    q_lora_rank=32,
    num_experts_per_tok=2,
    n_routed_experts=8,
    n_shared_experts=1,
    scoring_func="sqrtsoftplus",
    routed_scaling_factor=1.5,
    layer_types=[
        "sliding_attention",
        "compressed_sparse_attention",
        "heavily_compressed_attention",
        "compressed_sparse_attention",
    ],
    mlp_layer_types=["hash_moe", "moe", "moe", "moe"],
    compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
    partial_rotary_factor=0.25,
    rope_theta=10000.0,
    compress_rope_theta=160000.0,
    rope_parameters={
        "rope_type": "yarn",
        "factor": 16.0,
        "original_max_position_embeddings": 64,
        "beta_fast": 32,
        "beta_slow": 1,
    },
    hc_mult=4,
    hc_sinkhorn_iters=20,
    hc_eps=1e-6,
    swiglu_limit=1.0,  # small, so that the clamps actually cut
    sliding_window=32,
    o_groups=2,
    o_lora_rank=16,
    index_n_heads=4,
    index_head_dim=16,
    index_topk=16,
    rms_norm_eps=1e-6,
    max_position_embeddings=4096,
)


# Configurations as users meet them (for ``DeepseekV4Config.from_hf``): transformers'
# reading of each is recorded in tests/data/dsv4_configs.json, or the error it raises.
_CFG_BASE = dict(
    num_hidden_layers=4, hidden_size=64, head_dim=64, num_attention_heads=2, index_head_dim=32,
    index_n_heads=2, o_groups=2, n_routed_experts=8, num_experts_per_tok=2, max_position_embeddings=4096,
    vocab_size=256, moe_intermediate_size=16, q_lora_rank=32, o_lora_rank=16, index_topk=4,
)
_YARN = {"factor": 16, "original_max_position_embeddings": 64, "beta_fast": 32, "beta_slow": 1}
CONFIG_CASES = {
    # the published layout: compress_ratios for the layers and the next-token-prediction layer,
    # num_hash_layers, qk_rope_head_dim, a legacy rope_scaling key
    "published": dict(_CFG_BASE, num_nextn_predict_layers=1, compress_ratios=[0, 4, 128, 4, 0],
                      num_hash_layers=2, qk_rope_head_dim=16, rope_scaling={"type": "yarn", **_YARN}),
    "published_two_mtp": dict(_CFG_BASE, num_nextn_predict_layers=2, compress_ratios=[128, 128, 4, 128, 4, 0],
                              num_hash_layers=3, rope_scaling={"type": "yarn", **_YARN}),
    "explicit_longer": dict(_CFG_BASE, partial_rotary_factor=0.25,
                            layer_types=["sliding_attention", "compressed_sparse_attention",
                                         "heavily_compressed_attention", "compressed_sparse_attention",
                                         "sliding_attention", "heavily_compressed_attention"],
                            mlp_layer_types=["hash_moe", "moe", "moe", "moe", "moe"]),
    "yarn_truncate_false": dict(_CFG_BASE, partial_rotary_factor=0.25,
                                rope_parameters={"rope_type": "yarn", **_YARN, "truncate": False}),
    "nested": dict(_CFG_BASE, partial_rotary_factor=0.25, rope_parameters={
        "main": {"rope_type": "default", "rope_theta": 20000.0},
        "compress": {"rope_type": "yarn", "rope_theta": 80000.0, "factor": 8,
                     "original_max_position_embeddings": 64}}),
    "nested_mscale": dict(_CFG_BASE, partial_rotary_factor=0.25, rope_parameters={
        "main": {"rope_type": "default", "rope_theta": 10000.0},
        "compress": {"rope_type": "yarn", "rope_theta": 160000.0, "factor": 8, "mscale": 1.0,
                     "mscale_all_dim": 0.5, "original_max_position_embeddings": 64}}),
    "legacy_rates": dict(_CFG_BASE, compress_ratios=[0, 4, 128, 4], compress_rate_csa=8, compress_rate_hca=64,
                         qk_rope_head_dim=8),
    "rope_scaling_wins": dict(_CFG_BASE, partial_rotary_factor=0.25, rope_scaling={"type": "yarn", **_YARN},
                              rope_parameters={"rope_type": "yarn", "factor": 4,
                                               "original_max_position_embeddings": 128}),
    "defaults_no_yarn": dict(_CFG_BASE),
    "two_shared_experts": dict(_CFG_BASE, n_shared_experts=2),
    "compress_ratio_unknown": dict(_CFG_BASE, compress_ratios=[0, 4, 64, 4]),
    "layer_types_short": dict(_CFG_BASE, layer_types=["sliding_attention", "compressed_sparse_attention"]),
    "layer_type_unknown": dict(_CFG_BASE, layer_types=["sliding_attention", "full_attention",
                                                       "sliding_attention", "sliding_attention"]),
}


def config_cases():
    """transformers' reading of each of CONFIG_CASES: layer schedules, rates, RoPE tables."""
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4RotaryEmbedding

    out = {}
    for name, raw in CONFIG_CASES.items():
        try:
            cfg = DeepseekV4Config(**json.loads(json.dumps(raw)))
        except Exception as e:  # noqa: BLE001 - recorded: transformers refuses this one
            out[name] = {"config": raw, "error": type(e).__name__}
            continue
        rope = DeepseekV4RotaryEmbedding(cfg)
        out[name] = {
            "config": raw,
            "layer_types": cfg.layer_types,
            "mlp_layer_types": cfg.mlp_layer_types,
            "compress_rates": cfg.compress_rates,
            "rope_dim": cfg.qk_rope_head_dim,
            "main_inv_freq": rope.main_inv_freq.tolist(),
            "main_attention_scaling": float(rope.main_attention_scaling),
            "compress_inv_freq": rope.compress_inv_freq.tolist(),
            "compress_attention_scaling": float(rope.compress_attention_scaling),
            # every parameter and buffer of the model transformers builds, with its shape
            "shapes": {
                k: list(v.shape) for k, v in DeepseekV4Model(cfg).state_dict().items() if "inv_freq" not in k
            },
        }
    return out


def randomize(model, gen):
    """Draw every parameter and the two routing buffers; nothing keeps its init value."""
    cfg = model.config
    for name, p in model.named_parameters():
        with torch.no_grad():
            if "norm" in name or name.endswith(("scale", "hc_scale")):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith(("sinks", "position_bias", "base", "hc_base")):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif "experts" in name or name.endswith("gate.weight"):
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / np.sqrt(p.shape[-1]))
    for name, b in model.named_buffers():
        with torch.no_grad():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.1 * torch.randn(b.shape, generator=gen))
            elif name.endswith("tid2eid"):
                # distinct experts per token, as a real table has
                rows = [
                    torch.randperm(cfg.n_routed_experts, generator=gen)[: b.shape[1]]
                    for _ in range(b.shape[0])
                ]
                b.copy_(torch.stack(rows))


def decode_steps(model, ids, arr):
    """transformers' own decode: the first DECODE_FROM tokens in one cached call, then one
    token per call; per step, each layer's output streams and each indexer's picks."""
    steps = {}

    def keep(key, fn):
        def hook(_mod, args, kwargs, out):
            steps.setdefault(key, []).append(fn(out))

        return hook

    hooks = []
    for i, layer in enumerate(model.layers):
        hooks.append(
            layer.register_forward_hook(
                keep(f"l{i}.output", lambda o: arr(o).astype(np.float32)), with_kwargs=True
            )
        )
        comp = layer.self_attn.compressor
        if comp is not None and hasattr(comp, "indexer"):
            hooks.append(
                comp.indexer.register_forward_hook(
                    keep(f"l{i}.index_topk", lambda o: o[0].numpy().copy()), with_kwargs=True
                )
            )
    with torch.no_grad():
        cache = DynamicCache(config=model.config)
        model(input_ids=ids[:, :DECODE_FROM], past_key_values=cache, use_cache=True)
        # The cached prefill's own layer outputs: its indexer breaks ties among fewer
        # entries than the full pass does, so its outputs (and the state built from them)
        # may differ from the full pass's on tie rows; the golden state is built from these.
        prefill = {key: values.pop() for key, values in steps.items()}
        for t in range(DECODE_FROM, ids.shape[1]):
            model(input_ids=ids[:, t : t + 1], past_key_values=cache, use_cache=True)
    for h in hooks:
        h.remove()
    return prefill, steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", default="tests/data/dsv4_tiny.npz")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--configs", default="tests/data/dsv4_configs.json",
                    help="where transformers' reading of CONFIG_CASES goes")
    ap.add_argument("--only", choices=("layers", "configs"), help="build one of the outputs")
    args = ap.parse_args()
    if args.only != "layers":
        path = pathlib.Path(args.configs)
        path.write_text(json.dumps(config_cases(), indent=1) + "\n")
        print(f"wrote {path} ({len(CONFIG_CASES)} configurations)")
    if args.only == "configs":
        return

    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    config = DeepseekV4Config(**TINY)
    config._attn_implementation = "eager"
    config._experts_implementation = "eager"  # the per-expert loop; grouped_mm has no float64
    model = DeepseekV4Model(config).eval()
    randomize(model, gen)
    model = model.double()

    ids = torch.randint(0, config.vocab_size, (1, SEQ_LEN), generator=gen)
    rec = {}

    def keep(key, fn):
        def hook(_mod, args, kwargs, out):
            rec[key] = fn(args, kwargs, out)

        return hook

    def arr(t):
        return t.detach().to(torch.float64).numpy()[0]

    hooks = []
    for i, layer in enumerate(model.layers):
        hooks.append(
            layer.register_forward_hook(
                keep(f"l{i}.io", lambda a, k, o: (arr(a[0] if a else k["hidden_states"]), arr(o))),
                with_kwargs=True,
            )
        )
        hooks.append(
            layer.self_attn.register_forward_hook(
                keep(f"l{i}.attn_out", lambda a, k, o: arr(o[0])), with_kwargs=True
            )
        )
        hooks.append(
            layer.mlp.register_forward_hook(keep(f"l{i}.moe_out", lambda a, k, o: arr(o)), with_kwargs=True)
        )
        hooks.append(
            layer.ffn_hc.register_forward_hook(
                keep(f"l{i}.after_attn", lambda a, k, o: arr(a[0] if a else k["hidden_streams"])),
                with_kwargs=True,
            )
        )
        hooks.append(
            layer.mlp.gate.register_forward_hook(
                keep(
                    f"l{i}.router",
                    lambda a, k, o: (
                        o[2].numpy().copy(),
                        arr(torch.nn.functional.softplus(o[0]).sqrt().unsqueeze(0)),
                    ),
                ),
                with_kwargs=True,
            )
        )
        comp = layer.self_attn.compressor
        if comp is not None and hasattr(comp, "indexer"):
            hooks.append(
                comp.indexer.register_forward_hook(
                    keep(f"l{i}.index_topk", lambda a, k, o: o[0].numpy().copy()), with_kwargs=True
                )
            )
            hooks.append(
                comp.indexer.scorer.register_forward_hook(
                    keep(f"l{i}.index_scores", lambda a, k, o: arr(o)), with_kwargs=True
                )
            )

    with torch.no_grad():
        out = model(input_ids=ids, use_cache=False).last_hidden_state
    for h in hooks:
        h.remove()
    prefill, steps = decode_steps(model, ids, arr)

    data = {
        "config_json": np.array(json.dumps(config.to_dict(), default=str)),
        "input_ids": ids.numpy()[0],
        "final": arr(out).astype(np.float32),
    }
    state = model.state_dict()
    for name, t in state.items():
        if "inv_freq" in name:
            continue
        data[f"w.{name}"] = t.numpy() if not t.is_floating_point() else t.to(torch.float32).numpy()
    for i in range(config.num_hidden_layers):
        # Activations are kept in float32 (half the size; the rounding, ~6e-8 relative, is
        # far below the test's tolerance). A layer's input is the previous layer's output
        # (the first layer's is the embedding), so it is not stored twice.
        data[f"l{i}.output"] = rec[f"l{i}.io"][1].astype(np.float32)
        for key in ("after_attn", "attn_out", "moe_out"):
            data[f"l{i}.{key}"] = rec[f"l{i}.{key}"].astype(np.float32)
        data[f"l{i}.router_idx"], data[f"l{i}.router_scores"] = rec[f"l{i}.router"]
        if f"l{i}.index_topk" in rec:
            data[f"l{i}.index_topk"] = rec[f"l{i}.index_topk"]
            data[f"l{i}.index_scores"] = rec[f"l{i}.index_scores"]
    data["decode_from"] = np.array(DECODE_FROM)
    for key, values in steps.items():
        data[f"dec.{key}"] = np.concatenate(values)
    for i in range(config.num_hidden_layers):
        data[f"pre.l{i}.output"] = prefill[f"l{i}.output"]
    path = pathlib.Path(args.output)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **data)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB, {len(data)} arrays)")


if __name__ == "__main__":
    main()
