"""Worst register-to-register paths of a routed design, from nextpnr's SDF file.

nextpnr reports one critical path per clock. To see which parts of a design miss timing
(not only the worst one), :func:`worst_paths` reads the SDF that nextpnr writes
(``--sdf``: every cell's delays and every routed connection's delay), builds the timing
graph and gives, for every timing endpoint (a flip-flop's or block RAM's input), its
longest path from a clocked output. The delays are the SDF's slow corner, so the worst
path agrees with nextpnr's own report to within its setup-time bookkeeping.

``python -m sim.timing_paths build/fpga/<run>/top.sdf [--period NS] [--top N]``
prints the worst endpoints grouped by the unit (the instance path) they end in.
"""

import argparse
import re
from collections import defaultdict
from dataclasses import dataclass

__all__ = ["Path", "parse_sdf", "worst_paths", "by_unit"]

_TRIPLE = r"\((-?[\d.]*):(-?[\d.]*):(-?[\d.]*)\)"


@dataclass(frozen=True)
class Path:
    """A path to a timing endpoint: ``delay`` in ns (clock to output, logic and routing,
    plus the endpoint's setup time), ``pins`` from the clocked output to the endpoint."""
    delay: float
    pins: tuple

    @property
    def start(self):
        return self.pins[0].rsplit("/", 1)[0]

    @property
    def end(self):
        return self.pins[-1].rsplit("/", 1)[0]

    @property
    def logic_levels(self):
        """Cells passed through between the start and the endpoint (carry steps count)."""
        return sum(1 for a, b in zip(self.pins, self.pins[1:], strict=False)
                   if a.rsplit("/", 1)[0] == b.rsplit("/", 1)[0])


def _max(triple):
    values = [float(v) for v in triple if v not in ("", None)]
    return max(values) if values else 0.0


def _unescape(name):
    return re.sub(r"\\(.)", r"\1", name)


def parse_sdf(text):
    """(edges, launches, setups) of an SDF text: ``edges[pin] = [(next pin, ps)]``,
    ``launches[pin]`` = clock-to-output delay (ps) of clocked outputs, ``setups[pin]`` =
    setup time (ps) of clocked inputs. Pins are ``instance/port``."""
    edges = defaultdict(list)
    launches, setups = {}, {}
    instance = None
    clocked_outputs = set()
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("(INSTANCE"):
            instance = _unescape(line[len("(INSTANCE"):-1].strip())
        elif line.startswith("(INTERCONNECT"):
            body = line[len("(INTERCONNECT"):].strip()
            match = re.match(r"((?:\\.|\S)+)\s+((?:\\.|\S)+)\s+" + _TRIPLE, body)
            if match:
                src, dst = _unescape(match.group(1)), _unescape(match.group(2))
                edges[src].append((dst, _max(match.groups()[2:5])))
        elif line.startswith("(IOPATH"):
            match = re.match(r"\(IOPATH\s+(\S+)\s+(\S+)\s+" + _TRIPLE, line)
            if match:
                src, dst = match.group(1), match.group(2)
                delay = _max(match.groups()[2:5])
                if src.upper() in ("CLK", "CLKA", "CLKB", "WCK", "CLK0", "CLK1", "CLK2", "CLK3"):
                    pin = f"{instance}/{dst}"
                    launches[pin] = max(launches.get(pin, 0.0), delay)
                    clocked_outputs.add(pin)
                else:
                    edges[f"{instance}/{src}"].append((f"{instance}/{dst}", delay))
        elif line.startswith("(SETUPHOLD") or line.startswith("(SETUP"):
            match = re.match(r"\(SETUP(?:HOLD)?\s+\((?:posedge|negedge)\s+(\S+)\)\s+\(\S+\s+\S+\)\s+"
                             + _TRIPLE + r"(?:\s+" + _TRIPLE + ")?", line)
            if match:
                pin = f"{instance}/{match.group(1)}"
                # nextpnr writes the setup time in one of the two triples: take the larger.
                delay = max(_max(match.groups()[1:4]), _max(match.groups()[4:7]))
                setups[pin] = max(setups.get(pin, 0.0), delay)
    # A clocked output is a start point only: its IOPATHs from data inputs (none for a
    # flip-flop) do not continue a path through it.
    return edges, launches, setups


def worst_paths(text):
    """The longest path to each timing endpoint of an SDF text, worst first."""
    edges, launches, setups = parse_sdf(text)
    arrival, previous = {}, {}
    for pin, delay in launches.items():
        arrival[pin] = delay
    # Longest paths in a DAG: Kahn's order over the pins reachable from a start point.
    indegree = defaultdict(int)
    reachable, stack = set(launches), list(launches)
    while stack:
        pin = stack.pop()
        for nxt, _ in edges.get(pin, ()):
            indegree[nxt] += 1
            if nxt not in reachable:
                reachable.add(nxt)
                stack.append(nxt)
    ready = [pin for pin in launches if indegree[pin] == 0]
    while ready:
        pin = ready.pop()
        for nxt, delay in edges.get(pin, ()):
            if nxt in launches:
                continue
            candidate = arrival[pin] + delay
            if candidate > arrival.get(nxt, -1.0):
                arrival[nxt], previous[nxt] = candidate, pin
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
    paths = []
    for pin, setup in setups.items():
        if pin not in arrival:
            continue
        pins = [pin]
        while pins[-1] in previous:
            pins.append(previous[pins[-1]])
        paths.append(Path((arrival[pin] + setup) / 1000, tuple(reversed(pins))))
    paths.sort(key=lambda path: -path.delay)
    return paths


def unit_of(instance, depth=4):
    """The unit an instance belongs to: the first ``depth`` parts of its path."""
    parts = instance.split(".")
    return ".".join(parts[:min(depth, len(parts) - 1)]) or instance


def by_unit(paths, depth=4):
    """The worst path ending in each unit, worst first: ``{unit: (Path, endpoints)}``."""
    units = {}
    for path in paths:
        unit = unit_of(path.end, depth)
        if unit not in units:
            units[unit] = [path, 0]
        units[unit][1] += 1
    return dict(sorted(units.items(), key=lambda item: -item[1][0].delay))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m sim.timing_paths", description=__doc__.splitlines()[0])
    parser.add_argument("sdf")
    parser.add_argument("--period", type=float, default=10.0, help="clock period, ns (default 10)")
    parser.add_argument("--depth", type=int, default=4, help="instance path parts that name a unit")
    parser.add_argument("--top", type=int, default=25, help="units to list")
    parser.add_argument("--path", type=int, default=0, help="print the pins of the N worst paths")
    args = parser.parse_args(argv)
    with open(args.sdf) as sdf:
        paths = worst_paths(sdf.read())
    failing = [path for path in paths if path.delay > args.period]
    print(f"{len(paths)} endpoints, {len(failing)} over {args.period} ns; "
          f"worst {paths[0].delay:.2f} ns ({1000 / paths[0].delay:.1f} MHz)")
    units = by_unit(failing, args.depth)
    print(f"{'ns':>6} {'over':>5} {'levels':>6}  end unit  ←  worst path's start")
    for unit, (path, count) in list(units.items())[:args.top]:
        print(f"{path.delay:6.2f} {count:5d} {path.logic_levels:6d}  {unit}  ←  {path.start}")
    for path in paths[:args.path]:
        print(f"\n{path.delay:.2f} ns, {path.logic_levels} levels:")
        for pin in path.pins:
            print(f"  {pin}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
