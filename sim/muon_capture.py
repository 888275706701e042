"""The Muon capture file: what the sniffer (``sim.muon_driver``) records and
``v4hw muon analyze`` reads.

A capture is UTF-8 text, one JSON object per line (JSON Lines). The first line is the
header, the last the closing record; every line between is a packet or a reservation
event, in any order:

``{"kind": "header", "format": "v4hw-muon-capture", "version": 2, "cols": C, "rows": R, "max_age": A}``
    the mesh size (1..16 each way) and the MAX_AGE register (cycles) during the capture.
``{"kind": "packet", "src": [x, y], "dst": [x, y], "cls": c, "rsv_id": id or null,
"flits": n, "tx": t, "rx": r or null, "dropped": b}``
    one packet: ``tx`` the cycle its head was accepted on the injection port (its TSP
    time stamp, the design notes' ``tsp_tx_cycle``); ``rx`` the first cycle its head was
    on the ejection port (``tsp_rx_cycle``), null if and only if dropped; ``rsv_id`` the
    reservation it travelled in, null for best effort. ``cls`` is a
    :class:`spec.codes.TrafficClass`. ``created`` (optional) is the cycle the source
    generated it, for latency with source queueing.
``{"kind": "reservation", "src": [x, y], "dst": [x, y], "start": s, "duration": d,
"bandwidth": b, "req_cycle": q, "grant_cycle": g, "granted": b, "full": b, "id": i or null,
"retry_after": t or null}``
    one request and its answer: ``req_cycle`` the cycle the arbiter took it
    (``rbr_req_cycle``), ``grant_cycle`` the cycle it answered (``rbr_grant_cycle``);
    ``id`` set if and only if granted; ``retry_after`` the earliest start that would fit
    (or, when ``full``, the cycle a slot frees), set if and only if not granted.
``{"kind": "end", "packets": P, "reservations": N}``
    the closing record, with the number of records of each kind. A capture without it
    was cut short (the sniffer's run stopped, or the file was truncated).

What :func:`read_capture` accepts, beyond the shape of each record (every violation is a
:class:`CaptureError` naming the line; nothing else is raised for any file content):

* every cycle is a value of the 64-bit timebase; ``max_age`` fits MAX_AGE (32 bits),
  ``duration`` RSV_DURATION (1..65535), ``bandwidth`` is 1..duration, ids are 8 bits;
* sources, reservation destinations and delivered packets' destinations are inside the
  declared mesh; a dropped packet's destination may lie outside it (a bad destination,
  discarded at its source and counted in BAD_DST), within the header's 4-bit fields;
* a request is answered no earlier than it was taken (``req_cycle <= grant_cycle``); a
  packet arrives no earlier than its zero-load latency after it was sent
  (``rx >= tx + golden.muon.zero_load_latency``), and was created no later than sent;
* a reserved packet's ``rsv_id`` names a reservation granted no later than its ``tx``;
* a line is at most :data:`MAX_LINE` characters, one object holding at most two
  ``[x, y]`` arrays; integers are written in at most 20 digits; no key twice; no field
  the format does not define.

Reading takes time and memory linear in the file's size (one line at a time).
"""

import json

from golden.muon import zero_load_latency
from spec.codes import TrafficClass

__all__ = ["FORMAT", "VERSION", "MAX_LINE", "MAX_MESH_SIDE", "RSV_ID_BITS", "CaptureError",
           "write_capture", "read_capture"]

FORMAT = "v4hw-muon-capture"
VERSION = 2
MAX_LINE = 4096            # characters; a record is a few hundred
MAX_MESH_SIDE = 16         # hdl.muon.layouts.MAX_MESH_SIDE (4-bit coordinates)
RSV_ID_BITS = 8            # hdl.muon.layouts.RSV_ID_BITS
_U64 = 1 << 64
_DIGITS = 20               # len(str(2**64 - 1))

# Field kinds: (type, low, high exclusive); "?" after the type allows null.
_CYCLE = ("int", 0, _U64)
_PACKET_KEYS = {"src": ("xy",), "dst": ("xy",), "cls": ("cls",),
                "rsv_id": ("int?", 0, 1 << RSV_ID_BITS), "flits": ("int", 1, 1 << 32),
                "tx": _CYCLE, "rx": ("int?", 0, _U64), "dropped": ("bool",)}
_PACKET_OPTIONAL = {"created": _CYCLE}
_RESERVATION_KEYS = {"src": ("xy",), "dst": ("xy",), "start": _CYCLE,
                     "duration": ("int", 1, 1 << 16), "bandwidth": ("int", 1, 1 << 16),
                     "req_cycle": _CYCLE, "grant_cycle": _CYCLE, "granted": ("bool",),
                     "full": ("bool",), "id": ("int?", 0, 1 << RSV_ID_BITS),
                     "retry_after": ("int?", 0, _U64)}
