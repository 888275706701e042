"""Seeds for random tests: every run prints one, one variable reruns it.

Each test has a fixed seed of its own, derived from its pytest node id (``make test`` is
the same run every time, so a failure there is a failure of the change, not of the
draw). ``V4HW_SEED=<N>`` in the environment replaces it, so a printed seed reruns a
case; it reaches cocotb tests too, since the simulator inherits the environment of
pytest, and ``sim/runner.py`` passes the node id into the simulation.
``V4HW_SEED_SALT=<S>`` draws other fixed seeds, one a test (the seed is derived from
the salt and the node id): ``make soak`` gives each round a new salt. The printed line
names the seed itself, so its rerun needs no salt.

Draw every random choice of a test from the ``random.Random`` that :func:`test_seed`
returns. In a simulation cocotb seeds the module ``random`` with the same seed
(``sim/runner.py`` passes it as ``COCOTB_RANDOM_SEED``), so what cocotb or a library
draws from it repeats on a rerun too, and cocotb's "Seeding Python random module with N"
names the same N.
"""

import hashlib
import os
import random
import shlex
from contextlib import contextmanager

__all__ = ["SEED_VARIABLE", "SALT_VARIABLE", "current_node", "default_seed", "seed_of",
           "test_seed", "rerun_command", "forced_seed"]

SEED_VARIABLE = "V4HW_SEED"
SALT_VARIABLE = "V4HW_SEED_SALT"
_forced = []


@contextmanager
def forced_seed(seed):
    """Within the block, :func:`seed_of` (so :func:`test_seed`) returns ``seed`` whatever
    the environment says: ``make soak`` runs one test body over many seeds in one
    simulation this way (:mod:`sim.soak_tb`)."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"a seed must be a non-negative integer, not {seed!r}")
    _forced.append(seed)
    try:
        yield seed
    finally:
        _forced.pop()


def current_node():
    """The pytest node id of the running test, or ``None`` outside pytest.

    In a simulation ``sim/runner.py`` passes it as ``V4HW_PYTEST_NODE``; in pytest itself
    ``PYTEST_CURRENT_TEST`` holds it (``"<node id> (call)"``).
    """
    node = os.environ.get("V4HW_PYTEST_NODE")
    if not node and os.environ.get("PYTEST_CURRENT_TEST"):
        node = os.environ["PYTEST_CURRENT_TEST"].rsplit(" (", 1)[0]
    return node or None


def default_seed(node, salt=""):
    """The fixed 32-bit seed of test ``node`` (``""`` outside pytest) with ``salt``."""
    text = f"{salt}\0{node or ''}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:4], "little")


def rerun_command(node, seed):
    """The shell command that reruns ``node`` with ``seed``."""
    where = f"python -m pytest {shlex.quote(node)}" if node else "<the same command>"
    return f"{SEED_VARIABLE}={seed} {where}"


def _parse(name, text):
    try:
        value = int(text, 0)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, not {text!r}")
    return value


def seed_of(node):
    """The seed of test ``node``: ``V4HW_SEED`` if set, else :func:`default_seed` of the
    node id and ``V4HW_SEED_SALT`` (empty if unset). Raises ``ValueError`` if either
    variable is not a non-negative integer. ``sim/runner.py`` gives it to cocotb as
    ``COCOTB_RANDOM_SEED``, so cocotb's own seed is this one too. Within
    :func:`forced_seed`, its seed."""
    if _forced:
        return _forced[-1]
    text = os.environ.get(SEED_VARIABLE, "").strip()
    salt = os.environ.get(SALT_VARIABLE, "").strip()
    salt = str(_parse(SALT_VARIABLE, salt)) if salt else ""
    return _parse(SEED_VARIABLE, text) if text else default_seed(node, salt)


def test_seed():
    """Return a ``random.Random`` seeded with :func:`seed_of` the running test.

    Prints ``seed=<N>; rerun with: V4HW_SEED=<N> <command>``. Raises ``ValueError`` if
    ``V4HW_SEED`` or ``V4HW_SEED_SALT`` is not a non-negative integer.
    """
    node = current_node()
    seed = seed_of(node)
    print(f"seed={seed}; rerun with: {rerun_command(node, seed)}", flush=True)
    return random.Random(seed)


# Not a pytest test, although the name starts with "test".
test_seed.__test__ = False
