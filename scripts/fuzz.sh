#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer in ./build-fuzz (CUDA and MPI off, coverage
# counters in every object; the normal build is untouched) and runs each on
# its committed seeds, fuzz/corpus/<target>/, for a bounded time. A crash,
# sanitizer report, leak, hang (an input over 10 s) or an allocation past
# 2 GiB fails the script; libFuzzer prints the input it kept under
# <build>/artifacts/.
#   DDL_FUZZ_SECONDS    seconds per target (default 60; 0 builds only)
#   DDL_FUZZ_BUILD_DIR  a build configured elsewhere with DDL_FUZZ=ON, used
#                       as it is instead of build-fuzz: scripts/run-tests.sh
#                       gives scripts/sanitize.sh's build-asan, which
#                       compiles the targets beside the test suite (counters
#                       in the parsers only, cmake/Fuzz.cmake) and saves CI
#                       a build of its own.
#   arguments           targets to run (default: every one, i.e. every fuzz/corpus/<target>/)
# Inputs the fuzzer finds go to <build>/corpus/<target>/, not the
# repository; copy one into fuzz/corpus/ only when it is worth keeping.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${DDL_FUZZ_SECONDS:-60}
build_dir=${DDL_FUZZ_BUILD_DIR:-build-fuzz}

if [[ -n ${DDL_FUZZ_BUILD_DIR:-} ]]; then
  if ! grep -qiE '^DDL_FUZZ:BOOL=(ON|1|TRUE|YES|Y)$' "$build_dir/CMakeCache.txt" 2>/dev/null; then
    echo "fuzz: DDL_FUZZ_BUILD_DIR=$build_dir is not a build configured with DDL_FUZZ=ON" \
      "(scripts/sanitize.sh asan makes one in build-asan; unset, fuzz.sh makes its own in build-fuzz)" >&2
    exit 2
  fi
else
  # No precompiled headers here: the other builds force the headers most
  # files include into every file, which would hide a file that forgot one.
  cmake -S . -B "$build_dir" -DCMAKE_CXX_COMPILER=clang++ -DDDL_FUZZ=ON -DDDL_CUDA=OFF -DDDL_MPI=OFF \
    -DDDL_BUILD_TESTS=OFF -DDDL_BUILD_EXAMPLES=OFF -DDDL_BUILD_BENCH=OFF -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON \
    "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" >/dev/null
fi
# ddl-train too: in build-fuzz it shows that the library and the program
# build with CUDA and MPI off (single-process parallel/ alone, the CUDA
# entry points' stubs) and without precompiled headers, which CI's builds
# do not; in build-asan it is built already.
cmake --build "$build_dir" --target fuzz_targets ddl-train -j"$(nproc)"
# The binary seeds must be what today's writers write (the writer runs
# under LeakSanitizer too): a format changed without new seeds fails here.
seeds="$build_dir/seeds"
rm -rf "$seeds"
"$build_dir/fuzz/fuzz_write_seeds" "$seeds"
for written in "$seeds"/*/*; do
  committed="fuzz/corpus/${written#"$seeds"/}"
  if ! cmp -s "$written" "$committed"; then
    echo "fuzz: $committed is stale: run $build_dir/fuzz/fuzz_write_seeds fuzz/corpus" >&2
    exit 1
  fi
done
if ((seconds == 0)); then exit 0; fi

# The largest input tried: 4096 bytes (many records past the seeds) unless
# listed here: a checkpoint's name alone may be 4 KiB; strings need less.
declare -A max_len=([checkpoint]=8192 [placement]=256 [stage_split]=256 [option_strings]=256
                    [train_options]=1024 [tile_plan]=64)
targets=("$@")
if ((${#targets[@]} == 0)); then
  for folder in fuzz/corpus/*/; do targets+=("$(basename "$folder")"); done
fi

# Temp files of the targets in memory where there is /dev/shm: a checkpoint
# write fsyncs, which on a disk would bound the fuzzer's speed.
if [[ -w /dev/shm ]]; then export TMPDIR=/dev/shm; fi
export DDL_NUM_THREADS=1  # the parsers run on one thread; no OpenMP pool per input

# One target per core at a time, each one's output kept in a log and
# printed whole when the target ends, so the lines of two never interleave.
logs="$build_dir/logs"
mkdir -p "$logs"
fuzz_one() {
  local target=$1 work="$build_dir/corpus/$1" artifacts="$build_dir/artifacts/$1/"
  mkdir -p "$work" "$artifacts"
  local status=0
  "$build_dir/fuzz/fuzz_$target" -max_total_time="$seconds" -max_len="${max_len[$target]:-4096}" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts" \
    "$work" "fuzz/corpus/$target" >"$logs/$target.log" 2>&1 || status=$?
  echo "$status" >"$logs/$target.status"
}
for target in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= $(nproc))); do wait -n; done
  echo "fuzz: $target for ${seconds} s"
  fuzz_one "$target" &
done
wait
failed=()
for target in "${targets[@]}"; do
  echo "== fuzz: $target"
  # The progress lines (one per new input, thousands a minute) are left out.
  awk '!/^#[0-9]+\t(NEW|REDUCE|pulse)/' "$logs/$target.log"
  if [[ $(cat "$logs/$target.status") != 0 ]]; then failed+=("$target"); fi
done
for target in "${failed[@]}"; do
  echo "fuzz: $target failed; the input it kept is in $build_dir/artifacts/$target/" >&2
done
((${#failed[@]} == 0))
