#include <ddl/core/check.hpp>
#include <ddl/core/shape.hpp>

#include <sstream>

namespace ddl {

Shape::Shape(std::initializer_list<std::int64_t> dims) : Shape(std::vector<std::int64_t>(dims)) {}

Shape::Shape(const std::vector<std::int64_t>& dims) {
  DDL_CHECK(dims.size() <= kMaxDims, "Shape: rank {} exceeds the maximum of {}", dims.size(), kMaxDims);
  rank_ = static_cast<int>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    DDL_CHECK(dims[i] >= 0, "Shape: dimension {} is negative ({})", i, dims[i]);
    dims_[i] = dims[i];
  }
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<std::size_t>(i)];
  return n;
}

std::vector<std::int64_t> Shape::to_vector() const {
  return {dims_.begin(), dims_.begin() + rank_};
}

int Shape::normalize_dim(int dim, const char* op) const {
  const int resolved = dim < 0 ? dim + rank_ : dim;
  DDL_CHECK(resolved >= 0 && resolved < rank_, "{}: dim {} is out of range for shape {}", op, dim, *this);
  return resolved;
}

std::array<std::int64_t, Shape::kMaxDims> Shape::strides() const {
  std::array<std::int64_t, kMaxDims> strides{};
  std::int64_t stride = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    strides[static_cast<std::size_t>(i)] = stride;
    stride *= dims_[static_cast<std::size_t>(i)];
  }
  return strides;
}

std::string Shape::str() const {
  std::ostringstream os;
  os << '[';
  for (int i = 0; i < rank_; ++i) os << (i ? ", " : "") << dims_[static_cast<std::size_t>(i)];
  os << ']';
  return os.str();
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[static_cast<std::size_t>(i)] != other.dims_[static_cast<std::size_t>(i)]) return false;
  }
  return true;
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape.str(); }

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<std::int64_t> dims(static_cast<std::size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i;
    const int ib = b.rank() - rank + i;
    const std::int64_t da = ia >= 0 ? a[ia] : 1;
    const std::int64_t db = ib >= 0 ? b[ib] : 1;
    DDL_CHECK(da == db || da == 1 || db == 1, "{}: shapes {} and {} cannot be broadcast together", op, a, b);
    dims[static_cast<std::size_t>(i)] = da == 1 ? db : da;
  }
  return Shape(dims);
}

}  // namespace ddl
