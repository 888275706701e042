"""Preset ``notes``: the design notes' tiered cache and dynamic expert selection.

**Project-defined.** The design notes (the second note; not part of this repository)
name the mechanisms but leave much open or contradict themselves; every decision taken
here, and its reason, is in ``docs/golden/notes-preset.md`` (numbered D1, D2, … below).

For a query at position ``p``, with the refresh anchor ``r = ⌊p / R⌋ · R`` (D3):

- **CSA** (recent): full attention over tokens ``[r - csa_window, p]`` (D2, D3).
- **HCA** (middle): the ``hca_chunks`` chunks of ``hca_chunk`` tokens just older than the
  CSA range, each seen as one summary key and value — the means of the chunk's cached keys
  and values — with logit bias ``log(chunk length)`` (D4, D5, D6). Summaries depend only
  on ``r``, so they are recomputed every ``R`` tokens (the notes' refresh).
- **SWA** (oldest): the rest, ``[0, start of HCA)``, cut into windows of ``swa_window``
  tokens that overlap by ``swa_overlap`` (stride ``swa_window - swa_overlap``), laid back
  from the HCA boundary; each window's tokens are keys, so a token in an overlap is a key
  twice (D7).
- The tiers combine in **one softmax** over all their keys (D8).

The MoE: softmax gate over ``n_experts``, primary top-``primary_topk``, a secondary score
(D10) over those candidates picks the final top-``final_topk``; SwiGLU experts; weights are
the primary scores of the final experts, renormalised (D11). Residual: pre-norm (D12).
mHC chunking: prefill runs in chunks of ``mhc_chunk`` tokens, the last padded by repeating
the last real token (D1); padding never changes a real token's output (causality).
"""

import copy
import dataclasses
from dataclasses import dataclass

import numpy as np

from ..attn.primitives import apply_rope, attention_parts, rms_norm, rope_angles, rope_inv_freq
from ..moe import moe_combine, route_two_stage, router_scores, swiglu

__all__ = ["NotesConfig", "NotesLayer", "NotesModel", "NotesState", "tier_ranges", "random_weights"]


@dataclass
class NotesConfig:
    """Sizes of the ``notes`` preset; defaults are the notes' (4K / 6×2K / 4K windows, 512, 128)."""

    vocab_size: int = 32000
    hidden_size: int = 4096
    num_hidden_layers: int = 1
    num_heads: int = 32
    num_kv_heads: int = 8
    head_dim: int = 128
    rope_theta: float = 10000.0
    csa_window: int = 4096
    hca_chunks: int = 6
    hca_chunk: int = 2048
    swa_window: int = 4096
    swa_overlap: int = 512
    refresh: int = 128
    mhc_chunk: int = 1024
    n_experts: int = 64
    primary_topk: int = 8
    final_topk: int = 2
    moe_intermediate_size: int = 1408
    rms_norm_eps: float = 1e-6

    def __post_init__(self):
        def need(ok, msg):
            if not ok:
                raise ValueError(msg)

        need(self.num_heads % self.num_kv_heads == 0, "num_heads must be a multiple of num_kv_heads")
        need(self.head_dim % 2 == 0, "head_dim must be even (RoPE pairs)")
        need(self.hidden_size % 2 == 0, "hidden_size must be even (sinusoidal position code)")
        need(
            min(self.csa_window, self.hca_chunk, self.swa_window, self.refresh, self.mhc_chunk) >= 1,
            "window, chunk and refresh sizes must be at least 1",
        )
        need(self.hca_chunks >= 0, "hca_chunks must be non-negative")
        need(0 <= self.swa_overlap < self.swa_window, "swa_overlap must be in [0, swa_window)")
        need(
            1 <= self.final_topk <= self.primary_topk <= self.n_experts,
            "need 1 <= final_topk <= primary_topk <= n_experts",
        )

    def scaled(self, **changes):
        return dataclasses.replace(self, **changes)


