// Dropout: inverted dropout (Srivastava et al. 2014) — in training each
// element is zeroed with probability p and the survivors scaled by 1/(1-p);
// in evaluation it is the identity. The keep/drop decision of element i is
// word i % 4 of Philox(seed, offset + i / 4), so a seed gives the same mask on
// CPU and GPU and backward recomputes the mask instead of storing it.
#pragma once

#include <cstdint>

#include <ddl/core/macros.hpp>
#include <ddl/core/random.hpp>
#include <ddl/layers/module.hpp>

namespace ddl::layers {

// `training` false: returns input. Draws from `generator` (or the default).
Tensor dropout(const Tensor& input, float p, bool training, Generator* generator = nullptr);

class Dropout : public Module {
 public:
  explicit Dropout(float p = 0.5f, Generator* generator = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Dropout"; }
  std::string describe() const override;

 private:
  float p_;
  Generator* generator_;
};

}  // namespace ddl::layers

namespace ddl::kernels {

// out[i] = keep(i) ? in[i] / (1 - p) : 0, the same for the forward pass (on
// x) and the backward pass (on the upstream gradient). One Philox call gives
// four 32-bit words, so index j handles elements 4j .. 4j+3 with counter
// offset + j: a quarter of the Philox work of one call per element.
struct DropoutApply {
  const float* in;
  float* out;
  std::int64_t n;
  std::uint64_t seed;
  std::uint64_t offset;
  float p;
  static constexpr std::int64_t kPerCall = 4;
  static std::int64_t calls(std::int64_t n) { return (n + kPerCall - 1) / kPerCall; }
  DDL_HOST_DEVICE void operator()(std::int64_t j) const {
    const Philox4x32 bits(offset + static_cast<std::uint64_t>(j), seed);
    const float scale = 1.0f / (1.0f - p);
    for (std::int64_t lane = 0; lane < kPerCall; ++lane) {
      const std::int64_t i = j * kPerCall + lane;
      if (i < n) out[i] = uint_to_unit_float(bits.out[lane]) > p ? in[i] * scale : 0.0f;
    }
  }
};

}  // namespace ddl::kernels
