"""Latency model of the memory controller: cycles from a client's request to its last
answer, for requests on the MC's channels (``hdl/mc/core.py``, ``frontend.py``,
``arbiter.py``).

One memory port, answered in order (a read burst's first word ``latency`` cycles after
its address, then a word a cycle; a write answered ``latency`` cycles after its last
word), and these rules of the RTL, in cycles:

1. A request sent in cycle ``t`` is in its channel's frontend and offers its first
   burst in ``t + REQUEST_WAIT``. It is cut into bursts of at most 16 words
   (``MAX_BURST``) that never cross 4 KiB; a read burst is asked for when the client has
   room for its words (the model: always, the client takes every answer at once); a
   write burst when its words are in the MC (the client sends them one a cycle from
   the request's cycle, one reaching the MC ``WORD_WAIT`` cycles after it is sent).
   Each later burst of the request is offered the cycle after the previous one is
   granted.
2. The arbiter grants one burst a cycle: the highest traffic class among the channels
   offering one (decode 7 > prefill 5 > cache-migrate 3), round robin within a class
   (the age limit only matters under sustained load; not modelled). At most
   ``OUTSTANDING`` (8) read bursts and 8 write bursts are in flight. A granted burst's
   address is on the memory port the next cycle.
3. Read words come back in burst order, one a cycle; a request's answer is complete a
   cycle after its last word. So a request that arrives while another class's bursts
   are in flight waits for their remaining words: the class arbitration only decides
   the bursts not yet granted. Write words go out in grant order, one a cycle; the
   acknowledgement follows the last burst's answer by ``ACK_WAIT`` cycles.

``tests/test_mc_latency.py`` checks the model against ``McCore`` in the Amaranth
simulator on random requests, alone and behind another class's burst train.
"""

from dataclasses import dataclass

from spec.codes import McOp
from spec.memory import PAGE_BYTES

__all__ = ["McRequest", "mc_cycles", "read_cycles", "write_cycles"]

MAX_BURST = 16          # words a burst (hdl.mc.frontend.MAX_BURST)
OUTSTANDING = 8         # bursts in flight per direction (hdl.mc.core.OUTSTANDING)
# Fitted offsets (cycles), see the module docstring.
REQUEST_WAIT = 2        # request sent → its first burst offered to the arbiter
READ_WAIT = 0           # beyond ``latency``: a read address → its first word
ANSWER_WAIT = 1         # a read word from memory → in the client's response stream
WORD_WAIT = 2           # a write word sent → buffered in the MC
WRITE_WAIT = 0          # beyond ``latency``: a write burst's last word → its answer
ACK_WAIT = 0            # the last burst's answer → the acknowledgement to the client
CREDIT_WAIT = 1         # an answer taken by the client → its credit back in the MC


@dataclass(frozen=True)
class McRequest:
    """A client request: sent in ``cycle`` on channel ``chan``; ``op`` a
    :class:`spec.codes.McOp`; byte ``addr`` and ``length``; traffic class ``cls``."""
    cycle: int
    chan: int
    op: int
    addr: int
    length: int
    cls: int


def _bursts(addr, length, bus_bytes, cap=MAX_BURST):
    word = addr // bus_bytes
    last = (addr + length - 1) // bus_bytes
    page = PAGE_BYTES // bus_bytes
    out = []
    while word <= last:
        beats = min(last - word + 1, cap, page - word % page)
        out.append(beats)
        word += beats
    return out


