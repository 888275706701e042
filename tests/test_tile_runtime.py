"""Fast tier of the host runtime (:mod:`sim.tile_runtime`), no simulator: the layout, the
register encoding of every command of the tile presets' decode steps (round trip through
the register fields), the VA commands it issues equal the golden interpreter's, the
capability list, and the runtime's loop against a register-level model of the blocks
(golden blocks behind a fake control port: register writes, START, STATUS, CTR, the
errors, the recovery after a failed op and the timeout). ``tests/test_tile_runtime_cocotb.py``
runs it on the RTL; ``tests/test_tile_faults_cocotb.py`` the faults through the tile."""

import asyncio
from functools import cache
from types import SimpleNamespace

import numpy as np
import pytest

from golden import va as gva
from golden.ma import gemm
from golden.migrate_latency import migrate_cycles
from golden.program import (
    BlockConfig,
    Builder,
    Machine,
    MaCmd,
    Operand,
    Program,
    Tensor,
    decode_steps,
    run,
)
from hdl.ma import regmap as ma_regmap
from hdl.mc import regmap as mc_regmap
from hdl.tile import migrate_regmap
from hdl.va import regmap as va_regmap
from hdl.va.core import RTL_OPCODES
from sim.regs import Registers
from sim.tile_runtime import (
    PHYS_BASE,
    Capabilities,
    CommandError,
    CommandTimeout,
    Layout,
    TileRuntime,
    decode_ma_registers,
    decode_programs,
    decode_va_registers,
    layout,
    ma_register_writes,
    read_tensors,
    rewritten_inputs,
    tat_entries,
    tat_register_writes,
    va_commands,
    va_register_writes,
    written_tensors,
)
from spec.codes import ErrorCode, MaMode, VaOpcode

CFG = BlockConfig(p=8, lanes=8, bus_bits=128, latency=8)
VA_REGS = Registers(None, va_regmap)
MA_REGS = Registers(None, ma_regmap)


@cache
def programs(preset):
    return decode_programs(preset, CFG)


PRESETS = ["notes", "deepseek-v4"]


@pytest.mark.parametrize("preset", PRESETS)
def test_decode_programs_are_decode_steps(preset):
    """The runtime's programs are golden.program.decode_steps' commands and tensors, with
    the host's initial image in ``init``."""
    ours = programs(preset)
    theirs = decode_steps(preset, config=CFG)
    assert len(ours) == len(theirs)
    for (_, prog, _), (_, step) in zip(ours, theirs, strict=True):
        assert prog.commands == step.commands
        assert prog.tensors == step.tensors
        assert prog.init and set(prog.init) <= set(prog.tensors)
        assert {prog.tensors[n].role for n in prog.init} <= {"input", "weight", "const", "state"}


def test_notes_program_runs():
    """run() of the complete program (no state but the host's image) computes the layer
    output."""
    (_, prog, names), = programs("notes")
    m = run(prog)
    out = names["layer output"]
    assert np.any(m.read(out))
    for name in written_tensors(prog.commands[-1]):
        assert np.any(m.read(name))


def test_decode_session_after_a_prefill():
    """``DecodeSession(prefill=16)``: the prefill's program run from zeros leaves the
    generator's memory (its last commands wrote the state), each step's program run over
    the memory the one before left leaves it again, and each step's layer output is the
    row the prefill of all the session's tokens gives (the decode after a prefill is the
    longer prefill, bit for bit); a step before the prefill, or a second prefill, is
    refused."""
    from golden.presets.tile import PRESETS as TILE_PRESETS
    from golden.program_notes import notes_prefill
    from sim.tile_runtime import DecodeSession

    session = DecodeSession("notes", CFG, 2, prefill=16)
    with pytest.raises(ValueError, match="run the prefill first"):
        session.step()
    ((layer, prog, _),) = session.prefill()
    assert session.t == 16 and {c.stage for c in prog.commands[-4:]} == {"state"}
    mem = run(prog).mem
    want = session.expected()
    np.testing.assert_array_equal(mem[: want.size], want)
    with pytest.raises(ValueError, match="the prefill has been run"):
        session.prefill()
    outputs = []
    for t in (16, 17):
        ((_, step, names),) = session.step()
        m = Machine(step.config, step.tensors, step.memory_bytes)
        n = min(mem.size, m.mem.size)
        m.mem[:n] = mem[:n]
        for name, data in step.init.items():
            m.write(name, data)
        for cmd in step.commands:
            m.execute(cmd)
        mem = m.mem
        want = session.expected()
        np.testing.assert_array_equal(mem[: want.size], want, err_msg=f"t={t}")
        outputs.append(m.read(names["layer output"])[0])
    full = Builder(CFG)
    _, nf = notes_prefill(layer, np.array(session.inputs), builder=full)
    assert len(session.inputs) == 18 and TILE_PRESETS["notes"].kind == "notes"
    np.testing.assert_array_equal(np.array(outputs), full.read(nf["layer output"])[16:])
    with pytest.raises(ValueError, match="the one-layer notes preset"):
        DecodeSession("deepseek-v4", CFG, 2, prefill=16)


