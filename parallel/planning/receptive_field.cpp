// Reading a model's layers into geometry (see receptive_field.hpp).
#include <ddl/parallel/planning/receptive_field.hpp>

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/error.hpp>
#include <ddl/layers/activation.hpp>
#include <ddl/layers/batchnorm2d.hpp>
#include <ddl/layers/conv2d.hpp>
#include <ddl/layers/conv2d_kernels.hpp>
#include <ddl/layers/dense.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/layers/pool2d.hpp>
#include <ddl/layers/residual.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/layers/upsample2d.hpp>

namespace ddl::parallel {

struct SpatialModel::Layer {
  enum class Kind { Convolution, MaxPooling, AvgPooling, Upsampling, Pointwise, Sequence, Residual };
  Kind kind = Kind::Pointwise;
  std::string path;  // "2.body.0", as the model's parameter names spell it
  std::string name;  // the module's describe()

  // Convolution.
  std::int64_t kernel_rows = 0, kernel_cols = 0, in_channels = 0, out_channels = 0;
  layers::Conv2dOptions conv;
  // Pooling.
  layers::Pool2dOptions pool;
  // Upsampling.
  std::int64_t factor = 1;
  // Pointwise: false where the layer returns its input (Dropout in evaluation).
  bool allocates = true;
  // A ReLU that runs inside the convolution before it while
  // config::op_fusion() is on, and so allocates nothing.
  bool fused = false;
  // A ReLU that runs after the max pooling after it while
  // config::op_fusion() is on (Sequential::swappable_with_next).
  bool swapped = false;
  // Sequence: the children. Residual: body and shortcut (empty: the identity),
  // then a ReLU or not.
  std::vector<Layer> body, shortcut;
  bool relu_after = false;

