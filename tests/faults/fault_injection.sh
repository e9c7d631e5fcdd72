#!/usr/bin/env bash
# Fault injection against ddl-train, one case per ctest test:
#   fault_injection.sh <path to ddl-train> <case>
# Each case breaks a run on purpose (a rank killed or frozen mid-step, the
# disk filling during a checkpoint, a diverging loss) and checks the exit
# code, the time the job took to end, the message, and that the last good
# checkpoint still loads: a resumed run finishes, and where the checkpoint
# was taken mid-epoch, exactly as the uninterrupted run does.
set -uo pipefail
train=$1
case_name=$2
work=$(mktemp -d)
cleanup() {
  # A case that failed half-way may leave its job behind.
  pkill -KILL -f -- "--checkpoint-dir $work/" 2> /dev/null
  [[ -n "${mounted:-}" ]] && umount "$work/disk"
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; exit 1; }

# A short data-parallel run: epochs of 10 steps, checkpointed every 4.
args=(--model lenet5 --train-limit 2560 --test-limit 500 --threads 1 --batch-size 256 --parallel data)

# The pid of rank $1 of the job whose checkpoints go to $2.
rank_pid() {
  local p
  for p in $(pgrep -f -- "--checkpoint-dir $2"); do
    if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "PMI_RANK=$1"; then echo "$p"; return; fi
  done
}

# Waits (at most 60 s) until the checkpoint $1 exists: the first is taken
# 4 steps into epoch 1, and the job has 26 steps left.
wait_for_checkpoint() {
  local deadline=$((SECONDS + 60))
  while [[ ! -e $1 ]]; do
    ((SECONDS < deadline)) || fail "no checkpoint at $1 within 60 s"
    sleep 0.05
  done
}

# Once the job's first checkpoint is in $2, sends signal $1 to its rank 1;
# sets $pid, and $start to when the signal went.
signal_rank_1() {
  wait_for_checkpoint "$2/last.ckpt"
  pid=$(rank_pid 1 "$2")
  [[ -n $pid ]] || fail "rank 1 not found"
  start=$(date +%s.%N)
  kill "-$1" "$pid"
}

# Starts the job in the background: mpiexec's pid in $job.
start_job() {
  local dir=$1
  shift
  (exec mpiexec -n 2 "$train" "${args[@]}" --epochs 3 --checkpoint-dir "$dir" --checkpoint-every-steps 4 "$@" \
     > "$work/out" 2> "$work/err") &
  job=$!
}

# Waits for the job; checks its exit code is not 0 and that it ended within
# $1 seconds of $2 (a time from date +%s.%N).
expect_failed_within() {
  wait "$job"
  local rc=$? took
  took=$(echo "$(date +%s.%N) - $2" | bc)
  [[ $rc -ne 0 ]] || fail "the job exited 0: $(tail -n 3 "$work/out")"
  (($(echo "$took <= $1" | bc))) || fail "the job took $took s to end, more than $1 s"
  echo "ok: exit $rc, $took s after the fault"
}

# The final line of an uninterrupted run, to compare resumed runs with.
reference() {
  mpiexec -n 2 "$train" "${args[@]}" --epochs 3 --checkpoint-dir "$work/reference" > "$work/reference.out" 2>&1 ||
    fail "the reference run failed: $(cat "$work/reference.out")"
  grep "^test accuracy" "$work/reference.out" | sed 's/; [0-9]* epoch(s) in .*//'
}

# Resumes from the checkpoint in $1 to the end and checks the result equals
# the uninterrupted run's $2.
expect_exact_resume() {
  mpiexec -n 2 "$train" "${args[@]}" --epochs 3 --checkpoint-dir "$1" --resume > "$work/resumed" 2>&1 ||
    fail "resuming from $1 failed: $(cat "$work/resumed")"
  # Mid-epoch, unless a loaded machine let the job reach an epoch's end first.
  grep -qE "^Resumed from $1/last.ckpt (in epoch [0-9] after batch|after epoch)" "$work/resumed" ||
    fail "not resumed: $(head -n 20 "$work/resumed")"
  local result
  result=$(grep "^test accuracy" "$work/resumed" | sed 's/; [0-9]* epoch(s) in .*//')
  [[ $result == "$2" ]] || fail "the resumed run ended with '$result', the uninterrupted one with '$2'"
  echo "ok: $(grep "^Resumed" "$work/resumed"), and ended as the uninterrupted run: $result"
}