@pytest.mark.parametrize("preset", PRESETS)
def test_layout(preset):
    for _, prog, _ in programs(preset):
        lay = layout(prog)
        assert lay.phys_base == PHYS_BASE and lay.size == prog.memory_bytes
        tat = tat_entries(lay)
        assert tat[0].valid and tat[0].logical_base == 0 and tat[0].region_bytes >= lay.size
        assert tat[0].region_bytes < 2 * max(lay.size, 4096)
        assert tat[0].phys_base % tat[0].region_bytes == 0
        assert not any(e.valid for e in tat[1:])
        # the TAT registers round-trip
        w = dict(tat_register_writes(MA_REGS, tat))
        f = MA_REGS.fields("TAT_LOGIC_0", w["TAT_LOGIC_0"])
        assert (f["VALID"], f["SIZE"], f["BASE"] << 12) == (1, tat[0].size, 0)
        phys = (MA_REGS.field("TAT_PHYS_HI_0", "BASE", w["TAT_PHYS_HI_0"]) << 32
                | MA_REGS.field("TAT_PHYS_LO_0", "BASE", w["TAT_PHYS_LO_0"]) << 12)
        assert phys == tat[0].phys_base


def _program(tensors):
    return Program(CFG, {t.name: t for t in tensors}, (), {})


def test_layout_refusals():
    with pytest.raises(ValueError, match="overlap"):
        layout(_program([Tensor("a", (64,), "bf16", 0, "act"), Tensor("b", (8,), "bf16", 64, "act")]))
    with pytest.raises(ValueError, match="aligned"):
        layout(_program([Tensor("a", (8,), "bf16", 32, "act")]))
    with pytest.raises(ValueError, match="aligned to the TAT region"):
        layout(_program([Tensor("a", (4096,), "bf16", 0, "act")]), phys_base=4096)


@pytest.mark.parametrize("preset", PRESETS)
def test_va_register_round_trip(preset):
    """Every repetition of every VA command encodes to register values that decode back
    to the same command; addresses are the program's plus the physical base."""
    n = 0
    for _, prog, _ in programs(preset):
        lay = layout(prog)
        for cmd in prog.commands:
            if cmd.block != "va":
                continue
            vcs = va_commands(prog, cmd, lay)
            assert len(vcs) == cmd.repeat
            for r, vc in enumerate(vcs):
                assert decode_va_registers(VA_REGS, va_register_writes(VA_REGS, vc)) == vc
                t = prog.tensors[cmd.dst.tensor]
                assert vc.dst == PHYS_BASE + t.addr + (cmd.dst.offset + r * cmd.dst.step) * t.itemsize
                n += 1
    assert n > 300


