"""Seeds for random tests: every run prints one, one variable reruns it.

``V4HW_SEED=<N>`` in the environment fixes the seed; it reaches cocotb tests too, since
the simulator inherits the environment of pytest. Draw every random choice of a test from
the ``random.Random`` that :func:`test_seed` returns (not from the module ``random``,
which cocotb seeds on its own), or a rerun will not repeat the run.
"""

import os
import random
import shlex

__all__ = ["SEED_VARIABLE", "test_seed"]

SEED_VARIABLE = "V4HW_SEED"


def _rerun_command():
    # sim/runner.py passes the pytest node id into the simulation; in pytest itself
    # PYTEST_CURRENT_TEST holds it ("<node id> (call)").
    node = os.environ.get("V4HW_PYTEST_NODE")
    if not node and os.environ.get("PYTEST_CURRENT_TEST"):
        node = os.environ["PYTEST_CURRENT_TEST"].rsplit(" (", 1)[0]
    if node:
        return f"python -m pytest {shlex.quote(node)}"
    return "<the same command>"


def test_seed():
    """Return a ``random.Random`` seeded from ``V4HW_SEED``, or freshly if it is unset.

    Prints ``seed=<N>; rerun with: V4HW_SEED=<N> <command>``. Raises ``ValueError`` if
    ``V4HW_SEED`` is not a non-negative integer.
    """
    text = os.environ.get(SEED_VARIABLE, "").strip()
    if text:
        try:
            seed = int(text, 0)
        except ValueError:
            seed = -1
        if seed < 0:
            raise ValueError(f"{SEED_VARIABLE} must be a non-negative integer, not {text!r}")
    else:
        seed = random.SystemRandom().getrandbits(32)
    print(f"seed={seed}; rerun with: {SEED_VARIABLE}={seed} {_rerun_command()}", flush=True)
    return random.Random(seed)


# Not a pytest test, although the name starts with "test".
test_seed.__test__ = False
