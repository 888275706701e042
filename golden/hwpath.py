"""Hardware-exact path of a ``notes`` layer: the MA / VA operation sequence, bit for bit.

The layer of :class:`golden.presets.notes.NotesLayer`, computed as the accelerator
computes it: every matrix product on the matrix accelerator (:mod:`golden.ma`: bf16 ×
bf16 with binary32 sequential accumulation, or int8 × int8 → int32 after the vector
accelerator's dynamic range scaler), everything else on the vector accelerator
(:mod:`golden.va`: RMSNorm, RoPE, softmax, top-k, SiLU, add, multiply, reciprocal,
quantize / dequantize, sums), with bf16 in memory between operations. This is the
sequence the integrated RTL is checked against bit for bit.

Beside each stage's bf16 result, :func:`run_notes_layer` computes the same stage in
float64 from the float64 chain (the golden float64 layer, stage by stage), so the error
each stage adds *to everything before it* is measured: max abs error, error relative to the
stage's largest magnitude, and for the selections the fraction of tokens whose chosen set
agrees. Host-side constants (RoPE cos/sin tables, 1/√d, log-lengths, the position code,
and in int8 mode the weight scale) are float64 values rounded once to bf16 / binary32, as a
host would write them to memory.

Decisions of the mapping: the summary mean is a VA sum of each feature column times the
bf16 of ``1/n``; the attention scale multiplies the scores (not the queries); an MA
result (binary32) becomes bf16 by the VA's write rounding; in int8 mode activations are
quantized per token row and each weight matrix per tensor (one scale), and the int32
result is dequantized with the product of the two scales.
"""

from dataclasses import dataclass, field

import numpy as np

from . import va
from .attn.primitives import apply_rope, rms_norm, rope_angles, softmax
from .fp import bf16_to_f32, float_to_bf16_rne
from .ma import gemm_bf16, gemm_int8
from .moe import router_scores, swiglu
from .presets.notes import sinusoid, tier_ranges

__all__ = ["StageError", "HwTrace", "run_notes_layer", "bf16_value", "to_bf16"]


def to_bf16(x):
    """float64 → bf16 bits (one correct rounding): how the host writes a constant."""
    return float_to_bf16_rne(np.asarray(x, np.float64))


def bf16_value(bits):
    """bf16 bits → float64 values, subnormals read as zeros (the accelerator's rule)."""
    return bf16_to_f32(va.f32_to_bf16(va.bf16_in(bits))).astype(np.float64)


@dataclass
class StageError:
    stage: str
    unit: str  # "MA", "VA" or "MA+VA"
    max_abs: float
    rel: float  # max_abs / max |float64 value|
    agree: float | None = None  # selections: fraction of tokens with the same set


@dataclass
class HwTrace:
    """Per-stage errors, the exact output (bf16 bits) and the float64 output."""

    stages: list = field(default_factory=list)
    out_bits: np.ndarray | None = None
    out_ref: np.ndarray | None = None
    router: object = None  # deepseek-v4 top-k layers: a golden.hwpath_dsv4.RouterAgreement
    bits: dict = field(default_factory=dict)   # stage -> the exact bits it measured
    refs: dict = field(default_factory=dict)   # stage -> the float64 values
    masks: dict = field(default_factory=dict)  # stage -> the token mask applied to both, if any

    def add(self, stage, unit, bits, ref, agree=None, mask=None):
        """Record a stage: its error of ``bits`` against ``ref`` (both restricted to the
        token rows ``mask`` first, if given)."""
        if mask is not None:
            bits, ref = bits[mask], ref[mask]
            self.masks[stage] = mask
        self.bits[stage], self.refs[stage] = np.asarray(bits).copy(), np.asarray(ref).copy()
        got = bf16_value(bits)
        err = float(np.max(np.abs(got - ref))) if np.size(ref) else 0.0
        mag = float(np.max(np.abs(ref))) if np.size(ref) else 0.0
        self.stages.append(StageError(stage, unit, err, err / mag if mag else 0.0, agree))

    def table(self):
        """The per-stage error table, Markdown."""
        rows = ["| stage | unit | max abs error | relative | set agreement |", "|---|---|---|---|---|"]
        for s in self.stages:
            agree = "" if s.agree is None else f"{s.agree:.3f}"
            rows.append(f"| {s.stage} | {s.unit} | {s.max_abs:.3g} | {s.rel:.3g} | {agree} |")
        return "\n".join(rows)


