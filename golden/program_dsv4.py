"""The program of a ``deepseek-v4`` layer (prefill of S tokens): the command sequence of
:func:`golden.hwpath_dsv4.run_dsv4_layer` as MA / VA commands (see :mod:`golden.program`
and ``docs/golden/program.md``).

Mapping, beyond :mod:`golden.program`'s notes layer: a RoPE on the trailing slice of each
row is a ROPE per token over its heads (``repeat``), written in place after a copy (GATHER
with a one-element stride) where the un-rotated value is still needed; the compressors'
slots are GATHERed straight into a (group, channel, slot) layout, so each softmax over a
group's slots is a SOFTMAX row and the pooling a MUL and a SUM per row; the window keys of
the attention are a contiguous range of the K = V rows (a transposed-B GEMM for q·Kᵀ, a
plain one for P·V), the selected compressed entries are GATHER_IDX'd column by column
into a (feature, entry) matrix (the B of q·Kᵀ as it is, transposed-B for P·V); the sink
is SCATTERed as one more column of the score rows and P·V reads the rows without it; the
sigmoid's sign flip is SCALE by -1 (bit-identical to flipping the sign bit before EXP:
both read a subnormal as zero); the indexer's top-k is TOPK_WIDE over the scores with
the not-yet-visible entries overwritten by -inf (GATHER with stride 0 of a -inf constant).
"""

from dataclasses import dataclass

import numpy as np

from spec.codes import MaMode, VaOpcode

from . import va
from .program import BlockConfig, Builder, Operand, Program, _Layer, to_bf16

__all__ = ["dsv4_layer_prefill", "dsv4_decode_step", "dsv4_state", "Dsv4State", "CompressorState"]

P = VaOpcode
X = VaOpcode
NEG_INF = 0xFF80


class _Dsv4(_Layer):
    def __init__(self, b, layer):
        super().__init__(b, "bf16")
        self.layer, self.cfg = layer, layer.cfg
        self.n_tags = 0

    def uniq(self, stem):
        self.n_tags += 1
        return f"{stem}#{self.n_tags}"

    def constant(self, key, data):
        return self.b.cached(key, data)

    def scalar(self, value):
        return self.constant(f"{value!r}", to_bf16(np.array([value])))

    def mm(self, a, m, k, lda, w, wname, out, stage):
        """``out (m, N) = bf16(A @ wᵀ)``, A at operand ``a`` with row stride ``lda``."""
        b = self.b
        n = w.shape[0]
        wt, _ = self.weight(wname, w, "bf16")
        acc = b.tensor(f"{out}.acc", (m, n), "binary32")
        b.gemm(MaMode.BF16, a, Operand(wt), Operand(acc), m, k, n, lda, n, n, stage=stage)
        b.elementwise(X.CVT_F32, acc, out, stage=stage)
        return out

    def copy(self, src, dst, stage):
        b = self.b
        n = b.size(src)
        for lo in range(0, n, va.MAX_LENGTH):
            b.va(P.GATHER, min(va.MAX_LENGTH, n - lo), src=(src, lo), dst=(dst, lo), stride=1, stage=stage)

    def rope_rows(self, x, t_rows, heads, width, positions, inv, scale, stage, inverse=False):
        """ROPE (interleaved pairs) of the trailing ``2·len(inv)`` elements of every
        ``(row, head)`` of ``x`` ``(t_rows, heads, width)``, in place."""
        b = self.b
        ang = np.asarray(positions, np.float64)[:, None] * inv[None, :]
        if inverse:
            ang = -ang
        key = (
            f"rope.{positions[0]}.{positions[-1]}.{len(positions)}.{inv[0]!r}.{inv.size}.{scale!r}.{inverse}"
        )
        cos_t = self.constant(key + ".cos", to_bf16(np.cos(ang) * scale))
        sin_t = self.constant(key + ".sin", to_bf16(np.sin(ang) * scale))
        rd, half = 2 * inv.size, inv.size
        for t in range(t_rows):
            off = t * heads * width + width - rd
            b.va(
                P.ROPE,
                rd,
                src=(x, off, width),
                src2=(cos_t, t * half),
                src3=(sin_t, t * half),
                dst=(x, off, width),
                repeat=heads,
                stage=stage,
            )


def dsv4_layer_prefill(layer, streams, token_ids, config=None, builder=None, state=None):
    """The program of ``layer`` (a :class:`golden.presets.deepseek_v4.DeepseekV4Layer`)
    on streams ``(S, hc_mult, D)`` float64 and ``token_ids`` (positions 0..S-1, empty
    state); ``config`` and ``builder`` as in :func:`golden.program_notes.notes_prefill`; with
    ``state`` (a :class:`Dsv4State` of the same builder) the decode state after the S
    tokens is written into it. Returns ``(program, names)``: ``names`` maps each stage of
    :func:`golden.hwpath_dsv4.run_dsv4_layer` to its tensor."""
    b = Builder(config or BlockConfig()) if builder is None else builder
    s = streams.shape[0]
    sb = b.const("streams", to_bf16(streams), role="input")
    names = _layer(b, layer, sb, s, token_ids, lambda L, xb, names: _attention(L, layer, xb, s, names, state))
    return b.program(), names


def dsv4_decode_step(layer, state, streams_row, token_id, t, builder):
    """One decode step: token ``token_id`` at position ``t`` with streams ``streams_row``
    ``(hc_mult, D)``, from ``state`` (tokens 0..t-1 done), emitted into ``builder``
    (the one holding ``state``). Returns ``(step, names)``: ``step`` a :class:`Program`
    of this step's commands alone (over the builder's tensors), ``names`` as for the
    prefill (each a 1-row tensor; the layer's output under "layer output (all
    tokens)"). The state is updated in place by the step's commands."""
    b = builder
    if t >= state.capacity:
        raise ValueError(f"position {t} is beyond the state's capacity of {state.capacity} tokens")
    start = len(b.commands)
    outer = b.prefix
    b.prefix = f"{outer}d{t}."
    try:
        sb = b.const("streams", to_bf16(np.asarray(streams_row)[None]), role="input")
        names = _layer(
            b, layer, sb, 1, [token_id], lambda L, xb, names: _attention_step(L, layer, xb, t, names, state)
        )
    finally:
        b.prefix = outer
    return Program(b.config, dict(b.tensors), tuple(b.commands[start:]), {}), names


