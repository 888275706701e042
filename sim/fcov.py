"""Functional coverage of the block benches (cocotb-coverage): what the commands were.

Line and toggle coverage (:mod:`sim.coverage`) say which RTL ran; this says which kinds of
command the tests asked for and what became of them. Each block's bench samples one record
per command (MA, VA), per client request (MC) and per packet and reservation request
(Muon), where it sees the result:

* ``sim.ma_driver.MaBench.run``: MODE, accumulate, the shape class of (M, K, N), ERROR;
* ``sim.va_driver.VaBench.run``: OPCODE, the LENGTH class, ERROR;
* ``sim.mc_driver.McBench`` (a request's last response item): op, channel, class, the
  length class, the code of its response;
* ``sim.muon_driver.MuonBench.finish`` (every packet): virtual channel, class, the length
  class, what became of it (delivered, dropped stale, dropped for a bad destination),
  whether its source had to wait for the mesh; ``MuonBench.reserve``: the answer;

each with whether the bench had back-pressure on (random pauses on the AXI channels or the
client links, a random ``ready`` on the ejection ports). :data:`MODELS` defines the bins
and, per block, the crosses of two of them (opcode × code, opcode × length class,
opcode × back-pressure, code × back-pressure, ...), without the combinations that cannot
happen (``ignore``: a READ never gets a write's error, a reserved packet is never dropped).

``V4HW_FCOV=1`` turns it on (``make coverage`` sets it; the normal builds serve, no
coverage build is needed): the first sample of a simulation registers an export at
cocotb's shutdown, which writes the database (cocotb-coverage's YAML) as ``fcov.yml`` into
the run's directory, next to ``results.xml``. Off, :func:`sample` returns at its first
test. A value outside its coverpoint's bins is an error (a bin the model forgot would
otherwise count nothing, silently).

``python -m sim.coverage`` merges every ``fcov.yml`` under ``build/sim/`` (cocotb-coverage's
``merge_coverage``) and reports each block's bins hit and holes
(:func:`sim.coverage.functional_report`).
"""

import os
from pathlib import Path

__all__ = ["ENV", "MODELS", "DB_NAME", "enabled", "sample", "export", "reset",
           "model_bins", "ma_shape_class", "va_length_class", "mc_length_class",
           "muon_length_class"]

ENV = "V4HW_FCOV"
DB_NAME = "fcov.yml"
BP = ["off", "on"]
CODES = ["NONE", "BAD_COMMAND", "MISALIGNED", "TAT_MISS", "BAD_TAT", "AXI_READ_ERROR",
         "AXI_WRITE_ERROR"]

# Length classes. MA: the shape (M, K, N) against the array's P and the 128 limit.
MA_SHAPES = ["bad", "1x1x1", "<P", "=P", "kP", "ragged", "max"]
# VA: LENGTH (elements) against L, up to MAX_LENGTH (65 536).
VA_LENGTHS = ["bad", "1", "<L", "L", "kL", "ragged", "long", "max"]
VA_LONG = 4096
# MC: request bytes against the bus word (16 bytes at DATA_WIDTH 128) and the 64-byte line.
MC_LENGTHS = ["0", "1", "<word", "word", "<line", ">=line"]
MUON_LENGTHS = ["1", "2-3", "4+"]

_VA_OPS = None


def _va_ops():
    global _VA_OPS
    if _VA_OPS is None:
        from spec.codes import VaOpcode
        _VA_OPS = [op.name for op in VaOpcode] + ["invalid"]
    return _VA_OPS


