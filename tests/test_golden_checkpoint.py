"""The lazy checkpoint reader (``golden.checkpoint``) against what transformers loads.

``tests/data/dsv4_ckpt/`` holds one tiny random model (4 layers: sliding, CSA, HCA, CSA; 64
wide) in three forms, written by ``tools/make_dsv4_fixture.py --only checkpoints``
(transformers 5.23, torch 2.13): ``hf_names_f32`` (transformers' state-dict names, float32,
one file), ``hf_default_bf16_sharded`` (transformers' default save: the published names in
the layers, under ``model.``, bf16, four shards and an index) and ``published_fp8_fp4``
(the published layout: FP8 E4M3 linears with block E8M0 scales, FP4 E2M1 experts with
[1, 32] E8M0 scales, a next-token-prediction layer, two shards). The expected values in
``tests/data/dsv4_ckpt_expected.npz`` are what ``DeepseekV4ForCausalLM.from_pretrained(dir,
dtype=torch.bfloat16)`` holds for each, the reference's layer outputs on the loaded FP8 / FP4
model (float64, 64 tokens), and torch's own decoding of every FP8 / E8M0 code and
transformers' FP4 unpacking of every byte.
"""

import json
import pathlib
import re
import shutil
import struct
import tracemalloc

import numpy as np
import pytest

from golden.checkpoint import Checkpoint, ExpertStack, largest_layer_memory, layer_memory
from golden.fp import bf16_to_f32
from golden.presets.deepseek_v4 import CSA, DeepseekV4Config
from golden.safetensors_np import SafetensorsFile, e2m1_unpack, e4m3fn_to_f32, e5m2_to_f32, e8m0_to_f32

DATA = pathlib.Path(__file__).parent / "data"
CKPT = DATA / "dsv4_ckpt"
FORMATS = ("hf_names_f32", "hf_default_bf16_sharded", "published_fp8_fp4")
TOL = 1e-5


@pytest.fixture(scope="module")
def expected():
    return np.load(DATA / "dsv4_ckpt_expected.npz")


def reference_value(exp, key):
    v = exp[key]
    if str(exp[f"dtype.{key}"]) == "bfloat16":
        return bf16_to_f32(v).astype(np.float64)
    return v.astype(np.float64)


def test_decoders_match_torch(expected):
    codes = np.arange(256, dtype=np.uint8)
    for key, fn in (("e4m3fn", e4m3fn_to_f32), ("e5m2", e5m2_to_f32), ("e8m0", e8m0_to_f32)):
        ref = expected[f"codes.{key}"]
        got = fn(codes)
        assert np.array_equal(got, ref, equal_nan=True), key
        assert np.array_equal(np.signbit(got), np.signbit(ref)), key  # -0.0 included
    unpacked = e2m1_unpack(codes[None, :].view(np.int8))[0]
    ref = expected["codes.e2m1x2"]
    assert np.array_equal(unpacked, ref) and np.array_equal(np.signbit(unpacked), np.signbit(ref))


def test_e4m3_against_its_definition():
    """The OCP E4M3 ("fn") table, independently: 448 is the largest finite value, 2^-9 the
    smallest subnormal, 0x7F / 0xFF are the only NaNs, no infinities."""
    v = e4m3fn_to_f32(np.arange(256, dtype=np.uint8))
    assert np.nanmax(v) == 448 and np.nanmin(v) == -448 and not np.isinf(v).any()
    assert list(np.flatnonzero(np.isnan(v))) == [0x7F, 0xFF]
    assert v[1] == 2.0**-9 and v[0x08] == 2.0**-6 and v[0x38] == 1.0 and v[0xB8] == -1.0


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_tensor_as_transformers_loads_it(expected, fmt):
    ckpt = Checkpoint(CKPT / fmt)
    assert ckpt.cfg.layer_types == ["sliding_attention", CSA, "heavily_compressed_attention", CSA]
    names = {k[len(fmt) + 1:] for k in expected.files if k.startswith(fmt + ".")}
    names = {n for n in names if not re.match(r"l\d+\.", n)}  # the layer outputs
    assert names - set(ckpt.shapes) == {"lm_head.weight"}  # the output head: no layer reads it
    names.discard("lm_head.weight")
    assert names == set(ckpt.shapes)
    for name in sorted(names):
        got, ref = ckpt.tensor(name), reference_value(expected, f"{fmt}.{name}")
        assert got.shape == ref.shape and np.array_equal(got, ref), f"{fmt}: {name}"


