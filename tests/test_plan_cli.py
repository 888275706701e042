"""plan.cli_main: a graph file planned and printed, the plan written as JSON, and every
user error one line on stderr with exit status 2."""

import json

from plan import cli_main
from plan.ir import graph_from_json, graph_to_json
from plan.synthetic import random_graph
from sim.seed import test_seed


def test_plans_a_file(tmp_path, capsys):
    graph = random_graph(test_seed(), 30, barriers=1)
    path, out = tmp_path / "g.json", tmp_path / "plan.json"
    path.write_text(graph_to_json(graph))
    capsys.readouterr()         # the seed line
    assert cli_main([str(path), "--json", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split() == ["op", "kind", "block", "start", "finish", "bound"]
    assert len(printed) == 1 + len(graph.ops) + 2
    assert printed[-1].startswith("planned 30 ops in ")
    plan = json.loads(out.read_text())
    assert printed[-2] == (f"makespan {plan['makespan']} cycles; lower bounds: critical path "
                           f"{plan['lower_bounds']['critical_path']}, busiest resource "
                           f"{plan['lower_bounds']['busiest_resource']['name']} "
                           f"{plan['lower_bounds']['busiest_resource']['cycles']}")
    stamped = graph_from_json(json.dumps(plan["graph"]))
    assert [op.timestamp for op in stamped.ops] == [e["start"] for e in plan["entries"]]


def _fails(argv, capsys, text):
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("v4hw plan: ") and text in err, err


def test_user_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "v4hw-circuitflow", "version": 1}')
    _fails([str(bad)], capsys, "graph: missing field 'tensors'")
    bad.write_text("not json")
    _fails([str(bad)], capsys, "not JSON")
    _fails([str(tmp_path / "missing.json")], capsys, "No such file")
    _fails(["--synthetic", "40", "--max-cycles", "100"], capsys,
           "No feasible temporal mapping found within max_cycles=100")
    _fails(["--synthetic", "0"], capsys, "--synthetic needs at least 1 op")
