"""GTKWave save files (``.gtkw``) for the VCDs of cocotb runs.

Signals are chosen by patterns resolved against the names that the VCD really declares,
so one list of patterns serves both simulators although they name things differently:

* Icarus keeps Verilog escapes (``\\$1``, ``\\inp__payload.op``); Verilator drops the
  backslash. Patterns are matched against names without it.
* Verilator adds a ``$rootio`` scope beside the top with copies of the ports (less those
  renamed for C++, such as ``interrupt``); it is ignored.
* Amaranth names can contain ``.`` (``inp__payload.op`` is a field of port
  ``inp__payload``) and ``$`` (``$1``), so a name is not split at its dots.

A pattern is matched against a signal's path below the top scope: the scope names and the
signal name joined with ``.``, e.g. ``count``, ``core.count``, ``core.inp__payload.op``.
``*`` and ``?`` do not cross a scope boundary (they do match a ``.`` inside a name),
``**`` does; ``[...]`` is a character class. Bit ranges are not part of the path.

Each block's groups are named by its descriptor (:mod:`sim.blocks`); :func:`block_groups`
finds them from the Verilog module name of a standalone top.
"""

import difflib
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from vcd.gtkw import GTKWSave

__all__ = ["VcdSignal", "read_vcd_signals", "match_signals", "vcd_extent", "whole_run_zoom",
           "write_gtkw", "block_groups"]


@dataclass(frozen=True)
class VcdSignal:
    """A ``$var`` of a VCD header.

    ``scope`` are the enclosing scope names from the root, ``name`` is the reference as
    declared (escapes kept), ``bits`` the range (``"[7:0]"``) or ``""``.
    """

    scope: tuple
    name: str
    width: int
    bits: str

    @property
    def gtkw_name(self):
        """The name under which GTKWave knows the signal: ``top.core.count[7:0]``."""
        return ".".join(self.scope + (self.name,)) + self.bits


def read_vcd_signals(vcd_path):
    """Return the :class:`VcdSignal` of every ``$var`` in the header of ``vcd_path``.

    Reads only up to ``$enddefinitions``, so it is fast on any size of dump.
    """
    signals, scope, section = [], [], None
    with open(vcd_path, encoding="utf-8", errors="replace") as vcd:
        for line in vcd:
            for token in line.split():
                if section is not None:
                    if token != "$end":
                        section.append(token)
                        continue
                    keyword, words, section = section[0], section[1:], None
                    if keyword == "$scope":
                        scope.append(words[1])
                    elif keyword == "$upscope":
                        scope.pop()
                    elif keyword == "$var":
                        _kind, width, _id, name, *bits = words
                        signals.append(VcdSignal(tuple(scope), name, int(width), "".join(bits)))
                elif token == "$enddefinitions":
                    return signals
                elif token.startswith("$"):
                    section = [token]
    return signals


def _pattern_regex(pattern):
    # Paths join scopes with "\x00" (see _relative_path); a "." of the pattern matches
    # that or a dot inside a name, so "core.count" and "inp__payload.op" both work.
    parts = []
    for token in re.findall(r"\*\*|\*|\?|\.|\[[^\]]*\]|[^*?.\[]+|\[", pattern):
        if token == "**":
            parts.append(".*")
        elif token == "*":
            parts.append("[^\x00]*")
        elif token == "?":
            parts.append("[^\x00]")
        elif token == ".":
            parts.append("[.\x00]")
        elif token.startswith("[") and len(token) > 1:
            body = token[1:-1]
            if body.startswith("!"):
                body = "^" + body[1:]
            parts.append("[" + body.replace("\\", "\\\\") + "]")
        else:
            parts.append(re.escape(token))
    return re.compile("".join(parts), re.DOTALL)


def _design_root(signals, top):
    roots = []
    for signal in signals:
        if signal.scope and signal.scope[0] not in roots:
            roots.append(signal.scope[0])
    if top is not None:
        if top in roots:
            return (top,)
        # Some Verilator versions put the design below a `TOP` scope.
        for signal in signals:
            if signal.scope[:2] == ("TOP", top):
                return ("TOP", top)
        raise ValueError(f"the VCD has no top scope {top!r} (root scopes: {', '.join(roots)})")
    designs = [root for root in roots if root != "$rootio"]
    if len(designs) != 1:
        raise ValueError(f"cannot tell the design's top scope among {', '.join(roots)}; "
                         "pass top=")
    return (designs[0],)


def _relative_path(signal, root):
    # `\x00` joins the hierarchy so that `*` (any character but `\x00`) stops at scope
    # boundaries yet matches the dots inside Amaranth names.
    return "\x00".join(name.removeprefix("\\")
                       for name in signal.scope[len(root):] + (signal.name,))


