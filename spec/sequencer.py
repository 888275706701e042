"""The tile's command sequencer: the command list it reads and the completion log it
writes (docs/tile/sequencer.md), as numbers both sides share.

The planner writes the list and reads the log (``plan.commands``), the RTL parses and
writes them (``hdl.tile.sequencer``); neither spells a position itself. Everything is
little-endian 32-bit words.

Command list, version :data:`VERSION` (at LIST_ADDR, a multiple of the bus width):

====================  =====================================================================
words                 meaning
====================  =====================================================================
header, 4 words       :data:`MAGIC`, :data:`VERSION`, entry count, entry words (after the
                      header)
entry word 0          TARGET bits 3:0 (the window, ``spec.tile.TileBlock``), NDEPS bits
                      11:8, NWRITES bits 23:16 (1..255: the register writes, the last one
                      START), bits 7:4 and 31:24 zero
entry word 1          PLANNED: the cycle of the launch, counted from the run's T0
NDEPS words           a dependency each: INDEX bits 15:0 (an earlier entry), TARGET bits
                      19:16 (that entry's target), the rest zero
NWRITES × 2 words     (OFFSET bits 15:0 in the target's register map, VALUE); the last
                      pair is the START write, launched at PLANNED
====================  =====================================================================

Completion record: :data:`RECORD_WORDS` words at LOG_ADDR + :data:`RECORD_BYTES` · index,
one per entry, written when its command ends (or, with FLAG_NOT_LAUNCHED, when the run
stops at it):

====  ========================================================================
word  meaning
====  ========================================================================
0     INDEX bits 15:0, FLAGS bits 23:16 (:class:`RecordFlag`), CODE bits 31:24 (the
      target's ERROR code when FLAG_ERROR)
1     LATE: launch − (T0 + PLANNED) in cycles (0 on time), saturated at 2^32 − 1
2, 3  LAUNCH: timebase of the START write's AW / W transfer on the sequencer's port
4, 5  DONE: timebase of the cycle the sequencer saw the target's STATUS.DONE or ERROR
6, 7  CTR: the target's CTR_LO / CTR_HI as read after DONE (0 after an error)
====  ========================================================================
"""

from enum import IntEnum, IntFlag

__all__ = ["MAGIC", "VERSION", "HEADER_WORDS", "ENTRY_FIXED_WORDS", "MAX_ENTRIES",
           "MAX_WRITES", "MAX_NDEPS", "TARGET_BITS", "RECORD_WORDS", "RECORD_BYTES",
           "RecordFlag", "SequencerError", "entry_word", "split_entry_word", "dep_word",
           "split_dep_word", "record_word0", "split_record_word0"]

MAGIC = 0x51533456              # the bytes "V4SQ"
VERSION = 1
HEADER_WORDS = 4
ENTRY_FIXED_WORDS = 2           # entry word 0 and PLANNED
MAX_ENTRIES = 1 << 16           # an INDEX is 16 bits
MAX_WRITES = 255
MAX_NDEPS = 15
TARGET_BITS = 4
RECORD_WORDS = 8
RECORD_BYTES = 4 * RECORD_WORDS


class RecordFlag(IntFlag):
    """FLAGS of a completion record."""
    VALID = 1           # the record is written (a zeroed log reads as no record)
    LATE = 2            # launched after its planned cycle
    LATE_DEPENDENCY = 4  # a dependency had not ended at the planned cycle
    LATE_TARGET = 8     # the target's previous command had not ended (or its CTR was not
                        # read yet) at the planned cycle
    ERROR = 16          # the target ended the command in ERROR (CODE: its code)
    NOT_LAUNCHED = 32   # stop mode: the run stopped at this entry, nothing was launched


class SequencerError(IntEnum):
    """The sequencer's ERROR codes: the common ones it uses, and its own from 16 up
    (docs/design.md: "Blocks may add codes from 16 up")."""
    NONE = 0
    BAD_COMMAND = 1         # COUNT beyond the list's header
    MISALIGNED = 2          # LIST_ADDR not a multiple of the bus width, LOG_ADDR of 32
    AXI_READ_ERROR = 5      # the list's read answered an error (ERR_ADDR: the burst's)
    AXI_WRITE_ERROR = 6     # a record's write answered an error (ERR_ADDR: the record's)
    BAD_LIST = 16           # the header's magic or version is not this format's
    BAD_ENTRY = 17          # a target the sequencer does not drive, NWRITES 0, too many
                            # dependencies, a dependency not earlier, reserved bits set
    LATE_DEPENDENCY = 18    # stop mode: a dependency had not ended at the planned cycle
    COMMAND_FAILED = 19     # a target ended a command in ERROR
    CONTROL_ERROR = 20      # a register access on the control port answered SLVERR/DECERR


def entry_word(target, ndeps, nwrites):
    """Entry word 0."""
    return target | ndeps << 8 | nwrites << 16


def split_entry_word(word):
    """``(target, ndeps, nwrites, reserved bits)`` of entry word 0."""
    return word & 0xF, (word >> 8) & 0xF, (word >> 16) & 0xFF, word & 0xFF0000F0


def dep_word(index, target):
    return index | target << 16


def split_dep_word(word):
    """``(index, target, reserved bits)``."""
    return word & 0xFFFF, (word >> 16) & 0xF, word & 0xFFF00000


def record_word0(index, flags, code):
    return index | int(flags) << 16 | code << 24


def split_record_word0(word):
    """``(index, flags, code)``."""
    return word & 0xFFFF, (word >> 16) & 0xFF, word >> 24
