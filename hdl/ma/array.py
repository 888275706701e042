"""The P×P output-stationary systolic array of the matrix accelerator."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hdl.ma.fp import bf16_mul, f32_add, int8_mac

__all__ = ["FlagsLayout", "StepLayout", "SystolicArray"]


class FlagsLayout(data.StructLayout):
    """The control flags that travel with the A values."""
    def __init__(self):
        super().__init__({"valid": 1, "first": 1, "last": 1})


class StepLayout(data.StructLayout):
    """One k-step of a tile as it enters the array: column k of A, row k of B.

    Elements are 16 bits: a bf16 pattern, or an int8 in the low byte.
    """
    def __init__(self, p):
        super().__init__({
            "valid": 1,
            "first": 1,                        # k == 0: start from the initial value
            "last": 1,                         # k == K-1: the tile's result is ready
            "a": data.ArrayLayout(16, p),      # A[i0 + i, k], i = 0..P-1
            "b": data.ArrayLayout(16, p),      # B[k, j0 + j], j = 0..P-1
        })


class SystolicArray(wiring.Component):
    """P×P processing elements; PE(i, j) owns C[i0 + i, j0 + j] of the current tile.

    A values move right and B values move down, one PE per cycle; the input skew delays
    row i of A by i cycles and column j of B by j cycles, so PE(i, j) sees step k of a
    tile ``i + j + 1`` cycles after it entered. Each PE computes, in the command's mode::

        int8: acc = (first ? init : acc) + a·b                 (wrapping, 32 bits)
        bf16: acc = f32_add(first ? init : acc, bf16_mul(a, b)) (see ``hdl.ma.fp``)

    where ``init`` is 0 (+0.0), or with ``accumulate`` the PE's word of ``cinit`` as
    captured by the last ``cinit_load``.

    Protocol (the feeder's obligations):

    1. A tile is K ``step`` beats with ``valid`` on consecutive cycles; the first has
       ``first``, the last has ``last`` (one beat with both when K = 1).
    2. The first steps of two tiles are at least ``2·P`` cycles apart (``min_spacing``).
       Results are read out while the next tile computes, and the spacing is what keeps a
       PE from overwriting a result (or an initial value) before it is used.
    3. With ``accumulate``, ``cinit_load`` is pulsed in the cycle the tile's first step
       enters; it copies ``cinit`` into the PEs' initial values.

    Results: ``2·P`` cycles after the cycle the tile's last step entered, ``row`` holds row
    0 of the tile's P×P result, then rows 1..P-1 on the following cycles, ``row_valid``
    high for those P cycles.
    """

    def __init__(self, p):
        if not isinstance(p, int) or not 2 <= p <= 32:
            raise ValueError(f"P must be an integer in 2..32, not {p!r}")
        self.p = p
        self.min_spacing = 2 * p
        super().__init__({
            "bf16": In(1),
            "accumulate": In(1),
            "step": In(StepLayout(p)),
            "cinit": In(data.ArrayLayout(32, p * p)),     # row-major: [i·P + j]
            "cinit_load": In(1),
            "row_valid": Out(1),
            "row_index": Out(range(p)),
            "row": Out(data.ArrayLayout(32, p)),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.p

        # Input skew: row i of A (with the control flags) and column j of B by i, j cycles.
        a_in, f_in, b_in = [], [], []
        for i in range(p):
            a, f = self.step.a[i], self.step
            b = self.step.b[i]
            for d in range(i):
                a_d = Signal(16, name=f"a_skew_{i}_{d}")
                f_d = Signal(FlagsLayout(), name=f"f_skew_{i}_{d}")
                b_d = Signal(16, name=f"b_skew_{i}_{d}")
                m.d.sync += [a_d.eq(a), f_d.valid.eq(f.valid), f_d.first.eq(f.first),
                             f_d.last.eq(f.last), b_d.eq(b)]
                a, f, b = a_d, f_d, b_d
            a_in.append(a), f_in.append(f), b_in.append(b)

        cinit = Signal(data.ArrayLayout(32, p * p))
        with m.If(self.cinit_load):
            m.d.sync += cinit.eq(self.cinit)

        result = [[Signal(32, name=f"res_{i}_{j}") for j in range(p)] for i in range(p)]
        a_reg = [[None] * p for _ in range(p)]
        b_reg = [[None] * p for _ in range(p)]
        f_reg = [[None] * p for _ in range(p)]
        for i in range(p):
            for j in range(p):
                a_src = a_in[i] if j == 0 else a_reg[i][j - 1]
                f_src = f_in[i] if j == 0 else f_reg[i][j - 1]
                b_src = b_in[j] if i == 0 else b_reg[i - 1][j]
                a_reg[i][j] = Signal(16, name=f"a_{i}_{j}")
                b_reg[i][j] = Signal(16, name=f"b_{i}_{j}")
                f_reg[i][j] = Signal(FlagsLayout(), name=f"f_{i}_{j}")
                m.d.sync += [
                    a_reg[i][j].eq(a_src), b_reg[i][j].eq(b_src),
                    f_reg[i][j].valid.eq(f_src.valid), f_reg[i][j].first.eq(f_src.first),
                    f_reg[i][j].last.eq(f_src.last),
                ]
                self._pe(m, i, j, a_reg[i][j], b_reg[i][j], f_reg[i][j],
                         cinit[i * p + j], result[i][j])

        # Read-out: the bottom-right PE is the last to see the tile's last step.
        corner = f_reg[p - 1][p - 1]
        draining = Signal()
        index = Signal(range(p))
        with m.If(corner.valid & corner.last):
            m.d.sync += [draining.eq(1), index.eq(0)]
        with m.Elif(draining):
            m.d.sync += index.eq(index + 1)
            with m.If(index == p - 1):
                m.d.sync += draining.eq(0)
        m.d.comb += [self.row_valid.eq(draining), self.row_index.eq(index)]
        with m.Switch(index):
            for i in range(p):
                with m.Case(i):
                    m.d.comb += [self.row[j].eq(result[i][j]) for j in range(p)]
        return m

    def _pe(self, m, i, j, a, b, flags, init_word, result):
        acc = Signal(32, name=f"acc_{i}_{j}")
        base = Signal(32, name=f"base_{i}_{j}")
        m.d.comb += base.eq(Mux(flags.first, Mux(self.accumulate, init_word, 0), acc))
        product = bf16_mul(m, a, b, name=f"mul_{i}_{j}")
        fsum = f32_add(m, base, product, name=f"add_{i}_{j}")
        new = Mux(self.bf16, fsum, int8_mac(base, a, b))
        with m.If(flags.valid):
            m.d.sync += acc.eq(new)
            with m.If(flags.last):
                m.d.sync += result.eq(new)
