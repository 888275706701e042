"""The C host example of the MA (``docs/ma/host_example.c``, against the generated
``docs/ma/regmap.h``) compiles with ``cc -Wall -Werror -std=c11``, and run against a fake
MA in memory (``tests/ma_host_fake.c``) it writes, for a GEMM, the registers the host
runtime (:class:`sim.tile_runtime.TileRuntime`) writes for the same GEMM, with the same
values, in the same order; it reads ID and CAPS first, polls CTR_LO and STATUS, and
returns the CTR (or the ERROR code of a failed command)."""

import asyncio
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from golden.program import BlockConfig, MaCmd, Operand, Program, Tensor
from hdl.ma import regmap as ma_regmap
from hdl.top.ma import MA_VERSION, caps_word
from sim.regs import Registers
from sim.tile_runtime import TileRuntime, layout, tat_entries
from spec.codes import BlockId, ErrorCode, MaMode

from .test_tile_runtime import FakeBlock, FakeMemory

ROOT = Path(__file__).resolve().parent.parent
CC = next((shutil.which(name) for name in ("cc", "gcc", "clang") if shutil.which(name)), None)
CFLAGS = ["-Wall", "-Werror", "-std=c11"]
OFFSETS = {register["offset"]: register["name"] for register in ma_regmap.REGISTERS}
CTR = 0x1_0000_2345
POLLS = 3

pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler (cc, gcc or clang) on PATH")


@pytest.fixture(scope="module")
def fake_ma(tmp_path_factory):
    """The example linked with the fake MA; compiled once."""
    binary = tmp_path_factory.mktemp("host_example") / "ma_host_fake"
    subprocess.run([CC, *CFLAGS, "-I", str(ROOT / "docs/ma"),
                    "-include", str(ROOT / "tests/ma_host_fake.h"),
                    str(ROOT / "docs/ma/host_example.c"), str(ROOT / "tests/ma_host_fake.c"),
                    "-o", str(binary)], check=True, capture_output=True, text=True)
    return binary


