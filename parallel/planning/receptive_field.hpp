// The receptive field of a fully-convolutional model: which input pixels an
// output pixel depends on. Tiled inference (tile_plan.hpp) cuts an image into
// tiles with it, each read with the halo its outputs need, so that the
// stitched tiles equal the whole image's output exactly. SpatialModel is the
// model as that planning sees it: the geometry of each layer, the output
// extent an input extent gives, and the memory one forward pass holds.
//
// Understood: Conv2d (any kernel, stride, padding, dilation), MaxPool2d and
// AvgPool2d (any padding, ceil_mode), Upsample2d (nearest), pointwise layers (ReLU, Tanh, Sigmoid,
// Softmax and LogSoftmax over the channels, BatchNorm2d and Dropout, which
// are pointwise in evaluation mode), Sequential and Residual blocks whose
// branches step alike. Anything else (Flatten, Dense, a softmax over a
// spatial axis, a module ddl does not know) mixes pixels from the whole
// image, so tiling it could not be exact: it is refused, named.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ddl/core/device.hpp>
#include <ddl/core/shape.hpp>
#include <ddl/layers/module.hpp>

namespace ddl::parallel {

// One axis of a receptive field. An output pixel stands for S = stride /
// upsampling input pixels (a fraction once a model upsamples), and output
// position o depends on the input positions from floor(o S) - before to
// floor(o S) + after (inclusive); those outside the image are the zero
// padding each layer adds for itself.
//   A layer of window k (dilated), stride s and padding p: S = s, before p,
//   after k - 1 - p. Nearest upsampling by f: S = 1/f, before = after = 0.
//   Composition (part a, then layer b): S = S_a S_b, after = a.after +
//   ceil(b.after S_a), before = a.before + ceil(b.before S_a) + slack, where
//   slack bounds floor(o S) - floor(floor(o S_b) S_a): with S_a = s_a / d_a
//   and d_b S_b's denominator, floor(((d_a - 1) d_b + (d_b - 1) s_a) /
//   (d_a d_b)). With integer strides the slack is 0 and the composition
//   exact: before = a.before + b.before S_a.
// `alignment`: a tile's first input pixel must be a multiple of it, so that
// every strided layer's windows start where they start on the whole image,
// and every upsampled pixel repeats the one it repeats there: the product of
// the strides for a model without upsampling.
struct AxisReach {
  std::int64_t stride = 1;
  std::int64_t before = 0;
  std::int64_t after = 0;
  std::int64_t upsampling = 1;  // S's denominator, in lowest terms with stride
  std::int64_t alignment = 1;

  std::int64_t size() const { return before + after + 1; }  // the input pixels one output pixel sees, at most
  // S as a message writes it: "2", or "1/2" after upsampling.
  std::string step() const;
  bool operator==(const AxisReach&) const = default;
};

struct ReceptiveField {
  AxisReach rows, cols;

  // "31x31 pixels, stride 1x1, reaching 15 above, 15 below, 15 left, 15 right"
  // (strides as fractions after upsampling, "1/2x1/2", and the alignment
  // where it is not the stride).
  std::string describe() const;
  bool operator==(const ReceptiveField&) const = default;
};

// The bytes one forward pass of a tile holds on its device at its peak.
struct TileMemory {
  // What the device's allocator counts (memory_stats(device).peak_bytes): the
  // parameters, buffers and gradients, the tile's input, and the most activations alive
  // at once, with cuDNN's convolution workspaces on CUDA left out (cuDNN
  // picks them at run time, at most 256 MiB).
  std::size_t tensors = 0;
  // CPU convolutions' staging buffers (oneDNN's blocked layouts of the
  // input, weight and output and its scratchpad, or ddl's Winograd's chunk
  // buffers and strips, per thread where each thread holds its own), kept
  // by the kernel outside the allocator's count: per buffer the largest
  // convolution's.
  std::size_t staging = 0;

  std::size_t total() const { return tensors + staging; }
};

class SpatialModel {
 public:
  // Reads the layers of `model`; throws ddl::Error naming the first layer
  // that is not fully convolutional (its path, e.g. "4", and type), or a
  // Residual block whose body and shortcut step differently.
  explicit SpatialModel(const layers::Module& model);
  ~SpatialModel();
  SpatialModel(SpatialModel&&) noexcept;
  SpatialModel& operator=(SpatialModel&&) noexcept;

  const ReceptiveField& receptive_field() const { return field_; }

  // The output shape for an input [N, C, H, W]; throws ddl::Error naming the
  // layer where the input is too small or has the wrong channel count.
  Shape output_shape(const Shape& input) const;

  // The memory of a forward pass in evaluation mode, without gradients, on an
  // input of shape `input` that the caller holds on the device.
  TileMemory memory(const Shape& input, DeviceType device) const;

  // The parameters' and buffers' bytes, and their gradients' where a model
  // fresh from training still holds them (they move with the model).
  std::size_t parameter_bytes() const { return parameter_bytes_; }

  struct Layer;

 private:
  std::vector<Layer> layers_;
  ReceptiveField field_;
  std::size_t parameter_bytes_ = 0;
};

// SpatialModel(model).receptive_field().
ReceptiveField receptive_field(const layers::Module& model);

}  // namespace ddl::parallel
