"""The project's Python passes ruff with the rules of pyproject.toml."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    if ruff is None:
        pytest.fail("ruff is not installed in this environment (make setup installs it)")
    done = subprocess.run([ruff, "check", "--output-format", "concise", "."], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def _private_names(tree):
    """The private names (one leading underscore) that a module defines: its functions,
    classes, methods and module-level variables, and the ``self._x`` attributes its
    methods assign."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


def _cocotb_runner_misuse(tree, private):
    """Where ``tree`` (a module that imports ``cocotb_tools``) subclasses one of its
    classes, or names a private member of ``cocotb_tools.runner``."""
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cocotb_tools"):
            imported |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            imported |= {(alias.asname or alias.name).split(".")[0] for alias in node.names
                         if alias.name.startswith("cocotb_tools")}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            used = {name.id for base in node.bases for name in ast.walk(base)
                    if isinstance(name, ast.Name)}
            if used & imported:
                found.append((node.lineno, f"class {node.name} subclasses cocotb_tools"))
            found += [(item.lineno, f"{node.name}.{item.name} overrides cocotb's private method")
                      for item in node.body
                      if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and item.name in private]
        elif isinstance(node, ast.Attribute) and node.attr in private:
            found.append((node.lineno, f".{node.attr} is private to cocotb_tools.runner"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cocotb_tools"):
            found += [(node.lineno, f"imports the private {alias.name}") for alias in node.names
                      if alias.name in private]
    return found


def test_cocotb_runner_through_its_public_api_only():
    """sim/runner.py drives cocotb's runner by get_runner(), build() and test() and their
    documented arguments: no module of the project subclasses a cocotb_tools class or
    names a private member of cocotb_tools.runner, so a cocotb upgrade that keeps the
    public API keeps the runner working."""
    from cocotb_tools import runner as cocotb_runner

    private = _private_names(ast.parse(Path(cocotb_runner.__file__).read_text()))
    assert {"_build_command", "_test_command", "_set_env_test", "_get_sim_cmd_prefix"} <= private
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    users, misuse = [], []
    for name in files:
        source = (ROOT / name).read_text()
        if "cocotb_tools" not in source:
            continue
        tree = ast.parse(source)
        if not any(isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (getattr(node, "module", None) or alias.name).startswith("cocotb_tools")
                for alias in node.names) for node in ast.walk(tree)):
            continue
        users.append(name)
        misuse += [f"{name}:{line}: {what}" for line, what in _cocotb_runner_misuse(tree, private)]
    assert "sim/runner.py" in users
    assert not misuse, "\n".join(misuse)
