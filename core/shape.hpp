// Shape: the extents of a tensor, at most kMaxDims of them, row-major.
// Small and trivially copyable so kernels can take it by value on the GPU.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

namespace ddl {

class Shape {
 public:
  static constexpr int kMaxDims = 6;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);
  explicit Shape(const std::vector<std::int64_t>& dims);

  int rank() const { return rank_; }
  std::int64_t operator[](int dim) const { return dims_[static_cast<std::size_t>(dim)]; }
  std::int64_t& operator[](int dim) { return dims_[static_cast<std::size_t>(dim)]; }
  std::int64_t numel() const;
  std::vector<std::int64_t> to_vector() const;

  // Resolves a possibly negative dim (-1 is the last) and checks its range.
  int normalize_dim(int dim, const char* op) const;

  // Row-major strides, in elements.
  std::array<std::int64_t, kMaxDims> strides() const;

  std::string str() const;
  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }

 private:
  int rank_ = 0;
  std::array<std::int64_t, kMaxDims> dims_{};
};

std::ostream& operator<<(std::ostream& os, const Shape& shape);

// The shape two operands broadcast to (NumPy rules: trailing dims aligned,
// each pair equal or one of them 1). Throws naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace ddl
