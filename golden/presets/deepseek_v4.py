"""Preset ``deepseek-v4``: the published DeepSeek-V4 layer, float64, built on the primitives.

Every layer has sliding-window attention over its own tokens; a layer of type
``compressed_sparse_attention`` (CSA) adds overlapping softmax-gated token-group entries
(rate ``m``, windows of ``2m`` with stride ``m``) of which a lightning indexer picks the
top-k per query; a layer of type ``heavily_compressed_attention`` (HCA) adds
non-overlapping entries (rate ``m'``) attended densely over the causal ones. Keys and
values are one shared head (K = V) with partial, interleaved RoPE on the trailing channels
(undone on the output), each head has a sink logit, the output projection is grouped
low-rank. The MoE has sqrt-softplus scores with a selection-only bias (hash-routed in the
first layers), a shared expert and clamped SwiGLU. The residual is ``hc_mult`` streams
mixed by manifold-constrained hyper-connections.

Parameters are named as in Hugging Face transformers' ``DeepseekV4Model`` state dict
(without the ``model.`` prefix), so a checkpoint maps one to one; the configuration is read
from a ``DeepseekV4`` ``config.json`` (:meth:`DeepseekV4Config.from_hf`).

One code path serves prefill and decode: :meth:`DeepseekV4Layer.forward` takes the layer's
:class:`LayerState` and any number of new tokens, and updates the state (the last
``sliding_window - 1`` keys, each compressor's pending tokens of an incomplete group, the
overlap half of the last complete group, the emitted entries). Feeding a sequence at once
or token by token gives the same outputs (tested).
"""

import dataclasses
import json
import math
from dataclasses import dataclass, field

import numpy as np

from ..attn import hyper
from ..attn.primitives import (
    apply_rope,
    attention_gathered,
    compress_groups,
    compressed_visible_count,
    indexer_scores,
    rms_norm,
    rope_angles,
    rope_inv_freq,
    topk_indices,
)
from ..moe import moe_combine, route_hash, route_topk, router_scores, swiglu

__all__ = ["DeepseekV4Config", "DeepseekV4Layer", "DeepseekV4Model", "LayerState", "random_weights"]

SWA, CSA, HCA = "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"
LAYER_TYPES = (SWA, CSA, HCA)