  std::string label() const { return fmt::format("layer '{}' ({})", path, name); }
};

namespace {

using Layer = SpatialModel::Layer;
using Kind = Layer::Kind;

std::string child_path(const std::string& parent, const std::string& name) {
  return parent.empty() ? name : parent + "." + name;
}

// Pointwise on an NCHW tensor: along the channels only.
bool along_channels(int dim) { return dim == 1 || dim == -3; }

Layer read_layer(const layers::Module& module, const std::string& path);

std::vector<Layer> read_children(const layers::Module& module, const std::string& path) {
  std::vector<Layer> children;
  for (const auto& [name, child] : module.children()) children.push_back(read_layer(*child, child_path(path, name)));
  return children;
}

[[noreturn]] void refuse(const layers::Module& module, const std::string& path, const std::string& why) {
  throw Error(fmt::format("tiled inference needs a fully-convolutional model, but layer '{}' ({}) is not: {}",
                          path.empty() ? "model" : path, module.describe(), why));
}

Layer read_layer(const layers::Module& module, const std::string& path) {
  Layer layer;
  layer.path = path.empty() ? "model" : path;
  layer.name = module.describe();
  if (const auto* sequential = dynamic_cast<const layers::Sequential*>(&module)) {
    if (!sequential->placement().empty()) {
      refuse(module, path,
             "it is placed over several devices (model parallelism); tiled inference runs the whole model on each "
             "tile's device, so move it to one device first");
    }
    layer.kind = Kind::Sequence;
    layer.body = read_children(module, path);
    for (std::size_t i = 0; i + 1 < layer.body.size(); ++i) {
      layer.body[i].swapped = sequential->swappable_with_next(i);
      layer.body[i + 1].fused = sequential->fusable_with_next(i) && !sequential->swappable_with_next(i + 1);
    }
  } else if (const auto* conv = dynamic_cast<const layers::Conv2d*>(&module)) {
    layer.kind = Kind::Convolution;
    const Shape& weight = conv->weight().shape();  // [out, in, kh, kw]
    layer.out_channels = weight[0];
    layer.in_channels = weight[1];
    layer.kernel_rows = weight[2];
    layer.kernel_cols = weight[3];
    layer.conv = conv->options();
  } else if (const auto* max_pool = dynamic_cast<const layers::MaxPool2d*>(&module)) {
    layer.kind = Kind::MaxPooling;
    layer.pool = max_pool->options();
  } else if (const auto* avg_pool = dynamic_cast<const layers::AvgPool2d*>(&module)) {
    layer.kind = Kind::AvgPooling;
    layer.pool = avg_pool->options();
  } else if (const auto* upsample = dynamic_cast<const layers::Upsample2d*>(&module)) {
    layer.kind = Kind::Upsampling;
    layer.factor = upsample->scale();
  } else if (dynamic_cast<const layers::ReLU*>(&module) || dynamic_cast<const layers::Tanh*>(&module) ||
             dynamic_cast<const layers::Sigmoid*>(&module) || dynamic_cast<const layers::BatchNorm2d*>(&module)) {
    layer.kind = Kind::Pointwise;
  } else if (dynamic_cast<const layers::Dropout*>(&module)) {
    layer.kind = Kind::Pointwise;
    layer.allocates = false;
  } else if (const auto* softmax = dynamic_cast<const layers::Softmax*>(&module)) {
    if (!along_channels(softmax->dim()))
      refuse(module, path, "a softmax over a spatial axis mixes a whole row of pixels");
    layer.kind = Kind::Pointwise;
  } else if (const auto* log_softmax = dynamic_cast<const layers::LogSoftmax*>(&module)) {
    if (!along_channels(log_softmax->dim())) {
      refuse(module, path, "a log-softmax over a spatial axis mixes a whole row of pixels");
    }
    layer.kind = Kind::Pointwise;
  } else if (const auto* residual = dynamic_cast<const layers::Residual*>(&module)) {
    layer.kind = Kind::Residual;
    layer.body = {read_layer(residual->body(), child_path(path, "body"))};
    if (residual->shortcut() != nullptr)
      layer.shortcut = {read_layer(*residual->shortcut(), child_path(path, "shortcut"))};
    layer.relu_after = residual->activation() == layers::ResidualActivation::ReLU;
  } else if (dynamic_cast<const layers::Flatten*>(&module) || dynamic_cast<const layers::Dense*>(&module)) {
    refuse(module, path, "each of its outputs depends on every pixel of the image");
  } else {
    refuse(module, path,
           "tiling knows the geometry of Conv2d, MaxPool2d, AvgPool2d, Upsample2d, ReLU, Tanh, Sigmoid, Softmax and "
           "LogSoftmax over the channels, BatchNorm2d, Dropout, Sequential and Residual");
  }
  return layer;
}

// ----- Receptive field -------------------------------------------------------

std::int64_t ceil_div(std::int64_t value, std::int64_t divisor) {
  return value >= 0 ? (value + divisor - 1) / divisor : -(-value / divisor);
}

// `reach`, then a layer (or part) of reach `next`: the composition in
// receptive_field.hpp. The alignment: `reach`'s own, and whatever makes the
// start of `next`'s input, x0 / S, an integer multiple of next.alignment.
AxisReach then(const AxisReach& reach, const AxisReach& next) {
  const std::int64_t stride = reach.stride * next.stride, upsampling = reach.upsampling * next.upsampling;
  const std::int64_t common = std::gcd(stride, upsampling);
  const std::int64_t multiple = next.alignment * reach.stride;
  // How far floor(floor(o S_next) S_reach) may fall below floor(o S): the
  // fractions next's floor drops, scaled by S_reach, plus what reach's own
  // floor may carry (receptive_field.hpp).
  const std::int64_t slack = ((reach.upsampling - 1) * next.upsampling + (next.upsampling - 1) * reach.stride) /
                             (reach.upsampling * next.upsampling);
  return {.stride = stride / common,
          .before = reach.before + ceil_div(next.before * reach.stride, reach.upsampling) + slack,
          .after = reach.after + ceil_div(next.after * reach.stride, reach.upsampling),
          .upsampling = upsampling / common,
          .alignment = std::lcm(reach.alignment, multiple / std::gcd(reach.upsampling, multiple))};
}

// A sliding window of `span` pixels (dilation included).
AxisReach window(std::int64_t span, std::int64_t stride, std::int64_t padding) {
  return {stride, padding, span - 1 - padding, 1, stride};
}

ReceptiveField field_of(const std::vector<Layer>& layers);

ReceptiveField field_of(const Layer& layer) {
  switch (layer.kind) {
    case Kind::Convolution: {
      const auto& o = layer.conv;
      return {window(o.dilation * (layer.kernel_rows - 1) + 1, o.stride, o.padding),
              window(o.dilation * (layer.kernel_cols - 1) + 1, o.stride, o.padding)};
    }
    case Kind::MaxPooling:
    case Kind::AvgPooling: {
      const AxisReach axis = window(layer.pool.kernel_size, layer.pool.window_stride(), layer.pool.padding);
      return {axis, axis};
    }
    case Kind::Upsampling: {
      const AxisReach axis{.stride = 1, .before = 0, .after = 0, .upsampling = layer.factor, .alignment = 1};
      return {axis, axis};
    }
    case Kind::Pointwise:
      return {};
    case Kind::Sequence:
      return field_of(layer.body);
    case Kind::Residual: {
      const ReceptiveField body = field_of(layer.body), shortcut = field_of(layer.shortcut);
      const auto same_step = [](const AxisReach& a, const AxisReach& b) {
        return a.stride == b.stride && a.upsampling == b.upsampling;
      };
      if (!same_step(body.rows, shortcut.rows) || !same_step(body.cols, shortcut.cols)) {
        throw Error(
            fmt::format("tiled inference: in {} the body steps {}x{} pixels and the shortcut {}x{}; their "
                        "outputs line up only where the strides agree",
                        layer.label(), body.rows.step(), body.cols.step(), shortcut.rows.step(), shortcut.cols.step()));
      }
      // An output sees what either branch sees, and a tile must start where
      // both branches line up.
      const auto merge = [](const AxisReach& a, const AxisReach& b) {
        return AxisReach{a.stride, std::max(a.before, b.before), std::max(a.after, b.after), a.upsampling,
                         std::lcm(a.alignment, b.alignment)};
      };
      return {merge(body.rows, shortcut.rows), merge(body.cols, shortcut.cols)};
    }
  }
  return {};
}

ReceptiveField field_of(const std::vector<Layer>& layers) {
  ReceptiveField field;
  for (const Layer& layer : layers) {
    const ReceptiveField next = field_of(layer);
    field = {then(field.rows, next.rows), then(field.cols, next.cols)};
  }
  return field;
}

// ----- Shapes and memory -----------------------------------------------------

std::size_t float_bytes(const Shape& shape) { return static_cast<std::size_t>(shape.numel()) * sizeof(float); }

// A walk through the forward pass that tracks shapes and, optionally, the
// bytes alive at once. Mirrors what the modules' forward functions allocate
// in evaluation mode without gradients: Sequential keeps its input while its
// children run, Residual keeps its input, both branches' outputs and their
// sum until it returns (max pooling keeps no winners' indices without
// gradients).
struct Walk {
  DeviceType device = DeviceType::CPU;
  std::size_t peak = 0;                // the most bytes alive at once
  cpu_backend::Conv2dStaging staging;  // per staging buffer, the largest use

