"""Fuzzing ``v4hw muon analyze``: a seeded mutator over valid captures (one the RTL's
sniffer wrote, and others built with the golden model's reservation answers and packets
at or above their zero-load latency) changes fields, lines and bytes; every mutant is
either read and reported with no impossible value, or refused with one
:class:`CaptureError` line. Nothing else may escape, and the whole run takes seconds.

The seed is printed; ``V4HW_SEED=<n>`` reruns one sequence.
"""

import json
import re
import time
from pathlib import Path

from golden.muon import ReservationModel, zero_load_latency
from sim import seed
from sim.muon_analyze import analyze
from sim.muon_capture import FORMAT, VERSION, CaptureError, read_capture
from tests.test_muon_analyze import capture_records

CASES = 3000
# Written by the sniffer in tests/test_muon_cocotb.py::test_muon[verilator-4x4-
# reserved_flows_zero_jitter]; its 9 reserved packets, 3 reservations and the first 80
# best-effort packets (60 delivered, 20 dropped by TSP) of 678.
RTL_CAPTURE = Path(__file__).parent / "data" / "muon-4x4-reserved-flows.capture"
VALUES = [-1, 0, 1, 2, 7, 15, 16, 42, 255, 256, 65535, 65536, 10**12, 2**63, 2**64 - 1,
          2**64, 10**30, None, True, False, "", "7", [], [0], [0, 0], [15, 15], [16, 0],
          [0, 0, 0], [-1, 0], [10**12, 0], {}, 1.5, 1e300]
CHARS = '[]{}",:0123456789 -.eE\\\nnulltrueNaN'


def golden_capture(rng):
    """A valid capture of a random mesh: requests answered by the golden model (answers
    within the decision lead), reserved packets in their windows at the zero-load
    latency, best-effort packets delivered later or dropped, bad destinations."""
    cols, rows = rng.randint(1, 5), rng.randint(1, 5)
    model = ReservationModel(cols, rows, slots=rng.choice([1, 2, 4]))

    def node():
        return [rng.randrange(cols), rng.randrange(rows)]

    now, reservations, packets = 0, [], []
    for _ in range(rng.randint(0, 10)):
        now += rng.randint(0, 40)
        src, dst = node(), node()
        duration = rng.randint(1, 30)
        bandwidth = rng.randint(1, duration)
        start = now + rng.randint(0, 3 * model.lead)
        a = model.request(now, tuple(src), tuple(dst), start, duration, bandwidth)
        grant = now + rng.randint(1, model.lead - 1)
        reservations.append({"src": src, "dst": dst, "start": start, "duration": duration,
                             "bandwidth": bandwidth, "req_cycle": now, "grant_cycle": grant,
                             "granted": a.granted, "full": a.full,
                             "id": a.id if a.granted else None,
                             "retry_after": None if a.granted else a.retry_after})
        if a.granted:
            for _ in range(rng.randint(0, bandwidth)):
                tx = start + rng.randrange(duration)
                packets.append({"src": src, "dst": dst, "cls": 7, "rsv_id": a.id,
                                "flits": 1, "tx": tx,
                                "rx": tx + zero_load_latency(src, dst), "dropped": False})
        now = grant
    for _ in range(rng.randint(0, 12)):
        src, dst, tx = node(), node(), rng.randint(0, 2000)
        packet = {"src": src, "dst": dst, "cls": rng.choice([3, 5, 7]), "rsv_id": None,
                  "flits": rng.randint(1, 4), "tx": tx, "rx": None, "dropped": True}
        if rng.random() < 0.1:
            packet["dst"] = [cols, 0] if rng.random() < 0.5 else [0, 15]   # BAD_DST
        elif rng.random() < 0.8:
            packet.update(rx=tx + zero_load_latency(src, dst) + rng.randint(0, 50),
                          dropped=False)
        if rng.random() < 0.5:
            packet["created"] = tx - rng.randint(0, min(tx, 30))
        packets.append(packet)
    rng.shuffle(packets)
    return {"cols": cols, "rows": rows, "max_age": rng.randint(0, 500)}, packets, reservations


def lines_of(header, packets, reservations):
    return ([json.dumps({"kind": "header", "format": FORMAT, "version": VERSION, **header})]
            + [json.dumps({"kind": "packet", **p}) for p in packets]
            + [json.dumps({"kind": "reservation", **r}) for r in reservations]
            + [json.dumps({"kind": "end", "packets": len(packets),
                           "reservations": len(reservations)})])