def test_schemes_and_formats_are_the_ones_claimed():
    stored = {fmt: Checkpoint(CKPT / fmt) for fmt in FORMATS}
    assert stored["hf_names_f32"].scheme == "transformers"
    assert stored["published_fp8_fp4"].scheme == "published"
    assert stored["hf_default_bf16_sharded"].scheme == "published+transformers"
    pub = stored["published_fp8_fp4"]
    assert pub.stored("layers.1.self_attn.q_b_proj.weight")[0] == "F8_E4M3"
    assert pub.stored("layers.1.self_attn.compressor.kv_proj.weight")[0] == "BF16"
    src = pub._experts[(1, "gate_up_proj", 0)][0]
    assert src.file.info(src.name)[0] == "I8" and src.scale_file.info(src.scale)[0] == "F8_E8M0"
    assert any(n.startswith("mtp.") for n in pub._where)  # present, and skipped


def test_experts_one_at_a_time(expected):
    ckpt = Checkpoint(CKPT / "published_fp8_fp4")
    w = ckpt.layer_weights(3)
    gu = w["layers.3.mlp.experts.gate_up_proj"]
    assert isinstance(gu, ExpertStack) and gu.shape == (4, 64, 64)
    full = reference_value(expected, "published_fp8_fp4.layers.3.mlp.experts.gate_up_proj")
    for e in range(4):
        assert np.array_equal(gu[e], full[e])
    with pytest.raises(IndexError):
        gu[4]


def test_layers_match_transformers_on_fp8_fp4_weights(expected):
    """Each layer built on the lazily read FP8 / FP4 checkpoint, fed the reference's input,
    against transformers' output on the weights it loaded from the same files. The indexer's
    picks agree except inside ties at the k-th place; the reference's are followed."""
    ckpt = Checkpoint(CKPT / "published_fp8_fp4")
    fmt = "published_fp8_fp4"
    ids = expected["input_ids"]
    pos = np.arange(ids.size)
    for i in range(ckpt.cfg.num_hidden_layers):
        layer = ckpt.layer(i)
        x = ckpt.embed(ids) if i == 0 else expected[f"{fmt}.l{i - 1}.output"].astype(np.float64)
        override = None
        if layer.type == CSA:
            rec = {}
            layer.forward(layer.init_state(), x, pos, ids, rec)
            ref = expected[f"{fmt}.l{i}.index_topk"]
            k = ref.shape[1]
            for s in range(ids.size):
                g, r = set(rec["index_topk"][s][rec["index_topk"][s] >= 0]), set(ref[s][ref[s] >= 0])
                if g != r:
                    sc = np.sort(rec["index_scores"][s][rec["index_valid"][s]])[::-1]
                    assert sc.size > k and sc[k - 1] == sc[k], f"layer {i} row {s}: picks differ, no tie"
            override = ref
        out = layer.forward(layer.init_state(), x, pos, ids, None, override)
        err = np.max(np.abs(out - expected[f"{fmt}.l{i}.output"]))
        assert err < TOL, f"layer {i}: max abs error {err:.3g}"


def test_layer_memory_formula_bounds_the_measured_peak():
    """Reading every tensor of a layer the lazy way (dense ones kept, experts one at a time)
    allocates at least the dense bytes and at most what layer_memory says."""
    ckpt = Checkpoint(CKPT / "published_fp8_fp4")
    i = 1  # a CSA layer: compressor and indexer
    predicted = layer_memory(ckpt.cfg, i)
    w = ckpt.layer_weights(i)
    tracemalloc.start()
    held = []
    for name in w:
        v = w[name]
        if isinstance(v, ExpertStack):
            for e in range(len(v)):
                v[e]
        else:
            held.append(v)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert predicted["dense_bytes"] <= peak <= predicted["total"], (peak, predicted)


def test_published_flash_layer_fits_24_gib():
    """V4-Flash (the published configuration): the largest layer read lazily fits a 24 GiB
    machine; its routed experts in float64 at once would not."""
    cfg = DeepseekV4Config.from_hf(DATA / "deepseek_v4_flash_config.json")
    assert cfg.num_hidden_layers == 43 and len(cfg.layer_types) == 43
    m = largest_layer_memory(cfg)
    assert m["total"] < 24 * 2**30 < m["all_experts_bytes"]
    assert m["type"] == CSA


# --- errors ------------------------------------------------------------------------------


def copy_ckpt(tmp_path, fmt="published_fp8_fp4"):
    d = tmp_path / fmt
    shutil.copytree(CKPT / fmt, d)
    return d


def write_safetensors(path, tensors):
    """A minimal writer for the error cases: {name: (dtype, shape, bytes)}."""
    header, blob = {}, b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + blob)


def write_numpy(path, arrays):
    dtypes = {"float32": "F32", "int64": "I64"}
    write_safetensors(path, {n: (dtypes[str(a.dtype)], a.shape, a.tobytes()) for n, a in arrays.items()})


