"""Float64 primitives of the attention datapath.

Shapes: a sequence axis ``S`` (queries) or ``T`` (keys / compressed entries) comes first;
heads ``H`` next; the feature axis ``D`` last. Positions are absolute token indices
(int). Every function takes and returns ``float64`` arrays and never modifies its inputs.

Key sets are given either as a boolean mask ``(S, T)`` (True = the query sees the key)
or as index lists ``(S, n)`` with ``-1`` for an unused slot; :func:`attention` takes the
first, :func:`attention_gathered` the second, and both give the same result for the same
key set (:func:`mask_to_indices` converts).
"""

import math

import numpy as np

__all__ = [
    "rms_norm",
    "softmax",
    "softplus",
    "silu",
    "rope_inv_freq",
    "rope_angles",
    "apply_rope",
    "compress_groups",
    "complete_groups",
    "causal_mask",
    "sliding_window_mask",
    "distance_range_mask",
    "chunk_mask",
    "compressed_causal_mask",
    "compressed_visible_count",
    "topk_indices",
    "mask_to_indices",
    "indices_to_mask",
    "indexer_scores",
    "attention",
    "attention_gathered",
]

F64 = np.float64


def _f64(x):
    return np.asarray(x, dtype=F64)


def rms_norm(x, weight=None, eps=1e-6):
    """``x / sqrt(mean(x²) + eps)`` over the last axis, times ``weight`` when given."""
    x = _f64(x)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if weight is None else y * _f64(weight)


