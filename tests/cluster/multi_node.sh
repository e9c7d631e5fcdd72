#!/usr/bin/env bash
# Multi-node jobs on a simulated cluster (scripts/cluster/simulate.sh: one
# network namespace and hostname per node), one case per ctest test. The
# ranks of two nodes share memory (--between-nodes shm): over TCP, Debian's
# MPICH and UCX hang in MPI_Finalize in about half of the runs
# (docs/CLUSTER.md), which would make every case here slow and flaky; what
# these cases check (which ranks are on which node, the collectives' and
# strategies' results) does not depend on the transport.
#   multi_node.sh <build dir> <case>
# Exit 77 (ctest: skipped) where the cluster cannot be made (not root),
# with the reason on the last line.
set -uo pipefail
build=$(cd "$1" && pwd)
case_name=$2
here=$(cd "$(dirname "$0")" && pwd)
simulate=$here/../../scripts/cluster/simulate.sh
train=$build/apps/ddl-train
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export DDL_STALL_TIMEOUT=${DDL_STALL_TIMEOUT:-60}

fail() { echo "FAIL: $*"; exit 1; }

# on_cluster <nodes> <ranks per node> <command...>: the command under the
# simulated cluster, ranks of two nodes sharing memory unless BETWEEN says
# tcp, and the links limited to RATE (tc's units) if set; a skip (77) ends
# the case as skipped.
on_cluster() {
  local nodes=$1 per_node=$2
  shift 2
  local status=0
  "$simulate" --nodes "$nodes" --ranks-per-node "$per_node" --between-nodes "${BETWEEN:-shm}" ${RATE:+--rate "$RATE"} \
    -- "$@" || status=$?
  [[ $status == 77 ]] && exit 77
  return "$status"
}

# mpi_on_cluster <nodes> <ranks per node> <mpiexec arguments...>: the
# cluster's mpiexec with these arguments (passed as they are: no quoting).
mpi_on_cluster() {
  local nodes=$1 per_node=$2
  shift 2
  on_cluster "$nodes" "$per_node" bash -c 'exec "$DDL_CLUSTER_MPIEXEC" "$@"' mpiexec "$@"
}

# What the cluster's runs must leave: no namespace, link, bridge or state.
nothing_left() {
  local left
  left=$( (ip netns list 2> /dev/null | grep "^ddl-"; ip -br link 2> /dev/null | grep -E "^ddl[bv][0-9]"
    ls /run/ddl-cluster 2> /dev/null | grep -v '^subnet.lock$'
    pgrep -af "launcher-exec /run/ddl-cluster|^sleep 317$") | tr '\n' ' ')
  [[ -z $left ]] || fail "left behind $1: $left"
}

# A job whose ranks sleep (`sleep 317`, a name nothing else runs), and
# whether they run.
sleeping_ranks() { pgrep -f "^sleep 317$"; }
start_sleeping_job() {  # start_sleeping_job [setsid]: in the background, $runner its pid, once its ranks run
  "$@" "$simulate" --nodes 2 --ranks-per-node 1 -- bash -c '$DDL_CLUSTER_MPIEXEC -n 2 sleep 317' > "$work/out" 2>&1 &
  runner=$!
  for _ in $(seq 100); do [[ -n $(sleeping_ranks) ]] && break; sleep 0.1; done
  [[ -n $(sleeping_ranks) ]] || fail "the ranks never started: $(cat "$work/out")"
}
ranks_gone() {  # ranks_gone <after what>: within 5 s
  for _ in $(seq 50); do [[ -z $(sleeping_ranks) ]] && return; sleep 0.1; done
  fail "ranks left running after $1: $(pgrep -af "^sleep 317$")"
}