def test_missing_and_unexpected_tensors(tmp_path):
    d = copy_ckpt(tmp_path)
    index = json.loads((d / "model.safetensors.index.json").read_text())
    index["weight_map"]["layers.1.attn.wq_b.scale_extra"] = index["weight_map"]["layers.1.attn.wq_b.weight"]
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="listed but not in their file"):
        Checkpoint(d)
    d = copy_ckpt(tmp_path / "b", "hf_names_f32")
    st = SafetensorsFile(d / "model.safetensors")
    keep = {n: st.raw(n) for n in st.names if n != "model.layers.2.self_attn.sinks"}
    write_numpy(d / "model.safetensors", keep)
    with pytest.raises(ValueError, match=r"layers\.2\.self_attn\.sinks.*missing"):
        Checkpoint(d)


def test_unexpected_tensor_is_named(tmp_path):
    d = copy_ckpt(tmp_path, "hf_names_f32")
    st = SafetensorsFile(d / "model.safetensors")
    tensors = {n: st.raw(n) for n in st.names}
    tensors["layers.0.self_attn.mystery.weight"] = np.zeros(2, np.float32)
    write_numpy(d / "model.safetensors", tensors)
    with pytest.raises(ValueError, match="mystery"):
        Checkpoint(d)


def test_shape_mismatch_is_named(tmp_path):
    d = copy_ckpt(tmp_path, "hf_names_f32")
    cfg = json.loads((d / "config.json").read_text())
    cfg["q_lora_rank"] = 16
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=r"q_a_proj.*shape \[32, 64\].*\[16, 64\]"):
        Checkpoint(d)


@pytest.mark.parametrize("content, msg", [
    (b"\x01\x00", "shorter than 8 bytes"),
    (struct.pack("<Q", 5) + b"nope!", "not JSON"),
    (struct.pack("<Q", 2**40), "implausible"),
])
def test_bad_files(tmp_path, content, msg):
    p = tmp_path / "x.safetensors"
    p.write_bytes(content)
    with pytest.raises(ValueError, match=msg):
        SafetensorsFile(p)


def test_bad_headers(tmp_path):
    p = tmp_path / "x.safetensors"
    write_safetensors(p, {"a": ("F32", (2,), b"\0" * 4)})
    with pytest.raises(ValueError, match="has 4 bytes"):
        SafetensorsFile(p)
    write_safetensors(p, {"a": ("C64", (1,), b"\0" * 8)})
    with pytest.raises(ValueError, match="C64"):
        SafetensorsFile(p)
    h = json.dumps({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                    "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}).encode()
    p.write_bytes(struct.pack("<Q", len(h)) + h + b"\0" * 6)
    with pytest.raises(ValueError, match="overlap"):
        SafetensorsFile(p)
    h = json.dumps({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}}).encode()
    p.write_bytes(struct.pack("<Q", len(h)) + h + b"\0" * 4)
    with pytest.raises(ValueError, match="outside the file"):
        SafetensorsFile(p)


def test_scale_grid_must_divide(tmp_path):
    d = copy_ckpt(tmp_path)
    index = json.loads((d / "model.safetensors.index.json").read_text())
    fname = index["weight_map"]["layers.0.attn.wq_a.scale"]
    st = SafetensorsFile(d / fname)
    tensors = {}
    for n in st.names:
        dtype, shape, _ = st.info(n)
        raw = np.ascontiguousarray(st.raw(n))
        if n == "layers.0.attn.wq_a.scale":  # (2, 4) -> (3, 4): 32 rows do not split in 3
            raw, shape = np.concatenate([raw, raw[:1]]), (3, shape[1])
        tensors[n] = (dtype, shape, raw.tobytes())
    write_safetensors(d / fname, tensors)
    ckpt = Checkpoint(d)
    with pytest.raises(ValueError, match=r"not divisible by the scale grid \(3, 4\)"):
        ckpt.tensor("layers.0.self_attn.q_a_proj.weight")


def test_directory_errors(tmp_path):
    with pytest.raises(ValueError, match="no config.json"):
        Checkpoint(tmp_path)
    (tmp_path / "config.json").write_text((CKPT / "hf_names_f32" / "config.json").read_text())
    with pytest.raises(ValueError, match="neither model.safetensors"):
        Checkpoint(tmp_path)
    ckpt = Checkpoint(CKPT / "hf_names_f32")
    with pytest.raises(ValueError, match="layers 0..3"):
        ckpt.layer_weights(4)
    with pytest.raises(ValueError, match="token ids"):
        ckpt.embed([128])
