"""Register map of the Muon network-on-chip (muon).

Generated from hdl/muon/muon.rdl by `v4hw regmap --update`; do not edit.

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

BLOCK = "muon"
SOURCE = "hdl/muon/muon.rdl"
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
        "description": "Build parameters of the Muon mesh; constant for a given build.",
        "fields": (
            {"name": "COLS", "lsb": 0, "width": 4, "access": "RO", "reset": None, "encode": None,
             "description": "Mesh columns (16 reads as 0)."},
            {"name": "ROWS", "lsb": 4, "width": 4, "access": "RO", "reset": None, "encode": None,
             "description": "Mesh rows (16 reads as 0)."},
            {"name": "SLOTS", "lsb": 8, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "Reservation slots of the RBR arbiter."},
            {"name": "BE_DEPTH", "lsb": 16, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "Best-effort virtual channel buffer depth, in flits."},
            {"name": "RSV_DEPTH", "lsb": 24, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "Reserved virtual channel buffer depth, in flits."},
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
        "name": "MAX_AGE",
        "offset": 0x0020,
        "access": "RW",
        "read_strobe": False,
        "description": ("A best-effort packet whose head reaches its destination router more "
                        "than MAX_AGE cycles after its injection time stamp is dropped there "
                        "and counted in DROPPED_<class>. Packets of a granted reservation "
                        "are never dropped."),
        "fields": (
            {"name": "CYCLES", "lsb": 0, "width": 32, "access": "RW", "reset": 0x64, "encode": None,
             "description": "Maximum age in cycles."},
        ),
    },
    {
        "name": "RSV_LEAD",
        "offset": 0x0024,
        "access": "RO",
        "read_strobe": False,
        "description": ("A reservation can start no earlier than this many cycles after its "
                        "request (longer than the longest decision)."),
        "fields": (
            {"name": "CYCLES", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Cycles."},
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
        "name": "DROPPED_0",
        "offset": 0x0100,
        "access": "RO",
        "read_strobe": False,
        "description": ("TSP drops of packets of class <index> (spec.codes.TrafficClass: 7 "
                        "decode, 5 prefill, 3 cache-migrate)."),
        "fields": (
            {"name": "COUNT", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Number of events since reset, wrapping at 2^32."},
        ),
    },
    {
        "name": "DROPPED_1",
        "offset": 0x0104,
        "access": "RO",
        "read_strobe": False,
        "description": ("TSP drops of packets of class <index> (spec.codes.TrafficClass: 7 "
                        "decode, 5 prefill, 3 cache-migrate)."),
        "fields": (
            {"name": "COUNT", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Number of events since reset, wrapping at 2^32."},
        ),
    },
    {
        "name": "DROPPED_2",
        "offset": 0x0108,
        "access": "RO",
        "read_strobe": False,
        "description": ("TSP drops of packets of class <index> (spec.codes.TrafficClass: 7 "
                        "decode, 5 prefill, 3 cache-migrate)."),
        "fields": (
            {"name": "COUNT", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Number of events since reset, wrapping at 2^32."},
        ),
    },
    {
        "name": "DROPPED_3",
        "offset": 0x010C,
        "access": "RO",
        "read_strobe": False,
        "description": ("TSP drops of packets of class <index> (spec.codes.TrafficClass: 7 "
                        "decode, 5 prefill, 3 cache-migrate)."),
        "fields": (
            {"name": "COUNT", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Number of events since reset, wrapping at 2^32."},
        ),
    },
    {
        "name": "DROPPED_4",
        "offset": 0x0110,
        "access": "RO",
        "read_strobe": False,
        "description": ("TSP drops of packets of class <index> (spec.codes.TrafficClass: 7 "
                        "decode, 5 prefill, 3 cache-migrate)."),
        "fields": (
            {"name": "COUNT", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Number of events since reset, wrapping at 2^32."},
        ),
    },
    {
        "name": "DROPPED_5",
        "offset": 0x0114,
        "access": "RO",
        "read_strobe": False,
        "description": ("TSP drops of packets of class <index> (spec.codes.TrafficClass: 7 "
                        "decode, 5 prefill, 3 cache-migrate)."),
        "fields": (
            {"name": "COUNT", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Number of events since reset, wrapping at 2^32."},
        ),
    },
    {
        "name": "DROPPED_6",
        "offset": 0x0118,
        "access": "RO",
        "read_strobe": False,
        "description": ("TSP drops of packets of class <index> (spec.codes.TrafficClass: 7 "
                        "decode, 5 prefill, 3 cache-migrate)."),
        "fields": (
            {"name": "COUNT", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Number of events since reset, wrapping at 2^32."},
        ),
    },
    {
        "name": "DROPPED_7",
        "offset": 0x011C,
        "access": "RO",
        "read_strobe": False,
        "description": ("TSP drops of packets of class <index> (spec.codes.TrafficClass: 7 "
                        "decode, 5 prefill, 3 cache-migrate)."),
        "fields": (
            {"name": "COUNT", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Number of events since reset, wrapping at 2^32."},
        ),
    },
    {
        "name": "BAD_DST",
        "offset": 0x0120,
        "access": "RO",
        "read_strobe": False,
        "description": ("Packets injected with a destination outside the mesh, discarded at "
                        "their source router."),
        "fields": (
            {"name": "COUNT", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Number of events since reset, wrapping at 2^32."},
        ),
    },
    {
        "name": "RSV_SRC",
        "offset": 0x0200,
        "access": "RW",
        "read_strobe": False,
        "description": "Source router of the requested reservation.",
        "fields": (
            {"name": "X", "lsb": 0, "width": 4, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Column, 0 at the west edge."},
            {"name": "Y", "lsb": 4, "width": 4, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Row, 0 at the north edge."},
        ),
    },
    {
        "name": "RSV_DST",
        "offset": 0x0204,
        "access": "RW",
        "read_strobe": False,
        "description": "Destination router of the requested reservation.",
        "fields": (
            {"name": "X", "lsb": 0, "width": 4, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Column, 0 at the west edge."},
            {"name": "Y", "lsb": 4, "width": 4, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Row, 0 at the north edge."},
        ),
    },
    {
        "name": "RSV_START_LO",
        "offset": 0x0208,
        "access": "RW",
        "read_strobe": False,
        "description": "First cycle the flow injects, bits 31:0 (timebase).",
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Value bits, in cycles."},
        ),
    },
    {
        "name": "RSV_START_HI",
        "offset": 0x020C,
        "access": "RW",
        "read_strobe": False,
        "description": "First cycle the flow injects, bits 63:32.",
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Value bits, in cycles."},
        ),
    },
    {
        "name": "RSV_DURATION",
        "offset": 0x0210,
        "access": "RW",
        "read_strobe": False,
        "description": "Length of the window on each link, in cycles, 1..65535.",
        "fields": (
            {"name": "CYCLES", "lsb": 0, "width": 16, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Cycles; 0 is refused with ERROR = BAD_COMMAND."},
        ),
    },
    {
        "name": "RSV_BANDWIDTH",
        "offset": 0x0214,
        "access": "RW",
        "read_strobe": False,
        "description": ("Flits the flow sends in its window (the window holds the links "
                        "alone, so at most one flit per cycle)."),
        "fields": (
            {"name": "FLITS", "lsb": 0, "width": 16, "access": "RW", "reset": 0x0, "encode": None,
             "description": ("Flits, 1..RSV_DURATION; other values are refused with ERROR = "
                             "BAD_COMMAND.")},
        ),
    },
    {
        "name": "REQUEST",
        "offset": 0x0218,
        "access": "WO",
        "read_strobe": False,
        "description": ("Writing 1 submits the reservation described by RSV_*. Ignored while "
                        "BUSY."),
        "fields": (
            {"name": "REQUEST", "lsb": 0, "width": 1, "access": "WO", "reset": 0x0, "encode": None,
             "description": "Write 1 to request."},
        ),
    },
    {
        "name": "RSV_RESULT",
        "offset": 0x021C,
        "access": "RO",
        "read_strobe": False,
        "description": "Answer to the last request (valid when STATUS.DONE).",
        "fields": (
            {"name": "GRANTED", "lsb": 0, "width": 1, "access": "RO", "reset": None, "encode": None,
             "description": "1: granted with ID."},
            {"name": "FULL", "lsb": 1, "width": 1, "access": "RO", "reset": None, "encode": None,
             "description": ("1: refused because every slot was taken; RSV_RETRY is the "
                             "cycle the first slot frees.")},
            {"name": "ID", "lsb": 8, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": ("Reservation id (slot in the low bits, a generation count "
                             "above).")},
        ),
    },
    {
        "name": "RSV_RETRY_LO",
        "offset": 0x0220,
        "access": "RO",
        "read_strobe": False,
        "description": ("retry_after_cycle, bits 31:0: the earliest start at which every "
                        "shifted window is free (0 when granted)."),
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Value bits, in cycles."},
        ),
    },
    {
        "name": "RSV_RETRY_HI",
        "offset": 0x0224,
        "access": "RO",
        "read_strobe": False,
        "description": "retry_after_cycle, bits 63:32.",
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Value bits, in cycles."},
        ),
    },
    {
        "name": "RSV_REQ_CYCLE_LO",
        "offset": 0x0228,
        "access": "RO",
        "read_strobe": False,
        "description": "rbr_req_cycle, bits 31:0: timebase when the last request was taken.",
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Value bits, in cycles."},
        ),
    },
    {
        "name": "RSV_REQ_CYCLE_HI",
        "offset": 0x022C,
        "access": "RO",
        "read_strobe": False,
        "description": "rbr_req_cycle, bits 63:32.",
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Value bits, in cycles."},
        ),
    },
    {
        "name": "RSV_GRANT_CYCLE_LO",
        "offset": 0x0230,
        "access": "RO",
        "read_strobe": False,
        "description": ("rbr_grant_cycle, bits 31:0: timebase when the last answer was given "
                        "(grant or retry)."),
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Value bits, in cycles."},
        ),
    },
    {
        "name": "RSV_GRANT_CYCLE_HI",
        "offset": 0x0234,
        "access": "RO",
        "read_strobe": False,
        "description": "rbr_grant_cycle, bits 63:32.",
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RO", "reset": None, "encode": None,
             "description": "Value bits, in cycles."},
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