@pytest.mark.parametrize("preset", PRESETS)
def test_ma_register_round_trip(preset):
    """Every MA command (a transposed B only where the MA's MODE has the bit) encodes to
    register values that decode back to its fields (byte addresses and strides)."""
    bt = Capabilities.of_rtl().ma_b_transposed
    n = 0
    for _, prog, _ in programs(preset):
        for cmd in prog.commands:
            if cmd.block != "ma":
                continue
            if cmd.b_transposed and not bt:
                with pytest.raises(ValueError, match="transposed"):
                    ma_register_writes(MA_REGS, prog, cmd)
                continue
            d = decode_ma_registers(MA_REGS, ma_register_writes(MA_REGS, prog, cmd))
            t = prog.tensors
            es = t[cmd.a.tensor].itemsize
            assert d == dict(m=cmd.m, k=cmd.k, n=cmd.n, mode=MaMode(cmd.mode),
                             accumulate=cmd.accumulate, b_transposed=cmd.b_transposed,
                             a_addr=t[cmd.a.tensor].addr + cmd.a.offset * es,
                             b_addr=t[cmd.b.tensor].addr + cmd.b.offset * es,
                             c_addr=t[cmd.c.tensor].addr + cmd.c.offset * 4,
                             lda=cmd.lda * es, ldb=cmd.ldb * es, ldc=cmd.ldc * 4)
            n += 1
    assert n > 10


def test_va_commands_are_the_interpreters():
    """The VA commands the runtime issues, run by the golden VA at their physical
    addresses, and the MA's by golden.ma, leave the golden interpreter's memory."""
    (_, prog, _), = programs("notes")
    want = run(prog).mem[: prog.memory_bytes]
    base = 1 << 20
    lay = Layout(base, prog.memory_bytes)
    m = run(Program(prog.config, prog.tensors, (), prog.init))
    mem = np.zeros(base + lay.size, np.uint8)
    mem[base:] = m.mem[: lay.size]
    for cmd in prog.commands:
        if cmd.block == "va":
            for vc in va_commands(prog, cmd, lay):
                assert gva.execute_proposed(vc, mem, CFG.lanes) == (ErrorCode.NONE, 0)
        else:
            m.mem[: lay.size] = mem[base:]
            m.execute(cmd)
            mem[base:] = m.mem[: lay.size]
    assert np.array_equal(mem[base:], want)


def test_capabilities_follow_the_rtl():
    caps = Capabilities.of_rtl()
    assert caps.va_opcodes == {int(op) for op in RTL_OPCODES}
    # the MA's transposed-B mode: MaMode.INT8_BT / BF16_BT, MODE.MODE bit 1
    assert caps.ma_b_transposed == ("BF16_BT" in MaMode.__members__)
    for op in VaOpcode:
        cmd = SimpleNamespace(block="va", op=int(op))
        assert (caps.missing(cmd) is None) == (op in RTL_OPCODES)
    bt = MaCmd(MaMode.BF16, 1, 1, 1, Operand("a"), Operand("b"), Operand("c"), 1, 1, 1,
               b_transposed=True)
    assert (caps.missing(bt) is None) == caps.ma_b_transposed
    assert written_tensors(bt) == ["c"]


# --- the runtime's loop against a register-level model --------------------------------------


class FakeMemory:
    """Physical bytes ``[base, base + size)``."""

    def __init__(self, base, size):
        self.base, self.data = base, np.zeros(size, np.uint8)

    def read(self, addr, n):
        assert self.base <= addr and addr + n <= self.base + self.data.size, hex(addr)
        return self.data[addr - self.base: addr - self.base + n].tobytes()

    def write(self, addr, data):
        assert self.base <= addr and addr + len(data) <= self.base + self.data.size, hex(addr)
        self.data[addr - self.base: addr - self.base + len(data)] = np.frombuffer(bytes(data), np.uint8)


