"""A ``deepseek-v4`` checkpoint directory, read lazily: one layer, and one expert, at a time.

A directory holds ``config.json`` (read by :meth:`DeepseekV4Config.from_hf`) and either
``model.safetensors`` or shards with their ``model.safetensors.index.json``. Two naming
schemes are recognised and mapped one to one onto the golden model's names (transformers'
``DeepseekV4Model`` state dict without ``model.``):

- **transformers**: what ``save_pretrained`` writes (``model.layers.0.self_attn.q_a_proj.weight``,
  the routed experts fused as ``mlp.experts.gate_up_proj`` / ``down_proj``);
- **published**: the DeepSeek-V4 release's own names (``layers.0.attn.wq_a.weight``,
  ``layers.0.ffn.experts.7.w1.weight``, ``embed.weight``, ``hc_attn_fn``, …), with the
  quantized weights' scales beside them (``layers.0.attn.wq_a.scale``) and the
  next-token-prediction layers (``mtp.*``) and the output head, which a layer does not
  use, skipped.

Values are what ``DeepseekV4ForCausalLM.from_pretrained(dir, dtype=torch.bfloat16)``
(transformers 5.23; the published files' ``torch_dtype``) holds, then widened to float64:

- a weight with a scale is dequantized as transformers' ``Fp8Dequantize`` does: FP8 E4M3
  codes (``F8_E4M3``) or FP4 E2M1 codes packed two per byte (``I8``, the even element in
  the low nibble), times the scale of their block (E8M0 ``F8_E8M0``, or float), the block
  being the weight's shape divided by the scale grid's (which must divide it: 128 × 128 for
  the published linears, 1 × 32 for the FP4 experts), the product in float32, rounded once
  to bf16;
- a float tensor stored in bf16 or f16 keeps its value; one stored in float32 / float64
  keeps float32 precision where transformers keeps the module in float32
  (``KEEP_FLOAT32``: the hyper-connections, sinks, position biases, the selection bias and
  the norms) and is rounded to bf16 elsewhere;
- integer tensors (the hash table) are unchanged.

``tests/test_golden_checkpoint.py`` checks every tensor of a tiny checkpoint in each scheme
and format, bit for bit, against what transformers loaded from the same files
(``tools/make_dsv4_fixture.py --only checkpoints``), and the layers built on them against
transformers' layer outputs.

Nothing is read until asked for: the files are memory-mapped, :class:`LayerWeights` loads a
layer's tensors on first use, and :class:`ExpertStack` decodes one routed expert per
index, so a layer of the full-size model needs its dense weights plus one expert in memory
(:func:`layer_memory` computes that from a configuration).
"""

import json
import pathlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .fp import bf16_to_f32, float_to_bf16_rne
from .presets.deepseek_v4 import DeepseekV4Config, DeepseekV4Layer, weight_shapes
from .safetensors_np import SafetensorsFile, decode, e2m1_unpack

__all__ = ["Checkpoint", "LayerWeights", "ExpertStack", "KEEP_FLOAT32", "published_name", "layer_memory",
           "largest_layer_memory", "layer_report", "layer_memory_report", "read_tokens"]

# transformers' DeepseekV4PreTrainedModel._keep_in_fp32_modules_strict (module names)
KEEP_FLOAT32 = ("attn_hc", "ffn_hc", "hc_head", "sinks", "position_bias", "e_score_correction_bias",
                "q_a_norm", "kv_norm", "input_layernorm", "post_attention_layernorm", "norm")

