# Configures and builds the library with -DDDL_CUDA=OFF, so a CUDA-enabled
# CI run also proves the CPU-only build still compiles.
# Usage: cmake -DSOURCE_DIR=... -DWORK_DIR=... -P build_without_cuda.cmake
include(${CMAKE_CURRENT_LIST_DIR}/run_steps.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
ddl_run_steps(
  "${CMAKE_COMMAND}|-S|${SOURCE_DIR}|-B|${WORK_DIR}|-DDDL_CUDA=OFF|-DDDL_BUILD_TESTS=OFF|-DDDL_BUILD_EXAMPLES=OFF"
  "${CMAKE_COMMAND}|--build|${WORK_DIR}|--target|ddl|-j2")