@dataclass
class DeepseekV4Config:
    """The fields of a Hugging Face ``DeepseekV4`` configuration that the datapath uses.

    Defaults are the published ones (V4-Flash sizes, as transformers' defaults).
    """

    vocab_size: int = 129280
    hidden_size: int = 4096
    moe_intermediate_size: int = 2048
    num_hidden_layers: int = 43
    num_attention_heads: int = 64
    head_dim: int = 512
    q_lora_rank: int = 1024
    num_experts_per_tok: int = 6
    n_routed_experts: int = 256
    n_shared_experts: int = 1
    scoring_func: str = "sqrtsoftplus"
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 1.5
    rope_theta: float = 10000.0
    compress_rope_theta: float = 160000.0
    rope_scaling: dict | None = None  # YaRN of the compressed layers, or None
    partial_rotary_factor: float = 64 / 512
    layer_types: list = field(default_factory=list)
    mlp_layer_types: list = field(default_factory=list)
    compress_rates: dict = field(default_factory=lambda: {CSA: 4, HCA: 128})
    hc_mult: int = 4
    hc_sinkhorn_iters: int = 20
    hc_eps: float = 1e-6
    swiglu_limit: float = 10.0
    sliding_window: int = 128
    o_groups: int = 8
    o_lora_rank: int = 1024
    index_n_heads: int = 64
    index_head_dim: int = 128
    index_topk: int = 512
    rms_norm_eps: float = 1e-6

    def __post_init__(self):
        n = self.num_hidden_layers
        if not self.layer_types:
            # The published default: two HCA layers, then CSA / HCA interleaved.
            self.layer_types = [HCA] * min(n, 2) + [CSA if i % 2 else HCA for i in range(max(n - 2, 0))]
        if not self.mlp_layer_types:
            self.mlp_layer_types = ["hash_moe"] * min(n, 3) + ["moe"] * max(0, n - 3)
        # As transformers: lists longer than the layer count keep their first entries (the
        # published files list the next-token-prediction layers too); shorter ones are refused.
        self.layer_types = list(self.layer_types[:n])
        self.mlp_layer_types = list(self.mlp_layer_types[:n])
        self.validate()

    @property
    def rope_dim(self):
        return int(self.head_dim * self.partial_rotary_factor)

    def validate(self):
        """Raise ``ValueError`` naming the first inconsistent field."""
        n = self.num_hidden_layers
        if len(self.layer_types) != n or len(self.mlp_layer_types) != n:
            raise ValueError(
                f"layer_types and mlp_layer_types need {n} entries each (num_hidden_layers); "
                f"got {len(self.layer_types)} and {len(self.mlp_layer_types)}"
            )
        bad = [t for t in self.layer_types if t not in LAYER_TYPES]
        if bad:
            raise ValueError(f"unknown layer types {bad}; expected one of {LAYER_TYPES}")
        bad = [t for t in self.mlp_layer_types if t not in ("hash_moe", "moe")]
        if bad:
            raise ValueError(f"unknown MLP layer types {bad}; expected hash_moe or moe")
        rd = self.rope_dim
        if rd % 2 or rd <= 0 or rd > min(self.head_dim, self.index_head_dim):
            raise ValueError(f"rope dim {rd} must be even, positive and at most head_dim and index_head_dim")
        if (self.num_attention_heads * self.head_dim) % self.o_groups:
            raise ValueError("num_attention_heads * head_dim must divide into o_groups")
        if self.num_experts_per_tok > self.n_routed_experts:
            raise ValueError("num_experts_per_tok exceeds n_routed_experts")
        for t in (CSA, HCA):
            if self.compress_rates.get(t, 0) < 1:
                raise ValueError(f"compress rate of {t} must be at least 1")
        if self.scoring_func not in ("softmax", "sigmoid", "sqrtsoftplus"):
            raise ValueError(f"unknown scoring_func {self.scoring_func!r}")
        y = self.rope_scaling
        if y is not None:
            for key in ("factor", "original_max_position_embeddings"):
                if y.get(key) is None:
                    raise ValueError(f"rope_scaling (YaRN of the compressed layers) needs {key!r}")
            if y.get("truncate", True) is not True:
                raise ValueError(
                    "rope_scaling: truncate must be true; the preset follows transformers, which always "
                    "rounds the YaRN correction range outwards for V4 (see from_hf)"
                )

    @classmethod
    def from_hf(cls, cfg):
        """From a ``DeepseekV4`` ``config.json`` (a path or the parsed dict), read as
        transformers' ``DeepseekV4Config`` reads it (5.23; checked on the cases of
        ``tests/data/dsv4_configs.json``, which transformers made).

        Legacy keys are folded in as transformers does: ``compress_ratios`` per layer (0, 4
        and 128 name the three layer types; the published files list
        ``num_hidden_layers + num_nextn_predict_layers`` entries, of which the first
        ``num_hidden_layers`` are kept, as of ``layer_types`` and ``mlp_layer_types``),
        ``compress_rate_csa`` / ``compress_rate_hca``, ``num_hash_layers``,
        ``qk_rope_head_dim``. The compressed layers' RoPE comes from the legacy
        ``rope_scaling`` key if present (it wins, as in transformers), else from
        ``rope_parameters`` (flat, or nested as ``main`` / ``compress``). YaRN's
        ``truncate`` is not honoured: transformers reads it from the outer rope dictionary,
        where a V4 configuration never has it, so the correction range is always rounded
        outwards (``truncate: true``), and so it is here. The YaRN attention factor is 1
        for a flat dictionary (transformers sets it) and YaRN's ``0.1 ln(factor) + 1``
        (or the ``mscale`` ratio) for a nested one that does not give it.

        Anything that cannot be honoured raises ``ValueError`` naming the field.
        """
        if not isinstance(cfg, dict):
            with open(cfg) as f:
                cfg = json.load(f)
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in cfg.items() if k in names and v is not None}
        n = kw.get("num_hidden_layers", cls.num_hidden_layers)
        rates = dict(cfg.get("compress_rates") or {CSA: 4, HCA: 128})
        if cfg.get("compress_rate_csa") is not None:
            rates[CSA] = cfg["compress_rate_csa"]
        if cfg.get("compress_rate_hca") is not None:
            rates[HCA] = cfg["compress_rate_hca"]
        kw["compress_rates"] = rates
        if not cfg.get("layer_types") and cfg.get("compress_ratios") is not None:
            table = {0: SWA, 4: CSA, 128: HCA}
            ratios = list(cfg["compress_ratios"])
            bad = sorted({r for r in ratios[:n] if r not in table})
            if bad:
                raise ValueError(
                    f"compress_ratios: {bad} name no layer type (0 = sliding, 4 = CSA, 128 = HCA, "
                    "as transformers reads them); give layer_types and compress_rates instead"
                )
            kw["layer_types"] = [table[r] for r in ratios[:n]]
        if not cfg.get("mlp_layer_types") and cfg.get("num_hash_layers") is not None:
            h = cfg["num_hash_layers"]
            kw["mlp_layer_types"] = ["hash_moe"] * min(n, h) + ["moe"] * max(0, n - h)
        if cfg.get("partial_rotary_factor") is None:
            kw.pop("partial_rotary_factor", None)
            if cfg.get("qk_rope_head_dim") is not None:
                kw["partial_rotary_factor"] = cfg["qk_rope_head_dim"] / cfg.get("head_dim", cls.head_dim)
        kw.update(_rope_from_hf(cfg, kw))
        return cls(**kw)

    def scaled(self, **changes):
        """A copy with some fields changed (tiny test sizes), validated."""
        return dataclasses.replace(self, **changes)


