"""Generated Verilog kept on disk, so each design is elaborated once per source state.

Elaborating a top is seconds to minutes of Python (the tests' tile about 44 processor
seconds, the VA at L=8 30, the MA at P=8 16), and every pytest-xdist worker, soak
process and rerun of one test used to pay it again before the simulator build cache
(:mod:`sim.runner`) could even look at the text. :func:`disk_cached` keeps the text of a
Verilog-generating function under ``build/verilog/``, keyed by everything the text can
depend on:

- the source of the project's packages (``spec``, ``hdl``, ``golden``, ``plan``,
  ``sim``: every ``.py``, ``.rdl`` and ``.vlt`` file, path and bytes),
- the source file of the generating function (a test module's waivers or parameters),
- the function's qualified name and its arguments (their ``repr``),
- the Amaranth version, and whether this process's ``verilog.convert`` keeps ``src``
  attributes whatever its caller asks (a coverage run, ``sim.coverage.emit_src_everywhere``:
  its text must neither come from nor go to a normal run's entry).

Any edit of those files makes a new key, so a stale text is never used; at worst an
edit that changes no gate costs one elaboration. Concurrent callers of one key wait on a
lock for the first one's text instead of elaborating it again. ``V4HW_VERILOG_CACHE=0``
turns the cache off (every call elaborates, as :func:`functools.cache` alone would).
"""

import fcntl
import functools
import hashlib
import inspect
import os
from pathlib import Path

import amaranth

from .coverage import emits_src_everywhere
from .runner import REPO_ROOT

__all__ = ["CACHE_ROOT", "PACKAGES", "source_digest", "disk_cached"]

CACHE_ROOT = REPO_ROOT / "build" / "verilog"
PACKAGES = ("spec", "hdl", "golden", "plan", "sim")
_SUFFIXES = (".py", ".rdl", ".vlt")


@functools.cache
def source_digest():
    """SHA-256 of the project's design sources (paths and bytes), read once a process."""
    digest = hashlib.sha256(f"amaranth {amaranth.__version__}\0".encode())
    for package in PACKAGES:
        root = REPO_ROOT / package
        for path in sorted(p for p in root.rglob("*") if p.suffix in _SUFFIXES and p.is_file()):
            digest.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _key(function, args, kwargs):
    mode = "src" if emits_src_everywhere() else "as asked"
    digest = hashlib.sha256(f"{source_digest()}\0{mode}".encode())
    digest.update(Path(inspect.getsourcefile(function)).read_bytes())
    call = f"{function.__module__}.{function.__qualname__}{args!r}{sorted(kwargs.items())!r}"
    digest.update(call.encode())
    return digest.hexdigest()[:24]


def disk_cached(function):
    """Decorate a function that returns Verilog text (from hashable arguments with a
    stable ``repr``): once per process (like :func:`functools.cache`) and once per key
    on disk."""
    @functools.cache
    @functools.wraps(function)
    def cached(*args, **kwargs):
        if os.environ.get("V4HW_VERILOG_CACHE", "1") == "0":
            return function(*args, **kwargs)
        CACHE_ROOT.mkdir(parents=True, exist_ok=True)
        key = _key(function, args, kwargs)
        path = CACHE_ROOT / f"{function.__name__}-{key}.v"
        with open(CACHE_ROOT / f"{function.__name__}-{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if path.exists():
                return path.read_text()
            text = function(*args, **kwargs)
            if not isinstance(text, str):
                raise TypeError(f"{function.__qualname__} returned {type(text).__name__}, "
                                "not Verilog text")
            scratch = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            scratch.write_text(text)
            scratch.replace(path)
            return text
    return cached
