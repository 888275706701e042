"""The VA's per-command table (:data:`spec.va.VA_COMMANDS`) against the golden model.

The RTL generates its checks at START, byte counts and opcode sets from the table
(:mod:`hdl.va.opcodes`); :func:`golden.va.execute` reads the contract on its own. Here
random commands (every opcode, unknown ones too, fields at their edges) go through

* the table, evaluated in Python (what each operand range is, which check fails first),
* the core's checks at START in the Amaranth simulator (:class:`hdl.va.core.VectorCore`),

and each verdict (ERROR code, ERR_ADDR) must equal the golden model's at START. The seed
is in the test id.
"""

import dataclasses
import random

import pytest
from amaranth.sim import Simulator

from golden.va import PROPOSED_OPCODES, VaCommand, execute
from hdl.va.core import VectorCore
from hdl.va.opcodes import (
    EXT_OPCODES,
    INDEXED_OPCODES,
    PACKED_OPCODES,
    ROW_OPCODES,
    RTL_OPCODES,
)
from spec.codes import ErrorCode, VaOpcode
from spec.memory import ADDRESS_LIMIT
from spec.va import MAX_LENGTH, VA_COMMANDS, Count, VaUnit

TOP = ADDRESS_LIMIT
CLAMP_OK = 0x3F80_BF80                  # lo = -1.0 (15:0), hi = 1.0 (31:16): usable bounds
FIELDS = ("op", "esize", "length", "src", "src2", "src3", "dst", "dst2", "stride", "scalar",
          "k", "index_limit", "rows", "row_stride", "split_half")


class _Started(Exception):
    """The golden model passed its checks at START and touched memory."""


class _NoMemory:
    def __getitem__(self, key):
        raise _Started

    def __setitem__(self, key, value):
        raise _Started


def golden_verdict(cmd):
    """(ErrorCode, ERR_ADDR) of :func:`golden.va.execute` at START; (NONE, 0) if it goes
    on to the memory (the indexed forms' data checks come later, in the RTL too)."""
    try:
        code, addr = execute(cmd, _NoMemory())
    except _Started:
        return ErrorCode.NONE, 0
    return ErrorCode(code), addr & 0xFFFFFFFF


def table_verdict(cmd):
    """The checks of :class:`spec.va.VaCommandSpec` in its order, in Python."""
    spec = VA_COMMANDS.get(cmd.op)
    if spec is None or not 1 <= cmd.length <= MAX_LENGTH:
        return ErrorCode.BAD_COMMAND, 0
    if ((spec.elements and cmd.esize == 3)
            or (spec.k_max is not None and not 1 <= cmd.k <= min(spec.k_max, cmd.length))
            or (spec.even and cmd.length % 2)
            or (spec.clamp and cmd.scalar != CLAMP_OK)):
        return ErrorCode.BAD_COMMAND, 0
    ranges = [(getattr(cmd, o.reg), o.nbytes(cmd), o.alignment(cmd)) for o in spec.operands]
    for addr, nbytes, _ in ranges:
        if addr + nbytes > ADDRESS_LIMIT:
            return ErrorCode.BAD_COMMAND, addr & 0xFFFFFFFF
    for addr, _, align in ranges:
        if addr % align:
            return ErrorCode.MISALIGNED, addr & 0xFFFFFFFF
    for reg in spec.aligned:
        if getattr(cmd, reg) % (1 << cmd.esize):
            return ErrorCode.MISALIGNED, getattr(cmd, reg) & 0xFFFFFFFF
    return ErrorCode.NONE, 0


def _address(rng, align_to=1):
    pick = rng.random()
    if pick < 0.3:
        return rng.randrange(0, 1 << 20) & ~(align_to - 1)
    if pick < 0.5:
        return rng.randrange(0, 1 << 20)
    if pick < 0.8:              # near the top: ranges that reach 2**48 or just stay below
        return TOP - rng.choice([1, 2, 3, 4, 8, 64, 1 << 10, 1 << 17, 1 << 19]) \
            - rng.randrange(0, 5)
    return rng.randrange(0, TOP)


