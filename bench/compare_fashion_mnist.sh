#!/usr/bin/env bash
# Time to accuracy, side by side in one run: ddl-train's mnist_cnn on
# Fashion-MNIST and the same recipe in its peers, one after the other with
# the same thread count: Keras 3 / tensorflow-cpu (bench/keras_fashion_mnist.py)
# and PyTorch 2 (bench/torch_fashion_mnist.py --channels-last), from
# bench/.venv-peers, and with DDL_WITH_TORCH113=1 Debian's PyTorch 1.13 too
# (an extra column: its time to the target prints, outside the ratio).
# Prints each epoch's training time, samples/s and test accuracy, the
# cumulative training time (evaluation excluded) to the target accuracy, and
# ddl's time against the fastest peer's.
#
#   bench/compare_fashion_mnist.sh [build-dir] [threads] [epochs] [target]
# With PRECISION=bf16 every program trains in bf16 mixed precision
# (ddl-train --precision bf16, Keras's mixed_bfloat16, torch.autocast).
# Needs bench/install-peers.sh. Takes about 25 minutes with 12 epochs on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
threads=${2:-2}
epochs=${3:-12}
target=${4:-0.91}
bf16=()
peer_bf16=()
if [[ ${PRECISION:-float32} == bf16 ]]; then
  bf16=(--precision bf16)
  peer_bf16=(--bf16)
fi
venv=bench/.venv-peers/bin/python3
openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread
tunables=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296
[[ -x $venv ]] || { echo "compare_fashion_mnist: no $venv (run bench/install-peers.sh)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== ddl (${build}/apps/ddl-train, ${threads} threads)"
"$build"/apps/ddl-train --model mnist_cnn --epochs "$epochs" --threads "$threads" --seed 1 \
  --log-csv "$out/ddl.csv" "${bf16[@]}" > "$out/ddl.log"
tail -n 1 "$out/ddl.log"
python3 - "$out/ddl.csv" "$target" <<'PY' | tee "$out/ddl.txt"
import csv, sys
sys.path.insert(0, "bench")
from fashion_mnist_peer import EpochTable
table = EpochTable(60000, float(sys.argv[2]))
for row in csv.DictReader(open(sys.argv[1])):
    table.add(int(row["epoch"]), 60000 / float(row["samples_per_s"]), float(row["loss"]), float(row["val_accuracy"]))
table.finish()
PY

echo "== keras (${threads} threads)"
"$venv" bench/keras_fashion_mnist.py --threads "$threads" --epochs "$epochs" --target "$target" "${peer_bf16[@]}" \
  2>/dev/null |
  tee "$out/keras.txt"
echo "== pytorch 2 (${threads} threads, channels_last)"
GLIBC_TUNABLES=$tunables "$venv" bench/torch_fashion_mnist.py --threads "$threads" --epochs "$epochs" \
  --target "$target" --channels-last "${peer_bf16[@]}" | tee "$out/torch.txt"
peers=(keras torch)
if [[ ${DDL_WITH_TORCH113:-0} == 1 ]]; then
  echo "== pytorch 1.13 (${threads} threads, OpenBLAS)"
  LD_LIBRARY_PATH=$openblas /usr/bin/python3 bench/torch_fashion_mnist.py --threads "$threads" --epochs "$epochs" \
    --target "$target" | tee "$out/torch1.13.txt"
fi

python3 - "$out" "${peers[@]}" <<'PY'
import re, sys
out, peers = sys.argv[1], sys.argv[2:]
def reached(name):
    text = open(f"{out}/{name}.txt").read()
    found = re.search(r"time to [\d.]+%: ([\d.]+) s", text)
    return float(found.group(1)) if found else None
ddl = reached("ddl")
times = {p: reached(p) for p in peers}
known = {p: t for p, t in times.items() if t is not None}
if ddl is None or not known:
    print(f"summary: ddl {ddl}, peers {times}: no ratio")
else:
    fastest = min(known, key=known.get)
    print(f"summary: ddl {ddl:.1f} s, fastest peer {fastest} {known[fastest]:.1f} s: "
          f"ddl takes {ddl / known[fastest]:.2f}x the fastest peer's time")
PY
