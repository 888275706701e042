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

import numpy as np

from spec.codes import MaMode, VaOpcode

from . import va
from .program import BlockConfig, Builder, Operand, _Layer, to_bf16

__all__ = ["dsv4_layer_prefill"]

P = VaOpcode
X = va.ProposedVaOpcode
NEG_INF = 0xFF80


class _Dsv4(_Layer):
    def __init__(self, b, layer):
        super().__init__(b, "bf16")
        self.layer, self.cfg = layer, layer.cfg
        self._consts = {}
        self.n_tags = 0

    def uniq(self, stem):
        self.n_tags += 1
        return f"{stem}#{self.n_tags}"

    def constant(self, key, data):
        if key not in self._consts:
            self._consts[key] = self.b.const(f"c.{key}", data)
        return self._consts[key]

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


def dsv4_layer_prefill(layer, streams, token_ids, config=None, builder=None):
    """The program of ``layer`` (a :class:`golden.presets.deepseek_v4.DeepseekV4Layer`)
    on streams ``(S, hc_mult, D)`` float64 and ``token_ids`` (positions 0..S-1, empty
    state); ``config`` and ``builder`` as in :func:`golden.program.notes_prefill`.
    Returns ``(program, names)``: ``names`` maps each stage of
    :func:`golden.hwpath_dsv4.run_dsv4_layer` to its tensor."""
    from .presets.deepseek_v4 import CSA, SWA

    c = layer.cfg
    b = Builder(config or BlockConfig()) if builder is None else builder
    L = _Dsv4(b, layer)
    p = layer.p
    s, n_hc, dm = streams.shape
    eps = c.rms_norm_eps
    names = {}
    sb = b.const("streams", to_bf16(streams), role="input")

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
        base_t = b.const(f"{name}.base", to_bf16(base))
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
    att = _attention(L, layer, xb, s, names, CSA, SWA)
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
    return b.program(), names


def _compress(L, layer, x, s, prefix, overlap, width, name, names):
    """A compressor over the first ``n·rate`` rows of ``x``: its entries ``(n, width)``."""
    b, p = L.b, layer.p
    rate, eps = layer.rate, layer.cfg.rms_norm_eps
    n = s // rate
    dm = b.shape(x)[1]
    cols = (2 if overlap else 1) * width
    st = f"{name}: gated pooling"
    kv = L.mm(
        Operand(x),
        n * rate,
        dm,
        dm,
        p(f"{prefix}.kv_proj.weight"),
        f"{prefix}.kv",
        b.tensor(f"{prefix}.kv", (n * rate, cols), "bf16"),
        st,
    )
    g0 = L.mm(
        Operand(x),
        n * rate,
        dm,
        dm,
        p(f"{prefix}.gate_proj.weight"),
        f"{prefix}.gate",
        b.tensor(f"{prefix}.gate.raw", (n * rate, cols), "bf16"),
        st,
    )
    bias = b.const(f"{prefix}.bias", to_bf16(p(f"{prefix}.position_bias")))
    g = b.tensor(f"{prefix}.gate", (n * rate, cols), "bf16")
    b.va(P.ADD, rate * cols, src=(g0, 0, rate * cols), src2=bias, dst=(g, 0, rate * cols), repeat=n, stage=st)
    slots = 2 * rate if overlap else rate
    kvT = b.tensor(f"{prefix}.kvT", (n, width, slots), "bf16")  # (group, channel, slot)
    gT = b.tensor(f"{prefix}.gateT", (n, width, slots), "bf16")
    neg = L.constant("neg_inf", np.array([NEG_INF], np.uint16))
    for w in range(n):
        second = rate if overlap else 0  # the group's own series
        for src, dst in ((kv, kvT), (g, gT)):
            b.va(
                P.GATHER,
                rate,
                src=(src, w * rate * cols + (width if overlap else 0), 1),
                dst=(dst, w * width * slots + second, slots),
                stride=cols,
                repeat=width,
                stage=st,
            )
            if overlap and w:
                b.va(
                    P.GATHER,
                    rate,
                    src=(src, (w - 1) * rate * cols, 1),
                    dst=(dst, w * width * slots, slots),
                    stride=cols,
                    repeat=width,
                    stage=st,
                )
        if overlap and not w:  # group 0 has no previous series: weight -inf (its kv stays +0)
            b.va(P.GATHER, rate, src=neg, dst=(gT, 0, slots), stride=0, repeat=width, stage=st)
    wT = b.tensor(f"{prefix}.wT", (n, width, slots), "bf16")
    b.rows(P.SOFTMAX, gT, wT, slots, st)
    prod = b.tensor(f"{prefix}.prod", (n, width, slots), "bf16")
    b.elementwise(P.MUL, wT, prod, kvT, stage=st)
    acc = b.tensor(f"{prefix}.pooled.acc", (n, width), "binary32")
    b.va(P.SUM, slots, src=(prod, 0, slots), dst=(acc, 0, 1), repeat=n * width, stage=st)
    pooled = b.tensor(f"{prefix}.pooled", (n, width), "bf16")
    b.elementwise(X.CVT_F32, acc, pooled, stage=st)
    names[st] = pooled
    st = f"{name}: entries (norm + RoPE)"
    ent = L.rmsnorm(
        pooled,
        p(f"{prefix}.kv_norm.weight"),
        eps,
        b.tensor(f"{prefix}.entries", (n, width), "bf16"),
        width,
        st,
    )
    L.rope_rows(ent, n, 1, width, rate * np.arange(n), layer.inv_comp, layer.rope_scale, st)
    names[st] = ent
    return ent, n


