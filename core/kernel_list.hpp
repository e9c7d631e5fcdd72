// Each module lists every index kernel it launches (DDL_CORE_KERNELS in
// kernels.hpp, DDL_LAYER_KERNELS, DDL_OPTIM_KERNELS), and its
// cuda/kernels_cuda.cu instantiates the CUDA launcher for each entry. A
// kernel launched but not listed would be found only when a CUDA build
// links, so listing also marks the kernel here, and backend::launch
// static_asserts the mark: a missing entry fails to compile in every build,
// CPU-only included.
#pragma once

namespace ddl::kernels {

// A kernel's name as its list spells it ("Map1<fn::Relu>"), or null for a
// kernel in no list.
template <class Kernel>
inline constexpr const char* kName = nullptr;

// True for the kernels of some module's list.
template <class Kernel>
inline constexpr bool kListed = kName<Kernel> != nullptr;

}  // namespace ddl::kernels

// Expands a list entry into its mark, its name; use inside namespace
// ddl::kernels:
//   DDL_LAYER_KERNELS(DDL_LIST_KERNEL)
#define DDL_LIST_KERNEL(Kernel) \
  template <>                   \
  inline constexpr const char* kName<Kernel> = #Kernel;
