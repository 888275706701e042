"""Register boundaries of the datapath pipelines, and products sized for multiplier blocks.

Two ways to place the registers of a pipeline that never stalls (registers only delay:
the results are the same bit for bit):

* :class:`Stages` (the VA's function units): helpers call ``cut(values)`` at their cut
  points, a combinational call passes ``cut=None`` (:func:`no_cut`); values wait beside
  a helper with ``keep`` / ``take``.
* :func:`stage_registers` (the adders of :mod:`hdl.common.fp.add` and the MA's PE): a
  register after each of a fixed number of stages, with values carried beside them.

:func:`product` splits a product into the partial products of 18-bit slices (one ECP5
MULT18X18D each) with a cut after them.
"""

from amaranth.hdl import Const, Mux, Signal, Value
from amaranth.lib import memory

__all__ = ["Stages", "no_cut", "table_cut", "stage_registers", "LUT_SLICE", "lut_product",
           "product"]


class Stages:
    """The register boundaries of a datapath pipeline that never stalls.

    Helpers call ``cut(values)`` at their cut points: with ``registers`` the dict
    ``values``, and every value travelling in :attr:`carry`, pass through a register
    (reset-less: a pipeline's data needs no reset) and :attr:`depth` counts the boundary;
    without, ``cut`` changes nothing (the helper is combinational, ``depth`` stays 0).
    Values needed after a helper wait beside it: ``token = keep(name=value, ...)`` before,
    ``take(token)`` after, which delays them by the depth in between (registers for up to
    three cycles, else a small memory written and read every cycle: the pipeline never
    stalls). ``fork()`` starts a parallel branch at the same depth; ``join(branch,
    values)`` delays the values of the branch that is behind the other.
    ``lut_products``: :func:`product` forms its small partial products in logic.
    """

    def __init__(self, m, name, registers=True, lut_products=False):
        self.m, self.name, self.registers = m, name, registers
        self.lut_products = lut_products
        self.depth = 0
        self.carry = {}
        self._kept = {}
        self._count = 0
        self._ptr = None

    def __call__(self, values):
        if not self.registers:
            return dict(values)
        items = {**{f"v_{k}": v for k, v in values.items()},
                 **{f"c_{k}": v for k, v in self.carry.items()}}
        out = {}
        for key, value in items.items():
            out[key] = self._register(value, f"{self.name}_{self.depth}_{key}")
        self.carry = {k: out[f"c_{k}"] for k in self.carry}
        self.depth += 1
        return {k: out[f"v_{k}"] for k in values}

    def _register(self, value, name):
        value = Value.cast(value)
        reg = Signal(value.shape(), name=name, reset_less=True)
        self.m.d.sync += reg.eq(value)
        return reg

    def _delay(self, value, cycles, name):
        value = Value.cast(value)
        if cycles <= 3:
            for k in range(cycles):
                value = self._register(value, f"{name}_{k}")
            return value
        if self._ptr is None:
            self._ptr = Signal(8, name=f"{self.name}_ptr")
            self.m.d.sync += self._ptr.eq(self._ptr + 1)
        bits = max(4, (cycles - 1).bit_length())
        mem = memory.Memory(shape=value.shape(), depth=1 << bits, init=[])
        self.m.submodules[name] = mem
        wr = mem.write_port()
        rd = mem.read_port(transparent_for=())
        # written in cycle t at t; read in cycle t at t - cycles + 1, out in cycle t + 1
        self.m.d.comb += [wr.addr.eq(self._ptr[:bits]), wr.data.eq(value), wr.en.eq(1),
                          rd.addr.eq((self._ptr - (cycles - 1))[:bits])]
        return rd.data

    def keep(self, **values):
        self._count += 1
        token = f"k{self._count}"
        self._kept[token] = (self.depth, values)
        return token

    def take(self, token):
        depth, values = self._kept.pop(token)
        if not self.registers:
            return dict(values)
        return {k: self._delay(v, self.depth - depth, f"{self.name}_{token}_{k}")
                for k, v in values.items()}

    def fork(self):
        self._count += 1
        branch = Stages(self.m, f"{self.name}_b{self._count}", self.registers,
                        self.lut_products)
        branch.depth = self.depth
        return branch

    def join(self, branch, theirs, mine):
        """Bring this pipeline and ``branch`` to the same depth: returns the dicts
        ``theirs`` (the branch's values) and ``mine`` (this pipeline's), the one behind
        delayed to the other's depth."""
        theirs, mine = dict(theirs), dict(mine)
        while branch.depth < self.depth:
            theirs = branch(theirs)
        while self.depth < branch.depth:
            mine = self(mine)
        return theirs, mine