# golden (transformers) name pieces -> the published checkpoints' names
_LEAVES = [
    ("self_attn.compressor.indexer.kv_proj.", "attn.indexer.compressor.wkv."),
    ("self_attn.compressor.indexer.gate_proj.", "attn.indexer.compressor.wgate."),
    ("self_attn.compressor.indexer.position_bias", "attn.indexer.compressor.ape"),
    ("self_attn.compressor.indexer.kv_norm.", "attn.indexer.compressor.norm."),
    ("self_attn.compressor.indexer.q_b_proj.", "attn.indexer.wq_b."),
    ("self_attn.compressor.indexer.scorer.weights_proj.", "attn.indexer.weights_proj."),
    ("self_attn.compressor.kv_proj.", "attn.compressor.wkv."),
    ("self_attn.compressor.gate_proj.", "attn.compressor.wgate."),
    ("self_attn.compressor.position_bias", "attn.compressor.ape"),
    ("self_attn.compressor.kv_norm.", "attn.compressor.norm."),
    ("self_attn.q_a_proj.", "attn.wq_a."),
    ("self_attn.q_b_proj.", "attn.wq_b."),
    ("self_attn.kv_proj.", "attn.wkv."),
    ("self_attn.o_a_proj.", "attn.wo_a."),
    ("self_attn.o_b_proj.", "attn.wo_b."),
    ("self_attn.q_a_norm.", "attn.q_norm."),
    ("self_attn.kv_norm.", "attn.kv_norm."),
    ("self_attn.sinks", "attn.attn_sink"),
    ("input_layernorm.", "attn_norm."),
    ("post_attention_layernorm.", "ffn_norm."),
    ("attn_hc.fn", "hc_attn_fn"),
    ("attn_hc.base", "hc_attn_base"),
    ("attn_hc.scale", "hc_attn_scale"),
    ("ffn_hc.fn", "hc_ffn_fn"),
    ("ffn_hc.base", "hc_ffn_base"),
    ("ffn_hc.scale", "hc_ffn_scale"),
    ("mlp.gate.e_score_correction_bias", "ffn.gate.bias"),
    ("mlp.gate.", "ffn.gate."),
    ("mlp.shared_experts.gate_proj.", "ffn.shared_experts.w1."),
    ("mlp.shared_experts.up_proj.", "ffn.shared_experts.w3."),
    ("mlp.shared_experts.down_proj.", "ffn.shared_experts.w2."),
]
_TOP = {"embed_tokens.weight": "embed.weight", "norm.weight": "norm.weight", "hc_head.hc_fn": "hc_head_fn",
        "hc_head.hc_base": "hc_head_base", "hc_head.hc_scale": "hc_head_scale"}
# stored tensors a layer never reads: the output head, the next-token-prediction layers
_SKIP = re.compile(r"^(model\.)?(lm_head|head)\.weight$|^(model\.)?mtp\.")
_EXPERTS = re.compile(r"^layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)$")


def published_name(name):
    """The published checkpoints' name of a golden (transformers) parameter name; the
    routed experts' fused tensors have none (they are stored per expert)."""
    if name in _TOP:
        return _TOP[name]
    m = re.match(r"layers\.(\d+)\.(.*)$", name)
    if m:
        for src, dst in _LEAVES:
            if m.group(2).startswith(src):
                return f"layers.{m.group(1)}.{dst}{m.group(2)[len(src):]}"
    raise KeyError(f"{name!r} has no published name")


def _keeps_float32(name):
    parts = name.split(".")
    return any(p in parts for p in KEEP_FLOAT32)


@dataclass(frozen=True)
class _Source:
    """Where a tensor is stored: its weight and, if quantized, its scale."""

    file: SafetensorsFile
    name: str
    scale_file: SafetensorsFile | None = None
    scale: str | None = None


def _to_bf16_value(x32):
    return bf16_to_f32(float_to_bf16_rne(np.asarray(x32, np.float32)))


