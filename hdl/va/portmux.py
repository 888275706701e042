"""The VA core's memory port, shared by its paths (:class:`PortMux`)."""

from amaranth.hdl import Module, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.common.memport import (
    BurstLayout,
    MemPortSignature,
    ReadDataLayout,
    WriteDataLayout,
    WriteRespLayout,
)

__all__ = ["ReadPortSignature", "WritePortSignature", "PathFlags", "PortMux"]


class ReadPortSignature(wiring.Signature):
    """A unit's read side of :class:`~hdl.common.memport.MemPortSignature` (its rules 2, 3),
    from the unit's side: ``rd_req`` out, ``rd_resp`` in."""

    def __init__(self, data_width):
        super().__init__({
            "rd_req": Out(stream.Signature(BurstLayout())),
            "rd_resp": In(stream.Signature(ReadDataLayout(data_width))),
        })


class WritePortSignature(wiring.Signature):
    """A unit's write side of :class:`~hdl.common.memport.MemPortSignature` (its rules 4,
    5), from the unit's side: ``wr_req`` and ``wr_data`` out, ``wr_resp`` in."""

    def __init__(self, data_width):
        super().__init__({
            "wr_req": Out(stream.Signature(BurstLayout())),
            "wr_data": Out(stream.Signature(WriteDataLayout(data_width))),
            "wr_resp": In(stream.Signature(WriteRespLayout())),
        })


class PathFlags(data.StructLayout):
    """The running command's path (:class:`spec.va.VaUnit`): at most one flag high; none
    is the lane engine's."""

    def __init__(self):
        super().__init__({"indexed": 1, "scatter": 1, "gather": 1, "rows": 1, "ext": 1})


class PortMux(wiring.Component):
    """The running command's path owns the memory port ``mem`` and feeds the stream
    writer's input ``to_writer``. ``path`` holds still for the whole command.

    =========== ================= ====================== ==================
    ``path``    reads             writes                 ``to_writer``
    =========== ================= ====================== ==================
    indexed     ``indexed``       ``indexed``            (nothing)
    gather      ``gather``        ``writer``             ``from_gather``
    rows, ext   ``reader``        ``writer``             ``from_rows`` / ``from_ext``
    scatter     ``reader``        ``scatter``            (``from_lanes``, unused)
    none        ``reader``        ``writer``             ``from_lanes``
    =========== ================= ====================== ==================

    A write response goes to the unit that owns the writes; ``mem.wr_resp`` is always
    ready (every unit takes its responses at once).
    """

    def __init__(self, data_width):
        self.data_width = data_width
        word = stream.Signature(data_width)
        super().__init__({
            "path": In(PathFlags()),
            "mem": Out(MemPortSignature(data_width)),
            "indexed": In(MemPortSignature(data_width)),
            "reader": In(ReadPortSignature(data_width)),
            "gather": In(ReadPortSignature(data_width)),
            "scatter": In(WritePortSignature(data_width)),
            "writer": In(WritePortSignature(data_width)),
            "from_gather": In(word),
            "from_rows": In(word),
            "from_ext": In(word),
            "from_lanes": In(word),
            "to_writer": Out(word),
        })

    def elaborate(self, platform):
        m = Module()
        flip = wiring.flipped
        mem, path = self.mem, self.path
        indexed, scatter, gather, ext = path.indexed, path.scatter, path.gather, path.ext
        for name in ("wr_req", "wr_data"):
            port = flip(getattr(mem, name))
            with m.If(indexed):
                wiring.connect(m, flip(getattr(self.indexed, name)), port)
            with m.Elif(scatter):
                wiring.connect(m, flip(getattr(self.scatter, name)), port)
            with m.Else():
                wiring.connect(m, flip(getattr(self.writer, name)), port)
        for unit, mine in ((self.writer, ~scatter & ~indexed), (self.scatter, scatter),
                           (self.indexed, indexed)):
            m.d.comb += [unit.wr_resp.payload.eq(mem.wr_resp.payload),
                         unit.wr_resp.valid.eq(mem.wr_resp.valid & mine)]
        m.d.comb += mem.wr_resp.ready.eq(1)
        rd_req, rd_resp = flip(mem.rd_req), flip(mem.rd_resp)
        to_writer = flip(self.to_writer)
        rows_o, ext_o = self.from_rows, self.from_ext
        with m.If(indexed):
            wiring.connect(m, flip(self.indexed.rd_req), rd_req)
            wiring.connect(m, rd_resp, flip(self.indexed.rd_resp))
        with m.Elif(gather):
            wiring.connect(m, flip(self.gather.rd_req), rd_req)
            wiring.connect(m, rd_resp, flip(self.gather.rd_resp))
            wiring.connect(m, flip(self.from_gather), to_writer)
        with m.Elif(path.rows | ext):
            wiring.connect(m, flip(self.reader.rd_req), rd_req)
            wiring.connect(m, rd_resp, flip(self.reader.rd_resp))
            m.d.comb += [self.to_writer.payload.eq(Mux(ext, ext_o.payload, rows_o.payload)),
                         self.to_writer.valid.eq(Mux(ext, ext_o.valid, rows_o.valid)),
                         rows_o.ready.eq(self.to_writer.ready & ~ext),
                         ext_o.ready.eq(self.to_writer.ready & ext)]
        with m.Else():
            wiring.connect(m, flip(self.reader.rd_req), rd_req)
            wiring.connect(m, rd_resp, flip(self.reader.rd_resp))
            wiring.connect(m, flip(self.from_lanes), to_writer)
        return m
