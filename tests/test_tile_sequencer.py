# amaranth: UnusedElaboratable=no
"""The tile's command sequencer (hdl/tile/sequencer.py) in the Amaranth simulator.

The sequencer runs a command list (plan/commands.py's format) from a
:class:`sim.bfm.memport.PortMemory` against :class:`ModelBlocks`, an AXI4-Lite slave that
stands in for the tile's blocks behind the control decoder: each window has the
command contract of ``hdl/common/command.py`` (START performed the cycle after its AW /
W transfer, BUSY and cleared DONE from the next cycle, the CTR taking the timebase when
the command ends and DONE showing the cycle after) and takes as many cycles as the
entry's write to its DURATION register says (bit 31: end in ERROR with code bits
30:24). The log is checked against :func:`predict`, a Python model of the sequencer's
rules (docs/tile/sequencer.md), and every run against invariants: no entry launches
before its planned cycle, before its dependencies have ended or while its target is
busy, and no START is dropped. Seeds are printed; ``V4HW_SEED=<n>`` reruns one.
"""

import pytest
from amaranth.sim import Simulator

from hdl.common.axi import AxiResp
from hdl.ma import regmap as ma_regmap
from hdl.tile import migrate_regmap, sequencer_regmap
from hdl.tile.sequencer import (
    _ERROR,
    SEQUENCER_VERSION,
    Sequencer,
    caps_word,
    check_parameters,
)
from hdl.va import regmap as va_regmap
from plan.commands import (
    Entry,
    Record,
    decode_log,
    encode_command_list,
    preset_command_list,
)
from plan.machine import SequencerTiming
from sim.bfm.memport import PortMemory
from sim.regs import Registers
from sim.seed import test_seed
from spec import sequencer as fmt
from spec.codes import BlockId
from spec.sequencer import RecordFlag, SequencerError
from spec.tile import TileBlock
from tests.test_plan_commands import _items
from tests.test_regblock import SimAxiLiteMaster

LIST, LOG = 0x1000, 0x40000     # byte addresses in the memory
MEMORY = 1 << 20
START = 0x200C                  # every command block's START (checked below)
DURATION = 0x0100               # the model blocks' register: the next command's cycles
BAD_OFFSET = 0x3000             # the model answers SLVERR from here up
TARGETS = (TileBlock.MA, TileBlock.VA, TileBlock.MIGRATE)
TIMEOUT = 400_000


def test_offsets_are_the_blocks():
    for regmap in (ma_regmap, va_regmap, migrate_regmap):
        offsets = {r["name"]: r["offset"] for r in regmap.REGISTERS}
        assert offsets["START"] == START and offsets["ERROR"] == _ERROR


def duration_word(cycles, fail=None):
    return cycles | (0 if fail is None else 1 << 31 | fail << 24)


