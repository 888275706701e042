"""`pip install .` gives a working `v4hw`: a fresh virtual environment is built from
pyproject.toml alone (no requirements.txt) and generates the MA's Verilog.

It needs the package index and a couple of minutes, so it runs in `make regress` only.
"""

import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.regress


def test_pip_install_gives_a_working_v4hw(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / ("Scripts" if sys.platform == "win32" else "bin")
    install = subprocess.run(
        [bin_dir / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         str(ROOT)], capture_output=True, text=True)
    assert install.returncode == 0, install.stdout + install.stderr
    out = tmp_path / "v4hw_ma.v"
    # Run from tmp_path so nothing is imported from the checkout itself.
    run = subprocess.run([bin_dir / "v4hw", "verilog", "ma", "-o", str(out)], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    text = out.read_text()
    assert "module v4hw_ma(" in text
    assert "m_axi_gmem_araddr" in text
