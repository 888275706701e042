"""The Muon capture file: what the sniffer (``sim.muon_driver``) records and
``v4hw muon analyze`` reads.

A capture is UTF-8 text, one JSON object per line (JSON Lines). The first line is the
header; every other line is a packet or a reservation event, in any order:

``{"kind": "header", "format": "v4hw-muon-capture", "version": 1, "cols": C, "rows": R, "max_age": A}``
    the mesh size and the MAX_AGE register (cycles) during the capture.
``{"kind": "packet", "src": [x, y], "dst": [x, y], "cls": c, "rsv_id": id or null,
"flits": n, "tx": t, "rx": r or null, "dropped": b}``
    one packet: ``tx`` the cycle its head was accepted on the injection port (its TSP
    time stamp, the design notes' ``tsp_tx_cycle``); ``rx`` the first cycle its head was
    on the ejection port (``tsp_rx_cycle``), null if dropped; ``rsv_id`` the reservation
    it travelled in, null for best effort. ``created`` (optional) is the cycle the source
    generated it, for latency with source queueing.
``{"kind": "reservation", "src": [x, y], "dst": [x, y], "start": s, "duration": d,
"bandwidth": b, "req_cycle": q, "grant_cycle": g, "granted": b, "full": b, "id": i or null,
"retry_after": t or null}``
    one request and its answer: ``req_cycle`` the cycle the arbiter took it
    (``rbr_req_cycle``), ``grant_cycle`` the cycle it answered (``rbr_grant_cycle``);
    ``retry_after`` the earliest start that would fit, when not granted.

All cycles are values of the 64-bit timebase.
"""

import json

__all__ = ["FORMAT", "VERSION", "CaptureError", "write_capture", "read_capture"]

FORMAT = "v4hw-muon-capture"
VERSION = 1

_PACKET_KEYS = {"src": "xy", "dst": "xy", "cls": "int", "rsv_id": "int?", "flits": "int",
                "tx": "int", "rx": "int?", "dropped": "bool"}
_RESERVATION_KEYS = {"src": "xy", "dst": "xy", "start": "int", "duration": "int",
                     "bandwidth": "int", "req_cycle": "int", "grant_cycle": "int",
                     "granted": "bool", "full": "bool", "id": "int?", "retry_after": "int?"}


class CaptureError(ValueError):
    """A capture file that is not a valid v4hw Muon capture; the message names the line."""


def write_capture(path, header, packets, reservations):
    """Write a capture: ``header`` a dict (cols, rows, max_age), the others lists of dicts."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps({"kind": "header", "format": FORMAT, "version": VERSION, **header})
                + "\n")
        for record in packets:
            f.write(json.dumps({"kind": "packet", **record}) + "\n")
        for record in reservations:
            f.write(json.dumps({"kind": "reservation", **record}) + "\n")


def _check(record, keys, where):
    for key, kind in keys.items():
        if key not in record:
            raise CaptureError(f"{where}: missing field {key!r}")
        value = record[key]
        if kind == "xy":
            ok = (isinstance(value, list) and len(value) == 2
                  and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                          for v in value))
        elif kind == "bool":
            ok = isinstance(value, bool)
        else:
            ok = (value is None and kind == "int?") or (
                isinstance(value, int) and not isinstance(value, bool) and value >= 0)
        if not ok:
            raise CaptureError(f"{where}: field {key!r} has a bad value {value!r}")


def read_capture(path):
    """``(header, packets, reservations)`` of a capture; :class:`CaptureError` if the
    file is missing, malformed or truncated (a last line without its newline)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as error:
        raise CaptureError(f"{path}: cannot read the capture ({error})") from None
    if not text:
        raise CaptureError(f"{path}: empty file, not a Muon capture")
    if not text.endswith("\n"):
        raise CaptureError(f"{path}: truncated (the last line has no end)")
    header, packets, reservations = None, [], []
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise CaptureError(f"{where}: not a JSON object ({error.msg})") from None
        if not isinstance(record, dict):
            raise CaptureError(f"{where}: not a JSON object")
        kind = record.get("kind")
        if number == 1:
            if kind != "header" or record.get("format") != FORMAT:
                raise CaptureError(f"{where}: not a {FORMAT} header")
            if record.get("version") != VERSION:
                raise CaptureError(f"{where}: capture version {record.get('version')!r}, "
                                   f"this analyzer reads version {VERSION}")
            _check(record, {"cols": "int", "rows": "int", "max_age": "int"}, where)
            header = record
        elif kind == "packet":
            _check(record, _PACKET_KEYS, where)
            packets.append(record)
        elif kind == "reservation":
            _check(record, _RESERVATION_KEYS, where)
            reservations.append(record)
        else:
            raise CaptureError(f"{where}: unknown record kind {kind!r}")
    return header, packets, reservations
