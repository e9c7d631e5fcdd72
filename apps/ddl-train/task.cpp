// The tasks of the bundled models (see task.hpp).
#include "task.hpp"

#include <algorithm>
#include <filesystem>
#include <utility>

#include <zlib.h>

#include <fmt/format.h>

#include <ddl/core/error.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/loss.hpp>
#include <ddl/models/data/fashion_mnist.hpp>
#include <ddl/models/data/stress_strain.hpp>
#include <ddl/models/data/synthetic_shapes.hpp>

namespace ddl::apps {
namespace {

Task image_classification(const TrainOptions& options) {
  if (!std::filesystem::is_directory(options.data_dir)) {
    throw UsageError(
        fmt::format("--data: no such directory '{}' (Debian ships Fashion-MNIST in {} with the package "
                    "dataset-fashion-mnist)",
                    options.data_dir, models::kFashionMnistDir));
  }
  Task task;
  try {
    task.train = models::load_fashion_mnist(options.data_dir, true, options.train_limit);
    task.test = models::load_fashion_mnist(options.data_dir, false, options.test_limit);
  } catch (const ddl::Error& error) {
    throw UsageError(fmt::format("--data {}: {}", options.data_dir, error.what()));
  }
  task.description =
      fmt::format("{}: {} training and {} test images", options.data_dir, task.train.size(), task.test.size());
  task.loss = layers::cross_entropy;
  task.metrics = {optim::Metric::accuracy};
  task.monitor = "val_accuracy";
  task.report = [](optim::Trainer& trainer, optim::BatchSource& test) {
    const optim::Logs logs = trainer.evaluate(test);
    return fmt::format("test accuracy {:.2f}%, test loss {:.4f}", 100.0 * logs.at("accuracy"), logs.at("loss"));
  };
  return task;
}

// Per column, the sum of |prediction - target| over the rows of two [N, k]
// host tensors.
std::vector<double> column_error_sums(const Tensor& prediction, const Tensor& target) {
  const auto p = prediction.to(cpu()).to_vector<float>();
  const auto t = target.to(cpu()).to_vector<float>();
  const auto columns = static_cast<std::size_t>(target.size(1));
  std::vector<double> sums(columns, 0.0);
  for (std::size_t i = 0; i < t.size(); ++i) sums[i % columns] += std::abs(static_cast<double>(p[i]) - t[i]);
  return sums;
}

Task materials(const TrainOptions& options) {
  Task task;
  models::StressStrainOptions curves;
  curves.samples = options.samples;
  curves.seed = options.seed;
  curves.stress_noise_mpa = static_cast<float>(options.noise);
  const models::Dataset train = models::make_stress_strain(curves);
  curves.samples = std::max<std::int64_t>(options.samples / 5, 1);
  curves.seed = options.seed + 1;  // a different set of materials
  const models::Dataset test = models::make_stress_strain(curves);

  // Targets span 50..250 GPa and 100..1000 MPa: the network learns them
  // standardised with the training set's statistics, and the report undoes it.
  const models::Normalization targets = models::feature_normalization(train.targets, 1);
  const auto standardise = [&](const Tensor& t) { return (t - targets.mean) / targets.stddev; };
  task.train = {train.inputs, standardise(train.targets)};
  task.test = {test.inputs, standardise(test.targets)};
  task.normalization = models::feature_normalization(train.inputs, 2);
  task.description = fmt::format("synthetic stress-strain curves: {} training and {} test samples, noise {} MPa",
                                 train.size(), test.size(), options.noise);
  task.loss = layers::mse_loss;
  task.metrics = {optim::Metric::mae};
  task.monitor = "val_loss";
  task.report = [targets, test_targets = test.targets, train_targets = train.targets](optim::Trainer& trainer,
                                                                                      optim::BatchSource& data) {
    // Each rank adds up its own samples' errors (its shard's padding left
    // out), then the ranks add theirs: every test sample counted once.
    std::vector<double> sums(static_cast<std::size_t>(test_targets.size(1)) + 1, 0.0);  // per column, then rows
    trainer.for_each_output(data, [&](const Tensor& output, const optim::Batch& batch) {
      const std::int64_t own = batch.size() - batch.padding;
      const Tensor predicted = ddl::slice(output.to(cpu()), 0, own) * targets.stddev + targets.mean;
      const Tensor truth = ddl::slice(batch.targets.to(cpu()), 0, own) * targets.stddev + targets.mean;
      const auto batch_sums = column_error_sums(predicted, truth);
      for (std::size_t c = 0; c < batch_sums.size(); ++c) sums[c] += batch_sums[c];
      sums.back() += static_cast<double>(own);
    });
    trainer.strategy().sum_over_ranks(sums);
    // The baseline: always predicting the training set's mean.
    const Tensor mean = ddl::mean(train_targets, 0, true) + ddl::zeros(test_targets.shape());
    const auto baseline = column_error_sums(mean, test_targets);
    const auto rows = static_cast<double>(test_targets.size(0));
    return fmt::format(
        "test MAE: Young's modulus {:.2f} GPa, yield stress {:.2f} MPa (predicting the mean: "
        "{:.2f} GPa, {:.2f} MPa)",
        sums[0] / sums.back(), sums[1] / sums.back(), baseline[0] / rows, baseline[1] / rows);
  };
  return task;
}

// The share of background pixels: what predicting background everywhere scores.
double background_share(const Tensor& targets) {
  const auto labels = targets.to(cpu()).to_vector<std::int64_t>();
  const auto background = std::count(labels.begin(), labels.end(), models::kShapesBackground);
  return static_cast<double>(background) / static_cast<double>(labels.size());
}

Task segmentation(const TrainOptions& options) {
  models::ShapesOptions shapes;
  shapes.samples = options.samples;
  shapes.height = shapes.width = options.image_size;
  shapes.seed = options.seed;
  Task task;
  task.train = models::make_shapes(shapes);
  shapes.samples = std::max<std::int64_t>(options.samples / 5, 1);
  shapes.seed = options.seed + 1;  // other images
  task.test = models::make_shapes(shapes);
  task.description = fmt::format("synthetic shapes: {} training and {} test images of {}x{}", task.train.size(),
                                 task.test.size(), options.image_size, options.image_size);
  task.loss = layers::cross_entropy;
  task.metrics = {optim::Metric::accuracy, optim::Metric::mean_iou};
  task.classes = models::kShapesClasses;
  task.monitor = "val_accuracy";
  task.report = [baseline = background_share(task.test.targets)](optim::Trainer& trainer, optim::BatchSource& test) {
    const optim::Logs logs = trainer.evaluate(test);
    return fmt::format(
        "test pixel accuracy {:.2f}%, mean IoU {:.3f}, test loss {:.4f} (predicting background "
        "everywhere: {:.2f}%)",
        100.0 * logs.at("accuracy"), logs.at("mean_iou"), logs.at("loss"), 100.0 * baseline);
  };
  return task;
}

}  // namespace

Task make_task(const TrainOptions& options) {
  if (options.model == "materials_mlp") return materials(options);
  if (is_segmentation(options.model)) return segmentation(options);
  return image_classification(options);
}

std::vector<std::string> data_fingerprint(const Task& task) {
  std::vector<std::string> lines;
  for (const auto& [name, data] : {std::pair{"training data", &task.train}, std::pair{"test data", &task.test}}) {
    uLong crc = crc32(0L, Z_NULL, 0);
    for (const Tensor* tensor : {&data->inputs, &data->targets}) {
      const Tensor host = tensor->to(cpu());
      // zlib takes at most 4 GiB per call.
      const auto* bytes = static_cast<const Bytef*>(host.raw_data());
      for (std::size_t done = 0; done < host.nbytes();) {
        const auto chunk = static_cast<uInt>(std::min<std::size_t>(host.nbytes() - done, 1u << 30));
        crc = crc32(crc, bytes + done, chunk);
        done += chunk;
      }
    }
    const auto dims = data->inputs.shape().to_vector();
    lines.push_back(fmt::format("{}: {} samples of [{}], CRC-32 {:08x}", name, dims.front(),
                                fmt::join(dims.begin() + 1, dims.end(), ", "), crc));
  }
  return lines;
}

}  // namespace ddl::apps