class FakeBlock:
    """A block's control port: a register file; START runs the command with the golden
    block on the memory and sets DONE (or ERROR: ``fail``) ``latency`` cycles later; time
    advances 4 cycles per access. ``hang``: never end. ``fail_at``: only that START
    (counted from 1) fails, and a failing VA command first writes 16 bytes of 0xFF at its
    DST (a partial write before the error)."""

    def __init__(self, kind, regs, memory, clock, *, fail=None, hang=False, fail_at=None):
        self.kind, self.regs, self.memory, self.clock = kind, regs, memory, clock
        self.values, self.fail, self.hang, self.fail_at = {}, fail, hang, fail_at
        self.writes = self.starts = 0
        self.status = 0
        self.code = ErrorCode.NONE

    def _name(self, offset):
        return next(r["name"] for r in self.regs._registers.values() if r["offset"] == offset)

    async def read(self, address, length):
        self.clock.t += 4
        name = self._name(address)
        value = {"STATUS": self.status, "CTR_LO": self.values.get("_ctr", 0) & 0xFFFFFFFF,
                 "CTR_HI": self.values.get("_ctr", 0) >> 32,
                 "ERROR": int(self.code), "ERR_ADDR": 0x1234 if self.code else 0,
                 "IRQ_STATUS": 0}.get(name, self.values.get(name, 0))
        return SimpleNamespace(data=value.to_bytes(4, "little"), resp=0)

    async def write(self, address, data):
        self.clock.t += 4
        name = self._name(address)
        value = int.from_bytes(bytes(data), "little")
        if name == "START":
            self.starts += 1
            self.status = 0b001
            self.code = ErrorCode.NONE
            if self.hang:
                return SimpleNamespace(resp=0)
            if self.fail and self.fail_at in (None, self.starts):
                self.status = 0b100
                self.code = self.fail
                if self.fail_at is not None:
                    self.partial()
            else:
                self.run()
                self.status = 0b010
                self.values["_ctr"] = self.clock.t + 50
        elif name not in ("IRQ_STATUS",):
            self.values[name] = value
            self.writes += 1
        return SimpleNamespace(resp=0)

    def _w(self, names):
        return [(n, self.values.get(n, 0)) for n in names]

    def partial(self):
        """What a failing command (``fail_at``) writes before its error: a VA command 16
        bytes of 0xFF at its DST."""
        if self.kind == "va":
            names = [r["name"] for r in self.regs._registers.values() if r["access"] == "RW"]
            vc = decode_va_registers(self.regs, self._w(names))
            self.memory.write(vc.dst, b"\xff" * 16)

    def run(self):
        mem = self.memory
        if self.kind == "va":
            names = [r["name"] for r in self.regs._registers.values() if r["access"] == "RW"]
            vc = decode_va_registers(self.regs, self._w(names))
            window = gva.MemoryWindow(mem.base, mem.data)
            assert gva.execute(vc, window, CFG.lanes) == (ErrorCode.NONE, 0)
            return
        d = decode_ma_registers(self.regs, self._w(["M", "K", "N", "MODE", "A_ADDR", "B_ADDR",
                                                     "C_ADDR", "LDA", "LDB", "LDC"]))
        tat = self.values["TAT_LOGIC_0"]
        assert tat & 1
        phys = (self.values["TAT_PHYS_HI_0"] << 32) | (self.values["TAT_PHYS_LO_0"] & ~0xFFF)
        es = 2 if d["mode"] is MaMode.BF16 else 1
        dt = np.uint16 if es == 2 else np.int8

        def rows(addr, n, cols, ld, dtype, size):
            return np.stack([np.frombuffer(mem.read(phys + addr + r * ld, cols * size), dtype)
                             for r in range(n)])
        a = rows(d["a_addr"], d["m"], d["k"], d["lda"], dt, es)
        if d["b_transposed"]:       # MODE.MODE bit 1: B stored as N rows of K
            b = rows(d["b_addr"], d["n"], d["k"], d["ldb"], dt, es).T
        else:
            b = rows(d["b_addr"], d["k"], d["n"], d["ldb"], dt, es)
        cdt = np.uint32 if es == 2 else np.int32
        old = rows(d["c_addr"], d["m"], d["n"], d["ldc"], cdt, 4) if d["accumulate"] else None
        c = gemm(d["mode"], a, b, old)
        for r in range(d["m"]):
            mem.write(phys + d["c_addr"] + r * d["ldc"], np.ascontiguousarray(c[r]).astype(cdt).tobytes())


class FakeMc:
    """The tile MC's registers: an error (code, ERR_ADDR) kept until CLEAR.ERROR."""

    def __init__(self, code=ErrorCode.NONE, err_addr=0):
        self.code, self.err_addr, self.cleared = code, err_addr, []
        self.regs = Registers(None, mc_regmap)

    async def read(self, address, length):
        name = next(r["name"] for r in self.regs._registers.values() if r["offset"] == address)
        value = {"STATUS": 0b100 if self.code else 0, "ERROR": int(self.code),
                 "ERR_ADDR": self.err_addr}.get(name, 0)
        return SimpleNamespace(data=value.to_bytes(4, "little"), resp=0)

    async def write(self, address, data):
        name = next(r["name"] for r in self.regs._registers.values() if r["offset"] == address)
        self.cleared.append(name)
        if name == "CLEAR" and bytes(data)[0] & 1:
            self.code, self.err_addr = ErrorCode.NONE, 0
        return SimpleNamespace(resp=0)


