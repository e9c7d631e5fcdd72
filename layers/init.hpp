// Weight initialisers, all drawn from a seeded Philox Generator so a seed
// fixes a model's initial weights on every device.
//   Glorot/Xavier uniform: U(-a, a), a = sqrt(6 / (fan_in + fan_out))
//     (Glorot & Bengio 2010; the Keras default for Dense and Conv2d).
//   He normal: N(0, sqrt(2 / fan_in)); He uniform: U(-a, a), a = sqrt(6 / fan_in)
//     (He et al. 2015, for ReLU networks).
#pragma once

#include <cstdint>

#include <ddl/core/random.hpp>
#include <ddl/core/tensor.hpp>

namespace ddl::layers {

struct Fans {
  std::int64_t fan_in;
  std::int64_t fan_out;
};

// Dense weights [in, out]: fans (in, out). Conv weights [out, in, kh, kw]:
// fans (in * kh * kw, out * kh * kw).
Fans fans_of(const Shape& weight_shape);

enum class Init { GlorotUniform, HeNormal, HeUniform, Zeros };

Tensor initial_weights(const Shape& shape, Init init, const Device& device = cpu(), Generator* generator = nullptr);

}  // namespace ddl::layers
