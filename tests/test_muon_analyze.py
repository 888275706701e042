"""``v4hw muon analyze``: the capture format and the analyzer's sections, on captures
built from the golden model (so the reservations and their conflicts are real), and
each way a capture can lie (one error line, exit status 2, never a traceback)."""

import json
import time

import pytest

from golden.muon import ReservationModel, zero_load_latency
from hdl.muon import layouts
from sim import muon_capture
from sim.cli import main
from sim.muon_capture import read_capture, write_capture


def capture_records():
    """``(header, packets, reservations)`` of a 4×4 capture: three requests answered by
    the golden model (the second collides with the first), reserved packets at the
    zero-load latency, best-effort packets, a stale drop and a bad destination."""
    model = ReservationModel(4, 4, slots=4)
    reservations, packets = [], []
    requests = [((0, 0), (3, 3), 200, 20), ((0, 1), (3, 3), 200, 20), ((1, 1), (1, 1), 300, 5)]
    for cycle, (src, dst, start, duration) in enumerate(requests):
        a = model.request(cycle * 40, src, dst, start, duration, 4)
        reservations.append({"src": list(src), "dst": list(dst), "start": start,
                             "duration": duration, "bandwidth": 4, "req_cycle": cycle * 40,
                             "grant_cycle": cycle * 40 + 20, "granted": a.granted,
                             "full": a.full, "id": a.id if a.granted else None,
                             "retry_after": None if a.granted else a.retry_after})
    first = reservations[0]
    for i in range(3):   # reserved packets, all at the zero-load latency
        tx = 200 + 5 * i
        packets.append({"src": [0, 0], "dst": [3, 3], "cls": 7, "rsv_id": first["id"],
                        "flits": 2, "tx": tx, "rx": tx + zero_load_latency((0, 0), (3, 3)),
                        "dropped": False})
    for i, latency in enumerate((10, 14, 30)):
        packets.append({"src": [1, 0], "dst": [2, 2], "cls": 5, "rsv_id": None, "flits": 1,
                        "tx": 100 + i, "rx": 100 + i + latency, "dropped": False,
                        "created": 90})
    packets.append({"src": [1, 0], "dst": [2, 2], "cls": 3, "rsv_id": None, "flits": 1,
                    "tx": 150, "rx": None, "dropped": True})
    packets.append({"src": [0, 0], "dst": [4, 0], "cls": 7, "rsv_id": None, "flits": 3,
                    "tx": 160, "rx": None, "dropped": True})    # outside: BAD_DST
    return {"cols": 4, "rows": 4, "max_age": 100}, packets, reservations


def _capture(path):
    header, packets, reservations = capture_records()
    write_capture(path, header, packets, reservations)
    return reservations


def test_packet_fields_and_sections(tmp_path, capsys):
    path = tmp_path / "c.capture"
    reservations = _capture(path)
    assert not reservations[1]["granted"]
    assert main(["muon", "analyze", str(path), "--show-rbr", "--show-conflict", "--stats",
                 "--distribution"]) == 0
    out = capsys.readouterr().out
    for name in ("rbr_req_cycle", "rbr_grant_cycle", "tsp_tx_cycle", "tsp_rx_cycle"):
        assert name in out
    lines = out.splitlines()
    reserved = [line for line in lines if line.split()[:2] == ["(0,0)", "(3,3)"]
                and "decode" in line]
    assert len(reserved) == 3 and all(line.split()[4:6] == ["0", "20"] for line in reserved)
    # The refused request collided with id 0 on the shared column and ejection port.
    assert "collides with id 0" in out and "(3,3).local" in out and "(3,1).south" in out
    assert f"retry_after_cycle {reservations[1]['retry_after']}" in out
    prefill = next(line for line in lines if line.strip().startswith("class prefill")).split()
    assert prefill[2:] == ["3", "0", "10", "14", "30", "30", "20"]   # min median p99 max jitter
    reserved_stats = next(line for line in lines if line.strip().startswith("reserved id"))
    assert reserved_stats.split()[-1] == "0"                          # jitter 0
    assert "(3,3).local" in out.split("== slot use per link")[1]
    assert "None" not in out


def test_round_trip(tmp_path):
    path = tmp_path / "c.capture"
    header, packets, reservations = capture_records()
    write_capture(path, header, packets, reservations)
    got_header, got_packets, got_reservations = read_capture(path)
    assert {k: got_header[k] for k in header} == header
    assert [{k: v for k, v in p.items() if k != "kind"} for p in got_packets] == packets
    assert [{k: v for k, v in r.items() if k != "kind"} for r in got_reservations] == reservations


