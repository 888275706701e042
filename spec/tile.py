"""The integrated tile's contract: where each block answers on ``s_axi_control`` and where
each node sits on the Muon mesh.

The RTL (``hdl.tile``), the host runtime and the docs read these; nothing else spells
them. Every block keeps its own 16-bit register map (``BLOCK_WINDOW_BITS``); the tile's
control port decodes ``CONTROL_ADDR_BITS`` bits, the window number above the block's
offset. An access to a window no block answers gives SLVERR.
"""

from enum import IntEnum

__all__ = ["TileBlock", "BLOCK_WINDOW_BITS", "CONTROL_ADDR_BITS", "BASES", "base",
           "DEFAULT_NODES"]

BLOCK_WINDOW_BITS = 16          # each block's register map: 64 KiB of byte addresses
CONTROL_ADDR_BITS = 20          # the tile's s_axi_control: 16 windows


class TileBlock(IntEnum):
    """Window number of each register block on the tile's control port (its base is
    ``window << BLOCK_WINDOW_BITS``) and its bit in the tile's IRQ_SOURCE register."""
    TILE = 0          # the tile's own common registers (ID, CAPS, TIME, IRQ_SOURCE, ...)
    MA = 1
    VA = 2
    MC = 3
    MIGRATE = 4       # the cache-migrate engine
    MESH = 5          # the Muon mesh's registers (RBR reservations, TSP)
    SEQUENCER = 6     # reserved: the planner's command sequencer


BASES = {block.name.lower(): block << BLOCK_WINDOW_BITS for block in TileBlock}
"""``{"ma": 0x10000, ...}``: byte base of each block's registers."""


def base(name):
    """Byte base of block ``name`` ("tile", "ma", "va", "mc", "migrate", "mesh",
    "sequencer") on the tile's control port."""
    try:
        return BASES[name]
    except KeyError:
        raise KeyError(f"the tile has no block {name!r} (blocks: {', '.join(BASES)})") from None


DEFAULT_NODES = {"ma": (0, 0), "va": (1, 0), "migrate": (0, 1), "mc": (1, 1)}
"""Node (x, y) of each mesh endpoint on the default 2×2 mesh; a larger mesh (a parameter)
leaves the other nodes free (the sequencer's)."""
