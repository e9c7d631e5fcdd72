# Installs the built ddl into a fresh prefix, builds the consumer project
# against it with find_package(ddl), and runs it.
# Usage: cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P consumer_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/run_steps.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
ddl_run_steps(
  "${CMAKE_COMMAND}|--install|${BUILD_DIR}|--prefix|${WORK_DIR}/prefix"
  "${CMAKE_COMMAND}|-S|${SOURCE_DIR}/tests/install/consumer|-B|${WORK_DIR}/build|-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix"
  "${CMAKE_COMMAND}|--build|${WORK_DIR}/build"
  "${WORK_DIR}/build/consumer")