def _rope_from_hf(cfg, kw):
    """``rope_theta``, ``compress_rope_theta``, ``rope_scaling`` (and a nested
    ``partial_rotary_factor``) from a configuration's rope keys, as transformers reads them."""
    out = {}
    field = "rope_scaling" if cfg.get("rope_scaling") else "rope_parameters"
    rp = cfg.get(field) or {}
    if not isinstance(rp, dict):
        raise ValueError(f"{field} must be a dictionary, got {type(rp).__name__}")
    nested = isinstance(rp.get("main"), dict) and isinstance(rp.get("compress"), dict)
    if nested:
        main, comp = rp["main"], rp["compress"]
        for part, d in (("main", main), ("compress", comp)):
            if d.get("rope_theta") is not None:
                out["rope_theta" if part == "main" else "compress_rope_theta"] = d["rope_theta"]
        kind = main.get("rope_type", main.get("type", "default"))
        if kind != "default":
            raise ValueError(f"{field}['main']: rope_type {kind!r}; the sliding layers' RoPE is plain")
        prf = {d.get("partial_rotary_factor") for d in (main, comp)} - {None}
        if len(prf) > 1:
            raise ValueError(f"{field}: main and compress give different partial_rotary_factor {sorted(prf)}")
        if prf:
            out["partial_rotary_factor"] = prf.pop()
    else:
        if any(k in rp for k in ("main", "compress")):
            raise ValueError(f"{field}: 'main' and 'compress' must both be dictionaries")
        comp = dict(rp)
    kind = comp.get("rope_type", comp.get("type", "default"))
    if kind == "default":
        out["rope_scaling"] = None
        return out
    if kind != "yarn":
        raise ValueError(f"{field}: rope_type {kind!r} of the compressed layers; only 'default' and 'yarn'")
    y = {k: v for k, v in comp.items() if k not in ("rope_theta", "partial_rotary_factor", "type")}
    y["rope_type"] = "yarn"
    y["truncate"] = True  # transformers never sees a V4 configuration's truncate (see from_hf)
    if y.get("original_max_position_embeddings") is None:
        raise ValueError(f"{field}: YaRN needs original_max_position_embeddings")
    if y.get("factor") is None:
        mpe = cfg.get("max_position_embeddings", 1048576)
        y["factor"] = mpe / y["original_max_position_embeddings"]
    if y.get("attention_factor") is None:
        if not nested:
            y["attention_factor"] = 1.0
        else:
            f = float(y["factor"])

            def mscale(scale, m=1.0):
                return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

            m, m_all = y.get("mscale"), y.get("mscale_all_dim")
            y["attention_factor"] = mscale(f, m) / mscale(f, m_all) if m and m_all else mscale(f)
    out["rope_scaling"] = y
    return out


