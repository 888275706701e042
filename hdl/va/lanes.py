"""The lane engine: L bf16 lanes computing one elementwise operation per vector."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.codes import VaOpcode
from hdl.ma.fp import bf16_mul, f32_add

__all__ = ["LaneEngine", "f32_to_bf16"]


def f32_to_bf16(value):
    """binary32 bits → bf16 bits, nearest even. Correct for every value the MA's units
    produce: normals, zeros, infinities and the canonical NaN (which stays 0x7FC0)."""
    return (value + 0x7FFF + value[16])[16:32]


class LaneEngine(wiring.Component):
    """``lanes`` bf16 lanes: ADD (x + y), MUL (x · y), SCALE (x · scalar).

    Each lane computes in binary32 with the MA's units (:mod:`hdl.ma.fp`: an exact
    bf16 product, a round-to-nearest-even sum) and rounds to bf16 (golden.va.add_bf16,
    mul_bf16, scale_bf16). ``x`` and ``y`` are vectors (lane i in bits 16i..16i+15); a
    result leaves through one register stage. ``y`` is used (and waited for) only by
    the two-operand ADD and MUL.
    """

    def __init__(self, lanes):
        self.lanes = lanes
        vec = data.ArrayLayout(16, lanes)
        super().__init__({
            "op": In(8),
            "scalar": In(16),
            "x": In(stream.Signature(vec)),
            "y": In(stream.Signature(vec)),
            "o": Out(stream.Signature(vec)),
        })

    def elaborate(self, platform):
        m = Module()
        two = (self.op == VaOpcode.ADD) | (self.op == VaOpcode.MUL)
        ready_in = ~self.o.valid | self.o.ready
        have = self.x.valid & (self.y.valid | ~two)
        m.d.comb += [self.x.ready.eq(ready_in & have), self.y.ready.eq(ready_in & have & two)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        result = Signal(data.ArrayLayout(16, self.lanes))
        for lane in range(self.lanes):
            a = self.x.payload[lane]
            b = Mux(self.op == VaOpcode.SCALE, self.scalar, self.y.payload[lane])
            product = bf16_mul(m, a, b, name=f"mul{lane}")
            total = f32_add(m, Cat(Const(0, 16), a), Cat(Const(0, 16), b), name=f"add{lane}")
            m.d.comb += result[lane].eq(
                f32_to_bf16(Mux(self.op == VaOpcode.ADD, total, product)))
        with m.If(ready_in & have):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(result)]
        return m
