# `cmake --install` puts the library, the headers under include/ddl and a
# package config in lib/cmake/ddl, so that outside projects write
#   find_package(ddl) + target_link_libraries(app ddl::ddl).
include(CMakePackageConfigHelpers)

install(TARGETS ddl EXPORT ddlTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ddl.hpp ${DDL_GENERATED_ROOT}/ddl/build_config.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ddl)
foreach(module core layers optim models)
  install(DIRECTORY ${module}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ddl/${module}
          FILES_MATCHING PATTERN "*.hpp")
endforeach()
if(DDL_WITH_MPI)
  # mpi_internal.hpp and the collectives' helpers include mpi.h or are
  # internal: the installed API exposes no MPI types.
  install(DIRECTORY parallel/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ddl/parallel
          FILES_MATCHING PATTERN "*.hpp" PATTERN "mpi_internal.hpp" EXCLUDE PATTERN "local_reduce.hpp" EXCLUDE
          PATTERN "segments.hpp" EXCLUDE)
endif()

set(ddl_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/ddl)
install(EXPORT ddlTargets NAMESPACE ddl:: DESTINATION ${ddl_config_dir})
configure_package_config_file(cmake/ddlConfig.cmake.in ${CMAKE_BINARY_DIR}/ddlConfig.cmake
  INSTALL_DESTINATION ${ddl_config_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ddlConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ddlConfig.cmake ${CMAKE_BINARY_DIR}/ddlConfigVersion.cmake
  DESTINATION ${ddl_config_dir})