def _yarn(cfg):
    """(YaRN dict or None, cos/sin scale) of the compressed layers' RoPE."""
    y = cfg.rope_scaling
    if not y:
        return None, 1.0
    # transformers forces attention_factor = 1 for V4's compressed layers given a flat rope
    # dictionary (the reference does not scale cos/sin by YaRN's mscale).
    return (
        {
            "factor": y["factor"],
            "original_max_position_embeddings": y["original_max_position_embeddings"],
            "beta_fast": y.get("beta_fast"),
            "beta_slow": y.get("beta_slow"),
            "truncate": True,
        },
        float(y.get("attention_factor", 1.0)),
    )


class _Growing:
    """A row buffer that appends in amortised O(rows added)."""

    def __init__(self, width):
        self._buf = np.zeros((16, width))
        self.n = 0

    def append(self, rows):
        rows = np.asarray(rows, np.float64)
        need = self.n + rows.shape[0]
        if need > self._buf.shape[0]:
            grown = np.zeros((max(need, 2 * self._buf.shape[0]), self._buf.shape[1]))
            grown[: self.n] = self._buf[: self.n]
            self._buf = grown
        self._buf[self.n : need] = rows
        self.n = need

    @property
    def rows(self):
        return self._buf[: self.n]


@dataclass
class CompressorState:
    """One compressor's running state: pending rows, overlap half, emitted entries."""

    pending_kv: np.ndarray
    pending_gate: np.ndarray
    entries: _Growing
    prev: tuple | None = None  # (kv_A, gate_A + bias) of the last complete group

    @classmethod
    def empty(cls, width, out_width):
        return cls(np.zeros((0, width)), np.zeros((0, width)), _Growing(out_width))


@dataclass
class LayerState:
    """Decode state of one layer: tokens seen, recent keys, compressor states."""

    n_tokens: int = 0
    window_kv: np.ndarray | None = None  # (≤ sliding_window - 1, head_dim), rope applied
    compressor: CompressorState | None = None
    indexer: CompressorState | None = None