def _dequantize(src, what):
    """transformers' Fp8Dequantize: codes × block scale in float32, rounded to bf16."""
    wdt, wshape, _ = src.file.info(src.name)
    sdt, sshape, _ = src.scale_file.info(src.scale)
    raw = src.file.raw(src.name)
    if wdt == "F8_E4M3":
        q = decode(wdt, raw)
    elif wdt == "I8":
        q = e2m1_unpack(raw)
    else:
        raise ValueError(f"{what}: a {wdt} weight with a scale is no format this reader dequantizes "
                         "(FP8 E4M3, or FP4 E2M1 packed in I8)")
    if sdt not in ("F8_E8M0", "F32", "BF16", "F16"):
        raise ValueError(f"{what}: scale dtype {sdt} (expected F8_E8M0 or a float)")
    s = decode(sdt, src.scale_file.raw(src.scale)).astype(np.float32)
    if q.ndim < 2 or s.ndim != q.ndim:
        raise ValueError(f"{what}: weight {list(q.shape)} and scale {list(s.shape)} do not pair")
    rows, cols = q.shape[-2:]
    srows, scols = s.shape[-2:]
    if rows % srows or cols % scols:
        raise ValueError(
            f"{what}: weight ({rows}, {cols}) is not divisible by the scale grid ({srows}, {scols})"
        )
    full = np.repeat(np.repeat(s, rows // srows, axis=-2), cols // scols, axis=-1)
    return _to_bf16_value(q * full)


def _value(src, golden):
    """A tensor's value as transformers loads it (bf16 model), as float64 (or integers)."""
    if src.scale is not None:
        return _dequantize(src, golden).astype(np.float64)
    dtype, _, _ = src.file.info(src.name)
    v = decode(dtype, src.file.raw(src.name))
    if v.dtype.kind in "iub":
        return np.array(v, np.int64)
    if dtype in ("F32", "F64"):
        v = np.asarray(v, np.float32) if _keeps_float32(golden) else _to_bf16_value(v)
    return np.array(v, np.float64)


class ExpertStack:
    """The routed experts of one layer, one fused tensor (``gate_up_proj`` ``(E, 2I, D)`` or
    ``down_proj`` ``(E, D, I)``): ``stack[e]`` decodes expert ``e`` only."""

    def __init__(self, ckpt, layer, kind):
        self.ckpt, self.layer, self.kind = ckpt, layer, kind
        self.shape = ckpt.shapes[f"layers.{layer}.mlp.experts.{kind}"]

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, e):
        e = int(e)
        if not 0 <= e < self.shape[0]:
            raise IndexError(f"expert {e} of {self.shape[0]}")
        return self.ckpt.expert(self.layer, e)[0 if self.kind == "gate_up_proj" else 1]


class LayerWeights(Mapping):
    """The tensors of one layer (golden names), each read on first use and kept; the routed
    experts as :class:`ExpertStack` (one expert at a time, none kept)."""

    def __init__(self, ckpt, layer):
        self.ckpt, self.layer = ckpt, layer
        self._names = [n for n in ckpt.shapes if n.startswith(f"layers.{layer}.")]
        self._cache = {}

    def __getitem__(self, name):
        if name not in self._cache:
            if name not in self._names:
                raise KeyError(name)
            m = _EXPERTS.match(name)
            ckpt = self.ckpt
            self._cache[name] = ExpertStack(ckpt, self.layer, m.group(2)) if m else ckpt.tensor(name)
        return self._cache[name]

    def __iter__(self):
        return iter(self._names)

    def __len__(self):
        return len(self._names)


class Checkpoint:
    """A checkpoint directory: ``cfg``, ``scheme``, :meth:`tensor`, :meth:`expert`,
    :meth:`layer`, :meth:`embed`; every tensor found and checked when opened."""

    def __init__(self, directory):
        d = pathlib.Path(directory)
        if not (d / "config.json").is_file():
            raise ValueError(f"{d}: no config.json")
        self.directory = d
        self.raw_config = json.loads((d / "config.json").read_text())
        self.cfg = DeepseekV4Config.from_hf(self.raw_config)
        self.shapes = weight_shapes(self.cfg)
        index = d / "model.safetensors.index.json"
        if index.is_file():
            weight_map = json.loads(index.read_text()).get("weight_map")
            if not isinstance(weight_map, dict):
                raise ValueError(f"{index}: no weight_map")
            files = {f: SafetensorsFile(d / f) for f in sorted(set(weight_map.values()))}
            self._where = {}
            for st in files.values():
                for n in st.names:
                    self._where[n] = st
            missing = [n for n, f in weight_map.items() if self._where.get(n) is not files[f]]
            if missing:
                raise ValueError(f"{index}: tensors listed but not in their file: {missing[:5]}")
        elif (d / "model.safetensors").is_file():
            st = SafetensorsFile(d / "model.safetensors")
            self._where = dict.fromkeys(st.names, st)
        else:
            raise ValueError(f"{d}: neither model.safetensors nor model.safetensors.index.json")
        names = set(self._where)
        # transformers' save_pretrained writes its own names (save_original_format=False) or,
        # by default, converts back: the published names inside the layers, its own at the
        # top, all under "model."; each name is looked up in both schemes, with or without
        # the prefix, and must be found exactly once
        self._prefix = "model." if any(n.startswith("model.") for n in names) else ""
        self._sources, used, kinds = {}, set(), set()
        self._experts = {}
        for name, shape in self.shapes.items():
            m = _EXPERTS.match(name)
            if m and self._prefix + name not in self._where:
                self._map_experts(int(m.group(1)), m.group(2), used)
                kinds.add("published")
                continue
            stored, kind = self._stored_name(name)
            kinds.add(kind)
            scale = stored.removesuffix(".weight") + ".scale"
            src = self._source(stored, scale if kind == "published" and scale in self._where else None)
            used.update(x for x in (src.name, src.scale) if x)
            self._check_shape(name, src, shape)
            self._sources[name] = src
        # "transformers", "published", or both (transformers' default save)
        self.scheme = "+".join(sorted(kinds - {"either"}))
        extra = sorted(n for n in names - used if not _SKIP.match(n))
        if extra:
            raise ValueError(f"{d}: {len(extra)} stored tensors map to no parameter, e.g. {extra[:5]}")

    def _stored_name(self, name):
        """The one stored tensor behind a golden name and its scheme (an error if there is
        none, or more than one)."""
        try:
            pub = published_name(name)
        except KeyError:
            pub = None
        options = [(name, "either" if pub == name else "transformers")]
        if pub is not None and pub != name:
            options.append((pub, "published"))
            if name.endswith("self_attn.kv_norm.weight"):  # transformers' save writes attn.norm
                options.append((pub.replace(".attn.kv_norm.", ".attn.norm."), "published"))
        found = [(self._prefix + o, k) for o, k in options if self._prefix + o in self._where]
        if len(found) != 1:
            what = "is missing" if not found else f"is stored twice, as {[f for f, _ in found]}"
            tried = " or ".join(repr(self._prefix + o) for o, _ in options)
            raise ValueError(f"{self.directory}: parameter {name} ({tried}) {what}")
        return found[0]

    def _source(self, name, scale=None):
        return _Source(self._where[name], name, self._where[scale] if scale else None, scale)

    def _map_experts(self, layer, kind, used):
        e_count = self.cfg.n_routed_experts
        parts = ("w1", "w3") if kind == "gate_up_proj" else ("w2",)
        for e in range(e_count):
            srcs = []
            for w in parts:
                stored = f"{self._prefix}layers.{layer}.ffn.experts.{e}.{w}.weight"
                if stored not in self._where:
                    raise ValueError(f"{self.directory}: tensor {stored!r} is missing")
                scale = stored.removesuffix(".weight") + ".scale"
                src = self._source(stored, scale if scale in self._where else None)
                used.update(x for x in (src.name, src.scale) if x)
                srcs.append(src)
            self._experts[(layer, kind, e)] = srcs
        shape = self.shapes[f"layers.{layer}.mlp.experts.{kind}"][1:]
        for src in self._experts[(layer, kind, 0)]:
            rows = shape[0] // len(parts)
            self._check_shape(src.name, src, (rows, shape[1]))

    def _check_shape(self, what, src, shape):
        dtype, stored, _ = src.file.info(src.name)
        got = stored[:-1] + (2 * stored[-1],) if src.scale and dtype == "I8" else stored
        if tuple(got) != tuple(shape):
            raise ValueError(f"{self.directory}: {src.name} ({what}) has shape {list(got)}, "
                             f"the configuration gives {list(shape)}")

    # --- reading -------------------------------------------------------------------------

    def tensor(self, name):
        """One parameter (golden name), decoded as transformers loads it, float64 (or int64)."""
        m = _EXPERTS.match(name)
        if m:
            layer = int(m.group(1))
            return np.stack([self.expert(layer, e)[0 if m.group(2) == "gate_up_proj" else 1]
                             for e in range(self.cfg.n_routed_experts)])
        if name not in self._sources:
            raise KeyError(f"no parameter {name!r}")
        return _value(self._sources[name], name)

    def expert(self, layer, e):
        """Routed expert ``e`` of ``layer``: ``(gate_up (2I, D), down (D, I))``."""
        if (layer, "gate_up_proj", e) in self._experts:
            gu = np.concatenate([_value(s, "mlp.experts") for s in self._experts[(layer, "gate_up_proj", e)]])
            (dn,) = [_value(s, "mlp.experts") for s in self._experts[(layer, "down_proj", e)]]
            return gu, dn
        out = []
        for kind in ("gate_up_proj", "down_proj"):
            src = self._sources[f"layers.{layer}.mlp.experts.{kind}"]
            dtype, _, _ = src.file.info(src.name)
            v = decode(dtype, src.file.raw(src.name)[e])
            if dtype in ("F32", "F64"):
                v = _to_bf16_value(v)
            out.append(np.array(v, np.float64))
        return tuple(out)

    def stored(self, name):
        """``(dtype, shape, nbytes)`` of the stored tensor (and its scale's bytes) behind a name."""
        src = self._sources[name]
        dtype, shape, n = src.file.info(src.name)
        return dtype, shape, n + (src.scale_file.info(src.scale)[2] if src.scale else 0)

    def layer_weights(self, layer):
        if not 0 <= layer < self.cfg.num_hidden_layers:
            raise ValueError(f"layer {layer}: the checkpoint has layers 0..{self.cfg.num_hidden_layers - 1}")
        return LayerWeights(self, layer)

    def layer(self, layer):
        """A :class:`DeepseekV4Layer` on this checkpoint's (lazily read) weights."""
        return DeepseekV4Layer(self.cfg, self.layer_weights(layer), layer)

    def embed(self, token_ids):
        """Embedding rows of ``token_ids`` repeated over the ``hc_mult`` streams (only those
        rows are read), as :meth:`DeepseekV4Model.embed`."""
        ids = np.asarray(token_ids, np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.cfg.vocab_size):
            raise ValueError(f"token ids must lie in 0..{self.cfg.vocab_size - 1}")
        src = self._sources["embed_tokens.weight"]
        dtype, _, _ = src.file.info(src.name)
        rows = decode(dtype, src.file.raw(src.name)[ids])
        if dtype in ("F32", "F64"):
            rows = _to_bf16_value(rows)
        e = np.array(rows, np.float64)
        return np.repeat(e[:, None, :], self.cfg.hc_mult, axis=1)

    def load_all(self):
        """Every parameter (golden names), decoded: for small checkpoints."""
        return {name: self.tensor(name) for name in self.shapes}


# --- memory -----------------------------------------------------------------------------


def layer_memory(cfg, layer):
    """Bytes one layer holds when read lazily, from the configuration alone: its dense
    tensors in float64 (integers in int64), one routed expert (gate_up and down, float64),
    and the largest decode's temporaries (float32 codes and product, bf16 bits: 10 bytes an
    element). Returns a dict of the parts and ``total``."""
    shapes = weight_shapes(cfg)
    pre = f"layers.{layer}."
    dense = {n: int(np.prod(s)) for n, s in shapes.items() if n.startswith(pre) and not _EXPERTS.match(n)}
    i, d = cfg.moe_intermediate_size, cfg.hidden_size
    expert = 3 * i * d
    largest = max([*dense.values(), 2 * i * d])
    out = {
        "layer": layer,
        "type": cfg.layer_types[layer],
        "dense_elements": sum(dense.values()),
        "dense_bytes": 8 * sum(dense.values()),
        "expert_bytes": 8 * expert,
        "decode_bytes": 10 * largest,
        "all_experts_bytes": 8 * expert * cfg.n_routed_experts,
    }
    out["total"] = out["dense_bytes"] + out["expert_bytes"] + out["decode_bytes"]
    return out


def largest_layer_memory(cfg):
    """:func:`layer_memory` of the layer that needs the most."""
    return max((layer_memory(cfg, i) for i in range(cfg.num_hidden_layers)), key=lambda m: m["total"])



# --- the layer report -------------------------------------------------------------------


def read_tokens(tokens, vocab_size, seed=0):
    """Token ids from ``tokens``: an int (that many random ids, ``seed``), a path (a ``.npy``
    array, a JSON list, or integers separated by white space or commas) or a sequence."""
    if isinstance(tokens, (int, np.integer)) and not isinstance(tokens, bool):
        if tokens < 1:
            raise ValueError(f"tokens: need at least 1 random token, got {tokens}")
        return np.random.default_rng(seed).integers(0, vocab_size, int(tokens))
    if isinstance(tokens, (str, pathlib.Path)):
        path = pathlib.Path(tokens)
        if not path.is_file():
            raise ValueError(f"tokens: no file {path}")
        if path.suffix == ".npy":
            ids = np.load(path)
        else:
            text = path.read_text().strip()
            try:
                if text.startswith("["):
                    ids = json.loads(text)
                else:
                    ids = [int(t) for t in re.split(r"[\s,]+", text) if t]
            except ValueError as e:
                raise ValueError(f"tokens: {path} holds other than integer token ids ({e})") from None
    else:
        ids = tokens
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.size == 0 or ids.dtype.kind not in "iu":
        raise ValueError(f"tokens: need a non-empty list of integer ids, got shape {ids.shape} {ids.dtype}")
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"tokens: ids must lie in 0..{vocab_size - 1}")
    return ids.astype(np.int64)


