"""The plan's Gantt chart (plan/gantt.py): one row per block, Muon link and MC channel,
holding exactly the plan's ops, windows and transfers, none overlapping; the PNG is
written."""

from golden.muon import path_links, window
from plan import cli_main
from plan.dstp import plan
from plan.gantt import gantt_rows, write_gantt
from plan.machine import Machine
from plan.synthetic import random_graph
from sim.seed import test_seed


def test_rows_hold_the_plan():
    graph = random_graph(test_seed(), 40, barriers=1)
    machine = Machine()
    result = plan(graph, machine)
    rows = dict(gantt_rows(result, machine))
    names = [name for name, _ in gantt_rows(result, machine)]
    assert names[:3] == ["block ma0", "block va0", "block cme0"]
    assert names[-4:] == [f"mc channel {c}" for c in range(4)]
    blocks = sum(len(rows[f"block {b.name}"]) for b in machine.blocks)
    assert blocks == sum(1 for e in result.entries if e.block is not None)
    for e in result.entries:
        if e.block is None:
            continue
        assert (e.start, e.finish, e.op, e.kind) in rows[f"block {e.block}"]
        for r in e.reservations:
            for link, hop in path_links(r.src, r.dst):
                port = getattr(link.port, "name", link.port).lower()
                lo, hi = window(r.start, r.duration, link, hop)
                assert (lo, hi, e.op, e.kind) in rows[f"link ({link.x},{link.y}) {port}"]
        for channel, start, end in e.channels:
            assert (start, end, e.op, e.kind) in rows[f"mc channel {channel}"]
    for name, bars in rows.items():
        for (_, end, a, _), (start, _, b, _) in zip(bars, bars[1:], strict=False):
            assert end <= start, (name, a, b)


def test_png_written(tmp_path, capsys):
    graph = random_graph(test_seed(), 20)
    result = plan(graph, Machine())
    path = tmp_path / "plan.png"
    names = write_gantt(result, Machine(), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert names == [name for name, _ in gantt_rows(result, Machine())]
    other = tmp_path / "cli.png"
    assert cli_main(["--synthetic", "10", "--quiet", "--gantt", str(other)]) == 0
    assert other.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