def _runtime(prog, *, blocks=("va", "ma"), fail=None, hang=False, timeout=(20_000, 20),
             fail_at=None, mc=None):
    clock = SimpleNamespace(t=0)
    lay = layout(prog)
    memory = FakeMemory(lay.phys_base, lay.size)
    fakes = {}
    regs = {}
    for kind, regmap in (("va", va_regmap), ("ma", ma_regmap)):
        if kind in blocks:
            probe = Registers(None, regmap)
            # fail_at: a VA START only
            fakes[kind] = FakeBlock(kind, probe, memory, clock, hang=hang,
                                    fail=fail if fail_at is None or kind == "va" else None,
                                    fail_at=fail_at if kind == "va" else None)
            regs[kind] = Registers(fakes[kind], regmap)
    rt = TileRuntime(prog, memory, regs, now=lambda: clock.t, timeout=timeout,
                     mc=None if mc is None else Registers(mc, mc_regmap))
    return rt, fakes


def test_runtime_runs_the_notes_step_on_model_blocks():
    """The whole notes step through the register-level model of both blocks: every
    command but the transposed-B GEMMs (no MA mode yet) goes through the registers,
    the memory ends bit-exact, each op is timed and predicted."""
    (_, prog, _), = programs("notes")
    rt, fakes = _runtime(prog)
    records = asyncio.run(rt.run())
    assert rt.final_mismatches() == []
    assert len(records) == len(prog.commands)
    bt = Capabilities.of_rtl().ma_b_transposed
    for rec, cmd in zip(records, prog.commands, strict=True):
        assert rec.block == cmd.block and rec.opcode == cmd.opname and rec.predicted > 0
        if cmd.block == "ma" and cmd.b_transposed and not bt:
            assert rec.host == "no MA transposed-B mode" and rec.cycles is None
        else:
            assert rec.host is None and rec.cycles > 0
            assert rec.checked == written_tensors(cmd)
    starts = sum(c.repeat for c in prog.commands if c.block == "va")
    assert fakes["va"].starts == starts
    # registers already holding a value are not written again
    assert fakes["va"].writes < 17 * starts / 2


def test_runtime_plays_a_missing_block():
    (_, prog, _), = programs("notes")
    rt, fakes = _runtime(prog, blocks=("va",))
    records = asyncio.run(rt.run(range(12)))
    assert [r.host for r in records if r.block == "ma"] == ["MA played by the host"] * 3
    assert "ma" not in fakes


def test_runtime_error_names_the_op():
    (_, prog, _), = programs("notes")
    rt, _ = _runtime(prog, fail=ErrorCode.AXI_READ_ERROR)
    with pytest.raises(CommandError, match=r"op 0 \(va RMSNORM, stage 'input RMSNorm'\) ended "
                                           r"in ERROR AXI_READ_ERROR at ERR_ADDR 0x1234") as e:
        asyncio.run(rt.run())
    assert e.value.code is ErrorCode.AXI_READ_ERROR and e.value.record.index == 0


def test_runtime_timeout_names_the_op():
    (_, prog, _), = programs("notes")
    rt, _ = _runtime(prog, hang=True, timeout=(200, 0))
    with pytest.raises(CommandTimeout, match=r"op 0 \(va RMSNORM, stage 'input RMSNorm'\) did "
                                             r"not end within 200 cycles of START \(timebase \d+"):
        asyncio.run(rt.run())


def test_read_and_rewritten_tensors():
    (_, prog, _), = programs("notes")
    inplace = [c for c in prog.commands if rewritten_inputs(c)]
    assert inplace, "the notes step has in-place ops (the MoE's ADD into its output)"
    for c in prog.commands:
        assert set(rewritten_inputs(c)) == set(written_tensors(c)) & set(read_tensors(c))
        if c.block == "ma":
            assert (c.c.tensor in read_tensors(c)) == c.accumulate


