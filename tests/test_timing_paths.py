"""sim.timing_paths: longest register-to-register paths from an SDF file (nextpnr's)."""

import random

import pytest

from sim.timing_paths import by_unit, main, worst_paths


def _cell(kind, name, iopaths=(), checks=()):
    lines = [f'  (CELL\n    (CELLTYPE "{kind}")\n    (INSTANCE {name})\n    (DELAY\n      (ABSOLUTE']
    lines += [f"        (IOPATH {a} {b} ({d}:{d}:{d}) ({d}:{d}:{d}))" for a, b, d in iopaths]
    lines.append("      )\n    )")
    if checks:
        lines.append("    (TIMINGCHECK")
        lines += [f"      (SETUPHOLD (posedge {pin}) (posedge CLK) ({s}:{s}:{s}) (0:0:0))"
                  for pin, s in checks]
        lines.append("    )")
    lines.append("    )")
    return "\n".join(lines)


def _sdf(cells, wires):
    top = ['  (CELL\n    (CELLTYPE "top")\n    (INSTANCE )\n    (DELAY\n      (ABSOLUTE']
    top += [f"        (INTERCONNECT {a} {b} ({d}:{d}:{d}) ({d}:{d}:{d}))" for a, b, d in wires]
    top.append("      )\n    )\n    )")
    return "(DELAYFILE\n  (SDFVERSION \"3.0\")\n" + "\n".join(top + cells) + "\n)\n"


def _ff(name, clk_q=500, setup=300):
    return _cell("TRELLIS_FF", name, [("CLK", "Q", clk_q)], [("DI", setup)])


def _lut(name, delay=200):
    return _cell("TRELLIS_COMB", name, [(pin, "F", delay) for pin in "ABCD"])


def test_longest_path_of_a_small_netlist():
    # a.Q → l1 → l2 → b.DI (long) and a.Q → l3 → c.DI (short)
    cells = [_ff("u.a"), _ff("u.b"), _ff("v.c"), _lut("u.l1"), _lut("u.l2"), _lut("v.l3")]
    wires = [("u.a/Q", "u.l1/A", 1000), ("u.l1/F", "u.l2/B", 2000), ("u.l2/F", "u.b/DI", 500),
             ("u.a/Q", "v.l3/C", 100), ("v.l3/F", "v.c/DI", 100)]
    paths = worst_paths(_sdf(cells, wires))
    worst = paths[0]
    # 500 clock-to-Q + 1000 + 200 + 2000 + 200 + 500 + 300 setup, in ns
    assert worst.delay == pytest.approx(4.7)
    assert worst.pins == ("u.a/Q", "u.l1/A", "u.l1/F", "u.l2/B", "u.l2/F", "u.b/DI")
    assert (worst.start, worst.end, worst.logic_levels) == ("u.a", "u.b", 2)
    assert paths[1].delay == pytest.approx((500 + 100 + 200 + 100 + 300) / 1000)
    units = by_unit(paths, depth=1)
    assert list(units) == ["u", "v"]
    assert units["u"][1] == 1


def test_registers_end_paths_and_start_new_ones():
    # a → l1 → b, b → l2 → c: two paths of one LUT each, never one through b.
    cells = [_ff("a"), _ff("b"), _ff("c"), _lut("l1"), _lut("l2")]
    wires = [("a/Q", "l1/A", 1000), ("l1/F", "b/DI", 1000),
             ("b/Q", "l2/A", 3000), ("l2/F", "c/DI", 1000)]
    paths = worst_paths(_sdf(cells, wires))
    assert [(p.start, p.end) for p in paths] == [("b", "c"), ("a", "b")]
    assert paths[0].delay == pytest.approx((500 + 3000 + 200 + 1000 + 300) / 1000)


def test_random_chains_match_a_direct_sum():
    rng = random.Random(7)
    cells, wires, expected = [], [], {}
    for chain in range(20):
        n = rng.randint(1, 6)
        cells += [_ff(f"s{chain}"), _ff(f"e{chain}")]
        prev, total = f"s{chain}/Q", 500
        for i in range(n):
            name = f"c{chain}_{i}"
            delay, wire = rng.randint(100, 400), rng.randint(50, 3000)
            cells.append(_lut(name, delay))
            wires.append((prev, f"{name}/A", wire))
            total += wire + delay
            prev = f"{name}/F"
        wire = rng.randint(50, 3000)
        wires.append((prev, f"e{chain}/DI", wire))
        expected[f"e{chain}"] = (total + wire + 300) / 1000
    got = {path.end: path.delay for path in worst_paths(_sdf(cells, wires))}
    assert got == pytest.approx(expected)


def test_command_line_lists_units(tmp_path, capsys):
    cells = [_ff("u.x.a"), _ff("u.y.b"), _lut("u.y.l")]
    wires = [("u.x.a/Q", "u.y.l/A", 9000), ("u.y.l/F", "u.y.b/DI", 2000)]
    sdf = tmp_path / "top.sdf"
    sdf.write_text(_sdf(cells, wires))
    assert main([str(sdf), "--period", "10", "--depth", "2", "--path", "1"]) == 0
    out = capsys.readouterr().out
    assert "1 endpoints, 1 over 10.0 ns; worst 12.00 ns" in out
    assert "u.y  ←  u.x.a" in out
