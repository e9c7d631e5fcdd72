// Conv2d on cuDNN: forward (+ bias through cudnnAddTensor), backward-data,
// backward-filter and backward-bias, on the stream the op passes in. For each
// geometry the descriptors and the algorithms ranked first (among those that
// run, whose workspace fits kMaxWorkspaceBytes and, by default, that are
// deterministic: config::cuda_convolution) are made once and cached; the
// ranking is cuDNN's heuristic's, or under DDL_CUDA_CONV=benchmark cuDNN's
// measured times. Workspaces come from the caching allocator.
//
// cuDNN 9 marks this legacy convolution API deprecated in favour of the graph
// API, but it still ships, works and is what PyTorch and TensorFlow call. The
// deprecation attributes only fire when CUDNN_WARN_DEPRECATED is defined;
// should anyone define it, they are silenced here, in this one file, and
// nowhere else (the pragma also covers the descriptor types of cudnn.hpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/core/cuda/runtime.hpp>
#include <ddl/layers/conv2d_kernels.hpp>
#include <ddl/layers/cuda/cudnn.hpp>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace ddl::cuda_backend {
namespace {

// The most workspace an algorithm may ask for; faster algorithms that need
// more are passed over for the next one in cuDNN's ranking.
constexpr std::size_t kMaxWorkspaceBytes = std::size_t{256} << 20;

int checked_int(std::int64_t value, const Conv2dGeometry& g, int device) {
  DDL_CHECK(value <= INT_MAX,
            "conv2d on cuda:{}: extent {} of input [{}, {}, {}, {}] / weight [{}, {}, {}, {}] exceeds cuDNN's int range",
            device, value, g.batch, g.channels, g.height, g.width, g.filters, g.channels, g.kernel_h, g.kernel_w);
  return static_cast<int>(value);
}

// Whether cuDNN can run the algorithm within the workspace budget.
template <class Perf>
bool runs(const Perf& perf) {
  return perf.status == CUDNN_STATUS_SUCCESS && perf.memory <= kMaxWorkspaceBytes;
}

// The first algorithm in cuDNN's ranking that runs and, unless
// DDL_CUDA_CONV is fastest or benchmark, is deterministic. (The ranking's
// mathType is not looked at: the plan runs every algorithm with the
// descriptor's FMA math.)
template <class Perf>
Perf first_usable(const Perf* ranked, int count, const char* pass, const Conv2dGeometry& g, int device,
                  config::CudaConvolution algorithms) {
  const bool deterministic = algorithms == config::CudaConvolution::Deterministic;
  const bool timed = algorithms == config::CudaConvolution::Benchmark;
  for (int i = 0; i < count; ++i) {
    if (runs(ranked[i]) && (!deterministic || ranked[i].determinism == CUDNN_DETERMINISTIC)) return ranked[i];
  }
  detail::fail(
      "conv2d {} on cuda:{}: cuDNN offers no {}algorithm within {} MiB of workspace for input [{}, {}, {}, {}], "
      "weight [{}, {}, {}, {}], stride {}, padding {}, dilation {}{}",
      pass, device, deterministic ? "deterministic " : timed ? "timed " : "", kMaxWorkspaceBytes >> 20, g.batch,
      g.channels, g.height, g.width, g.filters, g.channels, g.kernel_h, g.kernel_w, g.stride, g.padding, g.dilation,
      deterministic ? " (DDL_CUDA_CONV=fastest allows the others)"
      : timed       ? " (DDL_CUDA_CONV=fastest takes the heuristic's choice)"
                    : "");
}

// The most workspace any algorithm of a ranking that runs asks for.
template <class Perf>
std::size_t largest_workspace(const Perf* ranked, int count) {
  std::size_t largest = 0;
  for (int i = 0; i < count; ++i) {
    if (runs(ranked[i])) largest = std::max(largest, ranked[i].memory);
  }
  return largest;
}

// Scratch memory for cuDNN calls. Returning it to the caching allocator as
// soon as the call is queued is safe: every later user of the block is
// queued on the same stream, behind this call.
class Workspace {
 public:
  Workspace(int device, std::size_t bytes)
      : device_(device), data_(bytes > 0 ? allocate(device, bytes) : nullptr), bytes_(bytes) {}
  ~Workspace() {
    if (data_ != nullptr) deallocate(device_, data_);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  int device_;
  void* data_;
  std::size_t bytes_;
};

// Everything cuDNN needs for one geometry on one device (stream.device).
struct Plan {
  Plan(Stream stream, const Conv2dGeometry& g, config::CudaConvolution algorithms)
      : input(stream.device),
        output(stream.device),
        bias(stream.device),
        filter(stream.device),
        convolution(stream.device) {
    const int device = stream.device;
    const auto dim = [&](std::int64_t value) { return checked_int(value, g, device); };
    set_nchw(input, g.batch, g.channels, g.height, g.width);
    set_nchw(output, g.batch, g.filters, g.out_height, g.out_width);
    set_nchw(bias, 1, g.filters, 1, 1);
    DDL_CUDNN_CHECK(device, cudnnSetFilter4dDescriptor(filter.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                       dim(g.filters), dim(g.channels), dim(g.kernel_h),
                                                       dim(g.kernel_w)));
    DDL_CUDNN_CHECK(device, cudnnSetConvolution2dDescriptor(convolution.get(), dim(g.padding), dim(g.padding),
                                                            dim(g.stride), dim(g.stride), dim(g.dilation),
                                                            dim(g.dilation), CUDNN_CROSS_CORRELATION,
                                                            CUDNN_DATA_FLOAT));
    // Plain FP32 arithmetic, as cuBLAS in core: no TF32 tensor cores, so
    // results agree with the CPU backend to float32 rounding.
    DDL_CUDNN_CHECK(device, cudnnSetConvolutionMathType(convolution.get(), CUDNN_FMA_MATH));

    int n = 0, c = 0, h = 0, w = 0;
    DDL_CUDNN_CHECK(device, cudnnGetConvolution2dForwardOutputDim(convolution.get(), input.get(), filter.get(), &n,
                                                                  &c, &h, &w));
    DDL_CHECK(n == g.batch && c == g.filters && h == g.out_height && w == g.out_width,
              "conv2d on cuda:{}: cuDNN computes an output of [{}, {}, {}, {}], ddl [{}, {}, {}, {}]", device, n, c, h,
              w, g.batch, g.filters, g.out_height, g.out_width);

    const cudnnHandle_t handle = cudnn_handle(stream);
    int forward_count = 0, data_count = 0, filter_count = 0;
    std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> forward_ranked{};
    std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> data_ranked{};
    std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> filter_ranked{};
    DDL_CUDNN_CHECK(device, cudnnGetConvolutionForwardAlgorithm_v7(handle, input.get(), filter.get(),
                                                                   convolution.get(), output.get(),
                                                                   static_cast<int>(forward_ranked.size()),
                                                                   &forward_count, forward_ranked.data()));
    DDL_CUDNN_CHECK(device, cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, filter.get(), output.get(),
                                                                        convolution.get(), input.get(),
                                                                        static_cast<int>(data_ranked.size()),
                                                                        &data_count, data_ranked.data()));
    DDL_CUDNN_CHECK(device, cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, input.get(), output.get(),
                                                                          convolution.get(), filter.get(),
                                                                          static_cast<int>(filter_ranked.size()),
                                                                          &filter_count, filter_ranked.data()));
    if (algorithms == config::CudaConvolution::Benchmark) {
      // cuDNN runs every algorithm on scratch tensors of this geometry and
      // ranks them by time, once per geometry and device (the host waits,
      // and so do other threads' first convolutions, behind plan_for's
      // lock), as PyTorch's cudnn.benchmark does. The scratch is zeroed so
      // that nothing is read uninitialised (later Finds read what earlier
      // ones wrote); the workspace is the most that any algorithm the
      // heuristic lists as runnable within the budget asks for: one that
      // needs more comes back failed and is passed over.
      const auto floats = [](std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
        return static_cast<std::size_t>(a * b * c * d) * sizeof(float);
      };
      const Workspace x(device, floats(g.batch, g.channels, g.height, g.width));
      const Workspace w(device, floats(g.filters, g.channels, g.kernel_h, g.kernel_w));
      const Workspace y(device, floats(g.batch, g.filters, g.out_height, g.out_width));
      const Workspace workspace(device, std::max({largest_workspace(forward_ranked.data(), forward_count),
                                                  largest_workspace(data_ranked.data(), data_count),
                                                  largest_workspace(filter_ranked.data(), filter_count)}));
      for (const Workspace* tensor : {&x, &w, &y}) fill_zero(stream, tensor->data(), tensor->bytes());
      DDL_CUDNN_CHECK(device, cudnnFindConvolutionForwardAlgorithmEx(
                                  handle, input.get(), x.data(), filter.get(), w.data(), convolution.get(),
                                  output.get(), y.data(), static_cast<int>(forward_ranked.size()), &forward_count,
                                  forward_ranked.data(), workspace.data(), workspace.bytes()));
      DDL_CUDNN_CHECK(device, cudnnFindConvolutionBackwardDataAlgorithmEx(
                                  handle, filter.get(), w.data(), output.get(), y.data(), convolution.get(),
                                  input.get(), x.data(), static_cast<int>(data_ranked.size()), &data_count,
                                  data_ranked.data(), workspace.data(), workspace.bytes()));
      DDL_CUDNN_CHECK(device, cudnnFindConvolutionBackwardFilterAlgorithmEx(
                                  handle, input.get(), x.data(), output.get(), y.data(), convolution.get(),
                                  filter.get(), w.data(), static_cast<int>(filter_ranked.size()), &filter_count,
                                  filter_ranked.data(), workspace.data(), workspace.bytes()));
    }

