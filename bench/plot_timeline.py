#!/usr/bin/env python3
"""Draws a ddl timeline (ddl-train --timeline trace.json) as a PNG with gnuplot.

    bench/plot_timeline.py trace.json timeline.png [--steps 2:4] [--from MS --to MS]

One row per rank and thread, as in Perfetto; a span is a bar coloured by its
category, drawn thinner the deeper it nests, so a step shows its forward,
backward and allreduces inside it; instants (a gradient bucket becoming
ready) are triangles. By default the window covers rank 0's steps 2 to 4 (a
whole epoch is too dense to read); --steps picks others, --from/--to a window
in milliseconds. Needs python3 and gnuplot (Debian's gnuplot-nox), nothing
else.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# A colour per phase: forward and backward by their span's name, the rest
# (per-layer spans included) by category.
COLOURS = {
    "training": "#d9d9d9",
    "data": "#9467bd",
    "forward": "#6baed6",
    "backward": "#08519c",
    "compute": "#3182bd",
    "communication": "#d62728",
    "optimizer": "#2ca02c",
    "evaluation": "#8c564b",
    "checkpoint": "#ff7f0e",
}


def colour_of(span):
    return COLOURS.get(span["name"] if span["name"] in ("forward", "backward") else span.get("cat"), "#7f7f7f")


def load(path):
    try:
        with open(path) as file:
            trace = json.load(file)
    except (OSError, ValueError) as error:
        sys.exit(f"plot_timeline: cannot read {path}: {error}")
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        sys.exit(f"plot_timeline: {path} is not a trace-event file (no traceEvents array)")
    return trace["traceEvents"]


def run_gnuplot(script, who):
    """Runs a gnuplot script; exits naming `who` if gnuplot is missing or fails."""
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    except FileNotFoundError:
        sys.exit(f"{who}: gnuplot is not installed (apt-get install gnuplot-nox)")
    except subprocess.CalledProcessError as error:
        sys.exit(f"{who}: gnuplot failed ({error.returncode})")


def rows_of(events):
    """The (pid, tid) rows in rank order, and their labels."""
    process = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    thread = {(e["pid"], e["tid"]): e["args"]["name"]
              for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    rows = sorted({(e["pid"], e["tid"]) for e in events if e.get("ph") in ("X", "i")},
                  key=lambda row: (row[0], thread.get(row, "") != "training", row[1]))
    labels = [f"rank {pid} {thread.get((pid, tid), tid)}" for pid, tid in rows]
    return rows, labels, process


def window(events, steps, start, end):
    """The time window in microseconds: --from/--to, or rank 0's steps."""
    if start is not None and end is not None:
        return start * 1000.0, end * 1000.0
    first, last = (int(s) for s in steps.split(":"))
    spans = sorted((e for e in events if e.get("ph") == "X" and e["name"] == "step" and e["pid"] == 0),
                   key=lambda e: e["ts"])
    if not spans:
        spans = sorted((e for e in events if e.get("ph") == "X"), key=lambda e: e["ts"])
        return spans[0]["ts"], max(e["ts"] + e["dur"] for e in spans)
    first = min(first, len(spans) - 1)
    last = min(max(last, first), len(spans) - 1)
    return spans[first]["ts"], spans[last]["ts"] + spans[last]["dur"]


def depths(spans):
    """Each span's nesting depth on its row (spans of a row nest)."""
    result, open_ends = {}, []
    for span in sorted(spans, key=lambda e: (e["ts"], -e["dur"])):
        while open_ends and open_ends[-1] <= span["ts"]:
            open_ends.pop()
        result[id(span)] = len(open_ends)
        open_ends.append(span["ts"] + span["dur"])
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("png")
    parser.add_argument("--steps", default="2:4", help="rank 0's steps to show, first:last (0-based; default 2:4)")
    parser.add_argument("--from", dest="start", type=float, help="window start in ms")
    parser.add_argument("--to", dest="end", type=float, help="window end in ms")
    parser.add_argument("--title", default="", help="the plot's title")
    parser.add_argument("--width", type=int, default=1400)
    options = parser.parse_args()

    events = load(options.trace)
    rows, labels, _ = rows_of(events)
    if not rows:
        sys.exit(f"plot_timeline: {options.trace} holds no spans")
    start, end = window(events, options.steps, options.start, options.end)
    index = {row: i for i, row in enumerate(rows)}
    bars, marks = [], []
    by_row = {}
    for event in events:
        if event.get("ph") == "X":
            by_row.setdefault((event["pid"], event["tid"]), []).append(event)
    for row, spans in by_row.items():
        depth = depths(spans)
        for span in spans:
            left, right = max(span["ts"], start), min(span["ts"] + span["dur"], end)
            if right <= left:
                continue
            half_height = max(0.42 - 0.09 * depth[id(span)], 0.08)
            colour = colour_of(span)
            y = len(rows) - 1 - index[row]
            bars.append((depth[id(span)], (left + right) / 2000.0 - start / 1000.0, y, (right - left) / 2000.0,
                         half_height, int(colour[1:], 16)))
    for event in events:
        if event.get("ph") == "i" and start <= event["ts"] <= end:
            marks.append(((event["ts"] - start) / 1000.0, len(rows) - 1 - index[(event["pid"], event["tid"])] + 0.45))
    bars.sort()  # outer spans first, so inner ones are drawn over them

    with tempfile.TemporaryDirectory() as directory:
        bar_file = os.path.join(directory, "bars.dat")
        mark_file = os.path.join(directory, "marks.dat")
        with open(bar_file, "w") as file:
            for _, x, y, dx, dy, colour in bars:
                file.write(f"{x:.6f} {y} {dx:.6f} {dy:.3f} {colour}\n")
        with open(mark_file, "w") as file:
            for x, y in marks or [(-1.0, -10.0)]:
                file.write(f"{x:.6f} {y}\n")
        ytics = ", ".join(f'"{label}" {len(rows) - 1 - i}' for i, label in enumerate(labels))
        legend = ", ".join(f'keyentry with boxes fs solid fc rgb "{colour}" title "{category}"'
                           for category, colour in COLOURS.items())
        script = f"""
set terminal pngcairo noenhanced size {options.width},{120 + 46 * len(rows)} font "sans,10"
set output "{options.png}"
set title "{options.title}"
set xlabel "time (ms)"
set xrange [0:{(end - start) / 1000.0:.6f}]
set yrange [-0.6:{len(rows) - 0.4}]
set ytics ({ytics})
set grid xtics
set key outside bottom horizontal
plot "{bar_file}" using 1:2:3:4:5 with boxxyerror fs solid 1.0 noborder lc rgb variable notitle, \\
     "{mark_file}" using 1:2 with points pt 11 ps 1.2 lc rgb "#000000" title "bucket ready", \\
     {legend}
"""
        run_gnuplot(script, "plot_timeline")
    print(f"plot_timeline: {options.png}: {len(rows)} rows, {(end - start) / 1000.0:.1f} ms")


if __name__ == "__main__":
    main()
