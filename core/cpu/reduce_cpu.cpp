// CPU full reduction. The input is cut into fixed-size chunks whose partial
// sums (in double) are added in chunk order, so the result is bitwise the
// same for every thread count.
#include <ddl/core/backend.hpp>

#include <vector>

namespace ddl::cpu_backend {

void sum_all(const float* x, std::int64_t n, float* out) {
  constexpr std::int64_t kChunk = 1 << 14;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<std::size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t end = std::min(n, (c + 1) * kChunk);
    double total = 0.0;
    for (std::int64_t i = c * kChunk; i < end; ++i) total += x[i];
    partial[static_cast<std::size_t>(c)] = total;
  }
  double total = 0.0;
  for (const double p : partial) total += p;
  *out = static_cast<float>(total);
}

}  // namespace ddl::cpu_backend
