"""Manifold-constrained hyper-connections (mHC) on an ``n``-stream residual, float64.

The residual of a layer is ``n`` parallel streams ``(S, n, D)``. Before a block (attention
or MoE) the streams are collapsed into its input with weights ``pre``; after it the block
output is spread back with weights ``post`` and added to the streams mixed by ``comb``,
an ``n × n`` matrix projected towards the doubly-stochastic ones with Sinkhorn-Knopp
iterations (so the residual mixing neither amplifies nor loses signal). All three come
from one linear map of the RMS-normalised, flattened streams.
"""

import numpy as np

from .primitives import rms_norm, softmax

__all__ = ["sinkhorn", "hc_weights", "hc_collapse", "hc_merge", "hc_head"]


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def sinkhorn(m, iters, eps):
    """Alternate column and row normalisation of the last two axes, ``iters`` column steps.

    The first step normalises columns; then ``iters - 1`` rounds of rows then columns,
    each dividing by (sum + ``eps``).
    """
    m = m / (m.sum(axis=-2, keepdims=True) + eps)
    for _ in range(iters - 1):
        m = m / (m.sum(axis=-1, keepdims=True) + eps)
        m = m / (m.sum(axis=-2, keepdims=True) + eps)
    return m


def hc_weights(streams, fn, base, scale, *, sinkhorn_iters, eps, norm_eps):
    """``(pre (S, n), post (S, n), comb (S, n, n))`` for streams ``(S, n, D)``.

    ``fn`` ``((2 + n)·n, n·D)``, ``base`` ``((2 + n)·n,)``, ``scale`` ``(3,)``:
    ``pre = sigmoid(·) + eps``, ``post = 2·sigmoid(·)``, ``comb = Sinkhorn(softmax(·) + eps)``.
    """
    streams = np.asarray(streams, np.float64)
    s, n, _ = streams.shape
    mix = rms_norm(streams.reshape(s, -1), eps=norm_eps) @ np.asarray(fn, np.float64).T
    base = np.asarray(base, np.float64)
    pre = _sigmoid(mix[:, :n] * scale[0] + base[:n]) + eps
    post = 2.0 * _sigmoid(mix[:, n:2 * n] * scale[1] + base[n:2 * n])
    comb = mix[:, 2 * n:].reshape(s, n, n) * scale[2] + base[2 * n:].reshape(n, n)
    comb = sinkhorn(softmax(comb, axis=-1) + eps, sinkhorn_iters, eps)
    return pre, post, comb


def hc_collapse(streams, pre):
    """Block input ``(S, D)`` = Σ_j pre[:, j] · streams[:, j]."""
    return np.einsum("sn,snd->sd", pre, streams)


def hc_merge(streams, block_out, post, comb):
    """New streams: ``post[:, k] · out + Σ_j comb[:, j, k] · streams[:, j]``."""
    return post[:, :, None] * block_out[:, None, :] + np.einsum("sjk,sjd->skd", comb, streams)


def hc_head(streams, fn, base, scale, *, eps, norm_eps):
    """Final collapse of the streams to ``(S, D)`` (``fn`` ``(n, n·D)``, ``scale`` scalar)."""
    s = streams.shape[0]
    mix = rms_norm(streams.reshape(s, -1), eps=norm_eps) @ np.asarray(fn, np.float64).T
    pre = _sigmoid(mix * float(np.asarray(scale).reshape(-1)[0]) + base) + eps
    return hc_collapse(streams, pre)