case $case_name in
  collectives)
    # Every collective and the node-local ranks, across nodes of 2 ranks,
    # of 1, and of 3 and 1 (ranks numbered node by node).
    for layout in "2 2 4" "2 1 2" "2 3,1 4"; do
      read -r nodes per_node ranks <<< "$layout"
      mpi_on_cluster "$nodes" "$per_node" -n "$ranks" "$build/tests/ddl_mpi_tests" \
        '--test-case=Communicator*,Collectives*' --test-suite-exclude=cuda > "$work/out" 2>&1 ||
        fail "$nodes nodes x $per_node ranks: $(tail -30 "$work/out")"
      grep -q "SKIPPED: the ranks are on several nodes" "$work/out" || fail "shm ran across nodes: $(tail "$work/out")"
      echo "ok: $ranks ranks on $nodes nodes ($per_node per node): every collective as on one host"
    done
    ;;
  training)
    # Every strategy on 2 nodes x 2 ranks saves the checkpoint of the same
    # job on one host, bit for bit: only the transport between nodes differs.
    # Pipelines are cut by parameters: a cut balanced by measured time may
    # differ between two runs, and with it the stages' dropout streams.
    common=(--train-limit 512 --test-limit 128 --epochs 1 --threads 1 --no-validation)
    configs=("data --allreduce ring" "data --allreduce rhd" "data --allreduce tree" "data --allreduce naive"
      "data --allreduce builtin" "data --shard parameters" "ps --servers 2" "tensor --tp 2"
      "pipeline --micro-batches 4 --balance parameters"
      "hybrid --dp 2 --pp 2 --schedule zb-h1 --balance parameters"
      "hybrid --dp 2 --pp 2 --shard optimizer --balance parameters")
    for i in "${!configs[@]}"; do
      read -r -a config <<< "${configs[$i]}"
      mpiexec -n 4 "$train" --parallel "${config[@]}" "${common[@]}" --checkpoint-dir "$work/host$i" \
        > "$work/host$i.out" 2>&1 || fail "one host, --parallel ${configs[$i]}: $(tail "$work/host$i.out")"
      mpi_on_cluster 2 2 -n 4 "$train" --parallel "${config[@]}" "${common[@]}" --checkpoint-dir "$work/nodes$i" \
        > "$work/nodes$i.out" 2>&1 ||
        fail "2 nodes, --parallel ${configs[$i]}: $(tail "$work/nodes$i.out")"
      cmp -s "$work/host$i/last.ckpt" "$work/nodes$i/last.ckpt" ||
        fail "--parallel ${configs[$i]}: 2 nodes saved another checkpoint than one host"
      # Rank 0 alone writes (the files one host writes, no temporary left)
      # and prints the result.
      [[ $(ls "$work/nodes$i") == "$(ls "$work/host$i")" ]] ||
        fail "--parallel ${configs[$i]}: 2 nodes wrote $(ls "$work/nodes$i"), one host $(ls "$work/host$i")"
      [[ $(grep -c "^test accuracy" "$work/nodes$i.out") == 1 ]] ||
        fail "--parallel ${configs[$i]}: not one final line: $(cat "$work/nodes$i.out")"
      echo "ok: --parallel ${configs[$i]}: 2 nodes x 2 ranks = one host, bit for bit"
    done
    ;;
  shm)
    # A shared-memory allreduce cannot span nodes: every rank stops, the
    # message naming each node's ranks.
    status=0
    mpi_on_cluster 2 2 -n 4 "$train" --parallel data --allreduce shm --train-limit 256 --test-limit 128 --epochs 1 \
      --threads 1 > "$work/out" 2>&1 || status=$?
    [[ $status != 0 ]] || fail "--allreduce shm across nodes trained: $(tail "$work/out")"
    grep -q "shm allreduce: needs every rank on one node, but the 4 ranks are on several (ranks 0-1 on node0, ranks 2-3 on node1); use ring (or rhd) across nodes" \
      "$work/out" || fail "no message naming the nodes: $(tail -20 "$work/out")"
    echo "ok: --allreduce shm across 2 nodes stops, naming the nodes: $(grep -o "the 4 ranks are on several ([^)]*)" "$work/out" | head -1)"
    ;;
  link-down)
    # A node cut off mid-training (its link down, as a failed switch port;
    # TCP between the nodes, so the cut reaches MPI's traffic): the job
    # ends within the stall timeout, the rank left naming the rank it lost
    # and that rank's host, no rank left running on the cut node, and the
    # last checkpoint whole (the job resumes from it on one host).
    export DDL_STALL_TIMEOUT=10
    job=(--parallel data --train-limit 2048 --test-limit 128 --threads 1 --no-validation --checkpoint-dir "$work/ck")
    {
      echo '#!/usr/bin/env bash'
      printf '$DDL_CLUSTER_MPIEXEC -n 2 %q' "$train"
      printf ' %q' "${job[@]}" --epochs 100
      printf ' > %q 2>&1 &\n' "$work/out"
      echo 'job=$!'
      printf 'for _ in $(seq 600); do [[ -f %q ]] && break; sleep 0.1; done\n' "$work/ck/last.ckpt"
      printf '[[ -f %q ]] || { echo "no checkpoint after 60 s"; kill $job; exit 1; }\n' "$work/ck/last.ckpt"
      echo 'sleep 1'
      echo 'ip link set "${DDL_CLUSTER_LINKS##* }" down'
      echo 'start=$SECONDS status=0'
      echo '(sleep 60; kill -KILL $job) 2> /dev/null &'  # a job that never notices is ended, and fails below
      echo 'watchdog=$!'
      echo 'wait $job || status=$?'
      echo 'kill $watchdog 2> /dev/null'
      printf 'echo "$status $((SECONDS - start))" > %q\n' "$work/result"
      echo 'node1=$(awk '\''$1 == "node1" {print $4}'\'' "$DDL_CLUSTER_DIR/nodes")'
      echo 'for _ in $(seq 100); do [[ -z $(ip netns pids "$node1") ]] && break; sleep 0.1; done'
      printf 'ip netns pids "$node1" > %q\n' "$work/left"
    } > "$work/cut.sh"
    chmod +x "$work/cut.sh"
    BETWEEN=tcp on_cluster 2 1 "$work/cut.sh" || fail "the cluster run failed: $(tail "$work/out")"
    read -r status seconds < "$work/result"
    [[ $status != 0 ]] || fail "the job went on after its node was cut off: $(tail "$work/out")"
    ((seconds <= DDL_STALL_TIMEOUT + 10)) || fail "the job took $seconds s to end (DDL_STALL_TIMEOUT=$DDL_STALL_TIMEOUT)"
    grep -qE "stalled: .*(with rank 1 on node1 has not completed|rank\(s\) 1 on node1 have not reached)" "$work/out" ||
      fail "no message naming rank 1 and node1: $(grep -v '^Epoch' "$work/out" | tail)"
    [[ ! -s $work/left ]] || fail "processes left on node1 after the job ended: $(cat "$work/left")"
    [[ $(ls "$work/ck") == "$(printf 'best.ckpt\nlast.ckpt')" ]] || fail "checkpoint folder: $(ls "$work/ck")"
    mpiexec -n 2 "$train" "${job[@]}" --epochs 1 --resume > "$work/resumed" 2>&1 ||
      fail "the last checkpoint does not resume: $(tail "$work/resumed")"
    grep -q "^Resumed from $work/ck/last.ckpt after epoch" "$work/resumed" ||
      fail "no resume: $(grep -v '^Epoch' "$work/resumed" | tail)"
    echo "ok: node1 cut off: the job ended after $seconds s (DDL_STALL_TIMEOUT=10), naming rank 1 on node1;" \
      "$(grep -o "after epoch [0-9]* (step [0-9]*)" "$work/resumed") resumes"
    ;;
  link-down-sum)
    # A node cut off while every rank sums metrics (a collective, which does
    # not say whom it waits for): the ranks left probe who answers and name
    # the cut node's ranks and host, as ddl-elastic needs to leave it out.
    export DDL_STALL_TIMEOUT=5
    {
      echo '#!/usr/bin/env bash'
      printf '$DDL_CLUSTER_MPIEXEC -n 4 %q sums > %q 2>&1 &\n' "$build/tests/ddl_mpi_abort_cases" "$work/out"
      echo 'job=$!'
      printf 'summing() { [[ $(grep -c ": summing$" %q 2> /dev/null) == 4 ]]; }\n' "$work/out"
      echo 'for _ in $(seq 600); do summing && break; sleep 0.1; done'
      echo 'summing || { echo "the ranks did not all sum within 60 s"; kill $job; exit 1; }'
      echo 'ip link set "${DDL_CLUSTER_LINKS##* }" down'
      echo '(sleep 60; kill -KILL $job) 2> /dev/null &'
      echo 'watchdog=$!'
      echo 'status=0; wait $job || status=$?'
      echo 'kill $watchdog 2> /dev/null'
      printf 'echo "$status" > %q\n' "$work/result"
    } > "$work/cut.sh"
    chmod +x "$work/cut.sh"
    BETWEEN=tcp on_cluster 2 2 "$work/cut.sh" || fail "the cluster run failed: $(tail "$work/out")"
    [[ $(cat "$work/result") != 0 ]] || fail "the job went on after its node was cut off: $(tail "$work/out")"
    grep -qE "^ddl: rank [01]: stalled: sum of 3 metric values .* rank\(s\) 2, 3 on node1 did not answer a probe" \
      "$work/out" || fail "no message naming ranks 2, 3 on node1: $(tail "$work/out")"
    echo "ok: node1 cut off during a sum: $(grep -o "rank(s) 2, 3 on node1 did not answer[^:]*" "$work/out" | head -1)"
    ;;
  logs)
    # Per-node logs as the launcher writes them (Hydra's patterns: %h the
    # node, %r the rank; a file only for a rank that printed to it): each
    # rank's output in a file named by the node it ran on, ddl-train's
    # result once, in rank 0's; the CSV log written once, by rank 0.
    mkdir -p "$work/logs" "$work/hello"
    patterns() { echo "-outfile-pattern $1/%h.rank%r.out -errfile-pattern $1/%h.rank%r.err"; }
    # shellcheck disable=SC2046,SC2016
    mpi_on_cluster 2 2 -n 4 $(patterns "$work/hello") bash -c 'echo "rank $PMI_RANK on $(hostname)"' \
      > "$work/out" 2>&1 || fail "the cluster run failed: $(tail "$work/out")"
    for r in 0 1 2 3; do
      [[ $(cat "$work/hello/node$((r / 2)).rank$r.out" 2> /dev/null) == "rank $r on node$((r / 2))" ]] ||
        fail "rank $r's output is not in node$((r / 2)).rank$r.out: $(ls "$work/hello" | tr '\n' ' ')"
    done
    # shellcheck disable=SC2046
    mpi_on_cluster 2 2 -n 4 $(patterns "$work/logs") "$train" --parallel data --train-limit 512 --test-limit 128 \
      --epochs 2 --threads 1 --no-validation --log-csv "$work/epochs.csv" > "$work/out" 2>&1 ||
      fail "the cluster run failed: $(tail "$work/out")"
    for file in "$work/logs"/*; do
      [[ $(basename "$file") =~ ^node([01])\.rank([0-3])\.(out|err)$ ]] &&
        ((BASH_REMATCH[1] == BASH_REMATCH[2] / 2)) || fail "a log named for another node: $(basename "$file")"
    done
    [[ $(cat "$work/logs"/*.out | grep -c "^test accuracy") == 1 ]] && grep -q "^test accuracy" "$work/logs/node0.rank0.out" ||
      fail "the result is not once, in rank 0's log: $(ls "$work/logs" | tr '\n' ' ')"
    [[ $(wc -l < "$work/epochs.csv") == 3 ]] || fail "the CSV log has not a header and 2 epochs: $(cat "$work/epochs.csv")"
    echo "ok: 2 nodes x 2 ranks: each rank's output in <node>.rank<r>.out of the node it ran on;" \
      "ddl-train's result once, in node0.rank0.out; the CSV log written once"
    ;;
  rate-limit)
    # A link limited to 1 Gbit/s (0.125 GB/s) shows where a user looks:
    # --allreduce auto's start-up line names the rate it measured between
    # the nodes, and in the timeline each allreduce of the largest bucket
    # (its "GB/s": bytes over the span's time; a bucket that fits the token
    # bucket's burst could pass faster) runs no faster than the link, where
    # the same job on one host runs several times faster.
    export DDL_STALL_TIMEOUT=10  # a finalize over TCP can hang (openucx/ucx#8738): the watchdog ends it
    job=(--parallel data --allreduce auto --train-limit 1024 --test-limit 128 --epochs 1 --threads 1 --no-validation)
    # Judged by its output and trace, not its exit status, which a
    # finalize ended by the watchdog may spoil.
    BETWEEN=tcp RATE=1gbit on_cluster 2 1 bash -c '"$DDL_CLUSTER_MPIEXEC" -n 2 "$@"; exit 0' _ "$train" "${job[@]}" \
      --timeline "$work/nodes.json" > "$work/nodes.out" 2>&1 || fail "the cluster run failed: $(tail "$work/nodes.out")"
    grep -q "^test accuracy" "$work/nodes.out" || fail "2 nodes did not train: $(tail "$work/nodes.out")"
    mpiexec -n 2 "$train" "${job[@]}" --timeline "$work/host.json" > "$work/host.out" 2>&1 ||
      fail "one host: $(tail "$work/host.out")"
    measured=$(grep -oE "measured [0-9.e+-]+ GB/s after [^ ]+ us between nodes" "$work/nodes.out" | head -1)
    [[ -n $measured ]] || fail "no measured link in the start-up line: $(grep -m1 "allreduce auto" "$work/nodes.out")"
    median_rate() {  # the median GB/s of the largest bucket's allreduces in a trace
      python3 -c 'import json, statistics, sys
spans = [e["args"] for e in json.load(open(sys.argv[1]))["traceEvents"]
         if e.get("name") == "allreduce" and "GB/s" in e.get("args", {})]
largest = max((s["bytes"] for s in spans), default=0)
rates = [s["GB/s"] for s in spans if s["bytes"] == largest]
print(f"{statistics.median(rates):.3g}" if rates else 0)' "$1"
    }
    host=$(median_rate "$work/host.json") nodes=$(median_rate "$work/nodes.json")
    awk -v m="$(echo "$measured" | awk '{print $2}')" 'BEGIN { exit !(m > 0 && m <= 0.2) }' ||
      fail "the start-up line did not measure the link's rate: $measured"
    awk -v h="$host" -v n="$nodes" 'BEGIN { exit !(n > 0 && n <= 0.14 && h >= 3 * n) }' ||
      fail "allreduces at $nodes GB/s across the limited link, $host GB/s on one host (expected <= 0.14 and 3x less)"
    echo "ok: 1 Gbit/s between 2 nodes: start-up line \"$measured\"; timeline: the largest bucket's allreduces at" \
      "$nodes GB/s (one host: $host GB/s)"
    ;;
  elastic)
    # A node cut off mid-training under ddl-elastic with the cluster's host
    # file: a stalled rank names the host of the rank it lost, ddl-elastic
    # leaves that host out and restarts the job from its last checkpoint on
    # the node left (its 2 ranks), and the job trains every epoch.
    export DDL_STALL_TIMEOUT=10
    elastic=$here/../../apps/ddl-elastic
    job=(--model lenet5 --parallel data --train-limit 2400 --test-limit 500 --threads 1 --batch-size 240 --epochs 6
      --checkpoint-dir "$work/ck" --checkpoint-every-steps 4)
    {
      echo '#!/usr/bin/env bash'
      printf '%q --ranks 4 --min-ranks 2 --launcher "$DDL_CLUSTER_MPIEXEC" --hostfile "$DDL_CLUSTER_DIR/hosts" -- %q' \
        "$elastic" "$train"
      printf ' %q' "${job[@]}"
      printf ' > %q 2> %q &\n' "$work/out" "$work/err"
      echo 'elastic=$!'
      printf 'for _ in $(seq 600); do [[ -f %q ]] && break; sleep 0.1; done\n' "$work/ck/last.ckpt"
      printf '[[ -f %q ]] || { echo "no checkpoint after 60 s"; kill $elastic; exit 1; }\n' "$work/ck/last.ckpt"
      echo 'ip link set "${DDL_CLUSTER_LINKS##* }" down'
      echo '(sleep 120; kill $elastic) 2> /dev/null &'
      echo 'watchdog=$!'
      echo 'status=0; wait $elastic || status=$?'
      echo 'kill $watchdog 2> /dev/null'
      printf 'echo "$status" > %q\n' "$work/result"
    } > "$work/cut.sh"
    chmod +x "$work/cut.sh"
    BETWEEN=tcp on_cluster 2 2 "$work/cut.sh" || fail "the cluster run failed: $(tail "$work/err")"
    [[ $(cat "$work/result") == 0 ]] || fail "ddl-elastic exited $(cat "$work/result"): $(tail -n 8 "$work/err")"
    grep -q "^ddl-elastic: the job failed (exit [0-9]*) after [0-9]* s; restart 1 of at most 3 from its last checkpoint on 2 rank(s), without node1 " \
      "$work/err" || fail "no restart on node0's 2 ranks: $(grep -v '^Epoch' "$work/err" | tail)"
    grep -q "^Resuming with changed settings (data-parallel ranks was 4, now 2)" "$work/out" ||
      fail "the resume on 2 ranks was not announced: $(grep -v '^Epoch' "$work/out" | tail)"
    grep -q "^Epoch 6/6 - " "$work/out" || fail "epoch 6 not trained: $(tail -n 5 "$work/out")"
    echo "ok: node1 cut off under ddl-elastic: $(grep -o "restart 1 .*" "$work/err" | head -1); every epoch trained"
    ;;
  cleanup)
    # An interrupted run (TERM, as a timeout sends) tears its cluster down,
    # its ranks included; one killed outright is cleaned by --clean.
    [[ $(id -u) == 0 ]] || { echo "SKIPPED: the simulated cluster needs root"; exit 77; }
    "$simulate" --clean  # what an earlier case left, were it killed by ctest's timeout
    nothing_left "before the test"
    start_sleeping_job
    kill -TERM "$runner"
    wait "$runner"
    ranks_gone TERM
    nothing_left "after TERM"
    echo "ok: a run ended by TERM leaves no namespace, link or rank behind"
    start_sleeping_job setsid
    kill -KILL -- "-$runner"  # the script; its command (mpiexec) runs in a session of its own, the ranks in their nodes
    wait "$runner" 2> /dev/null
    sleep 0.5
    [[ -n $(ip netns list | grep "^ddl-") ]] || fail "SIGKILL left nothing to clean: the test proves nothing"
    [[ -n $(sleeping_ranks) ]] || fail "the ranks ended with the script: the test would not show --clean ends them"
    "$simulate" --clean
    ranks_gone --clean
    nothing_left "after SIGKILL and --clean"
    echo "ok: a run killed outright is cleaned by simulate.sh --clean, its ranks included"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
