"""The table of data_parallel_scaling.sh and cluster_data_parallel.sh.

Reads rows "name<TAB>samples/s of each round<TAB>waiting % of each round"
on stdin, the first row the 1-rank run; prints each row's rounds, their
median, the efficiency (the median over twice the first row's) and the
median share of step time spent waiting on the gradients.
"""
import statistics
import sys

rows = [line.rstrip("\n").split("\t") for line in sys.stdin]
base = statistics.median(float(x) for x in rows[0][1].split())
width = max(len(row[0]) for row in rows)
print(f"{'run':{width}} {'samples/s':>24} {'median':>7} {'efficiency':>10}  waiting on gradients (% of step)")
for name, rates, waits in rows:
    values = [float(x) for x in rates.split()]
    median = statistics.median(values)
    efficiency = "" if name == rows[0][0] else f"{median / (2 * base):.1%}"
    waited = [float(x) for x in waits.split()]
    wait = f"{statistics.median(waited):.1f}" if waited else ""
    print(f"{name:{width}} {str([int(v) for v in values]):>24} {median:7.0f} {efficiency:>10}  {wait}")