def test_a_capture_of_the_rtl(capsys):
    """A capture the sniffer wrote on the 4×4 RTL (tests/test_muon_analyze_fuzz.py says
    which run): read whole, its reserved flows without jitter."""
    from tests.test_muon_analyze_fuzz import RTL_CAPTURE
    assert main(["muon", "analyze", str(RTL_CAPTURE), "--stats"]) == 0
    out = capsys.readouterr().out
    reserved = [line.split() for line in out.splitlines() if "reserved id" in line]
    assert len(reserved) == 3 and all(row[3:5] == ["3", "0"] and row[-1] == "0"
                                      for row in reserved)


def test_limits_match_the_rtl():
    assert muon_capture.MAX_MESH_SIDE == layouts.MAX_MESH_SIDE
    assert muon_capture.RSV_ID_BITS == layouts.RSV_ID_BITS


def test_conflicts_only_with_what_the_table_holds(tmp_path, capsys):
    """A request refused after id 0 was granted twice (the slot reused) collides with
    the second grant, not the first one the table no longer holds."""
    header = {"cols": 4, "rows": 1, "max_age": 100}
    r = {"src": [0, 0], "dst": [3, 0], "duration": 10, "bandwidth": 1, "full": False}
    reservations = [
        {**r, "start": 100, "req_cycle": 0, "grant_cycle": 20, "granted": True, "id": 0,
         "retry_after": None},
        {**r, "start": 500, "req_cycle": 200, "grant_cycle": 220, "granted": True, "id": 0,
         "retry_after": None},
        {**r, "start": 500, "req_cycle": 300, "grant_cycle": 320, "granted": False,
         "id": None, "retry_after": 510},
    ]
    path = tmp_path / "c.capture"
    write_capture(path, header, [], reservations)
    assert main(["muon", "analyze", str(path), "--show-conflict"]) == 0
    out = capsys.readouterr().out
    assert "held [500, 510)" in out and "held [100, 110)" not in out


def _lines():
    header, packets, reservations = capture_records()
    return ([json.dumps({"kind": "header", "format": muon_capture.FORMAT,
                         "version": muon_capture.VERSION, **header})]
            + [json.dumps({"kind": "packet", **p}) for p in packets]
            + [json.dumps({"kind": "reservation", **r}) for r in reservations]
            + [json.dumps({"kind": "end", "packets": len(packets),
                           "reservations": len(reservations)})])


def _edit(line_index, **fields):
    """A capture whose record ``line_index`` has ``fields`` changed (``...`` deletes)."""
    def make():
        lines = _lines()
        record = json.loads(lines[line_index])
        for key, value in fields.items():
            if value is ...:
                del record[key]
            else:
                record[key] = value
        lines[line_index] = json.dumps(record)
        return "\n".join(lines) + "\n"
    return make


def _text(function):
    def make():
        return function(_lines())
    return make


