#!/usr/bin/env bash
# Time to accuracy, side by side in one run: ddl-train's mnist_cnn on
# Fashion-MNIST and the same recipe in PyTorch (bench/torch_fashion_mnist.py),
# one after the other with the same thread count. Prints each epoch's
# training time, samples/s and test accuracy for both, and the cumulative
# training time (evaluation excluded) to the target accuracy.
#
#   bench/compare_fashion_mnist.sh [build-dir] [threads] [epochs] [target]
# Needs python3-torch and libopenblas0-pthread (bench/install-peers.sh).
# Takes about 25 minutes with 12 epochs on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
threads=${2:-2}
epochs=${3:-12}
target=${4:-0.91}
openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== ddl (${build}/apps/ddl-train, ${threads} threads)"
"$build"/apps/ddl-train --model mnist_cnn --epochs "$epochs" --threads "$threads" --seed 1 \
  --log-csv "$out/ddl.csv" > "$out/ddl.log"
tail -n 1 "$out/ddl.log"
python3 - "$out/ddl.csv" "$target" <<'PY'
import csv, sys
rows, target = list(csv.DictReader(open(sys.argv[1]))), float(sys.argv[2])
print(f"{'epoch':>5} {'train_s':>8} {'samples/s':>10} {'loss':>8} {'test_acc':>9} {'cum_train_s':>12}")
cumulative, reached = 0.0, None
for row in rows:
    rate = float(row["samples_per_s"])
    seconds = 60000 / rate
    cumulative += seconds
    accuracy = float(row["val_accuracy"])
    if reached is None and accuracy >= target:
        reached = (int(row["epoch"]), cumulative)
    print(f"{int(row['epoch']):>5} {seconds:>8.1f} {rate:>10.0f} {float(row['loss']):>8.4f} {accuracy:>9.4f} "
          f"{cumulative:>12.1f}")
print(f"time to {100 * target:.1f}%: " + (f"{reached[1]:.1f} s of training (epoch {reached[0]})" if reached
                                          else f"not reached in {len(rows)} epochs"))
PY

echo "== pytorch (${threads} threads, OpenBLAS)"
LD_LIBRARY_PATH=$openblas /usr/bin/python3 bench/torch_fashion_mnist.py --threads "$threads" --epochs "$epochs" \
  --target "$target"