class DeepseekV4Layer:
    """One decoder layer: hyper-connections, attention, MoE. Weights are read by name."""

    def __init__(self, cfg, weights, index):
        self.cfg, self.w, self.i = cfg, weights, index
        self.type = cfg.layer_types[index]
        self.hash = cfg.mlp_layer_types[index] == "hash_moe"
        rd = cfg.rope_dim
        yarn, self.rope_scale = _yarn(cfg)
        self.inv_main = rope_inv_freq(rd, cfg.rope_theta)
        self.inv_comp = rope_inv_freq(rd, cfg.compress_rope_theta, yarn)
        if self.type == SWA:
            self.inv_attn, self.attn_scale = self.inv_main, 1.0
        else:
            self.inv_attn, self.attn_scale = self.inv_comp, self.rope_scale
        self.rate = cfg.compress_rates.get(self.type)

    def p(self, name):
        return self.w[f"layers.{self.i}.{name}"]

    def init_state(self):
        cfg = self.cfg
        st = LayerState(window_kv=np.zeros((0, cfg.head_dim)))
        if self.type == CSA:
            st.compressor = CompressorState.empty(2 * cfg.head_dim, cfg.head_dim)
            st.indexer = CompressorState.empty(2 * cfg.index_head_dim, cfg.index_head_dim)
        elif self.type == HCA:
            st.compressor = CompressorState.empty(cfg.head_dim, cfg.head_dim)
        return st

    # --- attention -----------------------------------------------------------------------

    def _rope(self, x, positions, inv, scale, inverse=False):
        ang = rope_angles(positions, inv)
        if x.ndim == 3:
            ang = ang[:, None, :]
        return apply_rope(x, -ang if inverse else ang, pairs="interleaved", where="trailing", scale=scale)

    def _compress(self, cs, x, prefix, overlap, head_dim):
        """Feed new rows to a compressor: each group they complete becomes an entry (normed, rotated)."""
        kv = x @ self.p(f"{prefix}.kv_proj.weight").T
        gate = x @ self.p(f"{prefix}.gate_proj.weight").T
        kv = np.concatenate([cs.pending_kv, kv])
        gate = np.concatenate([cs.pending_gate, gate])
        n = kv.shape[0] // self.rate
        used = n * self.rate
        cs.pending_kv, cs.pending_gate = kv[used:], gate[used:]
        first = cs.entries.n * self.rate
        if n == 0:
            return
        bias = self.p(f"{prefix}.position_bias")
        out = compress_groups(kv[:used], self.rate, gate[:used], bias, overlap=overlap, prev=cs.prev)
        if overlap:
            last = slice(used - self.rate, used)
            cs.prev = (kv[last, :head_dim], (gate[last] + bias)[:, :head_dim])
        out = rms_norm(out, self.p(f"{prefix}.kv_norm.weight"), self.cfg.rms_norm_eps)
        pos = first + self.rate * np.arange(n)
        cs.entries.append(self._rope(out, pos, self.inv_comp, self.rope_scale))

    def _indexer_topk(self, st, x, q_res, positions):
        cfg = self.cfg
        pre = "self_attn.compressor.indexer"
        self._compress(st.indexer, x, pre, True, cfg.index_head_dim)
        keys = st.indexer.entries.rows
        s = x.shape[0]
        q = (q_res @ self.p(f"{pre}.q_b_proj.weight").T).reshape(s, cfg.index_n_heads, cfg.index_head_dim)
        q = self._rope(q, positions, self.inv_comp, self.rope_scale)
        w = (x @ self.p(f"{pre}.scorer.weights_proj.weight").T) * cfg.index_n_heads**-0.5
        scores = indexer_scores(q, keys, w, cfg.index_head_dim**-0.5)
        valid = np.arange(keys.shape[0])[None, :] < compressed_visible_count(positions, self.rate)[:, None]
        k = min(cfg.index_topk, keys.shape[0])
        return topk_indices(scores, k, valid), scores, valid

    def attention(self, st, x, positions, record=None, index_override=None):
        """Attention block on ``x`` ``(S, D)`` (already normed) at ``positions``; updates ``st``.

        ``index_override`` ``(S, k)`` replaces the indexer's picks (CSA layers; the indexer
        still runs and is recorded): a test uses it to follow another implementation's
        choice among exactly equal scores.
        """
        cfg = self.cfg
        s, h, d = x.shape[0], cfg.num_attention_heads, cfg.head_dim
        eps = cfg.rms_norm_eps
        q_res = rms_norm(x @ self.p("self_attn.q_a_proj.weight").T, self.p("self_attn.q_a_norm.weight"), eps)
        q = (q_res @ self.p("self_attn.q_b_proj.weight").T).reshape(s, h, d)
        q = self._rope(rms_norm(q, eps=eps), positions, self.inv_attn, self.attn_scale)
        kv = rms_norm(x @ self.p("self_attn.kv_proj.weight").T, self.p("self_attn.kv_norm.weight"), eps)
        kv = self._rope(kv, positions, self.inv_attn, self.attn_scale)

        # Token keys: the kept window, then the new tokens.
        keys = np.concatenate([st.window_kv, kv])
        k_pos = np.arange(st.n_tokens - st.window_kv.shape[0], st.n_tokens + s)
        win = cfg.sliding_window
        # Query j (absolute p) sees token keys at positions (p - win, p].
        offs = np.arange(win)[None, :] - (win - 1)
        tok_idx = (positions[:, None] + offs) - k_pos[0]
        tok_idx = np.where(tok_idx >= 0, tok_idx, -1)
        idx = tok_idx
        if self.type != SWA:
            pre = "self_attn.compressor"
            self._compress(st.compressor, x, pre, self.type == CSA, d)
            entries = st.compressor.entries.rows
            n_ent = entries.shape[0]
            if self.type == CSA:
                sel, scores, valid = self._indexer_topk(st, x, q_res, positions)
                if record is not None:
                    record.update(index_topk=sel, index_scores=scores, index_valid=valid)
                ent_idx = sel if index_override is None else np.asarray(index_override, np.int64)
            else:
                vis = compressed_visible_count(positions, self.rate)
                ent_idx = np.where(np.arange(n_ent)[None, :] < vis[:, None], np.arange(n_ent)[None, :], -1)
            idx = np.concatenate([tok_idx, np.where(ent_idx >= 0, ent_idx + keys.shape[0], -1)], axis=1)
            keys = np.concatenate([keys, entries])
        out = attention_gathered(q, keys, keys, idx, d**-0.5, sink=self.p("self_attn.sinks"))
        out = self._rope(out, positions, self.inv_attn, self.attn_scale, inverse=True)

        g = cfg.o_groups
        wa = self.p("self_attn.o_a_proj.weight").reshape(g, cfg.o_lora_rank, -1)
        grouped = np.einsum("sgi,gri->sgr", out.reshape(s, g, -1), wa).reshape(s, -1)
        y = grouped @ self.p("self_attn.o_b_proj.weight").T

        # Keep the last win - 1 token keys for the next call.
        all_kv = np.concatenate([st.window_kv, kv])
        st.window_kv = all_kv[max(0, all_kv.shape[0] - (win - 1)) :]
        st.n_tokens += s
        return y

    # --- MoE -----------------------------------------------------------------------------

    def expert(self, e, rows):
        i = self.cfg.moe_intermediate_size
        gu = self.p("mlp.experts.gate_up_proj")[e]
        return swiglu(rows, gu[:i], gu[i:], self.p("mlp.experts.down_proj")[e], self.cfg.swiglu_limit)

    def moe(self, x, token_ids, record=None):
        cfg = self.cfg
        scores = router_scores(x @ self.p("mlp.gate.weight").T, cfg.scoring_func)
        if self.hash:
            idx, w = route_hash(
                scores, token_ids, self.p("mlp.gate.tid2eid"), scaling=cfg.routed_scaling_factor
            )
        else:
            idx, w = route_topk(
                scores,
                cfg.num_experts_per_tok,
                self.p("mlp.gate.e_score_correction_bias"),
                scaling=cfg.routed_scaling_factor,
            )
        if record is not None:
            record.update(router_idx=idx, router_scores=scores)
        lim = cfg.swiglu_limit
        shared = lambda v: swiglu(
            v,
            self.p("mlp.shared_experts.gate_proj.weight"),
            self.p("mlp.shared_experts.up_proj.weight"),
            self.p("mlp.shared_experts.down_proj.weight"),
            lim,
        )
        return moe_combine(x, idx, w, self.expert, [shared])

    # --- the layer -----------------------------------------------------------------------

    def _hc(self, name, streams):
        c = self.cfg
        return hyper.hc_weights(
            streams,
            self.p(f"{name}.fn"),
            self.p(f"{name}.base"),
            self.p(f"{name}.scale"),
            sinkhorn_iters=c.hc_sinkhorn_iters,
            eps=c.hc_eps,
            norm_eps=c.rms_norm_eps,
        )

    def forward(self, st, streams, positions, token_ids, record=None, index_override=None):
        """Streams ``(S, hc_mult, D)`` of new tokens at ``positions`` → new streams; updates ``st``.

        ``record`` (a dict or None) receives the intermediates: ``attn_out``, ``moe_out``,
        ``after_attn`` (streams after the attention's hyper-connection), the indexer's
        ``index_topk`` / ``index_scores`` / ``index_valid`` (CSA) and ``router_idx`` /
        ``router_scores``. ``index_override``: see :meth:`attention`.
        """
        eps = self.cfg.rms_norm_eps
        positions = np.asarray(positions, np.int64)
        if positions.size and positions[0] != st.n_tokens:
            raise ValueError(f"layer {self.i} expects position {st.n_tokens} next, got {positions[0]}")
        pre, post, comb = self._hc("attn_hc", streams)
        x = rms_norm(hyper.hc_collapse(streams, pre), self.p("input_layernorm.weight"), eps)
        a = self.attention(st, x, positions, record, index_override)
        streams = hyper.hc_merge(streams, a, post, comb)
        mid = streams
        pre, post, comb = self._hc("ffn_hc", streams)
        x = rms_norm(hyper.hc_collapse(streams, pre), self.p("post_attention_layernorm.weight"), eps)
        m = self.moe(x, token_ids, record)
        streams = hyper.hc_merge(streams, m, post, comb)
        if record is not None:
            record.update(attn_out=a, moe_out=m, after_attn=mid)
        return streams


