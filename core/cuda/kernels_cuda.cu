// Instantiates the CUDA launcher for every core kernel (DDL_CORE_KERNELS).
#include <ddl/core/cuda/launch.cuh>
#include <ddl/core/kernels.hpp>

namespace ddl {
DDL_CORE_KERNELS(DDL_INSTANTIATE_CUDA_LAUNCH)
}  // namespace ddl