# Line indexes of _lines(): 0 header, 1-3 reserved packets, 4-6 best effort, 7 the stale
# drop, 8 the bad destination, 9-11 the reservations (10 refused), 12 the closing record.
BAD = [
    ("dst outside the mesh", _edit(4, dst=[10**12, 0]), "bad value"),
    ("reservation at x = 10**12", _edit(9, dst=[10**12, 3]), "'dst' has a bad value"),
    ("dst outside the declared mesh", _edit(4, dst=[5, 0]), "outside the 4x4 mesh"),
    ("reservation outside the mesh", _edit(9, dst=[3, 7]), "outside the 4x4 mesh"),
    ("source outside the mesh", _edit(7, src=[0, 4]), "outside the 4x4 mesh"),
    ("mesh larger than the RTL's", _edit(0, cols=17), "'cols' has a bad value"),
    ("rx before tx", _edit(4, rx=50), "earlier than tx"),
    ("rx sooner than zero load", _edit(4, rx=101), "zero-load latency"),
    ("grant before its request", _edit(9, grant_cycle=0, req_cycle=5), "before the request"),
    ("class 42", _edit(4, cls=42), "traffic class"),
    ("class as a string", _edit(4, cls="7"), "traffic class"),
    ("unknown reservation id", _edit(1, rsv_id=9), "rsv_id 9 names no reservation"),
    ("reserved packet before its grant", _edit(1, tx=10, rx=10 + 14), "granted by its tx"),
    ("granted id null", _edit(9, id=None), "granted request needs an id"),
    ("refused with an id", _edit(10, id=3), "refused request needs id null"),
    ("id beyond 8 bits", _edit(9, id=256), "'id' has a bad value"),
    ("bandwidth above duration", _edit(9, bandwidth=21), "above the duration"),
    ("duration beyond 16 bits", _edit(9, duration=1 << 16), "'duration' has a bad value"),
    ("a cycle beyond 64 bits", _edit(4, tx=1 << 64, rx=(1 << 64) + 20), "'tx' has a bad value"),
    ("a negative cycle", _edit(4, tx=-1), "'tx' has a bad value"),
    ("delivered and dropped", _edit(7, rx=200), "dropped packet with an rx"),
    ("neither delivered nor dropped", _edit(4, rx=None), "neither delivered"),
    ("created after tx", _edit(4, created=1000), "created 1000 after tx"),
    ("a boolean as a cycle", _edit(4, tx=True), "'tx' has a bad value"),
    ("unknown field", _edit(4, colour="red"), "unknown field"),
    ("unknown kind", _edit(4, kind="flit"), "unknown record kind"),
    ("flits null", _edit(4, flits=None), "'flits' has a bad value"),
    ("missing field", _edit(9, grant_cycle=...), "missing field 'grant_cycle'"),
    ("5000-digit integer", _text(lambda ls: "\n".join(
        [ls[0], ls[4].replace('"tx": 100', '"tx": ' + "9" * 5000)] + ls[1:]) + "\n"),
     "longer than"),
    ("30-digit integer", _text(lambda ls: "\n".join(
        [ls[0], ls[4].replace('"tx": 100', '"tx": ' + "9" * 30)] + ls[1:]) + "\n"),
     "30 digits"),
    ("100000 deep", _text(lambda ls: "\n".join([ls[0], "[" * 100000 + "]" * 100000] + ls[1:])
                          + "\n"), "longer than"),
    ("1000 deep", _text(lambda ls: "\n".join([ls[0], "[" * 1000 + "]" * 1000] + ls[1:])
                        + "\n"), "more brackets"),
    ("a nested coordinate", _text(lambda ls: "\n".join(
        [ls[0], ls[4].replace('"src": [1, 0]', '"src": [[1], 0]')] + ls[5:]) + "\n"),
     "more brackets"),
    ("a float", _text(lambda ls: "\n".join(
        [ls[0], ls[4].replace('"tx": 100', '"tx": 100.0')] + ls[5:]) + "\n"), "not an integer"),
    ("NaN", _text(lambda ls: "\n".join(
        [ls[0], ls[4].replace('"tx": 100', '"tx": NaN')] + ls[5:]) + "\n"), "NaN is not JSON"),
    ("a key twice", _text(lambda ls: "\n".join(
        [ls[0], ls[4].replace('"tx": 100', '"tx": 100, "tx": 5')] + ls[5:]) + "\n"),
     "given twice"),
    ("cut at a line boundary", _text(lambda ls: "\n".join(ls[:-1]) + "\n"),
     "no closing record"),
    ("cut inside a line", _text(lambda ls: "\n".join(ls)[:-7]), "has no end"),
    ("record after the end", _text(lambda ls: "\n".join(ls + [ls[4]]) + "\n"),
     "after the closing record"),
    ("a line lost", _text(lambda ls: "\n".join(ls[:4] + ls[5:]) + "\n"),
     "the file holds 7 and 3"),
    ("a second header", _text(lambda ls: "\n".join(ls[:2] + ls[:1] + ls[2:]) + "\n"),
     "a second header"),
    ("version 1", _edit(0, version=1), "capture version 1"),
    ("not UTF-8", lambda: "\n".join(_lines()).replace("packet", "p\udcffcket", 1) + "\n",
     "cannot read"),
    ("empty", lambda: "", "empty"),
    ("not json", lambda: "not json\n", "not a JSON object"),
    ("a JSON list", lambda: "[1, 2]\n", "not a JSON object"),
    ("other format", lambda: '{"kind": "header", "format": "other"}\n', "header"),
]


@pytest.mark.parametrize("make,message", [pytest.param(make, message, id=name)
                                          for name, make, message in BAD])
def test_bad_captures_are_one_error_line(tmp_path, capsys, make, message):
    path = tmp_path / "bad.capture"
    path.write_bytes(make().encode("utf-8", "surrogateescape"))
    began = time.monotonic()
    assert main(["muon", "analyze", str(path), "--show-rbr", "--show-conflict", "--stats",
                 "--distribution"]) == 2
    assert time.monotonic() - began < 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("v4hw: error:") and message in err, err
    assert not captured.out


def test_missing_capture(tmp_path, capsys):
    assert main(["muon", "analyze", str(tmp_path / "none")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_directory_is_not_a_capture(tmp_path, capsys):
    assert main(["muon", "analyze", str(tmp_path)]) == 2
    assert "cannot read" in capsys.readouterr().err
