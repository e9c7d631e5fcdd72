// Instantiates the CUDA launcher for every layer kernel (DDL_LAYER_KERNELS).
#include <ddl/core/cuda/launch.cuh>
#include <ddl/layers/layer_kernels.hpp>

namespace ddl {
DDL_LAYER_KERNELS(DDL_INSTANTIATE_CUDA_LAUNCH)
}  // namespace ddl
