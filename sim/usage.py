"""User errors of the command-line tools: one line on standard error, exit status 2.

:class:`UsageError` is what a tool raises for a bad argument; :func:`one_line_errors`
makes ``argparse`` parsers raise it instead of printing their usage and exiting;
:func:`check_output_file` and :func:`check_output_dir` refuse an output path that cannot
be written before any slow work starts.
"""

import argparse
import errno
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

__all__ = ["UsageError", "one_line_errors", "check_output_file", "check_output_dir"]


class UsageError(Exception):
    """A bad command line: reported as one line, exit status 2."""


def _error(parser, message):
    prog = parser.prog.removeprefix("v4hw").strip()
    raise UsageError(f"{prog}: {message}" if prog else message)


@contextmanager
def one_line_errors():
    """While active, every ``argparse`` parser raises :class:`UsageError` for a bad
    command line instead of printing its usage and exiting (``--help`` still prints and
    exits 0)."""
    saved = argparse.ArgumentParser.error
    argparse.ArgumentParser.error = _error
    try:
        yield
    finally:
        argparse.ArgumentParser.error = saved


def _reason(error):
    return error.strerror or os.strerror(error.errno or errno.EIO)


def _make_dir(path, what):
    path = Path(path)
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise UsageError(f"{what} {path}: {existing} is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{what} {path}: cannot create it ({_reason(error)})") from None


def check_output_file(path, what="output"):
    """Refuse ``path`` unless a file can be written there: not a directory, its folder
    creatable (it is created), the file itself writable (probed, and removed again when
    it did not exist)."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{what} {path} is a directory; give a file name")
    _make_dir(path.parent, f"{what} folder of")
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as error:
        raise UsageError(f"cannot write {what} {path} ({_reason(error)})") from None
    if not existed:
        path.unlink()


def check_output_dir(path, what="output folder"):
    """Refuse ``path`` unless files can be written in it (it is created if missing)."""
    path = Path(path)
    _make_dir(path, what)
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        raise UsageError(f"cannot write in {what} {path} ({_reason(error)})") from None
