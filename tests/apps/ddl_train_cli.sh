#!/usr/bin/env bash
# ddl-train's command line, one case per ctest test:
#   ddl_train_cli.sh <path to ddl-train> <case> [<path to check_trace>]
# Each case prints what it checked and exits non-zero with the reason when a
# check fails.
set -uo pipefail
train=$1
case_name=$2
check_trace=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*"; exit 1; }

# Runs ddl-train with the remaining arguments; expects exit code $1, one
# line on stderr containing $2, and nothing on stdout.
expect_usage_error() {
  local code=$1 text=$2
  shift 2
  "$train" "$@" > "$work/out" 2> "$work/all-err"
  local rc=$?
  # A CUDA build without a GPU says so once on stderr; that notice is not
  # part of the error.
  grep -v "^ddl: no CUDA device" "$work/all-err" > "$work/err"
  [[ $rc -eq $code ]] || fail "ddl-train $* exited $rc, expected $code; stderr: $(cat "$work/err")"
  [[ $(wc -l < "$work/err") -eq 1 ]] || fail "ddl-train $*: expected one line on stderr, got: $(cat "$work/err")"
  grep -qF -- "$text" "$work/err" || fail "ddl-train $*: stderr lacks '$text': $(cat "$work/err")"
  [[ ! -s "$work/out" ]] || fail "ddl-train $*: unexpected stdout: $(cat "$work/out")"
  echo "ok: ddl-train $* -> exit $code, '$(cat "$work/err")'"
}

case $case_name in
  help)
    "$train" --help > "$work/out" || fail "--help exited $?"
    for option in --model --data --epochs --batch-size --optimizer --lr --device --seed --checkpoint-dir --resume \
      --log-csv --log-jsonl --threads --quiet --placement --stages --micro-batches --schedule --chunks --balance --split \
      --dp --pp --accumulate --on-nonfinite --samples --image-size --precision --timeline --timeline-layers --plot \
      --search --group-size --overlap --no-overlap --divergence-factor --lr-batch --scale-lr --weight-decay --shard; do
      grep -qF -- "$option" "$work/out" || fail "--help does not document $option"
    done
    grep -qF "=12" "$work/out" || fail "--help does not show the default of --epochs"
    echo "ok: --help documents every option with its default"
    ;;
  bad-options)
    expect_usage_error 2 "--epochs" --epochs 0
    expect_usage_error 2 "--bogus" --bogus
    expect_usage_error 2 "--model" --model no_such_model
    expect_usage_error 2 "--optimizer" --optimizer rmsprop
    expect_usage_error 2 "--device" --device gpu:0
    expect_usage_error 2 "--device cuda:3" --device cuda:3
    expect_usage_error 2 "--device cpu:5: device cpu:5 does not exist" --device cpu:5
    if ! nvidia-smi -L > /dev/null 2>&1; then
      # A GPU the user asked for and the machine lacks: fixed by an option.
      expect_usage_error 2 "--device cuda: device cuda:0 does not exist" --device cuda
    fi
    expect_usage_error 2 "--seed: -1 is not an integer from 0 to 18446744073709551615" --seed -1
    expect_usage_error 2 "--seed: 18446744073709551616 is not an integer" --seed 18446744073709551616
    expect_usage_error 2 "--momentum: nan is not a finite number >= 0 and <= 0.999999" --optimizer sgd --momentum nan
    expect_usage_error 2 "--bucket-mb: 1e300 is not a finite number > 0 and <= 1048576" --bucket-mb 1e300
    expect_usage_error 2 "--lr-batch" --lr-batch 0
    expect_usage_error 2 "--divergence-factor 0.5 would stop healthy steps" --divergence-factor 0.5
    expect_usage_error 2 "--divergence-factor: nan is not a finite number >= 0" --divergence-factor nan
    expect_usage_error 2 "--resume needs --checkpoint-dir" --resume
    expect_usage_error 2 "--shard: shards the state of data-parallel ranks" --shard optimizer --train-limit 64
    expect_usage_error 2 "--shard: fsdp not in {none,optimizer,gradients,parameters}" --shard fsdp
    expect_usage_error 2 "--group-size applies to --search" --group-size 2
    expect_usage_error 2 "--search: 'data' cannot be searched" --search "data=/tmp"
    expect_usage_error 2 "--search, configuration lr=abc: --lr: 'abc' is not a number" --search "lr=1,abc"
    expect_usage_error 2 "does not combine with --checkpoint-dir" --search "lr=1,2" --checkpoint-dir "$work/c"
    expect_usage_error 2 "--precision" --precision half
    # Refused on a CPU without AVX512-BF16, and on a GPU anywhere.
    expect_usage_error 2 "--precision bf16" --precision bf16 --device cuda
    expect_usage_error 2 "--nesterov" --nesterov
    expect_usage_error 2 "--recompute 2-x: '2-x': no layer is named 'x'" --recompute 2-x --train-limit 64
    expect_usage_error 2 "--recompute 5-6,0-1: Sequential::recompute: the range 0-1 does not come after the range 5-6" \
      --recompute 5-6,0-1 --train-limit 64
    expect_usage_error 2 "--recompute 1-3: a pipeline recomputes whole stages; give --recompute all" \
      --parallel pipeline --recompute 1-3
    expect_usage_error 2 "--pack-weights applies to --parallel pipeline or hybrid" --pack-weights off
    expect_usage_error 2 "--accumulate" --accumulate 0
    expect_usage_error 2 "--placement places layers inside one process" --placement 0-10=cpu:0 --parallel data
    expect_usage_error 2 "--micro-batches applies to --parallel pipeline" --micro-batches 4
    expect_usage_error 2 "--weight-gradients applies to --parallel pipeline" --weight-gradients micro-batch
    expect_usage_error 2 "--weight-gradients" --parallel pipeline --weight-gradients sometimes
    expect_usage_error 2 "--lr: nan is not a finite number > 0" --lr nan
    expect_usage_error 2 "--weight-decay: 1e999 is not a finite number >= 0" --weight-decay 1e999
    expect_usage_error 2 "--threads 100000: this process may run on" --threads 100000
    DDL_NUM_THREADS=100000 expect_usage_error 2 "DDL_NUM_THREADS=100000 is not an integer from 1 to 1024"
    DDL_STALL_TIMEOUT=abc expect_usage_error 2 "DDL_STALL_TIMEOUT=abc is not a positive number"
    DDL_STALL_TIMEOUT=1e99 expect_usage_error 2 "DDL_STALL_TIMEOUT=1e99 is not a positive number up to 604800"
    DDL_RING_SEGMENT=-5 expect_usage_error 2 "DDL_RING_SEGMENT=-5 is not a positive byte count"
    DDL_CPU_PRECISION=fp8 expect_usage_error 2 "DDL_CPU_PRECISION=fp8 is not one of float32, bf16"
    DDL_CUDA_CONV=fast expect_usage_error 2 "DDL_CUDA_CONV=fast is not one of deterministic, fastest, benchmark"
    DDL_OP_FUSION=yes expect_usage_error 2 "DDL_OP_FUSION=yes is not one of on, off"
    ;;
  options)
    # Each training option changes what is trained (the checkpoint's bytes)
    # or what is written, and two runs alike give the same bytes, so an
    # option that stopped having its effect fails here.
    base=(--train-limit 512 --test-limit 128 --batch-size 64 --threads 1 --epochs 2 --seed 3)
    b256=("${base[@]/#64/256}")
    runs=0
    weights_of() {  # weights_of NAME ddl-train arguments...: trains, keeps NAME's last.ckpt
      local name=$1
      shift
      rm -rf "$work/ckpt"
      "$train" "$@" --checkpoint-dir "$work/ckpt" > "$work/$name.out" 2>&1 || fail "ddl-train $* exited $?: $(cat "$work/$name.out")"
      cp "$work/ckpt/last.ckpt" "$work/$name.ckpt"
      runs=$((runs + 1))
    }
    differs() { cmp -s "$work/$1.ckpt" "$work/$2.ckpt" && fail "$3 changed nothing: $1 and $2 trained the same weights"; }
    same() { cmp -s "$work/$1.ckpt" "$work/$2.ckpt" || fail "$3: $1 and $2 trained different weights"; }
    for optimizer in sgd adam adagrad adadelta; do
      weights_of "$optimizer" "${base[@]}" --optimizer "$optimizer"
      weights_of "$optimizer-again" "${base[@]}" --optimizer "$optimizer"
      same "$optimizer" "$optimizer-again" "two runs alike"
      weights_of "$optimizer-decay" "${base[@]}" --optimizer "$optimizer" --weight-decay 0.1
      differs "$optimizer" "$optimizer-decay" "--weight-decay with --optimizer $optimizer"
    done
    weights_of momentum "${base[@]}" --optimizer sgd --momentum 0.9
    differs sgd momentum "--momentum"
    weights_of nesterov "${base[@]}" --optimizer sgd --momentum 0.9 --nesterov
    differs momentum nesterov "--nesterov"
    # --scale-lr linear from --lr-batch 128 to batch 256 doubles the rate;
    # from --lr-batch 256 it is the rate as given.
    weights_of b256 "${b256[@]}" --optimizer sgd
    weights_of b256-linear "${b256[@]}" --optimizer sgd --scale-lr linear
    differs b256 b256-linear "--scale-lr linear"
    grep -q "SGD (lr 0.02: 0.01 scaled by --scale-lr linear from batch 128 to 256)" "$work/b256-linear.out" ||
      fail "the header does not show the scaled rate: $(grep -m1 "lr " "$work/b256-linear.out")"
    weights_of b256-sqrt "${b256[@]}" --optimizer sgd --scale-lr sqrt
    differs b256-linear b256-sqrt "--scale-lr sqrt against linear"
    weights_of b256-tuned "${b256[@]}" --optimizer sgd --scale-lr linear --lr-batch 256
    same b256 b256-tuned "--lr-batch 256 at batch 256 leaves the rate as it is"
    # The step schedule drops x0.1 every --lr-step epochs: after 1, the
    # second epoch trains at a tenth; after 2, not within these 2 epochs.
    weights_of step-1 "${base[@]}" --optimizer sgd --lr-schedule step --lr-step 1
    differs sgd step-1 "--lr-schedule step --lr-step 1"
    weights_of step-2 "${base[@]}" --optimizer sgd --lr-schedule step --lr-step 2
    same sgd step-2 "--lr-step 2 drops the rate only after the last of 2 epochs"
    weights_of cosine "${base[@]}" --optimizer sgd --lr-schedule cosine
    differs sgd cosine "--lr-schedule cosine"
    # A rate too small to change the validation accuracy: patience 1 stops
    # after the second of 5 epochs.
    "$train" --train-limit 256 --test-limit 128 --batch-size 64 --threads 1 --epochs 5 --lr 1e-30 --early-stopping 1 \
      > "$work/out" 2>&1 || fail "early stopping exited $?: $(cat "$work/out")"
    grep -q "^Epoch 2: early stopping, val_accuracy has not improved" "$work/out" && ! grep -q "^Epoch 3/5" "$work/out" ||
      fail "--early-stopping 1 did not stop after epoch 2: $(cat "$work/out")"
    # --log-jsonl: one JSON object per epoch, with the epoch and the metrics.
    "$train" "${base[@]}" --log-jsonl "$work/log.jsonl" > "$work/out" 2>&1 || fail "--log-jsonl exited $?"
    [[ $(wc -l < "$work/log.jsonl") -eq 2 ]] || fail "--log-jsonl wrote $(wc -l < "$work/log.jsonl") lines for 2 epochs"
    python3 -c 'import json, sys