  struct Result {
    Shape shape;
    bool fresh;  // a new tensor, not the input
  };

  void alive(std::size_t bytes) { peak = std::max(peak, bytes); }

  // `held`: bytes alive outside this layer, its input included.
  Result run(const Layer& layer, const Shape& in, std::size_t held) {
    switch (layer.kind) {
      case Kind::Convolution:
        return convolution(layer, in, held);
      case Kind::MaxPooling:
      case Kind::AvgPooling:
        return pooling(layer, in, held);
      case Kind::Upsampling: {
        const Shape out{in[0], in[1], in[2] * layer.factor, in[3] * layer.factor};
        alive(held + float_bytes(out));
        return {out, true};
      }
      case Kind::Pointwise: {
        const bool allocates = layer.allocates && !(layer.fused && config::op_fusion());
        if (allocates) alive(held + float_bytes(in));
        return {in, allocates};
      }
      case Kind::Sequence:
        return sequence(layer.body, in, held);
      case Kind::Residual:
        return residual(layer, in, held);
    }
    return {in, false};
  }

  Result convolution(const Layer& layer, const Shape& in, std::size_t held) {
    if (in[1] != layer.in_channels) {
      throw Error(fmt::format("tiled inference: {} expects {} input channels, but its input {} has {}", layer.label(),
                              layer.in_channels, in, in[1]));
    }
    const std::int64_t rows = layers::conv2d_output_extent(in[2], layer.kernel_rows, layer.conv);
    const std::int64_t cols = layers::conv2d_output_extent(in[3], layer.kernel_cols, layer.conv);
    too_small(layer, in, rows, cols);
    const Shape out{in[0], layer.out_channels, rows, cols};
    alive(held + float_bytes(out));
    if (device == DeviceType::CPU && out.numel() > 0) {
      const layers::Conv2dGeometry g{.batch = in[0],
                                     .channels = in[1],
                                     .height = in[2],
                                     .width = in[3],
                                     .filters = layer.out_channels,
                                     .kernel_h = layer.kernel_rows,
                                     .kernel_w = layer.kernel_cols,
                                     .stride = layer.conv.stride,
                                     .padding = layer.conv.padding,
                                     .dilation = layer.conv.dilation,
                                     .out_height = rows,
                                     .out_width = cols};
      staging.keep_largest(cpu_backend::conv2d_forward_staging(g));
    }
    return {out, true};
  }