def _attention(L, layer, x, s, names, CSA, SWA):
    b, p, c = L.b, layer.p, layer.cfg
    h, d, eps = c.num_attention_heads, c.head_dim, c.rms_norm_eps
    dm = b.shape(x)[1]
    pos = np.arange(s)
    st = "query low-rank + RMSNorm"
    qr = c.q_lora_rank
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
    L.rope_rows(q, s, h, d, pos, layer.inv_attn, layer.attn_scale, st)
    names[st] = q
    st = "shared K = V (norm + RoPE)"
    kv0 = L.mm(
        Operand(x), s, dm, dm, p("self_attn.kv_proj.weight"), "kv", b.tensor("kv.raw", (s, d), "bf16"), st
    )
    kv = L.rmsnorm(kv0, p("self_attn.kv_norm.weight"), eps, b.tensor("kv", (s, d), "bf16"), d, st)
    L.rope_rows(kv, s, 1, d, pos, layer.inv_attn, layer.attn_scale, st)
    names[st] = kv

    win = c.sliding_window
    entries, sel, n_ent = None, None, 0
    if layer.type != SWA:
        entries, n_ent = _compress(
            L, layer, x, s, "self_attn.compressor", layer.type == CSA, d, "compressor", names
        )
        if layer.type == CSA:
            sel = _indexer(L, layer, x, qa, s, n_ent, names)
    scale = int(to_bf16(d**-0.5))
    sinks = b.const("sinks", to_bf16(p("self_attn.sinks")))
    out = b.tensor("attn", (s, h, d), "bf16")
    st = "attention (queries selecting alike)"
    for t in range(s):
        lo = max(0, t - win + 1)
        nw = t + 1 - lo
        vis = (t + 1) // layer.rate if entries is not None else 0
        ne = 0 if entries is None else (min(c.index_topk, n_ent, vis) if sel is not None else vis)
        nk = nw + ne
        if ne and sel is not None:  # the selected entries, as a (feature, entry) matrix
            ent = b.tensor(f"attn.{t}.entT", (d, ne), "bf16")
            b.va(
                P.GATHER_IDX,
                ne,
                src=(entries, 0, 1),
                src2=(sel, t * b.shape(sel)[1]),
                dst=(ent, 0, ne),
                stride=d,
                index_limit=n_ent,
                repeat=d,
                stage=st,
            )
            ent_op, ent_ld, ent_t = Operand(ent), ne, False
        else:
            ent_op, ent_ld, ent_t = Operand(entries), d, True  # entries 0..vis-1, rows
        acc = b.tensor(f"attn.{t}.sc.acc", (h, nk), "binary32")
        b.gemm(
            MaMode.BF16,
            Operand(q, t * h * d),
            Operand(kv, lo * d),
            Operand(acc),
            h,
            d,
            nw,
            d,
            d,
            nk,
            b_transposed=True,
            stage=st,
        )
        if ne:
            b.gemm(
                MaMode.BF16,
                Operand(q, t * h * d),
                ent_op,
                Operand(acc, nw),
                h,
                d,
                ne,
                d,
                ent_ld,
                nk,
                b_transposed=ent_t,
                stage=st,
            )
        raw = b.tensor(f"attn.{t}.sc.raw", (h, nk), "bf16")
        b.elementwise(X.CVT_F32, acc, raw, stage=st)
        rows = b.tensor(f"attn.{t}.rows", (h, nk + 1), "bf16")
        b.va(P.SCALE, nk, src=(raw, 0, nk), dst=(rows, 0, nk + 1), scalar=scale, repeat=h, stage=st)
        b.va(P.SCATTER, h, src=sinks, dst=(rows, nk), stride=nk + 1, stage=st)
        pr = b.tensor(f"attn.{t}.p", (h, nk + 1), "bf16")
        b.rows(P.SOFTMAX, rows, pr, nk + 1, st)
        oacc = b.tensor(f"attn.{t}.pv.acc", (h, d), "binary32")
        b.gemm(MaMode.BF16, Operand(pr), Operand(kv, lo * d), Operand(oacc), h, nw, d, nk + 1, d, d, stage=st)
        if ne:
            b.gemm(
                MaMode.BF16,
                Operand(pr, nw),
                ent_op,
                Operand(oacc),
                h,
                ne,
                d,
                nk + 1,
                ent_ld,
                d,
                accumulate=True,
                b_transposed=not ent_t,
                stage=st,
            )
        b.va(X.CVT_F32, h * d, src=oacc, dst=(out, t * h * d), stage=st)
    names[st] = out
    st = "output (inverse RoPE + grouped projection), selecting alike"
    inv = b.tensor("attn.unrot", (s, h, d), "bf16")
    L.copy(out, inv, st)
    L.rope_rows(inv, s, h, d, pos, layer.inv_attn, layer.attn_scale, st, inverse=True)
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


