"""Float64 golden model of the MoE datapath: routers, SwiGLU experts, combine.

Scores: ``softmax``, ``sigmoid`` or ``sqrtsoftplus`` (``sqrt(log(1 + e^x))``) of the
router logits ``x · Wᵀ``. Selection: top-k of the scores plus an optional bias that only
steers the choice (the weights use the unbiased scores), with the same lowest-index-first
tie rule as every other top-k of the golden model; or a fixed token → experts table (hash
routing); or two stages (a primary top-k, then a secondary score over those candidates).
"""

import numpy as np

from .attn.primitives import silu, softmax, softplus, topk_indices

__all__ = [
    "router_scores", "route_topk", "route_hash", "route_two_stage",
    "swiglu", "moe_combine",
]


def router_scores(logits, func):
    """Per-expert scores from router logits ``(S, E)``."""
    logits = np.asarray(logits, np.float64)
    if func == "softmax":
        return softmax(logits, axis=-1)
    if func == "sigmoid":
        return 1.0 / (1.0 + np.exp(-logits))
    if func == "sqrtsoftplus":
        return np.sqrt(softplus(logits))
    raise ValueError(f"unknown scoring function {func!r}: softmax, sigmoid or sqrtsoftplus")


def _weights(scores, idx, normalize, scaling):
    w = np.take_along_axis(scores, idx, axis=-1)
    if normalize:
        w = w / (w.sum(axis=-1, keepdims=True) + 1e-20)
    return w * scaling


def route_topk(scores, k, bias=None, normalize=True, scaling=1.0):
    """``(indices (S, k), weights (S, k))``: top-k of ``scores + bias``, weights from ``scores``."""
    scores = np.asarray(scores, np.float64)
    key = scores if bias is None else scores + np.asarray(bias, np.float64)
    idx = topk_indices(key, k)
    return idx, _weights(scores, idx, normalize, scaling)


def route_hash(scores, token_ids, table, normalize=True, scaling=1.0):
    """Hash routing: experts ``table[token_id]`` (``table`` ``(vocab, k)``), weighted by ``scores``."""
    idx = np.asarray(table, np.int64)[np.asarray(token_ids, np.int64)]
    return idx, _weights(np.asarray(scores, np.float64), idx, normalize, scaling)


def route_two_stage(scores, k1, secondary, k2, normalize=True, scaling=1.0):
    """Primary top-``k1`` of ``scores``, then top-``k2`` of ``secondary`` among those.

    ``secondary`` ``(S, E)`` is a second per-expert score; only the candidates' values
    matter. The weights are the primary scores of the final experts. Returns
    ``(final indices (S, k2), weights (S, k2), candidates (S, k1))``.
    """
    scores = np.asarray(scores, np.float64)
    cand = topk_indices(scores, k1)
    sec = np.take_along_axis(np.asarray(secondary, np.float64), cand, axis=-1)
    pick = topk_indices(sec, k2)
    idx = np.take_along_axis(cand, pick, axis=-1)
    return idx, _weights(scores, idx, normalize, scaling), cand


def swiglu(x, w_gate, w_up, w_down, limit=None):
    """``down(silu(min(gate·x, limit)) · clip(up·x, ±limit))``; no clamping when ``limit`` is None.

    Weights are ``(I, D)``, ``(I, D)``, ``(D, I)`` (output × input).
    """
    x = np.asarray(x, np.float64)
    g = x @ np.asarray(w_gate, np.float64).T
    u = x @ np.asarray(w_up, np.float64).T
    if limit is not None:
        g = np.minimum(g, limit)
        u = np.clip(u, -limit, limit)
    return (silu(g) * u) @ np.asarray(w_down, np.float64).T


def moe_combine(x, idx, weights, experts, shared=None):
    """``Σ_k weights[:, k] · expert_{idx[:, k]}(x) + Σ shared(x)``.

    ``experts(e, rows)`` computes expert ``e`` on the token rows ``rows`` (the gathered
    form: each expert runs only on its own tokens); ``shared`` is a list of callables on
    all of ``x``. Negative indices are skipped.
    """
    x = np.asarray(x, np.float64)
    out = np.zeros_like(x)
    idx = np.asarray(idx, np.int64)
    for e in np.unique(idx[idx >= 0]):
        tok, slot = np.nonzero(idx == e)
        # add.at: a token routed twice to one expert (hash tables may repeat) counts twice.
        np.add.at(out, tok, weights[tok, slot, None] * experts(int(e), x[tok]))
    for f in shared or ():
        out += f(x)
    return out
