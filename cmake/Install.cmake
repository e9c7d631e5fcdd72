# `cmake --install` puts the library, the headers under include/ddl and a
# package config in lib/cmake/ddl, so that outside projects write
#   find_package(ddl) + target_link_libraries(app ddl::ddl).
include(CMakePackageConfigHelpers)

install(TARGETS ddl EXPORT ddlTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ddl.hpp ${DDL_GENERATED_ROOT}/ddl/build_config.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ddl)
# The public API only. Internal headers, which ddl's own sources share but no
# public header includes, stay behind: core's backends (cpu/, cuda/,
# backend, dispatch, kernels, kernel lists, functors), check macros (fmt),
# caching pool and op helpers; the layers' kernels (<layer>_kernels.hpp),
# kernel list and cuDNN helpers; the optimizers' update kernels; the
# loader's prefetch thread; parallel/'s MPI state, tunables and wire
# helpers (the installed API exposes no MPI types). The install test
# compiles every installed header on its own, so a public header that
# needed one of these would fail it.
set(ddl_internal_headers_core backend.hpp caching_pool.hpp check.hpp dispatch.hpp functors.hpp gemm_args.hpp
    kernel_list.hpp kernels.hpp log_sum_exp.hpp ops/helpers.hpp)
set(ddl_internal_headers_layers batchnorm2d_kernels.hpp conv2d_kernels.hpp conv2d_unfold.hpp conv2d_winograd.hpp
    dropout_kernels.hpp layer_kernels.hpp loss_kernels.hpp pool2d_kernels.hpp upsample2d_kernels.hpp)
set(ddl_internal_headers_optim update_kernels.hpp)
set(ddl_internal_headers_parallel choice_by_name.hpp config.hpp communication/mpi_internal.hpp
    strategies/pipeline/stage_links.hpp strategies/pipeline/stage_state.hpp collectives/half.hpp
    collectives/local_reduce.hpp collectives/segments.hpp collectives/transport.hpp)
set(ddl_internal_headers_models data/batch_prefetcher.hpp)
foreach(module ${DDL_MODULES})
  file(GLOB_RECURSE headers RELATIVE ${CMAKE_SOURCE_DIR}/${module} CONFIGURE_DEPENDS ${module}/*.hpp)
  foreach(header ${headers})
    if(header IN_LIST ddl_internal_headers_${module} OR header MATCHES "^(cpu|cuda)/")
      continue()
    endif()
    get_filename_component(folder ${header} DIRECTORY)
    install(FILES ${module}/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ddl/${module}/${folder})
  endforeach()
endforeach()

set(ddl_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/ddl)
install(EXPORT ddlTargets NAMESPACE ddl:: DESTINATION ${ddl_config_dir})
configure_package_config_file(cmake/ddlConfig.cmake.in ${CMAKE_BINARY_DIR}/ddlConfig.cmake
  INSTALL_DESTINATION ${ddl_config_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ddlConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ddlConfig.cmake ${CMAKE_BINARY_DIR}/ddlConfigVersion.cmake
  DESTINATION ${ddl_config_dir})
