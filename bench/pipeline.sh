#!/usr/bin/env bash
# Pipeline parallelism side by side, in one run: ddl-train --parallel
# pipeline against PyTorch's own pipelining (bench/torch_pipeline.py) on the
# 784-4096x7-10 MLP (wide_mlp, 103,944,202 parameters), batch 128, SGD lr
# 0.01, 1 thread per rank, alternating every configuration `rounds` times
# (every second round in reverse order) so all see the same machine load.
#
#   bench/pipeline.sh [build-dir] [rounds]        e.g. bench/pipeline.sh build-cpu 3
#   bench/pipeline.sh --summary <logs>/results.tsv  (the tables again, from a run's results)
#
#   a. samples/s against the micro-batch count M in {1,2,4,8,16}
#      ($PIPELINE_M), 2 ranks x 1 thread: ddl 1f1b, zb-h1, zb-h2,
#      interleaved-1f1b and zb-v; torch ScheduleGPipe, Schedule1F1B,
#      ScheduleInterleaved1F1B, ScheduleZBVZeroBubble and ScheduleDualPipeV
#      on ddl's cuts (each refusal reported); the 1-process baselines (ddl 1
#      and 2 threads, torch 1 thread); ddl's measured bubble beside its
#      schedule's formula; then each framework's best pipeline, their
#      ratio and ddl's against its 2-thread process.
#   b. (first round) ddl's peak activation MiB per stage, GPipe against
#      1F1B, M = 8, 2 stages and 4 stages (4 ranks on 2 cores: memory only).
#   c. (first round) peak RSS per rank: ddl 1, 2 and 4 stages (balanced by
#      parameters) and one process without --parallel (/usr/bin/time), torch
#      1 process and 2 stages.
#   e. (with a) one process of each framework running the pipeline's
#      arithmetic without its bubble or messages: each batch as M slices of
#      128/M samples whose gradients are accumulated into one SGD step
#      (ddl-train --batch-size 128/M --accumulate M), 1 thread, M >= 2.
#   d. mnist_cnn, 2 stages x 1 thread, --balance time / parameters / layers
#      (M = 4), against one process, every round.
#
# PIPELINE_EXTRAS=0 runs (a) alone.
# ddl-train's samples/s counts every step of its epoch, the first included;
# torch_pipeline.py prints both its rate after warm-up and over every step.
# Needs bench/.venv-peers (bench/install-peers.sh). Raw outputs go to
# $PIPELINE_LOGS (default: a fresh folder under /tmp, named at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
# summarize <results.tsv>: the tables, medians first, every round's figure
# beside them.
summarize() {
  python3 - "$1" <<'PY'
import collections, statistics, sys

rows = collections.OrderedDict()
for line in open(sys.argv[1]):
    name, rnd, *fields = line.rstrip("\n").split("\t")
    rows.setdefault(name, []).append(fields)

def med(values):
    numbers = [float(v) for v in values if v not in ("-", "refused", "")]
    return statistics.median(numbers) if numbers else None

def fmt(x, digits=0):
    return "-" if x is None else f"{x:.{digits}f}"

def runs(values):
    return "/".join(values)

def rate(name, column=0):
    return med(f[column] for f in rows[name]) if name in rows else None

def ratio(a, b):
    return None if a is None or b is None else a / b

base_ddl = rate("ddl 1 process, 1 thread")
base_torch = rate("torch 1 process, 1 thread")
print("(a) wide_mlp, batch 128, SGD, samples/s: median (every round); torch: after warm-up and over all steps")
print("| run | samples/s | rounds | / ddl 1 process 1 thread | / same framework 1 process | torch, all steps | "
      "ddl bubble measured after the first step: stages' mean (rounds) / busiest stage (rounds) | textbook |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for name, f in rows.items():
    if "(memory)" in name or name.startswith("mnist_cnn"):
        continue
    if f[0][0] == "refused":
        print(f"| {name} | refused: M < stages | | | | | | |")
        continue
    r = rate(name)
    torch = name.startswith("torch")
    own = base_torch if torch else base_ddl
    allsteps = f"{fmt(rate(name, 1), 1)} ({runs(x[1] for x in f)})" if torch else ""
    bubble = (f"{fmt(rate(name, 1), 1)}% ({runs(x[1] for x in f)}) / {fmt(rate(name, 2), 1)}% "
              f"({runs(x[2] for x in f)})" if not torch and f[0][1] != "-" else "")
    textbook = f"{f[0][3]}%" if bubble else ""
    print(f"| {name} | {fmt(r, 1 if torch else 0)} | {runs(x[0] for x in f)} | {fmt(ratio(r, base_ddl), 2)} | "
          f"{fmt(ratio(r, own), 2)} | {allsteps} | {bubble} | {textbook} |")

# The issue's two goals: ddl's best pipeline against torch's best, and
# against ddl's own process on both cores.
def best(prefix):
    named = [(rate(n), n) for n in rows if n.startswith(prefix) and "(memory)" not in n and rate(n) is not None]
    return max(named) if named else (None, "-")
ddl_best, ddl_name = best("ddl 2 stages")
torch_best, torch_name = best("torch 2 stages")
two = rate("ddl 1 process, 2 threads")
print(f"\nbest pipelines: ddl {fmt(ddl_best)} ({ddl_name}), torch {fmt(torch_best, 1)} ({torch_name}): "
      f"{fmt(ratio(ddl_best, torch_best), 2)}x; ddl's best / ddl 1 process 2 threads ({fmt(two)}): "
      f"{fmt(ratio(ddl_best, two), 2)}x")

print("\n(b, c) memory, first round. ddl: per stage peak activation MiB / peak RSS MiB (ddl-train's report; one "
      "process: /usr/bin/time). torch: per rank peak RSS MiB / RSS after `import torch`")
for name, f in rows.items():
    if name.startswith("mnist_cnn"):
        continue
    if "(memory)" in name or "process" in name or name.endswith("M=8"):
        print(f"| {name} | {f[0][-1]} |")

cnn_base = rate("mnist_cnn 1 process, 1 thread")
print("\n(d) mnist_cnn, 2 stages x 1 thread, M = 4, SGD, samples/s: median (every round)")
print("| run | samples/s | rounds | / 1 process | bubble measured | activ. MiB / RSS MiB per stage (round 1) |")
print("| --- | --- | --- | --- | --- | --- |")
for name, f in rows.items():
    if name.startswith("mnist_cnn"):
        r = rate(name)
        bubble = f"{fmt(rate(name, 1), 1)}%" if f[0][1] != "-" else ""
        print(f"| {name} | {fmt(r)} | {runs(x[0] for x in f)} | {fmt(ratio(r, cnn_base), 2)} | {bubble} | {f[0][4]} |")
PY
}

if [[ ${1:-} == --summary ]]; then summarize "$2"; exit; fi
build=${1:-build}
rounds=${2:-3}
logs=${PIPELINE_LOGS:-$(mktemp -d /tmp/ddl-pipeline-bench.XXXXXX)}
mkdir -p "$logs"
python=bench/.venv-peers/bin/python3
train=$build/apps/ddl-train
[[ -x $train ]] || { echo "no $train: build ddl-train first" >&2; exit 1; }
[[ -x $python ]] || { echo "no $python: run bench/install-peers.sh first" >&2; exit 1; }
samples=${PIPELINE_SAMPLES:-1280}  # 10 steps of 128 (a smaller value makes a quick smoke test)
counts=${PIPELINE_M:-1 2 4 8 16}   # the micro-batch counts of (a)
extras=${PIPELINE_EXTRAS:-1}       # 0: (a) alone, without (b) to (e)
steps=$((samples / 128))
limit=(--train-limit "$samples" --test-limit 128 --no-validation --epochs 1)
wide=(--model wide_mlp --optimizer sgd --lr 0.01 --threads 1 "${limit[@]}")
wide2=(--model wide_mlp --optimizer sgd --lr 0.01 --threads 2 "${limit[@]}")
# 4 ranks on 2 cores busy-wait (MPICH): 2 steps, for memory only.
wide4=(--model wide_mlp --optimizer sgd --lr 0.01 --threads 1 --train-limit 256 --test-limit 128 --no-validation --epochs 1)
results=$logs/results.tsv
: > "$results"
start_all=$SECONDS

# Every run is bounded: a hang is reported, not waited out.
bounded() { timeout --kill-after=10 400 "$@"; }

# run_ddl <name> <round> <ranks> <ddl-train args...>: appends name, round,
# samples/s, measured bubble % (the stages' mean, and the busiest stage's),
# textbook %, and per stage "activMiB/RSSMiB".
run_ddl() {
  local name=$1 round=$2 ranks=$3
  shift 3
  local log="$logs/$(tr ' /=,' '____' <<< "$name").r$round.log"
  local status=0
  if [[ $ranks == 0 ]]; then  # one process without --parallel, its RSS from time(1)
    bounded /usr/bin/time -f 'maxrss_kib %M' "$train" "$@" > "$log" 2>&1 || status=$?
  else
    bounded mpiexec -n "$ranks" "$train" "$@" > "$log" 2>&1 || status=$?
  fi
  if [[ $status != 0 ]]; then
    echo "FAILED ($status): $name, round $round; output in $log" >&2
    tail -5 "$log" >&2
    exit 1
  fi
  local rate bubble stages rss
  rate=$(sed -n 's/.* \([0-9]*\) samples\/s.*/\1/p' "$log" | tail -n 1)
  bubble=$(sed -n 's/^bubble: \([0-9.]*\)% .*; \([0-9.]*\)% on the busiest.* = \([0-9.]*\)% for.*/\1\t\2\t\3/p' "$log")
  [[ -n $bubble ]] || bubble=$'-\t-\t-'
  stages=$(awk 'NF == 11 && $8 ~ /M$/ {printf "%s%.1f/%d", sep, $5, $8; sep = " "}' "$log")
  rss=$(sed -n 's/^maxrss_kib \([0-9]*\)/\1/p' "$log")
  [[ -z $rss ]] || stages="-/$((rss / 1024))"
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$round" "$rate" "$bubble" "${stages:--}" >> "$results"
  printf '%-44s round %s: %s samples/s  bubble %s  stages %s\n' "$name" "$round" "$rate" "${bubble//$'\t'/ \/ }" \
    "${stages:--}" >&2
}

# run_torch <name> <round> <torch_pipeline.py args...>: appends name, round,
# samples/s after warm-up, samples/s over all steps, per rank "RSS/after-import".
run_torch() {
  local name=$1 round=$2
  shift 2
  local log="$logs/$(tr ' /=,' '____' <<< "$name").r$round.log"
  local status=0
  bounded "$python" bench/torch_pipeline.py --warmup 2 --steps "$steps" "$@" > "$log" 2>&1 || status=$?
  if [[ $status != 0 ]]; then
    echo "FAILED ($status): $name, round $round; output in $log" >&2
    tail -5 "$log" >&2
    exit 1
  fi
  local line rate all ranks
  if grep -q REFUSED "$log"; then
    printf '%s\t%s\trefused\trefused\t-\n' "$name" "$round" >> "$results"
    echo "$name round $round: $(grep -o 'REFUSED.*' "$log")" >&2
    return
  fi
  line=$(grep '^RESULT' "$log")
  rate=$(awk '{print $3}' <<< "$line")
  all=$(awk '{print $NF}' <<< "$line")
  ranks=$(awk '/^RANK/ {printf "%s%d/%d", sep, $6, $9; sep = " "}' "$log" | tr -d ')')
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$round" "$rate" "$all" "$ranks" >> "$results"
  printf '%-44s round %s: %s samples/s after warm-up, %s over all steps; RSS/after-import MiB %s\n' "$name" \
    "$round" "$rate" "$all" "$ranks" >&2
}

# One round of the throughput sweep (a, e) and the mnist_cnn balances (d), as
# a list of commands run in order (reversed in even rounds).
round_commands() {
  local r=$1
  echo "run_ddl 'ddl 1 process, 1 thread' $r 0 ${wide[*]}"
  echo "run_ddl 'ddl 1 process, 2 threads' $r 0 ${wide2[*]}"
  echo "run_torch 'torch 1 process, 1 thread' $r --stages 1"
  for m in $counts; do
    for schedule in 1f1b zb-h1 zb-h2 interleaved-1f1b zb-v; do
      echo "run_ddl 'ddl 2 stages $schedule M=$m' $r 2 ${wide[*]} --parallel pipeline --balance parameters --schedule $schedule --micro-batches $m"
    done
    if ((extras && m >= 2)); then
      echo "run_ddl 'ddl 1 process, M=$m accumulated' $r 0 ${wide[*]} --batch-size $((128 / m)) --accumulate $m"
      echo "run_torch 'torch 1 process, M=$m accumulated' $r --stages 1 --micro-batches $m"
    fi
    # The same cuts as ddl's (--balance parameters): 8 for one stage per
    # rank; for two, rank totals of 51.5% / 48.5% (interleaved) and 51.6% /
    # 48.4% (the V).
    echo "run_torch 'torch 2 stages gpipe M=$m' $r --stages 2 --schedule gpipe --micro-batches $m"
    echo "run_torch 'torch 2 stages 1f1b M=$m' $r --stages 2 --schedule 1f1b --micro-batches $m"
    echo "run_torch 'torch 2 stages interleaved-1f1b M=$m' $r --stages 2 --schedule interleaved-1f1b --split 4,8,12 --micro-batches $m"
    echo "run_torch 'torch 2 stages zb-v M=$m' $r --stages 2 --schedule zb-v --split 4,8,11 --micro-batches $m"
    echo "run_torch 'torch 2 stages dualpipev M=$m' $r --stages 2 --schedule dualpipev --split 4,8,11 --micro-batches $m"
  done
  ((extras)) || return 0
  local cnn="--model mnist_cnn --optimizer sgd --lr 0.01 --threads 1 --train-limit $((samples * 5)) --test-limit 128 --no-validation --epochs 1"
  echo "run_ddl 'mnist_cnn 1 process, 1 thread' $r 0 $cnn"
  for balance in time parameters layers; do
    echo "run_ddl 'mnist_cnn 2 stages --balance $balance' $r 2 $cnn --parallel pipeline --micro-batches 4 --balance $balance"
  done
}

for ((r = 1; r <= rounds; r++)); do
  mapfile -t commands < <(round_commands "$r")
  if ((r % 2 == 0)); then
    for ((i = ${#commands[@]} - 1; i >= 0; i--)); do eval "${commands[i]}"; done
  else
    for command in "${commands[@]}"; do eval "$command"; done
  fi
  if ((r == 1 && extras)); then  # (b) and (c): memory, measured once
    for schedule in gpipe 1f1b; do
      run_ddl "ddl 2 stages $schedule M=8 (memory)" 1 2 "${wide[@]}" --parallel pipeline --balance parameters \
        --schedule $schedule --micro-batches 8
      run_ddl "ddl 4 stages $schedule M=8 (memory)" 1 4 "${wide4[@]}" --parallel pipeline \
        --balance parameters --schedule $schedule --micro-batches 8
    done
    run_ddl "ddl 1 stage M=4 (memory)" 1 1 "${wide[@]}" --parallel pipeline --stages 1 --micro-batches 4
  fi
done

echo "wall time of the runs: $((SECONDS - start_all)) s; raw outputs in $logs" >&2
summarize "$results"
echo "total wall time of bench/pipeline.sh: $((SECONDS - start_all)) s" >&2
