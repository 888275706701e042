"""Register map of the Integrated tile (tile).

Generated from hdl/tile/tile.rdl by `v4hw regmap --update`; do not edit.

REGISTERS lists the registers in offset order, each a dict with the keys
  name         upper case; registers of an RDL array end in _<index> (TAT_LOGIC_0)
  offset       byte offset on s_axi_control
  access       the fields' access codes, '/'-joined when they differ
  read_strobe  the register block strobes the core when software reads it
  description  text
  fields       tuple of dicts: name, lsb, width, access, reset, encode,
               description; encode names the field's enumeration in ENUMS or is None
Field access codes: RW storage the core reads; RO driven by the core; RC driven
by the core, cleared by the core on the read strobe; W1C set by the core,
cleared by writing 1; WO a one-cycle pulse per written 1, reads as 0.
reset is None where the core drives the value.
ENUMS maps the name of each enumeration the fields use (a class of spec.codes) to
its members, a tuple of dicts: name, value, description.
"""

BLOCK = "tile"
SOURCE = "hdl/tile/tile.rdl"
ADDR_WIDTH = 16
DATA_WIDTH = 32

REGISTERS = (
    {
        "name": "ID",
        "offset": 0x0000,
        "access": "RO",
        "read_strobe": False,
        "description": "Which block answers and its version; constant for a given build.",
        "fields": (
            {"name": "VERSION", "lsb": 0, "width": 16, "access": "RO", "reset": None, "encode": None,
             "description": "Version of the block's register interface."},
            {"name": "BLOCK", "lsb": 16, "width": 16, "access": "RO", "reset": None, "encode": "BlockId",
             "description": ("Block identifier, a value of spec.codes.BlockId (0x4D41 for "
                             "the MA).")},
        ),
    },
    {
        "name": "CAPS",
        "offset": 0x0004,
        "access": "RO",
        "read_strobe": False,
        "description": "What the tile holds; constant for a given build.",
        "fields": (
            {"name": "WINDOWS", "lsb": 0, "width": 16, "access": "RO", "reset": None, "encode": None,
             "description": ("One bit per control window that answers (spec.tile.TileBlock: "
                             "bit 0 the tile, 1 MA, 2 VA, 3 MC, 4 MIGRATE, 5 MESH, 6 "
                             "SEQUENCER).")},
            {"name": "COLS", "lsb": 16, "width": 4, "access": "RO", "reset": None, "encode": None,
             "description": "The mesh's columns (16 reads as 0)."},
            {"name": "ROWS", "lsb": 20, "width": 4, "access": "RO", "reset": None, "encode": None,
             "description": "The mesh's rows (16 reads as 0)."},
            {"name": "BUS_BYTES", "lsb": 24, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "Width of m_axi_gmem in bytes."},
        ),
    },
    {
        "name": "STATUS",
        "offset": 0x0008,
        "access": "RO",
        "read_strobe": False,
        "description": ("Command state. An accepted START clears DONE, ERROR and "
                        "START_DROPPED and sets BUSY before the START write's response is "
                        "returned."),
        "fields": (
            {"name": "BUSY", "lsb": 0, "width": 1, "access": "RO", "reset": None, "encode": None,
             "description": "A command is running."},
            {"name": "DONE", "lsb": 1, "width": 1, "access": "RO", "reset": None, "encode": None,
             "description": "The last command completed successfully."},
            {"name": "ERROR", "lsb": 2, "width": 1, "access": "RO", "reset": None, "encode": None,
             "description": "The last command stopped with an error; ERROR holds the code."},
            {"name": "START_DROPPED", "lsb": 3, "width": 1, "access": "RO", "reset": None, "encode": None,
             "description": ("A START arrived while BUSY and was ignored; cleared by the "
                             "next accepted START.")},
        ),
    },
    {
        "name": "ERROR",
        "offset": 0x000C,
        "access": "RO",
        "read_strobe": False,
        "description": ("Code of the error that stopped the last command; cleared by the "
                        "next accepted START."),
        "fields": (
            {"name": "CODE", "lsb": 0, "width": 8, "access": "RO", "reset": None, "encode": "ErrorCode",
             "description": ("A value of spec.codes.ErrorCode (0 NONE, 1 BAD_COMMAND, 2 "
                             "MISALIGNED, 3 TAT_MISS, 4 BAD_TAT, 5 AXI_READ_ERROR, 6 "
                             "AXI_WRITE_ERROR; blocks add codes from 16 up).")},
        ),
    },
    {
        "name": "ERR_ADDR",
        "offset": 0x0010,
        "access": "RO",
        "read_strobe": False,
        "description": ("Logical address of the first byte of the access that failed "
                        "(TAT_MISS, AXI errors), or the offending address register's value "
                        "(MISALIGNED)."),
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Byte address."},
        ),
    },
    {
        "name": "IRQ_ENABLE",
        "offset": 0x0014,
        "access": "RW",
        "read_strobe": False,
        "description": "interrupt = OR of (IRQ_STATUS & IRQ_ENABLE).",
        "fields": (
            {"name": "DONE", "lsb": 0, "width": 1, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Raise the interrupt when a command completes."},
            {"name": "ERROR", "lsb": 1, "width": 1, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Raise the interrupt when a command stops with an error."},
        ),
    },
    {
        "name": "IRQ_STATUS",
        "offset": 0x0018,
        "access": "W1C",
        "read_strobe": False,
        "description": ("Latched events, set by the core whatever IRQ_ENABLE says; writing 1 "
                        "to a bit clears it. A set in the same cycle as a clear wins."),
        "fields": (
            {"name": "DONE", "lsb": 0, "width": 1, "access": "W1C", "reset": 0x0, "encode": None,
             "description": "A command completed."},
            {"name": "ERROR", "lsb": 1, "width": 1, "access": "W1C", "reset": 0x0, "encode": None,
             "description": "A command stopped with an error."},
        ),
    },
    {
        "name": "NODES",
        "offset": 0x0020,
        "access": "RO",
        "read_strobe": False,
        "description": ("The Muon node (x, y) of each block: bits 3:0 x, 7:4 y of each byte. "
                        "The command sequencer shares the cache-migrate engine's node (and "
                        "its TRAFFIC_CLASS)."),
        "fields": (
            {"name": "MA", "lsb": 0, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "The MA's node."},
            {"name": "VA", "lsb": 8, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "The VA's node."},
            {"name": "MIGRATE", "lsb": 16, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "The cache-migrate engine's node."},
            {"name": "MC", "lsb": 24, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "The MC's node (its memory NI)."},
        ),
    },
    {
        "name": "PARAMS",
        "offset": 0x0024,
        "access": "RO",
        "read_strobe": False,
        "description": ("The blocks' main build parameters (each block's own CAPS has them "
                        "all)."),
        "fields": (
            {"name": "MA_P", "lsb": 0, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "MA array size P."},
            {"name": "VA_L", "lsb": 8, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "VA lanes L."},
            {"name": "VA_FN_LANES", "lsb": 16, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "VA function lanes FN_LANES."},
            {"name": "MC_CHANNELS", "lsb": 24, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "MC client channels."},
        ),
    },
    {
        "name": "NI",
        "offset": 0x0028,
        "access": "RO",
        "read_strobe": False,
        "description": "The memory packets' flit data width and the NIs' request credits.",
        "fields": (
            {"name": "FLIT_BITS", "lsb": 0, "width": 16, "access": "RO", "reset": None, "encode": None,
             "description": "Flit data bits."},
            {"name": "CREDITS", "lsb": 16, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": ("Flit credits each requester NI holds of the memory NI's input "
                             "buffer.")},
        ),
    },
    {
        "name": "IRQ_SOURCE",
        "offset": 0x0030,
        "access": "RO",
        "read_strobe": False,
        "description": ("Which blocks hold their interrupt line high now: bit w is window "
                        "w's block (spec.tile.TileBlock: bit 1 MA, 2 VA, 3 MC, 4 MIGRATE, 5 "
                        "MESH, 6 SEQUENCER). The tile's interrupt is the OR of these bits; "
                        "each block's IRQ_STATUS clears its own."),
        "fields": (
            {"name": "MA", "lsb": 1, "width": 1, "access": "RO", "reset": None, "encode": None,
             "description": "The MA's interrupt."},
            {"name": "VA", "lsb": 2, "width": 1, "access": "RO", "reset": None, "encode": None,
             "description": "The VA's interrupt."},
            {"name": "MC", "lsb": 3, "width": 1, "access": "RO", "reset": None, "encode": None,
             "description": "The MC's interrupt."},
            {"name": "MIGRATE", "lsb": 4, "width": 1, "access": "RO", "reset": None, "encode": None,
             "description": "The cache-migrate engine's interrupt."},
            {"name": "MESH", "lsb": 5, "width": 1, "access": "RO", "reset": None, "encode": None,
             "description": "The mesh's interrupt (a reservation request answered)."},
            {"name": "SEQUENCER", "lsb": 6, "width": 1, "access": "RO", "reset": None, "encode": None,
             "description": "The command sequencer's interrupt (a run ended)."},
        ),
    },
    {
        "name": "TRAFFIC_CLASS",
        "offset": 0x0034,
        "access": "RW",
        "read_strobe": False,
        "description": ("The class (spec.codes.TrafficClass: 7 decode, 5 prefill, 3 "
                        "cache-migrate) of each requester node's memory packets on the mesh "
                        "and of its requests at the MC's class arbiter. Write it while the "
                        "node's block is idle."),
        "fields": (
            {"name": "MA", "lsb": 0, "width": 3, "access": "RW", "reset": 0x7, "encode": None,
             "description": "The MA's class."},
            {"name": "VA", "lsb": 4, "width": 3, "access": "RW", "reset": 0x7, "encode": None,
             "description": "The VA's class."},
            {"name": "MIGRATE", "lsb": 8, "width": 3, "access": "RW", "reset": 0x3, "encode": None,
             "description": "The cache-migrate engine's class."},
        ),
    },
    {
        "name": "TIME_LO",
        "offset": 0x0040,
        "access": "RO",
        "read_strobe": True,
        "description": ("Low word of the 64-bit free-running cycle counter (0 after reset). "
                        "Reading it latches the high word into TIME_HI, so TIME_LO then "
                        "TIME_HI is a consistent 64-bit value."),
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Timebase bits 31:0, in cycles."},
        ),
    },
    {
        "name": "TIME_HI",
        "offset": 0x0044,
        "access": "RO",
        "read_strobe": False,
        "description": "High word of the timebase as latched by the last TIME_LO read.",
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Timebase bits 63:32, in cycles."},
        ),
    },
    {
        "name": "RESERVE",
        "offset": 0x0060,
        "access": "RW",
        "read_strobe": False,
        "description": ("Bit c set: a command of the MA or the VA whose TRAFFIC_CLASS is c "
                        "runs reserved (docs/tile/README.md, Reserved commands): from its "
                        "START every other requester issues no new burst until it ends, its "
                        "own bursts wait RSV_GUARD cycles while the background in flight "
                        "drains, and the MC's prefetch buffer is off. Its cycles then do not "
                        "depend on the background traffic. The cache-migrate engine is never "
                        "reserved. Write it while the blocks are idle."),
        "fields": (
            {"name": "CLASSES", "lsb": 0, "width": 8, "access": "RW", "reset": 0x0, "encode": None,
             "description": ("One bit per class (spec.codes.TrafficClass: 7 decode, 5 "
                             "prefill, 3 cache-migrate).")},
        ),
    },
    {
        "name": "RSV_GUARD",
        "offset": 0x0064,
        "access": "RW",
        "read_strobe": False,
        "description": ("Cycles a reserved command's bursts wait after its START (always all "
                        "of them, so the command starts alike whatever was in flight); at "
                        "least RSV_DRAIN_MAX for the background the tile runs. 0: no guard."),
        "fields": (
            {"name": "CYCLES", "lsb": 0, "width": 16, "access": "RW", "reset": 0xA0, "encode": None,
             "description": "Cycles."},
        ),
    },
    {
        "name": "RSV_STARTS",
        "offset": 0x0068,
        "access": "RO",
        "read_strobe": False,
        "description": "Commands started reserved since reset, wrapping at 2^32.",
        "fields": (
            {"name": "COUNT", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Count."},
        ),
    },
    {
        "name": "RSV_LATE",
        "offset": 0x006C,
        "access": "RO",
        "read_strobe": False,
        "description": ("Guards of reserved commands that ended before the memory path had "
                        "drained (a burst of any requester unanswered, credits still owed to "
                        "one by the memory NI, or the MC busy): the START's guard and, with "
                        "RSV_SHARE, every guard between two phases. RSV_GUARD is then too "
                        "short, and the command may see the background (or the background "
                        "its bursts). Wraps at 2^32."),
        "fields": (
            {"name": "COUNT", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Count."},
        ),
    },
    {
        "name": "RSV_DRAIN_MAX",
        "offset": 0x0070,
        "access": "RO",
        "read_strobe": False,
        "description": ("The most cycles from the start of a reserved command's guard (its "
                        "START, or with RSV_SHARE a phase's end) until the memory path had "
                        "drained, since reset (saturating): the least RSV_GUARD that would "
                        "have been enough."),
        "fields": (
            {"name": "CYCLES", "lsb": 0, "width": 16, "access": "RO", "reset": None, "encode": None,
             "description": "Cycles."},
        ),
    },
    {
        "name": "RSV_SHARE",
        "offset": 0x0074,
        "access": "RW",
        "read_strobe": False,
        "description": ("Time-division sharing inside a reserved command "
                        "(docs/tile/README.md, Reserved commands). BACKGROUND 0 (reset): no "
                        "sharing, the command owns the memory path from its guard to its "
                        "end. Otherwise its time, counted from its START, repeats: RSV_GUARD "
                        "cycles (the background in flight drains), RESERVED cycles in which "
                        "only it issues new bursts, RSV_GUARD cycles in which nobody does "
                        "(its own bursts complete), BACKGROUND cycles in which only the "
                        "other requesters do, until it ends. RESERVED below 1 reads as 1 "
                        "while BACKGROUND is not 0, so a command always progresses. Taken at "
                        "each START: write it while the blocks are idle."),
        "fields": (
            {"name": "RESERVED", "lsb": 0, "width": 16, "access": "RW", "reset": 0x0, "encode": None,
             "description": ("Cycles of each RESERVED phase (1..65535; 0 reads as 1 while "
                             "sharing).")},
            {"name": "BACKGROUND", "lsb": 16, "width": 16, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Cycles of each BACKGROUND phase (0: no sharing)."},
        ),
    },
)

ENUMS = {
    "ErrorCode": (
        {"name": "NONE", "value": 0x0, "description": ""},
        {"name": "BAD_COMMAND", "value": 0x1, "description":
         "shape, length, opcode or field out of range"},
        {"name": "MISALIGNED", "value": 0x2, "description":
         "an address or stride not a multiple of its element size"},
        {"name": "TAT_MISS", "value": 0x3, "description":
         "an access that no valid TAT entry covers"},
        {"name": "BAD_TAT", "value": 0x4, "description":
         "a valid entry whose base is not aligned to its region, or SIZE > 19"},
        {"name": "AXI_READ_ERROR", "value": 0x5, "description":
         "SLVERR / DECERR on a read"},
        {"name": "AXI_WRITE_ERROR", "value": 0x6, "description":
         "SLVERR / DECERR on a write"},
    ),
    "BlockId": (
        {"name": "MA", "value": 0x4d41, "description": "\"MA\""},
        {"name": "VA", "value": 0x5641, "description": "\"VA\""},
        {"name": "MC", "value": 0x4d43, "description": "\"MC\""},
        {"name": "MUON", "value": 0x4d55, "description": "\"MU\""},
        {"name": "TILE", "value": 0x5449, "description":
         "\"TI\": the integrated tile's own registers"},
        {"name": "MIGRATE", "value": 0x434d, "description":
         "\"CM\": the tile's cache-migrate engine"},
        {"name": "SEQUENCER", "value": 0x5351, "description":
         "\"SQ\": the tile's command sequencer"},
    ),
}