class ModelBlocks:
    """The blocks behind ``ctl`` (see the module docstring): ``starts`` gets
    ``(window, cycle performed)`` of every START, ``dropped`` every START while busy,
    ``writes`` every ``(window, offset, value, cycle)``."""

    def __init__(self, dut, *, read_latency=2, pause=0.0, rng=None):
        self.dut, self.read_latency, self.pause, self.rng = dut, read_latency, pause, rng
        self.starts, self.dropped, self.writes = [], [], []
        self.state = {w: dict(busy=False, done=0, error=0, code=0, ctr=0, duration=1,
                              finish=None, fail=None) for w in range(16)}
        self.events = []             # (cycle, window, done, error): the wires from then on

    def _perform_write(self, window, offset, value, now):
        st = self.state[window]
        if offset >= BAD_OFFSET:
            return AxiResp.SLVERR
        self.writes.append((window, offset, value, now))
        if offset == DURATION:
            st["duration"] = value
        elif offset == START and value & 1:
            if st["busy"]:
                self.dropped.append((window, now))
                return AxiResp.OKAY
            self.starts.append((window, now))
            d = st["duration"]
            cycles, fail = d & 0xFFFF, (d >> 24) & 0x7F if d >> 31 else None
            st.update(busy=True, finish=now + max(cycles, 1), fail=fail, ctr=0, code=0)
            self.events.append((now + 1, window, 0, 0))
        return AxiResp.OKAY

    def _perform_read(self, window, offset):
        st = self.state[window]
        if offset >= BAD_OFFSET:
            return 0, AxiResp.SLVERR
        if offset == _ERROR:
            return st["code"], AxiResp.OKAY
        return 0, AxiResp.OKAY

    def add_to(self, sim):
        bus, dut = self.dut.ctl, self.dut

        async def run(ctx):
            aw = w = None                # (value, cycle) held
            b_at = r_at = None           # cycle the response is offered from
            b_resp, r_data = AxiResp.OKAY, (0, AxiResp.OKAY)
            done = error = 0
            async for _, _, awv, awr, awaddr, wv, wr, wdata, bv, br, arv, arr, araddr, rv, rr \
                    in ctx.tick().sample(bus.awvalid, bus.awready, bus.awaddr, bus.wvalid,
                                         bus.wready, bus.wdata, bus.bvalid, bus.bready,
                                         bus.arvalid, bus.arready, bus.araddr, bus.rvalid,
                                         bus.rready):
                now = ctx.get(dut.now)
                if awv and awr:
                    aw = awaddr
                if wv and wr:
                    w = wdata
                if aw is not None and w is not None and b_at is None:
                    b_resp = self._perform_write(aw >> 16, aw & 0xFFFF, w, now)
                    b_at = now + 1
                if bv and br:
                    aw = w = b_at = None
                if arv and arr:
                    r_data = self._perform_read(araddr >> 16, araddr & 0xFFFF)
                    r_at = now - 1 + self.read_latency
                if rv and rr:
                    r_at = None
                for window, st in self.state.items():
                    if st["busy"] and st["finish"] == now:
                        st["busy"] = False
                        if st["fail"] is None:
                            st["ctr"] = now
                            self.events.append((now + 1, window, 1, 0))
                        else:
                            st["code"] = st["fail"]
                            self.events.append((now + 1, window, 0, 1))
                for event in [e for e in self.events if e[0] <= now]:
                    self.events.remove(event)
                    _, window, d, e = event
                    done = done & ~(1 << window) | d << window
                    error = error & ~(1 << window) | e << window
                ctx.set(dut.done, done)
                ctx.set(dut.error, error)
                pause = self.rng is not None and self.rng.random() < self.pause
                ctx.set(bus.awready, int(aw is None and b_at is None and not pause))
                ctx.set(bus.wready, int(w is None and b_at is None and not pause))
                ctx.set(bus.bvalid, int(b_at is not None and now >= b_at))
                ctx.set(bus.bresp, b_resp)
                ctx.set(bus.arready, int(r_at is None and not pause))
                ctx.set(bus.rvalid, int(r_at is not None and now >= r_at))
                ctx.set(bus.rdata, r_data[0])
                ctx.set(bus.rresp, r_data[1])

        sim.add_testbench(run, background=True)


