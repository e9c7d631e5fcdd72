#!/usr/bin/env bash
# Builds ddl with sanitizers and runs the tests under them; README command (2)
# runs it after the main suite. Both builds are CPU-only (a sanitizer cannot
# see into CUDA kernels, and CI has no GPU), live in folders of their own and
# use clang, while the main build uses g++: clang with line tables compiles
# the instrumented code in well under g++'s time with full debug information
# (15 s against 26 s for one test file here; g++ with line tables, 21 s),
# and the project is built by two compilers on every CI run.
#
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer, in build-asan: the
#         whole ctest suite, MPI tests included, but the end-to-end trainings
#         (long_tests below). Any finding fails its test
#         (-fno-sanitize-recover=all; leaks are reported at exit). The
#         libFuzzer targets of fuzz/ are built here too (DDL_FUZZ=ON, with
#         coverage counters in the parsers only), for scripts/fuzz.sh to run.
#   tsan  ThreadSanitizer, in build-tsan: the tests whose code runs threads of
#         ddl's own, the loader's prefetcher and data parallelism's
#         communication thread (ctest's label `threads`, tests/CMakeLists.txt).
#
# Usage: scripts/sanitize.sh [asan] [tsan] [--all] [-- ctest arguments]
#   no variant runs both; --all runs long_tests too (asan: about 8 minutes
#   more); ctest arguments narrow a run, e.g.
#   scripts/sanitize.sh asan -- -R BatchPrefetcher
#   DDL_SANITIZE_JOBS   build jobs and tests run at once (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/.."

variants=()
all=false
while (($#)); do
  case $1 in
    asan | tsan) variants+=("$1") ;;
    --all) all=true ;;
    --) shift; break ;;
    *) echo "sanitize.sh: unknown argument '$1' (expected asan, tsan, --all or -- ctest arguments)" >&2; exit 2 ;;
  esac
  shift
done
ctest_args=("$@")
((${#variants[@]})) || variants=(asan tsan)
jobs=${DDL_SANITIZE_JOBS:-$(nproc)}

# The end-to-end trainings of tests/models/test_training.cpp take 450 s
# under ASan at -O1 (2 cores), more than the rest of the suite. They check
# accuracy and bitwise resume; the code they run (conv2d, Adadelta, the
# Trainer, checkpoints, the prefetcher) is run under ASan by the unit tests
# and by ddl-train's command-line tests, which train mnist_cnn too.
# ddl-train's 2-epoch context_net run (ddl_train_cli_segmentation) takes
# 105 s under ASan; what it runs (per-pixel cross-entropy, the metrics, the
# shapes, the segmentation task) is run under ASan by the unit tests and by
# ddl_train_cli_segmentation-data-parallel (300 images, one epoch, 2 ranks).
# The packaging test (install.find_package_consumer, 80 s under ASan)
# compiles every installed header on its own and runs a 200-step linear
# fit: nothing a sanitizer would see that the unit tests do not run; the
# main suite runs it. wide_mlp's two steps (104 M parameters, 0.9 GB) run
# the Dense kernels the unit tests run under ASan, at a size that would
# take minutes here. ddl_train_cli_options (22 short trainings, 180 s here)
# checks that each option changes what is trained, which the main suite
# shows; every optimizer and schedule it runs, the unit tests run here.
# multi_node_training (22 short trainings on one host and on the simulated
# cluster) runs code the MPI tests run here; what differs across nodes is
# MPI's transport, not ddl's.
long_tests='^(Training: |ddl_train_cli_segmentation$|ddl_train_cli_options$|install\.find_package_consumer$|wide_mlp has |multi_node_training$)'
# The main job's accuracy (main_job_accuracy, 15 minutes in the main build)
# would take hours here and runs nothing the trainings above do not: it is
# reported as skipped, with --all too.
unset DDL_LONG_TESTS
skip=()
if ! $all; then skip=(-E "$long_tests"); fi

# build_and_test <variant> <sanitizer flags> <targets, or "all"> [ctest arguments]
# (cmake_options: the variant's own configure options)
build_and_test() {
  local variant=$1 sanitizers=$2 targets=$3
  shift 3
  local build_dir=build-$variant
  # The flags also go to the environment: the packaging test configures an
  # outside project against this build, which must link the same runtime.
  export CXXFLAGS="$sanitizers -fno-omit-frame-pointer" LDFLAGS="$sanitizers"
  # Debug at -O1: assertions on, and fast enough for CI. Line tables are all
  # a sanitizer's stack trace needs (functions, files and lines).
  # CXX too: the packaging test builds an outside project with this compiler.
  export CXX=clang++
  cmake -S . -B "$build_dir" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" \
    -DCMAKE_CXX_FLAGS="$CXXFLAGS" -DCMAKE_EXE_LINKER_FLAGS="$LDFLAGS" -DCMAKE_SHARED_LINKER_FLAGS="$LDFLAGS" \
    -DDDL_CUDA=OFF -DDDL_NCCL=OFF -DDDL_BUILD_BENCH=OFF -DDDL_BUILD_EXAMPLES=OFF "${cmake_options[@]}"
  if [[ $targets == all ]]; then cmake --build "$build_dir" -j"$jobs"; else cmake --build "$build_dir" -j"$jobs" --target $targets; fi
  (cd "$build_dir" && ctest --output-on-failure --no-tests=error --timeout 900 -j"$jobs" "$@")
}

for variant in "${variants[@]}"; do
  echo "== sanitize: $variant"
  case $variant in
    asan)
      export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1"
      export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
      cmake_options=(-DDDL_FUZZ=ON -DDDL_FUZZ_COVERAGE=parsers)
      build_and_test asan "-fsanitize=address,undefined -fno-sanitize-recover=all" all \
        "${skip[@]}" "${ctest_args[@]}"
      ;;
    tsan)
      export TSAN_OPTIONS="second_deadlock_stack=1"
      # MPICH's UCX patches madvise, which glibc calls as a thread exits,
      # into a hook that takes a lock TSan intercepts on a thread it has
      # already let go: every thread's exit crashed. The hooks serve RDMA
      # registration caches, which shared memory on one node does not use.
      export UCX_MEM_MMAP_HOOK_MODE=none
      # The OpenMP runtime is not built for TSan, so the synchronisation
      # inside an OpenMP team is invisible to it and every parallel loop
      # would look racy: kernels run on one thread, and the threads TSan
      # checks are ddl's own.
      export OMP_NUM_THREADS=1 DDL_NUM_THREADS=1
      # Only the two test programs the label covers are built: the library
      # and a tenth of the tests.
      cmake_options=(-DDDL_FUZZ=OFF)
      build_and_test tsan "-fsanitize=thread" "ddl_thread_tests ddl_mpi_tests" -L threads "${skip[@]}" \
        "${ctest_args[@]}"
      ;;
  esac
done
