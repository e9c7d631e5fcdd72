# DDL_FUZZ=ON: the libFuzzer targets of fuzz/, in a build that
# AddressSanitizer and UndefinedBehaviorSanitizer check, so a parser's
# overflow or UB anywhere under it stops the fuzzer. The sanitizers come in
# CMAKE_CXX_FLAGS (scripts/fuzz.sh and scripts/sanitize.sh pass them), the
# coverage flags from here. Included before any target, so every
# object, libddl's and the fuzz targets', is compiled alike. clang only
# (libFuzzer is part of clang's runtime, Debian's libclang-rt-14-dev), CUDA
# off (nvcc takes none of these flags; the parsers are host code).
#
# DDL_FUZZ_COVERAGE says which objects get libFuzzer's coverage counters,
# the feedback that steers its mutations:
#   all      every object: scripts/fuzz.sh's own build, for long runs
#   parsers  only the files of fuzz/coverage_allowlist.txt, the parsers the
#            targets exist for: scripts/sanitize.sh's ASan build, whose test
#            suite ran 2.5-4x slower with counters in every object
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "DDL_FUZZ=ON needs clang (-DCMAKE_CXX_COMPILER=clang++); this is ${CMAKE_CXX_COMPILER_ID}")
endif()
if(NOT DDL_CUDA STREQUAL "OFF")
  message(FATAL_ERROR "DDL_FUZZ=ON fuzzes the host parsers: configure with -DDDL_CUDA=OFF")
endif()
if(NOT CMAKE_CXX_FLAGS MATCHES "-fsanitize=address")
  message(FATAL_ERROR "DDL_FUZZ=ON needs AddressSanitizer in the flags: "
                      "-DCMAKE_CXX_FLAGS=\"-fsanitize=address,undefined -fno-sanitize-recover=all\" "
                      "(scripts/fuzz.sh passes them)")
endif()
set(DDL_FUZZ_COVERAGE all CACHE STRING "Objects with libFuzzer's coverage counters: all or parsers")
set_property(CACHE DDL_FUZZ_COVERAGE PROPERTY STRINGS all parsers)
if(NOT DDL_FUZZ_COVERAGE MATCHES "^(all|parsers)$")
  message(FATAL_ERROR "DDL_FUZZ_COVERAGE is '${DDL_FUZZ_COVERAGE}': expected all or parsers")
endif()
# fuzzer-no-link: coverage counters without libFuzzer's main(), which only
# the fuzz targets link (-fsanitize=fuzzer, fuzz/CMakeLists.txt).
add_compile_options(-fsanitize=fuzzer-no-link)
if(DDL_FUZZ_COVERAGE STREQUAL "parsers")
  add_compile_options(-fsanitize-coverage-allowlist=${PROJECT_SOURCE_DIR}/fuzz/coverage_allowlist.txt)
endif()
