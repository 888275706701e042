"""The MC's reference model (golden/mc.py) on its own: request checks, word spans and
the legal-value bookkeeping of concurrent reads and writes."""

import random

import pytest

from golden.mc import ADDR_LIMIT, ByteMemoryModel, check_request, lines_of, word_span
from spec.codes import ErrorCode, McOp


@pytest.mark.parametrize("addr, length, code", [
    (0, 0, ErrorCode.BAD_COMMAND),
    (0x1000, 1, ErrorCode.NONE),
    (ADDR_LIMIT - 1, 1, ErrorCode.NONE),
    (ADDR_LIMIT - 1, 2, ErrorCode.BAD_COMMAND),
    (ADDR_LIMIT - 16, 16, ErrorCode.NONE),
    (ADDR_LIMIT - 16, 17, ErrorCode.BAD_COMMAND),
])
def test_check_request(addr, length, code):
    for op in McOp:
        assert check_request(op, addr, length) == code


def test_word_span_covers_exactly_the_bytes():
    rng = random.Random(1)
    for _ in range(2000):
        bus = rng.choice((8, 16, 32, 64))
        addr, length = rng.randrange(0, 1 << 20), rng.randrange(1, 600)
        first, count = word_span(addr, length, bus)
        assert first % bus == 0 and first <= addr < first + bus
        assert first + (count - 1) * bus <= addr + length - 1 < first + count * bus
    assert word_span(100, 0, 16) == (96, 0)


def test_lines_of():
    assert lines_of(0x40, 64) == [0x40]
    assert lines_of(0x7F, 2) == [0x40, 0x80]


def test_sequential_writes_then_read():
    model = ByteMemoryModel({5: 9})
    token = model.read_begin(4, 2)
    assert model.read_check(token, bytes([0, 9])) == []
    write = model.write_begin(4, b"\x01\x02")
    model.write_end(write)
    token = model.read_begin(4, 3)
    assert model.read_check(token, bytes([1, 2, 0])) == []
    token = model.read_begin(4, 2)
    bad = model.read_check(token, bytes([0, 9]))      # stale bytes are caught
    assert [addr for addr, _, _ in bad] == [4, 5]


def test_read_during_write_may_see_either():
    model = ByteMemoryModel()
    write = model.write_begin(0, b"\x07")
    token = model.read_begin(0, 1)
    model.write_end(write)
    assert model.read_check(token, b"\x00") == []
    token2 = model.read_begin(0, 1)
    assert model.read_check(token2, b"\x00") != []    # after the response: new value only


def test_write_started_during_read_counts():
    model = ByteMemoryModel()
    token = model.read_begin(0, 1)
    write = model.write_begin(0, b"\x05")
    assert model.read_check(token, b"\x05") == []
    model.write_end(write)


def test_failed_write_may_have_landed_in_part():
    model = ByteMemoryModel({0: 3})
    write = model.write_begin(0, b"\x04")
    model.write_end(write, ok=False)
    assert model.legal(0) == {3, 4}


def test_overlapping_writes_leave_both_values_legal():
    model = ByteMemoryModel()
    a = model.write_begin(0, b"\x01")
    b = model.write_begin(0, b"\x02")
    model.write_end(a)
    model.write_end(b)
    assert model.legal(0) == {1, 2}
    c = model.write_begin(0, b"\x03")
    model.write_end(c)
    assert model.legal(0) == {3}      # a later, lone write settles it