def _layer(b, layer, sb, s, token_ids, attend):
    """Hyper-connections, norms, attention (``attend(L, x, names)``) and MoE of ``s``
    rows of streams tensor ``sb``; returns the stage names."""
    c = layer.cfg
    L = _Dsv4(b, layer)
    p = layer.p
    _, n_hc, dm = b.shape(sb)
    eps = c.rms_norm_eps
    names = {}

    def hc_weights(st, name):
        """Weights and collapse of hyper-connection ``name`` on streams tensor ``st``."""
        fn, base, scl = p(f"{name}.fn"), p(f"{name}.base"), p(f"{name}.scale")
        mw = fn.shape[0]
        flat = L.rmsnorm(
            st,
            np.ones(n_hc * dm),
            eps,
            b.tensor(f"{name}.flat", (s, n_hc * dm), "bf16"),
            n_hc * dm,
            f"{name}: RMSNorm + mixing GEMM",
        )
        mix = L.mm(
            Operand(flat),
            s,
            n_hc * dm,
            n_hc * dm,
            fn,
            f"{name}.fn",
            b.tensor(f"{name}.mix", (s, mw), "bf16"),
            f"{name}: RMSNorm + mixing GEMM",
        )
        names[f"{name}: RMSNorm + mixing GEMM"] = mix
        base_t = b.cached(f"{name}.base", to_bf16(base))
        eps_t = L.scalar(float(c.hc_eps))

        def affine(kk, lo, hi, stage):
            w = hi - lo
            t1 = b.tensor(L.uniq(f"{name}.aff{kk}.scaled"), (s, w), "bf16")
            b.va(
                P.SCALE,
                w,
                src=(mix, lo, mw),
                dst=(t1, 0, w),
                scalar=int(to_bf16(scl[kk])),
                repeat=s,
                stage=stage,
            )
            t2 = b.tensor(L.uniq(f"{name}.aff{kk}"), (s, w), "bf16")
            b.va(P.ADD, w, src=(t1, 0, w), src2=(base_t, lo), dst=(t2, 0, w), repeat=s, stage=stage)
            return t2

        def sigmoid(z, stage):
            shape = b.shape(z)
            neg, e, e1, r = (b.tensor(L.uniq(f"{z}.{k}"), shape, "bf16") for k in ("neg", "exp", "p1", "sig"))
            b.elementwise(P.SCALE, z, neg, scalar=int(to_bf16(-1.0)), stage=stage)
            b.elementwise(P.EXP, neg, e, stage=stage)
            b.va(X.ADD_MEM, b.size(e), src=e, src2=L.scalar(1.0), dst=e1, stage=stage)
            b.elementwise(X.RECIP, e1, r, stage=stage)
            return r

        st_pre, st_post = f"{name}: pre (sigmoid)", f"{name}: post (2·sigmoid)"
        sp = sigmoid(affine(0, 0, n_hc, st_pre), st_pre)
        pre = b.tensor(f"{name}.pre", (s, n_hc), "bf16")
        b.va(X.ADD_MEM, s * n_hc, src=sp, src2=eps_t, dst=pre, stage=st_pre)
        sq = sigmoid(affine(1, n_hc, 2 * n_hc, st_post), st_post)
        post = b.tensor(f"{name}.post", (s, n_hc), "bf16")
        b.elementwise(P.SCALE, sq, post, scalar=int(to_bf16(2.0)), stage=st_post)
        names[st_pre], names[st_post] = pre, post

        stc = f"{name}: comb (softmax + Sinkhorn)"
        lg = affine(2, 2 * n_hc, 2 * n_hc + n_hc * n_hc, stc)
        sm = b.tensor(f"{name}.comb.sm", (s, n_hc, n_hc), "bf16")
        b.rows(P.SOFTMAX, lg, sm, n_hc, stc)
        comb = b.tensor(f"{name}.comb.0", (s, n_hc, n_hc), "bf16")
        b.va(X.ADD_MEM, s * n_hc * n_hc, src=sm, src2=eps_t, dst=comb, stage=stc)

        def normalize(cur, axis):
            nn = n_hc
            tot = b.tensor(L.uniq(f"{name}.tot"), (s, nn), "binary32")
            if axis == -2:  # sums over j of comb[t, j, k]: GATHER the columns first
                cols = b.tensor(L.uniq(f"{name}.cols"), (s, nn, nn), "bf16")
                for t in range(s):
                    b.va(
                        P.GATHER,
                        nn,
                        src=(cur, t * nn * nn, 1),
                        dst=(cols, t * nn * nn, nn),
                        stride=nn,
                        repeat=nn,
                        stage=stc,
                    )
                b.va(P.SUM, nn, src=(cols, 0, nn), dst=(tot, 0, 1), repeat=s * nn, stage=stc)
            else:
                b.va(P.SUM, nn, src=(cur, 0, nn), dst=(tot, 0, 1), repeat=s * nn, stage=stc)
            t16, te, inv = (
                b.tensor(L.uniq(f"{name}.{k}"), (s, nn), "bf16") for k in ("tot16", "tote", "inv")
            )
            b.elementwise(X.CVT_F32, tot, t16, stage=stc)
            b.va(X.ADD_MEM, s * nn, src=t16, src2=eps_t, dst=te, stage=stc)
            b.elementwise(X.RECIP, te, inv, stage=stc)
            out = b.tensor(L.uniq(f"{name}.comb"), (s, nn, nn), "bf16")
            if axis == -2:  # comb[t, j, k] · inv[t, k]: a MUL of each row j by inv's row t
                for t in range(s):
                    b.va(
                        P.MUL,
                        nn,
                        src=(cur, t * nn * nn, nn),
                        src2=(inv, t * nn),
                        dst=(out, t * nn * nn, nn),
                        repeat=nn,
                        stage=stc,
                    )
            else:
                b.va(
                    X.MUL_MEM,
                    nn,
                    src=(cur, 0, nn),
                    src2=(inv, 0, 1),
                    dst=(out, 0, nn),
                    repeat=s * nn,
                    stage=stc,
                )
            return out

        comb = normalize(comb, -2)
        for _ in range(c.hc_sinkhorn_iters - 1):
            comb = normalize(normalize(comb, -1), -2)
        names[stc] = comb

        coll = b.tensor(f"{name}.collapse", (s, dm), "bf16")
        tmp = b.tensor(f"{name}.collapse.tmp", (s, dm), "bf16")
        for j in range(n_hc):
            b.va(
                X.MUL_MEM,
                dm,
                src=(st, j * dm, n_hc * dm),
                src2=(pre, j, n_hc),
                dst=(tmp, 0, dm),
                repeat=s,
                stage=f"{name}: collapse",
            )
            b.elementwise(P.ADD, coll, coll, tmp, stage=f"{name}: collapse")
        names[f"{name}: collapse"] = coll
        return pre, post, comb, coll

    def hc_merge(name, st, out, w):
        _, post, comb, _ = w
        merged = b.tensor(f"{name}.merged", (s, n_hc, dm), "bf16")
        tmp = b.tensor(f"{name}.merge.tmp", (s, dm), "bf16")
        stage = f"{name}: merge"
        for k in range(n_hc):
            b.va(
                X.MUL_MEM,
                dm,
                src=(out, 0, dm),
                src2=(post, k, n_hc),
                dst=(merged, k * dm, n_hc * dm),
                repeat=s,
                stage=stage,
            )
            for j in range(n_hc):
                b.va(
                    X.MUL_MEM,
                    dm,
                    src=(st, j * dm, n_hc * dm),
                    src2=(comb, j * n_hc + k, n_hc * n_hc),
                    dst=(tmp, 0, dm),
                    repeat=s,
                    stage=stage,
                )
                b.va(
                    P.ADD,
                    dm,
                    src=(merged, k * dm, n_hc * dm),
                    src2=(tmp, 0, dm),
                    dst=(merged, k * dm, n_hc * dm),
                    repeat=s,
                    stage=stage,
                )
        names[stage] = merged
        return merged

    w = hc_weights(sb, "attn_hc")
    xb = L.rmsnorm(
        w[3], p("input_layernorm.weight"), eps, b.tensor("x", (s, dm), "bf16"), dm, "input RMSNorm"
    )
    names["input RMSNorm"] = xb
    att = attend(L, xb, names)
    mb = hc_merge("attn_hc", sb, att, w)
    w = hc_weights(mb, "ffn_hc")
    xm = L.rmsnorm(
        w[3],
        p("post_attention_layernorm.weight"),
        eps,
        b.tensor("xm", (s, dm), "bf16"),
        dm,
        "post-attention RMSNorm",
    )
    names["post-attention RMSNorm"] = xm
    moe = _moe(L, layer, xm, s, token_ids, names)
    ob = hc_merge("ffn_hc", mb, moe, w)
    names["layer output (all tokens)"] = names["layer output (tokens selecting and routing alike)"] = ob
    return names


