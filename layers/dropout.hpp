// Dropout: inverted dropout (Srivastava et al. 2014) — in training each
// element is zeroed with probability p and the survivors scaled by 1/(1-p);
// in evaluation it is the identity. The keep/drop decision of element i
// comes from Philox(seed, offset + i / 8), so a seed gives the same mask on
// CPU and GPU; forward keeps the decisions for backward, a byte each (n bytes).
#pragma once

#include <cstdint>

#include <ddl/core/random.hpp>
#include <ddl/layers/module.hpp>

namespace ddl::layers {

// `training` false: returns input. Draws from `generator` (or the default).
Tensor dropout(const Tensor& input, float p, bool training, Generator* generator = nullptr);
// Dropout of a part of a whole tensor (a tensor-parallel rank's features):
// `input` is the whole's indices [begin, begin + input.size(dim)) along
// `dim`, where the whole has `whole`, and each element gets the mask the
// whole tensor's dropout would give it; the generator advances as for the
// whole. So the ranks that hold the parts draw the whole's mask between
// them, each only its own bits.
Tensor dropout_of_part(const Tensor& input, float p, bool training, int dim, std::int64_t begin, std::int64_t whole,
                       Generator* generator = nullptr);

class Dropout : public Module {
 public:
  explicit Dropout(float p = 0.5f, Generator* generator = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Dropout"; }
  std::string describe() const override;
  float rate() const { return p_; }
  Generator* generator() const { return generator_; }  // null: the default

 private:
  float p_;
  Generator* generator_;
};

}  // namespace ddl::layers
