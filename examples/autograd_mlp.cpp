// The most complete demo until the training engine lands: a two-layer
// perceptron written directly on tensors and autograd, trained by plain SGD
// to separate three interleaved spirals, on any device.
//
//   autograd_mlp [device] [epochs]      e.g. autograd_mlp cuda:0 300
#include <ddl/ddl.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

constexpr int kClasses = 3;
constexpr int kPointsPerClass = 200;

// Three spiral arms in the plane, one per class, with a little noise.
void make_spirals(std::vector<float>& points, std::vector<float>& one_hot, ddl::Generator& generator) {
  const ddl::Tensor noise = ddl::normal({kClasses * kPointsPerClass}, 0.0f, 0.2f, {}, &generator);
  const std::vector<float> jitter = noise.to_vector<float>();
  for (int c = 0; c < kClasses; ++c) {
    for (int i = 0; i < kPointsPerClass; ++i) {
      const float radius = static_cast<float>(i) / kPointsPerClass;
      const float angle = 4.0f * (static_cast<float>(c) + radius) + jitter[c * kPointsPerClass + i];
      points.push_back(radius * std::sin(angle));
      points.push_back(radius * std::cos(angle));
      for (int k = 0; k < kClasses; ++k) one_hot.push_back(k == c ? 1.0f : 0.0f);
    }
  }
}

ddl::Tensor parameter(const ddl::Shape& shape, float scale, const ddl::Device& device, ddl::Generator& generator) {
  return ddl::normal(shape, 0.0f, scale, {ddl::DType::Float32, device, false}, &generator).set_requires_grad();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const ddl::Device device = ddl::Device::parse(argc > 1 ? argv[1] : "cpu");
    const int epochs = argc > 2 ? std::stoi(argv[2]) : 400;
    ddl::Generator generator(42);

    std::vector<float> points, one_hot;
    make_spirals(points, one_hot, generator);
    const std::int64_t n = kClasses * kPointsPerClass;
    const ddl::TensorOptions on_device{ddl::DType::Float32, device, false};
    const ddl::Tensor x = ddl::from_vector(points, {n, 2}, on_device);
    const ddl::Tensor y = ddl::from_vector(one_hot, {n, kClasses}, on_device);

    constexpr std::int64_t kHidden = 100;
    std::vector<ddl::Tensor> params = {parameter({2, kHidden}, 1.0f, device, generator),
                                       ddl::zeros({kHidden}, on_device.with_requires_grad()),
                                       parameter({kHidden, kClasses}, 0.1f, device, generator),
                                       ddl::zeros({kClasses}, on_device.with_requires_grad())};
    const float learning_rate = 1.0f;

    std::printf("autograd_mlp: %lld points, 3 classes, hidden %lld, on %s\n", static_cast<long long>(n),
                static_cast<long long>(kHidden), device.str().c_str());
    const auto start = std::chrono::steady_clock::now();
    float accuracy = 0.0f;
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      const ddl::Tensor hidden = ddl::relu(ddl::matmul(x, params[0]) + params[1]);
      const ddl::Tensor logits = ddl::matmul(hidden, params[2]) + params[3];
      const ddl::Tensor loss = -ddl::mean(ddl::sum(y * ddl::log_softmax(logits, 1), 1));
      for (const ddl::Tensor& p : params) p.zero_grad();
      loss.backward();
      {
        const ddl::NoGradGuard no_grad;
        for (ddl::Tensor& p : params) p = (p - p.grad() * learning_rate).detach().set_requires_grad();
      }
      if (epoch % 50 == 0 || epoch == epochs) {
        const std::vector<std::int64_t> predicted = ddl::argmax(logits, 1).to_vector<std::int64_t>();
        const std::vector<std::int64_t> truth = ddl::argmax(y, 1).to_vector<std::int64_t>();
        int correct = 0;
        for (std::size_t i = 0; i < predicted.size(); ++i) correct += predicted[i] == truth[i];
        accuracy = static_cast<float>(correct) / static_cast<float>(n);
        std::printf("epoch %4d/%d  loss %.4f  train accuracy %.1f%%\n", epoch, epochs, loss.item(),
                    100.0f * accuracy);
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("done: accuracy %.1f%% in %.2f s\n", 100.0f * accuracy, seconds);
    return 0;
  } catch (const ddl::Error& error) {
    std::fprintf(stderr, "autograd_mlp: %s\n", error.what());
    return 2;
  }
}