def _pool(L, layer, kv, g, prev_kv, prev_g, groups, k_off, k_ld, p_off, p_ld, overlap, width, prefix, st):
    """Gated pooling of ``groups`` consecutive groups: group w's own series is rows
    ``k_off(w) + r·k_ld`` (r < rate) of ``kv`` / ``g`` from column ``width`` (overlap) or
    0, its previous series (overlap) rows ``p_off(w) + r·p_ld`` of ``prev_kv`` /
    ``prev_g``; returns the pooled rows ``(groups, width)``, bf16."""
    b, rate = L.b, layer.rate
    slots = 2 * rate if overlap else rate
    kvT = b.tensor(f"{prefix}.kvT", (groups, width, slots), "bf16")  # (group, channel, slot)
    gT = b.tensor(f"{prefix}.gateT", (groups, width, slots), "bf16")
    for w in range(groups):
        for src, prv, dst in ((kv, prev_kv, kvT), (g, prev_g, gT)):
            b.va(
                P.GATHER,
                rate,
                src=(src, k_off(w) + (width if overlap else 0), 1),
                dst=(dst, w * width * slots + (rate if overlap else 0), slots),
                stride=k_ld,
                repeat=width,
                stage=st,
            )
            if overlap:
                b.va(
                    P.GATHER,
                    rate,
                    src=(prv(w), p_off(w), 1),
                    dst=(dst, w * width * slots, slots),
                    stride=p_ld(w),
                    repeat=width,
                    stage=st,
                )
    wT = b.tensor(f"{prefix}.wT", (groups, width, slots), "bf16")
    b.rows(P.SOFTMAX, gT, wT, slots, st)
    prod = b.tensor(f"{prefix}.prod", (groups, width, slots), "bf16")
    b.elementwise(P.MUL, wT, prod, kvT, stage=st)
    acc = b.tensor(f"{prefix}.pooled.acc", (groups, width), "binary32")
    b.va(P.SUM, slots, src=(prod, 0, slots), dst=(acc, 0, 1), repeat=groups * width, stage=st)
    pooled = b.tensor(f"{prefix}.pooled", (groups, width), "bf16")
    b.elementwise(X.CVT_F32, acc, pooled, stage=st)
    return pooled