def mutate(rng, lines):
    """A mutant of a capture's lines, as bytes: one to three edits of a field, a line or
    the text."""
    lines = list(lines)
    for _ in range(rng.randint(1, 3)):
        choice = rng.randrange(7)
        i = rng.randrange(len(lines))
        if choice <= 2:      # a field: a new value, a swap, a deletion, a new key
            if len(lines[i]) > 1000:   # a pathological line from an earlier edit
                continue
            try:
                record = json.loads(lines[i])
            except ValueError:
                continue
            if not isinstance(record, dict) or not record:
                continue
            key = rng.choice(sorted(record))
            how = rng.randrange(5)
            if how == 0:
                del record[key]
            elif how == 1:
                other = rng.choice(sorted(record))
                record[key], record[other] = record[other], record[key]
            elif how == 2 and isinstance(record[key], int) and not isinstance(record[key], bool):
                record[key] += rng.randint(-30, 30)
            elif how == 3:
                record[rng.choice(["extra", "kind", "id", "rsv_id", "created"])] = \
                    rng.choice(VALUES)
            else:
                record[key] = rng.choice(VALUES)
            lines[i] = json.dumps(record)
        elif choice == 3:    # a line lost, doubled or moved
            how = rng.randrange(3)
            if how == 0 and len(lines) > 1:
                del lines[i]
            elif how == 1:
                lines.insert(rng.randrange(len(lines) + 1), lines[i])
            else:
                j = rng.randrange(len(lines))
                lines[i], lines[j] = lines[j], lines[i]
        elif choice == 4:    # characters inserted or replaced
            line = lines[i]
            at = rng.randrange(len(line) + 1)
            junk = "".join(rng.choice(CHARS) for _ in range(rng.randint(1, 4)))
            lines[i] = line[:at] + junk + line[at + rng.randint(0, 1):]
        elif choice == 5:    # pathological values: deep nesting, long numbers
            n = rng.choice([3, 50, 1000, 5000, 100_000])
            lines[i] = rng.choice(["[" * n + "]" * n, '{"kind": "packet", "tx": ' + "9" * n
                                   + "}", lines[i].replace(": 1", ": 1" + "0" * n, 1)])
        else:                # the text cut, at a line boundary or inside a line
            text = "\n".join(lines) + "\n"
            cut = rng.randrange(len(text) + 1)
            return text[:cut].encode()
    data = ("\n".join(lines) + "\n").encode()
    if rng.random() < 0.02:
        at = rng.randrange(len(data) + 1)
        data = data[:at] + bytes([rng.choice([0x80, 0xC3, 0xFF, 0x00])]) + data[at:]
    return data


def check_rules(header, packets, reservations):
    """The rules of ``sim.muon_capture``, restated: what an accepted capture holds."""
    cols, rows = header["cols"], header["rows"]
    assert 1 <= cols <= 16 and 1 <= rows <= 16

    def inside(xy):
        return 0 <= xy[0] < cols and 0 <= xy[1] < rows

    granted = {}
    for r in reservations:
        assert inside(r["src"]) and inside(r["dst"]) and r["req_cycle"] <= r["grant_cycle"]
        assert 1 <= r["bandwidth"] <= r["duration"] < 1 << 16
        assert (r["id"] is not None) == r["granted"] != (r["retry_after"] is not None)
        if r["granted"]:
            assert 0 <= r["id"] < 256 and not r["full"]
            granted.setdefault(r["id"], []).append(r["grant_cycle"])
    for p in packets:
        assert inside(p["src"]) and p["cls"] in (3, 5, 7) and 0 <= p["tx"] < 1 << 64
        assert (p["rx"] is None) == p["dropped"]
        if not p["dropped"]:
            assert inside(p["dst"]) and p["rx"] - p["tx"] >= zero_load_latency(p["src"],
                                                                                p["dst"])
        if p["rsv_id"] is not None:
            assert any(g <= p["tx"] for g in granted[p["rsv_id"]])


_NEGATIVE = re.compile(r"(?<![\w)])-\d")


def test_mutated_captures_are_reported_or_refused_in_one_line(tmp_path):
    rng = seed.test_seed()      # prints the seed
    bases = ([RTL_CAPTURE.read_text().splitlines(), lines_of(*capture_records())]
             + [lines_of(*golden_capture(rng)) for _ in range(40)])
    path = tmp_path / "fuzz.capture"
    for lines in bases:      # every unmutated capture is valid
        path.write_text("\n".join(lines) + "\n")
        analyze(path, show_rbr=True, show_conflict=True, stats=True, distribution=True)
    refused, accepted = 0, 0
    began = time.monotonic()
    for case in range(CASES):
        data = mutate(rng, rng.choice(bases))
        path.write_bytes(data)
        try:
            report = analyze(path, show_rbr=True, show_conflict=True, stats=True,
                             distribution=True)
        except CaptureError as error:
            message = str(error)
            assert "\n" not in message and message.startswith(str(path)), (case, message)
            assert len(message) < 400, (case, message)
            refused += 1
            continue
        accepted += 1
        text = "\n".join(report)
        # An accepted capture yields no impossible value: no null shown, no negative
        # latency or wait.
        assert "None" not in text and not _NEGATIVE.search(text), (case, data[:300], text)
        check_rules(*read_capture(path))
    elapsed = time.monotonic() - began
    print(f"{CASES} mutants: {refused} refused, {accepted} accepted, {elapsed:.2f} s")
    assert refused > CASES // 2 and accepted > 0
