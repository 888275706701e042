"""Register map of the Command sequencer (sequencer).

Generated from hdl/tile/sequencer.rdl by `v4hw regmap --update`; do not edit.

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

BLOCK = "sequencer"
SOURCE = "hdl/tile/sequencer.rdl"
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
        "description": "Build parameters of the sequencer; constant for a given build.",
        "fields": (
            {"name": "TARGETS", "lsb": 0, "width": 16, "access": "RO", "reset": None, "encode": None,
             "description": ("One bit per control window an entry may target "
                             "(spec.tile.TileBlock).")},
            {"name": "BUS_BYTES", "lsb": 16, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "Width of the memory bus in bytes."},
            {"name": "MAX_DEPS", "lsb": 24, "width": 4, "access": "RO", "reset": None, "encode": None,
             "description": "Dependencies an entry may name."},
            {"name": "FORMAT", "lsb": 28, "width": 4, "access": "RO", "reset": None, "encode": None,
             "description": "Version of the command list's format."},
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
        "name": "LIST_LO",
        "offset": 0x0020,
        "access": "RW",
        "read_strobe": False,
        "description": ("The command list's header: a multiple of the bus width in bytes "
                        "(else MISALIGNED at START)."),
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Byte address bits 31:0."},
        ),
    },
    {
        "name": "LIST_HI",
        "offset": 0x0024,
        "access": "RW",
        "read_strobe": False,
        "description": "The command list, address bits 63:32.",
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": ("Byte address bits 63:32; an address at or past 2^48 is refused "
                             "at START with ERROR = BAD_COMMAND.")},
        ),
    },
    {
        "name": "COUNT",
        "offset": 0x0028,
        "access": "RW",
        "read_strobe": False,
        "description": ("Entries of the list to run (sampled at START): at most the header's "
                        "count (else the run fails with BAD_COMMAND); 0 ends the run at "
                        "once."),
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 16, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Entries."},
        ),
    },
    {
        "name": "LOG_LO",
        "offset": 0x002C,
        "access": "RW",
        "read_strobe": False,
        "description": ("The completion log: record i at LOG + 32 i; a multiple of 32 bytes "
                        "(else MISALIGNED at START)."),
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Byte address bits 31:0."},
        ),
    },
    {
        "name": "LOG_HI",
        "offset": 0x0030,
        "access": "RW",
        "read_strobe": False,
        "description": "The completion log, address bits 63:32.",
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": ("Byte address bits 63:32; an address at or past 2^48 is refused "
                             "at START with ERROR = BAD_COMMAND.")},
        ),
    },
    {
        "name": "MODE",
        "offset": 0x0034,
        "access": "RW",
        "read_strobe": False,
        "description": "What a late dependency does (sampled at START).",
        "fields": (
            {"name": "STOP_ON_LATE", "lsb": 0, "width": 1, "access": "RW", "reset": 0x0, "encode": None,
             "description": ("0: an entry whose dependencies have not ended at its planned "
                             "cycle waits for them and is recorded late; 1: the run stops "
                             "there with ERROR = LATE_DEPENDENCY (the commands launched are "
                             "waited for and logged first).")},
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
        "name": "LAUNCHED",
        "offset": 0x0100,
        "access": "RO",
        "read_strobe": False,
        "description": "Entries launched since the run's START.",
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Entries, since the run's START."},
        ),
    },
    {
        "name": "COMPLETED",
        "offset": 0x0104,
        "access": "RO",
        "read_strobe": False,
        "description": "Entries whose completion record is written, since the run's START.",
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Entries, since the run's START."},
        ),
    },
    {
        "name": "LATE",
        "offset": 0x0108,
        "access": "RO",
        "read_strobe": False,
        "description": "Entries launched after their planned cycle, since the run's START.",
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Entries, since the run's START."},
        ),
    },
    {
        "name": "T0_LO",
        "offset": 0x0110,
        "access": "RO",
        "read_strobe": False,
        "description": ("The timebase of the run's planned cycle 0 (the cycle after START is "
                        "performed), low word."),
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Cycles, bits 31:0."},
        ),
    },
    {
        "name": "T0_HI",
        "offset": 0x0114,
        "access": "RO",
        "read_strobe": False,
        "description": "The run's T0, high word.",
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Cycles, bits 63:32."},
        ),
    },
    {
        "name": "START",
        "offset": 0x200C,
        "access": "WO",
        "read_strobe": False,
        "description": ("Writing 1 starts a run of LIST, COUNT, LOG and MODE (sampled at "
                        "START). Ignored while BUSY (STATUS.START_DROPPED is set instead). "
                        "Reads return 0."),
        "fields": (
            {"name": "START", "lsb": 0, "width": 1, "access": "WO", "reset": 0x0, "encode": None,
             "description": "Write 1 to start a run."},
        ),
    },
    {
        "name": "CTR_LO",
        "offset": 0x2010,
        "access": "RC",
        "read_strobe": True,
        "description": ("Timebase value when the run ended (its last record written), low "
                        "word; 0 until a run completes. Reading it latches the high word "
                        "into CTR_HI and clears the CTR."),
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RC", "reset": None, "encode": None,
             "description": "Completion timestamp bits 31:0, in cycles."},
        ),
    },
    {
        "name": "CTR_HI",
        "offset": 0x2014,
        "access": "RO",
        "read_strobe": False,
        "description": ("High word of the completion timestamp as latched by the last CTR_LO "
                        "read."),
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Completion timestamp bits 63:32, in cycles."},
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
