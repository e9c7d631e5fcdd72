#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/init.hpp>

#include <cmath>

namespace ddl::layers {

Fans fans_of(const Shape& shape) {
  DDL_CHECK(shape.rank() == 2 || shape.rank() == 4, "initial_weights: expected a dense [in, out] or conv "
            "[out, in, kh, kw] weight shape, got {}", shape);
  if (shape.rank() == 2) return {shape[0], shape[1]};
  const std::int64_t receptive = shape[2] * shape[3];
  return {shape[1] * receptive, shape[0] * receptive};
}

Tensor initial_weights(const Shape& shape, Init init, const Device& device, Generator* generator) {
  const TensorOptions options{DType::Float32, device, false};
  if (init == Init::Zeros) return zeros(shape, options);
  const Fans fans = fans_of(shape);
  switch (init) {
    case Init::GlorotUniform: {
      const float limit = std::sqrt(6.0f / static_cast<float>(fans.fan_in + fans.fan_out));
      return uniform(shape, -limit, limit, options, generator);
    }
    case Init::HeNormal:
      return normal(shape, 0.0f, std::sqrt(2.0f / static_cast<float>(fans.fan_in)), options, generator);
    case Init::HeUniform: {
      const float limit = std::sqrt(6.0f / static_cast<float>(fans.fan_in));
      return uniform(shape, -limit, limit, options, generator);
    }
    case Init::Zeros:
      break;
  }
  return zeros(shape, options);
}

}  // namespace ddl::layers
