"""What a cocotb run prints: one seed (``sim/runner.py`` hands the test's seed,
``V4HW_SEED`` or else the test's own, to cocotb as ``COCOTB_RANDOM_SEED``, so cocotb's
"Seeding Python random module with N" and ``test_seed``'s "seed=N" name the same N), a
line before and after a build, and a progress line with the cycles simulated."""

import re

import pytest

from sim import runner
from sim.bfm.progress import STEP_CYCLES
from sim.seed import SALT_VARIABLE, SEED_VARIABLE, default_seed

from .test_runner import TIMEOUT_S, TOP, Counter

TB = "tests.runner_lines_tb"


@pytest.mark.cocotb
@pytest.mark.parametrize("given", [None, 4242])
def test_cocotb_seed_is_the_tests_seed(given, request, monkeypatch, capfd):
    monkeypatch.delenv(SALT_VARIABLE, raising=False)
    if given is None:
        monkeypatch.delenv(SEED_VARIABLE, raising=False)
        expected = default_seed(request.node.nodeid)
    else:
        monkeypatch.setenv(SEED_VARIABLE, str(given))
        expected = given
    runner.run_cocotb("icarus", runner.ap_verilog(Counter(), TOP), TOP, TB,
                      config_name="runner-smoke", testcase="one_seed", timeout_s=TIMEOUT_S,
                      extra_env={"V4HW_EXPECT_SEED": str(expected)})
    assert f"Seeding Python random module with {expected}\n" in capfd.readouterr().out


@pytest.mark.cocotb
def test_build_and_progress_lines(monkeypatch, tmp_path, capfd):
    monkeypatch.setattr(runner, "BUILD_ROOT", tmp_path)
    runner.run_cocotb("icarus", runner.ap_verilog(Counter(), TOP), TOP, TB,
                      config_name="runner-lines", testcase="progress", timeout_s=TIMEOUT_S)
    out = capfd.readouterr().out
    name = re.search(r"^v4hw: building (runner-lines-icarus-[0-9a-f]{12}) \(icarus\) \.\.\.$",
                     out, re.MULTILINE)
    assert name, out
    assert re.search(rf"^v4hw: built {name[1]} in \d+ s$", out, re.MULTILINE), out
    cycles = [int(n) for n in re.findall(r"^v4hw: (\d+) cycles simulated in \d+ s$", out,
                                         re.MULTILINE)]
    assert cycles == [STEP_CYCLES * i for i in (1, 2, 3)], out
    # A second run reuses the build and says nothing of it.
    runner.run_cocotb("icarus", runner.ap_verilog(Counter(), TOP), TOP, TB,
                      config_name="runner-lines", testcase="progress", timeout_s=TIMEOUT_S)
    assert "v4hw: build" not in capfd.readouterr().out
