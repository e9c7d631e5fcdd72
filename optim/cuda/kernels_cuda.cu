// Instantiates the CUDA launcher for every optimizer kernel (DDL_OPTIM_KERNELS).
#include <ddl/core/cuda/launch.cuh>
#include <ddl/optim/update_kernels.hpp>

namespace ddl {
#define DDL_INSTANTIATE_OPTIM(Kernel) DDL_INSTANTIATE_CUDA_LAUNCH(kernels::Kernel)
DDL_OPTIM_KERNELS(DDL_INSTANTIATE_OPTIM)
#undef DDL_INSTANTIATE_OPTIM
}  // namespace ddl