  Result pooling(const Layer& layer, const Shape& in, std::size_t held) {
    const std::int64_t rows = layers::pool2d_output_extent(in[2], layer.pool);
    const std::int64_t cols = layers::pool2d_output_extent(in[3], layer.pool);
    too_small(layer, in, rows, cols);
    const Shape out{in[0], in[1], rows, cols};
    alive(held + float_bytes(out));
    return {out, true};
  }

  Result sequence(const std::vector<Layer>& children, const Shape& in, std::size_t held) {
    Result x{in, false};
    for (std::size_t i = 0; i < children.size(); ++i) {
      const std::size_t x_bytes = x.fresh ? float_bytes(x.shape) : 0;
      if (children[i].swapped && i + 1 < children.size() && config::op_fusion()) {
        // The pooling, then the ReLU on its output, x alive until both return.
        const Result pooled = run(children[i + 1], x.shape, held + x_bytes);
        const Result y = run(children[i], pooled.shape, held + x_bytes + float_bytes(pooled.shape));
        x = y.fresh ? y : pooled;
        ++i;
        continue;
      }
      const Result y = run(children[i], x.shape, held + x_bytes);
      if (y.fresh) x = y;  // the old x is released once the child returns
    }
    return x;
  }

  Result residual(const Layer& layer, const Shape& in, std::size_t held) {
    const Result branch = sequence(layer.body, in, held);
    const std::size_t branch_bytes = branch.fresh ? float_bytes(branch.shape) : 0;
    const Result skip = sequence(layer.shortcut, in, held + branch_bytes);
    if (branch.shape != skip.shape) {
      throw Error(fmt::format("tiled inference: in {} the body gives {} but the shortcut {} for an input {}",
                              layer.label(), branch.shape, skip.shape, in));
    }
    const std::size_t both = held + branch_bytes + (skip.fresh ? float_bytes(skip.shape) : 0);
    const std::size_t sum = float_bytes(branch.shape);
    alive(both + sum + (layer.relu_after ? sum : 0));
    return {branch.shape, true};
  }

  static void too_small(const Layer& layer, const Shape& in, std::int64_t rows, std::int64_t cols) {
    if (rows > 0 && cols > 0) return;
    throw Error(fmt::format("tiled inference: {} cannot run on an input of {}x{} pixels ({}): its window does not fit",
                            layer.label(), in[2], in[3], in));
  }
};

void check_input(const Shape& input) {
  if (input.rank() != 4 || input.numel() == 0) {
    throw Error(fmt::format("tiled inference: expected a non-empty NCHW input [N, C, H, W], got {}", input));
  }
}

}  // namespace

std::string AxisReach::step() const {
  return upsampling == 1 ? fmt::format("{}", stride) : fmt::format("{}/{}", stride, upsampling);
}

std::string ReceptiveField::describe() const {
  const bool aligned_by_stride =
      rows.upsampling == 1 && cols.upsampling == 1 && rows.alignment == rows.stride && cols.alignment == cols.stride;
  return fmt::format("{}x{} pixels, stride {}x{}{}, reaching {} above, {} below, {} left, {} right", rows.size(),
                     cols.size(), rows.step(), cols.step(),
                     aligned_by_stride ? "" : fmt::format(", tiles aligned to {}x{}", rows.alignment, cols.alignment),
                     rows.before, rows.after, cols.before, cols.after);
}

SpatialModel::SpatialModel(const layers::Module& model) {
  layers_.push_back(read_layer(model, ""));
  field_ = field_of(layers_);
  for (const auto& [name, tensor] : model.state_dict()) parameter_bytes_ += tensor.nbytes();
  // Module::to moves gradients with their parameters: a model fresh from
  // training brings them along to every tile's device.
  for (const Tensor& parameter : model.parameters()) {
    if (parameter.grad().defined()) parameter_bytes_ += parameter.grad().nbytes();
  }
}

SpatialModel::~SpatialModel() = default;
SpatialModel::SpatialModel(SpatialModel&&) noexcept = default;
SpatialModel& SpatialModel::operator=(SpatialModel&&) noexcept = default;

Shape SpatialModel::output_shape(const Shape& input) const {
  check_input(input);
  return Walk{}.sequence(layers_, input, 0).shape;
}

TileMemory SpatialModel::memory(const Shape& input, DeviceType device) const {
  check_input(input);
  Walk walk;
  walk.device = device;
  const std::size_t input_bytes = float_bytes(input);
  walk.alive(input_bytes);
  walk.sequence(layers_, input, input_bytes);
  return {parameter_bytes_ + walk.peak, walk.staging.total()};
}

ReceptiveField receptive_field(const layers::Module& model) { return SpatialModel(model).receptive_field(); }

}  // namespace ddl::parallel
