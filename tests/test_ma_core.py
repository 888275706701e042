"""Amaranth-simulator tests of the MA core behind its memory port (fast, small P).

The memory port is served by :class:`sim.bfm.PortMemory` (in order, a fixed latency of 6
cycles, optional random pauses); the results are compared with the golden model bit for
bit.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden.ma import gemm, pack_matrix, unpack_matrix
from hdl.ma.core import MatrixCore
from sim.bfm.memport import PortMemory
from spec.codes import MA_MODE_B_T, ErrorCode, MaMode

MEM_BYTES = 1 << 17


def identity_tat():
    """One entry mapping the first 2 GiB of logical space onto physical 0."""
    return [{"valid": 1, "size": 19, "logical_page": 0, "physical_page": 0}] + [
        {"valid": 0, "size": 0, "logical_page": 0, "physical_page": 0}] * 3


def run_core(p, data_width, cmd, mem_init, tat=None, fail=(), stall=0.0):
    """Launch one command; returns (result dict, memory bytes)."""
    results, mem = run_commands(p, data_width, [(cmd, set(fail))], mem_init, tat, stall)
    return results[0], mem


def run_commands(p, data_width, commands, mem_init, tat=None, stall=0.0, max_cycles=200_000):
    """Run ``[(cmd, failing word addresses), ...]`` back to back on one core.

    Each result: ``refuse`` (the START check's code), and for launched commands
    ``outcome`` ("done" / "fail"), ``code``, ``addr``, ``cycles`` (launch → end) and
    ``writes``: the addresses of the write bursts taken after the previous command's end
    up to this one's."""
    dut = MatrixCore(p, data_width)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    mem = bytearray(MEM_BYTES)
    mem[:len(mem_init)] = mem_init
    log = []
    memory = PortMemory(dut.mem, data_width, mem, latency=6, pause=stall,
                        rng=np.random.default_rng(len(commands)), log=log)
    memory.add_to(sim)
    results = []

    async def bench(ctx):
        ctx.set(dut.tat, tat or identity_tat())
        for cmd, fail in commands:
            result = {}
            results.append(result)
            memory.errors[:] = [(addr, addr + data_width // 8) for addr in fail]
            ctx.set(dut.cmd, cmd)
            # START comes three cycles after a register write at the earliest (the
            # AXI4-Lite register block); the core's checks take two to follow.
            await ctx.tick().repeat(3)
            result["refuse"] = ctx.get(dut.refuse_code)
            if result["refuse"]:
                continue
            ctx.set(dut.launch, 1)
            await ctx.tick()
            ctx.set(dut.launch, 0)
            for cycle in range(max_cycles):
                if ctx.get(dut.finish) or ctx.get(dut.fail):
                    result.update(outcome="done" if ctx.get(dut.finish) else "fail",
                                  code=ctx.get(dut.fail_code), addr=ctx.get(dut.fail_addr),
                                  cycles=cycle + 1,
                                  writes=[addr for kind, addr in log if kind == "write"])
                    log.clear()
                    break
                await ctx.tick()
            else:
                raise AssertionError("the command never ended")
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    return results, mem


def layout(m, k, n, bf16, rng, accumulate, b_t=False):
    """A command, its memory image, the golden C and where C is. ``b_t``: B transposed,
    stored as N rows of K (MODE bit 1)."""
    es = 2 if bf16 else 1
    lda, ldb, ldc = k * es + 2 * es, (k if b_t else n) * es + 6 * es, n * 4 + 8
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
    for addr, arr, ld in ((a_addr, a, lda), (b_addr, b.T if b_t else b, ldb), (c_addr, c, ldc)):
        blob = pack_matrix(arr, ld)
        image[addr:addr + len(blob)] = blob
    mode = (MaMode.BF16 if bf16 else MaMode.INT8) | (MA_MODE_B_T if b_t else 0)
    cmd = {"mode": MaMode(mode), "accumulate": accumulate,
           "a_addr": a_addr, "b_addr": b_addr, "c_addr": c_addr,
           "lda": lda, "ldb": ldb, "ldc": ldc, "m": m, "k": k, "n": n}
    expected = gemm(cmd["mode"] & ~MA_MODE_B_T, a, b, c if accumulate else None)
    return cmd, image, expected, (c_addr, ldc, expected.dtype)


@pytest.mark.parametrize("stall", [0.0, 0.4], ids=["free", "backpressure"])
@pytest.mark.parametrize("seed,p,data_width,m,k,n,bf16,accumulate", [
    (1, 2, 64, 3, 5, 3, False, False),
    (2, 4, 128, 5, 7, 6, False, True),
    (3, 4, 64, 4, 9, 5, True, False),
    (4, 2, 128, 3, 4, 5, True, True),
    (5, 4, 128, 1, 1, 1, False, False),
    (6, 8, 256, 9, 5, 10, True, True),
    (7, 4, 512, 5, 70, 9, False, True),
    (8, 8, 64, 3, 3, 17, True, False),
    (9, 4, 64, 6, 5, 7, False, True),     # old-C rows of two bus words
    (10, 2, 128, 1, 3, 1, True, False),   # P = 2, M = 1: one kept row, one dropped
])
def test_gemm_matches_golden(seed, p, data_width, m, k, n, bf16, accumulate, stall):
    rng = np.random.default_rng(seed)
    cmd, image, expected, (c_addr, ldc, dtype) = layout(m, k, n, bf16, rng, accumulate)
    result, mem = run_core(p, data_width, cmd, image, stall=stall)
    assert result.get("outcome") == "done", result
    got = unpack_matrix(bytes(mem[c_addr:]), m, n, dtype, ldc)
    np.testing.assert_array_equal(got, expected, err_msg=f"seed={seed}")


@pytest.mark.parametrize("seed,p,data_width,m,k,n,bf16,accumulate,stall", [
    (31, 2, 64, 3, 5, 3, False, False, 0.0),
    (32, 4, 128, 5, 7, 6, True, True, 0.3),
    (33, 4, 64, 6, 9, 13, False, True, 0.0),    # N past a group of 4 tiles
    (34, 8, 256, 9, 17, 10, True, False, 0.4),  # Bᵀ rows of two bus words and a part
    (35, 4, 512, 5, 70, 9, False, True, 0.0),
    (36, 2, 128, 1, 1, 1, True, False, 0.0),
])
def test_gemm_b_transposed(seed, p, data_width, m, k, n, bf16, accumulate, stall):
    """MODE bit 1: B stored as N rows of K (C = A·Bᵀ), bit-exact against the golden
    model's product with the non-transposed B."""
    rng = np.random.default_rng(seed)
    cmd, image, expected, (c_addr, ldc, dtype) = layout(m, k, n, bf16, rng, accumulate, True)
    result, mem = run_core(p, data_width, cmd, image, stall=stall)
    assert result.get("outcome") == "done", result
    assert outside_c_unchanged(image, mem, c_addr, ldc, m, n)
    got = unpack_matrix(bytes(mem[c_addr:]), m, n, dtype, ldc)
    np.testing.assert_array_equal(got, expected, err_msg=f"seed={seed}")


def test_b_transposed_then_plain():
    """A Bᵀ command, then a plain one with the same B memory read as K rows: each reads
    its own layout (the second is not served from the first's buffer)."""
    rng = np.random.default_rng(37)
    m, k, n = 6, 10, 7
    first = layout(m, k, n, True, rng, False, b_t=True)
    second = layout(m, k, n, True, rng, False)
    image = bytearray(first[1])
    cmd2 = dict(second[0])
    shift = 0x10000
    for key in ("a_addr", "b_addr", "c_addr"):
        cmd2[key] += shift
    image[shift:] = second[1][:MEM_BYTES - shift]
    (r1, r2, r3), mem = run_commands(4, 128, [(first[0], set()), (cmd2, set()),
                                              (first[0], set())], image)
    assert r1["outcome"] == r2["outcome"] == r3["outcome"] == "done"
    for (_, _, expected, (c_addr, ldc, dtype)), offset in ((first, 0), (second, shift)):
        got = unpack_matrix(bytes(mem[c_addr + offset:]), m, n, dtype, ldc)
        np.testing.assert_array_equal(got, expected)


def test_b_transposed_walks_n_rows():
    """With B transposed the walk checks N rows of LDB (not K): a TAT that maps K rows
    of B but not N misses at Bᵀ's first unmapped row; BF16_BT checks B's alignment."""
    rng = np.random.default_rng(38)
    m, k, n = 3, 4, 9
    cmd, image, _, _ = layout(m, k, n, True, rng, False, b_t=True)
    # B at the end of the first 16 KiB: rows 0..4 inside, row 5 (of N = 9) outside.
    cmd.update(b_addr=0x4000 - 5 * 0x100, ldb=0x100, c_addr=0x1800, a_addr=0x1000)
    tat = identity_tat()
    tat[0] = {"valid": 1, "size": 2, "logical_page": 0, "physical_page": 0}
    result, mem = run_core(4, 128, cmd, image, tat=tat)
    assert (result["outcome"], result["code"]) == ("fail", ErrorCode.TAT_MISS), result
    assert result["addr"] == 0x4000
    assert bytes(mem) == bytes(image)
    # The plain mode of the same registers reads K = 4 rows: all mapped.
    result, _ = run_core(4, 128, dict(cmd, mode=MaMode.BF16), image, tat=tat)
    assert result["outcome"] == "done", result
    result, _ = run_core(4, 128, dict(cmd, ldb=0x101), image, tat=tat)
    assert result["refuse"] == ErrorCode.MISALIGNED


def test_refused_shape():
    rng = np.random.default_rng(0)
    cmd, image, _, _ = layout(2, 2, 2, False, rng, False)
    cmd["k"] = 129
    result, _ = run_core(2, 64, cmd, image)
    assert result["refuse"] == ErrorCode.BAD_COMMAND


def outside_c_unchanged(before, after, c_addr, ldc, m, n):
    """True when no byte outside C's rows differs between the two memory images."""
    mask = np.ones(len(before), dtype=bool)
    for row in range(m):
        start = c_addr + row * ldc
        mask[start:start + 4 * n] = False
    diff = np.frombuffer(bytes(before), np.uint8) != np.frombuffer(bytes(after), np.uint8)
    return not (diff & mask).any()


def test_tat_miss_stops_before_any_access():
    rng = np.random.default_rng(11)
    cmd, image, _, _ = layout(4, 6, 5, True, rng, False)
    # Map only the first 16 KiB: B (0x5006..) and C (0x9004..) are outside.
    tat = identity_tat()
    tat[0] = {"valid": 1, "size": 2, "logical_page": 0, "physical_page": 0}
    result, mem = run_core(4, 128, cmd, image, tat=tat)
    assert (result["outcome"], result["code"]) == ("fail", ErrorCode.TAT_MISS), result
    assert result["addr"] == cmd["b_addr"]          # B's first row is the first miss
    assert bytes(mem) == bytes(image)


@pytest.mark.parametrize("operand", ["b", "c"])
def test_axi_error_response(operand):
    rng = np.random.default_rng(12)
    m, k, n = 6, 5, 7
    cmd, image, expected, (c_addr, ldc, _) = layout(m, k, n, False, rng, False)
    bus = 16
    # The word holding the second row of B (read) or of C (write) answers an error.
    row_addr = cmd[f"{operand}_addr"] + cmd[f"ld{operand}"]
    # The same command twice: first with the error, then without; the second must be
    # right, so the error left nothing behind in the core.
    (failed, redone), mem = run_commands(
        4, 128, [(cmd, {row_addr - row_addr % bus}), (cmd, set())], image, stall=0.3)
    code = ErrorCode.AXI_READ_ERROR if operand == "b" else ErrorCode.AXI_WRITE_ERROR
    assert (failed["outcome"], failed["code"]) == ("fail", code), failed
    # The failing burst's first byte: the row start (one burst per row here).
    assert failed["addr"] == row_addr
    assert redone["outcome"] == "done", redone
    assert outside_c_unchanged(image, mem, c_addr, ldc, m, n)
    got = unpack_matrix(bytes(mem[c_addr:]), m, n, expected.dtype, ldc)
    np.testing.assert_array_equal(got, expected)


def c_words(c_addr, ldc, m, n, bus):
    """The bus-aligned addresses of the words that hold the M rows of N int32s of C."""
    return {addr - addr % bus for row in range(m)
            for addr in range(c_addr + row * ldc, c_addr + row * ldc + 4 * n)}


def test_old_c_error_under_backpressure():
    """An AXI read error on the old C of an ACCUMULATE command's second block of P rows,
    read while the first block's rows wait for the writer under random pauses (four times,
    on each row of that block): the command fails with AXI_READ_ERROR and the row's
    address, every write burst of it is taken before it ends, and the next command writes
    only its own C, right. The failed blocks' C rows are never written."""
    rng = np.random.default_rng(14)
    p, bus, shift = 4, 16, 0x10000
    m, k, n = 2 * p, p, 2 * p
    cmd, image, _, (c_addr, ldc, _) = layout(m, k, n, False, rng, True)
    # The next command's operands and C lie 64 KiB up.
    good, good_image, expected, (good_c, good_ldc, dtype) = layout(p, p, p, True, rng, False)
    good = dict(good, **{key: good[key] + shift for key in ("a_addr", "b_addr", "c_addr")})
    good_c += shift
    image[shift:] = good_image[:MEM_BYTES - shift]
    commands = []
    for row in range(p, 2 * p):
        row_addr = c_addr + row * ldc
        commands += [(cmd, {row_addr - row_addr % bus}), (good, set())]
    results, mem = run_commands(p, 128, commands, image, stall=0.5)
    failed_c, good_words = c_words(c_addr, ldc, m, n, bus), c_words(good_c, good_ldc, p, p, bus)
    for row, failed, redone in zip(range(p, 2 * p), results[::2], results[1::2], strict=True):
        assert (failed["outcome"], failed["code"]) == ("fail", ErrorCode.AXI_READ_ERROR), failed
        assert failed["addr"] == c_addr + row * ldc
        assert set(failed["writes"]) <= failed_c, failed
        assert redone["outcome"] == "done", redone
        assert redone["writes"] and set(redone["writes"]) <= good_words, (
            [hex(addr) for addr in redone["writes"]])
    got = unpack_matrix(bytes(mem[good_c:]), p, p, dtype, good_ldc)
    np.testing.assert_array_equal(got, expected)
    second_block = slice(c_addr + p * ldc, c_addr + m * ldc)
    assert mem[second_block] == image[second_block]
    # Outside the two Cs nothing changed.
    both = bytearray(image)
    for addr in list(failed_c) + list(good_words):
        both[addr:addr + bus] = mem[addr:addr + bus]
    assert both == mem


def test_back_to_back_mode_switch():
    rng = np.random.default_rng(13)
    first = layout(5, 6, 7, True, rng, False)
    second = layout(5, 6, 7, False, rng, True)
    # Both layouts use the same addresses: the second command's operands go 64 KiB up.
    image = bytearray(first[1])
    cmd2 = dict(second[0])
    shift = 0x10000
    for key in ("a_addr", "b_addr", "c_addr"):
        cmd2[key] += shift
    image[shift:] = second[1][:MEM_BYTES - shift]
    (r1, r2), mem = run_commands(4, 128, [(first[0], set()), (cmd2, set())], image)
    assert r1["outcome"] == r2["outcome"] == "done"
    for (_, _, expected, (c_addr, ldc, dtype)), offset in ((first, 0), (second, shift)):
        got = unpack_matrix(bytes(mem[c_addr + offset:]), 5, 7, dtype, ldc)
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("bf16", [False, True])
def test_rows_crossing_pages(bf16):
    """Every row of A, B and C straddles a 4 KiB boundary: two bursts per row, realigned."""
    rng = np.random.default_rng(21 + bf16)
    m, k, n = 5, 12, 24
    es = 2 if bf16 else 1
    cmd, _, _, _ = layout(m, k, n, bf16, rng, True)
    cmd.update(a_addr=0x1000 - 6 * es, lda=0x1000, b_addr=0x6000 - 14 * es, ldb=0x1000,
               c_addr=0x18000 - 36, ldc=0x1000)
    a = np.frombuffer(rng.bytes(m * k * es), np.uint16 if bf16 else np.int8).reshape(m, k)
    b = np.frombuffer(rng.bytes(k * n * es), np.uint16 if bf16 else np.int8).reshape(k, n)
    if bf16:   # keep exponents below 0x7F: finite operands, readable failures
        a, b = a & np.uint16(0xBFFF), b & np.uint16(0xBFFF)
    c = np.frombuffer(rng.bytes(m * n * 4), np.uint32 if bf16 else np.int32).reshape(m, n)
    image = bytearray(MEM_BYTES)
    for addr, arr, ld in ((cmd["a_addr"], a, cmd["lda"]), (cmd["b_addr"], b, cmd["ldb"]),
                          (cmd["c_addr"], c, cmd["ldc"])):
        blob = pack_matrix(arr, ld)
        image[addr:addr + len(blob)] = blob
    result, mem = run_core(4, 128, cmd, image, stall=0.2)
    assert result["outcome"] == "done", result
    expected = gemm(cmd["mode"], a, b, c)
    got = unpack_matrix(bytes(mem[cmd["c_addr"]:]), m, n, expected.dtype, cmd["ldc"])
    np.testing.assert_array_equal(got, expected)
    assert outside_c_unchanged(image, mem, cmd["c_addr"], cmd["ldc"], m, n)