    forward_algo = first_usable(forward_ranked.data(), forward_count, "forward", g, device, algorithms).algo;
    data_algo = first_usable(data_ranked.data(), data_count, "backward-data", g, device, algorithms).algo;
    filter_algo = first_usable(filter_ranked.data(), filter_count, "backward-filter", g, device, algorithms).algo;
    DDL_CUDNN_CHECK(device, cudnnGetConvolutionForwardWorkspaceSize(handle, input.get(), filter.get(),
                                                                    convolution.get(), output.get(), forward_algo,
                                                                    &forward_workspace));
    DDL_CUDNN_CHECK(device, cudnnGetConvolutionBackwardDataWorkspaceSize(handle, filter.get(), output.get(),
                                                                         convolution.get(), input.get(), data_algo,
                                                                         &data_workspace));
    DDL_CUDNN_CHECK(device, cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, input.get(), output.get(),
                                                                           convolution.get(), filter.get(),
                                                                           filter_algo, &filter_workspace));
  }

  TensorDescriptor input, output, bias;  // x [N, C, H, W], y [N, K, OH, OW], b [1, K, 1, 1]
  FilterDescriptor filter;               // w [K, C, kh, kw]
  ConvolutionDescriptor convolution;
  cudnnConvolutionFwdAlgo_t forward_algo{};
  cudnnConvolutionBwdDataAlgo_t data_algo{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo{};
  std::size_t forward_workspace = 0, data_workspace = 0, filter_workspace = 0;
};

