// Dropout: inverted dropout (Srivastava et al. 2014) — in training each
// element is zeroed with probability p and the survivors scaled by 1/(1-p);
// in evaluation it is the identity. The keep/drop decision of element i is
// Philox(seed, offset + i), so a seed gives the same mask on CPU and GPU and
// backward recomputes the mask instead of storing it.
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
// x) and the backward pass (on the upstream gradient).
struct DropoutApply {
  const float* in;
  float* out;
  std::uint64_t seed;
  std::uint64_t offset;
  float p;
  DDL_HOST_DEVICE void operator()(std::int64_t i) const {
    const Philox4x32 bits(offset + static_cast<std::uint64_t>(i), seed);
    const bool keep = uint_to_unit_float(bits.out[0]) > p;
    out[i] = keep ? in[i] / (1.0f - p) : 0.0f;
  }
};

}  // namespace ddl::kernels
