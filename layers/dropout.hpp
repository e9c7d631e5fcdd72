// Dropout: inverted dropout (Srivastava et al. 2014) — in training each
// element is zeroed with probability p and the survivors scaled by 1/(1-p);
// in evaluation it is the identity. The keep/drop decision of element i
// comes from Philox(seed, offset + i / 8), so a seed gives the same mask on
// CPU and GPU; forward keeps the decisions as bits (n/8 bytes) for backward.
#pragma once

#include <cstdint>

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