def table_cut(cut, values):
    """``cut`` after table look-ups (``values`` holds their outputs): two registers. A ROM
    of 256 or 512 words and the register after it become one ECP5 block RAM (DP16KD) with
    its output register, whose clock-to-output (5.8 ns) leaves too little of a 10 ns
    cycle for the MULT18X18D behind it (15.2 ns in UnaryUnit, tools/unit_timing.py); the
    second register moves the values into flip-flops first."""
    return cut(cut(values))


def no_cut(m, cut):
    """``cut``, or a :class:`Stages` without registers (a helper called combinationally)."""
    return cut if cut is not None else Stages(m, "", registers=False)


LUT_SLICE = 6
"""With ``lut_products``, partial products with a slice this narrow (or narrower) are
added up in logic, not given a multiplier block (the ECP5-85 has 156; see
:func:`product`). Only the narrowed units use it (:mod:`hdl.va.narrow`): a sum of shifted
copies simulates several times slower than one product on Icarus."""


def lut_product(a, b):
    """``a · b`` of unsigned values as a sum of shifted copies of ``a``, one per bit of
    the narrower ``b``, added in a balanced tree (carry chains, no multiplier block)."""
    a, b = Value.cast(a), Value.cast(b)
    if len(b) > len(a):
        a, b = b, a
    width = len(a) + len(b)
    terms = [Mux(b[k], a << k, 0) for k in range(len(b))]
    while len(terms) > 1:
        terms = [(terms[k] + terms[k + 1])[:width] if k + 1 < len(terms) else terms[k]
                 for k in range(0, len(terms), 2)]
    return terms[0][:width]


def product(m, x, y, cut, name, piece=18):
    """``x · y`` of unsigned values (``y`` may be an int): the partial products of
    ``piece``-bit slices (a multiplier block each; with a slice of :data:`LUT_SLICE` bits
    or fewer and ``cut.lut_products``, :func:`lut_product`), a cut, then their sum
    (combinational, returned)."""
    y = Const(y, max(1, int(y).bit_length())) if isinstance(y, int) else y
    x, y = Value.cast(x), Value.cast(y)
    width = len(x) + len(y)
    parts = {}
    for i in range(0, len(x), piece):
        for j in range(0, len(y), piece):
            a, b = x[i:i + piece], y[j:j + piece]
            small = cut.lut_products and min(len(a), len(b)) <= LUT_SLICE
            parts[f"p{i}_{j}"] = lut_product(a, b) if small else a * b
    parts = cut(parts)
    total = Signal(width, name=name)
    m.d.comb += total.eq(sum((Value.cast(v) << int(k[1:].split("_")[0]) + int(k.split("_")[1]))
                             for k, v in parts.items())[:width])
    return total


def stage_registers(m, name, carry, reset_less=False):
    """A ``boundary(values, index)`` for the staged adders: registers every value of the
    stage (``<name>_s<index>_<key>``) and, beside them, the values of ``carry`` (a dict,
    updated in place to the delayed copies); returns the registered values. With
    ``reset_less`` the registers have no reset."""
    def boundary(values, index):
        delayed = {}
        for key, value in {**values, **{f"carry_{k}": v for k, v in carry.items()}}.items():
            reg = Signal(value.shape(), name=f"{name}_s{index}_{key}", reset_less=reset_less)
            m.d.sync += reg.eq(value)
            delayed[key] = reg
        for key in list(carry):
            carry[key] = delayed.pop(f"carry_{key}")
        return delayed
    return boundary
