// Instantiates the CUDA launcher for every optimizer kernel (DDL_OPTIM_KERNELS).
#include <ddl/core/cuda/launch.cuh>
#include <ddl/optim/update_kernels.hpp>

namespace ddl {
DDL_OPTIM_KERNELS(DDL_INSTANTIATE_CUDA_LAUNCH)
}  // namespace ddl