class Run:
    """What a run left: the sequencer's ERROR, ERR_ADDR, T0, counters, the decoded log,
    the model's START cycles and the cycle the run ended."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def simulate(entries, *, count=None, stop_on_late=False, data_width=128, latency=4,
             pause=0.0, ctl_pause=0.0, read_latency=2, rng=None, list_bytes=None, log=LOG,
             list_addr=LIST, errors=(), max_deps=4):
    """Run ``entries`` on a fresh sequencer; returns a :class:`Run`."""
    dut = Sequencer(data_width, max_deps=max_deps)
    data = encode_command_list(entries) if list_bytes is None else list_bytes
    count = len(entries) if count is None else count
    image = bytearray(MEMORY)
    image[list_addr:list_addr + len(data)] = data
    memory = PortMemory(dut.mem, data_width, image, latency=latency, pause=pause, rng=rng,
                        errors=list(errors))
    blocks = ModelBlocks(dut, read_latency=read_latency, pause=ctl_pause, rng=rng)
    out = {}

    async def clock(ctx):
        cycle = 0
        ctx.set(dut.now, cycle)
        async for _ in ctx.tick():
            cycle += 1
            ctx.set(dut.now, cycle)

    async def bench(ctx):
        regs = Registers(SimAxiLiteMaster(ctx, dut.bus), sequencer_regmap)
        for name, value in (("LIST_LO", list_addr), ("LIST_HI", 0), ("LOG_LO", log),
                            ("LOG_HI", 0), ("COUNT", count),
                            ("MODE", regs.encode("MODE", stop_on_late=int(stop_on_late)))):
            await regs.write(name, value)
        await regs.write("START", 1)
        for _ in range(TIMEOUT // 16):
            status = await regs.read_fields("STATUS")
            if not status["BUSY"]:
                break
        else:
            raise AssertionError(f"the run did not end within {TIMEOUT} cycles")
        out.update(status=status, code=SequencerError(await regs.read("ERROR")),
                   err_addr=await regs.read("ERR_ADDR"),
                   t0=await regs.read("T0_LO") | await regs.read("T0_HI") << 32,
                   launched=await regs.read("LAUNCHED"), completed=await regs.read("COMPLETED"),
                   late=await regs.read("LATE"),
                   ctr=await regs.read("CTR_LO") | await regs.read("CTR_HI") << 32,
                   ident=await regs.read_fields("ID"), caps=await regs.read("CAPS"))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_process(clock)
    sim.add_testbench(bench)
    memory.add_to(sim)
    blocks.add_to(sim)
    sim.run()
    records = decode_log(bytes(image[log:log + fmt.RECORD_BYTES * count]), count) \
        if log + fmt.RECORD_BYTES * count <= MEMORY else {}
    assert out["status"]["DONE"] != out["status"]["ERROR"]
    return Run(records=records, blocks=blocks, image=image, **out)


# ---- the reference model -------------------------------------------------------------------


def durations(entries):
    """``(cycles, fail code or None)`` of each entry, from its DURATION write (or the
    model's last one on that target)."""
    last, out = {}, []
    for e in entries:
        for offset, value in e.writes:
            if offset == DURATION:
                last[e.target] = value
        d = last.get(e.target, 1)
        out.append((max(d & 0xFFFF, 1), (d >> 24) & 0x7F if d >> 31 else None))
    return out


def issue_cycles(entry):
    """Cycles from the launch of the entry before (its START's AW / W transfer) to the
    first cycle ``entry`` can launch in, with a control port that takes every write at
    once and answers it two cycles later (the model blocks and a register block) and the
    list already read ahead: the START's answer and entry word 0 (3), PLANNED (1), one a
    dependency, the first pair (2), 3 a register write before START (its answer takes
    two, the next offset is taken meanwhile), and START is offered a cycle after its
    value is seen."""
    return 7 + len(entry.deps) + 3 * (len(entry.writes) - 1)


def predict(entries, stop_on_late=False):
    """The log (``{index: Record}``, times from T0) and ``(ERROR, ERR_ADDR)`` of a run,
    by the rules of docs/tile/sequencer.md: entry i is armed at the latest of its
    planned cycle and :func:`issue_cycles` after the launch of entry i − 1 (the first is
    planned late enough to be armed in time); it launches at the first cycle from then
    on at which every dependency's end has been seen (the cycle after) and its target's
    previous command has ended. A START performed at L + 1 of a command of d cycles has
    CTR L + 1 + d and is seen ended at L + 2 + d. A failure seen at cycle s lets no
    entry launch after s."""
    seen, last_on, records = {}, {}, {}
    stop_at, code, err = None, SequencerError.NONE, 0
    previous = None
    for i, (e, (d, fail)) in enumerate(zip(entries, durations(entries), strict=True)):
        due = e.planned
        armed = due if previous is None else max(due, previous + issue_cycles(e))
        dep_ready = max((seen[j] + 1 for j, _ in e.deps), default=0)
        prev = last_on.get(e.target)
        free = seen[prev] + 1 if prev is not None else 0
        ok, free_now = dep_ready <= armed, free <= armed
        flags = RecordFlag.VALID
        if stop_at is not None and armed > stop_at:
            break
        if stop_on_late and not ok:
            flags |= RecordFlag.LATE | RecordFlag.LATE_DEPENDENCY | RecordFlag.NOT_LAUNCHED
            if not free_now:
                flags |= RecordFlag.LATE_TARGET
            records[i] = Record(i, flags, 0, armed - due, 0, 0, 0)
            if stop_at is None:
                code, err = SequencerError.LATE_DEPENDENCY, i
            break
        launch = max(armed, dep_ready, free)
        if stop_at is not None and launch > stop_at:
            break
        if not ok:
            flags |= RecordFlag.LATE_DEPENDENCY
        if not free_now:
            flags |= RecordFlag.LATE_TARGET
        if launch > due:
            flags |= RecordFlag.LATE
        s = launch + d + 2
        seen[i], last_on[e.target], previous = s, i, launch
        if fail is not None:
            flags |= RecordFlag.ERROR
            if stop_at is None or s < stop_at:
                stop_at, code, err = s, SequencerError.COMMAND_FAILED, i
        records[i] = Record(i, flags, fail or 0, launch - due, launch, s,
                            0 if fail is not None else s - 1)
    return records, (code, err)


def relative(run):
    """The run's log with its times from T0 (records not launched keep zeros)."""
    out = {}
    for i, r in run.records.items():
        if r.flags & RecordFlag.NOT_LAUNCHED:
            out[i] = r
        else:
            out[i] = Record(r.index, r.flags, r.code, r.late, r.launch - run.t0,
                            r.done - run.t0, r.ctr - run.t0 if r.ctr else 0)
    return out


def check_invariants(entries, run):
    """Whatever the timing: every START performed once per launched entry, in list
    order per target, the cycle after the launch; never before the planned cycle, a
    dependency's end, or the target's previous end; no START dropped; the CTR the cycle
    before DONE."""
    assert not run.blocks.dropped
    launched = {i: r for i, r in run.records.items() if not r.flags & RecordFlag.NOT_LAUNCHED}
    assert sorted(launched) == list(range(len(launched)))
    starts = sorted(run.blocks.starts, key=lambda s: s[1])
    assert [(entries[i].target, r.launch + 1) for i, r in sorted(
        launched.items(), key=lambda kv: kv[1].launch)] == starts
    for i, r in launched.items():
        e = entries[i]
        assert r.launch >= run.t0 + e.planned
        assert r.late == r.launch - run.t0 - e.planned
        assert bool(r.flags & RecordFlag.LATE) == (r.late > 0)
        for j, _ in e.deps:
            assert r.launch > launched[j].done
        if not r.flags & RecordFlag.ERROR:
            assert r.ctr == r.done - 1
    assert run.launched == len(launched)
    assert run.late == sum(1 for r in launched.values() if r.late)
    assert run.completed == len(run.records)


# ---- lists ---------------------------------------------------------------------------------


def _writes(rng, d, n=None):
    n = rng.randint(0, 4) if n is None else n
    return tuple((0x20 + 4 * rng.randrange(16), rng.getrandbits(32)) for _ in range(n)) + (
        (DURATION, d), (START, 1))


# planned gaps after the model's launch of the entry before: from 0 (the entry waits for
# its own register writes) to more than any entry's issue_cycles
SLACK = 80


def random_list(rng, n, *, late=0.3, fail=None):
    """A list of ``n`` entries on the three targets, each planned 0..SLACK cycles after
    the model's launch of the one before (the first at SLACK), depending on earlier
    entries (and always on its target's previous one); ``late``: the chance that an
    entry is planned before its dependencies end."""
    entries, last_on = [], {}
    for i in range(n):
        target = rng.choice(TARGETS)
        deps = {}
        if target in last_on:
            deps[target] = last_on[target]
        for _ in range(rng.randint(0, 2)):
            if i:
                j = rng.randrange(i)
                t = entries[j].target
                deps[t] = max(deps.get(t, -1), j)
        d = rng.randint(20, 300)
        word = duration_word(d, fail=rng.randint(1, 127) if fail == i else None)
        probe = entries + [Entry(int(target), 0, tuple(sorted((j, int(t)) for t, j in
                                                             deps.items())),
                                 _writes(rng, word))]
        records, _ = predict(probe[:-1]) if i else ({}, None)
        after = max((r.launch for r in records.values()), default=0) + (
            rng.randint(0, SLACK) if i else SLACK)
        dep_end = max((records[j].done + 1 for j, _ in probe[-1].deps if j in records),
                      default=0)
        if rng.random() < late and dep_end > after + 1:
            planned = rng.randint(after, dep_end - 1)
        else:
            planned = max(after, dep_end) + rng.randint(0, 60)
        entries.append(Entry(probe[-1].target, planned, probe[-1].deps, probe[-1].writes))
        last_on[target] = i
    return entries


# ---- the tests -----------------------------------------------------------------------------


def test_entries_launch_at_their_planned_cycle():
    """Dependencies that end in time: every entry launches exactly at its planned cycle."""
    rng = test_seed()
    entries, previous = [], 0
    for e in random_list(rng, 20, late=0.0):     # room for each entry's own writes
        planned = max(e.planned, previous + issue_cycles(e) + rng.randint(0, 20))
        entries.append(Entry(e.target, planned, e.deps, e.writes))
        previous = predict(entries)[0][len(entries) - 1].launch
    run = simulate(entries)
    assert run.code == SequencerError.NONE and run.status["DONE"]
    assert all(r.late == 0 and r.launch == run.t0 + e.planned
               for r, e in zip((run.records[i] for i in range(20)), entries, strict=True))
    assert relative(run) == predict(entries)[0]
    check_invariants(entries, run)
    assert run.ctr >= max(r.done for r in run.records.values())


def test_a_late_dependency_is_waited_for_and_recorded():
    e0 = Entry(TileBlock.MA, 110, (), _writes(test_seed(), duration_word(400), 2))
    e1 = Entry(TileBlock.VA, 200, ((0, TileBlock.MA),), ((DURATION, 30), (START, 1)))
    e2 = Entry(TileBlock.MIGRATE, 220, (), ((DURATION, 30), (START, 1)))
    entries = [e0, e1, e2]
    run = simulate(entries)
    rel = relative(run)
    assert rel == predict(entries)[0]
    assert rel[0].late == 0 and rel[0].launch == 110
    # e1 waits for e0's end (seen at 110 + 400 + 2), launches the cycle after
    assert rel[1].launch == 110 + 400 + 3 and rel[1].late == rel[1].launch - 200
    assert rel[1].flags == RecordFlag.VALID | RecordFlag.LATE | RecordFlag.LATE_DEPENDENCY
    # e2 is issued after e1's launch, so it is late too, but for no dependency
    assert rel[2].flags & RecordFlag.LATE and not rel[2].flags & RecordFlag.LATE_DEPENDENCY
    assert run.late == 2 and run.code == SequencerError.NONE
    check_invariants(entries, run)


def test_a_late_dependency_stops_the_run_in_stop_mode():
    e0 = Entry(TileBlock.MA, 110, (), ((DURATION, 400), (START, 1)))
    e1 = Entry(TileBlock.VA, 200, (), ((DURATION, 50), (START, 1)))
    e2 = Entry(TileBlock.VA, 300, ((0, TileBlock.MA), (1, TileBlock.VA)),
               ((DURATION, 30), (START, 1)))
    e3 = Entry(TileBlock.MIGRATE, 900, (), ((DURATION, 30), (START, 1)))
    entries = [e0, e1, e2, e3]
    run = simulate(entries, stop_on_late=True)
    assert run.code == SequencerError.LATE_DEPENDENCY and run.err_addr == 2
    assert run.status["ERROR"]
    want, (code, err) = predict(entries, stop_on_late=True)
    assert (code, err) == (run.code, run.err_addr)
    assert relative(run) == want
    assert run.records[2].flags == (RecordFlag.VALID | RecordFlag.LATE
                                    | RecordFlag.LATE_DEPENDENCY | RecordFlag.NOT_LAUNCHED)
    assert 3 not in run.records and run.launched == 2
    assert [w for w, _ in run.blocks.starts] == [TileBlock.MA, TileBlock.VA]
    check_invariants(entries, run)


def test_wait_mode_runs_what_stop_mode_stops():
    e0 = Entry(TileBlock.MA, 110, (), ((DURATION, 400), (START, 1)))
    e1 = Entry(TileBlock.VA, 300, ((0, TileBlock.MA),), ((DURATION, 30), (START, 1)))
    run = simulate([e0, e1])
    assert run.code == SequencerError.NONE and len(run.records) == 2
    assert relative(run) == predict([e0, e1])[0]


@pytest.mark.parametrize("stop_on_late", [False, True])
def test_random_lists_against_the_model(stop_on_late):
    rng = test_seed()
    for _ in range(2):
        entries = random_list(rng, rng.randint(10, 25))
        run = simulate(entries, stop_on_late=stop_on_late)
        want, (code, err) = predict(entries, stop_on_late)
        assert relative(run) == want
        assert (run.code, run.err_addr if code else 0) == (code, err)
        check_invariants(entries, run)


@pytest.mark.parametrize("data_width", [64, 256, 512])
def test_bus_widths(data_width):
    rng = test_seed()
    entries = random_list(rng, 8)
    run = simulate(entries, data_width=data_width)
    assert relative(run) == predict(entries)[0]
    check_invariants(entries, run)
    assert run.caps == caps_word(data_width, TARGETS, 4)


def test_back_pressure_keeps_the_invariants():
    """Random memory latency and pauses, control-port pauses and slow reads: launches may
    come late, but never early, never before a dependency, never onto a busy target."""
    rng = test_seed()
    waited = 0
    for _ in range(2):
        entries = random_list(rng, 15, late=1.0)
        run = simulate(entries, latency=(1, 20), pause=0.3, ctl_pause=0.3, read_latency=5,
                       rng=rng)
        assert run.code == SequencerError.NONE
        check_invariants(entries, run)
        # entries that waited for a dependency on another target: the case to check
        waited += sum(1 for i, r in run.records.items() if r.flags & RecordFlag.LATE_DEPENDENCY
                      and any(t != entries[i].target for _, t in entries[i].deps))
    assert waited


def test_a_failed_command_stops_the_run():
    rng = test_seed()
    entries = random_list(rng, 20, late=0.2, fail=8)
    run = simulate(entries)
    want, (code, err) = predict(entries)
    assert code == SequencerError.COMMAND_FAILED and err == 8
    assert (run.code, run.err_addr) == (code, err)
    assert relative(run) == want
    assert run.records[8].flags & RecordFlag.ERROR and run.records[8].code == \
        (durations(entries)[8][1])
    check_invariants(entries, run)


def test_as_many_dependencies_as_max_deps():
    """Four dependencies (two of them on one target) on a sequencer of ``max_deps`` 4."""
    entries = [Entry(TileBlock.MA, 200, (), ((DURATION, 300), (START, 1))),
               Entry(TileBlock.VA, 300, (), ((DURATION, 40), (START, 1))),
               Entry(TileBlock.MIGRATE, 400, (), ((DURATION, 40), (START, 1))),
               Entry(TileBlock.MA, 450, ((0, TileBlock.MA), (1, TileBlock.VA),
                                         (2, TileBlock.MIGRATE), (0, TileBlock.MA)),
                     ((DURATION, 40), (START, 1)))]
    run = simulate(entries)
    assert run.code == SequencerError.NONE
    assert relative(run) == predict(entries)[0]
    assert run.records[3].flags & RecordFlag.LATE_DEPENDENCY      # entry 0 ends at 502
    check_invariants(entries, run)


def test_bad_lists_and_entries():
    good = [Entry(TileBlock.MA, 200, (), ((DURATION, 20), (START, 1)))]
    data = bytearray(encode_command_list(good))
    bad_magic = bytes(4) + data[4:]
    assert simulate(good, list_bytes=bad_magic).code == SequencerError.BAD_LIST
    run = simulate(good, count=2)
    assert run.code == SequencerError.BAD_COMMAND and not run.blocks.starts
    # a target the sequencer does not drive (MC): BAD_ENTRY, nothing launched
    bad_target = data[:16] + (fmt.entry_word(TileBlock.MC, 0, 2)).to_bytes(4, "little") + \
        data[20:]
    run = simulate(good, list_bytes=bytes(bad_target))
    assert (run.code, run.err_addr, run.launched) == (SequencerError.BAD_ENTRY, 0, 0)
    # more dependencies than max_deps
    deps = tuple((0, TileBlock.MA) for _ in range(3))
    many = good + [Entry(TileBlock.MA, 400, deps, ((START, 1),))]
    run = simulate(many, max_deps=2)
    assert (run.code, run.err_addr, run.launched) == (SequencerError.BAD_ENTRY, 1, 1)
    assert run.records[0].flags == RecordFlag.VALID
    # a register write the block refuses (SLVERR): CONTROL_ERROR at that entry
    refused = good + [Entry(TileBlock.VA, 300, (), ((BAD_OFFSET, 1), (START, 1)))]
    run = simulate(refused)
    assert (run.code, run.err_addr, run.launched) == (SequencerError.CONTROL_ERROR, 1, 1)


def test_refusals_at_start():
    good = [Entry(TileBlock.MA, 10, (), ((START, 1),))]
    run = simulate(good, list_addr=LIST + 4)
    assert (run.code, run.err_addr, run.launched) == (SequencerError.MISALIGNED, LIST + 4, 0)
    run = simulate(good, log=LOG + 16)
    assert (run.code, run.err_addr) == (SequencerError.MISALIGNED, LOG + 16)
    run = simulate(good, count=0)
    assert run.code == SequencerError.NONE and run.launched == 0
    assert run.ident == {"VERSION": SEQUENCER_VERSION, "BLOCK": BlockId.SEQUENCER}


def test_memory_errors():
    entries = random_list(test_seed(), 4, late=0.0)
    run = simulate(entries, errors=[(LIST + 32, LIST + 48)])
    assert run.code == SequencerError.AXI_READ_ERROR and LIST + 32 <= run.err_addr < LIST + 48
    run = simulate(entries, errors=[(LOG + 32, LOG + 64)])
    assert (run.code, run.err_addr) == (SequencerError.AXI_WRITE_ERROR, LOG + 32)


@pytest.mark.parametrize("data_width", [64, 512])
def test_verilog(data_width):
    from amaranth.back import verilog

    text = verilog.convert(Sequencer(data_width), name="v4hw_sequencer")
    for port in ("ctl__awaddr", "ctl__wdata", "mem__rd_req__valid", "mem__wr_data__payload",
                 "bus__araddr", "done", "error", "now", "interrupt"):
        assert port in text


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="data_width must be"):
        check_parameters(96, TARGETS, 4)
    with pytest.raises(ValueError, match="targets must be distinct"):
        check_parameters(128, (TileBlock.MA, TileBlock.MA), 4)
    with pytest.raises(ValueError, match="targets must be distinct"):
        check_parameters(128, (TileBlock.SEQUENCER,), 4)
    with pytest.raises(ValueError, match="max_deps must be in"):
        check_parameters(128, TARGETS, 0)
    with pytest.raises(TypeError, match="max_deps must be an integer"):
        Sequencer(128, max_deps=2.0)