# --- the two accelerators' operations, on bf16 bits --------------------------------------


def ma_matmul(a_bits, w, mode):
    """``a (M, K) @ wᵀ`` on the MA; ``w`` float64 ``(N, K)`` (output × input) as stored.

    bf16 mode: weights as bf16, binary32 result rounded to bf16. int8 mode: rows of ``a``
    quantized by the VA, ``w`` by one scale, int32 result dequantized by the VA.
    """
    a_bits = np.asarray(a_bits, np.uint16)
    if mode == "bf16":
        return va.f32_to_bf16(gemm_bf16(a_bits, to_bf16(w).T.copy()))
    if mode != "int8":
        raise ValueError(f"mode must be 'bf16' or 'int8', got {mode!r}")
    qw, sw = va.quantize_bf16(to_bf16(w).ravel())
    qw = qw.reshape(w.shape)
    rows = [va.quantize_bf16(r) for r in a_bits]
    qa = np.stack([q for q, _ in rows])
    acc = gemm_int8(qa, qw.T.copy())
    return np.stack(
        [
            va.dequantize_int32(acc[i], va.f32_mul(np.uint32(s), np.uint32(sw)))
            for i, (_, s) in enumerate(rows)
        ]
    )


def va_rmsnorm(x_bits, gamma, eps):
    eps_bits = np.float32(eps).view(np.uint32)
    g = to_bf16(gamma)
    return np.stack([va.rmsnorm_bf16(r, g, eps_bits) for r in x_bits])


def va_rope(x_bits, cos_bits, sin_bits):
    """Split-half RoPE of each row (…, D) with per-row tables (…, D/2)."""
    flat = x_bits.reshape(-1, x_bits.shape[-1])
    c = np.broadcast_to(cos_bits, x_bits.shape[:-1] + cos_bits.shape[-1:]).reshape(flat.shape[0], -1)
    s = np.broadcast_to(sin_bits, x_bits.shape[:-1] + sin_bits.shape[-1:]).reshape(flat.shape[0], -1)
    return np.stack([va.rope_bf16(flat[i], c[i], s[i], True) for i in range(flat.shape[0])]).reshape(
        x_bits.shape
    )


def va_mean_rows(x_bits, lanes=32):
    """Column means of ``x (n, …)``: a VA sum per column, times bf16(1/n)."""
    n = x_bits.shape[0]
    cols = x_bits.reshape(n, -1)
    sums = np.array([va.sum_bf16(cols[:, j], lanes) for j in range(cols.shape[1])], np.uint32)
    return va.scale_bf16(va.f32_to_bf16(sums), to_bf16(1.0 / n)).reshape(x_bits.shape[1:])


def va_recip(bits):
    return va.f32_to_bf16(va.recip_f32(va.bf16_in(bits)))


# --- the notes layer ---------------------------------------------------------------------


def _set_agreement(a, b):
    return float(np.mean([set(x) == set(y) for x, y in zip(a, b, strict=True)]))


