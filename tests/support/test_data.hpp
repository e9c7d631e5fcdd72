// Test data for the core suite: random shapes with awkward extents, random
// tensors with the value ranges an op needs (positive, away from zero,
// distinct), and an element-wise comparison that names the worst element.
#pragma once

#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <ddl/ddl.hpp>

namespace ddl::test {

// A small CNN whose forward changes state: BatchNorm's running statistics
// and dropout's masks (12x12 images, 10 classes; nine layers: Conv 1-4 3x3,
// BatchNorm, ReLU, MaxPool 2, Flatten, Dropout 0.3, Dense 100-16, Tanh,
// Dense 16-10).
inline layers::LayerList stateful_cnn_layers() {
  layers::LayerList list;
  list.emplace_init<layers::Conv2d>(1, 4, layers::Conv2dOptions{})
      .emplace<layers::BatchNorm2d>(4)
      .emplace<layers::ReLU>()
      .emplace<layers::MaxPool2d>()
      .emplace<layers::Flatten>()
      .emplace<layers::Dropout>(0.3f)
      .emplace_init<layers::Dense>(100, 16, true)
      .emplace<layers::Tanh>()
      .emplace_init<layers::Dense>(16, 10, true);
  return list;
}

// Extents random shapes are drawn from: 1 (broadcast-like), primes that
// divide nothing, so no kernel gets a size it handles by luck.
inline const std::vector<std::int64_t> kAwkwardSizes{1, 2, 3, 5, 7, 13};

// One of kAwkwardSizes.
std::int64_t awkward_size(std::mt19937& rng);

// A shape of the given rank from kAwkwardSizes with at most max_numel
// elements (redrawn until it fits), so gradchecks stay cheap.
Shape random_shape(std::mt19937& rng, int rank, std::int64_t max_numel = 200);

// Uniform values in [low, high) from `generator`, on `device`.
Tensor uniform_tensor(const Shape& shape, Generator& generator, float low = -1.0f, float high = 1.0f,
                      const Device& device = cpu());

// Values in [0.5, 2): safe for log, sqrt, pow and as divisors.
Tensor positive_tensor(const Shape& shape, Generator& generator, const Device& device = cpu());

// |value| in [0.5, 1.5) with a random sign: relu's kink and div's pole stay
// far from every value, farther than any finite-difference step.
Tensor away_from_zero_tensor(const Shape& shape, Generator& generator, const Device& device = cpu());

// All values distinct, `spacing` apart (a shuffled grid centred on 0), so max
// has no ties and a finite-difference step cannot change the arg max. With an
// integer spacing every value is an integer (or half of one), so sums of a
// few of them are exact in float whatever their order.
Tensor distinct_tensor(const Shape& shape, std::mt19937& rng, const Device& device = cpu(), float spacing = 0.1f);

// Logits that stress a softmax, `classes` per row, with one label per row:
// the label's class wins by a little or by far (its loss is then tiny beside
// logits of 20 to 100), loses by far, ties for the top with another class, or
// sits in the crowd; rows centred on positive and negative offsets.
struct LabelledLogits {
  std::vector<float> logits;
  std::vector<std::int64_t> labels;
};
LabelledLogits confident_logits(std::int64_t rows, std::int64_t classes, std::uint32_t seed);

// `values` each rounded to the nearest bfloat16 (ties to even, as
// AVX512-BF16's vcvtneps2bf16 and oneDNN's reorders round), as floats:
// what bf16 mixed precision multiplies. Finite values only.
std::vector<float> bf16_rounded(std::vector<float> values);

// The classic bound for a float32 sum of `terms` products computed in any
// order: |error| <= terms * 2^-24 * sum of |products| (Higham, "Accuracy and
// Stability of Numerical Algorithms", 3.1), plus the final rounding. Whether
// every element of `actual` is within it of `expected` (float64 sums, with
// `magnitude` their sums of |products|); *worst_ratio is the largest error
// in units of 2^-24 * sum of |products|.
bool within_dot_product_bound(const Tensor& actual, const std::vector<double>& expected,
                              const std::vector<double>& magnitude, std::int64_t terms, double* worst_ratio);

// a [m, k] · b [k, n], row-major, in float64, with each element's sum of
// |terms| (float32's error bound scales with it): the reference
// within_dot_product_bound takes.
struct ProductReference {
  std::vector<double> value, magnitude;
};
ProductReference product_reference(const std::vector<float>& a, const std::vector<float>& b, std::int64_t m,
                                   std::int64_t k, std::int64_t n);

// x [rows, cols], row-major, transposed.
std::vector<float> transposed(const std::vector<float>& x, std::int64_t rows, std::int64_t cols);

// Adds xᵀ·g (x [rows, in], g [rows, out]: a weight's gradient) in float64
// to `expected` and the sum of its terms' magnitudes to `magnitude`, both
// [in, out] row-major: the reference within_dot_product_bound takes.
void add_weight_gradient_reference(const Tensor& x, const Tensor& g, std::vector<double>& expected,
                                   std::vector<double>& magnitude);

// Puts the thread count back as it was when the guard goes out of scope,
// also when a check throws.
struct NumThreadsGuard {
  int saved = config::num_threads();
  NumThreadsGuard() = default;
  NumThreadsGuard(const NumThreadsGuard&) = delete;
  NumThreadsGuard& operator=(const NumThreadsGuard&) = delete;
  ~NumThreadsGuard() { set_num_threads(saved); }
};

// Puts the CPU precision back as it was when the guard goes out of scope,
// also when a check throws, so no test leaks bf16 into the next.
struct CpuPrecisionGuard {
  config::CpuPrecision saved = config::cpu_precision();
  CpuPrecisionGuard() = default;
  CpuPrecisionGuard(const CpuPrecisionGuard&) = delete;
  CpuPrecisionGuard& operator=(const CpuPrecisionGuard&) = delete;
  ~CpuPrecisionGuard() { set_cpu_precision(saved); }
};

// log(softmax(row)) in double: the first largest value taken out and the rest
// summed, so every log-probability is exact to double's precision.
std::vector<double> reference_log_softmax(const float* row, std::int64_t n);

// Reference NumPy broadcasting by index arithmetic, independent of the
// library's kernels: y[i] = op(a[ia], b[ib]) where ia and ib come from
// unravelling i in the result shape and zeroing the index of every dim in
// which the operand has extent 1 (or which it lacks).
template <class Op>
std::vector<float> reference_broadcast(const std::vector<float>& a, const Shape& a_shape, const std::vector<float>& b,
                                       const Shape& b_shape, const Shape& out_shape, Op op) {
  const int rank = out_shape.rank();
  const auto offset_in = [&](const std::vector<std::int64_t>& index, const Shape& shape) {
    std::int64_t offset = 0;
    const int skip = rank - shape.rank();
    for (int d = 0; d < shape.rank(); ++d)
      offset = offset * shape[d] + (shape[d] == 1 ? 0 : index[static_cast<std::size_t>(d + skip)]);
    return static_cast<std::size_t>(offset);
  };
  std::vector<float> out(static_cast<std::size_t>(out_shape.numel()));
  std::vector<std::int64_t> index(static_cast<std::size_t>(rank));
  for (std::size_t i = 0; i < out.size(); ++i) {
    auto rest = static_cast<std::int64_t>(i);
    for (int d = rank - 1; d >= 0; --d) {
      index[static_cast<std::size_t>(d)] = rest % out_shape[d];
      rest /= out_shape[d];
    }
    out[i] = op(a[offset_in(index, a_shape)], b[offset_in(index, b_shape)]);
  }
  return out;
}

// The result of comparing two float arrays: ok, or a report naming the worst
// element. `CHECK(all_close(...))` prints the report when it fails.
struct Comparison {
  bool ok = true;
  std::string report;
  explicit operator bool() const { return ok; }
};
std::ostream& operator<<(std::ostream& os, const Comparison& comparison);

// |actual - expected| <= atol + rtol * |expected| for every element, and the
// same length. NaN never compares close.
Comparison all_close(const std::vector<float>& actual, const std::vector<float>& expected, double atol = 1e-5,
                     double rtol = 1e-5);
// The same with element i also allowed `also_allowed[i]` more (one per
// element, or none): a bound of its own, such as a fast algorithm's.
Comparison all_close(const std::vector<float>& actual, const std::vector<float>& expected, double atol, double rtol,
                     const std::vector<double>& also_allowed);
Comparison all_close(const Tensor& actual, const std::vector<float>& expected, double atol = 1e-5, double rtol = 1e-5);
Comparison all_close(const Tensor& actual, const Tensor& expected, double atol = 1e-5, double rtol = 1e-5);

// Whether `call` throws a ddl::Error (or the ddl::Error type given, such as
// parallel::ConfigError) whose message contains every one of `parts` (the
// op's name, the shapes or devices involved). The report quotes the message
// and the missing parts. Other exception types propagate, which fails the
// test case.
template <class Thrown = Error, class Call>
Comparison throws_error_mentioning(Call&& call, const std::vector<std::string>& parts);

namespace detail {
Comparison check_message(bool thrown, const std::string& message, const std::vector<std::string>& parts);
}

template <class Thrown, class Call>
Comparison throws_error_mentioning(Call&& call, const std::vector<std::string>& parts) {
  try {
    call();
  } catch (const Thrown& error) {
    return detail::check_message(true, error.what(), parts);
  }
  return detail::check_message(false, "", parts);
}

// Bitwise equality of two tensors' dtype, shape and bytes.
bool same_bits(const Tensor& a, const Tensor& b);

// Every parameter of `model`, in registration order, flattened: what tests
// of whole training runs compare.
inline std::vector<float> flat_parameters(const layers::Module& model) {
  std::vector<float> values;
  for (const auto& [name, tensor] : model.named_parameters()) {
    const auto part = tensor.to_vector<float>();
    values.insert(values.end(), part.begin(), part.end());
  }
  return values;
}

// Trainer options for tests: nothing printed, `metrics` reported beside the
// loss, training spread by `strategy` (null: this process alone).
inline optim::TrainerOptions quiet_options(std::vector<optim::Metric> metrics = {optim::Metric::accuracy},
                                           std::shared_ptr<optim::Strategy> strategy = nullptr) {
  optim::TrainerOptions options;
  options.metrics = std::move(metrics);
  options.verbosity = optim::Verbosity::quiet;
  options.strategy = std::move(strategy);
  return options;
}

}  // namespace ddl::test
