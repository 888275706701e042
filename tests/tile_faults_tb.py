"""cocotb testbench: faults injected into the middle of a ``notes`` decode step through the
integrated tile ``v4hw_tile``, the host runtime's recovery, and the next step bit for bit.

Two consecutive ``notes`` steps (:class:`sim.tile_runtime.DecodeSession`, positions 27
and 28). In the first, before chosen ops, one fault each (``V4HW_TF_FAULTS``, a comma
list, in program order):

``read``   an AXI read error: :class:`sim.bfm.ErrorRange` (SLVERR on reads) over the
           second half of the rows of B (the weights) of the output projection's GEMM (MA);
``write``  an AXI write error: SLVERR on writes over the whole DST of the first VA op of
           the experts that reads what it writes (the in-place ADD into the MoE output);
``tat``    a TAT miss: the MA's TAT entry 0 invalidated behind the runtime's back before
           the first GEMM of the experts, so no byte of the command is mapped;
``gather`` an AXI read error in an indexed VA command: SLVERR on reads of the whole
           source the first GATHER_IDX may address (the router's secondary scores; its
           indices, SRC2, read fine): every element read is refused, ERR_ADDR is the
           first element's address (SRC + index[0]·STRIDE, the indices read off memory);
``migrate-read``, ``migrate-write``  an AXI error in a copy of the cache-migrate engine
           the host runs between two ops (:meth:`sim.tile_runtime.TileRuntime.migrate`: the
           layer's KV cache, ``state.keys`` before the op after the state stage and
           ``state.values`` before the next, to a spare region above the program, filled
           with random bytes): SLVERR on reads of the second half of the source (ERR_ADDR:
           its first word's address), or on writes of the second half of the destination
           (ERR_ADDR: the first byte of the write burst holding it, the engine's burst cut
           :func:`golden.migrate_latency.bursts`).

For each: the op ends in ERROR with the fault's code and ERR_ADDR (the first byte of the
failed access: the range's first byte, the first refused burst of the memory's log; a
TAT miss: A's first row, nothing read or written), the runtime raises
:class:`sim.tile_runtime.CommandError` naming the op (and, for an AXI fault, the MC's
error: its last, the address of one of the refused bursts), every tensor but the failed
op's outputs equals the golden interpreter's, the recovery has cleared the block's
IRQ_STATUS and the MC's error (and rewritten the TAT); the fault is then removed and
:meth:`sim.tile_runtime.TileRuntime.resume` runs the op again, bit-exact, and the rest of
the step. A copy's fault: the runtime's error names the copy (number, length, addresses,
label), the engine and the MC report their codes and ERR_ADDRs, no byte outside DST
changed (after a read error none at or after the failing word's place in DST, after a
write error none in the refused range), every tensor of the program is the golden one,
the engine's IRQ_STATUS and the MC are clear; the fault removed,
:meth:`sim.tile_runtime.TileRuntime.retry_copy` copies the source exactly, and the step
goes on. The memory after the step must equal the
generator's, and the second step runs whole, bit-exact, from it.

Environment: ``V4HW_TF_FAULTS`` (default all six:
``read,write,tat,gather,migrate-read,migrate-write``), ``V4HW_TS_REPORT`` (JSON:
the faults, the steps, the records).
"""

import json
import os
import time

import cocotb
import numpy as np
from cocotbext.axi import AxiResp

from golden.migrate_latency import bursts
from sim.bfm.axi_mem import ErrorRange
from sim.tile_demo_tb import _bench, _start, block_config, run_layers, start_stamp
from sim.tile_runtime import (
    CommandError,
    DecodeSession,
    TileRuntime,
    va_commands,
    written_tensors,
)
from spec.codes import ErrorCode

FAULTS = ("read", "write", "tat", "gather", "migrate-read", "migrate-write")
SPARE = 1 << 28
"""Program byte address of the copies' spare region (far above any step's memory)."""


def _operand_bytes(program, opd, count):
    t = program.tensors[opd.tensor]
    return t.addr + opd.offset * t.itemsize, count * t.itemsize