def run_notes_layer(layer, x, mode="bf16"):
    """The layer on ``x`` ``(S, D)`` (positions 0..S-1, empty cache), exact and float64.

    ``mode``: the MA's mode for every matrix product ("bf16" or "int8"). Returns a
    :class:`HwTrace`; ``out_ref`` equals ``layer.forward`` on the same input (tested).
    """
    c = layer.cfg
    s, h, hk, d = x.shape[0], c.num_heads, c.num_kv_heads, c.head_dim
    g = h // hk
    eps = c.rms_norm_eps
    pos = np.arange(s)
    tr = HwTrace()
    p = layer.p

    xb = to_bf16(x)
    xr = bf16_value(xb)  # both chains start from the same bf16 input
    nb = va_rmsnorm(xb, p("input_layernorm.weight"), eps)
    nr = rms_norm(xr, p("input_layernorm.weight"), eps)
    tr.add("input RMSNorm", "VA", nb, nr)

    proj = {}
    for name, heads in (("q", h), ("k", hk), ("v", hk)):
        w = p(f"attn.{name}_proj.weight")
        proj[name] = (ma_matmul(nb, w, mode).reshape(s, heads, d), (nr @ w.T).reshape(s, heads, d))
        tr.add(f"{name} projection", "MA", *proj[name])
    ang = rope_angles(pos, layer.inv)[:, None, :]
    cos_b, sin_b = to_bf16(np.cos(ang)), to_bf16(np.sin(ang))
    qb, qr = va_rope(proj["q"][0], cos_b, sin_b), apply_rope(proj["q"][1], ang, pairs="half", where="leading")
    kb, kr = va_rope(proj["k"][0], cos_b, sin_b), apply_rope(proj["k"][1], ang, pairs="half", where="leading")
    tr.add("RoPE q", "VA", qb, qr)
    tr.add("RoPE k", "VA", kb, kr)
    vb, vr = proj["v"]

    scale_b = to_bf16(d**-0.5)
    attn_b = np.zeros((s, h, d), np.uint16)
    attn_r = np.zeros((s, h, d))
    sum_err = {"summaries": ([], []), "scores": ([], []), "softmax": ([], [])}
    for t in range(s):
        windows, chunks, csa = tier_ranges(t, c)
        tok = np.concatenate([np.arange(lo, hi) for lo, hi in windows] + [np.arange(*csa[0])])
        n_swa = tok.size - (csa[0][1] - csa[0][0])
        sk_b = (
            np.stack([va_mean_rows(kb[lo:hi]) for lo, hi in chunks])
            if chunks
            else np.zeros((0, hk, d), np.uint16)
        )
        sv_b = (
            np.stack([va_mean_rows(vb[lo:hi]) for lo, hi in chunks])
            if chunks
            else np.zeros((0, hk, d), np.uint16)
        )
        sk_r = np.stack([kr[lo:hi].mean(0) for lo, hi in chunks]) if chunks else np.zeros((0, hk, d))
        sv_r = np.stack([vr[lo:hi].mean(0) for lo, hi in chunks]) if chunks else np.zeros((0, hk, d))
        if chunks:
            sum_err["summaries"][0].append(np.concatenate([sk_b, sv_b]))
            sum_err["summaries"][1].append(np.concatenate([sk_r, sv_r]))
        lens = np.array([hi - lo for lo, hi in chunks], np.float64)
        bias_r = np.concatenate([np.zeros(n_swa), np.log(lens), np.zeros(tok.size - n_swa)])
        bias_b = to_bf16(bias_r)
        keys_b = np.concatenate([kb[tok[:n_swa]], sk_b, kb[tok[n_swa:]]])
        keys_r = np.concatenate([kr[tok[:n_swa]], sk_r, kr[tok[n_swa:]]])
        vals_b = np.concatenate([vb[tok[:n_swa]], sv_b, vb[tok[n_swa:]]])
        vals_r = np.concatenate([vr[tok[:n_swa]], sv_r, vr[tok[n_swa:]]])
        for j in range(hk):
            qg_b, qg_r = qb[t, j * g : (j + 1) * g], qr[t, j * g : (j + 1) * g]  # (G, D)
            sc_b = va.scale_bf16(va.f32_to_bf16(gemm_bf16(qg_b, keys_b[:, j].T.copy())), scale_b)
            sc_b = va.add_bf16(sc_b, np.broadcast_to(bias_b, sc_b.shape))
            sc_r = qg_r @ keys_r[:, j].T * d**-0.5 + bias_r
            pb = np.stack([va.softmax_bf16(r) for r in sc_b])
            pr = softmax(sc_r, axis=-1)
            sum_err["scores"][0].append(sc_b)
            sum_err["scores"][1].append(sc_r)
            sum_err["softmax"][0].append(pb)
            sum_err["softmax"][1].append(pr)
            attn_b[t, j * g : (j + 1) * g] = va.f32_to_bf16(gemm_bf16(pb, vals_b[:, j].copy()))
            attn_r[t, j * g : (j + 1) * g] = pr @ vals_r[:, j]
    for name, unit in (("summaries", "VA"), ("scores", "MA+VA"), ("softmax", "VA")):
        got, ref = sum_err[name]
        if got:
            tr.add(
                f"HCA {name}" if name == "summaries" else f"attention {name}",
                unit,
                np.concatenate([a.ravel() for a in got]),
                np.concatenate([a.ravel() for a in ref]),
            )
    tr.add("attention P·V", "MA", attn_b, attn_r)
    wo = p("attn.o_proj.weight")
    ob, orf = ma_matmul(attn_b.reshape(s, -1), wo, mode), attn_r.reshape(s, -1) @ wo.T
    tr.add("output projection", "MA", ob, orf)
    hb, hr = va.add_bf16(xb, ob), xr + orf
    tr.add("attention residual", "VA", hb, hr)

    # MoE
    mb = va_rmsnorm(hb, p("post_attention_layernorm.weight"), eps)
    mr = rms_norm(hr, p("post_attention_layernorm.weight"), eps)
    tr.add("post-attention RMSNorm", "VA", mb, mr)
    wg = p("mlp.gate.weight")
    lb, lr = ma_matmul(mb, wg, mode), mr @ wg.T
    tr.add("router logits", "MA", lb, lr)
    sb = np.stack([va.softmax_bf16(r) for r in lb])
    sr = router_scores(lr, "softmax")
    cand_b = np.stack([va.topk_bf16(r, c.primary_topk)[1] for r in sb]).astype(np.int64)
    cand_r = np.argsort(-sr, axis=1, kind="stable")[:, : c.primary_topk]
    tr.add("router softmax + top-k", "VA", sb, sr, _set_agreement(cand_b, cand_r))
    first = p("mlp.experts.gate_up_proj")[:, 0, :]
    code = sinusoid(pos, c.hidden_size)
    secb = ma_matmul(to_bf16(code), first, "bf16")  # the position code is a host constant
    secr = code @ first.T
    fin_b = np.stack([cand_b[i][va.topk_bf16(secb[i][cand_b[i]], c.final_topk)[1]] for i in range(s)])
    fin_r = np.stack(
        [cand_r[i][np.argsort(-secr[i][cand_r[i]], kind="stable")[: c.final_topk]] for i in range(s)]
    )
    tr.add("secondary score + final top-k", "MA+VA", secb, secr, _set_agreement(fin_b, fin_r))
    wsel_b = np.take_along_axis(sb, fin_b, 1)
    total = va.f32_to_bf16(np.array([va.sum_bf16(r, 32) for r in wsel_b], np.uint32))
    wts_b = va.mul_bf16(wsel_b, np.broadcast_to(va_recip(total)[:, None], wsel_b.shape))
    wsel_r = np.take_along_axis(sr, fin_r, 1)
    wts_r = wsel_r / wsel_r.sum(1, keepdims=True)

    i = c.moe_intermediate_size
    gu, dn = p("mlp.experts.gate_up_proj"), p("mlp.experts.down_proj")
    moe_b = np.zeros_like(hb)
    for e in np.unique(fin_b):
        tok, slot = np.nonzero(fin_b == e)
        xe = mb[tok]
        gb, ub = ma_matmul(xe, gu[e][:i], mode), ma_matmul(xe, gu[e][i:], mode)
        act = va.mul_bf16(va.silu_bf16(gb), ub)
        yb = ma_matmul(act, dn[e], mode)
        yb = va.mul_bf16(yb, np.broadcast_to(wts_b[tok, slot][:, None], yb.shape))
        moe_b[tok] = va.add_bf16(moe_b[tok], yb)
    moe_r = np.zeros_like(hr)
    for e in np.unique(fin_r):
        tok, slot = np.nonzero(fin_r == e)
        moe_r[tok] += wts_r[tok, slot, None] * swiglu(mr[tok], gu[e][:i], gu[e][i:], dn[e])
    # A token whose final experts differ gets another expert's output: its error measures
    # the routing flip, not the arithmetic; the stage is measured on the tokens routed
    # alike, and the flips show in the agreement column.
    same = np.array([set(a) == set(b) for a, b in zip(fin_b, fin_r, strict=True)])
    tr.add("MoE output (tokens routed alike)", "MA+VA", moe_b, moe_r, float(same.mean()), same)
    tr.out_bits = va.add_bf16(hb, moe_b)
    tr.out_ref = hr + moe_r
    tr.add("layer output (tokens routed alike)", "VA", tr.out_bits, tr.out_ref, float(same.mean()), same)
    return tr