def _entries(L, layer, pooled, groups, first, prefix, width, name, names):
    """RMSNORM and RoPE (at each group's first position) of pooled rows."""
    b, p = L.b, layer.p
    st = f"{name}: entries (norm + RoPE)"
    ent = L.rmsnorm(
        pooled,
        p(f"{prefix}.kv_norm.weight"),
        layer.cfg.rms_norm_eps,
        b.tensor(f"{prefix}.entries", (groups, width), "bf16"),
        width,
        st,
    )
    L.rope_rows(
        ent, groups, 1, width, layer.rate * (first + np.arange(groups)), layer.inv_comp, layer.rope_scale, st
    )
    names[st] = ent
    return ent


def _comp_rows(L, layer, x, s, prefix, cols, st, place=0):
    """The compressor's kv and gate GEMMs of ``s`` rows, the gate plus the position bias
    of each row's place in its group (the first row at place ``place``; ``s`` = 1 unless
    ``place`` = 0)."""
    b, p, rate = L.b, layer.p, layer.rate
    dm = b.shape(x)[1]
    kv = L.mm(
        Operand(x),
        s,
        dm,
        dm,
        p(f"{prefix}.kv_proj.weight"),
        f"{prefix}.kv",
        b.tensor(f"{prefix}.kv", (s, cols), "bf16"),
        st,
    )
    g0 = L.mm(
        Operand(x),
        s,
        dm,
        dm,
        p(f"{prefix}.gate_proj.weight"),
        f"{prefix}.gate",
        b.tensor(f"{prefix}.gate.raw", (s, cols), "bf16"),
        st,
    )
    bias = b.cached(f"{prefix}.bias", to_bf16(p(f"{prefix}.position_bias")))
    g = b.tensor(f"{prefix}.gate", (s, cols), "bf16")
    if place:
        b.va(P.ADD, cols, src=g0, src2=(bias, place * cols), dst=g, stage=st)
        return kv, g
    n = s // rate
    if n:
        b.va(
            P.ADD,
            rate * cols,
            src=(g0, 0, rate * cols),
            src2=bias,
            dst=(g, 0, rate * cols),
            repeat=n,
            stage=st,
        )
    if s - n * rate:
        b.va(
            P.ADD,
            (s - n * rate) * cols,
            src=(g0, n * rate * cols),
            src2=bias,
            dst=(g, n * rate * cols),
            stage=st,
        )
    return kv, g


def _compress(L, layer, x, s, prefix, overlap, width, name, names, cs=None):
    """A compressor on all ``s`` rows of ``x``: its entries ``(n, width)`` and ``n``
    (None, 0 when no group is complete); with ``cs`` (a :class:`CompressorState`) the
    pending rows, the last group's first halves and the entries are written there."""
    b, rate = L.b, layer.rate
    n = s // rate
    cols = (2 if overlap else 1) * width
    st = f"{name}: gated pooling"
    kv, g = _comp_rows(L, layer, x, s, prefix, cols, st)
    ent = None
    if n:
        zero = ninf = None
        if overlap:  # group 0's previous series: kv +0, gate -inf
            zero = b.tensor(f"{prefix}.prev0.kv", (rate, width), "bf16")
            ninf = L.constant(f"neg_inf.{rate}x{width}", np.full(rate * width, NEG_INF, np.uint16))
        pooled = _pool(
            L,
            layer,
            kv,
            g,
            lambda w: kv if w else zero,
            lambda w: g if w else ninf,
            n,
            lambda w: w * rate * cols,
            cols,
            lambda w: (w - 1) * rate * cols if w else 0,
            lambda w: cols if w else width,
            overlap,
            width,
            prefix,
            st,
        )
        names[st] = pooled
        ent = _entries(L, layer, pooled, n, 0, prefix, width, name, names)
    if cs is not None:
        for t in range(n * rate, s):
            for src, dst in ((kv, cs.kv), (g, cs.gate)):
                b.va(
                    P.GATHER, cols, src=(src, t * cols), dst=(dst, (t % rate) * cols), stride=1, stage="state"
                )
        if n and overlap:
            for src, dst in ((kv, cs.prev_kv), (g, cs.prev_gate)):
                b.va(
                    P.GATHER,
                    width,
                    src=(src, (n - 1) * rate * cols, cols),
                    dst=(dst, 0, width),
                    stride=1,
                    repeat=rate,
                    stage="state",
                )
        if n:
            L.copy(ent, cs.entries, "state")
    return ent, n


def _qkv(L, layer, x, s, positions, names):
    """Query low-rank + norm, query heads (norm + RoPE), shared K = V (norm + RoPE)."""
    b, p, c = L.b, layer.p, layer.cfg
    h, d, eps = c.num_attention_heads, c.head_dim, c.rms_norm_eps
    dm, qr = b.shape(x)[1], c.q_lora_rank
    st = "query low-rank + RMSNorm"
    qa0 = L.mm(
        Operand(x), s, dm, dm, p("self_attn.q_a_proj.weight"), "q_a", b.tensor("qa.raw", (s, qr), "bf16"), st
    )
    qa = L.rmsnorm(qa0, p("self_attn.q_a_norm.weight"), eps, b.tensor("qa", (s, qr), "bf16"), qr, st)
    names[st] = qa
    st = "query (per-head norm + RoPE)"
    q0 = L.mm(
        Operand(qa),
        s,
        qr,
        qr,
        p("self_attn.q_b_proj.weight"),
        "q_b",
        b.tensor("q.raw", (s, h * d), "bf16"),
        st,
    )
    q = L.rmsnorm(q0, np.ones(d), eps, b.tensor("q", (s, h, d), "bf16"), d, st)
    L.rope_rows(q, s, h, d, positions, layer.inv_attn, layer.attn_scale, st)
    names[st] = q
    st = "shared K = V (norm + RoPE)"
    kv0 = L.mm(
        Operand(x), s, dm, dm, p("self_attn.kv_proj.weight"), "kv", b.tensor("kv.raw", (s, d), "bf16"), st
    )
    kv = L.rmsnorm(kv0, p("self_attn.kv_norm.weight"), eps, b.tensor("kv", (s, d), "bf16"), d, st)
    L.rope_rows(kv, s, 1, d, positions, layer.inv_attn, layer.attn_scale, st)
    names[st] = kv
    return qa, q, kv