def _gib(n):
    return f"{n / 2**30:.3f} GiB"


def layer_report(checkpoint_dir, layer, tokens=64, mode="bf16", as_json=False, seed=0):
    """What ``v4hw golden layer --checkpoint DIR --layer N`` prints: layer ``layer`` of the
    checkpoint on ``tokens`` (see :func:`read_tokens`; positions 0..T-1), in float64 and on
    the hardware-exact path (:func:`golden.hwpath_dsv4.run_dsv4_layer`), with the per-stage
    error table of ``docs/golden/hw-path.md``, the expert-selection agreement, the peak
    memory allocated (``tracemalloc``) and :func:`layer_memory`'s figure for the layer.

    The layer's input is the real one: the embedding of the tokens run through layers
    0..N-1 in float64 (each read, run and dropped in turn). ``mode``: the MA's mode of the
    weight GEMMs, "bf16" or "int8" (see :mod:`golden.hwpath_dsv4`). Fewer tokens than a
    compressed layer's rate give no compressed entries (and no compressor rows).
    Markdown text, or JSON with ``as_json``.
    """
    import tracemalloc

    from .hwpath_dsv4 import run_dsv4_layer

    if mode not in ("bf16", "int8"):
        raise ValueError(f"mode must be 'bf16' or 'int8', got {mode!r}")
    tracemalloc.start()
    try:
        ckpt = Checkpoint(checkpoint_dir)
        cfg = ckpt.cfg
        if not isinstance(layer, (int, np.integer)) or not 0 <= layer < cfg.num_hidden_layers:
            raise ValueError(f"layer {layer}: the checkpoint has layers 0..{cfg.num_hidden_layers - 1}")
        ids = read_tokens(tokens, cfg.vocab_size, seed)
        pos = np.arange(ids.size)
        target = ckpt.layer(layer)
        streams = ckpt.embed(ids)
        for i in range(layer):
            below = ckpt.layer(i)
            streams = below.forward(below.init_state(), streams, pos, ids)
            del below
        tr = run_dsv4_layer(target, streams, ids, mode)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    mem = layer_memory(cfg, layer)
    routing = "hash-routed" if target.hash else f"top-{cfg.num_experts_per_tok}"
    r = tr.router
    if r is None:
        router = {"routing": routing, "note": "experts from the hash table, the same on both paths"}
    else:
        router = {"routing": routing, "tokens": r.tokens, "equal": r.equal,
                  "boundary_ties": r.boundary_ties, "differ_in_ties": r.differ_in_ties}
    out = {
        "checkpoint": str(checkpoint_dir),
        "scheme": ckpt.scheme,
        "layer": int(layer),
        "type": target.type,
        "tokens": int(ids.size),
        "mode": mode,
        "stages": [
            {"stage": s.stage, "unit": s.unit, "max_abs": s.max_abs, "rel": s.rel, "agree": s.agree}
            for s in tr.stages
        ],
        "router": router,
        "peak_bytes": int(peak),
        "layer_memory": mem,
    }
    if as_json:
        return json.dumps(out, indent=1)
    lines = [
        f"checkpoint {checkpoint_dir} ({ckpt.scheme} names), layer {layer} ({target.type}, {routing} MoE), "
        f"{ids.size} tokens, MA mode {mode}; input: the embedding through layers 0..{layer - 1} in float64"
        if layer else
        f"checkpoint {checkpoint_dir} ({ckpt.scheme} names), layer 0 ({target.type}, {routing} MoE), "
        f"{ids.size} tokens, MA mode {mode}; input: the embedding",
        "",
        tr.table(),
        "",
        r.line() if r is not None else "router: hash-routed; experts from the table, the same on both paths",
        f"peak memory allocated: {peak} bytes ({_gib(peak)}); the layer's weights read lazily "
        f"(layer_memory): {mem['total']} bytes ({_gib(mem['total'])})",
    ]
    return "\n".join(lines)


def layer_memory_report(config, as_json=False):
    """The largest layer of a configuration (a ``config.json`` path or dict) read lazily:
    :func:`largest_layer_memory`, as text or JSON."""
    cfg = config if isinstance(config, DeepseekV4Config) else DeepseekV4Config.from_hf(config)
    m = largest_layer_memory(cfg)
    if as_json:
        return json.dumps(m, indent=1)
    return "\n".join([
        f"largest layer: {m['layer']} ({m['type']}), {cfg.num_hidden_layers} layers",
        f"dense tensors, float64 ({m['dense_elements']} elements): {m['dense_bytes']} bytes",
        f"one routed expert, float64: {m['expert_bytes']} bytes",
        f"largest decode's temporaries: {m['decode_bytes']} bytes",
        f"total: {m['total']} bytes ({_gib(m['total'])})",
        f"(all {cfg.n_routed_experts} routed experts in float64 at once: {m['all_experts_bytes']} bytes, "
        f"{_gib(m['all_experts_bytes'])})",
    ])