def mc_cycles(requests, *, data_width, latency, resp_depth=64):
    """Cycles from each request's cycle to its last answer (the cycle the client sees
    the answer with ``last``), for ``requests`` (McRequest; a channel serves its requests
    in cycle order, one at a time), in the order given. ``resp_depth``: each client's
    response buffer (read words in flight per channel at most; the client takes each
    answer as it comes)."""
    bb = data_width // 8
    cap = min(MAX_BURST, resp_depth)
    credit_back = {}            # channel → cycles its reserved response credits return
    pending = sorted(range(len(requests)), key=lambda i: (requests[i].cycle, i))
    # per request: bursts left, the cycle its next burst is offered, words buffered
    state = {}
    for i in pending:
        r = requests[i]
        bursts = _bursts(r.addr, r.length, bb, cap if r.op == McOp.READ else MAX_BURST)
        state[i] = {"bursts": bursts, "next": 0, "offer": None, "words": 0,
                    "total": sum(bursts), "done": None, "last_end": None}
    channel_busy = {}           # channel → the request it serves now
    queue = {}                  # channel → requests waiting, in order
    for i in pending:
        queue.setdefault(requests[i].chan, []).append(i)
    last_chan = -1
    read_free = write_free = 0  # the memory's read / write data channel
    reads_out, writes_out = [], []   # cycles each burst in flight leaves
    remaining = len(pending)
    t = 0
    while remaining:
        # channels pick up their next request once the previous one has been answered
        for chan, q in queue.items():
            if chan in channel_busy or not q:
                continue
            i = q[0]
            r = requests[i]
            prev = state.get(("prev", chan))
            start = r.cycle if prev is None else max(r.cycle, prev)
            state[i]["offer"] = start + REQUEST_WAIT
            channel_busy[chan] = i
            q.pop(0)
        offers = []
        for chan, i in channel_busy.items():
            s = state[i]
            if s["next"] >= len(s["bursts"]) or s["offer"] is None or s["offer"] > t:
                continue
            r = requests[i]
            if r.op == McOp.WRITE:
                need = sum(s["bursts"][:s["next"] + 1])
                if r.cycle + need - 1 + WORD_WAIT >= t:     # its words are not all here
                    continue
            out = reads_out if r.op == McOp.READ else writes_out
            if sum(1 for c in out if c >= t) >= OUTSTANDING:
                continue
            if r.op == McOp.READ:
                held = sum(1 for c in credit_back.get(chan, ()) if c > t)
                if resp_depth - held < s["bursts"][s["next"]]:
                    continue
            offers.append((chan, i))
        if offers:
            top = max(requests[i].cls for _, i in offers)
            chans = sorted(c for c, i in offers if requests[i].cls == top)
            chan = next((c for c in chans if c > last_chan), chans[0])
            i = channel_busy[chan]
            last_chan = chan
            s, r = state[i], requests[i]
            beats = s["bursts"][s["next"]]
            s["next"] += 1
            s["offer"] = t + 1
            address = t + 1
            if r.op == McOp.READ:
                first = max(address + latency + READ_WAIT, read_free)
                read_free = first + beats
                reads_out.append(read_free - 1)
                credit_back.setdefault(chan, []).extend(
                    c + ANSWER_WAIT + CREDIT_WAIT for c in range(first, read_free))
                end = read_free - 1 + ANSWER_WAIT
            else:
                first = max(address, write_free)
                write_free = first + beats
                writes_out.append(write_free - 1)
                end = write_free - 1 + latency + WRITE_WAIT + ACK_WAIT + 1
            if s["next"] == len(s["bursts"]):
                s["done"] = end
                state[("prev", r.chan)] = end + 1
                del channel_busy[r.chan]
                remaining -= 1
        t += 1
    return [state[i]["done"] - requests[i].cycle for i in range(len(requests))]


def read_cycles(addr, length, *, data_width, latency):
    """A read alone on an idle MC: cycles from the request to its last word's answer."""
    return mc_cycles([McRequest(0, 0, McOp.READ, addr, length, 7)], data_width=data_width,
                     latency=latency)[0]


def write_cycles(addr, length, *, data_width, latency):
    """A write alone on an idle MC (its words sent one a cycle from the request)."""
    return mc_cycles([McRequest(0, 0, McOp.WRITE, addr, length, 7)], data_width=data_width,
                     latency=latency)[0]