def test_the_example_compiles_as_firmware(tmp_path):
    """With plain volatile accesses of ma_t (no hooks), as a firmware build would."""
    done = subprocess.run([CC, *CFLAGS, "-c", "host_example.c", "-o", str(tmp_path / "o.o")],
                          cwd=ROOT / "docs/ma", capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# Two GEMMs of different shapes, modes, strides and addresses; the program's byte
# addresses are the MA's logical addresses.
GEMMS = {
    "int8": dict(mode=MaMode.INT8, m=16, k=32, n=8, accumulate=False, b_transposed=False,
                 pad=(0, 0, 0)),
    "bf16_bt_acc": dict(mode=MaMode.BF16, m=24, k=40, n=16, accumulate=True,
                        b_transposed=True, pad=(8, 4, 2)),
}


def _program(mode, m, k, n, accumulate, b_transposed, pad):
    cfg = BlockConfig(p=8, lanes=8, bus_bits=128, latency=8)
    op_type, c_type = ("bf16", "binary32") if mode is MaMode.BF16 else ("int8", "int32")
    b_rows, b_cols = (n, k) if b_transposed else (k, n)
    lda, ldb, ldc = k + pad[0], b_cols + pad[1], n + pad[2]
    tensors = [Tensor("a", (m, lda), op_type, 0x0000, "input"),
               Tensor("b", (b_rows, ldb), op_type, 0x4000, "weight"),
               Tensor("c", (m, ldc), c_type, 0x8000, "act")]
    rng = np.random.default_rng(1)
    # Small integers: int8 as they are, bf16 as 1.0 + 2^-7·i (sign and exponent kept).
    init = {"a": rng.integers(-3, 4, tensors[0].shape), "b": rng.integers(-3, 4, tensors[1].shape),
            "c": rng.integers(-3, 4, tensors[2].shape)}
    if mode is MaMode.BF16:
        init = {"a": (0x3F80 + init["a"] % 8).astype(np.uint16),
                "b": (0x3F80 + init["b"] % 8).astype(np.uint16),
                "c": np.full(tensors[2].shape, 0x3F800000, np.uint32)}
    else:
        init = {name: value.astype(np.int8 if name != "c" else np.int32)
                for name, value in init.items()}
    cmd = MaCmd(mode, m, k, n, Operand("a"), Operand("b"), Operand("c"), lda, ldb, ldc,
                accumulate=accumulate, b_transposed=b_transposed)
    return Program(cfg, {t.name: t for t in tensors}, (cmd,), init)


class RecordingBlock(FakeBlock):
    """The runtime tests' register-level MA, with every write logged (offset, value)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.log = []

    async def write(self, address, data):
        self.log.append((address, int.from_bytes(bytes(data), "little")))
        return await super().write(address, data)


def _runtime_writes(program):
    clock = SimpleNamespace(t=0)
    lay = layout(program)
    memory = FakeMemory(lay.phys_base, lay.size)
    block = RecordingBlock("ma", Registers(None, ma_regmap), memory, clock)
    runtime = TileRuntime(program, memory, {"ma": Registers(block, ma_regmap)},
                          now=lambda: clock.t)
    records = asyncio.run(runtime.run())
    assert records[0].host is None and records[0].cycles > 0
    assert runtime.final_mismatches() == []
    return block.log, lay


def _run_example(binary, program, lay, *, error=0, caps=None):
    """The example's accesses ``[(kind, offset, value)]`` and its ``(rc, ctr)``."""
    cmd, = program.commands
    t = program.tensors
    item = {name: t[name].itemsize for name in t}
    entries = [e for e in tat_entries(lay) if e.valid]
    args = [BlockId.MA << 16 | MA_VERSION, caps_word(8, 128) if caps is None else caps,
            POLLS, CTR, error,
            int(cmd.mode) | (2 if cmd.b_transposed else 0), int(cmd.accumulate),
            cmd.m, cmd.k, cmd.n, t["a"].addr, t["b"].addr, t["c"].addr,
            cmd.lda * item["a"], cmd.ldb * item["b"], cmd.ldc * item["c"]]
    for e in entries:
        args += [e.size, e.logical_base, e.phys_base]
    done = subprocess.run([str(binary), *map(hex, args)], capture_output=True, text=True,
                          check=True)
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("RESULT ")
    _, rc, ctr = lines[-1].split()
    accesses = [(kind, int(offset, 16), int(value, 16))
                for kind, offset, value in (line.split() for line in lines[:-1])]
    return accesses, (int(rc), int(ctr, 16))


def _named(writes):
    return [(OFFSETS[offset], value) for offset, value in writes]


@pytest.mark.parametrize("name", GEMMS)
def test_the_example_writes_what_the_runtime_writes(fake_ma, name):
    program = _program(**GEMMS[name])
    runtime, lay = _runtime_writes(program)
    accesses, result = _run_example(fake_ma, program, lay)
    writes = [(offset, value) for kind, offset, value in accesses if kind == "W"]
    assert _named(writes) == _named(runtime)
    names = [name for name, _ in _named(writes)]
    assert names[:2] == ["IRQ_STATUS", "IRQ_ENABLE"] and names[-1] == "START"
    assert names[2:14] == [f"TAT_{reg}_{i}" for i in range(4) for reg in ("LOGIC", "PHYS_LO",
                                                                           "PHYS_HI")]
    reads = [OFFSETS[offset] for kind, offset, _ in accesses if kind == "R"]
    assert reads[:2] == ["ID", "CAPS"]
    assert reads[2:] == ["CTR_LO", "STATUS"] * POLLS + ["CTR_HI"]
    assert result == (0, CTR)


def test_the_example_returns_the_error_code(fake_ma):
    program = _program(**GEMMS["int8"])
    _, lay = _runtime_writes(program)
    accesses, result = _run_example(fake_ma, program, lay, error=ErrorCode.TAT_MISS)
    assert result == (ErrorCode.TAT_MISS, 0)
    reads = [OFFSETS[offset] for kind, offset, _ in accesses if kind == "R"]
    assert reads[2:] == ["CTR_LO", "STATUS", "ERROR"]


def test_the_example_checks_id_and_caps(fake_ma):
    program = _program(**GEMMS["int8"])
    _, lay = _runtime_writes(program)
    # A CAPS whose MAX_DIM (CAPS bits 23:16) is below K: refused before any command write.
    small = caps_word(8, 128) & ~(0xFF << 16) | 16 << 16
    accesses, result = _run_example(fake_ma, program, lay, caps=small)
    assert result == (-3, 0)
    assert "START" not in [OFFSETS[offset] for kind, offset, _ in accesses if kind == "W"]