def plan_faults(program, names):
    """``{op index: fault}`` of the faults ``names`` in ``program`` (a ``notes`` step);
    each fault a dict: kind, the logical byte range it covers, the code and ERR_ADDR
    the block must report."""
    cmds = program.commands
    plan = {}
    for kind in names:
        if kind == "read":
            i = next(i for i, c in enumerate(cmds)
                     if c.block == "ma" and c.stage == "output projection")
            c = cmds[i]
            b = program.tensors[c.b.tensor]
            row = c.ldb * b.itemsize
            start, _ = _operand_bytes(program, c.b, 0)
            lo, hi = start + (c.k // 2) * row, start + c.k * row
            plan[i] = dict(kind=kind, lo=lo, hi=hi, code=ErrorCode.AXI_READ_ERROR, err_addr=lo,
                           what=f"SLVERR on reads of B rows {c.k // 2}..{c.k - 1} "
                                f"({c.b.tensor})")
        elif kind == "write":
            from sim.tile_runtime import rewritten_inputs
            i = next(i for i, c in enumerate(cmds)
                     if c.block == "va" and c.stage == "experts" and rewritten_inputs(c))
            c = cmds[i]
            lo, n = _operand_bytes(program, c.dst, c.length)
            plan[i] = dict(kind=kind, lo=lo, hi=lo + n, code=ErrorCode.AXI_WRITE_ERROR,
                           err_addr=lo, what=f"SLVERR on writes of DST ({c.dst.tensor}, "
                                             f"{n} bytes; the op reads it too)")
        elif kind == "tat":
            i = next(i for i, c in enumerate(cmds) if c.block == "ma" and c.stage == "experts")
            c = cmds[i]
            lo, _ = _operand_bytes(program, c.a, 0)
            plan[i] = dict(kind=kind, lo=None, hi=None, code=ErrorCode.TAT_MISS, err_addr=lo,
                           what="TAT entry 0 invalidated behind the runtime's back")
        elif kind == "gather":
            i = next(i for i, c in enumerate(cmds) if c.opname == "GATHER_IDX")
            c = cmds[i]
            lo, _ = _operand_bytes(program, c.src, 0)
            es = program.tensors[c.src.tensor].itemsize
            hi = lo + ((c.index_limit - 1) * c.stride + 1) * es
            plan[i] = dict(kind=kind, lo=lo, hi=hi, code=ErrorCode.AXI_READ_ERROR,
                           err_addr=None, what=f"SLVERR on reads of the gathered source "
                                               f"({c.src.tensor}, {hi - lo} bytes)")
        elif kind in ("migrate-read", "migrate-write"):
            after = max(i for i, c in enumerate(cmds) if c.stage == "state") + 1
            i = after + (kind == "migrate-write")
            name = next(c.dst.tensor for c in cmds if c.stage == "state"
                        and c.dst.tensor.endswith("keys" if kind == "migrate-read" else "values"))
            t = program.tensors[name]
            src, dst, n = t.addr, SPARE + (kind == "migrate-write") * 0x1_0000, t.nbytes
            half = n // 32 * 16                  # the second half, from a bus word
            if kind == "migrate-read":
                lo, hi, err = src + half, src + n, src + half
            else:
                lo, hi = dst + half, dst + n
                err = next(a for a, w in bursts(dst, n, 16, 16) if a + 16 * w > lo)
            plan[i] = dict(kind=kind, lo=lo, hi=hi, src=src, dst=dst, length=n, tensor=name,
                           code=ErrorCode.AXI_READ_ERROR if kind == "migrate-read"
                           else ErrorCode.AXI_WRITE_ERROR, err_addr=err,
                           what=f"SLVERR on {kind[8:]}s of the copy of {name}'s {n} bytes "
                                f"(the {'source' if kind == 'migrate-read' else 'destination'}"
                                f"'s bytes {half}..{n - 1})")
        else:
            raise ValueError(f"unknown fault {kind!r}; expected one of {', '.join(FAULTS)}")
    if len(plan) != len(names):
        raise ValueError(f"two faults on one op: {names}")
    return plan


async def arm(bench, rt, fault, cmd=None):
    if fault["kind"] == "tat":
        await bench.block_regs("ma").write("TAT_LOGIC_0", 0)
        return
    if fault["kind"] == "gather":
        # the first element the command reads: its indices are in memory by now
        (vc,) = va_commands(rt.program, cmd, rt.layout)
        idx = np.frombuffer(bench.ram.mem.read(vc.src2, 4 * vc.length), np.int32)
        first = int(idx[idx >= 0][0])
        fault["err_addr"] = (vc.src + first * vc.stride) & 0xFFFFFFFF
        fault["indices"] = idx.tolist()
    write = fault["kind"] in ("write", "migrate-write")
    bench.ram.error_ranges.append(ErrorRange(rt.layout.phys(fault["lo"]), rt.layout.phys(fault["hi"]),
                                             AxiResp.SLVERR, reads=not write, writes=write))


async def check_recovered(bench, rt, rec, fault, error, marks):
    """What the host sees after the fault, and that the recovery left the tile clean;
    returns the fault's report."""
    cmd = rt.program.commands[rec.index]
    what = f"op {rec.index} ({rec.block} {rec.opcode}, stage {rec.stage!r}"
    assert str(error).startswith(what), f"the error does not name the op: {error}"
    assert error.record is rec and rt.failed == rec.index
    assert error.code is fault["code"], f"{what}: {error.code.name}, expected {fault['code'].name}"
    reads, writes = bench.ram.reads[marks[0]:], bench.ram.writes[marks[1]:]
    failed = ([b.addr for b in reads if b.failed] if fault["kind"] in ("read", "gather")
              else [b.addr for b in writes if b.failed])
    if fault["kind"] == "tat":
        assert not reads and not writes, f"{what}: {len(reads)} reads, {len(writes)} writes"
        assert error.mc is None, f"{what}: the MC saw an error {error.mc}"
    else:
        assert failed, f"{what}: no burst was refused"
        assert rt.layout.phys(fault["lo"]) <= failed[0] < rt.layout.phys(fault["hi"])
        assert error.mc is not None and error.mc[0] is fault["code"], f"MC: {error.mc}"
        # the MC keeps its last error: the address (low 32 bits) of a refused burst
        assert error.mc[1] in [a & 0xFFFFFFFF for a in failed], f"MC ERR_ADDR {error.mc[1]:#x}"
    assert error.err_addr == fault["err_addr"], (
        f"{what}: ERR_ADDR {error.err_addr:#x}, expected {fault['err_addr']:#x} (first failed "
        f"burst at physical {failed[0] if failed else 0:#x})")
    # no other op's data changed: every tensor but the failed op's outputs is the golden one
    outputs = written_tensors(cmd)
    bad = rt.mismatches(exclude=outputs)
    assert not bad, f"{what}: tensors other than its outputs {outputs} differ: {bad[:5]}"
    # the recovery: the block's and the MC's interrupts and errors cleared, the TAT back
    blk, mc = rt.blocks[rec.block], bench.block_regs("mc")
    assert await blk.read_fields("IRQ_STATUS") == {"DONE": 0, "ERROR": 0}
    assert not (await mc.read_fields("STATUS"))["ERROR"] and await mc.read("ERROR") == 0
    assert await bench.regs.read("IRQ_SOURCE") == 0 and not int(bench.dut.interrupt.value)
    if fault["kind"] == "tat":
        want = dict(rt._shadow["ma"])["TAT_LOGIC_0"]
        assert await rt.blocks["ma"].read("TAT_LOGIC_0") == want, "the TAT was not rewritten"
    return {"fault": fault["kind"], "injected": fault["what"], "op": rec.index, "block": rec.block,
            "opcode": rec.opcode, "stage": rec.stage, "code": error.code.name,
            "err_addr": error.err_addr, "expected_err_addr": fault["err_addr"],
            "mc": None if error.mc is None else [error.mc[0].name, error.mc[1]],
            "failed_bursts": [a - rt.layout.phys_base for a in failed],
            "reads": len(reads), "writes": len(writes), "message": str(error)}


async def copy_with_fault(bench, rt, fault):
    """The host's copy of ``fault`` (a migrate fault) with its fault armed: the error,
    what the engine and the MC report, the memory, the recovery; then the fault removed
    and the copy run again. Returns the fault's report."""
    phys = rt.layout.phys
    src, dst, n = phys(fault["src"]), phys(fault["dst"]), fault["length"]
    old = bench.rng.randbytes(n)                 # the spare region's bytes before the copy
    bench.ram.mem.write(dst, old)
    before = bench.ram.snapshot()
    marks = (len(bench.ram.reads), len(bench.ram.writes))
    await arm(bench, rt, fault)
    try:
        await rt.migrate(src, dst, n, f"{fault['tensor']} to the spare region")
    except CommandError as e:
        error = e
    else:
        raise AssertionError(f"the copy ended without an error under fault {fault['what']}")
    finally:
        bench.ram.error_ranges.clear()
    rec = error.record
    what = rec.describe()
    assert str(error).startswith(f"{what} ended in ERROR"), f"the error does not name the copy: {error}"
    assert rt.failed_copy is rec and rt.failed is None
    assert error.code is fault["code"], f"{what}: {error.code.name}, expected {fault['code'].name}"
    assert error.err_addr == fault["err_addr"], (
        f"{what}: ERR_ADDR {error.err_addr:#x}, expected {fault['err_addr']:#x}")
    reads, writes = bench.ram.reads[marks[0]:], bench.ram.writes[marks[1]:]
    read = fault["kind"] == "migrate-read"
    failed = [b.addr for b in (reads if read else writes) if b.failed]
    assert failed, f"{what}: no burst was refused"
    lo, hi = phys(fault["lo"]), phys(fault["hi"])
    outside = [b.addr for b in (reads if read else writes)
               if b.failed and not (b.addr < hi and b.addr + bench.data_width // 8 * b.beats > lo)]
    assert not outside, f"{what}: a burst outside the range was refused at {outside[0]:#x}"
    assert error.mc is not None and error.mc[0] is fault["code"], f"MC: {error.mc}"
    assert error.mc[1] in [a & 0xFFFFFFFF for a in failed], f"MC ERR_ADDR {error.mc[1]:#x}"
    # nothing outside DST changed; in DST nothing where the engine must not write
    changed = bench.ram.changed_bytes(before)
    stray = [a for a in changed if not dst <= a < dst + n]
    assert not stray, f"{what}: {len(stray)} bytes outside DST changed, first {stray[0]:#x}"
    untouched = (dst + (lo - src), dst + n) if read else (lo, hi)
    bad = [a for a in changed if untouched[0] <= a < untouched[1]]
    assert not bad, f"{what}: {len(bad)} bytes of DST written where the copy had failed"
    assert not rt.mismatches(), f"{what}: tensors of the program differ: {rt.mismatches()[:5]}"
    mig, mc = bench.block_regs("migrate"), bench.block_regs("mc")
    assert await mig.read_fields("IRQ_STATUS") == {"DONE": 0, "ERROR": 0}
    assert not (await mc.read_fields("STATUS"))["ERROR"] and await mc.read("ERROR") == 0
    assert await bench.regs.read("IRQ_SOURCE") == 0 and not int(bench.dut.interrupt.value)
    report = {"fault": fault["kind"], "injected": fault["what"], "op": fault["before"],
              "copy": rec.index, "block": "migrate",
              "opcode": "COPY", "stage": rec.what, "code": error.code.name,
              "err_addr": error.err_addr, "expected_err_addr": fault["err_addr"],
              "mc": [error.mc[0].name, error.mc[1]],
              "failed_bursts": [a - rt.layout.phys_base for a in failed],
              "reads": len(reads), "writes": len(writes),
              "written_before_error": len(changed), "message": str(error)}
    rec = await rt.retry_copy()
    assert bytes(bench.ram.mem.read(dst, n)) == bytes(bench.ram.mem.read(src, n)), (
        f"{what}: the retry's DST differs from its source")
    stray = [a for a in bench.ram.changed_bytes(before) if not dst <= a < dst + n]
    assert not stray and not rt.mismatches(), f"{what}: the retry wrote outside DST"
    report["retry_cycles"], report["predicted"] = rec.cycles, rec.predicted
    return report


async def run_with_faults(bench, program, plan, faults):
    """The step's one program, the faults of ``plan`` injected; returns the runtime."""
    rt = TileRuntime(program, bench.ram.mem, {"ma": bench.block_regs("ma"),
                                              "va": bench.block_regs("va"),
                                              "migrate": bench.block_regs("migrate")},
                     now=bench.now, interrupt=bench.dut.interrupt, start_time=start_stamp(bench),
                     mc=bench.block_regs("mc"))
    rt.load(False)
    await rt.setup()
    for i, cmd in enumerate(program.commands):
        fault = plan.get(i)
        if fault is not None and fault["kind"].startswith("migrate"):
            fault["before"] = i
            report = await copy_with_fault(bench, rt, fault)
            faults.append(report)
            bench.dut._log.info("fault %s: %s; copy retried, %d cycles, exact", fault["kind"],
                                report["message"], report["retry_cycles"])
            fault = None
        if fault is None:
            await rt.run_command(i, cmd)
            continue
        marks = (len(bench.ram.reads), len(bench.ram.writes))
        await arm(bench, rt, fault, cmd)
        try:
            await rt.run_command(i, cmd)
        except CommandError as error:
            bench.ram.error_ranges.clear()
            report = await check_recovered(bench, rt, rt.records[-1], fault, error, marks)
        else:
            raise AssertionError(f"op {i} ended without an error under fault {fault['what']}")
        if "indices" in fault:
            report["indices"] = fault["indices"]
        (rec,) = [r for r in await rt.resume([i]) if r.index == i]
        assert rec.cycles > 0 and rec.checked == written_tensors(cmd) and rec.error
        report["retry_cycles"] = rec.cycles
        faults.append(report)
        bench.dut._log.info("fault %s: %s; op retried, %d cycles, bit-exact", fault["kind"],
                            report["message"], rec.cycles)
    bad = rt.final_mismatches()
    assert not bad, f"after the faults, the step's memory differs in {bad[:5]}"
    return rt


@cocotb.test()
async def faults_in_a_step(dut):
    names = [f for f in os.environ.get("V4HW_TF_FAULTS", ",".join(FAULTS)).split(",") if f]
    bench = _bench(dut)
    await _start(bench)
    cfg = await block_config(bench)
    session = DecodeSession("notes", cfg, 2)
    wall = time.monotonic()
    faults, steps = [], []
    t = session.t
    ((_, program, _),) = session.step()
    plan = plan_faults(program, names)
    rt = await run_with_faults(bench, program, plan, faults)
    got, want = rt.image(), session.expected()
    assert np.array_equal(got[: want.size], want), "the step's memory differs from the generator's"
    session.sync(got)
    rtl = [r for r in rt.records if r.host is None]
    steps.append({"position": t, "ops": len(rt.records), "cycles": sum(r.cycles for r in rtl),
                  "faults": len(faults)})
    # the next step, whole, from the memory the faulted step left
    t = session.t
    records = []
    failure, rt2 = await run_layers(bench, session.step(), records, keep_first=True)
    assert failure is None, f"the step after the faults: {failure}"
    got, want = rt2.image(), session.expected()
    assert np.array_equal(got[: want.size], want), "the next step's memory differs"
    assert all(r.host is None and r.checked for r in records)
    steps.append({"position": t, "ops": len(records), "cycles": sum(r.cycles for r in records),
                  "faults": 0, "bit_exact": True})
    out = {"faults": faults, "steps": steps, "run_s": round(time.monotonic() - wall, 1),
           "violations": bench.ram.violations, "records": [vars(r) for r in rt.records + records]}
    dut._log.info("%s", json.dumps({k: out[k] for k in ("faults", "steps")}, indent=1))
    path = os.environ.get("V4HW_TS_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1, default=str)
    assert not bench.ram.violations, bench.ram.violations[:5]
