// What the split layers share (see split_parameters.hpp).
#include <ddl/parallel/tensor/split_parameters.hpp>

#include <fmt/format.h>

#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>

namespace ddl::parallel::detail {

Tensor part_of(const Tensor& whole, int dim, const TensorGroup& group) {
  const ChunkRange part = group.part(whole.size(dim));
  return slice(whole.detach(), part.begin, part.end, dim);
}

void check_splittable(const char* type, const std::string& whole, std::int64_t count, const char* what,
                      const TensorGroup& group) {
  DDL_CHECK(count >= group.size(), "{}: {} has {} {}, fewer than the {} ranks of its tensor group", type, whole, count,
            what, group.size());
}

std::string describe_split(const char* type, const std::string& whole, const char* what, std::int64_t count,
                           const TensorGroup& group) {
  const ChunkRange part = group.part(count);
  return fmt::format("{}({}; {} [{}, {}) on rank {} of {})", type, whole, what, part.begin, part.end, group.rank(),
                     group.size());
}

}  // namespace ddl::parallel::detail
