// Internal to the collectives and strategies: the local steps of every
// reduction on host memory, dst += src and the average's data *= factor, with
// the functors all backends share. A plain loop on
// the calling thread (often the communication thread), not an OpenMP team:
// the compute threads are busy with the backward pass meanwhile.
#pragma once

#include <cstdint>

#include <ddl/core/functors.hpp>
#include <ddl/core/kernels.hpp>

namespace ddl::parallel::detail {

inline void add_into(float* dst, const float* src, std::int64_t n) {
  const kernels::Zip2<fn::Add> add{dst, src, dst, {}};
  for (std::int64_t i = 0; i < n; ++i) add(i);
}

inline void scale(float* data, std::int64_t n, float factor) {
  const kernels::Map1<fn::MulScalar> multiply{data, data, {factor}};
  for (std::int64_t i = 0; i < n; ++i) multiply(i);
}

}  // namespace ddl::parallel::detail
