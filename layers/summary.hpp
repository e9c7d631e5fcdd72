// A printable model summary in the style of Keras' model.summary(): one row
// per layer with its output shape and parameter count, then the totals.
#pragma once

#include <string>

#include <ddl/layers/module.hpp>

namespace ddl::layers {

// `sample_shape` is one sample's shape without the batch dim, e.g. {1, 28, 28}.
// Output shapes are found by running one zero sample through the model in
// eval mode without recording gradients; the model's mode is restored.
// A Sequential gets one row per child (a Residual child is one row, its
// describe() naming what it holds), and a Device column when it is placed;
// any other model is a single row.
std::string summary(Module& model, const Shape& sample_shape);

}  // namespace ddl::layers