def _models():
    from spec.codes import MaMode, McOp, MuonVc
    mc_codes = ["NONE", "BAD_COMMAND", "AXI_READ_ERROR", "AXI_WRITE_ERROR"]
    return {
        "ma": {
            "points": {"mode": [m.name for m in MaMode], "accumulate": [False, True],
                       "shape": MA_SHAPES, "code": CODES, "bp": BP},
            "crosses": [("mode", "code"), ("mode", "shape"), ("mode", "bp"),
                        ("mode", "accumulate"), ("shape", "code"), ("code", "bp")],
            # a bad shape is BAD_COMMAND, checked before any address
            "ignore": {("shape", "code"): [("bad", c) for c in CODES if c != "BAD_COMMAND"]},
        },
        "va": {
            "points": {"op": _va_ops(), "length": VA_LENGTHS,
                       "code": [c for c in CODES if c not in ("TAT_MISS", "BAD_TAT")],
                       "bp": BP},
            "crosses": [("op", "code"), ("op", "length"), ("op", "bp"), ("code", "bp"),
                        ("length", "code")],
            "ignore": {
                ("op", "code"): [("invalid", c) for c in CODES if c != "BAD_COMMAND"],
                # refused on OPCODE alone: its LENGTH and the bus do not matter
                ("op", "length"): [("invalid", n) for n in VA_LENGTHS],
                ("op", "bp"): [("invalid", "on")],
                ("length", "code"): [("bad", c) for c in CODES if c != "BAD_COMMAND"],
            },
        },
        "mc": {
            "points": {"op": [o.name for o in McOp], "channel": [0, 1, 2, 3],
                       "cls": list(range(8)), "length": MC_LENGTHS, "code": mc_codes,
                       "bp": BP},
            "crosses": [("op", "code"), ("op", "length"), ("op", "bp"), ("op", "channel"),
                        ("code", "bp"), ("length", "code")],
            "ignore": {
                ("op", "code"): [("READ", "AXI_WRITE_ERROR"), ("WRITE", "AXI_READ_ERROR")],
                # length 0 is BAD_COMMAND; BAD_COMMAND otherwise needs a range past 2**48
                ("length", "code"): [("0", c) for c in mc_codes if c != "BAD_COMMAND"],
            },
        },
        "muon": {
            "points": {"vc": [v.name for v in MuonVc], "cls": list(range(8)),
                       "length": MUON_LENGTHS,
                       "outcome": ["delivered", "stale_drop", "bad_dst"],
                       "waited": [False, True], "bp": BP},
            "crosses": [("vc", "outcome"), ("cls", "outcome"), ("vc", "length"),
                        ("vc", "bp"), ("outcome", "bp"), ("length", "outcome"),
                        ("vc", "waited")],
            # a reserved packet is never dropped (its route is booked)
            "ignore": {("vc", "outcome"): [("RESERVED", "stale_drop"), ("RESERVED", "bad_dst")]},
            "groups": {"rsv": {"points": {"answer": ["granted", "full", "retry",
                                                     "bad_request"]}}},
        },
    }


MODELS = None
"""``{block: {"points": {name: bins}, "crosses": [(a, b)], "ignore": {(a, b): [bins]},
"groups": {group: {...}}}}``: the coverage model (built on first use)."""


def _model_table():
    global MODELS
    if MODELS is None:
        MODELS = _models()
    return MODELS


def model_bins(block, group=None):
    """``{item name: [bins]}`` of a block's model (a group's with ``group``), as the
    exported database names them (crosses' bins as the ``str`` of their tuples)."""
    spec = _model_table()[block]
    if group is not None:
        spec = spec["groups"][group]
    prefix = f"{block}.{group}" if group else block
    items = {f"{prefix}.{name}": list(bins) for name, bins in spec["points"].items()}
    for a, b in spec.get("crosses", ()):
        ignored = set(spec.get("ignore", {}).get((a, b), ()))
        items[f"{prefix}.{a}_x_{b}"] = [str((x, y)) for x in spec["points"][a]
                                        for y in spec["points"][b] if (x, y) not in ignored]
    return items


def enabled():
    return os.environ.get(ENV, "").strip().lower() in ("1", "yes", "true", "on")


_ENABLED = enabled()
_samplers = {}
_export_registered = False


