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
With ``--only checkpoints`` (needs ``accelerate`` too, for transformers' FP8 loading) it
writes tiny checkpoints in each format and naming scheme under ``tests/data/dsv4_ckpt/`` and
what transformers loads from them in ``tests/data/dsv4_ckpt_expected.npz``
(``tests/test_golden_checkpoint.py``; see ``docs/golden/checkpoints.md``).

This script is the only place that needs torch and transformers; CI needs only numpy and
the committed fixture. To rebuild the fixture (CPU only, no download; about 20 s):

    python3 -m venv /tmp/hfref
    /tmp/hfref/bin/pip install torch==2.13.0 transformers==5.23.0 numpy accelerate
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


# Tiny checkpoints in each format a user meets, written from one random model: transformers'
# own save_pretrained (its state-dict names; bf16 with the float32 modules it keeps), the same
# sharded with an index, and the published checkpoints' layout (their names, FP8 E4M3 linears
# with block E8M0 scales, FP4 E2M1 routed experts with [1, 32] E8M0 scales, the compressor
# and indexer projections in bf16, a next-token-prediction layer that loaders skip, sharded).
# Blocks of the FP8 scales are 16 x 16 so that the 64-wide model has several per matrix
# (transformers derives the block from the scale grid, as the published 128 x 128 would be).
CKPT_TINY = dict(TINY, hidden_size=64, moe_intermediate_size=32, n_routed_experts=4, vocab_size=128,
                 index_topk=8, num_nextn_predict_layers=1)
CKPT_TOKENS = 64
FORMATS = ("hf_names_f32", "hf_default_bf16_sharded", "published_fp8_fp4")
FP8_BLOCK = 16
FP4_GROUP = 32
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
# transformers' state-dict name pieces -> the published checkpoint's (the inverse of
# transformers' conversion_mapping for deepseek_v4; transformers' loader checks the result)
PUBLISHED_LEAVES = [
    ("self_attn.compressor.indexer.kv_proj.", "attn.indexer.compressor.wkv."),
    ("self_attn.compressor.indexer.gate_proj.", "attn.indexer.compressor.wgate."),
    ("self_attn.compressor.indexer.position_bias", "attn.indexer.compressor.ape"),
    ("self_attn.compressor.indexer.kv_norm.", "attn.indexer.compressor.norm."),
    ("self_attn.compressor.indexer.q_b_proj.", "attn.indexer.wq_b."),
    ("self_attn.compressor.indexer.scorer.weights_proj.", "attn.indexer.weights_proj."),
    ("self_attn.compressor.kv_proj.", "attn.compressor.wkv."),
    ("self_attn.compressor.gate_proj.", "attn.compressor.wgate."),
    ("self_attn.compressor.position_bias", "attn.compressor.ape"),
    ("self_attn.compressor.kv_norm.", "attn.compressor.norm."),
    ("self_attn.q_a_proj.", "attn.wq_a."), ("self_attn.q_b_proj.", "attn.wq_b."),
    ("self_attn.kv_proj.", "attn.wkv."), ("self_attn.o_a_proj.", "attn.wo_a."),
    ("self_attn.o_b_proj.", "attn.wo_b."), ("self_attn.q_a_norm.", "attn.q_norm."),
    ("self_attn.kv_norm.", "attn.kv_norm."), ("self_attn.sinks", "attn.attn_sink"),
    ("input_layernorm.", "attn_norm."), ("post_attention_layernorm.", "ffn_norm."),
    ("attn_hc.fn", "hc_attn_fn"), ("attn_hc.base", "hc_attn_base"), ("attn_hc.scale", "hc_attn_scale"),
    ("ffn_hc.fn", "hc_ffn_fn"), ("ffn_hc.base", "hc_ffn_base"), ("ffn_hc.scale", "hc_ffn_scale"),
    ("mlp.gate.e_score_correction_bias", "ffn.gate.bias"), ("mlp.gate.", "ffn.gate."),
    ("mlp.shared_experts.gate_proj.", "ffn.shared_experts.w1."),
    ("mlp.shared_experts.up_proj.", "ffn.shared_experts.w3."),
    ("mlp.shared_experts.down_proj.", "ffn.shared_experts.w2."),
]
PUBLISHED_TOP = {"embed_tokens.weight": "embed.weight", "lm_head.weight": "head.weight",
                 "norm.weight": "norm.weight", "hc_head.hc_fn": "hc_head_fn",
                 "hc_head.hc_base": "hc_head_base", "hc_head.hc_scale": "hc_head_scale"}
# the published checkpoints keep these projections in bf16 (transformers' _keep_in_fp32_modules)
BF16_LINEARS = ("compressor.wkv.", "compressor.wgate.", "indexer.weights_proj.")


def published_name(name):
    name = name.removeprefix("model.")
    if name in PUBLISHED_TOP:
        return PUBLISHED_TOP[name]
    layer, rest = name.split(".", 2)[1], name.split(".", 2)[2]
    for src, dst in PUBLISHED_LEAVES:
        if rest.startswith(src):
            return f"layers.{layer}.{dst}{rest[len(src):]}"
    raise KeyError(name)


def quant_fp8(w):
    """Block FP8 E4M3 codes and power-of-two (E8M0) scales: the published linears' format."""
    n, k = w.shape
    blocks = w.reshape(n // FP8_BLOCK, FP8_BLOCK, k // FP8_BLOCK, FP8_BLOCK).abs().amax(dim=(1, 3))
    scale = torch.exp2(torch.ceil(torch.log2(blocks.clamp_min(1e-30) / 448.0)))
    full = scale.repeat_interleave(FP8_BLOCK, 0).repeat_interleave(FP8_BLOCK, 1)
    return (w / full).to(torch.float8_e4m3fn), scale.to(torch.float8_e8m0fnu)


def quant_fp4(w):
    """FP4 E2M1 codes (two per byte, the even element in the low nibble) and [1, 32] E8M0 scales."""
    n, k = w.shape
    groups = w.reshape(n, k // FP4_GROUP, FP4_GROUP)
    scale = torch.exp2(torch.ceil(torch.log2(groups.abs().amax(dim=2).clamp_min(1e-30) / 6.0)))
    v = (groups / scale[..., None]).reshape(n, k)
    lut = torch.tensor(E2M1)
    code = (v[..., None] - lut).abs().argmin(dim=-1).to(torch.uint8)
    packed = code[:, 0::2] | (code[:, 1::2] << 4)
    return packed.view(torch.int8), scale.to(torch.float8_e8m0fnu)


def write_shards(directory, tensors, n_shards):
    from safetensors.torch import save_file

    names = list(tensors)
    per = -(-len(names) // n_shards)
    weight_map = {}
    for s in range(n_shards):
        part = names[s * per : (s + 1) * per]
        fname = f"model-{s + 1:05d}-of-{n_shards:05d}.safetensors"
        part = {k: tensors[k].contiguous() for k in part}
        save_file(part, str(directory / fname), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, fname))
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1) + "\n"
    )


def published_checkpoint(model, directory, config_dict):
    """Write ``model`` in the published layout; returns the raw (stored) tensors."""
    out = {}
    for name, t in model.state_dict().items():
        if "inv_freq" in name:
            continue
        t = t.detach().to(torch.float32)
        if ".mlp.experts." in name:
            base = name.removeprefix("model.").split(".mlp.")[0] + ".ffn.experts"
            i = config_dict["moe_intermediate_size"]
            for e in range(t.shape[0]):
                parts = {"w1": t[e, :i], "w3": t[e, i:]} if name.endswith("gate_up_proj") else {"w2": t[e]}
                for w, m in parts.items():
                    q, s = quant_fp4(m)
                    out[f"{base}.{e}.{w}.weight"], out[f"{base}.{e}.{w}.scale"] = q, s
            continue
        pub = published_name(name)
        quantize = t.ndim == 2 and pub.endswith(".weight") and (".attn." in pub or "shared_experts" in pub)
        if quantize and not any(b in pub for b in BF16_LINEARS):
            q, s = quant_fp8(t)
            out[pub], out[pub.removesuffix(".weight") + ".scale"] = q, s
        elif t.is_floating_point():
            out[pub] = t.to(torch.bfloat16) if "hc_" not in pub else t
        else:
            out[pub] = model.state_dict()[name]
    # a next-token-prediction layer, as the published files carry one (loaders skip it)
    out["mtp.0.norm.weight"] = torch.ones(config_dict["hidden_size"], dtype=torch.bfloat16)
    out["mtp.0.attn.wq_a.weight"], out["mtp.0.attn.wq_a.scale"] = quant_fp8(
        torch.randn(config_dict["q_lora_rank"], config_dict["hidden_size"]) / 8
    )
    cfg = dict(config_dict)
    cfg.pop("layer_types", None)
    cfg.pop("mlp_layer_types", None)
    cfg.pop("rope_parameters", None)
    cfg.pop("compress_rates", None)
    cfg.update(
        compress_ratios=[0, 4, 128, 4, 0][: cfg["num_hidden_layers"] + 1],
        compress_rate_hca=TINY["compress_rates"]["heavily_compressed_attention"],
        num_hash_layers=1,
        rope_scaling={"type": "yarn", **TINY["rope_parameters"]},
        expert_dtype="fp4",
        torch_dtype="bfloat16",
        quantization_config={"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                             "scale_fmt": "ue8m0", "weight_block_size": [FP8_BLOCK, FP8_BLOCK]},
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(cfg, indent=1, default=str) + "\n")
    write_shards(directory, out, 2)
    return out


def checkpoints(root, expected_path, seed):
    """The tiny checkpoints and what transformers loads from each (tests/data/dsv4_ckpt_expected.npz)."""
    from transformers import DeepseekV4ForCausalLM

    torch.manual_seed(seed + 1)  # the parts randomize() leaves to torch's init (lm_head) and the mtp layer
    gen = torch.Generator().manual_seed(seed + 1)
    config = DeepseekV4Config(**CKPT_TINY)
    model = DeepseekV4ForCausalLM(config).eval()
    randomize(model.model, gen)
    root = pathlib.Path(root)
    exp = {}
    # transformers' state-dict names: a float32 model as one file (save_original_format=False)
    model.save_pretrained(root / "hf_names_f32", safe_serialization=True, save_original_format=False)
    config_dict = json.loads((root / "hf_names_f32" / "config.json").read_text())
    published_checkpoint(model, root / "published_fp8_fp4", config_dict)
    # transformers' default save: the published names under "model.", here bf16, sharded
    model.to(torch.bfloat16).save_pretrained(root / "hf_default_bf16_sharded", safe_serialization=True,
                                             max_shard_size="150KB")
    ids = torch.randint(0, config.vocab_size, (1, CKPT_TOKENS), generator=gen)
    exp["input_ids"] = ids.numpy()[0]
    for fmt in FORMATS:
        # as the published files say (torch_dtype bfloat16); transformers keeps some modules in
        # float32 and dequantizes the FP8 / FP4 weights to bfloat16
        loaded, info = DeepseekV4ForCausalLM.from_pretrained(root / fmt, dtype=torch.bfloat16,
                                                             output_loading_info=True)
        bad = {k: v for k, v in info.items() if v}
        if bad:
            raise SystemExit(f"{fmt}: transformers reports {bad}")
        for name, t in loaded.state_dict().items():
            if "inv_freq" in name:
                continue
            key = f"{fmt}.{name.removeprefix('model.')}"
            # bf16 tensors as their bits (uint16), the others as they are
            exp[key] = t.view(torch.uint16).numpy() if t.dtype == torch.bfloat16 else t.numpy()
            exp[f"dtype.{key}"] = np.array(str(t.dtype).removeprefix("torch."))
        if fmt == "published_fp8_fp4":
            # the reference's layer outputs on the loaded (dequantized) weights, in float64
            loaded.config._attn_implementation = "eager"
            loaded.config._experts_implementation = "eager"
            m = loaded.model.double()
            outs = {}
            hooks = [
                layer.register_forward_hook(
                    lambda mod, a, k, o, i=i, outs=outs: outs.__setitem__(i, o.detach().numpy()[0]),
                    with_kwargs=True,
                )
                for i, layer in enumerate(m.layers)
            ]
            for i, layer in enumerate(m.layers):
                comp = layer.self_attn.compressor
                if comp is not None and hasattr(comp, "indexer"):
                    hooks.append(comp.indexer.register_forward_hook(
                        lambda mod, a, k, o, i=i, outs=outs: outs.__setitem__(f"topk{i}", o[0].numpy()),
                        with_kwargs=True))
            with torch.no_grad():
                m(input_ids=ids, use_cache=False)
            for h in hooks:
                h.remove()
            for i, o in outs.items():
                if isinstance(i, int):
                    exp[f"{fmt}.l{i}.output"] = o.astype(np.float32)
                else:
                    exp[f"{fmt}.l{i[4:]}.index_topk"] = o
    # torch's own decoding of every code of the 8-bit formats, and transformers' FP4 unpacking
    # (its loader's) of every byte
    from transformers.integrations.finegrained_fp8 import Fp8Dequantize

    codes = torch.arange(256, dtype=torch.uint8)
    kinds = (("e4m3fn", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2), ("e8m0", torch.float8_e8m0fnu))
    for key, dt in kinds:
        exp[f"codes.{key}"] = codes.view(dt).to(torch.float32).numpy()
    exp["codes.e2m1x2"] = Fp8Dequantize(None)._unpack_fp4(codes.view(torch.int8)[None, :])[0].numpy()
    np.savez_compressed(expected_path, **exp)
    sizes = {d.name: sum(f.stat().st_size for f in d.iterdir()) for d in root.iterdir()}
    print(f"wrote {root} {sizes} and {expected_path} ({pathlib.Path(expected_path).stat().st_size} bytes)")


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
    ap.add_argument("--only", choices=("layers", "configs", "checkpoints"), help="build one of the outputs")
    ap.add_argument("--checkpoints", default="tests/data/dsv4_ckpt", help="where the tiny checkpoints go")
    args = ap.parse_args()
    if args.only == "checkpoints":
        checkpoints(args.checkpoints, "tests/data/dsv4_ckpt_expected.npz", args.seed)
        return
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
