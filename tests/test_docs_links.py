"""The repository stands alone: no file points outside it, every mention of the design
document names `docs/design.md`, and every relative link of the Markdown docs resolves."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = {".py", ".md", ".rdl", ".toml", ".txt", ".h", ".json", ".html", ".cfg",
                 ".tcl", ".xdc", ".lpf", ".gtkw", ""}
# The folder outside the repository that earlier files named, spelt in pieces so that this
# file does not itself name it.
_SHARED = "shared"
OUTSIDE = re.compile(r"\.\./" + _SHARED + r"|(?<![\w/])" + _SHARED + r"/seeds|(?<![\w./-])DESIGN\.md")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def tracked_files():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    for name in out:
        path = ROOT / name
        if path.suffix in TEXT_SUFFIXES and path.is_file() and path.stat().st_size < 4_000_000:
            yield path


def test_no_file_points_outside_the_repository():
    found = []
    for path in tracked_files():
        if path == Path(__file__).resolve():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "paths outside the repository:\n" + "\n".join(found)


def test_markdown_links_resolve():
    broken = []
    for path in tracked_files():
        if path.suffix != ".md":
            continue
        for target in LINK.findall(path.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            file_part = target.split("#", 1)[0]
            if file_part and not (path.parent / file_part).exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_the_checks_find_what_they_look_for():
    assert OUTSIDE.search("see ../" + _SHARED + "/x.md") and OUTSIDE.search("DESIGN.md, 3.2")
    assert not OUTSIDE.search("docs/design.md") and not OUTSIDE.search("the design notes")
    assert LINK.findall("a [b](c/d.md#e) f") == ["c/d.md#e"]