def tier_ranges(p, cfg):
    """The key ranges of a query at position ``p``: ``(swa_windows, hca_chunks, csa)``.

    Each is a list of half-open ``(lo, hi)`` token ranges (the CSA one is ``[(lo, p + 1)]``);
    empty ranges are left out. HCA chunks and SWA windows are listed newest first.
    """
    r = (p // cfg.refresh) * cfg.refresh
    csa_lo = max(0, r - cfg.csa_window)
    chunks = []
    hi = csa_lo
    for _ in range(cfg.hca_chunks):
        lo = max(0, hi - cfg.hca_chunk)
        if hi <= lo:
            break
        chunks.append((lo, hi))
        hi = lo
    windows = []
    stride = cfg.swa_window - cfg.swa_overlap
    end = hi
    while end > 0:
        windows.append((max(0, end - cfg.swa_window), end))
        if end - cfg.swa_window <= 0:
            break
        end -= stride
    return windows, chunks, [(csa_lo, p + 1)]


class _Cache:
    """Keys and values of every token so far, grown in amortised O(1) per token.

    Stored head-major, ``(Hk, capacity, D)``, so that one key head's rows are contiguous
    (a long context is read head by head); :meth:`kv` gives ``(T, Hk, D)`` views.
    """

    def __init__(self, hk, d, capacity=16):
        self.k = np.zeros((hk, capacity, d))
        self.v = np.zeros((hk, capacity, d))
        self.n = 0

    def append(self, k, v):
        need = self.n + k.shape[0]
        if need > self.k.shape[1]:
            size = max(need, 2 * self.k.shape[1])
            for name in ("k", "v"):
                old = getattr(self, name)
                grown = np.zeros((old.shape[0], size, old.shape[2]))
                grown[:, : self.n] = old[:, : self.n]
                setattr(self, name, grown)
        self.k[:, self.n : need] = np.transpose(k, (1, 0, 2))
        self.v[:, self.n : need] = np.transpose(v, (1, 0, 2))
        self.n = need

    def kv(self, lo, hi):
        """Keys and values of tokens ``[lo, hi)`` as ``(T, Hk, D)`` views (no copy)."""
        return self.k[:, lo:hi].transpose(1, 0, 2), self.v[:, lo:hi].transpose(1, 0, 2)


@dataclass
class NotesState:
    """Decode state of one layer: the K/V cache and the summaries of the current anchor."""

    cache: _Cache
    anchor: int = -1
    summaries: tuple | None = None  # (keys (C, Hk, D), values, log-length bias (C,))

    @property
    def n_tokens(self):
        return self.cache.n


def sinusoid(positions, width):
    """Sinusoidal position code ``(S, width)``: sin / cos pairs, wavelengths 2π … 2π·10⁴."""
    inv = 1.0 / 10000.0 ** (np.arange(0, width, 2) / width)
    ang = np.asarray(positions, np.float64)[:, None] * inv[None, :]
    out = np.empty((ang.shape[0], width))
    out[:, 0::2], out[:, 1::2] = np.sin(ang), np.cos(ang)
    return out


class NotesLayer:
    """One layer: pre-norm tiered attention, then pre-norm MoE, each with a residual."""

    def __init__(self, cfg, weights, index):
        self.cfg, self.w, self.i = cfg, weights, index
        self.inv = rope_inv_freq(cfg.head_dim, cfg.rope_theta)

    def p(self, name):
        return self.w[f"layers.{self.i}.{name}"]

    def init_state(self):
        return NotesState(_Cache(self.cfg.num_kv_heads, self.cfg.head_dim))

    def _summaries(self, st, anchor_pos):
        """Summary keys/values of the HCA chunks for the anchor of ``anchor_pos`` (cached)."""
        r = (anchor_pos // self.cfg.refresh) * self.cfg.refresh
        if st.anchor != r:
            _, chunks, _ = tier_ranges(anchor_pos, self.cfg)
            c = self.cfg
            ks = np.zeros((len(chunks), c.num_kv_heads, c.head_dim))
            vs = np.zeros_like(ks)
            for j, (lo, hi) in enumerate(chunks):
                kc, vc = st.cache.kv(lo, hi)
                ks[j], vs[j] = kc.mean(axis=0), vc.mean(axis=0)
            bias = np.log([hi - lo for lo, hi in chunks]) if chunks else np.zeros(0)
            st.anchor, st.summaries = r, (ks, vs, bias)
        return st.summaries

    def attention(self, st, x, positions):
        c = self.cfg
        s, h, hk, d = x.shape[0], c.num_heads, c.num_kv_heads, c.head_dim
        ang = rope_angles(positions, self.inv)[:, None, :]
        rope = lambda t: apply_rope(t, ang, pairs="half", where="leading")
        q = rope((x @ self.p("attn.q_proj.weight").T).reshape(s, h, d))
        k = rope((x @ self.p("attn.k_proj.weight").T).reshape(s, hk, d))
        v = (x @ self.p("attn.v_proj.weight").T).reshape(s, hk, d)
        st.cache.append(k, v)
        out = np.zeros((s, h, d))
        # Queries between two refresh points share every tier but the CSA's end.
        groups = positions // c.refresh
        for g in np.unique(groups):
            rows = np.flatnonzero(groups == g)
            p_last = int(positions[rows[-1]])
            windows, _, csa = tier_ranges(p_last, c)
            sk, sv, sbias = self._summaries(st, p_last)
            parts = []
            if windows:
                # The SWA windows cover [0, end) contiguously; a token in k windows is a key
                # k times, which is the same as being a key once with logit + log k.
                end = windows[0][1]
                mult = np.zeros(end)
                for lo, hi in windows:
                    mult[lo:hi] += 1
                parts.append((*st.cache.kv(0, end), np.log(mult), None))
            if sk.shape[0]:
                parts.append((sk, sv, sbias, None))
            lo, hi = csa[0]
            mask = np.arange(lo, hi)[None, :] <= positions[rows][:, None]  # causal inside the CSA range
            parts.append((*st.cache.kv(lo, hi), None, mask))
            out[rows] = attention_parts(q[rows], parts, d**-0.5)
        return out.reshape(s, h * d) @ self.p("attn.o_proj.weight").T

    def expert(self, e, rows):
        i = self.cfg.moe_intermediate_size
        gu = self.p("mlp.experts.gate_up_proj")[e]
        return swiglu(rows, gu[:i], gu[i:], self.p("mlp.experts.down_proj")[e])

    def moe(self, x, positions, record=None):
        c = self.cfg
        scores = router_scores(x @ self.p("mlp.gate.weight").T, "softmax")
        # Secondary score (D10): the position code against each expert's first gate row.
        first_rows = self.p("mlp.experts.gate_up_proj")[:, 0, :]  # (E, D)
        secondary = sinusoid(positions, c.hidden_size) @ first_rows.T
        idx, w, cand = route_two_stage(scores, c.primary_topk, secondary, c.final_topk)
        if record is not None:
            record.update(router_idx=idx, router_candidates=cand, router_scores=scores)
        return moe_combine(x, idx, w, self.expert)

    def forward(self, st, x, positions, record=None):
        """Hidden states ``(S, D)`` of new tokens at ``positions`` → ``(S, D)``; updates ``st``."""
        positions = np.asarray(positions, np.int64)
        if positions.size and positions[0] != st.n_tokens:
            raise ValueError(f"layer {self.i} expects position {st.n_tokens} next, got {positions[0]}")
        eps = self.cfg.rms_norm_eps
        a = self.attention(st, rms_norm(x, self.p("input_layernorm.weight"), eps), positions)
        h = x + a
        m = self.moe(rms_norm(h, self.p("post_attention_layernorm.weight"), eps), positions, record)
        if record is not None:
            record.update(attn_out=a, moe_out=m)
        return h + m


class NotesModel:
    """Embedding, layers, final norm; prefill in mHC chunks; decode one token at a time."""

    def __init__(self, cfg, weights):
        self.cfg, self.w = cfg, weights
        self.layers = [NotesLayer(cfg, weights, i) for i in range(cfg.num_hidden_layers)]

    def init_state(self):
        return [layer.init_state() for layer in self.layers]

    def forward(self, state, token_ids, records=None):
        """New tokens → final hidden states ``(S, D)``; ``state`` is updated."""
        token_ids = np.asarray(token_ids, np.int64)
        pos = np.arange(state[0].n_tokens, state[0].n_tokens + token_ids.size)
        h = self.w["embed_tokens.weight"][token_ids].astype(np.float64)
        for layer, st in zip(self.layers, state, strict=True):
            rec = None if records is None else {}
            h = layer.forward(st, h, pos, rec)
            if rec is not None:
                records.append(rec)
        return rms_norm(h, self.w["norm.weight"], self.cfg.rms_norm_eps)

    def prefill(self, state, token_ids):
        """mHC chunking: run ``token_ids`` in chunks of ``mhc_chunk``, the last padded.

        The last chunk is padded to full length by repeating the last real token and run
        on a copy of the state (as a fixed-size chunk kernel would); the real tokens'
        outputs are taken from it, and the returned state holds only the real tokens.
        Returns the outputs of the real tokens ``(S, D)``.
        """
        token_ids = np.asarray(token_ids, np.int64)
        n = self.cfg.mhc_chunk
        full = (token_ids.size // n) * n
        outs = [self.forward(state, token_ids[a : a + n]) for a in range(0, full, n)]
        rest = token_ids[full:]
        if rest.size:
            padded = np.concatenate([rest, np.full(n - rest.size, rest[-1])])
            outs.append(self.forward(copy.deepcopy(state), padded)[: rest.size])
            self.forward(state, rest)
        return np.concatenate(outs) if outs else np.zeros((0, self.cfg.hidden_size))


def weight_shapes(cfg):
    d, h, hk, hd = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    e, i = cfg.n_experts, cfg.moe_intermediate_size
    shapes = {"embed_tokens.weight": (cfg.vocab_size, d), "norm.weight": (d,)}
    for li in range(cfg.num_hidden_layers):
        L = f"layers.{li}."
        shapes.update(
            {
                L + "attn.q_proj.weight": (h * hd, d),
                L + "attn.k_proj.weight": (hk * hd, d),
                L + "attn.v_proj.weight": (hk * hd, d),
                L + "attn.o_proj.weight": (d, h * hd),
                L + "input_layernorm.weight": (d,),
                L + "post_attention_layernorm.weight": (d,),
                L + "mlp.gate.weight": (e, d),
                L + "mlp.experts.gate_up_proj": (e, 2 * i, d),
                L + "mlp.experts.down_proj": (e, d, i),
            }
        )
    return shapes


def random_weights(cfg, seed=0, std=None):
    """Random parameters; norms ``1 + N(0, 0.05)``, matrices ``N(0, 1/fan_in)``."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in weight_shapes(cfg).items():
        if "norm" in name:
            out[name] = 1.0 + 0.05 * rng.standard_normal(shape)
        else:
            out[name] = (std or shape[-1] ** -0.5) * rng.standard_normal(shape)
    return out
