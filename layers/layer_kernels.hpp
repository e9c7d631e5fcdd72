// Every index kernel the layers launch with backend::launch, for the CUDA
// launcher's instantiation in cuda/kernels_cuda.cu (as DDL_CORE_KERNELS for
// core). Kernels are defined beside their layer.
#pragma once

#include <ddl/layers/dropout.hpp>
#include <ddl/layers/loss.hpp>

#define DDL_LAYER_KERNELS(X)                                                                      \
  X(DropoutForward) X(DropoutBackward) X(CrossEntropyRows<std::int32_t>) X(CrossEntropyRows<std::int64_t>)              \
  X(CrossEntropyGradRows<std::int32_t>) X(CrossEntropyGradRows<std::int64_t>)
