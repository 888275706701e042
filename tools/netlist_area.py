"""Where a board build's LUTs go: the LUT4 slots of a synthesized netlist, unit by unit.

yosys flattens the board top, but it names each cell after a net of the unit the cell
came from (``harness.block.core.engine.opa7_LUT4_Z``), so the cells of ``top.json`` split
by unit without another synthesis. A cell counts as ``sim.fpga.COMB_SLOTS`` says (the fit
check's weights: LUT4 1, CCU2C 2, TRELLIS_DPR16X4 4).

``python tools/netlist_area.py build/fpga/<run>/top.json [--under PREFIX] [--depth N]
[--top N]`` prints the units at ``--depth`` name parts (default 4: the block's units,
``harness.block.core.<unit>``); with ``--under harness.block.core.engine`` it lists the
signals of that unit instead, lane numbers folded (``add7_s3_norm`` counts as
``add#_s#_norm``), which names the per-lane logic.
"""

import argparse
import json
import re
from collections import Counter

from sim.fpga import COMB_SLOTS

# What yosys and abc append to a net name to name a cell, and indices into the net.
_CELL_SUFFIX = re.compile(r"(\[|\$|_TRELLIS|_LUT4|_CCU2C|_PFUMX|_L6MUX|_DPR16).*$")


def unit_slots(cells, depth=4, under=None):
    """LUT4 slots by unit: ``cells`` maps a cell name to its yosys JSON (``{"type": ...}``).
    Without ``under``, a unit is the first ``depth`` dot-separated parts of the name; with
    it, the cells whose name starts with ``under + "."``, by the next part's signal name
    with digits folded to ``#``."""
    slots = Counter()
    for name, cell in cells.items():
        weight = COMB_SLOTS.get(cell["type"], 0)
        if not weight:
            continue
        if under is None:
            unit = ".".join(name.split(".")[:depth])
        elif name.startswith(under + "."):
            signal = _CELL_SUFFIX.sub("", name[len(under) + 1:].split(".")[0])
            unit = re.sub(r"\d+", "#", signal)
        else:
            continue
        slots[unit] += weight
    return slots


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python tools/netlist_area.py",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("netlist", help="yosys JSON netlist (build/fpga/<run>/top.json)")
    parser.add_argument("--under", help="list the signals of this unit")
    parser.add_argument("--depth", type=int, default=4, help="name parts that name a unit")
    parser.add_argument("--top", type=int, default=25, help="lines to print")
    args = parser.parse_args(argv)
    with open(args.netlist) as f:
        modules = json.load(f)["modules"]
    cells = {name: cell for module in modules.values()
             for name, cell in module.get("cells", {}).items()}
    slots = unit_slots(cells, args.depth, args.under)
    total = sum(slots.values())
    print(f"{total} LUT4 slots{' under ' + args.under if args.under else ''}")
    for unit, count in slots.most_common(args.top):
        print(f"{count:8d} {100 * count / total:5.1f} %  {unit}")


if __name__ == "__main__":
    main()
