"""Amaranth-simulator tests of the MA core behind its memory port (fast, small P).

The memory port is served by a small in-order burst memory with a fixed latency; the
results are compared with the golden model bit for bit.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden.ma import gemm, pack_matrix, unpack_matrix
from hdl.codes import ErrorCode, MaMode
from hdl.ma.core import MatrixCore

MEM_BYTES = 1 << 16


class BurstMemory:
    """Serves a MemPortSignature port from a bytearray, in order, ``latency`` cycles
    after each request is accepted. ``fail`` is a set of bus-word addresses that answer
    with an error."""

    def __init__(self, port, data_width, latency=6):
        self.port, self.bb, self.latency = port, data_width // 8, latency
        self.mem = bytearray(MEM_BYTES)
        self.fail = set()
        self.cycle = 0

    def word(self, addr):
        return int.from_bytes(self.mem[addr:addr + self.bb], "little")

    def add_to(self, sim):
        reads, writes = [], []

        async def clock(ctx):
            async for _ in ctx.tick():
                self.cycle += 1

        async def read_requests(ctx):
            ctx.set(self.port.rd_req.ready, 1)
            async for _, _, valid, payload in ctx.tick().sample(
                    self.port.rd_req.valid, self.port.rd_req.payload):
                if valid:
                    reads.append((self.cycle + self.latency, payload.addr, payload.len + 1))

        async def read_data(ctx):
            resp = self.port.rd_resp
            while True:
                if not reads or reads[0][0] > self.cycle:
                    await ctx.tick()
                    continue
                _, addr, beats = reads.pop(0)
                for n in range(beats):
                    a = addr + n * self.bb
                    ctx.set(resp.payload, {"data": self.word(a), "last": n == beats - 1,
                                           "error": a in self.fail})
                    ctx.set(resp.valid, 1)
                    await ctx.tick().until(resp.ready)
                ctx.set(resp.valid, 0)

        async def write_requests(ctx):
            ctx.set(self.port.wr_req.ready, 1)
            async for _, _, valid, payload in ctx.tick().sample(
                    self.port.wr_req.valid, self.port.wr_req.payload):
                if valid:
                    writes.append((payload.addr, payload.len + 1))

        async def write_data(ctx):
            ctx.set(self.port.wr_data.ready, 1)
            beat = 0
            async for _, _, valid, payload in ctx.tick().sample(
                    self.port.wr_data.valid, self.port.wr_data.payload):
                if not valid:
                    continue
                assert writes, "write data before its address"
                addr, beats = writes[0]
                a = addr + beat * self.bb
                if a not in self.fail:
                    for byte in range(self.bb):
                        if (payload.strb >> byte) & 1:
                            self.mem[a + byte] = (payload.data >> (8 * byte)) & 0xFF
                beat += 1
                assert bool(payload.last) == (beat == beats), "wlast misplaced"
                if beat == beats:
                    writes.pop(0)
                    beat = 0
                    responses.append((self.cycle + self.latency, addr in self.fail))

        async def write_responses(ctx):
            resp = self.port.wr_resp
            while True:
                if not responses or responses[0][0] > self.cycle:
                    await ctx.tick()
                    continue
                _, error = responses.pop(0)
                ctx.set(resp.payload.error, error)
                ctx.set(resp.valid, 1)
                await ctx.tick().until(resp.ready)
                ctx.set(resp.valid, 0)

        responses = []
        sim.add_process(clock)
        for bench in (read_requests, read_data, write_requests, write_data, write_responses):
            sim.add_testbench(bench, background=True)


def identity_tat():
    """One entry mapping the first 2 GiB of logical space onto physical 0."""
    return [{"valid": 1, "size": 19, "logical_page": 0, "physical_page": 0}] + [
        {"valid": 0, "size": 0, "logical_page": 0, "physical_page": 0}] * 3


def run_core(p, data_width, cmd, mem_init, tat=None, fail=(), max_cycles=200_000):
    """Launch one command; returns (outcome, code, addr, cycles, memory bytes)."""
    dut = MatrixCore(p, data_width)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    memory = BurstMemory(dut.mem, data_width)
    memory.mem[:len(mem_init)] = mem_init
    memory.fail = set(fail)
    memory.add_to(sim)
    result = {}

    async def bench(ctx):
        ctx.set(dut.cmd, cmd)
        ctx.set(dut.tat, tat or identity_tat())
        await ctx.tick()
        result["refuse"] = ctx.get(dut.refuse_code)
        if result["refuse"]:
            return
        ctx.set(dut.launch, 1)
        await ctx.tick()
        ctx.set(dut.launch, 0)
        for cycle in range(max_cycles):
            finish, fail_, code, addr = ctx.get(dut.finish), ctx.get(dut.fail), \
                ctx.get(dut.fail_code), ctx.get(dut.fail_addr)
            if finish or fail_:
                result.update(outcome="done" if finish else "fail", code=code, addr=addr,
                              cycles=cycle + 1)
                return
            await ctx.tick()
        raise AssertionError("the command never ended")

    sim.add_testbench(bench)
    sim.run()
    return result, memory.mem


def layout(m, k, n, bf16, rng, accumulate):
    es = 2 if bf16 else 1
    lda, ldb, ldc = k * es + 2 * es, n * es + 6 * es, n * 4 + 8
    a_addr, b_addr, c_addr = 0x1002 if bf16 else 0x1003, 0x5000 + 6, 0x9000 + 4
    if bf16:
        a = rng.integers(0x3C00, 0x4100, (m, k)).astype(np.uint16) | \
            (rng.integers(0, 2, (m, k)) << 15).astype(np.uint16)
        b = rng.integers(0x3C00, 0x4100, (k, n)).astype(np.uint16)
        c = np.array(rng.integers(0, 2**32, (m, n), dtype=np.uint64), dtype=np.uint32) & \
            np.uint32(0xC0FFFFFF)
    else:
        a = rng.integers(-128, 128, (m, k)).astype(np.int8)
        b = rng.integers(-128, 128, (k, n)).astype(np.int8)
        c = rng.integers(-2**31, 2**31, (m, n)).astype(np.int32)
    image = bytearray(MEM_BYTES)
    for addr, arr, ld in ((a_addr, a, lda), (b_addr, b, ldb), (c_addr, c, ldc)):
        blob = pack_matrix(arr, ld)
        image[addr:addr + len(blob)] = blob
    cmd = {"mode": MaMode.BF16 if bf16 else MaMode.INT8, "accumulate": accumulate,
           "a_addr": a_addr, "b_addr": b_addr, "c_addr": c_addr,
           "lda": lda, "ldb": ldb, "ldc": ldc, "m": m, "k": k, "n": n}
    expected = gemm(cmd["mode"], a, b, c if accumulate else None)
    return cmd, image, expected, (c_addr, ldc, expected.dtype)


@pytest.mark.parametrize("p,data_width,m,k,n,bf16,accumulate", [
    (2, 64, 3, 5, 3, False, False),
    (4, 128, 5, 7, 6, False, True),
    (4, 64, 4, 9, 5, True, False),
    (2, 128, 3, 4, 5, True, True),
    (4, 128, 1, 1, 1, False, False),
])
def test_gemm_matches_golden(p, data_width, m, k, n, bf16, accumulate):
    seed = hash((p, data_width, m, k, n, bf16, accumulate)) & 0xFFFF
    rng = np.random.default_rng(seed)
    cmd, image, expected, (c_addr, ldc, dtype) = layout(m, k, n, bf16, rng, accumulate)
    result, mem = run_core(p, data_width, cmd, image)
    assert result.get("outcome") == "done", result
    got = unpack_matrix(bytes(mem[c_addr:]), m, n, dtype, ldc)
    np.testing.assert_array_equal(got, expected, err_msg=f"seed={seed}")


def test_refused_shape():
    rng = np.random.default_rng(0)
    cmd, image, _, _ = layout(2, 2, 2, False, rng, False)
    cmd["k"] = 129
    result, _ = run_core(2, 64, cmd, image)
    assert result["refuse"] == ErrorCode.BAD_COMMAND
