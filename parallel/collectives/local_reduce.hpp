// Internal to the collectives and strategies: the local steps of every
// reduction on host memory (out = a + b, dst += src, and the average's
// data *= factor) with the functors all backends share. A plain loop on the
// calling thread (often the communication thread), not an OpenMP team: the
// compute threads are busy with the backward pass meanwhile.
#pragma once

#include <cstdint>

#include <ddl/core/functors.hpp>
#include <ddl/core/kernels.hpp>

namespace ddl::parallel::detail {

// out = a + b (out may be a or b).
inline void add(const float* a, const float* b, float* out, std::int64_t n) {
  const kernels::Zip2<fn::Add> sum{a, b, out, {}};
  for (std::int64_t i = 0; i < n; ++i) sum(i);
}

inline void add_into(float* dst, const float* src, std::int64_t n) { add(dst, src, dst, n); }

inline void scale(float* data, std::int64_t n, float factor) {
  const kernels::Map1<fn::MulScalar> multiply{data, data, {factor}};
  for (std::int64_t i = 0; i < n; ++i) multiply(i);
}

}  // namespace ddl::parallel::detail