def _indexer(L, layer, x, qa, s, n_ent, names):
    b, p, c = L.b, layer.p, layer.cfg
    pre = "self_attn.compressor.indexer"
    hi, di = c.index_n_heads, c.index_head_dim
    dm, qr = b.shape(x)[1], b.shape(qa)[1]
    keys, _ = _compress(L, layer, x, s, pre, True, di, "indexer compressor", names)
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
    L.rope_rows(q, s, hi, di, np.arange(s), layer.inv_comp, layer.rope_scale, st)
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
    acc = b.tensor("idx.dots.acc", (s * hi, n_ent), "binary32")
    b.gemm(
        MaMode.BF16,
        Operand(q),
        Operand(keys),
        Operand(acc),
        s * hi,
        di,
        n_ent,
        di,
        di,
        n_ent,
        b_transposed=True,
        stage=st,
    )
    dots, relu, rs = (b.tensor(f"idx.{k}", (s, hi, n_ent), "bf16") for k in ("dots", "relu", "relu.s"))
    b.elementwise(X.CVT_F32, acc, dots, stage=st)
    b.elementwise(P.CLAMP, dots, relu, scalar=va.clamp_scalar(0x0000, 0x7F80), stage=st)
    b.elementwise(P.SCALE, relu, rs, scalar=int(to_bf16(di**-0.5)), stage=st)
    sc = b.tensor("idx.scores", (s, n_ent), "bf16")  # +0 in the image: the heads ADD into it
    tmp = b.tensor("idx.term", (s, n_ent), "bf16")
    for j in range(hi):
        b.va(
            X.MUL_MEM,
            n_ent,
            src=(rs, j * n_ent, hi * n_ent),
            src2=(w, j, hi),
            dst=(tmp, 0, n_ent),
            repeat=s,
            stage=st,
        )
        b.elementwise(P.ADD, sc, sc, tmp, stage=st)
    names[st] = sc
    k = min(c.index_topk, n_ent)
    masked = b.tensor("idx.masked", (s, n_ent), "bf16")
    L.copy(sc, masked, st)
    neg = L.constant("neg_inf", np.array([NEG_INF], np.uint16))
    for t in range(s):
        vis = (t + 1) // layer.rate
        if vis < n_ent:
            b.va(P.GATHER, n_ent - vis, src=neg, dst=(masked, t * n_ent + vis), stride=0, stage=st)
    vals, sel = b.tensor("idx.top.v", (s, k), "bf16"), b.tensor("idx.top", (s, k), "int32")
    op = P.TOPK if k <= va.MAX_K else X.TOPK_WIDE
    b.va(op, n_ent, src=(masked, 0, n_ent), dst=(vals, 0, k), dst2=(sel, 0, k), k=k, repeat=s, stage=st)
    return sel


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
        table = b.const("tid2eid", np.asarray(p("mlp.gate.tid2eid"), np.int32), "int32", "weight")
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
        bias = b.const("router.bias", to_bf16(p("mlp.gate.e_score_correction_bias")))
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