def _attend(L, layer, q, t, pieces, ents, out, tag):
    """Attention of query row ``t`` of ``q`` (all heads) over the window keys ``pieces``
    (``(tensor, first row, rows)`` of K = V rows, in token order) and the compressed
    entries ``ents`` (``(operand, row stride, rows-as-keys, count)`` or None), with the
    sink; the result goes to row ``t`` of ``out``."""
    b, c = L.b, layer.cfg
    h, d = c.num_attention_heads, c.head_dim
    st = "attention (queries selecting alike)"
    nw = sum(pc[2] for pc in pieces)
    ne = ents[3] if ents else 0
    nk = nw + ne
    acc = b.tensor(f"attn.{tag}.sc.acc", (h, nk), "binary32")
    col = 0
    for kt, r0, rows in pieces:
        b.gemm(
            MaMode.BF16,
            Operand(q, t * h * d),
            Operand(kt, r0 * d),
            Operand(acc, col),
            h,
            d,
            rows,
            d,
            d,
            nk,
            b_transposed=True,
            stage=st,
        )
        col += rows
    if ne:
        b.gemm(
            MaMode.BF16,
            Operand(q, t * h * d),
            ents[0],
            Operand(acc, nw),
            h,
            d,
            ne,
            d,
            ents[1],
            nk,
            b_transposed=ents[2],
            stage=st,
        )
    raw = b.tensor(f"attn.{tag}.sc.raw", (h, nk), "bf16")
    b.elementwise(X.CVT_F32, acc, raw, stage=st)
    rows_t = b.tensor(f"attn.{tag}.rows", (h, nk + 1), "bf16")
    b.va(
        P.SCALE,
        nk,
        src=(raw, 0, nk),
        dst=(rows_t, 0, nk + 1),
        scalar=int(to_bf16(d**-0.5)),
        repeat=h,
        stage=st,
    )
    sinks = b.cached("sinks", to_bf16(layer.p("self_attn.sinks")))
    b.va(P.SCATTER, h, src=sinks, dst=(rows_t, nk), stride=nk + 1, stage=st)
    pr = b.tensor(f"attn.{tag}.p", (h, nk + 1), "bf16")
    b.rows(P.SOFTMAX, rows_t, pr, nk + 1, st)
    oacc = b.tensor(f"attn.{tag}.pv.acc", (h, d), "binary32")
    col = 0
    for i, (kt, r0, rows) in enumerate(pieces):
        b.gemm(
            MaMode.BF16,
            Operand(pr, col),
            Operand(kt, r0 * d),
            Operand(oacc),
            h,
            rows,
            d,
            nk + 1,
            d,
            d,
            accumulate=i > 0,
            stage=st,
        )
        col += rows
    if ne:
        b.gemm(
            MaMode.BF16,
            Operand(pr, nw),
            ents[0],
            Operand(oacc),
            h,
            ne,
            d,
            nk + 1,
            ents[1],
            d,
            accumulate=True,
            b_transposed=not ents[2],
            stage=st,
        )
    b.va(X.CVT_F32, h * d, src=oacc, dst=(out, t * h * d), stage=st)


def _selected(L, layer, entries, n_valid, sel, sel_off, ne, tag):
    """The ``ne`` entries picked by ``sel`` (int32 at ``sel_off``) as a (feature, entry)
    matrix: GATHER_IDX column by column. Returns the ``ents`` of :func:`_attend`."""
    b, d = L.b, layer.cfg.head_dim
    ent = b.tensor(f"attn.{tag}.entT", (d, ne), "bf16")
    b.va(
        P.GATHER_IDX,
        ne,
        src=(entries, 0, 1),
        src2=(sel, sel_off),
        dst=(ent, 0, ne),
        stride=d,
        index_limit=n_valid,
        repeat=d,
        stage="attention (queries selecting alike)",
    )
    return Operand(ent), ne, False, ne


def _attn_output(L, layer, out, s, positions, names):
    """Inverse RoPE, the grouped projection and ``o_b``."""
    b, p, c = L.b, layer.p, layer.cfg
    h, d = c.num_attention_heads, c.head_dim
    st = "output (inverse RoPE + grouped projection), selecting alike"
    inv = b.tensor("attn.unrot", (s, h, d), "bf16")
    L.copy(out, inv, st)
    L.rope_rows(inv, s, h, d, positions, layer.inv_attn, layer.attn_scale, st, inverse=True)
    g, r = c.o_groups, c.o_lora_rank
    wa = p("self_attn.o_a_proj.weight").reshape(g, r, -1)
    gw = h * d // g
    gacc = b.tensor("attn.grp.acc", (s, g * r), "binary32")
    for j in range(g):
        wt, _ = L.weight(f"o_a.{j}", wa[j], "bf16")
        b.gemm(
            MaMode.BF16,
            Operand(inv, j * gw),
            Operand(wt),
            Operand(gacc, j * r),
            s,
            gw,
            r,
            h * d,
            r,
            g * r,
            stage=st,
        )
    grp = b.tensor("attn.grp", (s, g * r), "bf16")
    b.elementwise(X.CVT_F32, gacc, grp, stage=st)
    dm = layer.p("self_attn.o_b_proj.weight").shape[0]
    o = L.mm(
        Operand(grp),
        s,
        g * r,
        g * r,
        p("self_attn.o_b_proj.weight"),
        "o_b",
        b.tensor("attn.out", (s, dm), "bf16"),
        st,
    )
    names[st] = o
    return o