def softmax(x, axis=-1):
    """Max-subtracted softmax; a slice that is all ``-inf`` gives all zeros (no NaN)."""
    x = _f64(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def softplus(x):
    """``log(1 + exp(x))`` without overflow."""
    return np.logaddexp(0.0, _f64(x))


def silu(x):
    x = _f64(x)
    return x / (1.0 + np.exp(-x))


# --- RoPE -------------------------------------------------------------------------------


def rope_inv_freq(rope_dim, theta, yarn=None):
    """Inverse frequencies ``theta^(-2i/rope_dim)``, ``i < rope_dim/2``; with YaRN when asked.

    ``yarn`` is ``None`` or a dict with ``factor`` and ``original_max_position_embeddings``
    and optionally ``beta_fast`` (32), ``beta_slow`` (1), ``truncate`` (True): frequencies
    whose wavelength fits the original context many times are kept (extrapolation), long
    ones are divided by ``factor`` (interpolation), with a linear ramp between the two
    correction dimensions (the YaRN rule of Peng et al.).
    """
    if rope_dim <= 0 or rope_dim % 2:
        raise ValueError(f"rope_dim must be a positive even number, got {rope_dim}")
    base = F64(theta) ** (np.arange(0, rope_dim, 2, dtype=F64) / rope_dim)
    inv_freq = 1.0 / base
    if yarn is None:
        return inv_freq
    factor = float(yarn["factor"])
    orig = float(yarn["original_max_position_embeddings"])
    beta_fast = float(yarn.get("beta_fast") or 32)
    beta_slow = float(yarn.get("beta_slow") or 1)

    def corr_dim(rotations):
        return rope_dim * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if yarn.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rope_dim - 1)
    if low == high:
        high += 0.001  # a zero-width ramp would divide by zero
    ramp = np.clip((np.arange(rope_dim // 2, dtype=F64) - low) / (high - low), 0.0, 1.0)
    extrapolation = 1.0 - ramp
    return inv_freq / factor * (1.0 - extrapolation) + inv_freq * extrapolation


def rope_angles(positions, inv_freq):
    """Rotation angles ``(len(positions), len(inv_freq))`` = position × inverse frequency."""
    return _f64(positions)[:, None] * _f64(inv_freq)[None, :]


def apply_rope(x, angles, *, pairs="interleaved", where="trailing", scale=1.0):
    """Rotate the RoPE slice of ``x`` (last axis) by ``angles``.

    ``angles`` has ``rope_dim/2`` entries on its last axis and broadcasts against
    ``x[..., :rope_dim/2]``; negate it to undo a rotation. ``pairs``: ``"interleaved"``
    rotates channels (2i, 2i+1), ``"half"`` rotates (i, i + rope_dim/2). ``where``:
    ``"trailing"`` rotates the last ``rope_dim`` channels (DeepSeek-V4's [nope | rope]
    layout), ``"leading"`` the first ones; full RoPE is rope_dim = D. ``scale`` multiplies
    cos and sin (YaRN's attention factor).
    """
    x = _f64(x)
    angles = _f64(angles)
    half = angles.shape[-1]
    rd = 2 * half
    if rd > x.shape[-1]:
        raise ValueError(f"rope dim {rd} exceeds the feature size {x.shape[-1]}")
    cos, sin = np.cos(angles) * scale, np.sin(angles) * scale
    out = x.copy()
    sl = slice(x.shape[-1] - rd, None) if where == "trailing" else slice(0, rd)
    if where not in ("trailing", "leading"):
        raise ValueError(f"where must be 'trailing' or 'leading', got {where!r}")
    r = x[..., sl]
    if pairs == "interleaved":
        a, b = r[..., 0::2], r[..., 1::2]
        rot = np.empty_like(r)
        rot[..., 0::2] = a * cos - b * sin
        rot[..., 1::2] = b * cos + a * sin
    elif pairs == "half":
        a, b = r[..., :half], r[..., half:]
        rot = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    else:
        raise ValueError(f"pairs must be 'interleaved' or 'half', got {pairs!r}")
    out[..., sl] = rot
    return out


# --- token-group compression ------------------------------------------------------------


def complete_groups(n_tokens, rate):
    """How many complete groups of ``rate`` tokens ``n_tokens`` tokens make."""
    return n_tokens // rate


def compress_groups(kv, rate, gate=None, bias=None, overlap=False, prev=None):
    """Pool each complete group of ``rate`` consecutive tokens into one entry.

    - ``gate is None``: the mean of the group (``kv`` is ``(N, d)``).
    - ``gate`` given: softmax-gated pooling, per channel, ``Σ_j softmax_j(gate_j + bias_j)
      · kv_j`` with the learned ``bias`` ``(rate, width)`` added by position in the group.
    - ``overlap=True`` (gated only): ``kv`` and ``gate`` are ``(N, 2d)`` and hold two
      series, A = ``[:, :d]`` and B = ``[:, d:]``. Entry ``w`` pools group ``w``'s B
      series together with group ``w-1``'s A series over ``2·rate`` slots, so consecutive
      entries cover overlapping windows of ``2·rate`` tokens with stride ``rate``. For
      ``w = 0`` the A half comes from ``prev`` = ``(kv_A, gate_A)`` of the group before
      (each ``(rate, d)``, gate already including its bias) or, when ``None``, is absent
      (softmax weight 0).

    Tokens after the last complete group are ignored (they are *pending*: a later call
    with more tokens completes them). Returns ``(T, d)`` with ``T = N // rate``.
    """
    kv = _f64(kv)
    n = complete_groups(kv.shape[0], rate)
    width = kv.shape[1]
    if gate is None:
        if overlap:
            raise ValueError("overlapping groups need a gate")
        return kv[: n * rate].reshape(n, rate, width).mean(axis=1)
    g = _f64(gate)[: n * rate].reshape(n, rate, width)
    if bias is not None:
        g = g + _f64(bias)
    k = kv[: n * rate].reshape(n, rate, width)
    if not overlap:
        return np.sum(softmax(g, axis=1) * k, axis=1)
    if width % 2:
        raise ValueError("overlapping compression needs an even width (two series)")
    d = width // 2
    kk = np.zeros((n, 2 * rate, d))
    gg = np.full((n, 2 * rate, d), -np.inf)
    kk[:, rate:], gg[:, rate:] = k[..., d:], g[..., d:]
    kk[1:, :rate], gg[1:, :rate] = k[:-1, :, :d], g[:-1, :, :d]
    if prev is not None and n:
        kk[0, :rate], gg[0, :rate] = _f64(prev[0]), _f64(prev[1])
    return np.sum(softmax(gg, axis=1) * kk, axis=1)


# --- key sets ---------------------------------------------------------------------------


def causal_mask(q_pos, k_pos):
    """``(S, T)``: key position ≤ query position."""
    return _i(k_pos)[None, :] <= _i(q_pos)[:, None]


def _i(x):
    return np.asarray(x, dtype=np.int64)


def sliding_window_mask(q_pos, k_pos, window):
    """``(S, T)``: the ``window`` most recent positions up to and including the query's."""
    d = _i(q_pos)[:, None] - _i(k_pos)[None, :]
    return (d >= 0) & (d < window)


def distance_range_mask(q_pos, k_pos, lo, hi):
    """``(S, T)``: keys at distance ``lo ≤ q - k < hi`` behind the query."""
    d = _i(q_pos)[:, None] - _i(k_pos)[None, :]
    return (d >= lo) & (d < hi)


def chunk_mask(q_pos, k_pos, chunk):
    """``(S, T)``: causal keys in the query's own chunk of ``chunk`` positions."""
    q, k = _i(q_pos)[:, None], _i(k_pos)[None, :]
    return (k <= q) & (k // chunk == q // chunk)


def compressed_visible_count(q_pos, rate):
    """Entries a query may see: those whose whole group lies at or before it."""
    return (_i(q_pos) + 1) // rate


def compressed_causal_mask(q_pos, n_entries, rate):
    """``(S, n_entries)``: entry ``w`` (tokens ``[w·rate, (w+1)·rate)``) is complete."""
    return np.arange(n_entries)[None, :] < compressed_visible_count(q_pos, rate)[:, None]


def topk_indices(scores, k, valid=None):
    """Top ``k`` along the last axis, largest first; **ties go to the lowest index**.

    Entries where ``valid`` is False are never chosen: their slots (when fewer than ``k``
    are valid) hold ``-1``. Returns int64 ``(..., k)``.
    """
    scores = _f64(scores)
    if valid is None:
        valid = np.ones(scores.shape, bool)
    key = np.where(valid, scores, -np.inf)
    # A stable sort of the negated scores keeps equal scores in index order.
    order = np.argsort(-key, axis=-1, kind="stable")[..., :k]
    ok = np.take_along_axis(valid, order, axis=-1)
    return np.where(ok, order, -1).astype(np.int64)


def mask_to_indices(mask):
    """``(S, T)`` boolean mask → ``(S, n)`` index lists (ascending, ``-1`` padded)."""
    mask = np.asarray(mask, bool)
    n = int(mask.sum(axis=1).max()) if mask.size else 0
    out = np.full((mask.shape[0], n), -1, np.int64)
    for s in range(mask.shape[0]):
        idx = np.flatnonzero(mask[s])
        out[s, : idx.size] = idx
    return out


def indices_to_mask(idx, n_keys):
    """``(S, n)`` index lists (``-1`` = none) → ``(S, n_keys)`` boolean mask."""
    idx = _i(idx)
    mask = np.zeros((idx.shape[0], n_keys + 1), bool)
    rows = np.repeat(np.arange(idx.shape[0]), idx.shape[1])
    mask[rows, np.where(idx >= 0, idx, n_keys).ravel()] = True
    return mask[:, :n_keys]


# --- scores and attention ---------------------------------------------------------------


def indexer_scores(q, keys, weights, scale):
    """Lightning-indexer score ``I[s, t] = Σ_h weights[s, h] · scale · ReLU(q[s, h] · keys[t])``.

    ``q`` ``(S, Hi, Di)``, ``keys`` ``(T, Di)``, ``weights`` ``(S, Hi)``. Returns ``(S, T)``.
    """
    q = _f64(q)
    s, h, d = q.shape
    dots = (q.reshape(s * h, d) @ _f64(keys).T).reshape(s, h, -1)
    return (_f64(weights)[:, None, :] @ (np.maximum(dots, 0.0) * scale))[:, 0, :]


def _logits(q, k):
    """``(H, S, T)`` = q·k for ``k`` ``(T, D)`` (one shared head) or ``(T, Hk, D)``.

    Grouped heads (``H`` a multiple of ``Hk``) are computed per key head, never by copying
    the keys ``H / Hk`` times (a long cache would not fit twice).
    """
    s, h, d = q.shape
    if k.ndim == 2:
        return (q.reshape(s * h, d) @ k.T).reshape(s, h, -1).transpose(1, 0, 2)
    hk = k.shape[1]
    if h % hk:
        raise ValueError(f"{h} query heads cannot share {hk} key heads evenly")
    g = h // hk
    qg = q.reshape(s, hk, g, d)
    out = np.empty((hk, g, s, k.shape[0]))
    for j in range(hk):
        out[j] = (qg[:, j].transpose(1, 0, 2).reshape(g * s, d) @ k[:, j].T).reshape(g, s, -1)
    return out.reshape(h, s, -1)


def _values(p, v):
    """``(S, H, Dv)`` = Σ_t p[h, s, t] · v[t] for ``v`` ``(T, Dv)`` or ``(T, Hk, Dv)``."""
    h, s, _ = p.shape
    if v.ndim == 2:
        return (p.reshape(h * s, -1) @ v).reshape(h, s, -1).transpose(1, 0, 2)
    hk = v.shape[1]
    g = h // hk
    pg = p.reshape(hk, g * s, -1)
    out = np.stack([pg[j] @ v[:, j] for j in range(hk)])  # (Hk, G·S, Dv)
    return out.reshape(hk, g, s, -1).transpose(2, 0, 1, 3).reshape(s, h, -1)


def _heads(k, n_heads):
    k = _f64(k)
    if k.ndim == 3 and n_heads % k.shape[1]:
        raise ValueError(f"{n_heads} query heads cannot share {k.shape[1]} key heads evenly")
    return k


def _with_sink(logits, sink):
    if sink is None:
        return softmax(logits, axis=-1)
    h, s = logits.shape[:2]
    sinks = np.broadcast_to(_f64(sink)[:, None, None], (h, s, 1))
    return softmax(np.concatenate([logits, sinks], axis=-1), axis=-1)[..., :-1]


def attention(q, k, v, mask, scale, sink=None, key_bias=None):
    """Masked softmax attention with an optional per-head sink logit.

    ``q`` ``(S, H, D)``; ``k``/``v`` ``(T, D)`` (one head shared by all query heads, as
    in multi-query attention) or ``(T, Hk, D)`` with ``H`` a multiple of ``Hk``; ``mask``
    ``(S, T)`` boolean; ``sink`` ``(H,)`` or None: an extra logit per head that takes
    probability mass but contributes no value; ``key_bias`` ``(T,)`` or None: added to
    every query's logit of that key (a summary key standing for ``n`` tokens carries
    ``log n``). A query that sees no key returns 0. Returns ``(S, H, Dv)``.
    """
    q = _f64(q)
    kh, vh = _heads(k, q.shape[1]), _heads(v, q.shape[1])
    logits = _logits(q, kh) * scale
    if key_bias is not None:
        logits = logits + _f64(key_bias)
    logits = np.where(np.asarray(mask, bool)[None], logits, -np.inf)
    return _values(_with_sink(logits, sink), vh)


def attention_gathered(q, k, v, idx, scale, sink=None):
    """:func:`attention` with the key set given as indices ``idx`` ``(S, n)`` (-1 = none).

    Only the gathered keys are touched: cost ``O(S·n)``, whatever the number of keys.
    """
    q = _f64(q)
    idx = _i(idx)
    valid = idx >= 0
    safe = np.where(valid, idx, 0)
    h = q.shape[1]
    kh, vh = _heads(k, h), _heads(v, h)
    kg, vg = kh[safe], vh[safe]  # (S, n, D) or (S, n, Hk, D)
    if kg.ndim == 4:  # grouped heads: each gathered key head serves H / Hk query heads
        kg, vg = np.repeat(kg, h // kg.shape[2], axis=2), np.repeat(vg, h // vg.shape[2], axis=2)
    if kg.ndim == 3:
        logits = np.einsum("shd,snd->hsn", q, kg)
    else:
        logits = np.einsum("shd,snhd->hsn", q, kg)
    p = _with_sink(np.where(valid[None], logits * scale, -np.inf), sink)
    if vg.ndim == 3:
        return np.einsum("hsn,snd->shd", p, vg)
    return np.einsum("hsn,snhd->shd", p, vg)


def attention_parts(q, parts, scale):
    """One softmax over the keys of several sources, each used in place (no gathering).

    ``parts``: a list of ``(k, v, key_bias, mask)`` with ``k``/``v`` as in
    :func:`attention` (slices of a cache are fine), ``key_bias`` ``(T_i,)`` or None,
    ``mask`` ``(S, T_i)`` or None (all visible). Equal to :func:`attention` on the
    concatenated keys, values, biases and masks. Returns ``(S, H, Dv)``.
    """
    q = _f64(q)
    logits = []
    for k, _v, bias, mask in parts:
        lg = _logits(q, _heads(k, q.shape[1])) * scale
        if bias is not None:
            lg = lg + _f64(bias)
        if mask is not None:
            lg = np.where(np.asarray(mask, bool)[None], lg, -np.inf)
        logits.append(lg)
    p = _with_sink(np.concatenate(logits, axis=-1), None)
    out, start = 0.0, 0
    for (_k, v, _b, _m), lg in zip(parts, logits, strict=True):
        out = out + _values(p[..., start:start + lg.shape[-1]], _heads(v, q.shape[1]))
        start += lg.shape[-1]
    return out
