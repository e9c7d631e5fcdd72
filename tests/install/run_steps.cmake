# ddl_run_steps(step...): runs each step (a ;-list command line) in order,
# echoing its output, and fails naming the first step that fails.
function(ddl_run_steps)
  foreach(step ${ARGN})
    string(REPLACE "|" ";" command "${step}")
    execute_process(COMMAND ${command} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
    message("${output}")
    if(NOT result EQUAL 0)
      message(FATAL_ERROR "step failed (exit ${result}): ${command}")
    endif()
  endforeach()
endfunction()