// The cached plan of a geometry on stream.device, made on first use.
const Plan& plan_for(Stream stream, const Conv2dGeometry& g) {
  using Key = std::array<std::int64_t, 12>;
  static std::mutex mutex;
  static std::map<Key, std::unique_ptr<Plan>> plans;
  const config::CudaConvolution algorithms = config::cuda_convolution();
  const Key key{stream.device, g.batch,    g.channels, g.height,  g.width,    g.filters,
                g.kernel_h,    g.kernel_w, g.stride,   g.padding, g.dilation, static_cast<std::int64_t>(algorithms)};
  const std::lock_guard lock(mutex);
  std::unique_ptr<Plan>& plan = plans[key];
  if (!plan) plan = std::make_unique<Plan>(stream, g, algorithms);
  return *plan;
}

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

}  // namespace

void conv2d_forward(Stream stream, const Conv2dGeometry& g, const float* input, const float* weight, const float* bias,
                    float* output) {
  const int device = stream.device;
  const DeviceGuard guard(device);
  const Plan& plan = plan_for(stream, g);
  const cudnnHandle_t handle = cudnn_handle(stream);
  const Workspace workspace(device, plan.forward_workspace);
  DDL_CUDNN_CHECK(device, cudnnConvolutionForward(handle, &kOne, plan.input.get(), input, plan.filter.get(), weight,
                                                  plan.convolution.get(), plan.forward_algo, workspace.data(),
                                                  workspace.bytes(), &kZero, plan.output.get(), output));
  if (bias != nullptr) {
    DDL_CUDNN_CHECK(device, cudnnAddTensor(handle, &kOne, plan.bias.get(), bias, &kOne, plan.output.get(), output));
  }
}

namespace {

void backward_data(Stream stream, const Conv2dGeometry& g, const float* grad_output, const float* weight,
                   float* grad_input) {
  const int device = stream.device;
  const DeviceGuard guard(device);
  const Plan& plan = plan_for(stream, g);
  const Workspace workspace(device, plan.data_workspace);
  DDL_CUDNN_CHECK(
      device, cudnnConvolutionBackwardData(cudnn_handle(stream), &kOne, plan.filter.get(), weight, plan.output.get(),
                                           grad_output, plan.convolution.get(), plan.data_algo, workspace.data(),
                                           workspace.bytes(), &kZero, plan.input.get(), grad_input));
}

void backward_filter(Stream stream, const Conv2dGeometry& g, const float* input, const float* grad_output,
                     float* grad_weight) {
  const int device = stream.device;
  const DeviceGuard guard(device);
  const Plan& plan = plan_for(stream, g);
  const Workspace workspace(device, plan.filter_workspace);
  DDL_CUDNN_CHECK(
      device, cudnnConvolutionBackwardFilter(cudnn_handle(stream), &kOne, plan.input.get(), input, plan.output.get(),
                                             grad_output, plan.convolution.get(), plan.filter_algo, workspace.data(),
                                             workspace.bytes(), &kZero, plan.filter.get(), grad_weight));
}

void backward_bias(Stream stream, const Conv2dGeometry& g, const float* grad_output, float* grad_bias) {
  const int device = stream.device;
  const DeviceGuard guard(device);
  const Plan& plan = plan_for(stream, g);
  DDL_CUDNN_CHECK(device, cudnnConvolutionBackwardBias(cudnn_handle(stream), &kOne, plan.output.get(), grad_output,
                                                       &kZero, plan.bias.get(), grad_bias));
}

}  // namespace

void conv2d_backward(Stream stream, const Conv2dGeometry& g, const Conv2dBackward& operands) {
  if (operands.grad_input != nullptr) backward_data(stream, g, operands.grad_output, operands.weight, operands.grad_input);
  if (operands.grad_weight != nullptr) {
    backward_filter(stream, g, operands.input, operands.grad_output, operands.grad_weight);
  }
  if (operands.grad_bias != nullptr) backward_bias(stream, g, operands.grad_output, operands.grad_bias);
}

}  // namespace ddl::cuda_backend

#pragma GCC diagnostic pop
