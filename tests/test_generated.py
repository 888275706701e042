"""Committed generated files (hdl/<block>/regmap.py, docs/<block>/regmap.*) are up to date.

Every file is regenerated from the SystemRDL into a temporary directory and compared
byte for byte with the committed one.
"""

import difflib
import importlib
import json
import subprocess
import sys

import pytest
from systemrdl import RDLCompiler

from sim import regmap as generator

FIX = ("run `v4hw regmap --update` (until the command line is wired: "
       "`python -m sim.regmap --update`) and commit the result")


def _diff(committed, fresh, path):
    lines = difflib.unified_diff(committed.splitlines(keepends=True),
                                 fresh.splitlines(keepends=True),
                                 f"{path} (committed)", f"{path} (generated now)")
    return "".join(list(lines)[:40])


def test_there_are_blocks():
    assert "ma" in generator.blocks()


@pytest.mark.parametrize("block", generator.blocks())
def test_committed_files_are_up_to_date(block, tmp_path):
    files = generator.generated_files([block])
    assert sorted(files) == sorted([generator.module_path(block), *(
        f"{generator.docs_dir(block)}/regmap.{ext}" for ext in ("md", "h", "json", "html"))])
    for path, text in files.items():
        fresh = tmp_path / path
        fresh.parent.mkdir(parents=True, exist_ok=True)
        fresh.write_text(text, encoding="utf-8", newline="\n")
    for path in files:
        committed = generator.ROOT / path
        assert committed.is_file(), f"{path} is missing: {FIX}"
        fresh = (tmp_path / path).read_bytes()
        assert committed.read_bytes() == fresh, (
            f"{path} is stale: {FIX}\n"
            + _diff(committed.read_text(encoding="utf-8"), fresh.decode("utf-8"), path))


@pytest.mark.parametrize("block", generator.blocks())
def test_generation_is_deterministic(block):
    assert generator.generated_files([block]) == generator.generated_files([block])


@pytest.mark.parametrize("block", generator.blocks())
def test_python_and_json_carry_the_model(block):
    model = generator.build_model(block)
    module = importlib.import_module(generator.module_name(block))
    assert module.BLOCK == block and module.SOURCE == model["source"]
    assert [dict(register, fields=list(register["fields"])) for register in module.REGISTERS] \
        == model["registers"]
    committed = json.loads((generator.ROOT / f"{generator.docs_dir(block)}/regmap.json")
                           .read_text())
    assert committed == json.loads(generator.render_json(model))


def test_ma_map_follows_design():
    registers = {register["name"]: register
                 for register in generator.build_model("ma")["registers"]}
    offsets = {name: register["offset"] for name, register in registers.items()}
    assert offsets["STATUS"] == 0x0008 and offsets["TIME_LO"] == 0x0040
    assert offsets["MODE"] == 0x0020 and offsets["M"] == 0x2000 and offsets["CTR_HI"] == 0x2014
    assert [offsets[f"TAT_PHYS_HI_{i}"] for i in range(4)] == [0x1008 + 16 * i for i in range(4)]
    access = {name: register["access"] for name, register in registers.items()}
    assert (access["IRQ_STATUS"], access["START"], access["CTR_LO"], access["TIME_LO"],
            access["MODE"]) == ("W1C", "WO", "RC", "RO", "RW")
    assert {name for name, register in registers.items() if register["read_strobe"]} \
        == {"CTR_LO", "TIME_LO"}
    assert all(register["description"] and all(field["description"]
                                               for field in register["fields"])
               for register in registers.values())


def _model_of(tmp_path, text):
    source = tmp_path / "t.rdl"
    source.write_text(text)
    compiler = RDLCompiler()
    compiler.compile_file(str(source))
    return generator.build_model("t", compiler.elaborate(top_def_name="t").top)


def test_unsupported_semantics_are_refused(tmp_path):
    with pytest.raises(generator.RegmapError, match="none of RW, RO, RC, W1C, WO"):
        _model_of(tmp_path, 'addrmap t { reg { desc = "r"; field { sw = rw; hw = rw; '
                            'desc = "f"; } F[0:0] = 0; } R @ 0; };')
    with pytest.raises(generator.RegmapError, match="no desc"):
        _model_of(tmp_path, 'addrmap t { reg { field { sw = rw; hw = r; desc = "f"; } '
                            'F[0:0] = 0; } R @ 0; };')


def test_command_line(capsys):
    assert generator.main(["ma", "--json"]) == 0
    assert capsys.readouterr().out == \
        (generator.ROOT / "docs/ma/regmap.json").read_text(encoding="utf-8")
    assert generator.main(["--check"]) == 0
    with pytest.raises(SystemExit):
        generator.main([])
    result = subprocess.run([sys.executable, "-m", "sim.regmap", "ma", "--c"],
                            cwd=generator.ROOT, capture_output=True, text=True, check=True)
    assert result.stdout == (generator.ROOT / "docs/ma/regmap.h").read_text(encoding="utf-8")
