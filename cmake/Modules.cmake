# ddl_add_module(<name>): the module <name>/ as the object library
# ddl_<name>, part of libddl. Its include path is an include root holding
# ddl/<name> (a link to the source folder) plus, through its dependencies
# (cmake/ModuleGraph.cmake), theirs and nothing else: layers/ can include
# <ddl/core/...> but not <ddl/optim/...>. The folder's own CMakeLists.txt
# adds the sources to ddl_<name>.
include(${CMAKE_CURRENT_LIST_DIR}/ModuleGraph.cmake)

function(ddl_add_module name)
  set(target ddl_${name})
  add_library(${target} OBJECT)
  set(root ${CMAKE_BINARY_DIR}/modules/${name})
  file(MAKE_DIRECTORY ${root}/ddl)
  file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${name} ${root}/ddl/${name} SYMBOLIC)
  target_include_directories(${target} PUBLIC ${root})
  target_link_libraries(${target} PUBLIC ddl_build_settings)
  foreach(dependency IN LISTS DDL_MODULE_DEPENDS_${name})
    target_link_libraries(${target} PUBLIC ddl_${dependency})
  endforeach()
  target_link_libraries(ddl PRIVATE ${target})
  # What most of a module's files include, parsed once per module (a
  # precompiled header) instead of once per file. CMake makes them for C++
  # only; nvcc compiles the .cu files as before. Every module may include
  # core's headers.
  target_precompile_headers(${target} PRIVATE <algorithm> <cmath> <functional> <memory> <optional> <string> <vector>
                            <fmt/format.h> <ddl/core/check.hpp> <ddl/core/ops.hpp> <ddl/core/tensor.hpp>)
  add_subdirectory(${name})
endfunction()
