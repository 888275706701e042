"""Hardware-exact path of a ``deepseek-v4`` attention block (golden MA + VA), bit for bit.

The attention block of :class:`golden.presets.deepseek_v4.DeepseekV4Layer` — low-rank
query, shared K = V head, partial interleaved RoPE, the CSA / HCA compressors, the
lightning indexer and its top-k, attention with the sink logit, inverse RoPE and the
grouped output projection — as MA and VA operations on bf16 data, with each stage's error
against the float64 chain (see :mod:`golden.hwpath` for the conventions and
``docs/golden/hw-path.md`` for the table). The block's input is the normed, collapsed
hyper-connection output (``x`` below); the hyper-connections and the MoE are not mapped
here (``docs/golden/hw-path.md`` says why).

Mapping decisions beyond :mod:`golden.hwpath`'s: the compressors' softmax over the slots
of a group is a VA SOFTMAX per (group, channel); the indexer's ReLU is a VA CLAMP to
``[+0, +inf]`` (CLAMP, SOFTPLUS and SQRT extend docs/design.md's VA: see :mod:`golden.va`); its
top-k keeps ``index_topk`` (more than the VA's 8) entries, which the VA does as repeated
TOP-K passes over the remaining entries — the same result as one sort by the VA's order
(ties to the lowest index), which is what is computed; the sink is one more element of
the softmax row, dropped afterwards.

``mode`` ("bf16" or "int8", as in :func:`golden.hwpath.ma_matmul`) is the MA's mode of every
weight × activation GEMM: the projections, the compressors' kv and gate, the indexer's
query and head-weight projections, the hyper-connections' mixing GEMM, the router and the
experts (int8: VA QUANTIZE per token row, one scale per weight matrix, int32 → VA
DEQUANTIZE with the product of the scales). The activation × activation products
(q·Kᵀ, P·V, the indexer's scores) stay bf16 in both modes.
"""

from dataclasses import dataclass

import numpy as np

from . import va
from .attn.primitives import rms_norm, softmax
from .hwpath import HwTrace, bf16_value, ma_matmul, to_bf16, va_recip, va_rmsnorm
from .ma import gemm_bf16
from .moe import route_hash, route_topk, router_scores, swiglu
from .presets.deepseek_v4 import CSA, SWA

__all__ = ["run_dsv4_attention", "run_dsv4_hyper", "run_dsv4_moe", "run_dsv4_layer",
           "va_gather_idx", "RouterAgreement"]


def _check_mode(mode):
    if mode not in ("bf16", "int8"):
        raise ValueError(f"mode must be 'bf16' or 'int8', got {mode!r}")


def _rope_rows(layer, x_bits, x_ref, positions, inv, scale, inverse=False):
    """VA ROPE (interleaved pairs) of the trailing rope slice of every row; float64 too."""
    ang = np.asarray(positions, np.float64)[:, None] * inv[None, :]
    if inverse:
        ang = -ang
    cos_b, sin_b = to_bf16(np.cos(ang) * scale), to_bf16(np.sin(ang) * scale)
    rd = 2 * inv.size
    out = x_bits.copy()
    flat = out.reshape(x_bits.shape[0], -1, x_bits.shape[-1])
    for t in range(flat.shape[0]):
        for h in range(flat.shape[1]):
            flat[t, h, -rd:] = va.rope_bf16(flat[t, h, -rd:], cos_b[t], sin_b[t], False)
    ref = layer._rope(x_ref, positions, inv, scale, inverse)
    return out, ref


