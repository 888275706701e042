"""Print the per-stage error table of the hardware-exact path (``docs/golden/hw-path.md``).

    .venv/bin/python tools/hw_error_table.py [--tokens 200] [--seed 0]

Runs :func:`golden.hwpath.run_notes_layer` on a ``notes`` layer of moderate size (every
tier engaged) with random weights and inputs, in both MA modes, and prints one Markdown
table per mode: each stage's max abs error against the float64 chain, that error relative
to the stage's largest magnitude, and for the selections the fraction of tokens whose set
agrees with float64.
"""

import argparse

import numpy as np

from golden.hwpath import run_notes_layer
from golden.presets.notes import NotesConfig, NotesModel, random_weights

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


if __name__ == "__main__":
    main()