lines = [json.loads(line) for line in open(sys.argv[1])]
assert [line["epoch"] for line in lines] == [1, 2], lines
assert all(0 <= line["val_accuracy"] <= 1 and line["loss"] > 0 for line in lines), lines' "$work/log.jsonl" ||
      fail "--log-jsonl is not one JSON object per epoch with the metrics: $(cat "$work/log.jsonl")"
    # --noise: materials_mlp's stress curves carry it, so the data and the
    # weights trained on them change.
    materials=(--model materials_mlp --samples 300 --epochs 1 --threads 1)
    weights_of quiet "${materials[@]}" --noise 0
    weights_of noisy "${materials[@]}" --noise 50
    differs quiet noisy "--noise 50"
    echo "ok: $runs trainings: --weight-decay (every optimizer), --momentum, --nesterov, --scale-lr, --lr-batch, --lr-schedule," \
      "--lr-step, --early-stopping, --log-jsonl and --noise each have their effect"
    ;;
  timeline)
    # --timeline: one trace of every rank on one clock, checked by
    # check_trace (spans closed and nested, every rank, allreduces aligned);
    # a single process's and a pipeline's too; refusals before training.
    args=(--train-limit 512 --test-limit 256 --batch-size 64 --epochs 1 --threads 1)
    expect_usage_error 2 "--timeline-layers needs --timeline" --timeline-layers
    expect_usage_error 2 "--timeline $work/none/t.json: the directory $work/none does not exist" "${args[@]}" \
      --timeline "$work/none/t.json"
    "$train" "${args[@]}" --timeline "$work/one.json" > "$work/out" 2>&1 || fail "1 process exited $?: $(cat "$work/out")"
    grep -q "^timeline: $work/one.json" "$work/out" || fail "no timeline line: $(cat "$work/out")"
    "$check_trace" "$work/one.json" 1 step forward backward update "next batch" "make batch" evaluate || exit 1
    # (DDL_OP_FUSION=on: the span of the first Conv2d and its ReLU, fused, is named below.)
    DDL_OP_FUSION=on mpiexec -n 2 "$train" --parallel data "${args[@]}" --bucket-mb 0.5 --overlap on --timeline "$work/data.json" --timeline-layers \
      > "$work/out" 2>&1 || fail "2-rank run exited $?: $(cat "$work/out")"
    [[ $(grep -c "^timeline: " "$work/out") -eq 1 ]] || fail "not one timeline line: $(cat "$work/out")"
    "$check_trace" "$work/data.json" 2 step forward backward allreduce "wait for gradients" update "next batch" \
      "make batch" evaluate "0+1 Conv2d+ReLU" AccumulateGrad || exit 1
    mpiexec -n 2 "$train" --parallel pipeline "${args[@]}" --timeline "$work/pipeline.json" > "$work/out" 2>&1 ||
      fail "2-stage pipeline exited $?: $(cat "$work/out")"
    "$check_trace" "$work/pipeline.json" 2 step forward backward update "wait for sends" || exit 1
    # The figure script draws it (gnuplot and python3 come with install-deps.sh).
    python3 "$(dirname "$0")/../../bench/plot_timeline.py" "$work/data.json" "$work/data.png" > "$work/plot" 2>&1 ||
      fail "plot_timeline.py failed: $(cat "$work/plot")"
    [[ $(head -c 8 "$work/data.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "no PNG drawn"
    [[ ! -e "$work/none" ]] || fail "a refused run made the directory"
    ls "$work" | grep -q "\.tmp\." && fail "temporary trace files were left: $(ls "$work")"
    echo "ok: --timeline writes one checked trace for 1 process, 2 data-parallel ranks and a 2-stage pipeline"
    ;;
  search)
    # --search trains every configuration of the grid as that command line
    # alone would (same seed: the same accuracy), marks the best row, and
    # gives the same table dealt over 2 groups of 1 rank; a group of 2 ranks
    # trains each configuration data-parallel.
    args=(--train-limit 256 --test-limit 128 --epochs 1 --threads 1)
    grid="lr=0.01,1.0;batch-size=32,64"
    # The rows of a table: lr, batch size and accuracy (not the seconds).
    rows() { awk '$1 ~ /^[0-9.]+$/ && NF >= 4 {print $1, $2, $3}' "$1"; }
    "$train" "${args[@]}" --search "$grid" > "$work/search" 2>&1 || fail "--search exited $?: $(cat "$work/search")"
    rows "$work/search" > "$work/rows"
    [[ $(wc -l < "$work/rows") -eq 4 ]] || fail "not 4 configurations in the table: $(cat "$work/search")"
    best=$(sort -s -k3,3gr "$work/rows" | head -n 1)  # ties: the first in grid order, as the table picks
    grep -qE "^best: lr=$(cut -d' ' -f1 <<< "$best") batch-size=$(cut -d' ' -f2 <<< "$best") " "$work/search" ||
      fail "the best line does not name the most accurate row ($best): $(cat "$work/search")"
    [[ $(grep -c '  \*$' "$work/search") -eq 1 ]] || fail "not exactly one row marked best: $(cat "$work/search")"
    "$train" "${args[@]}" --lr 1.0 --batch-size 32 > "$work/alone" 2>&1 || fail "the lone run exited $?"
    alone=$(sed -nE 's/^test accuracy ([0-9.]+)%.*/\1/p' "$work/alone")
    row=$(awk '$1 == "1.0" && $2 == "32" {print $3}' "$work/rows")
    [[ -n "$alone" && $(awk -v r="$row" 'BEGIN {printf "%.2f", 100 * r}') == "$alone" ]] ||
      fail "lr=1.0 batch-size=32 reached $row in the search, $alone% alone"
    echo "ok: --search trains each configuration as it trains alone ($alone%) and names the best: $best"
    DDL_STALL_TIMEOUT=60 timeout 120 mpiexec -n 2 "$train" "${args[@]}" --search "$grid" > "$work/search2" 2>&1 ||
      fail "--search on 2 groups exited $?: $(cat "$work/search2")"
    rows "$work/search2" | cmp -s - "$work/rows" || fail "2 groups of 1 gave another table: $(cat "$work/search2")"
    grep -q "on 2 group(s) of 1 rank(s)" "$work/search2" || fail "not dealt to 2 groups: $(cat "$work/search2")"
    echo "ok: 2 groups of 1 rank give the same table"
    DDL_STALL_TIMEOUT=60 timeout 120 mpiexec -n 2 "$train" "${args[@]}" --search "$grid" --group-size 2 \
      > "$work/search3" 2>&1 || fail "--search on a group of 2 exited $?: $(cat "$work/search3")"
    [[ $(rows "$work/search3" | wc -l) -eq 4 ]] && grep -q "on 1 group(s) of 2 rank(s)" "$work/search3" ||
      fail "a group of 2 ranks did not train the 4 configurations: $(cat "$work/search3")"
    echo "ok: a group of 2 ranks trains the 4 configurations data-parallel"
    ;;
  plot)
    # --plot: the curves drawn after every epoch, kept across a resume (the
    # checkpoint carries them); refused before training without gnuplot or
    # with nowhere to write.
    args=(--train-limit 256 --test-limit 128 --batch-size 64 --threads 1)
    expect_usage_error 2 "--plot $work/none/c.png: the directory $work/none does not exist" "${args[@]}" \
      --plot "$work/none/c.png"
    args+=(--plot "$work/curves.png")
    # (PATH holds no gnuplot: only ddl-train runs under it.)
    PATH=/nonexistent "$train" "${args[@]}" > "$work/out" 2> "$work/err"
    rc=$?
    [[ $rc -eq 2 ]] && grep -q -- "--plot needs gnuplot on PATH" "$work/err" ||
      fail "--plot without gnuplot exited $rc: $(cat "$work/err")"
    "$train" "${args[@]}" --epochs 1 --checkpoint-dir "$work/ckpt" > "$work/out" 2>&1 || fail "exited $?: $(cat "$work/out")"
    [[ $(head -c 8 "$work/curves.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "no PNG after epoch 1"
    first=$(stat -c %s "$work/curves.png")
    "$train" "${args[@]}" --epochs 2 --checkpoint-dir "$work/ckpt" --resume > "$work/out" 2>&1 ||
      fail "the resumed run exited $?: $(cat "$work/out")"
    [[ $(stat -c %s "$work/curves.png") -ne $first ]] || fail "the resumed run did not redraw the curves"
    ls "$work" | grep -q "\.tmp\." && fail "temporary plot files were left: $(ls "$work")"
    echo "ok: --plot draws the curves after each epoch and across a resume; refusals before training"
    ;;
  cpu-libraries)
    # CUDA builds: a CPU training run never maps cuBLAS, which is opened at
    # the first GPU matrix product (core/cuda/cublas_library.hpp), not when
    # libddl loads. The loader's trace lists every library it looks for.
    LD_DEBUG=libs "$train" --train-limit 256 --test-limit 128 --batch-size 64 --threads 1 --epochs 1 \
      --device cpu > "$work/out" 2> "$work/libs" || fail "exited $?: $(tail -5 "$work/libs")"
    grep -q "find library=libddl\.so" "$work/libs" || fail "LD_DEBUG=libs traced no load of libddl"
    grep -m 3 "libcublas" "$work/libs" && fail "a CPU run loaded cuBLAS (lines above)"
    echo "ok: a CPU training run loads libddl and never cuBLAS"
    ;;
  cluster)
    # scripts/cluster/: both scripts parse; the host-file one runs here
    # with localhost as the only node, and the Slurm one through a stand-in
    # srun that starts its ranks with mpiexec (no Slurm on this machine).
    scripts=$(dirname "$0")/../../scripts/cluster
    for script in "$scripts"/*; do bash -n "$script" || fail "$script does not parse"; done
    tiny=(--epochs 1 --train-limit 512 --test-limit 256 --batch-size 64 --quiet)
    printf '# the only node\nlocalhost:2\n' > "$work/hosts"
    DDL=$train "$scripts/mpiexec-hostfile.sh" "$work/hosts" 2 "${tiny[@]}" > "$work/out" 2>&1 ||
      fail "mpiexec-hostfile.sh exited $?: $(cat "$work/out")"
    grep -q "over 2 ranks" "$work/out" || fail "mpiexec-hostfile.sh did not train on 2 ranks: $(cat "$work/out")"
    "$scripts/mpiexec-hostfile.sh" "$work/hosts" 0 > "$work/out" 2>&1
    [[ $? -eq 2 ]] && grep -q "RANKS_PER_NODE must be a positive integer" "$work/out" || fail "0 ranks per node: $(cat "$work/out")"
    : > "$work/empty"
    "$scripts/mpiexec-hostfile.sh" "$work/empty" 1 > "$work/out" 2>&1
    [[ $? -eq 2 ]] && grep -q "names no node" "$work/out" || fail "an empty host file: $(cat "$work/out")"
    mkdir "$work/bin"
    printf '#!/usr/bin/env bash\nwhile [[ $1 == --* ]]; do shift; done\nexec mpiexec -n "$SLURM_NTASKS" "$@"\n' \
      > "$work/bin/srun"
    chmod +x "$work/bin/srun"
    PATH=$work/bin:$PATH SLURM_NTASKS=2 SLURM_CPUS_PER_TASK=1 DEVICE=cpu DDL=$train CHECKPOINTS=$work/ckpt \
      bash "$scripts/slurm-data-parallel.sbatch" "${tiny[@]}" > "$work/out" 2>&1 ||
      fail "the Slurm script exited $?: $(cat "$work/out")"
    grep -q "over 2 ranks" "$work/out" && [[ -f $work/ckpt/last.ckpt ]] ||
      fail "the Slurm script did not train on 2 ranks with checkpoints: $(cat "$work/out")"
    echo "ok: the cluster scripts parse, and run here on localhost (the Slurm one through a stand-in srun)"
    ;;
  missing-data)
    expect_usage_error 2 "no such directory '$work/none'" --data "$work/none"
    mkdir "$work/empty"
    expect_usage_error 2 "train-images-idx3-ubyte" --data "$work/empty"
    ;;
  resume)
    args=(--train-limit 512 --test-limit 256 --batch-size 64 --checkpoint-dir "$work/ckpt" --log-csv "$work/log.csv")
    "$train" "${args[@]}" --epochs 1 > "$work/first" 2>&1 || fail "first run exited $?: $(cat "$work/first")"
    [[ -f "$work/ckpt/last.ckpt" && -f "$work/ckpt/best.ckpt" ]] || fail "no last.ckpt and best.ckpt after epoch 1"
    "$train" "${args[@]}" --epochs 2 --resume > "$work/second" 2>&1 || fail "resumed run exited $?: $(cat "$work/second")"
    grep -q "Resumed from .*last.ckpt after epoch 1" "$work/second" || fail "no resume message: $(cat "$work/second")"
    grep -q "^Epoch 2/2" "$work/second" || fail "the resumed run did not train epoch 2: $(cat "$work/second")"
    grep -q "^Epoch 1/2" "$work/second" && fail "the resumed run trained epoch 1 again"
    grep -q "^test accuracy .*; 1 epoch(s) in" "$work/second" || fail "no final line: $(tail -n 1 "$work/second")"
    [[ $(head -n 1 "$work/log.csv" | cut -d, -f1) == epoch ]] || fail "the CSV log has no header"
    [[ $(wc -l < "$work/log.csv") -eq 3 ]] || fail "the CSV log should hold a header and 2 epochs: $(cat "$work/log.csv")"
    echo "ok: resumed at epoch 2 from last.ckpt, the CSV log continued"
    # Another batch size, seed or training set would not resume bit for bit.
    cp "$work/ckpt/last.ckpt" "$work/kept.ckpt"
    for change in "--batch-size 32" "--seed 7" "--train-limit 448"; do
      read -r name value <<< "$change"
      changed=() replaced=0
      for ((i = 0; i < ${#args[@]}; i++)); do
        changed+=("${args[i]}")
        if [[ ${args[i]} == "$name" ]]; then changed+=("$value"); replaced=1; i=$((i + 1)); fi
      done
      [[ $replaced -eq 1 ]] || changed+=("$name" "$value")
      "$train" "${changed[@]}" --epochs 3 --resume > "$work/out" 2> "$work/err"
      rc=$?
      [[ $rc -eq 2 ]] || fail "a resume with $change exited $rc, expected 2: $(cat "$work/err")"
      grep -q "the checkpoint was written by a run with other settings (.* was .*, now .*).*--resume-changed" \
        "$work/err" || fail "the change $change is not named: $(cat "$work/err")"
      cmp -s "$work/ckpt/last.ckpt" "$work/kept.ckpt" || fail "a refused resume changed last.ckpt"
    done
    "$train" "${args[@]/#64/32}" --epochs 3 --resume --resume-changed > "$work/out" 2>&1 ||
      fail "--resume-changed exited $?: $(cat "$work/out")"
    [[ $(grep -c "^Resuming with changed settings (--batch-size was 64, now 32): .*no longer bit for bit" \
      "$work/out") -eq 1 ]] || fail "no one-line notice of the inexact resume: $(cat "$work/out")"
    echo "ok: a resume under another batch size, seed or training set is refused, or goes on with a notice"
    ;;
  diverged)
    # A run that diverges (SGD at lr 1e6: the loss turns NaN within a few
    # steps, how many depends on the CPU's kernels, so an epoch has 16 for
    # it to happen before the epoch ends) stops with exit 1 before the update,
    # and leaves the last good checkpoints as they were; skipping every step
    # of an epoch stops too.
    args=(--train-limit 1024 --test-limit 128 --batch-size 64 --threads 1 --optimizer sgd --checkpoint-dir "$work/ckpt")
    keep_good_checkpoints() { cp "$work/ckpt/last.ckpt" "$work/last.good" && cp "$work/ckpt/best.ckpt" "$work/best.good"; }
    good_checkpoints_kept() {  # good_checkpoints_kept <the run that must not have written them>
      cmp -s "$work/ckpt/last.ckpt" "$work/last.good" || fail "last.ckpt was overwritten by $1"
      cmp -s "$work/ckpt/best.ckpt" "$work/best.good" || fail "best.ckpt was overwritten by $1"
    }
    "$train" "${args[@]}" --epochs 1 --lr 0.01 > "$work/good" 2>&1 || fail "the good run exited $?: $(cat "$work/good")"
    keep_good_checkpoints
    # The divergence guard off: this is the NaN check's case (the guard's is below).
    "$train" "${args[@]}" --epochs 2 --lr 1e6 --resume --divergence-factor 0 > "$work/out" 2> "$work/err"
    rc=$?
    [[ $rc -eq 1 ]] || fail "the diverging run exited $rc, expected 1: $(cat "$work/err")"
    grep -qE "the loss is -?nan at epoch 2, step [0-9]+ of 16 .*stopped before this step's update.*--on-nonfinite skip" \
      "$work/err" || fail "no message naming the epoch and step: $(cat "$work/err")"
    good_checkpoints_kept "the diverged run"
    rm -rf "$work/ckpt"
    "$train" "${args[@]}" --epochs 1 --lr 1e6 --divergence-factor 0 > "$work/out" 2> "$work/err"
    [[ $? -eq 1 && ! -e "$work/ckpt/best.ckpt" && ! -e "$work/ckpt/last.ckpt" ]] ||
      fail "a fresh diverging run saved a checkpoint or did not exit 1: $(cat "$work/err")"
    "$train" "${args[@]}" --epochs 3 --lr 1e6 --on-nonfinite skip --divergence-factor 0 > "$work/out" 2> "$work/err"
    rc=$?
    grep -q "^Skipped a step: the loss is" "$work/out" || fail "skipped steps are not reported: $(cat "$work/out")"
    [[ $rc -eq 1 ]] && grep -qE "every one of the 16 steps of epoch [23] had a non-finite or diverged loss and was skipped" "$work/err" ||
      fail "skipping every step of an epoch did not stop with exit 1 ($rc): $(cat "$work/err")"
    echo "ok: a diverged run stops at its first NaN step with exit 1 and keeps the good checkpoints"
    # Adam at lr 1e3 explodes and stays finite (test loss about 1600 after
    # 2 epochs): the divergence guard stops it before the exploded step's
    # update, the good checkpoints kept byte for byte; turned off, it trains on.
    adam=("${args[@]/#sgd/adam}")
    "$train" "${adam[@]}" --epochs 1 --lr 0.01 > "$work/good" 2>&1 ||
      fail "the good Adam run exited $?: $(cat "$work/good")"
    keep_good_checkpoints
    "$train" "${adam[@]}" --epochs 2 --lr 1e3 --resume > "$work/out" 2> "$work/err"
    rc=$?
    [[ $rc -eq 1 ]] || fail "the exploding Adam run exited $rc, expected 1: $(cat "$work/err")"
    grep -qE "the loss is [0-9.e+]+ \([0-9.e+]+ times its usual [0-9.]+, past the divergence factor 1000\) at epoch 2, step [0-9]+ of 16 .*stopped before this step's update.*--divergence-factor 0" \
      "$work/err" || fail "no message naming the diverged loss, the epoch and the step: $(cat "$work/err")"
    good_checkpoints_kept "the exploding run"
    "$train" "${adam[@]}" --epochs 2 --lr 1e3 --resume --divergence-factor 0 > "$work/out" 2>&1 ||
      fail "with the guard off the exploding run exited $?: $(cat "$work/out")"
    cmp -s "$work/ckpt/last.ckpt" "$work/last.good" && fail "with the guard off the run did not train on"
    echo "ok: a run whose loss explodes but stays finite stops with exit 1 and keeps both checkpoints; 0 turns the guard off"
    ;;
  files)
    # Rank 0's files are tried before training: a checkpoint directory that
    # cannot be made, and a log another process holds, end the run at once
    # (exit 2); temp files of writers killed mid-write are removed.
    args=(--train-limit 256 --test-limit 128 --threads 1 --epochs 1 --batch-size 64)
    touch "$work/a-file"
    expect_usage_error 2 "cannot create the directory '$work/a-file/ckpt'" "${args[@]}" --checkpoint-dir "$work/a-file/ckpt"
    mkdir "$work/ckpt"
    # A dead writer of this host (pid 2^22 + 1 is above Linux's pid_max), and
    # one of another host, which must stay.
    head -c 4096 /dev/urandom > "$work/ckpt/last.ckpt.tmp.$(hostname).4194305"
    head -c 4096 /dev/urandom > "$work/ckpt/last.ckpt.tmp.another-host.4194305"
    "$train" "${args[@]}" --checkpoint-dir "$work/ckpt" > "$work/out" 2>&1 || fail "run exited $?: $(cat "$work/out")"
    grep -q "^Removed 1 temporary checkpoint file(s) that killed runs left: .*tmp.$(hostname).4194305" "$work/out" ||
      fail "the stale temp file was not reported: $(cat "$work/out")"
    [[ ! -e "$work/ckpt/last.ckpt.tmp.$(hostname).4194305" ]] || fail "the stale temp file is still there"
    [[ -e "$work/ckpt/last.ckpt.tmp.another-host.4194305" ]] || fail "another host's temp file was removed"
    echo "ok: the stale temp file of a dead writer removed, another host's kept"
    echo "epoch,loss" > "$work/log.csv"
    flock -o "$work/log.csv" sleep 20 &
    holder=$!
    sleep 0.5
    expect_usage_error 2 "'$work/log.csv' is being written by another process" "${args[@]}" --log-csv "$work/log.csv"
    pkill -P "$holder"; kill "$holder" 2> /dev/null; wait "$holder" 2> /dev/null
    [[ $(cat "$work/log.csv") == "epoch,loss" ]] || fail "the locked log was changed: $(cat "$work/log.csv")"
    ;;
  placement)
    args=(--train-limit 256 --test-limit 128 --epochs 1 --threads 1 --batch-size 32)
    DDL_CPU_DEVICES=2 "$train" "${args[@]}" --placement 0-6=cpu:0,7-10=cpu:1 > "$work/out" 2>&1 ||
      fail "placed run exited $?: $(cat "$work/out")"
    grep -q "placed 0-6=cpu:0,7-10=cpu:1, data on cpu:0" "$work/out" || fail "no placement in the header: $(cat "$work/out")"
    grep -q "^7 (Dense(9216, 128)).* cpu:1$" "$work/out" || fail "the summary does not say layer 7 is on cpu:1: $(cat "$work/out")"
    grep -q "^cpu:0 *0-6 " "$work/out" || fail "no memory row for cpu:0: $(cat "$work/out")"
    grep -q "^cpu:1 *7-10 *4.51 " "$work/out" || fail "no memory row for cpu:1 with its 4.51 MiB of parameters: $(cat "$work/out")"
    grep -q "^test accuracy" "$work/out" || fail "no final line: $(cat "$work/out")"
    echo "ok: a placed run trained and reported each device's memory"
    DDL_CPU_DEVICES=2 expect_usage_error 2 "--placement: placement '7-10=cpu:2': device cpu:2 does not exist" \
      "${args[@]}" --placement 0-6=cpu:0,7-10=cpu:2
    DDL_CPU_DEVICES=2 expect_usage_error 2 "layer(s) 10 have no device" "${args[@]}" --placement 0-9=cpu:1
    DDL_CPU_DEVICES=2 expect_usage_error 2 "no layer is named 'x'" "${args[@]}" --placement x=cpu:1
    ;;
  segmentation)
    # context_net on synthetic shapes: a short run must beat predicting
    # background everywhere (about 88.5% of the pixels) by 2 points.
    "$train" --model context_net --epochs 2 --samples 600 --threads 1 -q > "$work/out" 2>&1 ||
      fail "context_net exited $?: $(cat "$work/out")"
    line=$(grep "^test pixel accuracy" "$work/out") || fail "no final line: $(cat "$work/out")"
    [[ $line =~ ^test\ pixel\ accuracy\ ([0-9.]+)%,\ mean\ IoU\ ([0-9.]+),.*background\ everywhere:\ ([0-9.]+)%\) ]] ||
      fail "final line not as documented: $line"
    awk -v got="${BASH_REMATCH[1]}" -v baseline="${BASH_REMATCH[3]}" 'BEGIN { exit !(got > baseline + 2) }' ||
      fail "pixel accuracy ${BASH_REMATCH[1]}% does not beat the background baseline ${BASH_REMATCH[3]}% by 2 points"
    echo "ok: context_net reached ${BASH_REMATCH[1]}% (mean IoU ${BASH_REMATCH[2]}) against ${BASH_REMATCH[3]}%"
    expect_usage_error 2 "--image-size: Value 4 not in range" --model context_net --image-size 4
    # Its encoder-decoder variant trains the same way, on even sizes only.
    "$train" --model pooled_context_net --epochs 1 --samples 200 --image-size 32 --threads 1 -q > "$work/out" 2>&1 ||
      fail "pooled_context_net exited $?: $(cat "$work/out")"
    grep -q "^test pixel accuracy .*mean IoU .*background everywhere" "$work/out" ||
      fail "pooled_context_net: no final line: $(cat "$work/out")"
    echo "ok: pooled_context_net trained"
    expect_usage_error 2 "--image-size 63: pooled_context_net pools by 2 and upsamples by 2" \
      --model pooled_context_net --image-size 63
    ;;
  segmentation-data-parallel)
    mpiexec -n 2 "$train" --model context_net --parallel data --epochs 1 --samples 300 --threads 1 > "$work/out" 2>&1 ||
      fail "2-rank context_net run exited $?: $(cat "$work/out")"
    [[ $(grep -c "^test pixel accuracy .*mean IoU .*background everywhere: .* over 2 ranks$" "$work/out") -eq 1 ]] ||
      fail "not exactly one final line: $(cat "$work/out")"
    echo "ok: context_net trained data-parallel over 2 ranks, rank 0 alone reported"
    ;;
  sharded)
    # ZeRO's stages change where the state lives, not one bit of it: the
    # checkpoints of 2 ranks sharded and unsharded are the same file.
    args=(--parallel data --optimizer adam --train-limit 512 --test-limit 128 --epochs 1 --threads 1)
    for shard in none optimizer gradients parameters; do
      mpiexec -n 2 "$train" "${args[@]}" --shard "$shard" --checkpoint-dir "$work/$shard" > "$work/$shard.out" 2>&1 ||
        fail "--shard $shard exited $?: $(cat "$work/$shard.out")"
    done
    for shard in optimizer gradients parameters; do
      cmp -s "$work/none/last.ckpt" "$work/$shard/last.ckpt" || fail "--shard $shard saved another checkpoint than --shard none"
      grep -q "sharded data-parallel over 2 ranks (ZeRO stage" "$work/$shard.out" || fail "no sharded header: $(cat "$work/$shard.out")"
      grep -q "^training state per rank, sharding $shard:" "$work/$shard.out" || fail "no state table: $(cat "$work/$shard.out")"
      grep -q "^ZeRO's formula .* N = 2)" "$work/$shard.out" || fail "no formula: $(cat "$work/$shard.out")"
    done
    # Rank 1's optimizer state is half of the unsharded one (Adam: 2 floats per parameter).
    rank_1_optimizer() { awk '/^training state per rank/ { table = 1 } table && $1 == "1" { print $4; exit }' "$1"; }
    unsharded=$(rank_1_optimizer "$work/none.out")
    sharded=$(rank_1_optimizer "$work/optimizer.out")
    awk -v u="$unsharded" -v s="$sharded" 'BEGIN {exit !(u > 0 && s > 0.49 * u && s < 0.51 * u)}' ||
      fail "rank 1 holds $sharded MiB of optimizer state sharded, $unsharded MiB unsharded"
    grep -qE "^parameters gathered at once: at most [12] buckets?, " "$work/parameters.out" ||
      fail "--shard parameters: no gathered peak: $(cat "$work/parameters.out")"
    echo "ok: --shard optimizer, gradients and parameters save the unsharded run's checkpoint, rank 1 holding $sharded of $unsharded MiB of Adam's state"
    mpiexec -n 2 "$train" --parallel hybrid --dp 2 --pp 1 --shard parameters --epochs 1 > "$work/out" 2> "$work/err"
    rc=$?
    [[ $rc -eq 2 && $(grep -c "micro-batch" "$work/err") -eq 1 ]] ||
      fail "--parallel hybrid --shard parameters exited $rc: $(cat "$work/err")"
    echo "ok: --shard parameters in a hybrid -> exit 2, said once"
    for refused in "--parallel ps" "--parallel data --allreduce tree" "--parallel data --fp16-compression"; do
      # shellcheck disable=SC2086 # the options are words
      mpiexec -n 2 "$train" $refused --shard optimizer --epochs 1 > "$work/out" 2> "$work/err"
      rc=$?
      [[ $rc -eq 2 ]] || fail "$refused --shard optimizer exited $rc, expected 2: $(cat "$work/err")"
      [[ $(grep -c "shard" "$work/err") -eq 1 ]] || fail "$refused --shard optimizer: not one message: $(cat "$work/err")"
    done
    echo "ok: --shard under ps, with tree or with float16 on the wire -> exit 2, said once"
    ;;
  data-parallel)
    args=(--train-limit 512 --test-limit 256 --epochs 1 --threads 1)
    mpiexec -n 2 "$train" --parallel data "${args[@]}" --batch-size 64 --accumulate 2 > "$work/out" 2>&1 || fail "2-rank run exited $?: $(cat "$work/out")"
    grep -q "batch 64 x 2 accumulated per step, data-parallel over 2 ranks (ring allreduce, 32 per rank)" "$work/out" || fail "no 2-rank header: $(cat "$work/out")"
    [[ $(grep -c "^test accuracy .* over 2 ranks$" "$work/out") -eq 1 ]] || fail "not exactly one final line: $(cat "$work/out")"
    # The epoch's closing line (it has val_loss), not the lines a slow epoch
    # adds every 10 s (under the sanitizers), says how many ranks printed.
    [[ $(grep -c "^Epoch 1/1 - .*val_loss" "$work/out") -eq 1 ]] || fail "progress printed by more than rank 0: $(cat "$work/out")"
    echo "ok: 2 ranks trained, rank 0 alone printed"
    # mnist_cnn makes 2 buckets (the Dense layers fill the 1 MiB first one);
    # --overlap on reduces the first during backward, --no-overlap after it,
    # and auto decides by the cores the ranks leave free, saying so.
    overlap_says() {  # overlap_says <what the line says> <ddl-train options...>
      local says=$1
      shift
      mpiexec -n 2 "$train" --parallel data "${args[@]}" "$@" > "$work/out" 2>&1 || fail "$* exited $?: $(cat "$work/out")"
      grep -qE "^gradient synchronisation: .*\(2 buckets, overlap $says" "$work/out" ||
        fail "$*: $(grep "^gradient" "$work/out")"
    }
    overlap_says 'on\)' --overlap on
    overlap_says 'off\)' --no-overlap
    overlap_says 'o(n|ff) \(automatic: 2 ranks x 1 thread on [0-9]+ cores? leave' --overlap auto
    echo "ok: --overlap on, --no-overlap and --overlap auto each say what they did with the 2 buckets"
    mpiexec -n 2 "$train" --parallel data "${args[@]}" --batch-size 63 > "$work/out" 2> "$work/err"
    rc=$?
    [[ $rc -eq 2 ]] || fail "an indivisible global batch exited $rc, expected 2: $(cat "$work/err")"
    grep -q "must divide evenly over 2 ranks" "$work/err" || fail "no reason given: $(cat "$work/err")"
    echo "ok: --batch-size 63 over 2 ranks -> exit 2"
    mpiexec -n 2 "$train" "${args[@]}" > "$work/out" 2> "$work/err"
    rc=$?
    [[ $rc -eq 2 ]] || fail "2 ranks without --parallel exited $rc, expected 2"
    grep -q -- "--parallel none: started as 2 MPI ranks without a parallel strategy" "$work/err" || fail "no reason given: $(cat "$work/err")"
    echo "ok: 2 ranks without --parallel -> exit 2"
    # The materials report pairs each rank's predictions with its own
    # shard's targets: the 1-rank test MAE (it once read past the shard's
    # predictions and printed 1e26 GPa). The two runs' weights differ by
    # the allreduce's rounding only, far below the 1% allowed here.
    materials=(--model materials_mlp --samples 1000 --epochs 2 --batch-size 76 --threads 1 --quiet)
    "$train" "${materials[@]}" > "$work/one" 2>&1 || fail "materials_mlp on 1 rank exited $?: $(cat "$work/one")"
    mpiexec -n 2 "$train" --parallel data "${materials[@]}" > "$work/two" 2>&1 ||
      fail "materials_mlp on 2 ranks exited $?: $(cat "$work/two")"
    one=$(sed -n "s/.*test MAE: Young's modulus \([0-9.]*\) GPa.*/\1/p" "$work/one")
    two=$(sed -n "s/.*test MAE: Young's modulus \([0-9.]*\) GPa.*/\1/p" "$work/two")
    awk -v a="$one" -v b="$two" 'BEGIN { exit !(a > 0 && b > 0 && (a - b) ^ 2 <= (0.01 * a) ^ 2) }' ||
      fail "materials_mlp test MAE: 1 rank '$one' GPa, 2 ranks '$two' GPa"
    echo "ok: materials_mlp over 2 ranks reports the 1-rank test MAE ($one and $two GPa)"
    # A parameter server's checkpoint gathers the server's optimizer state
    # from every rank: the run and its resumption must both finish.
    for epochs in 1 2; do
      resume=(); [[ $epochs -eq 2 ]] && resume=(--resume)
      DDL_STALL_TIMEOUT=30 mpiexec -n 3 "$train" --parallel ps --servers 1 --train-limit 512 --test-limit 256 \
        --threads 1 --batch-size 64 --epochs "$epochs" --checkpoint-dir "$work/ps" "${resume[@]}" > "$work/out" 2>&1 ||
        fail "parameter-server run to epoch $epochs exited $?: $(cat "$work/out")"
    done
    grep -q "Resumed from $work/ps/last.ckpt after epoch 1" "$work/out" || fail "no resume: $(cat "$work/out")"
    grep -q "^Epoch 2/2 - " "$work/out" || fail "epoch 2 not trained: $(cat "$work/out")"
    echo "ok: parameter server checkpointed on every rank and resumed"
    ;;
  ranks-disagree)
    # Ranks started with different options, different data or different
    # checkpoints, or one rank failing to start, end every rank within
    # seconds (far below the stall timeout) naming the difference.
    args=(--train-limit 256 --test-limit 128 --epochs 1 --threads 1 --batch-size 64 --quiet --parallel data)
    expect_agreed_error() {
      local code=$1 text=$2
      shift 2
      local start=$SECONDS
      DDL_STALL_TIMEOUT=${DDL_STALL_TIMEOUT:-60} timeout 50 mpiexec "$@" > "$work/out" 2> "$work/err"
      local rc=$? took=$((SECONDS - start))
      [[ $rc -eq $code ]] || fail "mpiexec $* exited $rc, expected $code: $(cat "$work/err")"
      grep -qF -- "$text" "$work/err" || fail "mpiexec $*: stderr lacks '$text': $(cat "$work/err")"
      [[ $(grep -c "ddl-train: error" "$work/err") -eq 1 ]] || fail "not exactly one error line: $(cat "$work/err")"
      [[ $took -le 15 ]] || fail "mpiexec $* took $took s to fail"
      echo "ok: exit $code in ${took} s: $(cat "$work/err")"
    }
    expect_agreed_error 2 "rank 0 has '--lr 1', rank 1 has '--lr 0.1'" \
      -n 1 "$train" "${args[@]}" --lr 1 : -n 1 "$train" "${args[@]}" --lr 0.1
    expect_agreed_error 2 "rank 0 has '--allreduce ring', rank 1 has '--allreduce tree'" \
      -n 1 "$train" "${args[@]}" : -n 1 "$train" "${args[@]}" --allreduce tree
    DDL_STALL_TIMEOUT=0 expect_agreed_error 2 "ranks could not start: ranks 0, 1: environment variable DDL_STALL_TIMEOUT=0" \
      -n 2 "$train" "${args[@]}"
    mkdir "$work/empty"
    expect_agreed_error 2 "a rank could not start: rank 1: --data $work/empty" \
      -n 1 "$train" "${args[@]}" : -n 1 "$train" "${args[@]}" --data "$work/empty"
    # The same files but one test label changed.
    data=/usr/share/datasets/fashion-mnist
    mkdir "$work/other" && cp "$data"/* "$work/other/"
    gunzip -c "$data/t10k-labels-idx1-ubyte.gz" > "$work/labels"
    first=$(od -An -tu1 -j8 -N1 "$work/labels" | tr -d ' ')
    printf "\\x0$(( (first + 1) % 10 ))" | dd of="$work/labels" bs=1 seek=8 conv=notrunc status=none
    gzip -c "$work/labels" > "$work/other/t10k-labels-idx1-ubyte.gz"
    expect_agreed_error 2 "rank 1 has 'test data: 128 samples of [1, 28, 28], CRC-32" \
      -n 1 "$train" "${args[@]}" : -n 1 "$train" "${args[@]}" --data "$work/other"
    # Rank 1 finds no checkpoint where rank 0 resumes after epoch 1.
    resumed=(--train-limit 256 --test-limit 128 --threads 1 --batch-size 64 --quiet --parallel data --resume)
    mpiexec -n 2 "$train" "${resumed[@]}" --epochs 1 --checkpoint-dir "$work/ckpt" > "$work/out" 2>&1 ||
      fail "first run: $(cat "$work/out")"
    expect_agreed_error 2 "rank 0 has 'resumed after epoch 1 and 0 batches (step 4)', rank 1 has 'resumed after epoch 0 and 0 batches (step 0)'" \
      -n 1 "$train" "${resumed[@]}" --epochs 2 --checkpoint-dir "$work/ckpt" \
      : -n 1 "$train" "${resumed[@]}" --epochs 2 --checkpoint-dir "$work/none"
    ;;
  pipeline)
    args=(--train-limit 512 --test-limit 256 --threads 1 --batch-size 64)
    mpiexec -n 2 "$train" --parallel pipeline "${args[@]}" --epochs 1 --micro-batches 3 --schedule gpipe --balance parameters \
      --checkpoint-dir "$work/pp" > "$work/out" 2>&1 || fail "2-stage pipeline exited $?: $(cat "$work/out")"
    grep -q "pipeline of 2 stages (gpipe, 3 micro-batches per batch, weight gradients per batch), balanced by parameters" "$work/out" ||
      fail "no pipeline header: $(cat "$work/out")"
    [[ $(grep -c "^test accuracy" "$work/out") -eq 1 ]] || fail "not exactly one final line: $(cat "$work/out")"
    grep -q "^1 *5-10 *4.51 " "$work/out" || fail "no report row for stage 1 with its 4.51 MiB: $(cat "$work/out")"
    grep -q "^bubble: .* textbook (p-1)/(M+p-1) = 25.0% for p = 2, M = 3 (gpipe)" "$work/out" ||
      fail "no bubble line: $(cat "$work/out")"
    # Each stage row's "held (sched.)": the micro-batches (of chunks) the
    # stage held at once, counted, beside what its schedule's lists hold.
    held_as_scheduled() {
      awk '/^pipeline stages/ { t = 1 } t && $1 ~ /^[0-9]+$/ && NF == 11 { rows++; if ($7 != "(" $6 ")") bad = 1 }
        END { exit !(rows == 2 && !bad) }' "$work/out" || fail "held (sched.) differ under $1: $(cat "$work/out")"
    }
    held_as_scheduled gpipe
    grep -qE "^1 +5-10 +.* 3 \(3\) " "$work/out" || fail "gpipe's stage 1 did not hold all 3: $(cat "$work/out")"
    echo "ok: a 2-stage pipeline trained, rank 0 reported the stages"
    # Its checkpoint is a single-process one: one process resumes it.
    "$train" "${args[@]}" --epochs 2 --checkpoint-dir "$work/pp" --resume > "$work/out" 2>&1 ||
      fail "one process resuming the pipeline's checkpoint exited $?: $(cat "$work/out")"
    grep -q "Resumed from $work/pp/last.ckpt after epoch 1" "$work/out" || fail "no resume: $(cat "$work/out")"
    echo "ok: one process resumed the pipeline's checkpoint"
    mpiexec -n 2 "$train" --parallel pipeline --train-limit 128 --test-limit 64 --threads 1 --batch-size 64 --epochs 1 \
      --weight-gradients micro-batch > "$work/out" 2>&1 || fail "--weight-gradients micro-batch exited $?: $(cat "$work/out")"
    grep -q "weight gradients per micro-batch" "$work/out" || fail "no weight-gradient mode: $(cat "$work/out")"
    echo "ok: a pipeline computed its weight gradients per micro-batch"
    mpiexec -n 2 "$train" --parallel pipeline --train-limit 128 --test-limit 64 --threads 1 --batch-size 64 --epochs 1 \
      --schedule zb-h1 --micro-batches 3 > "$work/out" 2>&1 || fail "--schedule zb-h1 exited $?: $(cat "$work/out")"
    grep -q "(zb-h1, 3 micro-batches per batch, weight gradients per micro-batch, placed by the schedule)" "$work/out" ||
      fail "no zb-h1 header: $(cat "$work/out")"
    grep -q "^bubble: .* textbook (p-1)/(3M+p-1) = 10.0% for p = 2, M = 3 (zb-h1)" "$work/out" ||
      fail "no zb-h1 bubble line: $(cat "$work/out")"
    held_as_scheduled zb-h1
    # Balanced by time (the default): by the zb-h1 step the simulator
    # gives for each cut, each layer's F, B, W and message measured.
    grep -qE "balanced by time, for the zb-h1 schedule's step at M = 3: simulated [0-9.]+ ms \([0-9.]+ ms split by forward \+ backward alone\), each message [0-9.]+ us \+ [0-9.]+ GB/s" \
      "$work/out" || fail "no schedule-balanced header: $(cat "$work/out")"
    grep -qE "^stage +layers +fwd ms +B ms +W ms +sends KiB +share" "$work/out" || fail "no F/B/W table: $(cat "$work/out")"
    grep -qE "^0 +.* 2 \(2\) " "$work/out" || fail "zb-h1's stage 0 did not hold p - s = 2: $(cat "$work/out")"
    echo "ok: a zb-h1 pipeline trained, its bubble beside the paper's formula"
    mpiexec -n 2 "$train" --parallel pipeline --train-limit 128 --test-limit 64 --threads 1 --batch-size 64 --epochs 1 \
      --schedule interleaved-1f1b --chunks 2 --micro-batches 4 > "$work/out" 2>&1 ||
      fail "--schedule interleaved-1f1b exited $?: $(cat "$work/out")"
    grep -q "pipeline of 4 stages (interleaved-1f1b, 2 chunks per rank, 4 micro-batches per batch" "$work/out" ||
      fail "no interleaved header: $(cat "$work/out")"
    grep -qE "^0 +[0-9]+(-[0-9]+)?,[0-9]+(-[0-9]+)? " "$work/out" || fail "no report row of rank 0's two chunks: $(cat "$work/out")"
    grep -q "^bubble: .* textbook (p-1)/(vM+p-1) = 11.1% for p = 2, M = 4 (interleaved-1f1b, v = 2 chunks per rank)" \
      "$work/out" || fail "no interleaved bubble line: $(cat "$work/out")"
    held_as_scheduled interleaved-1f1b
    mpiexec -n 2 "$train" --parallel pipeline --train-limit 128 --test-limit 64 --threads 1 --batch-size 64 --epochs 1 \
      --schedule zb-v --micro-batches 4 > "$work/out" 2>&1 || fail "--schedule zb-v exited $?: $(cat "$work/out")"
    grep -q "^bubble: .* textbook (p-1)/(6M+p-1) = 4.0% for p = 2, M = 4 (zb-v, v = 2 chunks per rank)" "$work/out" ||
      fail "no zb-v bubble line: $(cat "$work/out")"
    held_as_scheduled zb-v
    mpiexec -n 2 "$train" --parallel pipeline "${args[@]}" --epochs 1 --chunks 3 > "$work/out" 2> "$work/err"
    [[ $? -eq 2 ]] || fail "--chunks 3 under 1f1b did not exit 2: $(cat "$work/err")"
    grep -q "the 1f1b schedule holds 1 chunk of the model per rank, got 3" "$work/err" || fail "no reason: $(cat "$work/err")"
    echo "ok: interleaved-1f1b and zb-v pipelines trained on 2 chunks per rank; --chunks under 1f1b exits 2"
    mpiexec -n 2 "$train" --parallel pipeline --train-limit 128 --test-limit 64 --threads 1 --batch-size 64 --epochs 1 \
      --micro-batches 4 --recompute all > "$work/out" 2>&1 || fail "--recompute all exited $?: $(cat "$work/out")"
    grep -q "(1f1b, 4 micro-batches per batch, weight gradients per batch, activations recomputed)" "$work/out" ||
      fail "no recomputing pipeline header: $(cat "$work/out")"
    # oneDNN packs weights where it has AVX-512 kernels for them (--pack-weights
    # auto: from 4 micro-batches a batch on).
    grep -q "^weights packed once per batch (--pack-weights), MiB held during a step: stage 0 .*, stage 1 " "$work/out" ||
      ! grep -q "avx512f" /proc/cpuinfo || fail "no packed-weights line: $(cat "$work/out")"
    echo "ok: a pipeline recomputed its stages' activations"
    "$train" --train-limit 128 --test-limit 64 --threads 1 --batch-size 64 --epochs 1 --recompute 0-3,6 \
      > "$work/out" 2>&1 || fail "--recompute 0-3,6 exited $?: $(cat "$work/out")"
    grep -q "recomputing layers 0-3,6" "$work/out" || fail "no recomputed layers in the header: $(cat "$work/out")"
    echo "ok: one process recomputed two ranges of layers"
    mpiexec -n 2 "$train" --parallel pipeline "${args[@]}" --epochs 1 --stages 3 > "$work/out" 2> "$work/err"
    [[ $? -eq 2 ]] || fail "--stages 3 on 2 ranks did not exit 2: $(cat "$work/err")"
    grep -q -- "--stages: 3 stages need 3 ranks, one per stage; this job has 2" "$work/err" || fail "no reason: $(cat "$work/err")"
    mpiexec -n 2 "$train" --parallel pipeline "${args[@]}" --epochs 1 --split 0 > "$work/out" 2> "$work/err"
    [[ $? -eq 2 ]] || fail "--split 0 did not exit 2: $(cat "$work/err")"
    # Both ranks refuse it; mpiexec may end the second before it prints.
    [[ $(grep -c "pipeline split '0'" "$work/err") -ge 1 ]] || fail "no rank named the split: $(cat "$work/err")"
    echo "ok: bad stage counts and splits exit 2 on every rank"
    mpiexec -n 4 "$train" --parallel hybrid --dp 2 --pp 2 "${args[@]}" --epochs 1 --allreduce tree > "$work/out" 2>&1 ||
      fail "2 x 2 hybrid run exited $?: $(cat "$work/out")"
    grep -q "batch 64, 2 pipelines (tree allreduce, 32 per pipeline)" "$work/out" || fail "no hybrid header: $(cat "$work/out")"
    grep -q "^test accuracy .* over 2 pipelines$" "$work/out" || fail "no final line: $(cat "$work/out")"
    mpiexec -n 4 "$train" --parallel hybrid --dp 3 --pp 2 "${args[@]}" --epochs 1 > "$work/out" 2> "$work/err"
    [[ $? -eq 2 ]] || fail "--dp 3 --pp 2 on 4 ranks did not exit 2: $(cat "$work/err")"
    grep -q -- "--parallel hybrid: 3 pipelines x 2 stages need 6 ranks; this job has 4" "$work/err" || fail "no reason: $(cat "$work/err")"
    echo "ok: a 2 x 2 hybrid run trained; a grid that does not fit the ranks exits 2"
    ;;
  tensor)
    args=(--train-limit 512 --test-limit 256 --threads 1 --batch-size 64)
    mpiexec -n 2 "$train" --parallel tensor "${args[@]}" --epochs 1 --checkpoint-dir "$work/tp" > "$work/out" 2>&1 ||
      fail "a tensor-parallel run exited $?: $(cat "$work/out")"
    grep -q "tensor-parallel over 2 ranks (column 0 + row 2; column 7 + row 10; ring allreduce)" "$work/out" ||
      fail "no tensor-parallel header: $(cat "$work/out")"
    grep -q "ColumnParallelDense(Dense(9216, 128); output features \[0, 64) on rank 0 of 2)" "$work/out" ||
      fail "no layer list: $(cat "$work/out")"
    [[ $(grep -c "^test accuracy .* over 2 ranks$" "$work/out") -eq 1 ]] || fail "not exactly one final line: $(cat "$work/out")"
    grep -q "^1 *1 *2.29 " "$work/out" || fail "no report row for rank 1 with its 2.29 MiB: $(cat "$work/out")"
    # Per step at batch 64, the ring over 2 ranks sends each allreduce's n
    # floats once per rank: forward the row convolution's output (64 x 64 x
    # 24 x 24) and the row Dense layer's (64 x 10), backward the column Dense
    # layer's input gradient (64 x 9216; the first convolution's input needs
    # none): 2949760 floats, 11.25 MiB.
    grep -q "^0 .* 11.25$" "$work/out" || fail "rank 0 did not send 11.25 MiB per step: $(cat "$work/out")"
    echo "ok: a tensor-parallel run trained, rank 0 reported every rank's slices and the bytes of the formula"
    # Its checkpoint is a single-process one: one process resumes it.
    "$train" "${args[@]}" --epochs 2 --checkpoint-dir "$work/tp" --resume > "$work/out" 2>&1 ||
      fail "one process resuming the tensor-parallel checkpoint exited $?: $(cat "$work/out")"
    grep -q "Resumed from $work/tp/last.ckpt after epoch 1" "$work/out" || fail "no resume: $(cat "$work/out")"
    echo "ok: one process resumed the tensor-parallel checkpoint"
    mpiexec -n 2 "$train" --parallel tensor --tp 4 "${args[@]}" --epochs 1 > "$work/out" 2> "$work/err"
    [[ $? -eq 2 ]] || fail "--tp 4 on 2 ranks did not exit 2: $(cat "$work/err")"
    grep -q -- "--tp: tensor groups of 4 ranks do not divide the job's 2 ranks" "$work/err" || fail "no reason: $(cat "$work/err")"
    mpiexec -n 2 "$train" --parallel tensor --shard optimizer "${args[@]}" --epochs 1 > "$work/out" 2> "$work/err"
    [[ $? -eq 2 ]] || fail "--shard with tensor parallelism did not exit 2: $(cat "$work/err")"
    grep -q -- "--shard: .*tensor parallelism already splits" "$work/err" || fail "no reason: $(cat "$work/err")"
    expect_usage_error 2 "--tp applies to --parallel tensor or hybrid" --tp 2 "${args[@]}"
    echo "ok: groups that do not divide the ranks, sharding and a stray --tp exit 2"
    # The 3-D grid: a pipeline of 2 stages, each split over 2 tensor ranks.
    mpiexec -n 4 "$train" --parallel hybrid --dp 1 --tp 2 --pp 2 --balance parameters "${args[@]}" --epochs 1 \
      --checkpoint-dir "$work/grid" > "$work/out" 2>&1 || fail "a 1 x 2 x 2 grid exited $?: $(cat "$work/out")"
    grep -q "stages split over tensor groups of 2 ranks (column 0 + row 2; column 7 + row 10)" "$work/out" ||
      fail "no 3-D header: $(cat "$work/out")"
    [[ $(grep -c "^test accuracy .* over 1 pipeline$" "$work/out") -eq 1 ]] || fail "not exactly one final line: $(cat "$work/out")"
    # The same allreduces as above, each on the stage that holds its pair:
    # 9.00 MiB on stage 0 (the convolutions), 2.25 on stage 1 (the Dense pair).
    grep -q "allreduces sent per training step: stage 0 9.00 MiB, stage 1 2.25 MiB" "$work/out" ||
      fail "not the formula's bytes per stage: $(cat "$work/out")"
    "$train" "${args[@]}" --epochs 2 --checkpoint-dir "$work/grid" --resume > "$work/out" 2>&1 ||
      fail "one process resuming the 3-D grid's checkpoint exited $?: $(cat "$work/out")"
    grep -q "Resumed from $work/grid/last.ckpt after epoch 1" "$work/out" || fail "no resume: $(cat "$work/out")"
    mpiexec -n 4 "$train" --parallel hybrid --dp 1 --tp 2 --pp 2 --split 2 "${args[@]}" --epochs 1 > "$work/out" 2> "$work/err"
    [[ $? -eq 2 ]] || fail "a split inside a pair did not exit 2: $(cat "$work/err")"
    grep -q -- "--split: stage 1 would begin at layer 2, inside the tensor-parallel pair column 0 + row 2" "$work/err" ||
      fail "no reason: $(cat "$work/err")"
    echo "ok: a 3-D grid trained with each stage's tensor bytes, one process resumed it, a split inside a pair exits 2"
    ;;
  finalize-over-tcp)
    # UCX's TCP transport can hang in MPI_Finalize after a complete run
    # (openucx/ucx#8738; about one run in five of this job here). ddl's
    # finalize watchdog must end every run soon after the stall timeout, the
    # run's output complete; without it such runs hang. A rescued run's exit
    # status is the launcher's: the first rank to leave without MPI_Finalize
    # makes mpiexec kill the others, and it may report that as a failure.
    rescued=0
    for run in 1 2 3 4; do
      UCX_TLS=tcp,self DDL_STALL_TIMEOUT=5 timeout 60 mpiexec -n 3 "$train" --parallel ps --servers 1 \
        --train-limit 256 --test-limit 128 --threads 1 --batch-size 64 --epochs 1 > "$work/out" 2>&1
      rc=$?
      [[ $rc -ne 124 ]] || fail "run $run hung: $(grep -v "^ *[0-9]*/[0-9]* \\[" "$work/out" | tail -n 25)"
      grep -q "^test accuracy .* over 2 ranks$" "$work/out" || fail "run $run has no final line: $(cat "$work/out")"
      if grep -q "MPI_Finalize has not returned" "$work/out"; then
        rescued=$((rescued + 1))
      else
        [[ $rc -eq 0 ]] || fail "run $run exited $rc without a hang: $(cat "$work/out")"
      fi
    done
    echo "ok: 4 runs over UCX's TCP transport ended; the finalize watchdog ended $rescued of them"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
