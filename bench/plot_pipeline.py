#!/usr/bin/env python3
"""Draws pipeline schedules as timelines, simulated beside measured, with gnuplot.

    bench/plot_pipeline.py out.png "LABEL=TRACE[@STEP]" ... [--columns 2] [--title T]

Each TRACE is a trace-event file: ddl-train --timeline (a measured run) or
ddl-model --draw P,M --draw-traces DIR (a simulated step, 1 unit = 1 ms).
Each becomes a panel labelled LABEL, one row per rank, holding only the
pipeline's actions: forward (F), backward (B) and weight gradients (W),
each box marked with its micro-batch (and chunk, as m.c), from the end of
the wait for its message, which its span holds, and the weights packed
during that wait (P, grey). @STEP picks the
step of a measured run (0-based, default 2: past the first steps' set-up)
from each rank's own "step" spans, so steps that overlap across the ranks
are still each rank's own; a simulated trace has one step. Panels fill
--columns columns row by row: pass each schedule's simulated trace, then
its measured one, for the two side by side. --orders also prints each
rank's actions in the order it ran them ("ORDER", LABEL, RANK and "F0 F1
B0 W0 ...", separated by tabs),
which a script compares between the two. Needs python3 and gnuplot.
"""
import argparse
import os
import sys
import tempfile

from plot_timeline import load, run_gnuplot

ACTIONS = {"forward": ("F", "#6baed6"), "backward": ("B", "#08519c"), "weight gradients": ("W", "#2ca02c")}
# Drawn too, but not an action of the schedule: weights packed while a
# message is on its way (inside an action's span, before its wait).
PACKING = ("pack weights", ("P", "#969696"))


def actions_of(events, step):
    """Per rank, the (start ms, end ms, kind, label) of its actions in `step`,
    times from the earliest of them; the ranks' names."""
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    windows = {}
    for pid in sorted({e["pid"] for e in spans}):
        steps = sorted((e for e in spans if e["pid"] == pid and e["name"] == "step"), key=lambda e: e["ts"])
        if not steps:  # a simulated step: all of it
            windows[pid] = (float("-inf"), float("inf"))
        elif step < len(steps):
            windows[pid] = (steps[step]["ts"], steps[step]["ts"] + steps[step]["dur"])
        else:
            sys.exit(f"plot_pipeline: rank {pid} ran {len(steps)} steps, not step {step}")
    def in_step(e):
        return e["pid"] in windows and windows[e["pid"]][0] <= e["ts"] <= windows[e["pid"]][1]

    chosen = [e for e in spans if e["name"] in ACTIONS and in_step(e)]
    if not chosen:
        sys.exit("plot_pipeline: no forward, backward or weight-gradient spans in the chosen step")
    # An action's span holds its wait for the message it starts from (a
    # receive) and the packing done meanwhile: its compute starts after them.
    inner = [e for e in spans if (e["name"].startswith("receive") or e["name"] == PACKING[0]) and in_step(e)]
    origin = min(e["ts"] for e in chosen)
    per_rank = {}
    for e in chosen:
        end = e["ts"] + e["dur"]
        start = max([i["ts"] + i["dur"] for i in inner if i["pid"] == e["pid"] and e["ts"] <= i["ts"] < end] +
                    [e["ts"]])
        args = e.get("args", {})
        label = str(args.get("micro-batch", ""))
        if "chunk" in args:
            label += f".{args['chunk']}"
        per_rank.setdefault(e["pid"], []).append(((start - origin) / 1000.0, (end - origin) / 1000.0, e["name"], label))
    for i in inner:
        if i["name"] == PACKING[0] and i["ts"] >= origin:
            per_rank.setdefault(i["pid"], []).append(
                ((i["ts"] - origin) / 1000.0, (i["ts"] + i["dur"] - origin) / 1000.0, i["name"], ""))
    return per_rank, names


def panel(directory, index, label, per_rank, names):
    """The gnuplot commands of one panel, its data written under `directory`."""
    boxes = os.path.join(directory, f"boxes{index}.dat")
    texts = os.path.join(directory, f"labels{index}.dat")
    ranks = sorted(per_rank)
    end = max(a[1] for actions in per_rank.values() for a in actions)
    with open(boxes, "w") as b, open(texts, "w") as t:
        for row, pid in enumerate(ranks):
            y = len(ranks) - 1 - row
            for start, stop, kind, text in per_rank[pid]:
                letter, colour = ACTIONS.get(kind, PACKING[1])
                b.write(f"{(start + stop) / 2:.6f} {y} {(stop - start) / 2:.6f} 0.4 {int(colour[1:], 16)}\n")
                # A label only where it fits: a box of about 3 % of the step or more.
                if stop - start >= 0.03 * end:
                    t.write(f"{(start + stop) / 2:.6f} {y} {letter}{text}\n")
        t.write(f"{-end} -10 .\n")  # never empty: gnuplot refuses an empty file
    ytics = ", ".join(f'"{names.get(pid, f"rank {pid}")}" {len(ranks) - 1 - row}' for row, pid in enumerate(ranks))
    unit = "units" if "simulated" in " ".join(names.values()) else "ms"
    return f"""
set title "{label}"
set xlabel "time ({unit})"
set xrange [0:{end:.6f}]
set yrange [-0.6:{len(ranks) - 0.4}]
set ytics ({ytics})
plot "{boxes}" using 1:2:3:4:5 with boxxyerror fs solid 1.0 border lc rgb "#ffffff" lc rgb variable notitle, \\
     "{texts}" using 1:2:3 with labels tc rgb "#ffffff" font "sans,8" notitle
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("png")
    parser.add_argument("traces", nargs="+", help="LABEL=TRACE[@STEP]")
    parser.add_argument("--columns", type=int, default=1)
    parser.add_argument("--title", default="")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--orders", action="store_true", help="print each rank's actions in order")
    options = parser.parse_args()

    panels = []
    for entry in options.traces:
        label, sep, path = entry.rpartition("=")  # labels may hold "=", paths rarely do
        if not sep:
            sys.exit(f"plot_pipeline: '{entry}' is not LABEL=TRACE[@STEP]")
        step = 2
        if "@" in path:
            path, _, text = path.rpartition("@")
            step = int(text)
        panels.append((label, *actions_of(load(path), step)))
        if options.orders:
            for pid, actions in sorted(panels[-1][1].items()):
                order = " ".join(ACTIONS[kind][0] + text for _, _, kind, text in sorted(actions) if kind in ACTIONS)
                print(f"ORDER\t{label}\t{pid}\t{order}")
    columns = max(1, options.columns)
    rows = (len(panels) + columns - 1) // columns
    heights = max(len(p[1]) for p in panels)
    with tempfile.TemporaryDirectory() as directory:
        script = f"""
set terminal pngcairo noenhanced size {options.width},{80 + rows * (90 + 40 * heights)} font "sans,10"
set output "{options.png}"
set grid xtics
set multiplot layout {rows},{columns} title "{options.title}"
""" + "".join(panel(directory, i, *p) for i, p in enumerate(panels)) + "unset multiplot\n"
        run_gnuplot(script, "plot_pipeline")
    print(f"plot_pipeline: {options.png}: {len(panels)} panels")


if __name__ == "__main__":
    main()
