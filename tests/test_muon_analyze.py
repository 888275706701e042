"""``v4hw muon analyze``: the capture format and the analyzer's sections, on captures
built from the golden model (so the reservations and their conflicts are real)."""

import pytest

from golden.muon import ReservationModel, zero_load_latency
from sim.cli import main
from sim.muon_capture import write_capture


def _capture(path):
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
                        "tx": 100 + i, "rx": 100 + i + latency, "dropped": False})
    packets.append({"src": [1, 0], "dst": [2, 2], "cls": 3, "rsv_id": None, "flits": 1,
                    "tx": 150, "rx": None, "dropped": True})
    write_capture(path, {"cols": 4, "rows": 4, "max_age": 100}, packets, reservations)
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


@pytest.mark.parametrize("text,message", [
    ("", "empty"),
    ('{"kind": "header", "format": "v4hw-muon-capture", "version": 1, "cols": 2, '
     '"rows": 2, "max_age": 100}', "truncated"),
    ("not json\n", "not a JSON object"),
    ('{"kind": "header", "format": "other"}\n', "header"),
    ('{"kind": "header", "format": "v4hw-muon-capture", "version": 1, "cols": 2, "rows": 2, '
     '"max_age": 100}\n{"kind": "packet", "src": [0, 0]}\n', "missing field"),
    ('{"kind": "header", "format": "v4hw-muon-capture", "version": 9}\n', "version"),
])
def test_bad_captures_are_one_error_line(tmp_path, capsys, text, message):
    path = tmp_path / "bad.capture"
    path.write_text(text)
    assert main(["muon", "analyze", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("v4hw: error:") and message in err, err


def test_missing_capture(tmp_path, capsys):
    assert main(["muon", "analyze", str(tmp_path / "none")]) == 2
    assert "cannot read" in capsys.readouterr().err
