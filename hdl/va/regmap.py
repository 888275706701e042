"""Register map of the Vector accelerator (va).

Generated from hdl/va/va.rdl by `v4hw regmap --update`; do not edit.

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

BLOCK = "va"
SOURCE = "hdl/va/va.rdl"
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
        "description": "Build parameters of the VA; constant for a given build.",
        "fields": (
            {"name": "L", "lsb": 0, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "Lanes (a power of two, 4..64)."},
            {"name": "BUS_BYTES", "lsb": 8, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "Width of m_axi_gmem in bytes (8, 16, 32 or 64)."},
            {"name": "FN_LANES", "lsb": 16, "width": 8, "access": "RO", "reset": None, "encode": None,
             "description": "Elements a cycle through the function units (a power of two)."},
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
        "name": "OPCODE",
        "offset": 0x0020,
        "access": "RW",
        "read_strobe": False,
        "description": "The command START runs; sampled at START.",
        "fields": (
            {"name": "OP", "lsb": 0, "width": 8, "access": "RW", "reset": 0x0, "encode": "VaOpcode",
             "description": ("A value of spec.codes.VaOpcode. A value the VA does not run is "
                             "refused at START with ERROR = BAD_COMMAND.")},
            {"name": "ESIZE", "lsb": 8, "width": 2, "access": "RW", "reset": 0x1, "encode": None,
             "description": ("Gather/scatter element size: log2 of bytes (0: 1, 1: 2, 2: 4 "
                             "bytes); 3 is refused with BAD_COMMAND.")},
            {"name": "SPLIT_HALF", "lsb": 12, "width": 1, "access": "RW", "reset": 0x0, "encode": None,
             "description": ("RoPE pairs: 0 adjacent (x[2i], x[2i+1]), 1 split-half (x[i], "
                             "x[i+n/2]).")},
        ),
    },
    {
        "name": "LENGTH",
        "offset": 0x0024,
        "access": "RW",
        "read_strobe": False,
        "description": ("Number of elements, 1..65536. The field is 32 bits wide so that an "
                        "out-of-range value can be written; START refuses it with "
                        "BAD_COMMAND."),
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Elements."},
        ),
    },
    {
        "name": "SRC_LO",
        "offset": 0x0028,
        "access": "RW",
        "read_strobe": False,
        "description": ("First operand: x; the base of the gathers; the dense source of the "
                        "scatters."),
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Byte address bits 31:0."},
        ),
    },
    {
        "name": "SRC_HI",
        "offset": 0x002C,
        "access": "RW",
        "read_strobe": False,
        "description": "First operand, address bits 47:32.",
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 16, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Byte address bits 47:32."},
        ),
    },
    {
        "name": "SRC2_LO",
        "offset": 0x0030,
        "access": "RW",
        "read_strobe": False,
        "description": ("Second operand: y (ADD, MUL), gamma (RMSNORM), cos (ROPE), the "
                        "int32 index vector (indexed forms), the CSR row pointers, the bf16 "
                        "scalar (MUL_MEM, ADD_MEM), the binary32 row scale (DEQUANTIZE_MEM)."),
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Byte address bits 31:0."},
        ),
    },
    {
        "name": "SRC2_HI",
        "offset": 0x0034,
        "access": "RW",
        "read_strobe": False,
        "description": "Second operand, address bits 47:32.",
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 16, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Byte address bits 47:32."},
        ),
    },
    {
        "name": "SRC3_LO",
        "offset": 0x0038,
        "access": "RW",
        "read_strobe": False,
        "description": "Third operand: sin (ROPE), the CSR column indices.",
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Byte address bits 31:0."},
        ),
    },
    {
        "name": "SRC3_HI",
        "offset": 0x003C,
        "access": "RW",
        "read_strobe": False,
        "description": "Third operand, address bits 47:32.",
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 16, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Byte address bits 47:32."},
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
        "name": "DST_LO",
        "offset": 0x0048,
        "access": "RW",
        "read_strobe": False,
        "description": "Result (values).",
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Byte address bits 31:0."},
        ),
    },
    {
        "name": "DST_HI",
        "offset": 0x004C,
        "access": "RW",
        "read_strobe": False,
        "description": "Result, address bits 47:32.",
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 16, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Byte address bits 47:32."},
        ),
    },
    {
        "name": "DST2_LO",
        "offset": 0x0050,
        "access": "RW",
        "read_strobe": False,
        "description": ("Second result: the binary32 scale (QUANTIZE), the int32 indices "
                        "(TOPK, TOPK_WIDE)."),
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Byte address bits 31:0."},
        ),
    },
    {
        "name": "DST2_HI",
        "offset": 0x0054,
        "access": "RW",
        "read_strobe": False,
        "description": "Second result, address bits 47:32.",
        "fields": (
            {"name": "ADDR", "lsb": 0, "width": 16, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Byte address bits 47:32."},
        ),
    },
    {
        "name": "STRIDE",
        "offset": 0x0058,
        "access": "RW",
        "read_strobe": False,
        "description": ("Byte distance between strided or indexed elements (any value that "
                        "is a multiple of the element size; 0 repeats one element)."),
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Value."},
        ),
    },
    {
        "name": "SCALAR",
        "offset": 0x005C,
        "access": "RW",
        "read_strobe": False,
        "description": ("bf16 factor in bits 15:0 (SCALE); binary32 epsilon (RMSNORM); "
                        "binary32 scale (DEQUANTIZE; DEQUANTIZE_MEM: times the binary32 at "
                        "SRC2); CLAMP bounds, bf16 lo in bits 15:0 and hi in bits 31:16 (a "
                        "NaN bound or lo > hi: BAD_COMMAND)."),
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Value."},
        ),
    },
    {
        "name": "K",
        "offset": 0x0060,
        "access": "RW",
        "read_strobe": False,
        "description": ("TOPK: number of values, 1..min(8, LENGTH); TOPK_WIDE: 1..LENGTH (a "
                        "pass of the row per 8 values)."),
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Value."},
        ),
    },
    {
        "name": "INDEX_LIMIT",
        "offset": 0x0064,
        "access": "RW",
        "read_strobe": False,
        "description": ("Indexed forms: an index at or above this (or below -1) is an error "
                        "(BAD_COMMAND, nothing written)."),
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Value."},
        ),
    },
    {
        "name": "ROWS",
        "offset": 0x0068,
        "access": "RW",
        "read_strobe": False,
        "description": "GATHER_CSR: number of rows (row pointers: ROWS + 1 entries).",
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Value."},
        ),
    },
    {
        "name": "ROW_STRIDE",
        "offset": 0x006C,
        "access": "RW",
        "read_strobe": False,
        "description": "GATHER_CSR: byte distance between the source rows.",
        "fields": (
            {"name": "VALUE", "lsb": 0, "width": 32, "access": "RW", "reset": 0x0, "encode": None,
             "description": "Value."},
        ),
    },
    {
        "name": "START",
        "offset": 0x200C,
        "access": "WO",
        "read_strobe": False,
        "description": ("Writing 1 runs the command described by the other registers. "
                        "Ignored while BUSY (STATUS.START_DROPPED is set instead). Reads "
                        "return 0."),
        "fields": (
            {"name": "START", "lsb": 0, "width": 1, "access": "WO", "reset": 0x0, "encode": None,
             "description": "Write 1 to start a command."},
        ),
    },
    {
        "name": "CTR_LO",
        "offset": 0x2010,
        "access": "RC",
        "read_strobe": True,
        "description": ("Timebase value when the command's last write was acknowledged, low "
                        "word; 0 until a command completes. Reading it latches the high word "
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
    "VaOpcode": (
        {"name": "GATHER", "value": 0x1, "description":
         "dst[i] = src[base + i*stride] (strided; any byte stride)"},
        {"name": "SCATTER", "value": 0x2, "description": "dst[base + i*stride] = src[i]"},
        {"name": "GATHER_IDX", "value": 0x3, "description":
         "dst[i] = src[base + idx[i]*stride], idx -1 skips"},
        {"name": "SCATTER_IDX", "value": 0x4, "description":
         "dst[base + idx[i]*stride] = src[i], idx -1 skips"},
        {"name": "GATHER_CSR", "value": 0x5, "description":
         "rows of a CSR mask: dst[j] = src[base + r*row_stride + col[j]*stride]"},
        {"name": "QUANTIZE", "value": 0x6, "description":
         "absmax -> scale = absmax/127 -> int8, scale beside"},
        {"name": "DEQUANTIZE", "value": 0x7, "description": "int32 * scale -> bf16"},
        {"name": "ADD", "value": 0x8, "description": ""},
        {"name": "MUL", "value": 0x9, "description": ""},
        {"name": "SCALE", "value": 0xa, "description": "x * scalar"},
        {"name": "SILU", "value": 0xb, "description": ""},
        {"name": "EXP", "value": 0xc, "description": ""},
        {"name": "RMSNORM", "value": 0xd, "description": ""},
        {"name": "ROPE", "value": 0xe, "description": ""},
        {"name": "SOFTMAX", "value": 0xf, "description": ""},
        {"name": "SUM", "value": 0x10, "description": "binary32 sum"},
        {"name": "MAX", "value": 0x11, "description": "bf16 max"},
        {"name": "TOPK", "value": 0x12, "description":
         "k <= 8 largest: values and indices"},
        {"name": "CLAMP", "value": 0x13, "description":
         "x clamped to [lo, hi] (SCALAR: lo bits 15:0, hi bits 31:16), exact"},
        {"name": "SOFTPLUS", "value": 0x14, "description": "log(1 + e**x)"},
        {"name": "SQRT", "value": 0x15, "description": "x \u00b7 rsqrt(x)"},
        {"name": "RECIP", "value": 0x16, "description":
         "bf16 1/x (the reciprocal unit of SOFTMAX / SILU)"},
        {"name": "CVT_F32", "value": 0x17, "description":
         "binary32 (SRC, 4-byte aligned) -> bf16, nearest even"},
        {"name": "MUL_MEM", "value": 0x18, "description":
         "x * s, s the bf16 at SRC2 (SCALE by a scalar from memory)"},
        {"name": "ADD_MEM", "value": 0x19, "description": "x + s, s the bf16 at SRC2"},
        {"name": "DEQUANTIZE_MEM", "value": 0x1a, "description":
         "int32 * (binary32 at SRC2 * SCALAR) -> bf16"},
        {"name": "TOPK_WIDE", "value": 0x1b, "description":
         "TOPK with 1 <= K <= LENGTH (a pass of the row per 8 values)"},
    ),
}
