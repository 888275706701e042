"""Host operations on the tile's MESH window (the Muon register block and its RBR
arbiter, ``hdl/tile/top.py``): a reservation request, checked against the golden
reservation table (:class:`golden.muon.ReservationModel`).

Works over any :class:`sim.regs.Registers` of the Muon map (cocotb's AXI4-Lite master
or the Amaranth simulator's), so the tile's fast tests and its cocotb tests share it.
"""

from dataclasses import dataclass

from golden.muon import BAD_REQUEST
from spec.codes import ErrorCode

__all__ = ["Reservation", "read64", "reserve"]


@dataclass(frozen=True)
class Reservation:
    """The answer to one request: ``granted`` with ``id``, else ``retry_after`` (and
    ``full`` when every slot was taken); ``req_cycle`` / ``grant_cycle``: RSV_REQ_CYCLE
    and RSV_GRANT_CYCLE (timebase)."""
    granted: bool
    full: bool
    id: int
    retry_after: int
    req_cycle: int
    grant_cycle: int


async def read64(regs, name):
    """``<name>_LO`` then ``<name>_HI``."""
    lo = await regs.read(f"{name}_LO")
    hi = await regs.read(f"{name}_HI")
    return hi << 32 | lo


async def reserve(regs, model, src, dst, start, duration, bandwidth, *, max_polls=1000):
    """Request a reservation of the flow ``src`` → ``dst`` (nodes (x, y)) injecting in
    cycles [``start``, ``start + duration``), ``bandwidth`` flits; wait for the answer and
    check it against ``model`` (a :class:`golden.muon.ReservationModel` that has seen
    every earlier request). Returns the :class:`Reservation`, or None for a request the
    block refuses at START (ERROR = BAD_COMMAND, as the model says)."""
    await regs.write_fields("RSV_SRC", x=src[0], y=src[1])
    await regs.write_fields("RSV_DST", x=dst[0], y=dst[1])
    await regs.write("RSV_START_LO", start & 0xFFFF_FFFF)
    await regs.write("RSV_START_HI", start >> 32)
    await regs.write("RSV_DURATION", duration)
    await regs.write("RSV_BANDWIDTH", bandwidth)
    await regs.write("REQUEST", 1)
    for _ in range(max_polls):
        status = await regs.read_fields("STATUS")
        if not status["BUSY"]:
            break
    else:
        raise AssertionError(f"no answer to the request in {max_polls} STATUS reads")
    req_cycle = await read64(regs, "RSV_REQ_CYCLE")
    expected = model.request(req_cycle, src, dst, start, duration, bandwidth)
    what = f"request {src}→{dst} start {start} duration {duration} bandwidth {bandwidth}"
    if expected == BAD_REQUEST:
        code = await regs.read("ERROR")
        assert status["ERROR"] and code == ErrorCode.BAD_COMMAND, (
            f"{what}: expected BAD_COMMAND, STATUS {status}, ERROR {code}")
        return None
    assert status["DONE"] and not status["ERROR"], f"{what}: not done, STATUS {status}"
    result = await regs.read_fields("RSV_RESULT")
    answer = Reservation(bool(result["GRANTED"]), bool(result["FULL"]), result["ID"],
                         await read64(regs, "RSV_RETRY"), req_cycle,
                         await read64(regs, "RSV_GRANT_CYCLE"))
    got = (answer.granted, answer.full, answer.id, answer.retry_after)
    want = (expected.granted, expected.full, expected.id, expected.retry_after)
    assert got == want, (f"{what} at cycle {req_cycle}: RTL (granted, full, id, retry) "
                         f"{got}, golden {want}")
    return answer