@pytest.mark.parametrize("inplace", [False, True])
def test_runtime_resumes_after_a_failed_op(inplace):
    """A VA op fails after a partial write of its DST (the model writes 16 bytes of
    0xFF): the error names the op and carries the MC's error, the recovery clears the
    MC, nothing but the op's outputs differs from the golden run; :meth:`resume` runs
    the op again (an in-place op from its inputs as they were) and the rest, bit-exact."""
    (_, prog, _), = programs("notes")
    idx = next(i for i, c in enumerate(prog.commands)
               if c.block == "va" and c.repeat == 1 and bool(rewritten_inputs(c)) == inplace
               and i > 10)
    cmd = prog.commands[idx]
    start = 1 + sum(c.repeat for c in prog.commands[:idx] if c.block == "va")
    mc = FakeMc(ErrorCode.AXI_WRITE_ERROR, 0xABC0)
    rt, fakes = _runtime(prog, fail=ErrorCode.AXI_WRITE_ERROR, fail_at=start, mc=mc)
    with pytest.raises(CommandError, match=rf"op {idx} \(va {cmd.opname}, stage "
                                           r".*ended in ERROR AXI_WRITE_ERROR at ERR_ADDR 0x1234 "
                                           r"\(MC: AXI_WRITE_ERROR at ERR_ADDR 0xabc0\)") as e:
        asyncio.run(rt.run())
    assert e.value.mc == (ErrorCode.AXI_WRITE_ERROR, 0xABC0) and rt.failed == idx
    assert mc.code is ErrorCode.NONE and "CLEAR" in mc.cleared and "IRQ_STATUS" in mc.cleared
    assert rt.mismatches(exclude=written_tensors(cmd)) == []
    assert rt.mismatches() != [], "the model's partial write is seen"
    with pytest.raises(ValueError, match=f"resume must start at the failed op {idx}"):
        asyncio.run(rt.resume([idx + 1]))
    records = asyncio.run(rt.resume())
    assert rt.failed is None and rt.final_mismatches() == []
    assert [r.index for r in records] == list(range(len(prog.commands)))
    assert records[idx].error.startswith("AXI_WRITE_ERROR") and records[idx].cycles > 0
    assert fakes["va"].starts == 1 + sum(c.repeat for c in prog.commands if c.block == "va")
    with pytest.raises(ValueError, match="no failed op"):
        asyncio.run(rt.resume())


def test_runtime_rewrites_the_tat_after_a_tat_miss():
    (_, prog, _), = programs("notes")
    rt, fakes = _runtime(prog, blocks=("ma",), fail=ErrorCode.TAT_MISS)
    asyncio.run(rt.setup())
    writes = fakes["ma"].writes
    rt.load()
    with pytest.raises(CommandError, match="TAT_MISS"):
        asyncio.run(rt.run_command(1, prog.commands[1]))
    assert fakes["ma"].writes - writes >= 12, "the 12 TAT registers are written again"


# --- copies of the cache-migrate engine -----------------------------------------------------


class FakeMigrate(FakeBlock):
    """The cache-migrate engine's control port (the default CAPS: 8 read bursts, a 16-byte
    bus, bursts of 16 words): START copies LENGTH bytes from SRC to DST forward (a
    ``memmove`` downwards); a failing START (``fail_at``) first copies the first two words."""

    def __init__(self, memory, clock, **kwargs):
        super().__init__("migrate", Registers(None, migrate_regmap), memory, clock, **kwargs)
        self.values["CAPS"] = 0x0010_1008

    def _copy(self, words=None):
        v = self.values
        src = v.get("SRC_HI", 0) << 32 | v.get("SRC_LO", 0)
        dst = v.get("DST_HI", 0) << 32 | v.get("DST_LO", 0)
        n = v["LENGTH"] if words is None else 16 * words
        self.memory.write(dst, self.memory.read(src, n))

    def run(self):
        self._copy()

    def partial(self):
        self._copy(words=2)


