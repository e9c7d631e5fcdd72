# Configures and builds the library with -DDDL_CUDA=OFF, so a CUDA-enabled
# CI run also proves the CPU-only build still compiles.
file(REMOVE_RECURSE ${WORK_DIR})
foreach(step
    "${CMAKE_COMMAND};-S;${SOURCE_DIR};-B;${WORK_DIR};-DDDL_CUDA=OFF;-DDDL_BUILD_TESTS=OFF"
    "${CMAKE_COMMAND};--build;${WORK_DIR};--target;ddl;-j2")
  execute_process(COMMAND ${step} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  message("${output}")
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "build without CUDA: step failed (${result}): ${step}")
  endif()
endforeach()
