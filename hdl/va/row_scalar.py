"""The scalar sequencer of :class:`hdl.va.rows.RowUnit`: the steps between passes, one
operation at a time on one shared normaliser, reciprocal, multiplier, adder and rsqrt
unit, each a pipeline whose depth the step waits out."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.common.fp import F32_CANONICAL_NAN, Stages, f32_add_staged, f32_mul, normalize_trunc
from hdl.va.functions import recip_f32, rsqrt_f32
from hdl.va.row_common import SUM_BITS, Entry, PassSignature
from spec.va import MAX_LENGTH, RECIP_127, SUM_FRAC

__all__ = ["ScalarSequencer"]


class ScalarSequencer(wiring.Component):
    """The scalar steps into ``c``, the element pipeline's constant for the next pass.

    From ``passes.start`` (:class:`hdl.va.row_common.PassSignature`) it runs one chain,
    ``passes.done`` in the cycle its result is in ``c``:

    * ``sum_e`` (SOFTMAX after the sum): c = recip(``total``), a canonical NaN if the row
      is all NaN (``poison``, or a NaN ``best``);
    * ``sum_x`` (RMSNORM after the sum): c = rsqrt(``total`` · 2**(2·(``emax`` − 126)) / n
      + ``scalar``), a canonical NaN if ``poison``;
    * ``quantize`` (after the absmax ``best``): ``scale`` = absmax · RECIP_127, c =
      recip(``scale``); ``scale`` is QUANTIZE's second result.

    DEQUANTIZE_MEM (``dq_mem``): before the pass, ``y``'s first word (its binary32 at
    SRC2) times ``scalar`` into ``c``; ``scale_ready`` once it is there. ``lut_products``:
    the units' small partial products in logic. ``c`` starts at 0 with the unit's reset.
    """

    def __init__(self, data_width, lut_products=False):
        self.lut_products = lut_products
        super().__init__({
            **{flag: In(1) for flag in ("softmax", "sum_e", "sum_x", "quantize", "dq_mem",
                                        "poison")},
            "n": In(range(MAX_LENGTH + 1)),
            "scalar": In(32),
            "total": In(SUM_BITS),
            "emax": In(8),
            "best": In(Entry()),
            "y": In(stream.Signature(data_width)),
            "c": Out(32),
            "scale": Out(32),
            "scale_ready": Out(1),
            "passes": In(PassSignature()),
        })

    def elaborate(self, platform):
        m = Module()
        lut = self.lut_products
        t1, t2, c = Signal(32), Signal(32), Signal(32)
        nt_value = Signal(SUM_BITS)
        nt_scale = Signal(range(-512, 512))
        # Each unit is a pipeline; a step waits out the deepest unit it reads (its inputs
        # hold still meanwhile).
        units = {}
        st = Stages(m, "nt", lut_products=lut)
        units["nt"] = (normalize_trunc(m, nt_value, SUM_BITS, nt_scale, 0, "nt", st), st)
        st = Stages(m, "rc", lut_products=lut)
        units["rc"] = (recip_f32(m, t1, "rc", st), st)
        st = Stages(m, "smul", lut_products=lut)
        units["mul"] = (f32_mul(m, t1, Mux(self.quantize, Const(RECIP_127, 32), t2), "smul",
                                st), st)
        st = Stages(m, "sadd", lut_products=lut)
        units["add"] = (f32_add_staged(m, t1, self.scalar, "sadd", st), st)
        st = Stages(m, "rs", lut_products=lut)
        units["rs"] = (rsqrt_f32(m, t1, "rs", st), st)
        step_count = Signal(range(max(st.depth for _, st in units.values()) + 1))

        def ready(*names):
            """In a scalar step: the results of ``names`` are there (this cycle)."""
            depth = max(units[k][1].depth for k in names)
            done = step_count == depth
            m.d.sync += step_count.eq(Mux(done, 0, step_count + 1))
            return done
        s = {k: v for k, (v, _) in units.items()}
        s.update(t1=t1, t2=t2, c=c, nt_value=nt_value, nt_scale=nt_scale, ready=ready)
        # DEQUANTIZE_MEM: t1 = the binary32 at SRC2 (the first word of y), t2 = SCALAR;
        # c = their product before the first word of x enters the pipeline
        scale_in = Signal()                      # the scale word is taken
        scale_ready = Signal()                   # c holds the scale product
        with m.If(self.dq_mem & ~scale_in):
            m.d.comb += self.y.ready.eq(1)
            with m.If(self.y.valid):
                m.d.sync += [t1.eq(self.y.payload[:32]), t2.eq(self.scalar), scale_in.eq(1)]
        with m.If(self.dq_mem & scale_in & ~scale_ready):
            with m.If(ready("mul")):
                m.d.sync += [c.eq(s["mul"]), scale_ready.eq(1)]
        with m.FSM():
            with m.State("IDLE"):
                best = self.best
                with m.If(self.passes.start & self.sum_e):
                    m.next = "SOFTMAX_SUM"
                with m.Elif(self.passes.start & self.sum_x):
                    m.next = "RMS_N"
                with m.Elif(self.passes.start & self.quantize):
                    m.d.sync += t1.eq(Mux(best.key == 0, 0, Cat(Const(0, 16), best.value[:15])))
                    m.next = "QUANT_SCALE"
            self._steps(m, s)
        m.d.comb += [self.c.eq(c), self.scale.eq(t1), self.scale_ready.eq(scale_ready)]
        return m

    def _steps(self, m, s):
        """The steps' states, a row each: SOFTMAX's reciprocal of the sum, RMSNORM's
        rsqrt(sum/n + eps), QUANTIZE's scale and its reciprocal."""
        t1, t2, c, ready = s["t1"], s["t2"], s["c"], s["ready"]
        # the row is all NaN
        spoiled = self.poison | (self.softmax & (self.best.value[7:15] == 0xFF))
        nan_or = {k: Mux(spoiled, F32_CANONICAL_NAN, s[k]) for k in ("rc", "rs")}
        rms_scale = 2 * (self.emax - 126) - SUM_FRAC
        # (state, the normaliser's input and scale, the units it waits out, what it
        # loads, the next state: None, the chain's last step, loads c and is done)
        steps = [
            ("SOFTMAX_SUM", (self.total, -SUM_FRAC), ("nt",), [t1.eq(s["nt"])], "SOFTMAX_RECIP"),
            ("SOFTMAX_RECIP", None, ("rc",), [c.eq(nan_or["rc"])], None),
            ("RMS_N", (self.n, 0), ("nt",), [t1.eq(s["nt"])], "RMS_SUM"),
            ("RMS_SUM", (self.total, rms_scale), ("nt", "rc"), [t2.eq(s["rc"]), t1.eq(s["nt"])],
             "RMS_MEAN"),
            ("RMS_MEAN", None, ("mul",), [t1.eq(s["mul"])], "RMS_EPS"),
            ("RMS_EPS", None, ("add",), [t1.eq(s["add"])], "RMS_RSQRT"),
            ("RMS_RSQRT", None, ("rs",), [c.eq(nan_or["rs"])], None),
            ("QUANT_SCALE", None, ("mul",), [t1.eq(s["mul"])], "QUANT_RECIP"),
            ("QUANT_RECIP", None, ("rc",), [c.eq(s["rc"])], None),
        ]
        for state, nt, units, loads, nxt in steps:
            with m.State(state):
                if nt is not None:
                    m.d.comb += [s["nt_value"].eq(nt[0]), s["nt_scale"].eq(nt[1])]
                with m.If(ready(*units)):
                    m.d.sync += loads
                    if nxt is None:
                        m.d.comb += self.passes.done.eq(1)
                    m.next = nxt or "IDLE"
