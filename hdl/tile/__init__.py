"""The integrated tile: the network interfaces that carry the blocks' memory traffic over
the Muon mesh (:mod:`hdl.tile.packets`, :mod:`hdl.tile.ni`, :mod:`hdl.tile.memni`)."""