def _compress(layer, tr, x_b, x_r, prefix, overlap, width, name, mode="bf16"):
    """A compressor on all of ``x``: bf16 entries and float64 entries. Fewer tokens than
    the rate: no complete group, no entries (as the float64 layer) and no stage rows."""
    rate, eps = layer.rate, layer.cfg.rms_norm_eps
    n = x_b.shape[0] // rate
    if n == 0:
        return np.zeros((0, width), np.uint16), np.zeros((0, width))
    wkv, wg = layer.p(f"{prefix}.kv_proj.weight"), layer.p(f"{prefix}.gate_proj.weight")
    kv_b, kv_r = ma_matmul(x_b, wkv, mode)[: n * rate], (x_r @ wkv.T)[: n * rate]
    g_b, g_r = ma_matmul(x_b, wg, mode)[: n * rate], (x_r @ wg.T)[: n * rate]
    bias = layer.p(f"{prefix}.position_bias")
    g_b = va.add_bf16(g_b, np.tile(to_bf16(bias), (n, 1)))
    g_r = g_r + np.tile(bias, (n, 1))
    kv_b, g_b = kv_b.reshape(n, rate, -1), g_b.reshape(n, rate, -1)
    kv_r, g_r = kv_r.reshape(n, rate, -1), g_r.reshape(n, rate, -1)
    if overlap:  # slots: group w-1's first series, then group w's second series
        neg = to_bf16(-np.inf)

        def slots(a, fill):
            s = np.full((n, 2 * rate, width), fill, a.dtype)
            s[:, rate:] = a[..., width:]
            s[1:, :rate] = a[:-1, :, :width]
            return s

        kv_b, g_b = slots(kv_b, 0), slots(g_b, neg)
        kv_r, g_r = slots(kv_r, 0.0), slots(g_r, -np.inf)
    w_b = np.empty_like(g_b)
    for w in range(n):
        for c in range(width):
            w_b[w, :, c] = va.softmax_bf16(g_b[w, :, c])
    w_r = softmax(g_r, axis=1)
    prod_b = va.mul_bf16(w_b, kv_b)
    pooled_b = np.array(
        [[va.sum_bf16(prod_b[w, :, c], 32) for c in range(width)] for w in range(n)], np.uint32
    ).reshape(n, width)
    pooled_b = va.f32_to_bf16(pooled_b)
    pooled_r = np.sum(w_r * kv_r, axis=1)
    tr.add(f"{name}: gated pooling", "MA+VA", pooled_b, pooled_r)
    gamma = layer.p(f"{prefix}.kv_norm.weight")
    nb, nr = va_rmsnorm(pooled_b, gamma, eps), rms_norm(pooled_r, gamma, eps)
    pos = rate * np.arange(n)
    eb, er = _rope_rows(layer, nb[:, None, :], nr[:, None, :], pos, layer.inv_comp, layer.rope_scale)
    tr.add(f"{name}: entries (norm + RoPE)", "VA", eb, er)
    return eb[:, 0], er[:, 0]


def _agree(a, b):
    return float(np.mean([set(x[x >= 0]) == set(y[y >= 0]) for x, y in zip(a, b, strict=True)]))


def run_dsv4_attention(layer, x, mode="bf16"):
    """The attention block on ``x`` ``(S, D)`` (positions 0..S-1, empty state).

    Returns an :class:`golden.hwpath.HwTrace`; ``out_ref`` equals
    ``layer.attention(layer.init_state(), x_bf16, positions)`` (tested).
    """
    _check_mode(mode)
    tr = HwTrace()
    xb = to_bf16(x)
    _attention(layer, tr, xb, bf16_value(xb), mode)
    return tr


