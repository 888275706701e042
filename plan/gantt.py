"""The plan as a Gantt chart: one row per block, per Muon link a reservation uses and
per MC channel, each bar an op (or its transfer), coloured by traffic class."""

from golden.muon import path_links, window

__all__ = ["gantt_rows", "write_gantt"]

_COLOURS = {"decode": "tab:red", "prefill": "tab:blue", "cache_migrate": "tab:green"}


def _link_name(link):
    port = getattr(link.port, "name", link.port).lower()
    return f"link ({link.x},{link.y}) {port}"


def gantt_rows(plan, machine):
    """``[(row name, [(start, end, op, kind), ...]), ...]``: the machine's blocks in
    order, then the Muon links in the order the plan first uses them, then the MC's
    channels; bars sorted by start."""
    rows = {f"block {b.name}": [] for b in machine.blocks}
    links = {}
    channels = {f"mc channel {c}": [] for c in range(machine.mc_channels)}
    for e in plan.entries:
        if e.block is None:
            continue
        rows[f"block {e.block}"].append((e.start, e.finish, e.op, e.kind))
        for r in e.reservations:
            for link, hop in path_links(r.src, r.dst):
                lo, hi = window(r.start, r.duration, link, hop)
                links.setdefault(_link_name(link), []).append((lo, hi, e.op, e.kind))
        for channel, start, end in e.channels:
            channels[f"mc channel {channel}"].append((start, end, e.op, e.kind))
    rows.update(links)
    rows.update(channels)
    return [(name, sorted(bars)) for name, bars in rows.items()]


def write_gantt(plan, machine, path, title=None):
    """Writes the chart as a PNG to ``path``; returns its row names, top to bottom."""
    # The object API with the Agg canvas: no pyplot, no global backend state.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    rows = gantt_rows(plan, machine)
    figure = Figure(figsize=(12, 0.35 * len(rows) + 1.5))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for y, (_, bars) in enumerate(rows):
        if bars:
            axes.broken_barh([(s, e - s) for s, e, _, _ in bars], (y - 0.4, 0.8),
                             facecolors=[_COLOURS[k] for *_, k in bars])
    axes.set_yticks(range(len(rows)), [name for name, _ in rows])
    axes.invert_yaxis()
    axes.set_xlim(0, max(plan.makespan, 1))
    axes.set_xlabel("cycle")
    axes.legend(handles=[Patch(color=c, label=k) for k, c in _COLOURS.items()],
                loc="upper right", fontsize="small")
    axes.set_title(title or plan.summary(), fontsize="small")
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=100)
    return [name for name, _ in rows]
