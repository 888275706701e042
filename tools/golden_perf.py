"""Time one decode step of the golden float64 layer at long contexts, both presets.

    .venv/bin/python tools/golden_perf.py [--contexts 16384 32768 65536 131072] [--repeat 3]

For each preset at its default sizes (``deepseek-v4``: the published V4-Flash layer, a
CSA layer and an HCA layer; ``notes``: the notes' tiers), build one layer with random
weights, give it a decode state that has seen ``L`` tokens, and time one more token
(``layer.forward`` on one row), best of ``--repeat``. Prints a Markdown table: time, the
peak of memory allocated during the step (tracemalloc; numpy reports its buffers), and
the size of the state (the cache), which is what grows with ``L``.

Two shortcuts, neither of which changes the work of a step:
- the state's contents are random (the cost of a step does not depend on the values;
  building a 128K state by running 128K real steps would take hours);
- the routed experts' weights are 8 distinct random experts, expert ``e`` using storage
  ``e mod 8``: 256 (or 64) full-size experts would not fit in memory in float64, and a
  step computes exactly the selected experts either way.
"""

import argparse
import gc
import os
import time
import tracemalloc

# One BLAS thread: the figures are for one core, and stay stable on a shared machine
# (OpenBLAS's spinning threads slow down many-fold when the cores are oversubscribed).
# Set before numpy loads its BLAS; an explicit setting in the environment wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from golden.presets import deepseek_v4 as dsv4  # noqa: E402
from golden.presets import notes  # noqa: E402

DISTINCT_EXPERTS = 8


class AliasedExperts:
    """Expert weights ``(E, …)`` backed by ``n`` distinct experts (``e`` uses ``e mod n``)."""

    def __init__(self, stored, total):
        self.stored, self.total = stored, total
        self.shape = (total, *stored.shape[1:])

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            return self.stored[int(key) % self.stored.shape[0]]
        rest = key[1:] if isinstance(key, tuple) else ()
        part = self.stored[(slice(None), *rest)]
        reps = -(-self.total // part.shape[0])
        return np.concatenate([part] * reps)[: self.total]


def _weights(shapes, rng, experts_total):
    out = {}
    for name, shape in shapes.items():
        if name.endswith("tid2eid"):
            out[name] = rng.integers(0, experts_total, shape)
        elif "experts." in name and "shared" not in name:
            stored = 0.02 * rng.standard_normal((DISTINCT_EXPERTS, *shape[1:]))
            out[name] = AliasedExperts(stored, shape[0])
        elif "norm" in name or name.endswith("scale"):
            out[name] = 1.0 + 0.02 * rng.standard_normal(shape)
        else:
            out[name] = 0.02 * rng.standard_normal(shape)
    return out


def dsv4_layer(layer_type, rng):
    cfg = dsv4.DeepseekV4Config(num_hidden_layers=1, layer_types=[layer_type], mlp_layer_types=["moe"])
    # only layer 0's weights (and no embedding) are needed for a layer step
    shapes = {k: v for k, v in dsv4.weight_shapes(cfg).items() if k.startswith("layers.0.")}
    return dsv4.DeepseekV4Layer(cfg, _weights(shapes, rng, cfg.n_routed_experts), 0)


def dsv4_state(layer, n, rng):
    cfg = layer.cfg
    st = layer.init_state()
    st.n_tokens = n
    st.window_kv = rng.standard_normal((cfg.sliding_window - 1, cfg.head_dim))
    for cs, width in ((st.compressor, cfg.head_dim), (st.indexer, cfg.index_head_dim)):
        if cs is None:
            continue
        cs.entries.append(rng.standard_normal((n // layer.rate, width)))
        pend = n % layer.rate
        cs.pending_kv = rng.standard_normal((pend, cs.pending_kv.shape[1]))
        cs.pending_gate = rng.standard_normal((pend, cs.pending_gate.shape[1]))
        if layer.type == dsv4.CSA:
            cs.prev = (rng.standard_normal((layer.rate, width)), rng.standard_normal((layer.rate, width)))
    return st


def dsv4_state_bytes(st):
    total = st.window_kv.nbytes
    for cs in (st.compressor, st.indexer):
        if cs is not None:
            total += cs.entries.rows.nbytes + cs.pending_kv.nbytes + cs.pending_gate.nbytes
    return total


def notes_layer(rng):
    cfg = notes.NotesConfig()
    shapes = {k: v for k, v in notes.weight_shapes(cfg).items() if k.startswith("layers.0.")}
    return notes.NotesLayer(cfg, _weights(shapes, rng, cfg.n_experts), 0)


def notes_state(layer, n, rng):
    c = layer.cfg
    st = layer.init_state()
    # room for the step's token, so that the step does not time the cache's doubling
    st.cache = notes._Cache(c.num_kv_heads, c.head_dim, capacity=n + 16)
    st.cache.append(
        rng.standard_normal((n, c.num_kv_heads, c.head_dim)),
        rng.standard_normal((n, c.num_kv_heads, c.head_dim)),
    )
    return st


def time_step(layer, make_state, n, rng, repeat, dsv4_like):
    best, peak = float("inf"), 0
    x = rng.standard_normal((1, layer.cfg.hidden_size))
    for _ in range(repeat):
        st = make_state(layer, n, rng)
        gc.collect()
        tracemalloc.start()
        t0 = time.perf_counter()
        if dsv4_like:
            streams = np.repeat(x[:, None, :], layer.cfg.hc_mult, axis=1)
            layer.forward(st, streams, [n], [1])
        else:
            layer.forward(st, x, [n])
        dt = time.perf_counter() - t0
        peak = max(peak, tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        best = min(best, dt)
    size = dsv4_state_bytes(st) if dsv4_like else 2 * st.cache.n * st.cache.k[:, 0].nbytes
    return best, peak, size


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--contexts", type=int, nargs="+", default=[16384, 32768, 65536, 131072])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    cases = [
        ("deepseek-v4 CSA layer", dsv4_layer(dsv4.CSA, rng), dsv4_state, True),
        ("deepseek-v4 HCA layer", dsv4_layer(dsv4.HCA, rng), dsv4_state, True),
        ("notes layer", notes_layer(rng), notes_state, False),
    ]
    print("| preset | context | step time (s) | step peak alloc (MB) | state (MB) |")
    print("|---|---|---|---|---|")
    for name, layer, make_state, dsv4_like in cases:
        for n in args.contexts:
            t, peak, size = time_step(layer, make_state, n, rng, args.repeat, dsv4_like)
            print(f"| {name} | {n // 1024}K | {t:.3f} | {peak / 1e6:.0f} | {size / 1e6:.0f} |", flush=True)


if __name__ == "__main__":
    main()
