// Instantiates the CUDA launcher for every layer kernel (DDL_LAYER_KERNELS).
#include <ddl/core/cuda/launch.cuh>
#include <ddl/layers/layer_kernels.hpp>

namespace ddl {
#define DDL_INSTANTIATE_LAYER(Kernel) DDL_INSTANTIATE_CUDA_LAUNCH(kernels::Kernel)
DDL_LAYER_KERNELS(DDL_INSTANTIATE_LAYER)
#undef DDL_INSTANTIATE_LAYER
}  // namespace ddl