def _sampler(prefix, spec):
    """The sampling function of one model (``prefix``: ``block`` or ``block.group``),
    decorated with its coverpoints and crosses."""
    from cocotb_coverage.coverage import CoverCross, CoverPoint

    decorators = []
    for name, bins in spec["points"].items():
        decorators.append(CoverPoint(f"{prefix}.{name}", xf=lambda record, n=name: record[n],
                                     bins=list(bins)))
    for a, b in spec.get("crosses", ()):
        decorators.append(CoverCross(f"{prefix}.{a}_x_{b}",
                                     items=[f"{prefix}.{a}", f"{prefix}.{b}"],
                                     ign_bins=list(spec.get("ignore", {}).get((a, b), ()))))

    def _fcov_record(record):
        return None

    # The points must see a record before the crosses do: the first decorator is outermost.
    for decorator in reversed(decorators):
        _fcov_record = decorator(_fcov_record)
    return _fcov_record


def sample(block, group=None, **values):
    """Count one record of ``block`` (``group``: one of its groups, e.g. Muon's ``rsv``);
    ``values``: one per coverpoint (``bp`` as a bool). Does nothing unless ``V4HW_FCOV``
    is set."""
    if not _ENABLED:
        return
    spec = _model_table()[block]
    if group is not None:
        spec = spec["groups"][group]
    prefix = f"{block}.{group}" if group else block
    if "bp" in values:
        values["bp"] = BP[bool(values["bp"])]
    if set(values) != set(spec["points"]):
        raise ValueError(f"functional coverage of {prefix} samples {sorted(spec['points'])}, "
                         f"not {sorted(values)}")
    for name, value in values.items():
        if value not in spec["points"][name]:
            raise ValueError(f"functional coverage of {prefix}: {name} = {value!r} is in no "
                             f"bin ({spec['points'][name]})")
    sampler = _samplers.get(prefix)
    if sampler is None:
        sampler = _samplers[prefix] = _sampler(prefix, spec)
        _register_export()
    sampler(values)


def _register_export():
    global _export_registered
    if _export_registered:
        return
    _export_registered = True
    try:
        import cocotb._shutdown as shutdown
    except ImportError:  # outside a simulation: the caller exports
        return
    shutdown.register(export)


def export(path=None):
    """Write the database (YAML) to ``path``; default: ``fcov.yml`` beside cocotb's
    ``results.xml`` (the run's directory). Returns the path, or None if nothing was
    sampled."""
    from cocotb_coverage.coverage import coverage_db

    if not _samplers:
        return None
    if path is None:
        results = os.environ.get("COCOTB_RESULTS_FILE")
        path = (Path(results).parent if results else Path.cwd()) / DB_NAME
    coverage_db.export_to_yaml(str(path))
    return Path(path)


def reset():
    """Forget every sample and model (a unit test's fresh start)."""
    from cocotb_coverage.coverage import coverage_db

    roots = {prefix.split(".")[0] for prefix in _samplers}
    for name in [n for n in coverage_db if n.split(".")[0] in roots]:
        del coverage_db[name]
    _samplers.clear()


# --- Length classes --------------------------------------------------------------------------

def ma_shape_class(m, k, n, p, max_dim=128):
    dims = (m, k, n)
    if min(dims) < 1 or max(dims) > max_dim:
        return "bad"
    if dims == (1, 1, 1):
        return "1x1x1"
    if max(dims) == max_dim:
        return "max"
    if max(dims) < p:
        return "<P"
    if max(dims) == p:
        return "=P"
    return "kP" if all(d % p == 0 for d in dims) else "ragged"


def va_length_class(length, lanes, max_length):
    if not 1 <= length <= max_length:
        return "bad"
    if length == 1:
        return "1"
    if length == max_length:
        return "max"
    if length > VA_LONG:
        return "long"
    if length < lanes:
        return "<L"
    if length == lanes:
        return "L"
    return "kL" if length % lanes == 0 else "ragged"


def mc_length_class(length, word_bytes, line_bytes):
    if length <= 1:
        return str(max(length, 0))
    if length < word_bytes:
        return "<word"
    if length == word_bytes:
        return "word"
    return "<line" if length < line_bytes else ">=line"


def muon_length_class(length):
    return "1" if length == 1 else "2-3" if length <= 3 else "4+"