def _attention(L, layer, x, s, names, state=None):
    """The attention block on all ``s`` rows (positions 0..s-1); with ``state`` the
    decode state is written at the end (window rows, compressor rows, entries)."""
    from .presets.deepseek_v4 import CSA, SWA

    b, c = L.b, layer.cfg
    h, d = c.num_attention_heads, c.head_dim
    pos = np.arange(s)
    qa, q, kv = _qkv(L, layer, x, s, pos, names)
    win = c.sliding_window
    entries, sel, n_ent = None, None, 0
    if layer.type != SWA:
        cs = state.compressor if state else None
        entries, n_ent = _compress(
            L, layer, x, s, "self_attn.compressor", layer.type == CSA, d, "compressor", names, cs
        )
        if layer.type == CSA:
            sel = _indexer(L, layer, x, qa, s, names, state.indexer if state else None)
    out = b.tensor("attn", (s, h, d), "bf16")
    for t in range(s):
        lo = max(0, t - win + 1)
        vis = (t + 1) // layer.rate if entries is not None else 0
        ents = None
        if vis and sel is not None:
            k = b.shape(sel)[1]
            ents = _selected(L, layer, entries, n_ent, sel, t * k, min(k, vis), t)
        elif vis:
            ents = (Operand(entries), d, True, vis)  # HCA: entries 0..vis-1, as rows
        _attend(L, layer, q, t, [(kv, lo, t + 1 - lo)], ents, out, t)
    names["attention (queries selecting alike)"] = out
    if state is not None:  # the last sliding_window - 1 rows of K = V, at row t mod window
        for t in range(max(0, s - win + 1), s):
            b.va(P.GATHER, d, src=(kv, t * d), dst=(state.window, (t % win) * d), stride=1, stage="state")
    return _attn_output(L, layer, out, s, pos, names)


def _index_scores(L, layer, x, qa, s, keys, n_keys, positions, names):
    """The indexer's scores ``(s, n_keys)`` of rows ``x`` / ``qa`` against entries
    0..n_keys-1 of ``keys``."""
    b, p, c = L.b, layer.p, layer.cfg
    pre = "self_attn.compressor.indexer"
    hi, di = c.index_n_heads, c.index_head_dim
    dm, qr = b.shape(x)[1], b.shape(qa)[1]
    st = "indexer scores"
    q = L.mm(
        Operand(qa),
        s,
        qr,
        qr,
        p(f"{pre}.q_b_proj.weight"),
        "idx.q",
        b.tensor("idx.q", (s, hi, di), "bf16"),
        st,
    )
    L.rope_rows(q, s, hi, di, positions, layer.inv_comp, layer.rope_scale, st)
    w0 = L.mm(
        Operand(x),
        s,
        dm,
        dm,
        p(f"{pre}.scorer.weights_proj.weight"),
        "idx.w",
        b.tensor("idx.w.raw", (s, hi), "bf16"),
        st,
    )
    w = b.tensor("idx.w", (s, hi), "bf16")
    b.elementwise(P.SCALE, w0, w, scalar=int(to_bf16(hi**-0.5)), stage=st)
    acc = b.tensor("idx.dots.acc", (s * hi, n_keys), "binary32")
    b.gemm(
        MaMode.BF16,
        Operand(q),
        Operand(keys),
        Operand(acc),
        s * hi,
        di,
        n_keys,
        di,
        di,
        n_keys,
        b_transposed=True,
        stage=st,
    )
    dots, relu, rs = (b.tensor(f"idx.{k}", (s, hi, n_keys), "bf16") for k in ("dots", "relu", "relu.s"))
    b.elementwise(X.CVT_F32, acc, dots, stage=st)
    b.elementwise(P.CLAMP, dots, relu, scalar=va.clamp_scalar(0x0000, 0x7F80), stage=st)
    b.elementwise(P.SCALE, relu, rs, scalar=int(to_bf16(di**-0.5)), stage=st)
    sc = b.tensor("idx.scores", (s, n_keys), "bf16")  # +0 in the image: the heads ADD into it
    tmp = b.tensor("idx.term", (s, n_keys), "bf16")
    for j in range(hi):
        b.va(
            X.MUL_MEM,
            n_keys,
            src=(rs, j * n_keys, hi * n_keys),
            src2=(w, j, hi),
            dst=(tmp, 0, n_keys),
            repeat=s,
            stage=st,
        )
        b.elementwise(P.ADD, sc, sc, tmp, stage=st)
    names[st] = sc
    return sc


def _topk_rows(L, x, s, n, k, st):
    b = L.b
    vals, sel = b.tensor("idx.top.v", (s, k), "bf16"), b.tensor("idx.top", (s, k), "int32")
    op = P.TOPK if k <= va.MAX_K else X.TOPK_WIDE
    b.va(op, n, src=(x, 0, n), dst=(vals, 0, k), dst2=(sel, 0, k), k=k, repeat=s, stage=st)
    return sel


def _indexer(L, layer, x, qa, s, names, cs=None):
    """The indexer on all ``s`` rows: its compressor, scores, and per row the top
    ``min(index_topk, entries)`` of the entries visible to it (the rest -inf first)."""
    c = layer.cfg
    pre = "self_attn.compressor.indexer"
    keys, n_ent = _compress(L, layer, x, s, pre, True, c.index_head_dim, "indexer compressor", names, cs)
    if not n_ent:
        return None
    sc = _index_scores(L, layer, x, qa, s, keys, n_ent, np.arange(s), names)
    st = "indexer scores"
    b = L.b
    masked = b.tensor("idx.masked", (s, n_ent), "bf16")
    L.copy(sc, masked, st)
    neg = L.constant("neg_inf", np.array([NEG_INF], np.uint16))
    for t in range(s):
        vis = (t + 1) // layer.rate
        if vis < n_ent:
            b.va(P.GATHER, n_ent - vis, src=neg, dst=(masked, t * n_ent + vis), stride=0, stage=st)
    return _topk_rows(L, masked, s, n_ent, min(c.index_topk, n_ent), st)


@dataclass(frozen=True)
class CompressorState:
    """A compressor's decode state (tensor names): the pending kv and (biased) gate rows
    of the incomplete group, token t at row ``t mod rate`` ``(rate, cols)``; the previous
    group's first halves ``prev_kv`` / ``prev_gate`` ``(rate, width)`` (overlapping
    compressors; before the first group kv +0, gate -inf); the emitted entries
    ``(capacity // rate, width)``, entry w at row w."""

    kv: str
    gate: str
    prev_kv: str
    prev_gate: str
    entries: str