class DeepseekV4Model:
    """Embedding, the layers, the final hyper-connection head and norm."""

    def __init__(self, cfg, weights):
        self.cfg, self.w = cfg, weights
        self.layers = [DeepseekV4Layer(cfg, weights, i) for i in range(cfg.num_hidden_layers)]

    def init_state(self):
        return [layer.init_state() for layer in self.layers]

    def embed(self, token_ids):
        e = self.w["embed_tokens.weight"][np.asarray(token_ids, np.int64)]
        return np.repeat(e[:, None, :], self.cfg.hc_mult, axis=1).astype(np.float64)

    def head(self, streams):
        c = self.cfg
        x = hyper.hc_head(
            streams,
            self.w["hc_head.hc_fn"],
            self.w["hc_head.hc_base"],
            self.w["hc_head.hc_scale"],
            eps=c.hc_eps,
            norm_eps=c.rms_norm_eps,
        )
        return rms_norm(x, self.w["norm.weight"], c.rms_norm_eps)

    def forward(self, state, token_ids, records=None):
        """New tokens → final hidden states ``(S, D)``; ``state`` (from :meth:`init_state`) is updated.

        ``records``: None, or a list that receives one dict per layer with the layer's
        input and output streams and its intermediates.
        """
        token_ids = np.asarray(token_ids, np.int64)
        pos = np.arange(state[0].n_tokens, state[0].n_tokens + token_ids.size)
        h = self.embed(token_ids)
        for layer, st in zip(self.layers, state, strict=True):
            rec = None if records is None else {"input": h}
            h = layer.forward(st, h, pos, token_ids, rec)
            if rec is not None:
                rec["output"] = h
                records.append(rec)
        return self.head(h)


