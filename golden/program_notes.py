"""The program of a ``notes`` layer (:class:`golden.presets.notes.NotesLayer`): the
prefill of S tokens, the sequence of :func:`golden.hwpath.run_notes_layer` as MA / VA
commands, and its decode form (see :mod:`golden.program` and ``docs/golden/program.md``).
"""

from dataclasses import dataclass

import numpy as np

from spec.codes import MaMode, VaOpcode

from .program import BlockConfig, Builder, Operand, Program, _Layer, to_bf16

__all__ = ["notes_prefill", "notes_stage_bits", "notes_state", "notes_decode_step", "NotesState"]

P = VaOpcode
X = VaOpcode


@dataclass(frozen=True)
class NotesState:
    """The decode state of a ``notes`` layer in a builder's memory (tensor names, bf16):
    ``keys`` / ``values`` the K (RoPE applied) and V rows of every token so far,
    ``(capacity, num_kv_heads·head_dim)``, token t at row t; ``sum_keys`` /
    ``sum_values`` ``(hca_chunks, num_kv_heads·head_dim)`` the HCA summaries of the
    current refresh anchor's chunks, newest first (valid rows: the anchor's chunk count)."""

    keys: str
    values: str
    sum_keys: str
    sum_values: str
    capacity: int


def notes_state(builder, layer, capacity):
    """Allocate the decode state of ``layer`` for ``capacity`` tokens in ``builder``."""
    c = layer.cfg
    kvw = c.num_kv_heads * c.head_dim
    pre = builder.prefix

    def t(k, rows):
        return builder.tensor(f"{pre}state.{k}", (rows, kvw), "bf16", "state", shared=True)

    return NotesState(
        t("keys", capacity),
        t("values", capacity),
        t("sum_keys", max(1, c.hca_chunks)),
        t("sum_values", max(1, c.hca_chunks)),
        capacity,
    )