_HEADER_KEYS = {"kind": ("str",), "format": ("str",), "version": ("int", 0, _U64),
                "cols": ("int", 1, MAX_MESH_SIDE + 1), "rows": ("int", 1, MAX_MESH_SIDE + 1),
                "max_age": ("int", 0, 1 << 32)}
_END_KEYS = {"packets": ("int", 0, _U64), "reservations": ("int", 0, _U64)}
_CLASSES = frozenset(int(c) for c in TrafficClass)



class CaptureError(ValueError):
    """A capture file that is not a valid v4hw Muon capture; the message (one line)
    names the file and line."""


class _Reject(Exception):
    """Raised by the JSON hooks; carries the reason."""


def write_capture(path, header, packets, reservations):
    """Write a capture: ``header`` a dict (cols, rows, max_age), the others lists of
    dicts; the closing record last."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps({"kind": "header", "format": FORMAT, "version": VERSION, **header})
                + "\n")
        for record in packets:
            f.write(json.dumps({"kind": "packet", **record}) + "\n")
        for record in reservations:
            f.write(json.dumps({"kind": "reservation", **record}) + "\n")
        f.write(json.dumps({"kind": "end", "packets": len(packets),
                            "reservations": len(reservations)}) + "\n")


def _show(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _parse_int(text):
    if len(text.lstrip("-")) > _DIGITS:
        raise _Reject(f"an integer of {len(text.lstrip('-'))} digits (at most {_DIGITS})")
    return int(text)


def _parse_float(text):
    raise _Reject(f"a number that is not an integer ({_show(text)})")


def _parse_constant(text):
    raise _Reject(f"{text} is not JSON")


def _pairs(pairs):
    record = {}
    for key, value in pairs:
        if key in record:
            raise _Reject(f"field {_show(key)} given twice")
        record[key] = value
    return record


_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float,
                            parse_constant=_parse_constant, object_pairs_hook=_pairs)


def _decode(line, where):
    # A record is one object holding at most two [x, y] arrays, and no string of a valid
    # record holds a bracket: counting them bounds the decoder's nesting (and recursion).
    if line.count("{") > 1 or line.count("[") > 2:
        raise CaptureError(f"{where}: more brackets than a record holds (one object, at "
                           f"most two [x, y] arrays)")
    try:
        record = _DECODER.decode(line)
    except _Reject as reason:
        raise CaptureError(f"{where}: {reason}") from None
    except json.JSONDecodeError as error:
        raise CaptureError(f"{where}: not a JSON object ({error.msg})") from None
    if not isinstance(record, dict):
        raise CaptureError(f"{where}: not a JSON object")
    return record


def _check(record, keys, where, optional=None):
    optional = optional or {}
    for key in record:
        if key != "kind" and key not in keys and key not in optional:
            raise CaptureError(f"{where}: unknown field {_show(key)}")
    for key, kind in (*keys.items(), *((k, v) for k, v in optional.items() if k in record)):
        if key not in record:
            raise CaptureError(f"{where}: missing field {key!r}")
        value, what = record[key], kind[0]
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if what == "xy":
            ok = (isinstance(value, list) and len(value) == 2
                  and all(isinstance(v, int) and not isinstance(v, bool)
                          and 0 <= v < MAX_MESH_SIDE for v in value))
        elif what == "bool":
            ok = isinstance(value, bool)
        elif what == "str":
            ok = isinstance(value, str)
        elif what == "cls":
            ok = is_int and value in _CLASSES
        else:
            ok = (value is None and what == "int?") or (is_int and kind[1] <= value < kind[2])
        if not ok:
            raise CaptureError(f"{where}: field {key!r} has a bad value {_show(value)}"
                               f"{_expected(kind)}")


def _expected(kind):
    what = kind[0]
    if what == "xy":
        return f" (expected [x, y], each 0..{MAX_MESH_SIDE - 1})"
    if what == "cls":
        return " (expected a traffic class: " + ", ".join(
            f"{int(c)} {c.name.lower()}" for c in TrafficClass) + ")"
    if what in ("int", "int?"):
        return (f" (expected an integer {kind[1]}..{kind[2] - 1}"
                + (" or null)" if what == "int?" else ")"))
    return f" (expected a {'boolean' if what == 'bool' else 'string'})"


def _inside(xy, header):
    return xy[0] < header["cols"] and xy[1] < header["rows"]


def _check_packet(p, header, where):
    mesh = f"the {header['cols']}x{header['rows']} mesh"
    if not _inside(p["src"], header):
        raise CaptureError(f"{where}: source {p['src']} is outside {mesh}")
    if p["dropped"]:
        if p["rx"] is not None:
            raise CaptureError(f"{where}: a dropped packet with an rx cycle ({p['rx']})")
    else:
        if p["rx"] is None:
            raise CaptureError(f"{where}: a packet neither delivered (rx null) nor dropped")
        if not _inside(p["dst"], header):
            raise CaptureError(f"{where}: destination {p['dst']} of a delivered packet is "
                               f"outside {mesh}")
        least = zero_load_latency(p["src"], p["dst"])
        if p["rx"] - p["tx"] < least:
            raise CaptureError(f"{where}: rx {p['rx']} is earlier than tx {p['tx']} plus "
                               f"the zero-load latency {least}")
    if "created" in p and p["created"] > p["tx"]:
        raise CaptureError(f"{where}: created {p['created']} after tx {p['tx']}")


def _check_reservation(r, header, where):
    mesh = f"the {header['cols']}x{header['rows']} mesh"
    for end in ("src", "dst"):
        if not _inside(r[end], header):
            raise CaptureError(f"{where}: {'source' if end == 'src' else 'destination'} "
                               f"{r[end]} is outside {mesh}")
    if r["bandwidth"] > r["duration"]:
        raise CaptureError(f"{where}: bandwidth {r['bandwidth']} above the duration "
                           f"{r['duration']}")
    if r["grant_cycle"] < r["req_cycle"]:
        raise CaptureError(f"{where}: answered in cycle {r['grant_cycle']}, before the "
                           f"request cycle {r['req_cycle']}")
    if r["granted"]:
        if r["full"] or r["id"] is None or r["retry_after"] is not None:
            raise CaptureError(f"{where}: a granted request needs an id, full false and "
                               f"retry_after null")
    elif r["id"] is not None or r["retry_after"] is None:
        raise CaptureError(f"{where}: a refused request needs id null and a retry_after")


def _lines(path):
    """``(number, line)`` of each line of the file, without its newline; at most
    MAX_LINE characters are held at a time."""
    try:
        with open(path, encoding="utf-8", newline="\n") as f:
            number = 0
            while True:
                line = f.readline(MAX_LINE + 1)
                if not line:
                    if number == 0:
                        raise CaptureError(f"{path}: empty file, not a Muon capture")
                    return
                number += 1
                if not line.endswith("\n"):
                    if len(line) > MAX_LINE:
                        raise CaptureError(f"{path}:{number}: line longer than {MAX_LINE} "
                                           f"characters")
                    raise CaptureError(f"{path}: truncated (line {number} has no end)")
                yield number, line[:-1]
    except (OSError, UnicodeDecodeError) as error:
        raise CaptureError(f"{path}: cannot read the capture ({error})") from None


def read_capture(path):
    """``(header, packets, reservations)`` of a capture; :class:`CaptureError` if the
    file is missing, malformed, inconsistent (see the module's rules) or truncated (a
    last line without its newline, or no closing record)."""
    header, packets, reservations, end = None, [], [], None
    number = 0
    for number, line in _lines(path):
        where = f"{path}:{number}"
        record = _decode(line, where)
        kind = record.get("kind")
        if end is not None:
            raise CaptureError(f"{where}: a record after the closing record")
        if number == 1:
            if kind != "header" or record.get("format") != FORMAT:
                raise CaptureError(f"{where}: not a {FORMAT} header")
            if record.get("version") != VERSION:
                raise CaptureError(f"{where}: capture version {_show(record.get('version'))}"
                                   f", this analyzer reads version {VERSION}")
            _check(record, _HEADER_KEYS, where)
            header = record
        elif kind == "packet":
            _check(record, _PACKET_KEYS, where, _PACKET_OPTIONAL)
            _check_packet(record, header, where)
            record["line"] = number
            packets.append(record)
        elif kind == "reservation":
            _check(record, _RESERVATION_KEYS, where)
            _check_reservation(record, header, where)
            reservations.append(record)
        elif kind == "header":
            raise CaptureError(f"{where}: a second header")
        elif kind == "end":
            _check(record, _END_KEYS, where)
            end = record
            if (end["packets"], end["reservations"]) != (len(packets), len(reservations)):
                raise CaptureError(f"{where}: the closing record counts {end['packets']} "
                                   f"packets and {end['reservations']} reservations, the "
                                   f"file holds {len(packets)} and {len(reservations)}")
        else:
            raise CaptureError(f"{where}: unknown record kind {_show(kind)}")
    if end is None:
        raise CaptureError(f"{path}: truncated (no closing record after line {number})")
    grants = {}
    for r in reservations:
        if r["granted"]:
            grants[r["id"]] = min(r["grant_cycle"], grants.get(r["id"], _U64))
    for p in packets:
        if p["rsv_id"] is not None and grants.get(p["rsv_id"], _U64) > p["tx"]:
            raise CaptureError(f"{path}:{p['line']}: rsv_id {p['rsv_id']} names no "
                               f"reservation granted by its tx cycle {p['tx']}")
        del p["line"]
    return header, packets, reservations