def match_signals(signals, patterns, *, top=None):
    """Return the signals below ``top`` that match ``patterns``, in pattern order.

    Within one pattern the VCD's order is kept; a signal is listed once. Raises
    ``ValueError`` naming the patterns that match nothing.
    """
    root = _design_root(signals, top)
    below = [signal for signal in signals if signal.scope[:len(root)] == root]
    paths = [_relative_path(signal, root) for signal in below]
    chosen, unmatched = {}, []
    for pattern in patterns:
        regex = _pattern_regex(pattern)
        hits = [signal for signal, path in zip(below, paths, strict=True) if regex.fullmatch(path)]
        if not hits:
            unmatched.append(pattern)
        for signal in hits:
            chosen.setdefault(signal, None)
    if unmatched:
        known = [path.replace("\x00", ".") for path in paths]
        hints = sorted({hint for pattern in unmatched
                        for hint in difflib.get_close_matches(pattern, known, n=3)})
        raise ValueError(
            f"no signal below {'.'.join(root)} matches {', '.join(map(repr, unmatched))}"
            + (f"; similar: {', '.join(hints)}" if hints else ""))
    return list(chosen)


WINDOW = (1400, 800)      # GTKWave window, pixels
SIGNALS_WIDTH = 260       # its signal-name pane


def vcd_extent(vcd_path):
    """``(last timestamp, timescale multiplier)`` of a VCD: the last ``#t`` it holds (0 if
    none) and the number of its ``$timescale`` (10 for ``10ps``), so that the run spans
    ``last × multiplier`` of GTKWave's time units. Reads the header and the file's tail
    only."""
    multiplier = 1
    with open(vcd_path, "rb") as vcd:
        head = vcd.read(1 << 16).decode("utf-8", "replace")
        scale = re.search(r"\$timescale\s+(\d+)\s*(s|ms|us|ns|ps|fs)\s+\$end", head)
        if scale:
            multiplier = int(scale[1])
        vcd.seek(0, 2)
        size = vcd.tell()
        vcd.seek(max(0, size - (1 << 16)))
        tail = vcd.read().decode("utf-8", "replace")
    stamps = re.findall(r"^#(\d+)\s*$", tail, re.MULTILINE)
    return (int(stamps[-1]) if stamps else 0), multiplier


def whole_run_zoom(span, pixels=WINDOW[0] - SIGNALS_WIDTH - 40):
    """GTKWave's zoom level that shows ``span`` time units across ``pixels`` pixels of
    the wave pane (GTKWave draws ``2**-zoom`` units a pixel)."""
    return -math.log2(span / pixels) if span > pixels else 0.0


def write_gtkw(vcd_path, gtkw_path, groups, *, top=None):
    """Write a GTKWave save file for ``vcd_path`` showing ``groups``.

    ``groups`` is a list of ``(title, [pattern, ...])``; each becomes a GTKWave group
    with the matching signals (see the module docstring for patterns). ``top`` names the
    design's top scope; by default the single root scope other than ``$rootio``.
    Vectors are shown in hex, each under its path below the top. The save file opens with
    the whole run in view, and names the VCD by its path relative to the save file's
    folder, so a run folder can be moved or copied whole.
    """
    vcd_path, gtkw_path = Path(vcd_path).resolve(), Path(gtkw_path).resolve()
    signals = read_vcd_signals(vcd_path)
    root = _design_root(signals, top)
    resolved = [(title, match_signals(signals, patterns, top=root[-1]))
                for title, patterns in groups]
    last, multiplier = vcd_extent(vcd_path)
    dumpfile = os.path.relpath(vcd_path, gtkw_path.parent)
    with open(gtkw_path, "w") as file:
        save = GTKWSave(file)
        save.comment(f"written by sim/waves.py; open with: cd {gtkw_path.parent} && "
                     f"gtkwave {dumpfile} {gtkw_path.name}")
        save.dumpfile(dumpfile, abspath=False)
        save.savefile(gtkw_path.name, abspath=False)
        save.size(*WINDOW)
        save.zoom_markers(whole_run_zoom(last * multiplier))
        save.treeopen(".".join(root) + ".")
        save.signals_width(SIGNALS_WIDTH)
        for title, chosen in resolved:
            with save.group(title):
                for signal in chosen:
                    alias = _relative_path(signal, root).replace("\x00", ".")
                    save.trace(signal.gtkw_name, alias=alias if signal.width == 1 else
                               f"{alias}{signal.bits}")
    return gtkw_path


def block_groups(toplevel):
    """The GTKWave groups of the block whose standalone top is Verilog module
    ``toplevel`` (its descriptor in :mod:`sim.blocks`), or ``None`` for another module."""
    from sim.blocks import registry
    for block in registry().values():
        if block.verilog_name == toplevel:
            return block.load_gtkw_groups()
    return None
