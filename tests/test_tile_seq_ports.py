# amaranth: UnusedElaboratable=no
"""The command sequencer's two shared ports in the tile, in the Amaranth simulator: the
control port's :class:`hdl.tile.control.ControlArbiter` (host and sequencer on one
decoder) and the memory port's :class:`hdl.common.memport.MemPortArbiter` (the sequencer
beside the migrate engine on one NI), each against the rules of its docstring with
random traffic from both sides. The whole tile runs the sequencer under cocotb
(``tests/test_tile_seq_cocotb.py``)."""

import random

import pytest
from amaranth.sim import Simulator

from hdl.common.axi import AxiResp
from hdl.common.memport import MemPortArbiter
from hdl.tile.control import ControlArbiter
from sim.bfm.memport import PortMemory

DW, BB = 128, 16
SIZE = 1 << 16
ORIGIN = 0x10_0000


async def _offer(ctx, stream, **payload):
    """Offer one payload on ``stream`` until it is taken (returns in the cycle after)."""
    for name, value in payload.items():
        ctx.set(getattr(stream.payload, name), value)
    ctx.set(stream.valid, 1)
    while True:
        _, _, ready = await ctx.tick().sample(stream.ready)
        if ready:
            break
    ctx.set(stream.valid, 0)


def _requester(port, rng, region, bursts, results):
    """Random read bursts over the image's static half and write bursts into ``region``
    (this requester's own), its words right behind each request or later; every read
    word checked against the image, every write answered."""
    lo, hi = region

    async def issue(ctx):
        for _ in range(bursts):
            beats = rng.randint(1, 8)
            words = rng.randrange((hi - lo) // BB - beats)
            if rng.random() < 0.5:
                addr = ORIGIN + BB * rng.randrange(SIZE // 2 // BB - beats)
                results["reads"].append((addr, beats))
                await _offer(ctx, port.rd_req, addr=addr, len=beats - 1)
            else:
                addr = lo + BB * words
                data = [rng.getrandbits(DW) for _ in range(beats)]
                results["writes"].append((addr, data))
                await _offer(ctx, port.wr_req, addr=addr, len=beats - 1)
                for k, word in enumerate(data):
                    for _ in range(rng.choice((0, 0, 1, 3))):
                        await ctx.tick()
                    await _offer(ctx, port.wr_data, data=word, strb=(1 << BB) - 1,
                                 last=int(k == beats - 1))
            for _ in range(rng.choice((0, 0, 0, 2, 5))):
                await ctx.tick()
        results["issued"] = True

    async def answers(ctx):
        got, beat, acks = [], [], 0
        async for _, _, rv, rr, rd, wv, wr in ctx.tick().sample(
                port.rd_resp.valid, port.rd_resp.ready, port.rd_resp.payload,
                port.wr_resp.valid, port.wr_resp.ready):
            if rv and rr:
                beat.append(rd.data)
                if rd.last:
                    got.append(beat)
                    beat = []
            acks += wv and wr
            results["got"], results["acks"] = got, acks
            ctx.set(port.rd_resp.ready, rng.random() < 0.8)
            ctx.set(port.wr_resp.ready, rng.random() < 0.8)

    return issue, answers


def test_mem_port_arbiter_keeps_each_requesters_bursts_and_answers():
    rng = random.Random(7)
    dut = MemPortArbiter(DW, depth=4)
    image = bytearray(rng.randbytes(SIZE))
    static = bytes(image)
    memory = PortMemory(dut.down, DW, image, origin=ORIGIN, latency=(1, 9), pause=0.2, rng=rng)
    regions = {"high": (ORIGIN + SIZE // 2, ORIGIN + 3 * SIZE // 4),
               "low": (ORIGIN + 3 * SIZE // 4, ORIGIN + SIZE)}
    results = {k: {"reads": [], "writes": [], "got": [], "acks": 0, "issued": False}
               for k in regions}
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    memory.add_to(sim)
    procs = [_requester(getattr(dut, k), random.Random(rng.getrandbits(32)), regions[k], 60,
                        results[k]) for k in regions]
    for _, answers in procs:
        sim.add_testbench(answers, background=True)

    async def main(ctx):
        for _ in range(4000):
            await ctx.tick()
            if all(r["issued"] and len(r["got"]) == len(r["reads"])
                   and r["acks"] == len(r["writes"]) for r in results.values()):
                break

    for issue, _ in procs:
        sim.add_testbench(issue)
    sim.add_testbench(main)
    sim.run()
    expect = bytearray(static)
    for name, r in results.items():
        assert r["issued"], name
        assert r["acks"] == len(r["writes"]), (name, r["acks"], len(r["writes"]))
        assert len(r["got"]) == len(r["reads"]), name
        for (addr, beats), words in zip(r["reads"], r["got"], strict=True):
            want = [int.from_bytes(static[addr - ORIGIN + BB * k:addr - ORIGIN + BB * (k + 1)],
                                   "little") for k in range(beats)]
            assert words == want, (name, hex(addr))
        for addr, data in r["writes"]:
            for k, word in enumerate(data):
                at = addr - ORIGIN + BB * k
                expect[at:at + BB] = word.to_bytes(BB, "little")
    assert image == expect


def test_mem_port_arbiter_rules():
    """High first when both ask; low's streams pass in the same cycle when high is idle;
    a write burst of low in progress keeps high's write waiting until its last word."""
    dut = MemPortArbiter(DW)

    async def bench(ctx):
        hi, lo, down = dut.high, dut.low, dut.down
        ctx.set(down.rd_req.ready, 1)
        ctx.set(down.wr_req.ready, 1)
        ctx.set(down.wr_data.ready, 1)
        ctx.set(lo.rd_req.valid, 1)
        ctx.set(lo.rd_req.payload.addr, 0x40)
        assert ctx.get(down.rd_req.valid) and ctx.get(down.rd_req.payload.addr) == 0x40
        ctx.set(hi.rd_req.valid, 1)
        ctx.set(hi.rd_req.payload.addr, 0x80)
        assert ctx.get(down.rd_req.payload.addr) == 0x80 and ctx.get(hi.rd_req.ready)
        assert not ctx.get(lo.rd_req.ready)
        ctx.set(hi.rd_req.valid, 0)
        ctx.set(lo.rd_req.valid, 0)
        # low's write burst of 2 words, its first word in the request's cycle
        ctx.set(lo.wr_req.valid, 1)
        ctx.set(lo.wr_req.payload.len, 1)
        ctx.set(lo.wr_data.valid, 1)
        assert ctx.get(lo.wr_req.ready) and ctx.get(lo.wr_data.ready)
        await ctx.tick()
        ctx.set(lo.wr_req.valid, 0)
        ctx.set(hi.wr_req.valid, 1)
        ctx.set(hi.wr_data.valid, 1)
        assert not ctx.get(hi.wr_req.ready) and not ctx.get(hi.wr_data.ready)
        ctx.set(lo.wr_data.payload.last, 1)
        assert ctx.get(lo.wr_data.ready)
        await ctx.tick()
        ctx.set(lo.wr_data.valid, 0)
        assert ctx.get(hi.wr_req.ready) and ctx.get(hi.wr_data.ready)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_mem_port_arbiter_parameters():
    with pytest.raises(ValueError, match="depth must be an integer in 2..256"):
        MemPortArbiter(DW, depth=1)


@pytest.mark.parametrize("seed", [1, 2])
def test_control_arbiter_serves_both_masters(seed):
    rng = random.Random(seed)
    own, refuse = 6, 9
    dut = ControlArbiter(own, refuse)
    regs, log = {}, []
    done = {"host": [], "seq": []}
    windows = {"host": (1, 2), "seq": (1, 2, own)}
    plans = {name: [(rng.random() < 0.5, rng.choice(windows[name]) << 16 | 4 * rng.randrange(64),
                     rng.getrandbits(32)) for _ in range(40)] for name in done}

    async def slave_proc(ctx):
        """A slave taking AW, W, AR at random, answering 1..3 cycles later; window
        ``refuse`` answers SLVERR."""
        out = dut.out
        aw = w = None
        ar = None
        b_at = r_at = None
        while True:
            ctx.set(out.awready, aw is None and rng.random() < 0.7)
            ctx.set(out.wready, w is None and rng.random() < 0.7)
            ctx.set(out.arready, ar is None and rng.random() < 0.7)
            ctx.set(out.bvalid, b_at == 0)
            ctx.set(out.rvalid, r_at == 0)
            if b_at == 0:
                ctx.set(out.bresp, AxiResp.SLVERR if aw >> 16 == refuse else AxiResp.OKAY)
            if r_at == 0:
                ctx.set(out.rresp, AxiResp.SLVERR if ar >> 16 == refuse else AxiResp.OKAY)
                ctx.set(out.rdata, 0 if ar >> 16 == refuse else regs.get(ar, 0))
            _, _, awv, awr, awa, wv, wr, wd, arv, arr, ara, bv, br, rv, rr = await ctx.tick().sample(
                out.awvalid, out.awready, out.awaddr, out.wvalid, out.wready, out.wdata,
                out.arvalid, out.arready, out.araddr, out.bvalid, out.bready,
                out.rvalid, out.rready)
            if awv and awr:
                aw = awa
            if wv and wr:
                w = wd
            if arv and arr:
                ar, r_at = ara, rng.randint(1, 3)
            if aw is not None and w is not None and b_at is None:
                b_at = rng.randint(1, 3)
                if aw >> 16 != refuse:
                    regs[aw] = w
                log.append(("w", aw))
            if bv and br:
                aw = w = b_at = None
            elif b_at:
                b_at -= 1
            if rv and rr:
                log.append(("r", ar))
                ar = r_at = None
            elif r_at:
                r_at -= 1

    def master(name):
        port = getattr(dut, name)

        async def run(ctx):
            for write, addr, value in plans[name]:
                await ctx.tick()
                if write:
                    ctx.set(port.awaddr, addr)
                    ctx.set(port.wdata, value)
                    ctx.set(port.awvalid, 1)
                    ctx.set(port.wvalid, 1)
                    ctx.set(port.bready, 1)
                    aw = w = False
                    while True:
                        _, _, awr, wr, bv, resp = await ctx.tick().sample(
                            port.awready, port.wready, port.bvalid, port.bresp)
                        aw, w = aw or awr, w or wr
                        ctx.set(port.awvalid, not aw)
                        ctx.set(port.wvalid, not w)
                        if bv:
                            break
                    ctx.set(port.bready, 0)
                    done[name].append(("w", addr, value, AxiResp(resp)))
                else:
                    ctx.set(port.araddr, addr)
                    ctx.set(port.arvalid, 1)
                    ctx.set(port.rready, 1)
                    while True:
                        _, _, arr, rv, data, resp = await ctx.tick().sample(
                            port.arready, port.rvalid, port.rdata, port.rresp)
                        if arr:
                            ctx.set(port.arvalid, 0)
                        if rv:
                            break
                    ctx.set(port.rready, 0)
                    done[name].append(("r", addr, data, AxiResp(resp)))
        return run

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_process(slave_proc)
    sim.add_testbench(master("host"))
    sim.add_testbench(master("seq"))
    sim.run_until(1e-8 * 20000)
    for name in done:
        assert len(done[name]) == len(plans[name]), name
        for (kind, addr, value, resp), (write, paddr, pvalue) in zip(done[name], plans[name], strict=True):
            assert addr == paddr and kind == ("w" if write else "r")
            refused = name == "seq" and addr >> 16 == own
            assert resp == (AxiResp.SLVERR if refused else AxiResp.OKAY), (name, hex(addr))
            if kind == "w":
                assert value == pvalue
    # the sequencer's accesses to its own window went to the refuse window
    assert not any(a >> 16 == own for _, a in log)
    assert sum(a >> 16 == refuse for _, a in log) == sum(a >> 16 == own for _, a, _ in plans["seq"])


def test_control_arbiter_passes_the_host_through():
    """With the sequencer idle the host's channels reach the decoder in the same cycle."""
    dut = ControlArbiter(6, 9)

    async def bench(ctx):
        host, out = dut.host, dut.out
        ctx.set(out.awready, 1)
        ctx.set(host.awvalid, 1)
        ctx.set(host.awaddr, 0x6_0010)
        assert ctx.get(out.awvalid) and ctx.get(out.awaddr) == 0x6_0010
        assert ctx.get(host.awready)
        ctx.set(host.arvalid, 1)
        ctx.set(host.araddr, 0x2_0004)
        ctx.set(out.arready, 1)
        assert ctx.get(out.arvalid) and ctx.get(out.araddr) == 0x2_0004
        await ctx.tick()
        ctx.set(host.awvalid, 0)
        ctx.set(host.arvalid, 0)
        # the host's write holds the channel: the sequencer's waits for its B
        ctx.set(dut.seq.awvalid, 1)
        ctx.set(dut.seq.awaddr, 0x1_0000)
        assert not ctx.get(dut.seq.awready) and not ctx.get(out.awvalid)
        ctx.set(out.bvalid, 1)
        ctx.set(host.bready, 1)
        assert ctx.get(host.bvalid) and not ctx.get(dut.seq.bvalid)
        await ctx.tick()
        ctx.set(out.bvalid, 0)
        assert ctx.get(dut.seq.awready) and ctx.get(out.awaddr) == 0x1_0000

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
