# DDL_FUZZ=ON: the whole build instrumented for libFuzzer (coverage) and
# checked by AddressSanitizer and UndefinedBehaviorSanitizer, so a parser's
# overflow or UB anywhere under it stops the fuzzer. Included before any
# target, so every object, libddl's and the fuzz targets', is compiled alike.
# clang only (libFuzzer is part of clang's runtime, Debian's libclang-rt-14-dev);
# scripts/fuzz.sh configures it with CUDA and MPI off.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "DDL_FUZZ=ON needs clang (-DCMAKE_CXX_COMPILER=clang++); this is ${CMAKE_CXX_COMPILER_ID}")
endif()
if(NOT DDL_CUDA STREQUAL "OFF" OR NOT DDL_MPI STREQUAL "OFF")
  message(FATAL_ERROR "DDL_FUZZ=ON fuzzes the host parsers: configure with -DDDL_CUDA=OFF -DDDL_MPI=OFF")
endif()
set(DDL_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=all)
# fuzzer-no-link: coverage counters without libFuzzer's main(), which only
# the fuzz targets link (-fsanitize=fuzzer, fuzz/CMakeLists.txt).
add_compile_options(${DDL_SANITIZERS} -fsanitize=fuzzer-no-link -fno-omit-frame-pointer)
add_link_options(${DDL_SANITIZERS})
