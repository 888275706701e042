"""``golden.checkpoint.layer_report`` (what ``v4hw golden layer --checkpoint`` prints) on the
tiny FP8 / FP4 checkpoint of ``tests/data/dsv4_ckpt/`` (see test_golden_checkpoint.py)."""

import json
import pathlib

import numpy as np
import pytest

from golden.checkpoint import (
    Checkpoint,
    largest_layer_memory,
    layer_memory,
    layer_memory_report,
    layer_report,
    read_tokens,
)
from golden.hwpath_dsv4 import run_dsv4_layer
from golden.presets.deepseek_v4 import DeepseekV4Config

DATA = pathlib.Path(__file__).parent / "data"
CKPT = DATA / "dsv4_ckpt" / "published_fp8_fp4"
IDS = [5, 17, 99, 3, 64, 127, 0, 42]


@pytest.fixture(scope="module")
def report():
    """Layer 1 (CSA, top-2 routed) on 8 tokens, as JSON."""
    return json.loads(layer_report(CKPT, 1, tokens=IDS, as_json=True))


def test_report_is_the_hardware_path_on_the_real_input(report):
    """The stages are those of run_dsv4_layer on layer 1, fed the embedding of the tokens run
    through layer 0 in float64 (the real input of layer 1)."""
    ckpt = Checkpoint(CKPT)
    ids = np.array(IDS)
    pos = np.arange(ids.size)
    l0 = ckpt.layer(0)
    streams = l0.forward(l0.init_state(), ckpt.embed(ids), pos, ids)
    tr = run_dsv4_layer(ckpt.layer(1), streams, ids)
    assert [s["stage"] for s in report["stages"]] == [s.stage for s in tr.stages]
    assert [s["max_abs"] for s in report["stages"]] == [s.max_abs for s in tr.stages]
    assert report["type"] == "compressed_sparse_attention" and report["tokens"] == 8
    r = report["router"]
    assert r["routing"] == "top-2" and r["equal"] == tr.router.equal and r["tokens"] == 8


def test_report_memory(report):
    """The peak allocated while reading and running the layer is at least the layer's dense
    weights in float64; the predicted figure is layer_memory's."""
    cfg = Checkpoint(CKPT).cfg
    assert report["layer_memory"] == layer_memory(cfg, 1)
    assert report["peak_bytes"] >= report["layer_memory"]["dense_bytes"]


def test_report_text(tmp_path):
    """Token ids from a file; the text has the heading, the table, the router line and the
    memory line (layer 0: sliding, hash-routed)."""
    (tmp_path / "ids.txt").write_text(" ".join(map(str, IDS)))
    text = layer_report(CKPT, 0, tokens=tmp_path / "ids.txt")
    assert "layer 0 (sliding_attention, hash-routed MoE), 8 tokens" in text
    assert "| stage | unit | max abs error | relative | set agreement |" in text
    assert "| layer output (all tokens) | MA+VA |" in text
    assert "router: hash-routed" in text and "peak memory allocated" in text


def test_token_sources(tmp_path):
    """The accepted forms of a token list give the same ids; an int gives that many random ids."""
    (tmp_path / "a.txt").write_text("5, 17\n99 3")
    (tmp_path / "a.json").write_text("[5, 17, 99, 3]")
    np.save(tmp_path / "a.npy", np.array([5, 17, 99, 3]))
    for src in ("a.txt", "a.json", "a.npy"):
        assert list(read_tokens(tmp_path / src, 128)) == [5, 17, 99, 3]
    r = read_tokens(50, 128, seed=3)
    assert r.shape == (50,) and r.min() >= 0 and r.max() < 128
    assert list(r) == list(read_tokens(50, 128, seed=3))


@pytest.mark.parametrize("kwargs, msg", [
    (dict(layer=0, mode="fp16"), "mode must be"),
    (dict(layer=4), "layers 0..3"),
    (dict(layer=0, tokens=[1, 128]), r"ids must lie in 0..127"),
    (dict(layer=0, tokens=0), "at least 1"),
    (dict(layer=0, tokens="no/such/file"), "no file"),
])
def test_report_errors(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        layer_report(CKPT, **kwargs)


def test_report_int8(report):
    """mode int8 on layer 1: the stages and errors of run_dsv4_layer in int8 on the same
    input (other errors than the bf16 report's), every stage within 8 % relative."""
    ckpt = Checkpoint(CKPT)
    ids = np.array(IDS)
    l0 = ckpt.layer(0)
    streams = l0.forward(l0.init_state(), ckpt.embed(ids), np.arange(ids.size), ids)
    tr = run_dsv4_layer(ckpt.layer(1), streams, ids, "int8")
    got = json.loads(layer_report(CKPT, 1, tokens=IDS, mode="int8", as_json=True))
    assert got["mode"] == "int8"
    assert [s["stage"] for s in got["stages"]] == [s["stage"] for s in report["stages"]]
    assert [s["max_abs"] for s in got["stages"]] == [s.max_abs for s in tr.stages]
    assert [s["max_abs"] for s in got["stages"]] != [s["max_abs"] for s in report["stages"]]
    assert max(s["rel"] for s in got["stages"]) < 0.08


def test_report_fewer_tokens_than_the_rate():
    """Layer 2 (HCA, rate 16) on 8 tokens: no compressed entries, no compressor rows (the
    hardware path handles it, as the float64 layer does)."""
    report = json.loads(layer_report(CKPT, 2, tokens=IDS, as_json=True))
    assert report["type"] == "heavily_compressed_attention" and report["tokens"] == 8
    names = [s["stage"] for s in report["stages"]]
    assert "attention (queries selecting alike)" in names
    assert not [n for n in names if "compressor" in n]


def test_bad_token_file(tmp_path):
    (tmp_path / "ids.txt").write_text("1 2 three")
    with pytest.raises(ValueError, match="other than integer token ids"):
        layer_report(CKPT, 0, tokens=tmp_path / "ids.txt")


def test_flash_memory_report():
    cfg = DeepseekV4Config.from_hf(DATA / "deepseek_v4_flash_config.json")
    m = largest_layer_memory(cfg)
    text = layer_memory_report(DATA / "deepseek_v4_flash_config.json")
    assert f"largest layer: {m['layer']} ({m['type']}), 43 layers" in text
    assert f"total: {m['total']} bytes" in text
    assert json.loads(layer_memory_report(cfg, as_json=True)) == m