case $case_name in
  kill-rank)
    # kill -9 of a rank mid-step ends the job at once; the checkpoint before stays.
    expected=$(reference)
    start_job "$work/ckpt"
    signal_rank_1 KILL "$work/ckpt"
    expect_failed_within 10 "$start"
    cat "$work/out" "$work/err" | grep -q "Killed (signal 9)" || fail "no word of the killed rank: $(tail -n 5 "$work/out")"
    expect_exact_resume "$work/ckpt" "$expected"
    ;;
  stop-rank)
    # A frozen rank (SIGSTOP) is named by rank 0 once the stall timeout passes.
    expected=$(reference)
    export DDL_STALL_TIMEOUT=3
    start_job "$work/ckpt"
    signal_rank_1 STOP "$work/ckpt"
    expect_failed_within 15 "$start"
    kill -KILL "$pid" 2> /dev/null
    # Rank 0 names rank 1 wherever the stall is: at a step's arrival check,
    # a message, or a collective (of two ranks, the other is the one missing).
    grep -qE "stalled: .*(rank\(s\) 1 on [^ ]+ have not reached|with rank 1 on [^ ]+ has not completed)" \
      "$work/err" || fail "no word of the stall: $(tail -n 5 "$work/err")"
    unset DDL_STALL_TIMEOUT
    expect_exact_resume "$work/ckpt" "$expected"
    ;;
  disk-full)
    # The disk fills up between two checkpoints: the write fails, names the
    # reason, and the checkpoint already there stays whole.
    if [[ $(id -u) -ne 0 ]] || ! mkdir "$work/disk" || ! mount -t tmpfs -o size=32m tmpfs "$work/disk" 2> /dev/null; then
      echo "skipped: mounting a small tmpfs needs root (and a mount namespace that allows it)"
      exit 77
    fi
    mounted=1
    expected=$(reference)
    start_job "$work/disk/ckpt"
    wait_for_checkpoint "$work/disk/ckpt/last.ckpt"
    cp "$work/disk/ckpt/last.ckpt" "$work/before-full.ckpt"
    # What the job had just written stays; what it writes next finds no room.
    head -c 64m /dev/zero > "$work/disk/filler" 2> /dev/null
    start=$(date +%s.%N)
    expect_failed_within 30 "$start"
    grep -q "No space left on device" "$work/err" || fail "no word of the full disk: $(tail -n 5 "$work/err")"
    ls "$work/disk/ckpt" | grep -q "\.tmp\." && fail "a temp file was left: $(ls "$work/disk/ckpt")"
    rm "$work/disk/filler"
    mkdir "$work/ckpt" && cp "$work/disk/ckpt/last.ckpt" "$work/ckpt/"
    expect_exact_resume "$work/ckpt" "$expected"
    ;;
  nan-loss)
    # A diverging run (SGD at lr 1e6 on mnist_cnn: NaN within a few steps)
    # stops at its first non-finite step, before the update, and the good
    # checkpoint of the epoch before stays and resumes.
    nan_args=(--model mnist_cnn --train-limit 512 --test-limit 128 --threads 1 --batch-size 64 --parallel data
              --optimizer sgd --checkpoint-dir "$work/ckpt")
    mpiexec -n 2 "$train" "${nan_args[@]}" --lr 0.01 --epochs 1 > "$work/out" 2>&1 ||
      fail "the good epoch failed: $(cat "$work/out")"
    cp "$work/ckpt/last.ckpt" "$work/good.ckpt"
    start=$(date +%s.%N)
    # The divergence guard off: this is the NaN check's case (ddl_train_cli_diverged has the guard's).
    (exec mpiexec -n 2 "$train" "${nan_args[@]}" --lr 1e6 --epochs 2 --resume --divergence-factor 0 > "$work/out" \
      2> "$work/err") &
    job=$!
    expect_failed_within 30 "$start"
    grep -qE "the loss is (-?nan|-?inf|not finite) at epoch 2, step [0-9]+ of 8 .*before this step's update" \
      "$work/err" || fail "no message naming the step: $(tail -n 5 "$work/err")"
    cmp -s "$work/ckpt/last.ckpt" "$work/good.ckpt" || fail "the diverged run replaced last.ckpt"
    mpiexec -n 2 "$train" "${nan_args[@]}" --lr 0.01 --epochs 2 --resume > "$work/resumed" 2>&1 ||
      fail "the kept checkpoint does not resume: $(cat "$work/resumed")"
    grep -q "^test accuracy" "$work/resumed" || fail "no final line: $(tail -n 3 "$work/resumed")"
    echo "ok: stopped at '$(grep -o "the loss is [^:]*" "$work/err" | head -n 1)'; last.ckpt kept and resumed"
    ;;
  elastic)
    # ddl-elastic restarts a job whose rank was killed from its last
    # checkpoint on one rank fewer; it still trains every epoch and learns.
    elastic=$(dirname "$0")/../../apps/ddl-elastic
    elastic_args=(--model lenet5 --train-limit 2400 --test-limit 500 --threads 1 --batch-size 240 --epochs 3
                  --parallel data --checkpoint-dir "$work/ckpt" --checkpoint-every-steps 4)
    ("$elastic" --ranks 3 --min-ranks 2 -- "$train" "${elastic_args[@]}" > "$work/out" 2> "$work/err") &
    job=$!
    signal_rank_1 KILL "$work/ckpt"
    wait "$job" || fail "ddl-elastic exited $?: $(tail -n 5 "$work/err")"
    grep -q "^ddl-elastic: the job failed (exit [0-9]*) after [0-9]* s; restart 1 of at most 3 .* on 2 rank(s)" \
      "$work/err" || fail "no restart on 2 ranks: $(cat "$work/err")"
    grep -q "^Resuming with changed settings (data-parallel ranks was 3, now 2)" "$work/out" ||
      fail "the resume on 2 ranks was not announced: $(cat "$work/out")"
    grep -q "^Epoch 3/3 - " "$work/out" || fail "epoch 3 not trained: $(tail -n 5 "$work/out")"
    accuracy=$(grep "^test accuracy" "$work/out" | tail -n 1 | sed 's/test accuracy \([0-9.]*\)%.*/\1/')
    (($(echo "$accuracy >= 50" | bc))) || fail "the restarted run reached only $accuracy% test accuracy"
    echo "ok: rank 1 killed, restarted on 2 ranks, 3 epochs trained, test accuracy $accuracy%"
    # What a restart cannot mend is not retried.
    "$elastic" --ranks 2 --min-ranks 1 -- "$train" "${elastic_args[@]}" --bogus > "$work/out" 2> "$work/err"
    [[ $? -eq 2 ]] && grep -q "usage error (exit 2): not restarting" "$work/err" ||
      fail "a usage error was retried: $(cat "$work/err")"
    echo "ok: a usage error is not retried"
    ;;
  *)
    fail "unknown case '$case_name'"
    ;;
esac
