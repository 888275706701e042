"""Line and toggle coverage of the Verilator runs (``make coverage``).

``V4HW_COVERAGE=1`` makes :func:`sim.runner.run_cocotb` build every Verilator
configuration with ``--coverage-line --coverage-toggle`` into a build directory of its own
(``build/sim/<config>-verilator-cov-<hash>/``); each run writes ``coverage.dat`` into its
run directory. ``tests/conftest.py`` also calls :func:`emit_src_everywhere` then, so the
generated Verilog keeps Amaranth's ``src`` attributes (the Python file and line of each
signal and statement), which the report maps the coverage points back through.

``python -m sim.coverage report`` merges the runs of each block with
``verilator_coverage --write``, writes its LCOV file with ``--write-info`` and its HTML with
``genhtml``, and prints per block: the lines and toggles hit, and the worst-covered modules.
"""

import functools

__all__ = ["emit_src_everywhere"]


def emit_src_everywhere():
    """Make ``amaranth.back.verilog.convert`` keep ``src`` attributes in this process.

    The testbenches convert with ``emit_src=False`` (a normal build must not change when a
    Python line moves); a coverage build needs them to map Verilog lines to Amaranth ones.
    Idempotent."""
    from amaranth.back import verilog

    if getattr(verilog.convert, "_v4hw_emit_src", False):
        return
    convert = verilog.convert

    @functools.wraps(convert)
    def with_src(*args, **kwargs):
        kwargs["emit_src"] = True
        return convert(*args, **kwargs)

    with_src._v4hw_emit_src = True
    verilog.convert = with_src
