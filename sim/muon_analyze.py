"""``v4hw muon analyze CAPTURE``: read a sniffer capture (``sim.muon_capture``) and print
the design notes' fields per packet, reservations, conflicts, statistics, link use.

Default output: one line per packet with ``rbr_req_cycle rbr_grant_cycle tsp_tx_cycle
tsp_rx_cycle`` (the reservation fields ``-`` for best-effort packets). Options add
sections:

``--show-rbr``       every reservation request: cycles, request→grant latency, answer
``--show-conflict``  for each request that was not granted, the granted reservations
                     the table held when it was taken whose windows it hit at the start
                     it asked for, link by link
``--stats``          per class and per reservation: delivered, dropped, latency
                     min / median / p99 / max and jitter (max − min), in cycles
``--distribution``   per link: reservations and reserved cycles (slot use)

The capture is validated as it is read (``sim.muon_capture``: coordinates inside the
declared mesh, ordered cycles, known classes and ids, bounded numbers, the closing
record); a bad one gives one error line and exit status 2. Time and memory are linear in
the capture's size (each request's conflicts are sought among at most 256 held ids).
"""

import argparse
import bisect
import statistics
from collections import defaultdict

from golden.muon import INJECT, path_links, window

from .muon_capture import CaptureError, read_capture

__all__ = ["main", "analyze"]

_CLASS_NAMES = {7: "decode", 5: "prefill", 3: "cache-migrate"}


def _xy(v):
    return f"({v[0]},{v[1]})"


def _link_name(link):
    port = "inject" if link.port == INJECT else link.port.name.lower()
    return f"({link.x},{link.y}).{port}"


class _Grants:
    """The granted reservations by id, in grant order: which one a reserved packet
    travelled in, and which ones the table held when a request was taken."""

    def __init__(self, reservations):
        granted = sorted((r for r in reservations if r["granted"]),
                         key=lambda r: r["grant_cycle"])
        self.by_id = defaultdict(list)
        for r in granted:
            self.by_id[r["id"]].append(r)
        self.cycles = {ident: [r["grant_cycle"] for r in rs] for ident, rs in self.by_id.items()}

    def latest(self, ident, cycle):
        """The reservation ``ident`` granted last at or before ``cycle`` (ids are reused),
        or None."""
        at = bisect.bisect_right(self.cycles.get(ident, ()), cycle)
        return self.by_id[ident][at - 1] if at else None

    def held(self, cycle):
        """The latest grant of each id at or before ``cycle``: every entry the table can
        hold then (an id names its slot, so a slot holds its latest grant), at most one
        per id."""
        held = (self.latest(ident, cycle) for ident in self.by_id)
        return sorted((r for r in held if r is not None), key=lambda r: r["grant_cycle"])


def _percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _windows(r):
    return {link: window(r["start"], r["duration"], link, hop)
            for link, hop in path_links(tuple(r["src"]), tuple(r["dst"]))}


def packet_lines(packets, grants):
    yield (f"{'src':>7} {'dst':>7} {'class':>13} {'rsv':>4} {'rbr_req_cycle':>14} "
           f"{'rbr_grant_cycle':>16} {'tsp_tx_cycle':>13} {'tsp_rx_cycle':>13}  latency")
    for p in sorted(packets, key=lambda p: p["tx"]):
        r = None if p["rsv_id"] is None else grants.latest(p["rsv_id"], p["tx"])
        rx = "dropped" if p["dropped"] else str(p["rx"])
        latency = "-" if p["rx"] is None else str(p["rx"] - p["tx"])
        yield (f"{_xy(p['src']):>7} {_xy(p['dst']):>7} "
               f"{_CLASS_NAMES.get(p['cls'], str(p['cls'])):>13} "
               f"{'-' if p['rsv_id'] is None else p['rsv_id']:>4} "
               f"{'-' if r is None else r['req_cycle']:>14} "
               f"{'-' if r is None else r['grant_cycle']:>16} {p['tx']:>13} {rx:>13}  {latency}")


def rbr_lines(reservations):
    yield (f"{'src':>7} {'dst':>7} {'start':>10} {'dur':>5} {'bw':>5} {'rbr_req_cycle':>14} "
           f"{'rbr_grant_cycle':>16} {'wait':>5}  answer")
    for r in sorted(reservations, key=lambda r: r["req_cycle"]):
        if r["granted"]:
            answer = f"granted id {r['id']}"
        elif r["full"]:
            answer = f"table full, retry_after_cycle {r['retry_after']}"
        else:
            answer = f"retry_after_cycle {r['retry_after']}"
        yield (f"{_xy(r['src']):>7} {_xy(r['dst']):>7} {r['start']:>10} {r['duration']:>5} "
               f"{r['bandwidth']:>5} {r['req_cycle']:>14} {r['grant_cycle']:>16} "
               f"{r['grant_cycle'] - r['req_cycle']:>5}  {answer}")


