// One bundled model's training step (forward, cross-entropy, backward, SGD
// with momentum) on a GPU at a batch large enough that the GPU, not the
// host, is the bottleneck: step time, samples/s and peak tensor memory. The
// PyTorch peer is bench/torch_gpu_step.py, the same model and step;
// bench/compare_gpu_step.sh runs both side by side.
//
//   build/bench/ddl_bench_gpu_step [--model resnet_small] [--batch 512] [--steps 20] [--reps 5] [--device cuda:0]
//                                  [--kernels]
//
// Each repetition times `steps` steps and ends by reading the last loss,
// which waits for the GPU; the median repetition is reported per step,
// beside the host's time to enqueue the steps before that wait (near the
// step time when the host, not the GPU, sets the pace). Peak memory is the
// most bytes live tensors held (memory_stats), what
// torch.cuda.max_memory_allocated counts, not the allocator's cache.
// --kernels runs the steps once more under CUPTI and prints what the GPU
// ran (bench/kernel_table.hpp); a build without CUDA has no CUPTI.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <ddl/ddl.hpp>
#include <ddl/models/zoo.hpp>

#include "timing.hpp"
#if DDL_BENCH_CUPTI
#include "kernel_table.hpp"
#endif

using namespace ddl;

namespace {

void measure(const std::string& model_name, const Device& device, std::int64_t batch, int steps, int reps,
             [[maybe_unused]] bool kernels) {
  const auto model = models::make_model(model_name);
  model->to(device);
  optim::SGD optimizer(model->parameters(), {.lr = 0.01, .momentum = 0.9});
  Generator generator(11);
  const Tensor inputs = uniform({batch, 1, 28, 28}, 0.0f, 1.0f, {}, &generator).to(device);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(batch));
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i * 7 % 10);
  const Tensor targets = from_vector(labels, {batch}).to(device);

  float last_loss = 0.0f;
  std::vector<double> enqueue_ms;
  const auto some_steps = [&] {
    const auto start = std::chrono::steady_clock::now();
    Tensor loss;
    for (int i = 0; i < steps; ++i) {
      optimizer.zero_grad();
      loss = layers::cross_entropy((*model)(inputs), targets);
      loss.backward();
      optimizer.step();
    }
    enqueue_ms.push_back(bench::milliseconds_since(start));
    last_loss = loss.to_vector<float>().front();  // waits for the GPU
  };
  some_steps();  // warm-up: cuDNN's algorithm choice, the memory pool
  reset_peak_memory_stats(device);
  const bench::Timing timing = bench::time_it(some_steps, reps);
  enqueue_ms.erase(enqueue_ms.begin(), enqueue_ms.end() - reps);  // the timed repetitions'
  std::ranges::sort(enqueue_ms);
  const double step_ms = timing.median_ms / steps;
  const double enqueue_step_ms = enqueue_ms[enqueue_ms.size() / 2] / steps;
  std::printf("model %s, batch %lld, %s\n", model_name.c_str(), static_cast<long long>(batch),
              device.str().c_str());
  std::printf("training step: %.3f ms (best %.3f), %.0f samples/s, peak memory %.1f MiB, last loss %.4f\n", step_ms,
              timing.best_ms / steps, static_cast<double>(batch) / (step_ms * 1e-3),
              static_cast<double>(memory_stats(device).peak_bytes) / (1 << 20), last_loss);
  std::printf("host: %.3f ms a step to enqueue it (%.0f%% of the step)\n", enqueue_step_ms,
              100.0 * enqueue_step_ms / step_ms);
#if DDL_BENCH_CUPTI
  if (kernels) {
    bench::KernelTable table;
    const auto start = std::chrono::steady_clock::now();
    some_steps();
    table.print(stdout, bench::milliseconds_since(start), steps);
  }
#endif
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"a bundled model's training step on a GPU", "ddl_bench_gpu_step"};
  std::string model_name = "resnet_small", device_name = "cuda:0";
  std::int64_t batch = 512;
  int steps = 20, reps = 5;
  app.add_option("--model", model_name, "bundled model (1x28x28 inputs, 10 classes)")->capture_default_str();
  app.add_option("--batch", batch, "batch size")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--steps", steps, "steps per timed repetition")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--reps", reps, "timed repetitions (median reported)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--device", device_name, "where to train")->capture_default_str();
  bool kernels = false;
  app.add_flag("--kernels", kernels, "then the steps once more under CUPTI: what the GPU ran, by kernel");
  CLI11_PARSE(app, argc, argv);
#if !DDL_BENCH_CUPTI
  if (kernels) {
    std::fprintf(stderr, "ddl_bench_gpu_step: --kernels needs a CUDA build (CUPTI records what the GPU ran)\n");
    return 2;
  }
#endif
  try {
    measure(model_name, Device::parse(device_name), batch, steps, reps, kernels);
  } catch (const std::exception& error) {  // no GPU, an unknown model, CUPTI refusing: said plainly
    std::fprintf(stderr, "ddl_bench_gpu_step: %s\n", error.what());
    return 1;
  }
  return 0;
}
