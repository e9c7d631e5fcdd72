# Configures and builds the library and ddl-train with -DDDL_CUDA=OFF and
# -DDDL_MPI=OFF, so a CI run with both also proves that the CPU-only build and
# the build without MPI (parallel/'s single-process part alone) compile.
# Usage: cmake -DSOURCE_DIR=... -DWORK_DIR=... -P build_without_cuda_or_mpi.cmake
include(${CMAKE_CURRENT_LIST_DIR}/run_steps.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
ddl_run_steps(
  "${CMAKE_COMMAND}|-S|${SOURCE_DIR}|-B|${WORK_DIR}|-DDDL_CUDA=OFF|-DDDL_MPI=OFF|-DDDL_BUILD_TESTS=OFF|-DDDL_BUILD_EXAMPLES=OFF"
  "${CMAKE_COMMAND}|--build|${WORK_DIR}|--target|ddl|ddl-train|-j2")