def random_command(rng, op):
    """A command ``op`` with fields at their edges (register widths)."""
    length = rng.choice([0, 1, 2, 3, 7, 8, 9, 100, 4096, MAX_LENGTH - 1, MAX_LENGTH,
                         MAX_LENGTH + 1, (1 << 32) - 1, rng.randrange(1, MAX_LENGTH + 1)])
    capped = min(length, MAX_LENGTH)
    k = rng.choice([0, 1, 2, 7, 8, 9, capped, capped + 1, rng.randrange(0, capped + 2),
                    (1 << 17) + 1, (1 << 32) - 1])
    cmd = VaCommand(
        op, length, src=_address(rng, 4), src2=_address(rng, 4), src3=_address(rng, 4),
        dst=_address(rng, 4), dst2=_address(rng, 4),
        stride=rng.choice([0, 1, 2, 3, 4, 6, 2048, rng.randrange(0, 1 << 32)]),
        esize=rng.choice([0, 1, 2, 3]), scalar=rng.choice([CLAMP_OK, rng.getrandbits(32)]),
        k=k, index_limit=rng.randrange(0, 1 << 16), rows=rng.choice([0, 1, 5, (1 << 32) - 1,
                                                                    rng.getrandbits(32)]),
        row_stride=rng.randrange(0, 256), split_half=rng.random() < 0.5)
    if op == VaOpcode.GATHER_CSR:
        # below 2**40: the CSR matrix's extent (checked after START) stays in range
        cmd.src = rng.randrange(0, 1 << 40)
    return cmd


def commands(seed, per_op):
    rng = random.Random(seed)
    ops = [*VaOpcode, 0, 28, 0x80, 0xFF]
    return [random_command(rng, op) for op in ops for _ in range(per_op)]


def test_opcode_sets_follow_the_table():
    """The units' opcode sets: every command the golden model runs is in the table, each
    in the set of the unit the table names."""
    assert set(RTL_OPCODES) == set(VaOpcode) - set(PROPOSED_OPCODES)
    for unit, ops in ((VaUnit.ROWS, ROW_OPCODES), (VaUnit.EXT, EXT_OPCODES),
                      (VaUnit.INDEXED, INDEXED_OPCODES)):
        assert set(ops) == {op for op, spec in VA_COMMANDS.items() if spec.unit is unit}
    assert set(PACKED_OPCODES) == {VaOpcode.QUANTIZE, VaOpcode.DEQUANTIZE, VaOpcode.CVT_F32,
                                   VaOpcode.DEQUANTIZE_MEM}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_table_against_golden(seed):
    """The table's checks, evaluated in Python, refuse as the golden model does, with the
    same ERR_ADDR; and each command's operand ranges are the ones the golden model
    checks (a command that passes would touch them)."""
    cmds = commands(seed, 200)
    for cmd in cmds:
        if cmd.op == VaOpcode.CLAMP:
            cmd = dataclasses.replace(cmd, scalar=CLAMP_OK)
        assert table_verdict(cmd) == golden_verdict(cmd), cmd
    refused = sum(golden_verdict(c) != (ErrorCode.NONE, 0) for c in cmds)
    assert 0.2 * len(cmds) < refused < 0.9 * len(cmds), "the commands should mix both"


def test_table_names_each_count():
    """Each operand's bytes for a sample command (the counts the golden model uses)."""
    cmd = VaCommand(VaOpcode.GATHER_CSR, 10, stride=6, esize=1, k=3, rows=4)
    got = {c: dataclasses.replace(VA_COMMANDS[VaOpcode.GATHER_CSR].operands[0], count=c,
                                  size=4).nbytes(cmd) for c in Count}
    assert got == {Count.LENGTH: 40, Count.K: 12, Count.ROWS_1: 20, Count.ONE: 4,
                   Count.STRIDED: 9 * 6 + 2}


@pytest.mark.parametrize("seed", [0])
def test_start_checks_against_golden(seed):
    """The core's checks at START (generated from the table) refuse every command as the
    golden model does at START, with its ERR_ADDR; the others pass."""
    cmds = commands(seed, 120)
    dut = VectorCore(8, 64)
    got = []

    async def bench(ctx):
        for cmd in cmds:
            ctx.set(dut.cmd.op.as_value(), cmd.op)     # unknown opcodes too: its raw bits
            for name in FIELDS[1:]:
                ctx.set(getattr(dut.cmd, name), int(getattr(cmd, name)))
            await ctx.delay(1e-9)
            got.append((ErrorCode(ctx.get(dut.refuse_code)), ctx.get(dut.refuse_addr)))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    for cmd, verdict in zip(cmds, got, strict=True):
        assert verdict == golden_verdict(cmd), f"{verdict}: {cmd}"
