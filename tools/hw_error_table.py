"""Print the per-stage error tables of the hardware-exact paths (``docs/golden/hw-path.md``).

    .venv/bin/python tools/hw_error_table.py [--tokens 200] [--seed 0]

Runs :func:`golden.hwpath.run_notes_layer` on a ``notes`` layer of moderate size (every
tier engaged) with random weights and inputs, in both MA modes, and
:func:`golden.hwpath_dsv4.run_dsv4_attention` on the attention blocks of the first three
layers (sliding, CSA, HCA) of the transformers-checked fixture ``tests/data/dsv4_tiny.npz``
on its 300 tokens, and :func:`golden.hwpath_dsv4.run_dsv4_hyper` on its first layer's two
hyper-connections. Prints one Markdown table per case: each stage's max abs error against
the float64 chain, that error relative to the stage's largest magnitude, and for the
selections the fraction of tokens whose set agrees with float64.
"""

import argparse
import json
import pathlib

import numpy as np

from golden.attn import hyper
from golden.attn.primitives import rms_norm
from golden.hwpath import run_notes_layer
from golden.hwpath_dsv4 import run_dsv4_attention, run_dsv4_hyper
from golden.presets.deepseek_v4 import DeepseekV4Config, DeepseekV4Model
from golden.presets.notes import NotesConfig, NotesModel, random_weights

FIXTURE = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "dsv4_tiny.npz"

CONFIG = dict(
    vocab_size=64,
    hidden_size=128,
    num_hidden_layers=1,
    num_heads=8,
    num_kv_heads=2,
    head_dim=16,
    csa_window=32,
    hca_chunks=4,
    hca_chunk=16,
    swa_window=32,
    swa_overlap=8,
    refresh=16,
    mhc_chunk=64,
    n_experts=16,
    primary_topk=8,
    final_topk=2,
    moe_intermediate_size=64,
)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cfg = NotesConfig(**CONFIG)
    layer = NotesModel(cfg, random_weights(cfg, args.seed)).layers[0]
    x = np.random.default_rng(args.seed).standard_normal((args.tokens, cfg.hidden_size))
    print(f"notes layer {CONFIG}, {args.tokens} tokens, seed {args.seed}\n")
    for mode in ("bf16", "int8"):
        print(f"MA mode {mode}:\n")
        print(run_notes_layer(layer, x, mode).table() + "\n", flush=True)
    d = np.load(FIXTURE)
    cfg = DeepseekV4Config.from_hf(json.loads(str(d["config_json"])))
    model = DeepseekV4Model(cfg, {k[2:]: d[k] for k in d.files if k.startswith("w.")})
    for i in range(3):
        layer = model.layers[i]
        streams = model.embed(d["input_ids"]) if i == 0 else d[f"l{i - 1}.output"].astype(np.float64)
        pre, _, _ = layer._hc("attn_hc", streams)
        x = rms_norm(hyper.hc_collapse(streams, pre), layer.p("input_layernorm.weight"), cfg.rms_norm_eps)
        print(f"deepseek-v4 fixture layer {i} ({layer.type}) attention block, {x.shape[0]} tokens:\n")
        print(run_dsv4_attention(layer, x).table() + "\n", flush=True)
    layer = model.layers[0]
    streams = model.embed(d["input_ids"])
    print("deepseek-v4 fixture layer 0 hyper-connections (the reference's block outputs merged):\n")
    print(run_dsv4_hyper(layer, streams, d["l0.attn_out"].astype(np.float64), "attn_hc").table())
    after = d["l0.after_attn"].astype(np.float64)
    tr = run_dsv4_hyper(layer, after, d["l0.moe_out"].astype(np.float64), "ffn_hc")
    print("\n".join(tr.table().splitlines()[2:]) + "\n", flush=True)


if __name__ == "__main__":
    main()
