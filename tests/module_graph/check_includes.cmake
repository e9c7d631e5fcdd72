# Checks every #include <ddl/...> line of every module's sources (CUDA ones
# too, which a build without CUDA never compiles) against the module graph
# of cmake/ModuleGraph.cmake, and fails listing each include that crosses
# it the wrong way, with its file and line.
# Usage: cmake -DSOURCE_DIR=<ddl source root> -P check_includes.cmake
cmake_minimum_required(VERSION 3.25)
include(${SOURCE_DIR}/cmake/ModuleGraph.cmake)
set(violations "")
set(checked 0)
foreach(module ${DDL_MODULES})
  set(allowed ${module} ${DDL_MODULE_DEPENDS_${module}})
  list(JOIN allowed ", " allowed_text)
  file(GLOB_RECURSE sources ${SOURCE_DIR}/${module}/*.hpp ${SOURCE_DIR}/${module}/*.cpp ${SOURCE_DIR}/${module}/*.cu
       ${SOURCE_DIR}/${module}/*.cuh)
  foreach(source ${sources})
    file(STRINGS ${source} lines REGEX "^[ \t]*#[ \t]*include[ \t]*<ddl/")
    foreach(line ${lines})
      math(EXPR checked "${checked} + 1")
      if(line MATCHES "<ddl/build_config\\.hpp>")
        continue()
      endif()
      string(REGEX MATCH "<ddl/([a-z_]+)/" _ "${line}")
      if(NOT CMAKE_MATCH_1 IN_LIST allowed)
        file(RELATIVE_PATH where ${SOURCE_DIR} ${source})
        list(APPEND violations "${where}: ${line} (${module}/ may include ${allowed_text})")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "includes against the module graph core <- layers <- optim <- parallel <- models:\n  ${text}")
endif()
message("module graph: ${checked} #include <ddl/...> lines, all along the graph")
