"""Host side of the board's UART bridge (``hdl.board.bridge``): requests as bytes, and
bit-level UART drivers for the Amaranth simulator and for cocotb.

:class:`BridgeHost` has cocotbext-axi's ``AxiLiteMaster`` coroutines ``read(address,
length)`` / ``write(address, data)`` (whole aligned words: the bridge writes with every
byte strobe set), so ``sim.regs.Registers`` runs over it unchanged; ``mem_write`` /
``mem_read`` reach the on-chip memory.
"""

from types import SimpleNamespace

from hdl.board.bridge import BridgeOp, BridgeStatus
from hdl.common.axi import AxiResp

__all__ = ["BridgeError", "BridgeHost", "encode_request", "reply_length",
           "AmaranthUart", "CocotbUart"]

_WRITES = (BridgeOp.REG_WRITE, BridgeOp.MEM_WRITE)


class BridgeError(Exception):
    """The bridge answered a memory access with a status other than OKAY."""


def encode_request(op, addr, data=None):
    """The bytes of one request (protocol rule 1)."""
    op = BridgeOp(op)
    if not 0 <= addr < 1 << 32:
        raise ValueError(f"address {addr:#x} does not fit in 32 bits")
    body = bytes([op.value]) + addr.to_bytes(4, "little")
    if op in _WRITES:
        return body + (data & 0xFFFFFFFF).to_bytes(4, "little")
    return body


def reply_length(op, status=BridgeStatus.OKAY):
    """Bytes of the reply to ``op``: the status, and the word for reads (rule 2)."""
    if status == BridgeStatus.BAD_OPCODE:
        return 1
    return 1 if BridgeOp(op) in _WRITES else 5


class BridgeHost:
    """Requests over a byte ``transport`` with coroutines ``send(data)`` and
    ``receive(count)``."""

    def __init__(self, transport):
        self.transport = transport

    async def request(self, op, addr, data=None):
        """One request; returns ``(BridgeStatus, word)`` (the word is 0 for writes)."""
        await self.transport.send(encode_request(op, addr, data))
        reply = await self.transport.receive(reply_length(op))
        status = BridgeStatus(reply[0])
        return status, int.from_bytes(reply[1:], "little")

    async def read(self, address, length):
        if address % 4 or length != 4:
            raise ValueError("the bridge reads whole aligned words")
        status, word = await self.request(BridgeOp.REG_READ, address)
        return SimpleNamespace(data=word.to_bytes(4, "little"), resp=AxiResp(status.value))

    async def write(self, address, data):
        if address % 4 or len(data) != 4:
            raise ValueError("the bridge writes whole aligned words")
        status, _ = await self.request(BridgeOp.REG_WRITE, address,
                                       int.from_bytes(data, "little"))
        return SimpleNamespace(resp=AxiResp(status.value))

    async def mem_write(self, addr, word):
        status, _ = await self.request(BridgeOp.MEM_WRITE, addr, word)
        if status != BridgeStatus.OKAY:
            raise BridgeError(f"memory write at {addr:#x}: {status.name}")

    async def mem_read(self, addr):
        status, word = await self.request(BridgeOp.MEM_READ, addr)
        if status != BridgeStatus.OKAY:
            raise BridgeError(f"memory read at {addr:#x}: {status.name}")
        return word

    async def mem_write_bytes(self, addr, data):
        """Write ``data`` (a multiple of 4 bytes) from the aligned address ``addr``."""
        if addr % 4 or len(data) % 4:
            raise ValueError("memory loads are whole aligned words")
        for offset in range(0, len(data), 4):
            await self.mem_write(addr + offset, int.from_bytes(data[offset:offset + 4], "little"))

    async def mem_read_bytes(self, addr, length):
        words = [await self.mem_read(addr + offset) for offset in range(0, length, 4)]
        return b"".join(word.to_bytes(4, "little") for word in words)[:length]


class _BitUart:
    """8N1 at ``divisor`` clock cycles per bit; subclasses give ``_set_rx``, ``_get_tx``
    and ``_cycles``."""

    def __init__(self, divisor, timeout_bits=2000):
        self.divisor, self.timeout_bits = divisor, timeout_bits

    async def send(self, data):
        for byte in data:
            for bit in [0, *((byte >> i) & 1 for i in range(8)), 1]:
                await self._set_rx(bit)
                await self._cycles(self.divisor)

    async def receive(self, count):
        out = bytearray()
        for _ in range(count):
            for _ in range(self.timeout_bits * self.divisor):     # wait for a start bit
                if not await self._get_tx():
                    break
                await self._cycles(1)
            else:
                raise TimeoutError(f"no reply byte after {self.timeout_bits} bit times")
            await self._cycles(self.divisor + self.divisor // 2)  # middle of data bit 0
            byte = 0
            for i in range(8):
                byte |= await self._get_tx() << i
                await self._cycles(self.divisor)
            if not await self._get_tx():
                raise ValueError("framing error: stop bit low")
            out.append(byte)
        return bytes(out)


class AmaranthUart(_BitUart):
    """Drives ``rx`` and samples ``tx`` of a design in an Amaranth testbench ``ctx``."""

    def __init__(self, ctx, rx, tx, divisor, **kwargs):
        super().__init__(divisor, **kwargs)
        self.ctx, self.rx, self.tx = ctx, rx, tx

    async def _set_rx(self, bit):
        self.ctx.set(self.rx, bit)

    async def _get_tx(self):
        return self.ctx.get(self.tx)

    async def _cycles(self, n):
        await self.ctx.tick().repeat(n)


class CocotbUart(_BitUart):
    """Drives ``rx`` and samples ``tx`` (cocotb handles) on rising edges of ``clk``."""

    def __init__(self, clk, rx, tx, divisor, **kwargs):
        super().__init__(divisor, **kwargs)
        self.clk, self.rx, self.tx = clk, rx, tx

    async def _set_rx(self, bit):
        self.rx.value = bit

    async def _get_tx(self):
        return int(self.tx.value)

    async def _cycles(self, n):
        from cocotb.triggers import ClockCycles
        await ClockCycles(self.clk, n)