def conflict_lines(reservations, grants):
    refused = [r for r in reservations if not r["granted"]]
    windows = {}
    if not refused:
        yield "no request was refused"
    for r in sorted(refused, key=lambda r: r["req_cycle"]):
        yield (f"request {_xy(r['src'])}->{_xy(r['dst'])} start {r['start']} duration "
               f"{r['duration']} at cycle {r['req_cycle']}:")
        if r["full"]:
            yield f"  every slot taken; a slot frees at cycle {r['retry_after']}"
            continue
        mine = _windows(r)
        hits = 0
        for other in grants.held(r["req_cycle"]):
            if id(other) not in windows:
                windows[id(other)] = _windows(other)
            for link, (lo, hi) in windows[id(other)].items():
                if link in mine and mine[link][0] < hi and lo < mine[link][1]:
                    hits += 1
                    yield (f"  collides with id {other['id']} ({_xy(other['src'])}->"
                           f"{_xy(other['dst'])}) on {_link_name(link)}: wanted cycles "
                           f"[{mine[link][0]}, {mine[link][1]}), held [{lo}, {hi})")
        if not hits:
            yield ("  no window collision: the start was earlier than the request cycle "
                   "plus the arbiter's lead")
        yield f"  retry_after_cycle {r['retry_after']}"


def _summary(latencies):
    if not latencies:
        return f"{'-':>6} {'-':>6} {'-':>6} {'-':>6} {'-':>6}"
    return (f"{min(latencies):>6} {statistics.median(latencies):>6g} "
            f"{_percentile(latencies, 0.99):>6} {max(latencies):>6} "
            f"{max(latencies) - min(latencies):>6}")


def stats_lines(packets):
    yield (f"{'traffic':>20} {'delivered':>9} {'dropped':>7} {'min':>6} {'median':>6} "
           f"{'p99':>6} {'max':>6} {'jitter':>6}")
    groups = defaultdict(list)
    for p in packets:
        if p["rsv_id"] is None:
            key = f"class {_CLASS_NAMES.get(p['cls'], p['cls'])}"
        else:
            key = f"reserved id {p['rsv_id']}"
        groups[key].append(p)
    for key in sorted(groups):
        group = groups[key]
        latencies = [p["rx"] - p["tx"] for p in group if p["rx"] is not None]
        dropped = sum(p["dropped"] for p in group)
        yield f"{key:>20} {len(latencies):>9} {dropped:>7} {_summary(latencies)}"


def distribution_lines(reservations):
    use = defaultdict(lambda: [0, 0])
    for r in reservations:
        if r["granted"]:
            for link, (lo, hi) in _windows(r).items():
                use[link][0] += 1
                use[link][1] += hi - lo
    if not use:
        yield "no reservation was granted"
        return
    yield f"{'link':>18} {'reservations':>12} {'reserved cycles':>15}"
    for link in sorted(use, key=lambda link: (link.y, link.x, str(link.port))):
        yield f"{_link_name(link):>18} {use[link][0]:>12} {use[link][1]:>15}"


def analyze(path, *, show_rbr=False, show_conflict=False, stats=False, distribution=False):
    """The report as a list of lines; :class:`CaptureError` for a bad capture."""
    header, packets, reservations = read_capture(path)
    grants = _Grants(reservations)
    lines = [f"capture {path}: {header['cols']}x{header['rows']} mesh, MAX_AGE "
             f"{header['max_age']}, {len(packets)} packets, {len(reservations)} reservation "
             f"requests", ""]
    lines += packet_lines(packets, grants)
    for wanted, title, section in ((show_rbr, "reservations", rbr_lines(reservations)),
                                   (show_conflict, "conflicts", conflict_lines(reservations, grants)),
                                   (stats, "statistics (cycles)", stats_lines(packets)),
                                   (distribution, "slot use per link",
                                    distribution_lines(reservations))):
        if wanted:
            lines += ["", f"== {title}", *section]
    return lines


def add_arguments(parser):
    parser.add_argument("capture", help="a capture file written by the Muon sniffer")
    parser.add_argument("--show-rbr", action="store_true", help="reservation requests")
    parser.add_argument("--show-conflict", action="store_true",
                        help="which reservations collided and why")
    parser.add_argument("--stats", action="store_true",
                        help="per class and reservation: counts, latency, jitter")
    parser.add_argument("--distribution", action="store_true", help="slot use per link")


def main(argv=None):
    """Entry point; returns the exit status (2 and one error line for a bad capture)."""
    import os
    import sys
    parser = argparse.ArgumentParser(prog="v4hw muon analyze", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        lines = analyze(args.capture, show_rbr=args.show_rbr, show_conflict=args.show_conflict,
                        stats=args.stats, distribution=args.distribution)
    except CaptureError as error:
        print(f"v4hw: error: {error}", file=sys.stderr)
        return 2
    try:
        print("\n".join(lines))
        sys.stdout.flush()
    except BrokenPipeError:     # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