def weight_shapes(cfg):
    """``{name: shape}`` of every parameter, named as in transformers' state dict."""
    d, h, hd = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim
    n, e, i = cfg.hc_mult, cfg.n_routed_experts, cfg.moe_intermediate_size
    shapes = {
        "embed_tokens.weight": (cfg.vocab_size, d),
        "norm.weight": (d,),
        "hc_head.hc_fn": (n, n * d),
        "hc_head.hc_base": (n,),
        "hc_head.hc_scale": (1,),
    }
    for li, t in enumerate(cfg.layer_types):
        L = f"layers.{li}."
        a = L + "self_attn."
        shapes.update(
            {
                a + "q_a_proj.weight": (cfg.q_lora_rank, d),
                a + "q_a_norm.weight": (cfg.q_lora_rank,),
                a + "q_b_proj.weight": (h * hd, cfg.q_lora_rank),
                a + "kv_proj.weight": (hd, d),
                a + "kv_norm.weight": (hd,),
                a + "sinks": (h,),
                a + "o_a_proj.weight": (cfg.o_groups * cfg.o_lora_rank, h * hd // cfg.o_groups),
                a + "o_b_proj.weight": (d, cfg.o_groups * cfg.o_lora_rank),
                L + "input_layernorm.weight": (d,),
                L + "post_attention_layernorm.weight": (d,),
                L + "mlp.gate.weight": (e, d),
                L + "mlp.experts.gate_up_proj": (e, 2 * i, d),
                L + "mlp.experts.down_proj": (e, d, i),
                # One shared expert of moe_intermediate_size, whatever n_shared_experts says
                # (transformers builds it so; the published checkpoints have one).
                L + "mlp.shared_experts.gate_proj.weight": (i, d),
                L + "mlp.shared_experts.up_proj.weight": (i, d),
                L + "mlp.shared_experts.down_proj.weight": (d, i),
            }
        )
        if cfg.mlp_layer_types[li] == "hash_moe":
            shapes[L + "mlp.gate.tid2eid"] = (cfg.vocab_size, cfg.num_experts_per_tok)
        else:
            shapes[L + "mlp.gate.e_score_correction_bias"] = (e,)
        for hc in ("attn_hc", "ffn_hc"):
            shapes.update(
                {
                    L + f"{hc}.fn": ((2 + n) * n, n * d),
                    L + f"{hc}.base": ((2 + n) * n,),
                    L + f"{hc}.scale": (3,),
                }
            )
        if t != SWA:
            c = a + "compressor."
            w = 2 * hd if t == CSA else hd
            rate = cfg.compress_rates[t]
            shapes.update(
                {
                    c + "kv_proj.weight": (w, d),
                    c + "gate_proj.weight": (w, d),
                    c + "position_bias": (rate, w),
                    c + "kv_norm.weight": (hd,),
                }
            )
        if t == CSA:
            x = a + "compressor.indexer."
            ih, idim = cfg.index_n_heads, cfg.index_head_dim
            shapes.update(
                {
                    x + "kv_proj.weight": (2 * idim, d),
                    x + "gate_proj.weight": (2 * idim, d),
                    x + "position_bias": (rate, 2 * idim),
                    x + "kv_norm.weight": (idim,),
                    x + "q_b_proj.weight": (ih * idim, cfg.q_lora_rank),
                    x + "scorer.weights_proj.weight": (ih, d),
                }
            )
    return shapes


def random_weights(cfg, seed=0, std=0.05):
    """Random parameters for every name of :func:`weight_shapes` (none left at zero).

    Norm weights and scales are ``1 + N(0, std)``; biases, sinks and position biases are
    ``N(0, 0.5)``; the hash table is uniform over the experts; the rest ``N(0, std)``.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in weight_shapes(cfg).items():
        if name.endswith("tid2eid"):
            out[name] = rng.integers(0, cfg.n_routed_experts, shape)
        elif "norm" in name or name.endswith(("scale", "hc_scale")):
            out[name] = 1.0 + std * rng.standard_normal(shape)
        elif name.endswith(("sinks", "position_bias", "base", "hc_base", "correction_bias")):
            out[name] = 0.5 * rng.standard_normal(shape)
        else:
            out[name] = std * rng.standard_normal(shape)
    return out