@pytest.mark.regress
def test_a_planned_decode_step_runs_through_the_unit():
    """The notes preset's planned decode step (plan/commands.py, planned cycle 0 at
    T0 + 400) through the sequencer, each command taking its planned cycles on the model
    blocks (a DURATION write added before each START: the op's planned cycles over its
    repetitions, less the 3 from a launch to the cycle its end is seen): the log is the
    model's, every block sees exactly the list's writes for it, in order, and an entry
    is late only when the sequencer's own issue (its register writes after the launch
    before it) or a late predecessor holds it; planned with the sequencer's timing of
    this bench, every entry is on time."""
    # planned for this bench: no control decoder, and every entry carries one more write
    entries, result, graph, programs = preset_command_list(
        "notes", origin=400, sequencer=SequencerTiming(decoder=0, extra_writes=1))
    items, ops = _items(result, graph, programs)
    span = {e.op: (e.finish - e.start) for e in result.entries}
    reps = {}
    for _, i, _ in items:
        reps[i] = reps.get(i, 0) + 1
    runs = [Entry(e.target, e.planned, e.deps,
                  e.writes[:-1] + ((DURATION, max(1, span[ops[i].name] // reps[i] - 3)),
                                   e.writes[-1]))
            for e, (_, i, _) in zip(entries, items, strict=True)]
    run = simulate(runs)
    assert run.code == SequencerError.NONE and len(run.records) == len(entries) == 354
    got = relative(run)
    assert got == predict(runs)[0]
    check_invariants(runs, run)
    for target in (TileBlock.MA, TileBlock.VA):
        seen = [(o, v) for w, o, v, _ in run.blocks.writes if w == target]
        assert seen == [wr for e in runs if e.target == target for wr in e.writes]
    on_time = sum(1 for r in got.values() if r.late == 0)
    dep_late = sum(1 for r in got.values() if r.flags & RecordFlag.LATE_DEPENDENCY)
    end = max(r.done for r in got.values()) - 400
    print(f"notes step through the sequencer: {len(got)} entries, {on_time} on time, "
          f"{dep_late} late for a dependency, last end at planned cycle {end} "
          f"(plan makespan {result.makespan})")
    assert on_time == len(got)
