# Finds what ddl builds on. Every package here is a Debian package
# (scripts/install-deps.sh) or part of the CUDA toolkit in /usr/local/cuda.
include(GNUInstallDirs)

find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(fmt REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)

# Resolves an AUTO|ON|OFF option: sets ${out} to ON when `found`, fails when
# the user asked for ON and it was not found.
function(ddl_resolve_feature name found out)
  if(DDL_${name} STREQUAL "OFF")
    set(${out} OFF PARENT_SCOPE)
  elseif(found)
    set(${out} ON PARENT_SCOPE)
  elseif(DDL_${name} STREQUAL "ON")
    message(FATAL_ERROR "DDL_${name}=ON but ${name} was not found")
  else()
    set(${out} OFF PARENT_SCOPE)
  endif()
endfunction()

# CUDA: nvcc plus cuBLAS and cuDNN from the toolkit.
set(ddl_cuda_found OFF)
if(NOT DDL_CUDA STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  # Set before enable_language so CMake never probes an architecture that
  # this toolkit has dropped. 80 = A100, 90 = H100; override on the command line.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit)
    find_library(DDL_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_path(DDL_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(CUDAToolkit_FOUND AND TARGET CUDA::cublas AND DDL_CUDNN_LIBRARY AND DDL_CUDNN_INCLUDE_DIR)
      set(ddl_cuda_found ON)
    endif()
  endif()
endif()
ddl_resolve_feature(CUDA ${ddl_cuda_found} DDL_WITH_CUDA)

find_package(MPI COMPONENTS CXX QUIET)
ddl_resolve_feature(MPI "${MPI_CXX_FOUND}" DDL_WITH_MPI)

set(ddl_nccl_found OFF)
if(DDL_WITH_CUDA AND DDL_WITH_MPI)
  find_library(DDL_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(DDL_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(DDL_NCCL_LIBRARY AND DDL_NCCL_INCLUDE_DIR)
    set(ddl_nccl_found ON)
  endif()
endif()
ddl_resolve_feature(NCCL ${ddl_nccl_found} DDL_WITH_NCCL)

foreach(feature CUDA MPI NCCL)
  if(DDL_WITH_${feature})
    set(DDL_WITH_${feature}_BOOL true)
  else()
    set(DDL_WITH_${feature}_BOOL false)
  endif()
endforeach()
