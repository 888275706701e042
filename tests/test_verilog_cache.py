"""sim.verilog_cache: generated Verilog kept on disk by the state of its sources."""

import functools
import shutil
import subprocess
import sys

import pytest

from sim import verilog_cache
from sim.verilog_cache import disk_cached

CALLS = []


def _verilog(width, name="top"):
    CALLS.append((width, name))
    return f"module {name} (input [{width - 1}:0] a); endmodule\n"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(verilog_cache, "CACHE_ROOT", tmp_path)
    monkeypatch.delenv("V4HW_VERILOG_CACHE", raising=False)
    CALLS.clear()
    return tmp_path


def test_a_second_process_reads_the_text_instead_of_elaborating(cache_dir):
    first = disk_cached(_verilog)            # two decorations: two process caches
    second = disk_cached(_verilog)
    assert first(8) == second(8) == "module top (input [7:0] a); endmodule\n"
    assert CALLS == [(8, "top")]
    assert len(list(cache_dir.glob("_verilog-*.v"))) == 1
    second(8, name="other")                  # other arguments: another key
    assert CALLS == [(8, "top"), (8, "other")]


def test_a_source_edit_makes_a_new_key(cache_dir, monkeypatch):
    disk_cached(_verilog)(4)
    monkeypatch.setattr(verilog_cache, "source_digest", functools.cache(lambda: "edited"))
    disk_cached(_verilog)(4)
    assert CALLS == [(4, "top"), (4, "top")]
    assert len(list(cache_dir.glob("_verilog-*.v"))) == 2


def test_a_coverage_process_has_entries_of_its_own(cache_dir, monkeypatch):
    """Under ``sim.coverage.emit_src_everywhere`` (``V4HW_COVERAGE=1``) the converter
    keeps ``src`` attributes: such a text is another key, in both directions."""
    from amaranth.back import verilog

    from sim.coverage import emit_src_everywhere

    disk_cached(_verilog)(3)
    monkeypatch.setattr(verilog, "convert", verilog.convert)   # restored after the test
    emit_src_everywhere()
    disk_cached(_verilog)(3)
    disk_cached(_verilog)(3)
    assert CALLS == [(3, "top"), (3, "top")]
    assert len(list(cache_dir.glob("_verilog-*.v"))) == 2


def test_off_elaborates_every_time(cache_dir, monkeypatch):
    monkeypatch.setenv("V4HW_VERILOG_CACHE", "0")
    disk_cached(_verilog)(2)
    disk_cached(_verilog)(2)
    assert CALLS == [(2, "top"), (2, "top")]
    assert not list(cache_dir.iterdir())


def test_what_is_not_text_is_refused(cache_dir):
    with pytest.raises(TypeError, match="not Verilog text"):
        disk_cached(lambda: b"bytes")()
    assert not list(cache_dir.glob("*.v"))


def test_the_digest_follows_every_design_source(tmp_path):
    """An edit of any file of the packages changes the digest (run in a copy of the
    tree, in a fresh process, so that the session's own digest is not touched)."""
    script = ("import sys; sys.path.insert(0, sys.argv[1]); "
              "from sim.verilog_cache import source_digest; print(source_digest())")
    root = verilog_cache.REPO_ROOT
    for package in verilog_cache.PACKAGES:
        shutil.copytree(root / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    before = subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True,
                            capture_output=True, text=True).stdout
    with open(tmp_path / "hdl" / "ma" / "array.py", "a") as f:
        f.write("\n# an edit\n")
    after = subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True,
                           capture_output=True, text=True).stdout
    assert before.strip() and after.strip() and before != after
