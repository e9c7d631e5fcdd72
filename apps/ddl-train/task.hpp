// What ddl-train trains on for each bundled model: the data sets, the loss,
// the metrics, and how the final result is reported. Image models read
// Fashion-MNIST (or MNIST) files; materials_mlp generates stress-strain
// curves and learns standardised targets, reported back in GPa and MPa;
// context_net segments synthetic shapes, scored by pixel accuracy and mean
// IoU beside predicting background everywhere.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ddl/models/data/dataset.hpp>
#include <ddl/models/data/normalization.hpp>
#include <ddl/optim/engine/trainer.hpp>

#include "options.hpp"

namespace ddl::apps {

struct Task {
  std::string description;  // "Fashion-MNIST: 60000 training and 10000 test samples"
  models::Dataset train;
  models::Dataset test;
  std::optional<models::Normalization> normalization;  // of the inputs, from the training set
  optim::LossFunction loss;
  std::vector<optim::Metric> metrics;
  std::int64_t classes = 0;  // the output's dim 1, for Metric::mean_iou
  std::string monitor;       // the validation metric "best" refers to
  // The final result on the test set, e.g. "test accuracy 91.23%, test loss 0.2512".
  std::function<std::string(optim::Trainer& trainer, optim::BatchSource& test)> report;
};

// Throws UsageError when the data cannot be read (a missing directory or file).
Task make_task(const TrainOptions& options);

// What identifies the data a rank read: per data set, its sample count,
// sample shape and a CRC-32 of all its inputs and targets (0.2 s for
// Fashion-MNIST), so ranks that read different files disagree.
std::vector<std::string> data_fingerprint(const Task& task);

}  // namespace ddl::apps