def _qkv(L, layer, xt, s, positions, names):
    c = layer.cfg
    b, p = L.b, layer.p
    h, hk, d, dm = c.num_heads, c.num_kv_heads, c.head_dim, b.shape(xt)[1]
    from .attn.primitives import rope_angles

    n = L.rmsnorm(
        xt, p("input_layernorm.weight"), c.rms_norm_eps, b.tensor("n", (s, dm), "bf16"), dm, "input RMSNorm"
    )
    names["input RMSNorm"] = n
    proj = {}
    for name, heads in (("q", h), ("k", hk), ("v", hk)):
        proj[name] = L.matmul(
            n,
            p(f"attn.{name}_proj.weight"),
            f"{name}_proj",
            b.tensor(name, (s, heads * d), "bf16"),
            f"{name} projection",
        )
        names[f"{name} projection"] = proj[name]
    ang = rope_angles(np.asarray(positions), layer.inv)
    key = f"rope.{positions[0]}.{positions[-1]}.{len(positions)}"
    cos_t, sin_t = b.cached(key + ".cos", to_bf16(np.cos(ang))), b.cached(key + ".sin", to_bf16(np.sin(ang)))
    for name, heads in (("q", h), ("k", hk)):
        out = b.tensor(f"{name}r", (s, heads * d), "bf16")
        for t in range(s):
            b.va(
                P.ROPE,
                d,
                src=(proj[name], t * heads * d, d),
                src2=(cos_t, t * (d // 2)),
                src3=(sin_t, t * (d // 2)),
                dst=(out, t * heads * d, d),
                split_half=True,
                repeat=heads,
                stage=f"RoPE {name}",
            )
        names[f"RoPE {name}"] = out
    return names["RoPE q"], names["RoPE k"], proj["v"]


def _summary(L, kt, vt, lo, hi, kvw, out_k, out_v, tag):
    """Column means of rows lo..hi of ``kt`` and ``vt``: GATHER each column, SUM, CVT_F32,
    SCALE by bf16(1/n) (``hwpath.va_mean_rows``), into operands ``out_k`` / ``out_v``."""
    b = L.b
    cnt = hi - lo
    inv = int(to_bf16(1.0 / cnt))
    for src, dst, kind in ((kt, out_k, "k"), (vt, out_v, "v")):
        col = b.tensor(f"hca.{tag}.{kind}.cols", (kvw, cnt), "bf16")
        acc = b.tensor(f"hca.{tag}.{kind}.sum", (kvw,), "binary32")
        tmp = b.tensor(f"hca.{tag}.{kind}.sum16", (kvw,), "bf16")
        st = "HCA summaries"
        b.va(P.GATHER, cnt, src=(src, lo * kvw, 1), dst=(col, 0, cnt), stride=kvw, repeat=kvw, stage=st)
        b.va(P.SUM, cnt, src=(col, 0, cnt), dst=(acc, 0, 1), repeat=kvw, stage=st)
        b.elementwise(X.CVT_F32, acc, tmp, stage=st)
        b.va(P.SCALE, kvw, src=tmp, dst=dst, scalar=inv, stage=st)


def _attend(L, layer, qr, row, t, kpieces, vpieces, n_chunks, attn, tag, lists):
    """Attention of query row ``row`` of ``qr`` (position ``t``) over the key pieces
    ``kpieces`` / value pieces ``vpieces`` (``(tensor, first row, rows)`` in order: SWA
    windows, summaries, CSA range) into row ``row`` of ``attn``."""
    b, c = L.b, layer.cfg
    h, hk, d = c.num_heads, c.num_kv_heads, c.head_dim
    g, kvw = h // hk, hk * d
    from .presets.notes import tier_ranges

    windows, chunks, _ = tier_ranges(t, c)
    nk = sum(pc[2] for pc in kpieces)
    lens = np.array([hi - lo for lo, hi in chunks], np.float64)
    n_swa = sum(hi - lo for lo, hi in windows)
    bias_v = np.concatenate([np.zeros(n_swa), np.log(lens), np.zeros(nk - n_swa - len(chunks))])
    bias = b.cached(f"bias.{t}", to_bf16(bias_v))
    scale = int(to_bf16(d**-0.5))
    for j in range(hk):
        tg = f"{tag}.{j}"
        acc = b.tensor(f"sc.{tg}.acc", (g, nk), "binary32")
        col = 0
        for kt, r0, rows in kpieces:
            b.gemm(
                MaMode.BF16,
                Operand(qr, (row * h + j * g) * d),
                Operand(kt, r0 * kvw + j * d),
                Operand(acc, col),
                g,
                d,
                rows,
                d,
                kvw,
                nk,
                b_transposed=True,
                stage="attention scores",
            )
            col += rows
        sc16 = b.tensor(f"sc.{tg}.raw", (g, nk), "bf16")
        b.elementwise(X.CVT_F32, acc, sc16, stage="attention scores")
        scl = b.tensor(f"sc.{tg}.scaled", (g, nk), "bf16")
        b.elementwise(P.SCALE, sc16, scl, scalar=scale, stage="attention scores")
        sc = b.tensor(f"sc.{tg}", (g, nk), "bf16")
        b.rows(P.ADD, scl, sc, nk, "attention scores", src2=Operand(bias))
        pb = b.tensor(f"p.{tg}", (g, nk), "bf16")
        b.rows(P.SOFTMAX, sc, pb, nk, "attention softmax")
        lists["scores"].append(sc)
        lists["softmax"].append(pb)
        oacc = b.tensor(f"pv.{tg}.acc", (g, d), "binary32")
        col = 0
        for i, (vt, r0, rows) in enumerate(vpieces):
            b.gemm(
                MaMode.BF16,
                Operand(pb, col),
                Operand(vt, r0 * kvw + j * d),
                Operand(oacc),
                g,
                rows,
                d,
                nk,
                kvw,
                d,
                accumulate=i > 0,
                stage="attention P·V",
            )
            col += rows
        b.va(X.CVT_F32, g * d, src=oacc, dst=(attn, (row * h + j * g) * d), stage="attention P·V")


def _pieces(t, c, kt, vt, sums):
    """Key / value pieces of position ``t``: windows and CSA range from ``kt`` / ``vt``
    rows, summaries from ``sums`` (a list of (key tensor, row, value tensor, row))."""
    from .presets.notes import tier_ranges

    windows, chunks, csa = tier_ranges(t, c)
    kp = [(kt, lo, hi - lo) for lo, hi in windows] + [(sk, r, 1) for sk, r, _, _ in sums]
    vp = [(vt, lo, hi - lo) for lo, hi in windows] + [(sv, r, 1) for _, _, sv, r in sums]
    kp.append((kt, csa[0][0], csa[0][1] - csa[0][0]))
    vp.append((vt, csa[0][0], csa[0][1] - csa[0][0]))
    return kp, vp


def _tail(L, layer, xt, attn, s, positions, names):
    """Output projection, residual, MoE and the layer output of ``s`` rows."""
    from .presets.notes import sinusoid

    b, p, c = L.b, layer.p, layer.cfg
    dm = b.shape(xt)[1]
    eps = c.rms_norm_eps
    o = L.matmul(attn, p("attn.o_proj.weight"), "o_proj", b.tensor("o", (s, dm), "bf16"), "output projection")
    h1 = b.tensor("h1", (s, dm), "bf16")
    b.elementwise(P.ADD, xt, h1, o, stage="attention residual")
    names["output projection"], names["attention residual"] = o, h1
    mb = L.rmsnorm(
        h1,
        p("post_attention_layernorm.weight"),
        eps,
        b.tensor("m", (s, dm), "bf16"),
        dm,
        "post-attention RMSNorm",
    )
    names["post-attention RMSNorm"] = mb
    ne, k1, k2 = c.n_experts, c.primary_topk, c.final_topk
    lg = L.matmul(mb, p("mlp.gate.weight"), "gate", b.tensor("logits", (s, ne), "bf16"), "router logits")
    sb = b.tensor("router", (s, ne), "bf16")
    b.rows(P.SOFTMAX, lg, sb, ne, "router softmax + top-k")
    names["router logits"], names["router softmax + top-k"] = lg, sb
    cand_v, cand = b.tensor("cand.v", (s, k1), "bf16"), b.tensor("cand", (s, k1), "int32")
    b.va(
        P.TOPK,
        ne,
        src=(sb, 0, ne),
        dst=(cand_v, 0, k1),
        dst2=(cand, 0, k1),
        k=k1,
        repeat=s,
        stage="router softmax + top-k",
    )
    first = p("mlp.experts.gate_up_proj")[:, 0, :]
    code = b.const("poscode", to_bf16(sinusoid(np.asarray(positions), dm)))
    st = "secondary score + final top-k"
    sec = L.matmul(code, first, "first", b.tensor("secondary", (s, ne), "bf16"), st, mode="bf16")
    names[st] = sec
    csel = b.tensor("cand.sec", (s, k1), "bf16")
    b.va(
        P.GATHER_IDX,
        k1,
        src=(sec, 0, ne),
        src2=(cand, 0, k1),
        dst=(csel, 0, k1),
        stride=1,
        index_limit=ne,
        repeat=s,
        stage=st,
    )
    fv, fpos = b.tensor("final.v", (s, k2), "bf16"), b.tensor("final.pos", (s, k2), "int32")
    b.va(P.TOPK, k1, src=(csel, 0, k1), dst=(fv, 0, k2), dst2=(fpos, 0, k2), k=k2, repeat=s, stage=st)
    fin = b.tensor("final", (s, k2), "int32")
    b.va(
        P.GATHER_IDX,
        k2,
        src=(cand, 0, k1),
        src2=(fpos, 0, k2),
        dst=(fin, 0, k2),
        stride=1,
        index_limit=k1,
        repeat=s,
        stage=st,
    )
    st = "final weights"
    wsel = b.tensor("wsel", (s, k2), "bf16")
    b.va(
        P.GATHER_IDX,
        k2,
        src=(sb, 0, ne),
        src2=(fin, 0, k2),
        dst=(wsel, 0, k2),
        stride=1,
        index_limit=ne,
        repeat=s,
        stage=st,
    )
    tot, tot16, inv = (
        b.tensor("wsum", (s,), "binary32"),
        b.tensor("wsum16", (s,), "bf16"),
        b.tensor("wsum.inv", (s,), "bf16"),
    )
    b.va(P.SUM, k2, src=(wsel, 0, k2), dst=(tot, 0, 1), repeat=s, stage=st)
    b.elementwise(X.CVT_F32, tot, tot16, stage=st)
    b.elementwise(X.RECIP, tot16, inv, stage=st)
    wts = b.tensor("weights", (s, k2), "bf16")
    b.va(X.MUL_MEM, k2, src=(wsel, 0, k2), src2=(inv, 0, 1), dst=(wts, 0, k2), repeat=s, stage=st)

    i = c.moe_intermediate_size
    gu, dn = p("mlp.experts.gate_up_proj"), p("mlp.experts.down_proj")
    moe = b.tensor("moe", (s, dm), "bf16")  # zero in the image: the experts ADD into it
    routes = b.read(fin)
    for e in np.unique(routes):
        tok, slot = np.nonzero(routes == e)
        ne_t = tok.size
        xe = b.tensor(f"e{e}.x", (ne_t, dm), "bf16")
        for r, tk in enumerate(tok):
            b.va(P.GATHER, dm, src=(mb, int(tk) * dm), dst=(xe, r * dm), stride=1, stage="experts")
        gt = L.matmul(xe, gu[e][:i], f"e{e}.gate", b.tensor(f"e{e}.g", (ne_t, i), "bf16"), "experts")
        up = L.matmul(xe, gu[e][i:], f"e{e}.up", b.tensor(f"e{e}.u", (ne_t, i), "bf16"), "experts")
        sl = b.tensor(f"e{e}.silu", (ne_t, i), "bf16")
        b.elementwise(P.SILU, gt, sl, stage="experts")
        act = b.tensor(f"e{e}.act", (ne_t, i), "bf16")
        b.elementwise(P.MUL, sl, act, up, stage="experts")
        y = L.matmul(act, dn[e], f"e{e}.down", b.tensor(f"e{e}.y", (ne_t, dm), "bf16"), "experts")
        yw = b.tensor(f"e{e}.yw", (ne_t, dm), "bf16")
        for r, (tk, sk) in enumerate(zip(tok, slot, strict=True)):
            b.va(
                X.MUL_MEM,
                dm,
                src=(y, r * dm),
                src2=(wts, int(tk) * k2 + int(sk)),
                dst=(yw, r * dm),
                stage="experts",
            )
            b.va(
                P.ADD,
                dm,
                src=(moe, int(tk) * dm),
                src2=(yw, r * dm),
                dst=(moe, int(tk) * dm),
                stage="experts",
            )
    out = b.tensor("out", (s, dm), "bf16")
    b.elementwise(P.ADD, h1, out, moe, stage="layer output")
    names["MoE output (tokens routed alike)"], names["layer output (tokens routed alike)"] = moe, out
    return out


def notes_prefill(layer, x, config=None, mode="bf16", builder=None, state=None):
    """The program of ``layer`` on ``x`` ``(S, D)`` float64 (positions 0..S-1, empty
    cache), the sequence of :func:`golden.hwpath.run_notes_layer`, for ``config`` (a
    :class:`golden.program.BlockConfig`, the default one if None), emitted into
    ``builder`` (a new :class:`golden.program.Builder` if None; its machine then holds
    every result); with ``state`` (a :class:`NotesState` of the same builder) the decode
    state after the S tokens is written into it. Returns ``(program, names)``: ``names``
    maps each stage to its tensor (see :func:`notes_stage_bits`)."""
    from .presets.notes import tier_ranges

    c = layer.cfg
    s, dm = x.shape
    b = Builder(config or BlockConfig()) if builder is None else builder
    L = _Layer(b, mode)
    xt = b.const("x", to_bf16(x), role="input")
    names = {"x": xt}
    qr, kr, v = _qkv(L, layer, xt, s, np.arange(s), names)
    kvw = c.num_kv_heads * c.head_dim
    summaries = {}
    lists = {"summaries": [], "scores": [], "softmax": []}
    attn = b.tensor("attn", (s, c.num_heads * c.head_dim), "bf16")
    for t in range(s):
        _, chunks, _ = tier_ranges(t, c)
        for lo, hi in chunks:
            if (lo, hi) not in summaries:
                sk = b.tensor(f"hca.kr.{lo}.{hi}", (1, kvw), "bf16")
                sv = b.tensor(f"hca.v.{lo}.{hi}", (1, kvw), "bf16")
                _summary(L, kr, v, lo, hi, kvw, sk, sv, f"{lo}.{hi}")
                summaries[lo, hi] = (sk, sv)
        sums = [summaries[ch] for ch in chunks]
        if chunks:
            lists["summaries"].append([sk for sk, _ in sums] + [sv for _, sv in sums])
        kp, vp = _pieces(t, c, kr, v, [(sk, 0, sv, 0) for sk, sv in sums])
        _attend(L, layer, qr, t, t, kp, vp, len(chunks), attn, str(t), lists)
    names.update({f"list.{k}": val for k, val in lists.items()})
    names["attention P·V"] = attn
    out = _tail(L, layer, xt, attn, s, np.arange(s), names)
    if state is not None:
        if s > state.capacity:
            raise ValueError(f"{s} tokens exceed the state's capacity of {state.capacity}")
        for src, dst in ((kr, state.keys), (v, state.values)):
            b.va(P.GATHER, s * kvw, src=src, dst=dst, stride=1, stage="state")
        _, chunks, _ = tier_ranges(s - 1, c)
        for j, ch in enumerate(chunks):
            for src, dst in zip(summaries[ch], (state.sum_keys, state.sum_values), strict=True):
                b.va(P.GATHER, kvw, src=src, dst=(dst, j * kvw), stride=1, stage="state")
    names["layer output"] = out
    return b.program(), names


def notes_decode_step(layer, state, x_row, t, builder, mode="bf16"):
    """One decode step: the token at position ``t`` with input ``x_row`` ``(D,)``, from
    ``state`` (tokens 0..t-1 done), emitted into ``builder`` (the one holding
    ``state``). The HCA summaries are recomputed from the cache when ``t`` starts a new
    refresh anchor (``t mod refresh = 0``). Returns ``(step, names)`` as
    :func:`golden.program_dsv4.dsv4_decode_step` does (the output under "layer
    output")."""
    from .presets.notes import tier_ranges

    c = layer.cfg
    if t >= state.capacity:
        raise ValueError(f"position {t} is beyond the state's capacity of {state.capacity} tokens")
    b = builder
    start = len(b.commands)
    outer = b.prefix
    b.prefix = f"{outer}d{t}."
    try:
        L = _Layer(b, mode)
        xt = b.const("x", to_bf16(np.asarray(x_row)[None]), role="input")
        names = {"x": xt}
        qr, kr, v = _qkv(L, layer, xt, 1, np.array([t]), names)
        kvw = c.num_kv_heads * c.head_dim
        for src, dst in ((kr, state.keys), (v, state.values)):
            b.va(P.GATHER, kvw, src=src, dst=(dst, t * kvw), stride=1, stage="state")
        _, chunks, _ = tier_ranges(t, c)
        if t % c.refresh == 0:
            for j, (lo, hi) in enumerate(chunks):
                _summary(
                    L,
                    state.keys,
                    state.values,
                    lo,
                    hi,
                    kvw,
                    (state.sum_keys, j * kvw),
                    (state.sum_values, j * kvw),
                    f"{lo}.{hi}",
                )
        sums = [(state.sum_keys, j, state.sum_values, j) for j in range(len(chunks))]
        kp, vp = _pieces(t, c, state.keys, state.values, sums)
        attn = b.tensor("attn", (1, c.num_heads * c.head_dim), "bf16")
        lists = {"summaries": [], "scores": [], "softmax": []}
        _attend(L, layer, qr, 0, t, kp, vp, len(chunks), attn, "step", lists)
        names["attention P·V"] = attn
        names["layer output"] = _tail(L, layer, xt, attn, 1, np.array([t]), names)
    finally:
        b.prefix = outer
    return Program(b.config, dict(b.tensors), tuple(b.commands[start:]), {}), names


def notes_stage_bits(machine, names):
    """The stages :func:`golden.hwpath.run_notes_layer` records, as the bits the
    interpreter left in ``machine`` (the MoE rows unmasked: every token)."""
    r = machine.read

    def cat(tensors):
        return np.concatenate([r(t).ravel() for t in tensors]) if tensors else np.zeros(0, np.uint16)

    out = {k: r(v) for k, v in names.items() if not k.startswith("list.") and k != "x"}
    summ = names.get("list.summaries", [])
    out["HCA summaries"] = np.concatenate([cat(x) for x in summ]) if summ else None
    out["attention scores"] = cat(names.get("list.scores", []))
    out["attention softmax"] = cat(names.get("list.softmax", []))
    return out
