// Every index kernel the layers launch with backend::launch
// (core/kernel_list.hpp): instantiated for CUDA by cuda/kernels_cuda.cu,
// marked for backend::launch's check below. Kernels are defined beside their
// layer.
#pragma once

#include <ddl/core/kernel_list.hpp>
#include <ddl/layers/dropout_kernels.hpp>
#include <ddl/layers/loss_kernels.hpp>
#include <ddl/layers/upsample2d_kernels.hpp>

// clang-format off
#define DDL_LAYER_KERNELS(X)                                                                          \
  X(DropoutMask) X(DropoutMaskOfPart) X(DropoutApply) X(CrossEntropyRows<std::int32_t>) X(CrossEntropyRows<std::int64_t>) \
  X(CrossEntropyGradRows<std::int32_t>) X(CrossEntropyGradRows<std::int64_t>) X(Upsample2dForward)         \
  X(Upsample2dBackward)
// clang-format on

namespace ddl::kernels {
DDL_LAYER_KERNELS(DDL_LIST_KERNEL)
}  // namespace ddl::kernels