def _attention(layer, tr, xb, xr, mode="bf16"):
    """The block on bf16 bits ``xb`` and float64 ``xr``; sets ``tr.out_bits`` /
    ``tr.out_ref`` and returns the mask of queries whose key sets agree (and the
    indexer's agreement, None without an indexer)."""
    c = layer.cfg
    s, h, d, eps = xb.shape[0], c.num_attention_heads, c.head_dim, c.rms_norm_eps
    pos = np.arange(s)
    p = layer.p

    qa_b = va_rmsnorm(
        ma_matmul(xb, p("self_attn.q_a_proj.weight"), mode), p("self_attn.q_a_norm.weight"), eps
    )
    qa_r = rms_norm(xr @ p("self_attn.q_a_proj.weight").T, p("self_attn.q_a_norm.weight"), eps)
    tr.add("query low-rank + RMSNorm", "MA+VA", qa_b, qa_r)
    wqb = p("self_attn.q_b_proj.weight")
    q_b = ma_matmul(qa_b, wqb, mode).reshape(s, h, d)
    q_r = (qa_r @ wqb.T).reshape(s, h, d)
    q_b = va_rmsnorm(q_b.reshape(s * h, d), np.ones(d), eps).reshape(s, h, d)
    q_r = rms_norm(q_r, eps=eps)
    q_b, q_r = _rope_rows(layer, q_b, q_r, pos, layer.inv_attn, layer.attn_scale)
    tr.add("query (per-head norm + RoPE)", "MA+VA", q_b, q_r)
    wkv = p("self_attn.kv_proj.weight")
    kv_b = va_rmsnorm(ma_matmul(xb, wkv, mode), p("self_attn.kv_norm.weight"), eps)
    kv_r = rms_norm(xr @ wkv.T, p("self_attn.kv_norm.weight"), eps)
    kv_b, kv_r = _rope_rows(layer, kv_b[:, None, :], kv_r[:, None, :], pos, layer.inv_attn, layer.attn_scale)
    kv_b, kv_r = kv_b[:, 0], kv_r[:, 0]
    tr.add("shared K = V (norm + RoPE)", "MA+VA", kv_b, kv_r)

    win = c.sliding_window
    tok = pos[:, None] + np.arange(win)[None, :] - (win - 1)
    tok = np.where(tok >= 0, tok, -1)
    ent_b = ent_r = np.zeros((s, 0), np.int64)
    entries_b, entries_r = np.zeros((0, d), np.uint16), np.zeros((0, d))
    agree = None
    if layer.type != SWA:
        entries_b, entries_r = _compress(
            layer, tr, xb, xr, "self_attn.compressor", layer.type == CSA, d, "compressor", mode
        )
        n_ent = entries_b.shape[0]
        visible = np.arange(n_ent)[None, :] < ((pos + 1) // layer.rate)[:, None]
        if layer.type == CSA:
            ent_b, ent_r, agree = _indexer(layer, tr, xb, xr, qa_b, qa_r, pos, visible, mode)
        else:
            ent_b = ent_r = np.where(visible, np.arange(n_ent)[None, :], -1)

    scale_b = to_bf16(d**-0.5)
    sinks = p("self_attn.sinks")
    sink_b = to_bf16(sinks)
    out_b = np.zeros((s, h, d), np.uint16)
    out_r = np.zeros((s, h, d))
    for t in range(s):
        sel_tok = tok[t][tok[t] >= 0]
        # exact: GEMM q·Kᵀ, SCALE, the sink as one more element of each SOFTMAX row, GEMM P·V
        keys = np.concatenate([kv_b[sel_tok], entries_b[ent_b[t][ent_b[t] >= 0]]])
        sc = va.scale_bf16(va.f32_to_bf16(gemm_bf16(q_b[t], keys.T.copy())), scale_b)
        rows = np.concatenate([sc, sink_b[:, None]], axis=1)
        pr = np.stack([va.softmax_bf16(r) for r in rows])[:, :-1]
        out_b[t] = va.f32_to_bf16(gemm_bf16(pr, keys.copy()))
        # float64, with the float64 chain's own key set
        keys = np.concatenate([kv_r[sel_tok], entries_r[ent_r[t][ent_r[t] >= 0]]])
        lg = np.concatenate([q_r[t] @ keys.T * d**-0.5, sinks[:, None]], axis=1)
        out_r[t] = softmax(lg, axis=-1)[:, :-1] @ keys
    same = np.array([set(a[a >= 0]) == set(b[b >= 0]) for a, b in zip(ent_b, ent_r, strict=True)])
    tr.add("attention (queries selecting alike)", "MA+VA", out_b, out_r, agree, same)
    out_b, out_r = _rope_rows(layer, out_b, out_r, pos, layer.inv_attn, layer.attn_scale, inverse=True)
    g = c.o_groups
    wa = p("self_attn.o_a_proj.weight").reshape(g, c.o_lora_rank, -1)
    grp_b = np.concatenate(
        [ma_matmul(out_b.reshape(s, g, -1)[:, j], wa[j], mode) for j in range(g)], axis=1
    )
    grp_r = np.einsum("sgi,gri->sgr", out_r.reshape(s, g, -1), wa).reshape(s, -1)
    wb = p("self_attn.o_b_proj.weight")
    tr.out_bits, tr.out_ref = ma_matmul(grp_b, wb, mode), grp_r @ wb.T
    tr.add(
        "output (inverse RoPE + grouped projection), selecting alike",
        "MA+VA",
        tr.out_bits,
        tr.out_ref,
        agree,
        same,
    )
    return same, agree


def _indexer(layer, tr, xb, xr, qa_b, qa_r, pos, visible, mode="bf16"):
    c = layer.cfg
    pre = "self_attn.compressor.indexer"
    s, hi, di = xb.shape[0], c.index_n_heads, c.index_head_dim
    keys_b, keys_r = _compress(layer, tr, xb, xr, pre, True, di, "indexer compressor", mode)
    if keys_b.shape[0] == 0:  # no compressed entries yet: nothing to score or select
        none = np.full((s, 0), -1, np.int64)
        return none, none, None
    wq = layer.p(f"{pre}.q_b_proj.weight")
    q_b, q_r = ma_matmul(qa_b, wq, mode).reshape(s, hi, di), (qa_r @ wq.T).reshape(s, hi, di)
    q_b, q_r = _rope_rows(layer, q_b, q_r, pos, layer.inv_comp, layer.rope_scale)
    ww = layer.p(f"{pre}.scorer.weights_proj.weight")
    w_b = va.scale_bf16(ma_matmul(xb, ww, mode), to_bf16(hi**-0.5))
    w_r = (xr @ ww.T) * hi**-0.5
    dots_b = va.f32_to_bf16(gemm_bf16(q_b.reshape(s * hi, di), keys_b.T.copy())).reshape(s, hi, -1)
    relu_b = va.clamp_bf16(dots_b, 0x0000, 0x7F80)  # ReLU: VA CLAMP to [+0, +inf]
    relu_b = va.scale_bf16(relu_b, to_bf16(di**-0.5))
    sc_b = np.zeros((s, keys_b.shape[0]), np.uint16)
    for j in range(hi):
        sc_b = va.add_bf16(
            sc_b, va.mul_bf16(relu_b[:, j], np.broadcast_to(w_b[:, j, None], relu_b[:, j].shape))
        )
    sc_r = np.einsum("sht,sh->st", np.maximum(np.einsum("shd,td->sht", q_r, keys_r), 0) * di**-0.5, w_r)
    tr.add("indexer scores", "MA+VA", sc_b, sc_r, mask=visible)
    k = min(c.index_topk, keys_b.shape[0])
    low = to_bf16(-np.inf)
    sel_b = np.stack([va.topk_bf16(np.where(visible[t], sc_b[t], low), k)[1] for t in range(s)]).astype(
        np.int64
    )
    sel_b = np.where(np.take_along_axis(visible, sel_b, 1), sel_b, -1)
    order = np.argsort(-np.where(visible, sc_r, -np.inf), axis=1, kind="stable")[:, :k]
    sel_r = np.where(np.take_along_axis(visible, order, 1), order, -1)
    agree = _agree(sel_b, sel_r)
    tr.stages[-1].agree = agree
    return sel_b, sel_r, agree


def _va_sum(x_bits, axis):
    """VA SUM of every vector along ``axis`` (32 lanes), rounded to bf16."""
    sums = np.apply_along_axis(lambda v: np.uint32(va.sum_bf16(v, 32)), axis, x_bits)
    return va.f32_to_bf16(sums.astype(np.uint32))


def _va_sigmoid(z_bits):
    """1 / (1 + exp(-z)): EXP of the sign-flipped input, ADD 1, reciprocal."""
    e = va.exp_bf16(np.asarray(z_bits, np.uint16) ^ np.uint16(0x8000))
    return va_recip(va.add_bf16(e, np.full(e.shape, to_bf16(1.0), np.uint16)))


def run_dsv4_hyper(layer, streams, block_out, name="attn_hc", mode="bf16"):
    """One hyper-connection: weights, collapse, and merge of ``block_out`` ``(S, D)``.

    ``streams`` ``(S, n, D)``. Both chains start from the bf16-rounded streams and block
    output. Returns an :class:`golden.hwpath.HwTrace` whose ``out_bits`` / ``out_ref`` are
    the merged streams.
    """
    _check_mode(mode)
    tr = HwTrace()
    sb, ob = to_bf16(streams), to_bf16(block_out)
    w = _hc_weights(layer, tr, sb, bf16_value(sb), name, mode)
    _hc_merge(tr, name, sb, bf16_value(sb), ob, bf16_value(ob), w)
    return tr


def _hc_weights(layer, tr, sb, sr, name, mode="bf16"):
    """Weights and collapse of hyper-connection ``name`` on streams ``sb`` (bits) / ``sr``:
    a dict of (bits, float64) pairs ``pre``, ``post``, ``comb``, ``collapse``."""
    c = layer.cfg
    eps, n = c.hc_eps, c.hc_mult
    s = sb.shape[0]
    fn, base, scale = layer.p(f"{name}.fn"), layer.p(f"{name}.base"), layer.p(f"{name}.scale")

    flat_b = va_rmsnorm(sb.reshape(s, -1), np.ones(n * sb.shape[2]), c.rms_norm_eps)
    mix_b = ma_matmul(flat_b, fn, mode)
    mix_r = rms_norm(sr.reshape(s, -1), eps=c.rms_norm_eps) @ fn.T
    tr.add(f"{name}: RMSNorm + mixing GEMM", "MA+VA", mix_b, mix_r)

    def affine(bits, k, sl):
        return va.add_bf16(
            va.scale_bf16(bits[:, sl], to_bf16(scale[k])),
            np.broadcast_to(to_bf16(base[sl]), (s, sl.stop - sl.start)),
        )

    eps_b = to_bf16(eps)
    pre_b = va.add_bf16(_va_sigmoid(affine(mix_b, 0, slice(0, n))), np.full((s, n), eps_b, np.uint16))
    pre_r = 1 / (1 + np.exp(-(mix_r[:, :n] * scale[0] + base[:n]))) + eps
    post_b = va.scale_bf16(_va_sigmoid(affine(mix_b, 1, slice(n, 2 * n))), to_bf16(2.0))
    post_r = 2 / (1 + np.exp(-(mix_r[:, n : 2 * n] * scale[1] + base[n : 2 * n])))
    tr.add(f"{name}: pre (sigmoid)", "VA", pre_b, pre_r)
    tr.add(f"{name}: post (2·sigmoid)", "VA", post_b, post_r)

    logits_b = affine(mix_b, 2, slice(2 * n, 2 * n + n * n)).reshape(s, n, n)
    comb_b = np.stack([[va.softmax_bf16(r) for r in m] for m in logits_b])
    comb_b = va.add_bf16(comb_b, np.full(comb_b.shape, eps_b, np.uint16))
    comb_r = (
        softmax(mix_r[:, 2 * n :].reshape(s, n, n) * scale[2] + base[2 * n :].reshape(n, n), axis=-1) + eps
    )

    def normalize(bits, ref, axis):
        tot = va.add_bf16(
            _va_sum(bits, axis),
            np.full(bits.shape[: axis % 3] + bits.shape[axis % 3 + 1 :], eps_b, np.uint16),
        )
        bits = va.mul_bf16(bits, np.broadcast_to(np.expand_dims(va_recip(tot), axis), bits.shape))
        return bits, ref / (ref.sum(axis=axis, keepdims=True) + eps)

    comb_b, comb_r = normalize(comb_b, comb_r, -2)
    for _ in range(c.hc_sinkhorn_iters - 1):
        comb_b, comb_r = normalize(comb_b, comb_r, -1)
        comb_b, comb_r = normalize(comb_b, comb_r, -2)
    tr.add(f"{name}: comb (softmax + Sinkhorn)", "VA", comb_b, comb_r)

    coll_b = np.zeros((s, sb.shape[2]), np.uint16)
    for j in range(n):
        coll_b = va.add_bf16(coll_b, va.mul_bf16(sb[:, j], np.broadcast_to(pre_b[:, j, None], coll_b.shape)))
    coll_r = np.einsum("sn,snd->sd", pre_r, sr)
    tr.add(f"{name}: collapse", "VA", coll_b, coll_r)
    return dict(pre=(pre_b, pre_r), post=(post_b, post_r), comb=(comb_b, comb_r), collapse=(coll_b, coll_r))


def _hc_merge(tr, name, sb, sr, ob, orf, w):
    """Merge of block output ``ob`` / ``orf`` into the streams with the weights ``w``."""
    (post_b, post_r), (comb_b, comb_r) = w["post"], w["comb"]
    n = sb.shape[1]
    merged_b = np.empty_like(sb)
    for k in range(n):
        acc = va.mul_bf16(ob, np.broadcast_to(post_b[:, k, None], ob.shape))
        for j in range(n):
            acc = va.add_bf16(acc, va.mul_bf16(sb[:, j], np.broadcast_to(comb_b[:, j, k, None], ob.shape)))
        merged_b[:, k] = acc
    tr.out_bits = merged_b
    tr.out_ref = post_r[:, :, None] * orf[:, None, :] + np.einsum("sjk,sjd->skd", comb_r, sr)
    tr.add(f"{name}: merge", "VA", merged_b, tr.out_ref)
    return merged_b, tr.out_ref


# --- MoE ---------------------------------------------------------------------------------


def va_gather_idx(values, idx, stride=1, base=0):
    """VA GATHER_IDX on a memory image holding ``values`` (1-D, 2- or 4-byte elements):
    ``out[i] = values[base + idx[i]·stride]``, run by :func:`golden.va.execute`."""
    values = np.ascontiguousarray(values).ravel()
    es = values.itemsize
    idx = np.ascontiguousarray(idx, np.int32).ravel()
    n = idx.size
    src = 4 * n + (-4 * n) % 64
    dst = src + values.nbytes + (-values.nbytes) % 64
    mem = np.zeros(dst + es * n, np.uint8)
    mem[: 4 * n] = idx.view(np.uint8)
    mem[src : src + values.nbytes] = values.view(np.uint8)
    limit = (values.size - 1 - base) // stride + 1
    cmd = va.VaCommand(
        va.VaOpcode.GATHER_IDX, n, src=src + base * es, src2=0, dst=dst, stride=stride * es,
        esize={2: 1, 4: 2}[es], index_limit=limit,
    )
    code, _ = va.execute(cmd, mem)
    if code:
        raise ValueError(f"GATHER_IDX refused: {code.name}")
    return mem[dst:].view(values.dtype).copy()


@dataclass
class RouterAgreement:
    """How the exact path's expert sets compare with float64's (top-k layers)."""

    tokens: int
    equal: int                # tokens with the same expert set
    boundary_ties: int        # tokens whose exact keys tie at the k-th place (lowest index wins)
    differ_in_ties: int       # differing tokens whose exact keys tie at the k-th place

    def line(self):
        return (
            f"router: {self.equal}/{self.tokens} tokens select the same experts; "
            f"{self.tokens - self.equal} differ ({self.differ_in_ties} of them inside a bf16 tie "
            f"at the k-th place); {self.boundary_ties} tokens have such a tie"
        )


def _swiglu_exact(layer, x_b, w_gate, w_up, w_down, mode="bf16"):
    """Clamped SwiGLU on the MA + VA: GEMM gate / up, CLAMP (gate to [-inf, limit], up to
    [-limit, limit]), SILU, MUL, GEMM down."""
    lim = to_bf16(layer.cfg.swiglu_limit)
    g = va.clamp_bf16(ma_matmul(x_b, w_gate, mode), 0xFF80, lim)
    u = va.clamp_bf16(ma_matmul(x_b, w_up, mode), lim ^ 0x8000, lim)
    return ma_matmul(va.mul_bf16(va.silu_bf16(g), u), w_down, mode)


def run_dsv4_moe(layer, x, token_ids, tr=None, xr=None, mode="bf16"):
    """The MoE of a ``deepseek-v4`` layer on ``x`` ``(S, D)`` (the normed collapsed
    streams) for tokens ``token_ids``; both chains start from ``to_bf16(x)`` unless ``x``
    is already bits and ``xr`` the float64 chain's value.

    Returns ``(tr, same)``: the trace (``out_bits`` / ``out_ref`` the MoE output;
    ``out_ref`` equals ``layer.moe`` on the same input, tested; ``tr.router`` a
    :class:`RouterAgreement` for top-k layers) and the mask of tokens routed alike.
    """
    _check_mode(mode)
    c = layer.cfg
    tr = HwTrace() if tr is None else tr
    if xr is None:
        xb = to_bf16(x)
        xr = bf16_value(xb)
    else:
        xb = np.asarray(x, np.uint16)
    s, k, ne = xb.shape[0], c.num_experts_per_tok, c.n_routed_experts
    p = layer.p
    if k > va.MAX_K:
        raise ValueError(f"num_experts_per_tok = {k}: the VA's TOP-K keeps at most {va.MAX_K}")

    wg = p("mlp.gate.weight")
    lb, lr = ma_matmul(xb, wg, mode), xr @ wg.T
    tr.add("router logits", "MA", lb, lr)
    sc_b = va.sqrt_bf16(va.softplus_bf16(lb))
    sc_r = router_scores(lr, "sqrtsoftplus")
    tr.add("router scores (SOFTPLUS, SQRT)", "VA", sc_b, sc_r)
    scaling = c.routed_scaling_factor
    if layer.hash:
        table = np.asarray(p("mlp.gate.tid2eid"), np.int32)
        ids = np.asarray(token_ids, np.int32)
        idx_b = np.stack([va_gather_idx(table, ids, k, j) for j in range(k)], axis=1).astype(np.int64)
        idx_r, w_r = route_hash(sc_r, token_ids, table, scaling=scaling)
        if not np.array_equal(idx_b, idx_r):
            raise AssertionError("the GATHER_IDX of the hash table differs from the table")
        tr.router = None
    else:
        bias = p("mlp.gate.e_score_correction_bias")
        key_b = va.add_bf16(sc_b, np.broadcast_to(to_bf16(bias), sc_b.shape))
        idx_b = np.stack([va.topk_bf16(r, k)[1] for r in key_b]).astype(np.int64)
        idx_r, w_r = route_topk(sc_r, k, bias, scaling=scaling)
        kv = bf16_value(key_b)
        kth = np.sort(kv, axis=1)[:, ::-1]
        tie = (kth[:, k - 1] == kth[:, k]) if k < ne else np.zeros(s, bool)
        eq = np.array([set(a) == set(b) for a, b in zip(idx_b, idx_r, strict=True)])
        tr.router = RouterAgreement(s, int(eq.sum()), int(tie.sum()), int((tie & ~eq).sum()))
        tr.add("router keys (bias ADD) + TOP-K", "VA", key_b, sc_r + bias, float(eq.mean()))
    same = np.array([set(a) == set(b) for a, b in zip(idx_b, idx_r, strict=True)])
    agree = float(same.mean())
    # weights: GATHER_IDX of the selected scores, SUM, reciprocal, MUL, SCALE
    flat = (np.arange(s)[:, None] * ne + idx_b).astype(np.int32)
    sel_b = va_gather_idx(sc_b, flat).reshape(s, k)
    total = va.f32_to_bf16(np.array([va.sum_bf16(r, 32) for r in sel_b], np.uint32))
    w_b = va.mul_bf16(sel_b, np.broadcast_to(va_recip(total)[:, None], sel_b.shape))
    w_b = va.scale_bf16(w_b, to_bf16(scaling))
    tr.add("routing weights (tokens routed alike)", "VA", np.sort(w_b[same], 1), np.sort(w_r[same], 1), agree)

    sh = [p(f"mlp.shared_experts.{n}_proj.weight") for n in ("gate", "up", "down")]
    lim = c.swiglu_limit
    sh_b = _swiglu_exact(layer, xb, *sh, mode=mode)
    sh_r = swiglu(xr, *sh, lim)
    tr.add("shared expert (clamped SwiGLU)", "MA+VA", sh_b, sh_r)

    i = c.moe_intermediate_size
    gu, dn = p("mlp.experts.gate_up_proj"), p("mlp.experts.down_proj")
    contrib = np.zeros((s, k, xb.shape[1]), np.uint16)
    for e in np.unique(idx_b):
        tok, slot = np.nonzero(idx_b == e)
        y = _swiglu_exact(layer, xb[tok], gu[e][:i], gu[e][i:], dn[e], mode)   # rows gathered
        contrib[tok, slot] = va.mul_bf16(y, np.broadcast_to(w_b[tok, slot][:, None], y.shape))
    out_b = sh_b
    for j in range(k):                      # shared first, then the slots in order
        out_b = va.add_bf16(out_b, contrib[:, j])
    out_r = sh_r.copy()
    for e in np.unique(idx_r):
        tok, slot = np.nonzero(idx_r == e)
        np.add.at(out_r, tok, w_r[tok, slot, None] * swiglu(xr[tok], gu[e][:i], gu[e][i:], dn[e], lim))
    tr.out_bits, tr.out_ref = out_b, out_r
    tr.add("MoE output (tokens routed alike)", "MA+VA", out_b, out_r, agree, same)
    return tr, same


def run_dsv4_layer(layer, streams, token_ids, mode="bf16"):
    """A whole ``deepseek-v4`` layer on streams ``(S, hc_mult, D)`` (positions 0..S-1,
    empty state): attention hyper-connection, input RMSNorm, attention block, merge, FFN
    hyper-connection, post-attention RMSNorm, MoE, merge — all on the golden MA / VA.

    Returns an :class:`golden.hwpath.HwTrace` whose ``out_bits`` / ``out_ref`` are the new
    streams (``out_ref`` equals ``layer.forward`` on the bf16-rounded streams, tested), with
    ``tr.router`` as in :func:`run_dsv4_moe` and two whole-layer rows: all tokens, and the
    tokens whose attention key sets and experts both agree. ``mode``: the MA's mode of the
    weight GEMMs (see the module's docstring).
    """
    _check_mode(mode)
    c = layer.cfg
    eps = c.rms_norm_eps
    tr = HwTrace()
    sb = to_bf16(streams)
    sr = bf16_value(sb)
    w = _hc_weights(layer, tr, sb, sr, "attn_hc", mode)
    cb, cr = w["collapse"]
    g = layer.p("input_layernorm.weight")
    xb, xr = va_rmsnorm(cb, g, eps), rms_norm(cr, g, eps)
    tr.add("input RMSNorm", "VA", xb, xr)
    attn_same, _ = _attention(layer, tr, xb, xr, mode)
    mb, mr = _hc_merge(tr, "attn_hc", sb, sr, tr.out_bits, tr.out_ref, w)
    w = _hc_weights(layer, tr, mb, mr, "ffn_hc", mode)
    cb, cr = w["collapse"]
    g = layer.p("post_attention_layernorm.weight")
    xb, xr = va_rmsnorm(cb, g, eps), rms_norm(cr, g, eps)
    tr.add("post-attention RMSNorm", "VA", xb, xr)
    _, routed_same = run_dsv4_moe(layer, xb, token_ids, tr, xr, mode)
    ob, orf = _hc_merge(tr, "ffn_hc", mb, mr, tr.out_bits, tr.out_ref, w)
    tr.out_bits, tr.out_ref = ob, orf
    tr.add("layer output (all tokens)", "MA+VA", ob, orf)
    both = attn_same & routed_same
    tr.add(
        "layer output (tokens selecting and routing alike)", "MA+VA", ob, orf, float(both.mean()), both
    )
    return tr
