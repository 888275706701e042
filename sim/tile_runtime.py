"""The host runtime: runs an op program's commands (:mod:`golden.program`) on the RTL.

A :class:`TileRuntime` takes a :class:`golden.program.Program`, a memory (anything with
``read(address, length)`` and ``write(address, bytes)``: the ``mem`` of
:class:`sim.bfm.GmemModel`, cocotbext-axi's ``SparseMemory``) and, per block, a
:class:`sim.regs.Registers` accessor at that block's base (0 on a standalone top,
``spec.tile.base("ma")`` / ``base("va")`` on the tile), so the same read and write
coroutines drive it whatever carries them (cocotbext-axi, the board's UART bridge). It

1. lays out every tensor of the program in memory (:func:`layout`: the program's byte
   addresses are the MA's logical addresses; physical = ``phys_base`` + address, which is
   what the VA is given and what one TAT entry maps for the MA) and writes the host's
   initial image (inputs, weights, constants; zeros elsewhere);
2. programs the MA's TAT (:func:`tat_entries`);
3. for each command writes its registers (:func:`va_register_writes`,
   :func:`ma_register_writes`; a register already holding the value is not written
   again), writes START, waits for the interrupt (or polls STATUS), and reads the CTR;
   a VA command of ``repeat`` r is r STARTs;
4. records per op (:class:`OpRecord`): block, opcode, stage, the cycles from START to the
   CTR (summed over the repetitions) and the latency models' prediction
   (:func:`golden.program.ma_command_cycles` / :func:`golden.program.va_command_cycles`).

A command that does not end within its cycle budget raises :class:`CommandTimeout`
(op index, block, opcode, stage, repetition, the cycle); one that ends in ERROR raises
:class:`CommandError` (the op, the error code, ERR_ADDR, and the tile MC's error when the
runtime is given the MC's registers) after the recovery of the host: the block's
IRQ_STATUS cleared, the MC's error cleared (CLEAR.ERROR, IRQ_STATUS), the MA's TAT
rewritten after a TAT_MISS or BAD_TAT. The failed op's outputs are then undefined and
nothing else has been written; :meth:`TileRuntime.resume` runs the op again (its outputs
first restored when it reads them: an in-place VA op, an accumulating GEMM) and the
commands after it.

Given the cache-migrate engine's registers (``blocks["migrate"]``, at
``spec.tile.base("migrate")``), :meth:`TileRuntime.migrate` runs a copy beside the
program (physical SRC, DST, LENGTH; its :class:`CopyRecord` in :attr:`TileRuntime.copies`):
the same START, wait, CTR, :class:`CommandTimeout` and :class:`CommandError` (naming the
copy) and the same recovery; :meth:`TileRuntime.retry_copy` runs a failed copy again.

With ``check=True`` the runtime runs the golden interpreter (:class:`golden.program.Machine`)
in lock step: after every command that ran on the RTL, every tensor it writes is compared
bit for bit with the golden memory (:class:`Mismatch` names the op, the tensor and the
first element). Commands the RTL cannot run (:class:`Capabilities`: a VA opcode outside
``hdl.va.core.RTL_OPCODES``, a transposed B while the MA's MODE register has no such bit)
or that the caller gives to the host (``host_blocks``) are *played by the host*: the
golden result is written into memory in their place, and the record says why.

Cycle convention: ``cycles`` = CTR − the timebase of the cycle in which the START write
is performed, the latency models' "START is performed in cycle 0" (as
:meth:`sim.ma_driver.MaBench.launch` dates it), when the caller passes ``start_time`` (a
callable giving that timebase value after the START write returns; the testbench's
:class:`sim.program_tb.StartStamp` reads it off the control port's AW and W handshakes).
Without it the runtime takes ``now()`` after the START write's response (the convention of
:class:`sim.va_driver.VaBench`), 3 cycles after START is performed on the standalone tops.
"""

from dataclasses import dataclass, field

import numpy as np

from golden import va as gva
from golden.ma import TatEntry
from golden.migrate_latency import migrate_cycles
from golden.program import (
    DTYPES,
    BlockConfig,
    Builder,
    Machine,
    Program,
    decode_step_parts,
    ma_command_cycles,
    va_command_cycles,
)
from spec.codes import ErrorCode, MaMode, VaOpcode
from spec.memory import PAGE_BYTES as PAGE
from spec.memory import tat_region_size as _region_size

__all__ = [
    "PHYS_BASE", "Layout", "layout", "tat_entries", "va_commands", "va_register_writes",
    "ma_register_writes", "tat_register_writes", "decode_va_registers", "decode_ma_registers",
    "written_tensors", "read_tensors", "rewritten_inputs", "Capabilities", "OpRecord",
    "CopyRecord",
    "RuntimeFailure", "CommandTimeout", "CommandError", "Mismatch", "TileRuntime",
    "decode_programs", "DecodeSession", "format_table",
    "format_by_stage", "format_by_opcode", "format_summary",
]

PHYS_BASE = 1 << 32
"""Default physical byte address of the program's address 0: 4 GiB, aligned to every TAT
region size up to 4 GiB, so one entry maps the whole program."""

LOGICAL_LIMIT = 1 << 32


