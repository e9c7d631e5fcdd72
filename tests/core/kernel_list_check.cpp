// Compiled by ctest (tests/CMakeLists.txt), not linked into a test program:
// backend::launch must refuse, at compile time and in every build, a kernel
// that is in no module's list (core/kernel_list.hpp), because the lists are
// what the CUDA backend instantiates. Listing the kernel makes the same code
// compile, so the refusal is the list's doing and nothing else's.
#include <ddl/core/backend.hpp>
#include <ddl/core/kernels.hpp>

namespace ddl::kernels {

struct FillOnes {
  float* y;
  DDL_HOST_DEVICE void operator()(Index i) const { y[i] = 1.0f; }
};

#ifdef DDL_LIST_FILL_ONES
DDL_LIST_KERNEL(FillOnes)
#endif

}  // namespace ddl::kernels

void fill_ones(float* y, std::int64_t n) { ddl::backend::launch(ddl::cpu(), n, ddl::kernels::FillOnes{y}); }
