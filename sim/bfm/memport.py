"""A memory behind a block's memory port in the Amaranth simulator: :class:`PortMemory`.

It serves the five streams of a ``MemPortSignature`` port (``rd_req``, ``rd_resp``,
``wr_req``, ``wr_data``, ``wr_resp``; ``hdl/common/memport.py``) from a byte buffer that
holds the physical bytes ``[origin, origin + len(buffer))``, with background testbenches
added to a :class:`amaranth.sim.Simulator`. Its rules:

1. A read burst is answered in order, its first beat no earlier than ``latency`` cycles
   after the request was taken (``latency``: cycles, or ``(lo, hi)`` for a draw in
   ``lo..hi`` per burst), then one beat a cycle at most; ``last`` on the final beat.
2. A write burst lands when its last beat is in (beats may come before their request
   only with ``w_before_aw``) and is answered in order ``latency`` cycles later; a beat's
   ``last`` must be set exactly on the burst's final beat.
3. ``errors``: byte ranges ``[lo, hi)`` (read when used, so a test may change them
   between commands). A read beat that overlaps one answers ``error``; a write burst
   with a strobed byte in one writes nothing and answers ``error``.
4. Each cycle, each ``ready`` the memory drives and each response ``valid`` is withheld
   with probability ``pause`` (draws from ``rng``, anything with ``random()``).
5. With ``check_stable``, a request or write beat offered and not taken must stay
   offered, unchanged, until it is taken.
6. Every access is inside the buffer; ``log`` (a list, if given) gets ``("read", addr)``
   and ``("write", addr)`` for every request taken.
"""

from collections import deque

__all__ = ["PortMemory"]


class PortMemory:
    """See the module docstring. ``buffer``: a ``bytearray`` or a ``uint8`` numpy array,
    written in place; ``data_width``: the port's data width in bits."""

    def __init__(self, port, data_width, buffer, *, origin=0, latency=6, pause=0.0,
                 rng=None, errors=None, log=None, w_before_aw=False, check_stable=True):
        if pause and rng is None:
            raise ValueError("a pause probability needs an rng")
        lo, hi = (latency, latency) if isinstance(latency, int) else latency
        if not 1 <= lo <= hi:
            raise ValueError(f"latency must be cycles >= 1 or (lo, hi) with 1 <= lo <= hi, "
                             f"not {latency!r}")
        self.port, self.bb, self.buffer, self.origin = port, data_width // 8, buffer, origin
        self.latency, self.pause, self.rng = (lo, hi), pause, rng
        self.errors = [] if errors is None else errors
        self.log, self.w_before_aw, self.check_stable = log, w_before_aw, check_stable
        self.cycle = 0
        self._reads, self._writes, self._beats, self._answers = deque(), deque(), deque(), deque()

    # -- memory
    def _index(self, addr, nbytes):
        start = addr - self.origin
        if not (0 <= start and start + nbytes <= len(self.buffer)):
            raise AssertionError(f"an access at {addr:#x} ({nbytes} bytes) lies outside "
                                 f"the memory [{self.origin:#x}, "
                                 f"{self.origin + len(self.buffer):#x})")
        return start

    def refused(self, lo, hi):
        """Whether bytes ``[lo, hi)`` touch an error range."""
        return any(lo < e_hi and e_lo < hi for e_lo, e_hi in self.errors)

    def word(self, addr):
        start = self._index(addr, self.bb)
        return int.from_bytes(bytes(self.buffer[start:start + self.bb]), "little")

    def idle(self):
        """No read or write outstanding."""
        return not (self._reads or self._writes or self._beats or self._answers)

    def _go(self):
        return not (self.pause and self.rng.random() < self.pause)

    def _delay(self):
        lo, hi = self.latency
        return lo if lo == hi else lo + int(self.rng.random() * (hi - lo + 1))

    def _land(self):
        """Apply the write bursts whose beats are all in (rule 2, 3)."""
        while self._writes and len(self._beats) >= self._writes[0][1]:
            addr, count = self._writes.popleft()
            beats = [self._beats.popleft() for _ in range(count)]
            runs = []
            for k, (data, strb, last) in enumerate(beats):
                assert bool(last) == (k == count - 1), (
                    f"write burst at {addr:#x}: last on beat {k} of {count} is {int(last)}")
                base = addr + k * self.bb
                runs += [(base + b, (data >> 8 * b) & 0xFF) for b in range(self.bb)
                         if strb >> b & 1]
            error = any(self.refused(a, a + 1) for a, _ in runs)
            if not error:
                for a, value in runs:
                    self.buffer[self._index(a, 1)] = value
            self._answers.append((self.cycle + self._delay(), error))

    # -- the testbenches
    def _stable(self, kind, offered, valid, ready, payload):
        """Rule 5: returns what is offered and not yet taken after this cycle."""
        value = payload.as_value().value
        if self.check_stable and offered is not None:
            assert valid and value == offered, (
                f"{kind} withdrawn or changed before it was taken")
        return value if valid and not ready else None

    def add_to(self, sim):
        port = self.port

        async def clock(ctx):
            async for _ in ctx.tick():
                self.cycle += 1

        def requests(stream, kind, queue):
            async def serve(ctx):
                offered = None
                ctx.set(stream.ready, 1)
                async for _, _, valid, ready, payload in ctx.tick().sample(
                        stream.valid, stream.ready, stream.payload):
                    offered = self._stable(f"{kind} request", offered, valid, ready, payload)
                    if valid and ready:
                        if self.log is not None:
                            self.log.append((kind, payload.addr))
                        if kind == "read":
                            queue.append((self.cycle + self._delay(), payload.addr,
                                          payload.len + 1))
                        else:
                            queue.append((payload.addr, payload.len + 1))
                            self._land()
                    ctx.set(stream.ready, self._go())
            return serve

        async def read_data(ctx):
            resp = port.rd_resp
            while True:
                if not self._reads or self._reads[0][0] > self.cycle:
                    await ctx.tick()
                    continue
                _, addr, beats = self._reads[0]
                for n in range(beats):
                    while not self._go():
                        ctx.set(resp.valid, 0)
                        await ctx.tick()
                    a = addr + n * self.bb
                    ctx.set(resp.payload, {"data": self.word(a), "last": n == beats - 1,
                                           "error": self.refused(a, a + self.bb)})
                    ctx.set(resp.valid, 1)
                    await ctx.tick().until(resp.ready)
                ctx.set(resp.valid, 0)
                self._reads.popleft()

        async def write_data(ctx):
            data = port.wr_data
            offered = None
            ctx.set(data.ready, 1)
            async for _, _, valid, ready, payload in ctx.tick().sample(
                    data.valid, data.ready, data.payload):
                offered = self._stable("write beat", offered, valid, ready, payload)
                ctx.set(data.ready, self._go())
                if not (valid and ready):
                    continue
                assert self.w_before_aw or len(self._writes) > 0, "write data before its address"
                self._beats.append((payload.data, payload.strb, payload.last))
                self._land()

        async def write_responses(ctx):
            resp = port.wr_resp
            while True:
                if not self._answers or self._answers[0][0] > self.cycle or not self._go():
                    await ctx.tick()
                    continue
                _, error = self._answers[0]
                ctx.set(resp.payload.error, error)
                ctx.set(resp.valid, 1)
                await ctx.tick().until(resp.ready)
                ctx.set(resp.valid, 0)
                self._answers.popleft()

        sim.add_process(clock)
        for bench in (requests(port.rd_req, "read", self._reads), read_data,
                      requests(port.wr_req, "write", self._writes), write_data,
                      write_responses):
            sim.add_testbench(bench, background=True)