def _copy_runtime(**kwargs):
    """The notes step's runtime with a fake migrate engine and MC, over the program's
    memory and 8 KiB more (the copies' spare region, from ``spare``)."""
    (_, prog, _), = programs("notes")
    clock = SimpleNamespace(t=0)
    lay = layout(prog)
    memory = FakeMemory(lay.phys_base, lay.size + 8192)
    engine = FakeMigrate(memory, clock, **kwargs)
    mc = FakeMc(kwargs["fail"], 0x2220) if kwargs.get("fail") else FakeMc()
    rt = TileRuntime(prog, memory, {"migrate": Registers(engine, migrate_regmap)},
                     now=lambda: clock.t, mc=Registers(mc, mc_regmap))
    rt.load()
    asyncio.run(rt.setup())
    spare = lay.phys(lay.size + 4096 - lay.size % 4096) if lay.size % 4096 else lay.phys(lay.size)
    assert spare + 4096 <= lay.phys_base + memory.data.size
    return rt, engine, mc, memory, spare


def test_runtime_runs_a_migrate_copy():
    """A copy of a tensor to the spare region: the registers, START, CTR; the record and
    the latency model's prediction."""
    rt, engine, _, memory, spare = _copy_runtime()
    t = rt.program.tensors["w.o_proj"]
    src = rt.layout.phys(t.addr)
    rec = asyncio.run(rt.migrate(src, spare, 1024, "o_proj to the spare region"))
    assert memory.read(spare, 1024) == memory.read(src, 1024) != bytes(1024)
    assert rt.copies == [rec] and rec.index == 0 and rec.cycles > 0 and rec.error is None
    assert rec.predicted == migrate_cycles(1024, src=src, dst=spare, read_latency=CFG.latency)
    assert engine.starts == 1


def test_runtime_copy_error_names_the_copy_and_retries():
    """A copy that ends in ERROR: the error names the copy (number, length, addresses,
    label) with the engine's and the MC's errors, the MC is cleared, another copy is
    refused until :meth:`retry_copy`, which runs it again; a downward move over its own
    source has the source given back before the retry, so the retry moves the original
    bytes (``memmove``)."""
    rt, engine, mc, memory, spare = _copy_runtime(fail=ErrorCode.AXI_READ_ERROR, fail_at=1)
    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, 1024, np.uint8).tobytes()
    memory.write(spare + 256, data)
    src, dst = spare + 256, spare + 240          # down by one word, over its own source
    with pytest.raises(CommandError, match=rf"copy 0 \(migrate COPY of 1024 bytes {src:#x} -> "
                                           rf"{dst:#x}, 'move'\) ended in ERROR AXI_READ_ERROR at "
                                           r"ERR_ADDR 0x1234 \(MC: AXI_READ_ERROR at ERR_ADDR "
                                           r"0x2220\)") as e:
        asyncio.run(rt.migrate(src, dst, 1024, "move"))
    assert e.value.record is rt.failed_copy is rt.copies[0] and e.value.code is ErrorCode.AXI_READ_ERROR
    assert mc.code is ErrorCode.NONE and "CLEAR" in mc.cleared
    assert memory.read(src, 1024) != data, "the model's partial copy overwrote the source"
    with pytest.raises(ValueError, match=r"copy 0 .* failed: retry_copy\(\) it first"):
        asyncio.run(rt.migrate(src, spare, 16))
    rec = asyncio.run(rt.retry_copy())
    assert memory.read(dst, 1024) == data and rec.error.startswith("AXI_READ_ERROR")
    assert rt.failed_copy is None and len(rt.copies) == 1 and engine.starts == 2
    with pytest.raises(ValueError, match="no failed copy"):
        asyncio.run(rt.retry_copy())


def test_runtime_copy_refusals():
    rt, _, _, _, spare = _copy_runtime()
    with pytest.raises(ValueError, match="length must be a positive multiple of 16"):
        asyncio.run(rt.migrate(spare, spare + 1024, 24))
    (_, prog, _), = programs("notes")
    plain = TileRuntime(prog, FakeMemory(PHYS_BASE, 64), {}, now=lambda: 0)
    with pytest.raises(ValueError, match=r"no cache-migrate engine"):
        asyncio.run(plain.migrate(PHYS_BASE, PHYS_BASE + 32, 16))