# --- layout ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Where the program's memory lies: program byte address ``a`` (the MA's logical
    address) is physical ``phys_base + a`` (the VA's address); ``size`` bytes in all."""
    phys_base: int
    size: int

    def phys(self, addr):
        return self.phys_base + addr


def layout(program, phys_base=PHYS_BASE):
    """The :class:`Layout` of ``program`` at ``phys_base``; checks what the blocks rely
    on: every tensor 64-byte aligned, none overlapping, the whole inside the MA's 32-bit
    logical space and one TAT region, ``phys_base`` aligned to that region."""
    spans = sorted((t.addr, t.addr + t.nbytes, t.name) for t in program.tensors.values())
    for (_, hi, name), (lo2, _, name2) in zip(spans, spans[1:], strict=False):
        if lo2 < hi:
            raise ValueError(f"tensors {name!r} and {name2!r} overlap at {lo2:#x}")
    for lo, _, name in spans:
        if lo % 64:
            raise ValueError(f"tensor {name!r} at {lo:#x} is not 64-byte aligned")
    size = program.memory_bytes
    if size > LOGICAL_LIMIT:
        raise ValueError(f"the program's {size} bytes exceed the MA's 32-bit logical space")
    region = _region_size(size)
    if phys_base % (PAGE << region):
        raise ValueError(f"phys_base {phys_base:#x} is not aligned to the TAT region of "
                         f"{PAGE << region} bytes that maps the program")
    return Layout(phys_base, size)


_default_layout = layout



def tat_entries(lay):
    """The MA's TAT: entry 0 maps logical ``[0, region)`` to ``phys_base``; the other
    three invalid."""
    return [TatEntry(True, 0, _region_size(lay.size), lay.phys_base)] + [
        TatEntry(False, 0, 0, 0)] * 3


# --- register encoding ----------------------------------------------------------------------


def _addr(program, opd, r=0):
    if opd is None:
        return None
    t = program.tensors[opd.tensor]
    return t.addr + (opd.offset + r * opd.step) * t.itemsize


def va_commands(program, cmd, lay):
    """The VA commands (:class:`golden.va.VaCommand`, physical addresses) of the ``repeat``
    repetitions of ``cmd``, as :class:`golden.program.Machine` issues them (element size
    of the gather family: the source tensor's; operands absent: address 0)."""
    t = program.tensors
    es = t[cmd.src.tensor].itemsize if cmd.src is not None else 2

    def phys(opd, r):
        a = _addr(program, opd, r)
        return 0 if a is None else lay.phys(a)

    return [gva.VaCommand(cmd.op, cmd.length, src=phys(cmd.src, r), src2=phys(cmd.src2, r),
                          src3=phys(cmd.src3, r), dst=phys(cmd.dst, r), dst2=phys(cmd.dst2, r),
                          stride=cmd.stride * es, esize=es.bit_length() - 1, scalar=cmd.scalar,
                          k=cmd.k, index_limit=cmd.index_limit, split_half=bool(cmd.split_half))
            for r in range(cmd.repeat)]


_VA_ADDRS = ("SRC", "SRC2", "SRC3", "DST", "DST2")
_VA_WORDS = ("STRIDE", "SCALAR", "K", "INDEX_LIMIT", "ROWS", "ROW_STRIDE")


def va_register_writes(regs, vc):
    """``[(register, value)]`` that set up VA command ``vc`` (a ``golden.va.VaCommand``),
    START excluded; ``regs``: a :class:`sim.regs.Registers` of the VA's map (encodes the
    fields, and refuses a value that does not fit)."""
    writes = [("OPCODE", regs.encode("OPCODE", op=vc.op, esize=vc.esize,
                                     split_half=int(vc.split_half))),
              ("LENGTH", regs.encode("LENGTH", value=vc.length))]
    for name in _VA_ADDRS:
        a = getattr(vc, name.lower())
        writes += [(f"{name}_LO", regs.encode(f"{name}_LO", addr=a & 0xFFFFFFFF)),
                   (f"{name}_HI", regs.encode(f"{name}_HI", addr=a >> 32))]
    writes += [(name, regs.encode(name, value=getattr(vc, name.lower()))) for name in _VA_WORDS]
    return writes


def decode_va_registers(regs, writes):
    """The ``golden.va.VaCommand`` that register values ``writes`` describe (the inverse
    of :func:`va_register_writes`)."""
    w = dict(writes)
    op = regs.fields("OPCODE", w["OPCODE"])
    kw = {name.lower(): regs.field(f"{name}_HI", "ADDR", w[f"{name}_HI"]) << 32
          | regs.field(f"{name}_LO", "ADDR", w[f"{name}_LO"]) for name in _VA_ADDRS}
    kw.update({name.lower(): regs.field(name, "VALUE", w[name]) for name in _VA_WORDS})
    return gva.VaCommand(op["OP"], regs.field("LENGTH", "VALUE", w["LENGTH"]), esize=op["ESIZE"],
                         split_half=bool(op["SPLIT_HALF"]), **kw)


MODE_B_TRANSPOSED = 2
"""MODE.MODE bit 1: B transposed (``spec.codes.MaMode.INT8_BT`` / ``BF16_BT``, the MA's
transposed-B mode: B stored as N rows of K at LDB)."""


def _has_transposed_b(regs):
    """Whether the MA reads B transposed: ``spec.codes.MaMode`` has the BT modes (MODE.MODE
    bit 1) and the MA's MODE.MODE field (generated from its SystemRDL) is wide enough."""
    if not {"INT8_BT", "BF16_BT"} <= set(MaMode.__members__):
        return False
    width = {d["name"]: d["width"] for d in regs.register("MODE")["fields"]}.get("MODE", 0)
    return width >= 2


def ma_register_writes(regs, program, cmd):
    """``[(register, value)]`` that set up MA command ``cmd`` (a
    :class:`golden.program.MaCmd`; logical byte addresses = the program's), START
    excluded. A transposed B sets MODE.MODE bit 1 (``MaMode.INT8_BT`` / ``BF16_BT``;
    ValueError while the MA has no such mode)."""
    t = program.tensors
    ae = t[cmd.a.tensor].itemsize
    be = t[cmd.b.tensor].itemsize
    ce = t[cmd.c.tensor].itemsize
    mode = int(cmd.mode)
    if cmd.b_transposed:
        if not _has_transposed_b(regs):
            raise ValueError("the MA has no transposed-B mode (MaMode.INT8_BT / BF16_BT)")
        mode |= MODE_B_TRANSPOSED
    return [("M", regs.encode("M", value=cmd.m)), ("K", regs.encode("K", value=cmd.k)),
            ("N", regs.encode("N", value=cmd.n)),
            ("MODE", regs.encode("MODE", mode=mode, accumulate=int(cmd.accumulate))),
            ("A_ADDR", regs.encode("A_ADDR", addr=_addr(program, cmd.a))),
            ("B_ADDR", regs.encode("B_ADDR", addr=_addr(program, cmd.b))),
            ("C_ADDR", regs.encode("C_ADDR", addr=_addr(program, cmd.c))),
            ("LDA", regs.encode("LDA", stride=cmd.lda * ae)),
            ("LDB", regs.encode("LDB", stride=cmd.ldb * be)),
            ("LDC", regs.encode("LDC", stride=cmd.ldc * ce))]


def decode_ma_registers(regs, writes):
    """``dict`` of the MA command fields register values ``writes`` describe (byte
    addresses and strides; ``b_transposed``: MODE.MODE bit 1)."""
    w = dict(writes)
    mode = regs.fields("MODE", w["MODE"])
    out = dict(m=regs.field("M", "VALUE", w["M"]), k=regs.field("K", "VALUE", w["K"]),
               n=regs.field("N", "VALUE", w["N"]),
               mode=MaMode(mode["MODE"] & ~MODE_B_TRANSPOSED),
               accumulate=bool(mode["ACCUMULATE"]),
               b_transposed=bool(mode["MODE"] & MODE_B_TRANSPOSED))
    for reg in ("A_ADDR", "B_ADDR", "C_ADDR"):
        out[reg.lower()] = regs.field(reg, "ADDR", w[reg])
    for reg in ("LDA", "LDB", "LDC"):
        out[reg.lower()] = regs.field(reg, "STRIDE", w[reg])
    return out


def tat_register_writes(regs, entries):
    """``[(register, value)]`` of the MA's four TAT entries."""
    writes = []
    for i, e in enumerate(entries):
        writes += [
            (f"TAT_LOGIC_{i}", regs.encode(f"TAT_LOGIC_{i}", valid=int(e.valid), size=e.size,
                                           base=e.logical_base >> 12)),
            (f"TAT_PHYS_LO_{i}", regs.encode(f"TAT_PHYS_LO_{i}", base=(e.phys_base >> 12) & 0xFFFFF)),
            (f"TAT_PHYS_HI_{i}", regs.encode(f"TAT_PHYS_HI_{i}", base=e.phys_base >> 32)),
        ]
    return writes


def written_tensors(cmd):
    """Names of the tensors ``cmd`` writes (VA: DST and DST2; MA: C)."""
    if cmd.block == "ma":
        return [cmd.c.tensor]
    return list(dict.fromkeys(o.tensor for o in (cmd.dst, cmd.dst2) if o is not None))


def read_tensors(cmd):
    """Names of the tensors ``cmd`` reads (VA: SRC, SRC2, SRC3; MA: A, B, and C when it
    accumulates)."""
    if cmd.block == "ma":
        names = [cmd.a.tensor, cmd.b.tensor] + ([cmd.c.tensor] if cmd.accumulate else [])
    else:
        names = [o.tensor for o in (cmd.src, cmd.src2, cmd.src3) if o is not None]
    return list(dict.fromkeys(names))


def rewritten_inputs(cmd):
    """The tensors ``cmd`` both reads and writes (an in-place VA op, an accumulating GEMM):
    what a failed attempt may have changed under its own inputs."""
    reads = set(read_tensors(cmd))
    return [name for name in written_tensors(cmd) if name in reads]


# --- what the RTL can run -------------------------------------------------------------------


@dataclass(frozen=True)
class Capabilities:
    """What the RTL runs: the VA's opcodes and whether the MA reads a transposed B. The
    defaults come from the RTL itself (:meth:`of_rtl`), so the list of commands played by
    the host shrinks as the blocks gain them."""
    va_opcodes: frozenset
    ma_b_transposed: bool

    @classmethod
    def of_rtl(cls):
        """``hdl.va.core.RTL_OPCODES``; the MA's transposed-B mode (``MaMode.INT8_BT`` /
        ``BF16_BT``, MODE.MODE bit 1, in a MODE.MODE field that holds it)."""
        from hdl.ma import regmap as ma_regmap
        from hdl.va.core import RTL_OPCODES
        from sim.regs import Registers

        return cls(frozenset(int(op) for op in RTL_OPCODES),
                   _has_transposed_b(Registers(None, ma_regmap)))

    def missing(self, cmd):
        """Why the RTL cannot run ``cmd`` (a sentence), or None."""
        if cmd.block == "va":
            if cmd.op not in self.va_opcodes:
                return f"no VA RTL for {VaOpcode(cmd.op).name}"
            return None
        if cmd.b_transposed and not self.ma_b_transposed:
            return "no MA transposed-B mode"
        return None


# --- records, errors ------------------------------------------------------------------------


@dataclass
class OpRecord:
    """One op of the program as the runtime ran it. ``cycles``: START → CTR summed over
    the repetitions (None when played by the host); ``predicted``: the latency model's;
    ``host``: why the host played it (None: it ran on the RTL); ``checked``: tensors
    compared bit for bit with the golden interpreter after it."""
    index: int
    block: str
    opcode: str
    stage: str
    repeat: int
    predicted: int
    cycles: int = None
    host: str = None
    checked: list = field(default_factory=list)
    error: str = None
    """A failed attempt (``"AXI_READ_ERROR at ERR_ADDR 0x..."``, with the MC's error): kept
    when :meth:`TileRuntime.resume` runs the op again."""


@dataclass
class CopyRecord:
    """One copy of the cache-migrate engine as the runtime ran it (:meth:`TileRuntime.migrate`):
    ``index`` its number among the runtime's copies, ``src`` / ``dst`` physical byte
    addresses, ``length`` bytes, ``what`` the caller's label; ``cycles`` START → CTR;
    ``predicted`` :func:`golden.migrate_latency.migrate_cycles` at the program's memory
    latency (the engine on its own memory port: through the tile it takes longer,
    docs/tile/migrate.md); ``error`` a failed attempt, kept when it is run again."""
    index: int
    src: int
    dst: int
    length: int
    what: str
    predicted: int
    cycles: int = None
    error: str = None
    block = "migrate"
    repeat = 1

    def describe(self):
        label = f", {self.what!r}" if self.what else ""
        return (f"copy {self.index} (migrate COPY of {self.length} bytes {self.src:#x} -> "
                f"{self.dst:#x}{label})")


class RuntimeFailure(Exception):
    """A command of the program failed on the RTL (:attr:`record` says which)."""

    def __init__(self, message, record):
        super().__init__(message)
        self.record = record


class CommandTimeout(RuntimeFailure):
    """The command did not end (no DONE, no ERROR) within its cycle budget."""


class CommandError(RuntimeFailure):
    """The command ended in ERROR: :attr:`code` (an ErrorCode), :attr:`err_addr`;
    :attr:`mc`: ``(code, ERR_ADDR)`` of the tile's MC when it saw an error too (an AXI
    error response), else None."""

    def __init__(self, message, record, code, err_addr, mc=None):
        super().__init__(message, record)
        self.code, self.err_addr, self.mc = code, err_addr, mc


class Mismatch(RuntimeFailure):
    """A tensor the RTL wrote differs from the golden interpreter's."""


def _what(rec, rep=None):
    if isinstance(rec, CopyRecord):
        return rec.describe()
    r = "" if rep is None or rec.repeat == 1 else f", repetition {rep} of {rec.repeat}"
    return f"op {rec.index} ({rec.block} {rec.opcode}, stage {rec.stage!r}{r})"


# --- the runtime ----------------------------------------------------------------------------


class TileRuntime:
    """Runs ``program`` on the blocks.

    ``memory``: the physical memory (``read(addr, n)`` / ``write(addr, data)``).
    ``blocks``: ``{"va": Registers, "ma": Registers}`` (either may be missing: its
    commands are then played by the host), and ``"migrate"``: the cache-migrate engine's,
    for :meth:`migrate`. ``now``: callable, the timebase at the latest
    rising edge (:meth:`sim.bfm.KernelBench.now`); ``interrupt``: the ``interrupt``
    signal, or None to poll STATUS. ``layout``: a :class:`Layout` (default
    :func:`layout` of the program at :data:`PHYS_BASE`). ``capabilities``: default
    :meth:`Capabilities.of_rtl`. ``check``: compare after every RTL command (see the
    module docstring; needed to play commands by the host). ``timeout``: a command's
    budget in cycles is ``timeout[0] + timeout[1]·predicted``. ``start_time``: see the
    module docstring (None: ``now()`` after the START write). ``mc``: the
    :class:`sim.regs.Registers` of the tile's MC (``spec.tile.base("mc")``), or None: a
    failed command's report then carries the MC's error, which the recovery clears.

    After a :class:`CommandError`, :attr:`failed` is the failed op's index (None
    otherwise) and :meth:`resume` goes on from it.
    """

    def __init__(self, program, memory, blocks, *, now, interrupt=None, layout=None,
                 capabilities=None, check=True, timeout=(20_000, 20), start_time=None,
                 mc=None):
        self.program, self.memory, self.blocks = program, memory, dict(blocks)
        self.mc = mc
        self.failed = None
        self._failed_record = self._saved = None
        self.now, self.interrupt = now, interrupt
        self.start_time = start_time or now
        self.layout = layout if layout is not None else _default_layout(program)
        self.capabilities = capabilities or Capabilities.of_rtl()
        self.check, self.timeout = check, timeout
        self.golden = None
        self.records = []
        self.copies = []
        self.failed_copy = None
        self._copy_saved = None
        self._migrate_caps = None
        self._shadow = {name: {} for name in self.blocks}

    # memory
    def _tensor_bytes(self, name):
        t = self.program.tensors[name]
        return self.memory.read(self.layout.phys(t.addr), t.nbytes)

    def read(self, name):
        """Tensor ``name`` as the memory holds it, in its shape and dtype."""
        t = self.program.tensors[name]
        return np.frombuffer(self._tensor_bytes(name), DTYPES[t.dtype]).reshape(t.shape).copy()

    def image(self):
        """The program's memory, ``size`` bytes from its address 0."""
        return np.frombuffer(self.memory.read(self.layout.phys_base, self.layout.size), np.uint8)

    def load(self, keep=False):
        """Write the host's initial image: zeros (``keep``: the memory as it is, what the
        commands before left), then every tensor of ``program.init``; start the golden
        interpreter on the same image."""
        m = Machine(self.program.config, self.program.tensors, self.layout.size)
        if keep:
            m.mem[: self.layout.size] = self.image()
        for name, data in self.program.init.items():
            m.write(name, data)
        self.memory.write(self.layout.phys_base, m.mem.tobytes())
        self.golden = m if self.check else None
        self.failed = None

    # registers
    async def _write(self, block, writes):
        regs, shadow = self.blocks[block], self._shadow[block]
        for name, value in writes:
            if shadow.get(name) != value:
                await regs.write(name, value)
                shadow[name] = value

    async def setup(self):
        """Per block: clear and enable both interrupts (when waiting on ``interrupt``);
        the MA's TAT."""
        for regs in self.blocks.values():
            await regs.write_fields("IRQ_STATUS", done=1, error=1)
            await regs.write_fields("IRQ_ENABLE", done=int(self.interrupt is not None),
                                    error=int(self.interrupt is not None))
        if "ma" in self.blocks:
            await self.program_tat()

    async def program_tat(self, *, force=False):
        """Write the MA's TAT (:func:`tat_entries`); ``force``: every register, also
        those the runtime believes already hold their value (the recovery after a TAT
        error: the TAT may have been changed behind the runtime's back)."""
        writes = tat_register_writes(self.blocks["ma"], tat_entries(self.layout))
        if force:
            for name, _ in writes:
                self._shadow["ma"].pop(name, None)
        await self._write("ma", writes)

    async def _recover(self, block, regs, code):
        """The host's recovery after a command of ``block`` ended in ERROR with ``code``
        (docs/design.md, "Errors"): clear the block's IRQ_STATUS (its ERROR and ERR_ADDR
        are cleared by the next accepted START); read the MC's error, if it has one, and
        clear it (CLEAR.ERROR, IRQ_STATUS: the MC keeps its last error until then);
        after a TAT_MISS or BAD_TAT rewrite the MA's TAT. Returns the MC's
        ``(code, ERR_ADDR)`` or None."""
        await regs.write_fields("IRQ_STATUS", done=1, error=1)
        mc = None
        if self.mc is not None and (await self.mc.read_fields("STATUS"))["ERROR"]:
            mc = (ErrorCode(await self.mc.read("ERROR")), await self.mc.read("ERR_ADDR"))
            await self.mc.write_fields("CLEAR", error=1)
            await self.mc.write_fields("IRQ_STATUS", error=1)
        if block == "ma" and code in (ErrorCode.TAT_MISS, ErrorCode.BAD_TAT):
            await self.program_tat(force=True)
        return mc

    async def _wait_end(self, regs, rec, rep, budget):
        from cocotb.triggers import First, RisingEdge, Timer

        started = self.now()
        if self.interrupt is not None and not int(self.interrupt.value):
            timeout = Timer(budget * self._period_ns(), "ns")
            if await First(RisingEdge(self.interrupt), timeout) is timeout:
                self._timeout(rec, rep, budget, await regs.read_fields("STATUS"))
        # STATUS is the authority (and, without an interrupt, what is polled)
        while True:
            status = await regs.read_fields("STATUS")
            if status["DONE"] or status["ERROR"]:
                return status
            if self.now() - started > budget:
                self._timeout(rec, rep, budget, status)

    def _period_ns(self):
        from .bfm import PERIOD_NS
        return PERIOD_NS

    def _timeout(self, rec, rep, budget, status):
        raise CommandTimeout(f"{_what(rec, rep)} did not end within {budget} cycles of START "
                             f"(timebase {self.now()}, STATUS {status})", rec)

    async def _start(self, block, rec, rep, writes, budget):
        regs = self.blocks[block]
        await self._write(block, writes)
        await regs.write("START", 1)
        started = self.start_time()
        status = await self._wait_end(regs, rec, rep, budget)
        if status["ERROR"] or not status["DONE"]:
            code = ErrorCode(await regs.read("ERROR"))
            err_addr = await regs.read("ERR_ADDR")
            when = self.now()
            mc = await self._recover(block, regs, code)
            rec.error = f"{code.name} at ERR_ADDR {err_addr:#x}" + (
                "" if mc is None else f" (MC: {mc[0].name} at ERR_ADDR {mc[1]:#x})")
            raise CommandError(f"{_what(rec, rep)} ended in ERROR {rec.error} (timebase "
                               f"{when}, STATUS {status})", rec, code, err_addr, mc)
        lo = await regs.read("CTR_LO")
        hi = await regs.read("CTR_HI")
        if self.interrupt is not None:
            await regs.write_fields("IRQ_STATUS", done=1, error=1)
        return (hi << 32 | lo) - started

    def _record(self, index, cmd):
        if cmd.block == "ma":
            predicted = ma_command_cycles(self.program, cmd)
        else:
            predicted = va_command_cycles(self.program, cmd)
        return OpRecord(index, cmd.block, cmd.opname, cmd.stage,
                        cmd.repeat if cmd.block == "va" else 1, predicted)

    def reason_for_host(self, cmd):
        """Why ``cmd`` is played by the host, or None (it runs on the RTL)."""
        if cmd.block not in self.blocks:
            return f"{cmd.block.upper()} played by the host"
        return self.capabilities.missing(cmd)

    def _play(self, cmd):
        for name in written_tensors(cmd):
            t = self.program.tensors[name]
            self.memory.write(self.layout.phys(t.addr), self.golden.view(name).tobytes())

    def _compare(self, rec, cmd):
        for name in written_tensors(cmd):
            want = self.golden.view(name)
            got = np.frombuffer(self._tensor_bytes(name), want.dtype)
            if not np.array_equal(got, want):
                bad = np.nonzero(got != want)[0]
                i = int(bad[0])
                raise Mismatch(
                    f"{_what(rec)}: tensor {name!r} differs from the golden interpreter in "
                    f"{bad.size} of {want.size} elements; first [{i}] = "
                    f"{int(got[i]) & 0xFFFFFFFF:#x}, expected {int(want[i]) & 0xFFFFFFFF:#x}",
                    rec)
            rec.checked.append(name)

    async def run_command(self, index, cmd):
        """Run one command (on the RTL or by the host); returns its :class:`OpRecord`.
        The op that failed last (:attr:`failed`) is run again: its record is the failed
        attempt's, the golden interpreter does not run it twice, and the inputs it
        writes (:func:`rewritten_inputs`) are first given back the bytes they held
        before the failed attempt."""
        retry = self.failed == index
        if retry:
            rec, saved = self._failed_record, self._saved
            for name, data in saved.items():
                t = self.program.tensors[name]
                self.memory.write(self.layout.phys(t.addr), data)
            self.failed = self._failed_record = self._saved = None
        else:
            rec = self._record(index, cmd)
            self.records.append(rec)
        reason = self.reason_for_host(cmd)
        if self.golden is not None and not retry:
            self.golden.execute(cmd)
        if reason is not None:
            if self.golden is None:
                raise RuntimeFailure(f"{_what(rec)}: {reason}, and only a checking runtime "
                                     "(check=True) can play it", rec)
            rec.host = reason
            self._play(cmd)
            return rec
        budget = self.timeout[0] + self.timeout[1] * rec.predicted
        regs = self.blocks[cmd.block]
        if not retry:
            saved = {name: self._tensor_bytes(name) for name in rewritten_inputs(cmd)}
        try:
            if cmd.block == "va":
                cycles = 0
                for rep, vc in enumerate(va_commands(self.program, cmd, self.layout)):
                    cycles += await self._start("va", rec, rep, va_register_writes(regs, vc),
                                                budget)
            else:
                cycles = await self._start("ma", rec, None,
                                           ma_register_writes(regs, self.program, cmd), budget)
        except CommandError:
            self.failed, self._failed_record, self._saved = index, rec, saved
            raise
        rec.cycles = cycles
        if self.golden is not None:
            self._compare(rec, cmd)
        return rec

    async def run(self, commands=None, *, on_record=None, keep=False):
        """Load the memory (``keep``: over what is there, see :meth:`load`), set the
        blocks up and run ``commands`` (indices into ``program.commands``; all by default)
        in order; returns the records. ``on_record(record)`` is called after each op."""
        self.load(keep)
        await self.setup()
        indices = range(len(self.program.commands)) if commands is None else commands
        for i in indices:
            rec = await self.run_command(i, self.program.commands[i])
            if on_record is not None:
                on_record(rec)
        return self.records

    async def resume(self, commands=None, *, on_record=None):
        """After a :class:`CommandError` (and the recovery the runtime did before raising
        it): run ``commands`` (indices; default: from the failed op to the end of the
        program), the first of which must be the failed op, over the memory as it is.
        Returns the records."""
        if self.failed is None:
            raise ValueError("no failed op to resume from")
        indices = range(self.failed, len(self.program.commands)) if commands is None else commands
        if not indices or indices[0] != self.failed:
            raise ValueError(f"resume must start at the failed op {self.failed}")
        for i in indices:
            rec = await self.run_command(i, self.program.commands[i])
            if on_record is not None:
                on_record(rec)
        return self.records

    # the cache-migrate engine

    async def _migrate_params(self):
        """(bus bytes, max_burst, max_outstanding) from the engine's CAPS, read once."""
        if self._migrate_caps is None:
            caps = await self.blocks["migrate"].read_fields("CAPS")
            self._migrate_caps = (caps["BUS_BYTES"], caps["MAX_BURST"], caps["MAX_OUTSTANDING"])
        return self._migrate_caps

    async def migrate(self, src, dst, length, what=""):
        """Copy ``length`` bytes from physical ``src`` to physical ``dst`` with the
        cache-migrate engine (``blocks["migrate"]``): its registers, START, the wait (the
        interrupt or STATUS), the CTR. Returns its :class:`CopyRecord` (also appended to
        :attr:`copies`). A copy that ends in ERROR raises :class:`CommandError` naming it
        (``copy <n> (migrate COPY of <length> bytes <src> -> <dst>, <what>)``, the
        engine's code and ERR_ADDR, the MC's error) after the same recovery as a block's
        (IRQ_STATUS cleared, the MC's error read and cleared); :attr:`failed_copy` is then
        its record and :meth:`retry_copy` runs it again. A copy down over its own source
        (``dst < src < dst + length``) may overwrite source bytes before it fails: they are
        saved before START and given back before the retry. The program's golden
        interpreter is not involved: the engine copies bytes."""
        if "migrate" not in self.blocks:
            raise ValueError("no cache-migrate engine: give blocks['migrate'] (its Registers)")
        if self.failed_copy is not None:
            raise ValueError(f"{self.failed_copy.describe()} failed: retry_copy() it first")
        bus, burst, outstanding = await self._migrate_params()
        try:
            predicted = migrate_cycles(length, src=src, dst=dst, bus_bytes=bus, max_burst=burst,
                                       max_outstanding=outstanding,
                                       read_latency=max(self.program.config.latency, 1))
        except ValueError as error:
            raise ValueError(f"copy of {length} bytes {src:#x} -> {dst:#x}: {error}") from None
        rec = CopyRecord(len(self.copies), src, dst, length, what, predicted)
        self.copies.append(rec)
        saved = self.memory.read(src, length) if dst < src < dst + length else None
        return await self._run_copy(rec, saved)

    async def retry_copy(self):
        """Run the copy that failed last (:attr:`failed_copy`) again, its source first
        given back the bytes a failed downward move may have overwritten; returns its
        record (the failed attempt in ``error``)."""
        rec, saved = self.failed_copy, self._copy_saved
        if rec is None:
            raise ValueError("no failed copy to retry")
        if saved is not None:
            self.memory.write(rec.src, saved)
        self.failed_copy = self._copy_saved = None
        return await self._run_copy(rec, saved)

    async def _run_copy(self, rec, saved):
        regs = self.blocks["migrate"]
        writes = [(f"{name}_{half}", regs.encode(f"{name}_{half}",
                                                 addr=(a & 0xFFFFFFFF) if half == "LO" else a >> 32))
                  for name, a in (("SRC", rec.src), ("DST", rec.dst)) for half in ("LO", "HI")]
        writes.append(("LENGTH", regs.encode("LENGTH", value=rec.length)))
        budget = self.timeout[0] + self.timeout[1] * rec.predicted
        try:
            rec.cycles = await self._start("migrate", rec, None, writes, budget)
        except CommandError:
            self.failed_copy, self._copy_saved = rec, saved
            raise
        return rec

    def mismatches(self, exclude=()):
        """Tensors whose memory differs from the golden interpreter's, but those named in
        ``exclude`` (e.g. a failed op's outputs)."""
        if self.golden is None:
            return []
        got, want = self.image(), self.golden.mem[: self.layout.size]
        return [name for name, t in self.program.tensors.items() if name not in exclude
                and not np.array_equal(got[t.addr: t.addr + t.nbytes],
                                       want[t.addr: t.addr + t.nbytes])]

    def final_mismatches(self):
        """Tensors whose memory differs from the golden interpreter's (``[]`` when the
        whole image is bit-exact)."""
        if self.golden is None or np.array_equal(self.image(), self.golden.mem[: self.layout.size]):
            return []
        return self.mismatches()


# --- programs -------------------------------------------------------------------------------


def decode_programs(preset, config, position=None, mode="bf16"):
    """One decode step of every layer of tile preset ``preset``, as
    :func:`golden.program.decode_steps` makes them (the same generators, seeds and
    commands), each a complete :class:`Program`: ``init`` holds every host tensor of the
    step's memory (weights, constants, inputs, the state's initial image), so
    :func:`golden.program.run` and the runtime start from the image the step's commands
    were generated on. Returns ``[(layer, program, stage names)]``."""
    b, steps = decode_step_parts(preset, position, config, mode)
    return [(layer, Program(step.config, step.tensors, step.commands,
                            {name: data for name, data in b.init.items() if name in step.tensors}),
             names)
            for layer, step, names in steps]


class DecodeSession:
    """Consecutive decode steps of tile preset ``preset`` from ``position`` (the preset's
    by default, minus ``steps`` − 1, so that the last step is the preset's own), each
    generated from the memory the step before left: :meth:`step` gives the next step's
    programs, one per layer (as :func:`decode_programs`: the same generators; the
    state of every layer allocated once, for ``position + steps`` tokens, and zero before
    the first step), :meth:`sync` makes the generator's memory the image the RTL wrote
    (the MoE's dispatch of the next step reads it). A program's ``init`` holds only the
    tensors its step adds (its inputs and new constants): run it with ``keep=True``
    over the memory the step before left (the first step: over zeros, as
    ``keep=False``). :meth:`expected` is the generator's own memory after the step, so
    ``image == expected()`` says the RTL left exactly what the golden interpreter
    computed from the same start.

    ``prefill`` S > 0 (the ``notes`` preset): the steps follow a prefill of S tokens
    instead of a zero state: :meth:`prefill` gives its program
    (:func:`golden.program_notes.notes_prefill` of the first S rows the preset's seed
    draws, the state of S + ``steps`` tokens written by its last commands), to be run
    first over zeros; the steps are then at positions S, S + 1, ..., their inputs the
    next rows of the same draw (:attr:`inputs` holds every row so far)."""

    def __init__(self, preset, config, steps, position=None, mode="bf16", prefill=0):
        from golden.presets.tile import PRESETS
        from golden.program_dsv4 import dsv4_state
        from golden.program_notes import notes_state

        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; expected one of {sorted(PRESETS)}")
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        self.pre = PRESETS[preset]
        if prefill:
            if self.pre.kind != "notes" or self.pre.config.num_hidden_layers != 1:
                raise ValueError(f"a prefill before the steps: the one-layer notes preset, not "
                                 f"{preset!r}")
            if prefill < 1 or position not in (None, prefill):
                raise ValueError(f"prefill must be >= 1 tokens and the first step at its end, "
                                 f"got prefill={prefill}, position={position}")
            position = prefill
        self.prefill_tokens, self._prefilled = prefill, False
        self.t = self.pre.position - (steps - 1) if position is None else position
        if self.t < 0:
            raise ValueError(f"position must be >= 0, got {self.t}")
        self.mode, self.steps_left = mode, steps
        self.model = self.pre.model()
        self.builder = b = Builder(config or BlockConfig())
        self.rng = np.random.default_rng(self.pre.seed)
        capacity = self.t + steps
        self.states = []
        for i, layer in enumerate(self.model.layers):
            b.prefix = f"l{i}."
            self.states.append(dsv4_state(b, layer, capacity) if self.pre.kind == "deepseek-v4"
                               else notes_state(b, layer, capacity))
        b.prefix = ""
        self._given = set()
        self.inputs = []

    def prefill(self):
        """The prefill's ``[(layer, program, stage names)]`` (``prefill`` tokens, see the
        class), its ``init`` every host tensor so far; once, before the first step."""
        from golden.program_notes import notes_prefill

        if not self.prefill_tokens or self._prefilled:
            raise ValueError("no prefill to run" if not self.prefill_tokens
                             else "the prefill has been run")
        b, c = self.builder, self.pre.config
        x = self.rng.standard_normal((self.prefill_tokens, c.hidden_size))
        self.inputs += list(x)
        (layer,) = self.model.layers
        b.prefix = "l0."
        start = len(b.commands)
        try:
            program, names = notes_prefill(layer, x, mode=self.mode, builder=b,
                                           state=self.states[0])
        finally:
            b.prefix = ""
        init = {name: data for name, data in b.init.items() if name in program.tensors}
        self._given |= set(init)
        self._prefilled = True
        return [(layer, Program(program.config, program.tensors, program.commands[start:], init),
                 names)]

    def step(self):
        """The next step's ``[(layer, program, stage names)]`` at position :attr:`t`
        (then advanced by one)."""
        from golden.program_dsv4 import dsv4_decode_step
        from golden.program_notes import notes_decode_step

        if self.steps_left == 0:
            raise ValueError("no step left")
        if self.prefill_tokens and not self._prefilled:
            raise ValueError("run the prefill first (prefill())")
        b, c, t = self.builder, self.pre.config, self.t
        out = []
        for i, layer in enumerate(self.model.layers):
            b.prefix = f"l{i}."
            st = self.states[i]
            if self.pre.kind == "deepseek-v4":
                row = self.rng.standard_normal((c.hc_mult, c.hidden_size))
                step, names = dsv4_decode_step(layer, st, row, int(self.rng.integers(c.vocab_size)),
                                               t, b)
            else:
                row = self.rng.standard_normal(c.hidden_size)
                self.inputs.append(row)
                step, names = notes_decode_step(layer, st, row, t, b, self.mode)
            init = {name: data for name, data in b.init.items()
                    if name in step.tensors and name not in self._given}
            self._given |= set(init)
            out.append((layer, Program(step.config, step.tensors, step.commands, init), names))
        b.prefix = ""
        self.t += 1
        self.steps_left -= 1
        return out

    def expected(self):
        """The generator's memory (bytes from address 0) after the steps so far."""
        return self.builder.m.mem[: self.builder._top]

    def sync(self, image):
        """Make the generator's memory ``image`` (the memory the RTL left)."""
        image = np.asarray(image, np.uint8)
        self.builder.m.mem[: image.size] = image


# --- reports --------------------------------------------------------------------------------


def format_table(records):
    """The per-op table: op, block, opcode, stage, repetitions, cycles, predicted, where."""
    lines = [f"{'op':>5} {'block':5} {'opcode':16} {'stage':28} {'rep':>4} {'cycles':>8} "
             f"{'predicted':>9}  ran"]
    for r in records:
        cyc = "-" if r.cycles is None else str(r.cycles)
        lines.append(f"{r.index:5d} {r.block:5} {r.opcode:16} {r.stage[:28]:28} {r.repeat:4d} "
                     f"{cyc:>8} {r.predicted:9d}  {'RTL' if r.host is None else 'host: ' + r.host}")
    return "\n".join(lines)


def format_by_opcode(records):
    """Per block and opcode, over the ops that ran on the RTL: ops, STARTs, cycles
    measured and predicted, and how many ops took exactly the predicted cycles."""
    rows = {}
    for r in records:
        if r.host is None:
            row = rows.setdefault((r.block, r.opcode), [0, 0, 0, 0, 0])
            row[0] += 1
            row[1] += r.repeat
            row[2] += r.cycles
            row[3] += r.predicted
            row[4] += r.cycles == r.predicted
    lines = [f"{'block':5} {'opcode':16} {'ops':>5} {'STARTs':>6} {'cycles':>8} {'predicted':>9} "
             f"{'diff':>6} {'exact':>5}"]
    for (block, op), (n, starts, cyc, pred, exact) in sorted(rows.items()):
        lines.append(f"{block:5} {op:16} {n:5d} {starts:6d} {cyc:8d} {pred:9d} {cyc - pred:+6d} "
                     f"{exact:5d}")
    return "\n".join(lines)


def format_by_stage(records):
    """The per-stage table: each run of consecutive ops of one stage (``l1.`` prefixes
    keep the layers apart) with its blocks, ops, STARTs, cycles on the RTL, the latency
    models' prediction for those same ops, and the ops played by the host."""
    rows = []
    for r in records:
        if not rows or rows[-1]["stage"] != r.stage:
            rows.append(dict(stage=r.stage, first=r.index, blocks=[], ops=0, starts=0, cycles=0,
                             predicted=0, host=0))
        row = rows[-1]
        if r.block not in row["blocks"]:
            row["blocks"].append(r.block)
        row["ops"] += 1
        if r.host is None:
            row["starts"] += r.repeat
            row["cycles"] += r.cycles
            row["predicted"] += r.predicted
        else:
            row["host"] += 1
    lines = [f"{'op':>5} {'stage':34} {'block':7} {'ops':>4} {'STARTs':>6} {'cycles':>8} "
             f"{'predicted':>9} {'diff':>7} {'host':>4}"]
    for row in rows:
        lines.append(f"{row['first']:5d} {row['stage'][:34]:34} {'+'.join(row['blocks']):7} "
                     f"{row['ops']:4d} {row['starts']:6d} {row['cycles']:8d} {row['predicted']:9d} "
                     f"{row['cycles'] - row['predicted']:+7d} {row['host']:4d}")
    rtl = [r for r in records if r.host is None]
    cyc, pred = sum(r.cycles for r in rtl), sum(r.predicted for r in rtl)
    lines.append(f"{'':5} {'total':34} {'':7} {len(records):4d} {sum(r.repeat for r in rtl):6d} "
                 f"{cyc:8d} {pred:9d} {cyc - pred:+7d} {len(records) - len(rtl):4d}")
    return "\n".join(lines)


def format_summary(records, title=""):
    """Per block: ops (and STARTs) on the RTL bit-exact, ops played by the host by
    reason, cycles measured vs predicted over the RTL ops."""
    lines = [title] if title else []
    for block in ("ma", "va"):
        recs = [r for r in records if r.block == block]
        if not recs:
            continue
        rtl = [r for r in recs if r.host is None]
        host = [r for r in recs if r.host is not None]
        cyc = sum(r.cycles for r in rtl)
        pred = sum(r.predicted for r in rtl)
        if rtl:
            lines.append(f"{block}: {len(rtl)} of {len(recs)} ops on the RTL "
                         f"({sum(r.repeat for r in rtl)} STARTs), all bit-exact; cycles {cyc} "
                         f"measured, {pred} predicted (measured/predicted {cyc / pred:.4f}); "
                         f"{sum(r.cycles == r.predicted for r in rtl)} ops exactly as predicted")
        else:
            lines.append(f"{block}: 0 of {len(recs)} ops on the RTL")
        reasons = {}
        for r in host:
            reasons[r.host] = reasons.get(r.host, 0) + 1
        for why, n in sorted(reasons.items()):
            lines.append(f"{block}: {n} ops played by the host: {why}")
    return "\n".join(lines)
