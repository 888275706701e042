"""Print the per-stage error tables of the hardware-exact paths (``docs/golden/hw-path.md``).

    .venv/bin/python tools/hw_error_table.py [--tokens 200] [--seed 0] [--dsv4-mode both] [--skip-notes]

Runs :func:`golden.hwpath.run_notes_layer` on a ``notes`` layer of moderate size (every
tier engaged) with random weights and inputs, in both MA modes, and
:func:`golden.hwpath_dsv4.run_dsv4_layer` on each of the four whole layers (sliding +
hash-routed MoE, CSA, HCA, CSA with top-k MoE) of the transformers-checked fixture
``tests/data/dsv4_tiny.npz`` on its 300 tokens, each fed the reference's input streams,
with the MA's weight GEMMs in bf16 and then in int8 (``--dsv4-mode`` picks one;
``--skip-notes`` leaves out the ``notes`` layer).
Prints one Markdown table per case: each stage's max abs error against the float64 chain,
that error relative to the stage's largest magnitude, and for the selections the fraction
of tokens whose set agrees with float64; for top-k MoE layers a line on the router's
agreement and the bf16 ties at the k-th place.
"""

import argparse
import json
import pathlib

import numpy as np

from golden.hwpath import run_notes_layer
from golden.hwpath_dsv4 import run_dsv4_layer
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
    ap.add_argument("--dsv4-mode", choices=("bf16", "int8", "both"), default="both",
                    help="the MA's mode of the deepseek-v4 layers' weight GEMMs")
    ap.add_argument("--skip-notes", action="store_true", help="only the deepseek-v4 layers")
    args = ap.parse_args()
    modes = ("bf16", "int8") if args.dsv4_mode == "both" else (args.dsv4_mode,)
    if not args.skip_notes:
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
    ids = d["input_ids"]
    for mode in modes:
        for i, layer in enumerate(model.layers):
            streams = model.embed(ids) if i == 0 else d[f"l{i - 1}.output"].astype(np.float64)
            routing = "hash-routed" if layer.hash else f"top-{cfg.num_experts_per_tok}"
            print(f"deepseek-v4 fixture layer {i} ({layer.type}, {routing} MoE), whole layer, "
                  f"{streams.shape[0]} tokens" + ("" if mode == "bf16" else f", MA mode {mode}") + ":\n")
            tr = run_dsv4_layer(layer, streams, ids, mode)
            print(tr.table())
            if tr.router is not None:
                print("\n" + tr.router.line())
            print(flush=True)

if __name__ == "__main__":
    main()