@dataclass(frozen=True)
class Dsv4State:
    """The decode state of a ``deepseek-v4`` layer in a builder's memory: ``window`` the
    K = V rows of the last ``sliding_window`` tokens, token t at row ``t mod
    sliding_window``; ``compressor`` / ``indexer`` a :class:`CompressorState` (or None);
    ``capacity`` the number of tokens the entries have room for."""

    window: str
    compressor: CompressorState | None
    indexer: CompressorState | None
    capacity: int


def dsv4_state(builder, layer, capacity):
    """Allocate the decode state of ``layer`` for ``capacity`` tokens in ``builder``."""
    from .presets.deepseek_v4 import CSA, SWA

    b, c = builder, layer.cfg

    def comp(name, overlap, width):
        rate, cols = layer.rate, (2 if overlap else 1) * width
        t = lambda k, shape: b.tensor(f"{b.prefix}state.{name}.{k}", shape, "bf16", "state", shared=True)
        return CompressorState(
            t("kv", (rate, cols)),
            t("gate", (rate, cols)),
            t("prev_kv", (rate, width)),
            b.const(
                f"{b.prefix}state.{name}.prev_gate",
                np.full((rate, width), NEG_INF, np.uint16),
                role="state",
                shared=True,
            ),
            t("entries", (max(1, capacity // rate), width)),
        )

    window = b.tensor(f"{b.prefix}state.window", (c.sliding_window, c.head_dim), "bf16", "state", shared=True)
    cs = idx = None
    if layer.type != SWA:
        cs = comp("compressor", layer.type == CSA, c.head_dim)
        if layer.type == CSA:
            idx = comp("indexer", True, c.index_head_dim)
    return Dsv4State(window, cs, idx, capacity)


def _compress_step(L, layer, x, t, prefix, overlap, width, cs, name, names):
    """One token of a compressor: its kv / gate row into the pending rows; when it
    completes group ``w = t // rate``, the group's entry into row w of the entries and
    (overlap) the group's first halves into ``prev``."""
    b, rate = L.b, layer.rate
    cols = (2 if overlap else 1) * width
    st = f"{name}: gated pooling"
    r = t % rate
    kv, g = _comp_rows(L, layer, x, 1, prefix, cols, st, r)
    for src, dst in ((kv, cs.kv), (g, cs.gate)):
        b.va(P.GATHER, cols, src=src, dst=(dst, r * cols), stride=1, stage=st)
    if r != rate - 1:
        return
    w = t // rate
    pooled = _pool(
        L,
        layer,
        cs.kv,
        cs.gate,
        lambda _: cs.prev_kv,
        lambda _: cs.prev_gate,
        1,
        lambda _: 0,
        cols,
        lambda _: 0,
        lambda _: width,
        overlap,
        width,
        prefix,
        st,
    )
    names[st] = pooled
    ent = _entries(L, layer, pooled, 1, w, prefix, width, name, names)
    b.va(P.GATHER, width, src=ent, dst=(cs.entries, w * width), stride=1, stage="state")
    if overlap:
        for src, dst in ((cs.kv, cs.prev_kv), (cs.gate, cs.prev_gate)):
            b.va(
                P.GATHER, width, src=(src, 0, cols), dst=(dst, 0, width), stride=1, repeat=rate, stage="state"
            )


def _attention_step(L, layer, x, t, names, state):
    """The attention block for one token at position ``t`` from ``state``."""
    from .presets.deepseek_v4 import CSA, SWA

    b, c = L.b, layer.cfg
    h, d = c.num_attention_heads, c.head_dim
    win = c.sliding_window
    qa, q, kv = _qkv(L, layer, x, 1, np.array([t]), names)
    b.va(P.GATHER, d, src=kv, dst=(state.window, (t % win) * d), stride=1, stage="state")
    ents = None
    if layer.type != SWA:
        cs = state.compressor
        _compress_step(L, layer, x, t, "self_attn.compressor", layer.type == CSA, d, cs, "compressor", names)
        vis = (t + 1) // layer.rate
        if layer.type == CSA:
            ci = state.indexer
            pre = "self_attn.compressor.indexer"
            _compress_step(L, layer, x, t, pre, True, c.index_head_dim, ci, "indexer compressor", names)
            if vis:
                sc = _index_scores(L, layer, x, qa, 1, ci.entries, vis, np.array([t]), names)
                k = min(c.index_topk, vis)
                sel = _topk_rows(L, sc, 1, vis, k, "indexer scores")
                ents = _selected(L, layer, cs.entries, vis, sel, 0, k, "sel")
        elif vis:
            ents = (Operand(cs.entries), d, True, vis)
    lo = max(0, t - win + 1)
    a, e = lo % win, t % win  # the window's rows in the ring, oldest first
    pieces = (
        [(state.window, a, e + 1 - a)] if a <= e else [(state.window, a, win - a), (state.window, 0, e + 1)]
    )
    out = b.tensor("attn", (1, h, d), "bf16")
    _attend(L, layer, q, 0, pieces, ents, out, "step")
    names["attention (queries selecting alike)"] = out
    return _attn_output(L, layer, out, 1, np.array([t]), names)


def _moe(L, layer, x, s, token_ids, names):
    b, p, c = L.b, layer.p, layer.cfg
    dm = b.shape(x)[1]
    k, ne = c.num_experts_per_tok, c.n_routed_experts
    if k > va.MAX_K:
        raise ValueError(f"num_experts_per_tok = {k}: the VA's TOP-K keeps at most {va.MAX_K}")
    lg = L.mm(
        Operand(x),
        s,
        dm,
        dm,
        p("mlp.gate.weight"),
        "router",
        b.tensor("router.logits", (s, ne), "bf16"),
        "router logits",
    )
    names["router logits"] = lg
    st = "router scores (SOFTPLUS, SQRT)"
    sp, sc = b.tensor("router.sp", (s, ne), "bf16"), b.tensor("router.scores", (s, ne), "bf16")
    b.elementwise(P.SOFTPLUS, lg, sp, stage=st)
    b.elementwise(P.SQRT, sp, sc, stage=st)
    names[st] = sc
    idx = b.tensor("router.idx", (s, k), "int32")
    if layer.hash:
        st = "routing weights (tokens routed alike)"
        table = b.cached("tid2eid", np.asarray(p("mlp.gate.tid2eid"), np.int32), "int32", "weight")
        ids = b.const("token_ids", np.asarray(token_ids, np.int32), "int32", "input")
        idxT = b.tensor("router.idxT", (k, s), "int32")
        size = b.size(table)
        for j in range(k):
            b.va(
                P.GATHER_IDX,
                s,
                src=(table, j),
                src2=ids,
                dst=(idxT, j * s),
                stride=k,
                index_limit=(size - 1 - j) // k + 1,
                stage=st,
            )
        b.va(P.GATHER, k, src=(idxT, 0, 1), dst=(idx, 0, k), stride=s, repeat=s, stage=st)
    else:
        st = "router keys (bias ADD) + TOP-K"
        bias = b.cached("router.bias", to_bf16(p("mlp.gate.e_score_correction_bias")))
        key = b.tensor("router.keys", (s, ne), "bf16")
        b.rows(P.ADD, sc, key, ne, st, src2=Operand(bias))
        vals = b.tensor("router.top.v", (s, k), "bf16")
        b.va(P.TOPK, ne, src=(key, 0, ne), dst=(vals, 0, k), dst2=(idx, 0, k), k=k, repeat=s, stage=st)
        names[st] = key
    st = "routing weights (tokens routed alike)"
    sel = b.tensor("router.sel", (s, k), "bf16")
    b.va(
        P.GATHER_IDX,
        k,
        src=(sc, 0, ne),
        src2=(idx, 0, k),
        dst=(sel, 0, k),
        stride=1,
        index_limit=ne,
        repeat=s,
        stage=st,
    )
    tot, t16, inv = (
        b.tensor("router.sum", (s,), "binary32"),
        b.tensor("router.sum16", (s,), "bf16"),
        b.tensor("router.inv", (s,), "bf16"),
    )
    b.va(P.SUM, k, src=(sel, 0, k), dst=(tot, 0, 1), repeat=s, stage=st)
    b.elementwise(X.CVT_F32, tot, t16, stage=st)
    b.elementwise(X.RECIP, t16, inv, stage=st)
    w0, w = b.tensor("router.w0", (s, k), "bf16"), b.tensor("router.w", (s, k), "bf16")
    b.va(X.MUL_MEM, k, src=(sel, 0, k), src2=(inv, 0, 1), dst=(w0, 0, k), repeat=s, stage=st)
    b.elementwise(P.SCALE, w0, w, scalar=int(to_bf16(c.routed_scaling_factor)), stage=st)
    names[st] = w

    lim = int(to_bf16(c.swiglu_limit))

    def swiglu(xt, rows, wg, wu, wd, tag, stage):
        i = wg.shape[0]
        g0 = L.mm(
            Operand(xt), rows, dm, dm, wg, f"{tag}.gate", b.tensor(f"{tag}.g0", (rows, i), "bf16"), stage
        )
        u0 = L.mm(Operand(xt), rows, dm, dm, wu, f"{tag}.up", b.tensor(f"{tag}.u0", (rows, i), "bf16"), stage)
        g1, u1, sl, a = (b.tensor(f"{tag}.{n}", (rows, i), "bf16") for n in ("g", "u", "silu", "act"))
        b.elementwise(P.CLAMP, g0, g1, scalar=va.clamp_scalar(NEG_INF, lim), stage=stage)
        b.elementwise(P.CLAMP, u0, u1, scalar=va.clamp_scalar(lim ^ 0x8000, lim), stage=stage)
        b.elementwise(P.SILU, g1, sl, stage=stage)
        b.elementwise(P.MUL, sl, a, u1, stage=stage)
        return L.mm(
            Operand(a), rows, i, i, wd, f"{tag}.down", b.tensor(f"{tag}.y", (rows, dm), "bf16"), stage
        )

    st = "shared expert (clamped SwiGLU)"
    sh = swiglu(
        x, s, *[p(f"mlp.shared_experts.{n}_proj.weight") for n in ("gate", "up", "down")], "shared", st
    )
    names[st] = sh
    st = "MoE output (tokens routed alike)"
    i = c.moe_intermediate_size
    gu, dn = p("mlp.experts.gate_up_proj"), p("mlp.experts.down_proj")
    contrib = b.tensor("moe.contrib", (s, k, dm), "bf16")
    routes = b.read(idx)
    for e in np.unique(routes):
        tok, slot = np.nonzero(routes == e)
        xe = b.tensor(f"e{e}.x", (tok.size, dm), "bf16")
        for r, tk in enumerate(tok):
            b.va(P.GATHER, dm, src=(x, int(tk) * dm), dst=(xe, r * dm), stride=1, stage=st)
        y = swiglu(xe, tok.size, gu[e][:i], gu[e][i:], dn[e], f"e{e}", st)
        for r, (tk, sk) in enumerate(zip(tok, slot, strict=True)):
            b.va(
                X.MUL_MEM,
                dm,
                src=(y, r * dm),
                src2=(w, int(tk) * k + int(sk)),
                dst=(contrib, (int(tk) * k + int(sk)) * dm),
                stage=st,
            )
    out = b.tensor("moe.out", (s, dm), "bf16")
    for j in range(k):
        b.va(
            P.ADD,
            dm,
            src=(sh if j == 0 else out, 0, dm),
            src2=(contrib, j * dm, k * dm),
            dst=(out, 0, dm),
            repeat=s,
            stage=st,
        )
    names[st] = out
    return out
