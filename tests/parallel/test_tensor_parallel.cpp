// Tensor parallelism (parallel/tensor/, TensorParallel) under mpiexec with
// 2, 3 and 4 ranks: every rank of the world is one tensor group (T = the
// rank count) or, at 4 ranks, also 2 replicas of a group of 2. The layers'
// feature counts do not divide by 2, 3 or 4, so the ranks' slices differ
// in size. Split layers are checked against the whole layer in float64,
// with float32's own error bound; training against one process.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <ddl/ddl.hpp>
#include <ddl/parallel/strategies/tensor_parallel.hpp>
#include <ddl/parallel/tensor/conjugate_ops.hpp>
#include <ddl/parallel/tensor/parallel_dense.hpp>
#include <ddl/parallel/tensor/tensor_plan.hpp>

#include "parallel/training_fixtures.hpp"
#include "support/skip.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using namespace ddl::parallel;

using ddl::test::MakeOptimizer;
using ddl::test::max_relative_difference;
using ddl::test::random_images;
using ddl::test::throws_error_mentioning;

namespace {

constexpr double kUnit = 1.0 / (1 << 24);  // float32's unit roundoff

// A float64 matrix, row-major.
struct Matrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<double> values;
  double at(std::int64_t r, std::int64_t c) const { return values[static_cast<std::size_t>(r * cols + c)]; }
};

Matrix matrix_of(const Tensor& tensor) {
  const std::vector<float> values = tensor.to_vector<float>();
  const std::int64_t cols = tensor.dim() == 1 ? tensor.size(0) : tensor.size(1);
  return {tensor.dim() == 1 ? 1 : tensor.size(0), cols, std::vector<double>(values.begin(), values.end())};
}

// a·b (or aᵀ·b, a·bᵀ) in float64, and beside it Σ|terms| per element: a
// float32 sum of those terms in any order is within in·u·Σ|terms|.
struct Product {
  Matrix value, magnitude;
};

Product product(const Matrix& a, bool transpose_a, const Matrix& b, bool transpose_b) {
  const std::int64_t rows = transpose_a ? a.cols : a.rows, inner = transpose_a ? a.rows : a.cols;
  const std::int64_t cols = transpose_b ? b.rows : b.cols;
  Product p{{rows, cols, std::vector<double>(static_cast<std::size_t>(rows * cols))},
            {rows, cols, std::vector<double>(static_cast<std::size_t>(rows * cols))}};
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      double sum = 0.0, magnitude = 0.0;
      for (std::int64_t k = 0; k < inner; ++k) {
        const double term = (transpose_a ? a.at(k, r) : a.at(r, k)) * (transpose_b ? b.at(c, k) : b.at(k, c));
        sum += term;
        magnitude += std::abs(term);
      }
      p.value.values[static_cast<std::size_t>(r * cols + c)] = sum;
      p.magnitude.values[static_cast<std::size_t>(r * cols + c)] = magnitude;
    }
  }
  return p;
}

// Whether `actual` (rows x cols) equals columns [first, first + cols) of the
// reference, within float32's error bound for sums of `terms` terms (and
// a bias added: one more rounding).
bool within_float32_bound(const Tensor& actual, const Product& reference, std::int64_t first, std::int64_t terms,
                          const std::vector<double>& bias = {}) {
  const Matrix got = matrix_of(actual);
  bool ok = got.rows == reference.value.rows;
  for (std::int64_t r = 0; ok && r < got.rows; ++r) {
    for (std::int64_t c = 0; c < got.cols; ++c) {
      const double b = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(first + c)];
      const double expected = reference.value.at(r, first + c) + b;
      const double bound =
          (static_cast<double>(terms) + 2.0) * kUnit * (reference.magnitude.at(r, first + c) + std::abs(b));
      if (std::abs(got.at(r, c) - expected) > bound + 1e-30) {
        MESSAGE("element [", r, ", ", first + c, "]: ", got.at(r, c), " against ", expected, " (bound ", bound, ")");
        ok = false;
      }
    }
  }
  return ok;
}

std::shared_ptr<const TensorGroup> world_group() {
  return std::make_shared<const TensorGroup>(Communicator::world(), AllreduceAlgorithm::ring);
}

// The same random tensor on every rank (the same seed).
Tensor shared_random(const Shape& shape, std::uint64_t seed, bool requires_grad = false) {
  Generator generator(seed);
  Tensor tensor = uniform(shape, -1.0f, 1.0f, {}, &generator);
  tensor.set_requires_grad(requires_grad);
  return tensor;
}

std::vector<double> column_sums(const Matrix& m) {
  std::vector<double> sums(static_cast<std::size_t>(m.cols));
  for (std::int64_t r = 0; r < m.rows; ++r) {
    for (std::int64_t c = 0; c < m.cols; ++c) sums[static_cast<std::size_t>(c)] += m.at(r, c);
  }
  return sums;
}

}  // namespace

TEST_CASE("ColumnParallelDense: each rank's output features and every gradient are the whole layer's, in float64") {
  const auto group = world_group();
  constexpr std::int64_t kRows = 5, kIn = 13, kOut = 7;  // 7 features over 2, 3, 4 ranks: uneven slices
  Generator weights(11);
  const layers::Dense whole(kIn, kOut, true, &weights);
  whole.bias().copy_from(shared_random({kOut}, 12));
  ColumnParallelDense column(whole, group);
  const ChunkRange part = group->part(kOut);
  REQUIRE(column.parameters()[0].shape() == Shape{kIn, part.size()});

  const Tensor x = shared_random({kRows, kIn}, 13, true);
  const Tensor y = column(x);
  REQUIRE(y.shape() == Shape{kRows, part.size()});
  const Matrix w = matrix_of(whole.weight());
  const Product forward = product(matrix_of(x), false, w, false);
  const Matrix bias = matrix_of(whole.bias());
  CHECK(within_float32_bound(y, forward, part.begin, kIn, bias.values));

  // Backward of Σ y ⊙ G for a G whose columns each rank takes its own of.
  const Tensor g = shared_random({kRows, kOut}, 14);
  sum(y * slice(g, part.begin, part.end, 1)).backward();
  // The input's gradient sums every rank's product (copy_to's allreduce).
  const Product input_grad = product(matrix_of(g), false, w, true);
  CHECK(within_float32_bound(x.grad(), input_grad, 0, kOut));
  const Product weight_grad = product(matrix_of(x), true, matrix_of(g), false);
  CHECK(within_float32_bound(column.parameters()[0].grad(), weight_grad, part.begin, kRows));
  const std::vector<double> bias_grad = column_sums(matrix_of(g));
  const std::vector<float> got = column.parameters()[1].grad().to_vector<float>();
  for (std::int64_t c = 0; c < part.size(); ++c) {
    CHECK(std::abs(got[static_cast<std::size_t>(c)] - bias_grad[static_cast<std::size_t>(part.begin + c)]) <=
          (kRows + 1) * kUnit * kRows);
  }
}

TEST_CASE("RowParallelDense: the output and every gradient are the whole layer's, in float64") {
  const auto group = world_group();
  constexpr std::int64_t kRows = 6, kIn = 11, kOut = 5;  // 11 input features over 2, 3, 4 ranks
  Generator weights(21);
  const layers::Dense whole(kIn, kOut, true, &weights);
  whole.bias().copy_from(shared_random({kOut}, 22));
  RowParallelDense row(whole, group);
  const ChunkRange part = group->part(kIn);
  REQUIRE(row.parameters()[0].shape() == Shape{part.size(), kOut});

  const Tensor x_whole = shared_random({kRows, kIn}, 23);
  Tensor x = slice(x_whole, part.begin, part.end, 1);
  x.set_requires_grad(true);
  const Tensor y = row(x);
  REQUIRE(y.shape() == Shape{kRows, kOut});
  const Matrix w = matrix_of(whole.weight());
  CHECK(within_float32_bound(y, product(matrix_of(x_whole), false, w, false), 0, kIn, matrix_of(whole.bias()).values));

  const Tensor g = shared_random({kRows, kOut}, 24);
  sum(y * g).backward();
  const Product input_grad = product(matrix_of(g), false, w, true);
  CHECK(within_float32_bound(x.grad(), input_grad, part.begin, kOut));
  // Rows [begin, end) of the whole weight's gradient Xᵀ G: columns of its transpose Gᵀ X.
  const Product weight_grad_t = product(matrix_of(g), true, matrix_of(x_whole), false);
  CHECK(within_float32_bound(transpose(row.parameters()[0].grad()), weight_grad_t, part.begin, kRows));
  const std::vector<double> bias_grad = column_sums(matrix_of(g));
  const std::vector<float> got = row.parameters()[1].grad().to_vector<float>();
  for (std::int64_t c = 0; c < kOut; ++c) {
    CHECK(std::abs(got[static_cast<std::size_t>(c)] - bias_grad[static_cast<std::size_t>(c)]) <=
          (kRows + 1) * kUnit * kRows);
  }
}

TEST_CASE("copy_to_group and reduce_from_group: identity one way, the group's sum the other") {
  const auto group = world_group();
  const Communicator world = Communicator::world();
  const int p = world.size();
  // Each rank's own values: small integers, so every sum is exact.
  const Tensor mine = full({3, 2}, world.rank() + 1.0, {});
  const double sum_of_ranks = p * (p + 1) / 2.0;
  Tensor x = mine.clone();
  x.set_requires_grad(true);
  const Tensor reduced = reduce_from_group(x, group);
  CHECK(reduced.to_vector<float>() == std::vector<float>(6, static_cast<float>(sum_of_ranks)));
  sum(reduced * full({3, 2}, 2.0, {})).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>(6, 2.0f));

  Tensor z = mine.clone();
  z.set_requires_grad(true);
  const Tensor copied = copy_to_group(z, group);
  CHECK(copied.to_vector<float>() == mine.to_vector<float>());
  sum(copied * full({3, 2}, world.rank() + 1.0, {})).backward();
  CHECK(z.grad().to_vector<float>() == std::vector<float>(6, static_cast<float>(sum_of_ranks)));
}

namespace {

// Flatten, then two Megatron pairs with an activation and dropouts between:
// Dense 144-20 | ReLU | Dropout | Dense 20-18 | Tanh | Dropout | Dense 18-22 |
// ReLU | Dense 22-10. The first dropout acts on a sharded activation, the
// second on a replicated one.
layers::LayerList two_pairs(float dropout) {
  layers::LayerList list;
  list.emplace<layers::Flatten>()
      .emplace_init<layers::Dense>(144, 20, true)
      .emplace<layers::ReLU>()
      .emplace<layers::Dropout>(dropout)
      .emplace_init<layers::Dense>(20, 18, true)
      .emplace<layers::Tanh>()
      .emplace<layers::Dropout>(dropout)
      .emplace_init<layers::Dense>(18, 22, true)
      .emplace<layers::ReLU>()
      .emplace_init<layers::Dense>(22, 10, true);
  return list;
}

// Convolutions split by channels: Conv 1-6 3x3 (padding 1) | BatchNorm2d |
// ReLU | Dropout | Conv 6-5 3x3 | ReLU | MaxPool 2 | a basic block 5-7 (its
// body Conv 5-7, BatchNorm2d, ReLU, Conv 7-7, BatchNorm2d; its shortcut a
// 1x1 convolution and BatchNorm2d, whole) | Flatten | Dense 175-10. The
// first pair's BatchNorm2d and dropout act on each rank's channels.
layers::LayerList split_cnn() {
  layers::LayerList list;
  list.emplace_init<layers::Conv2d>(1, 6, layers::Conv2dOptions{.padding = 1, .bias = false})
      .emplace<layers::BatchNorm2d>(6)
      .emplace<layers::ReLU>()
      .emplace<layers::Dropout>(0.2f)
      .emplace_init<layers::Conv2d>(6, 5, layers::Conv2dOptions{})
      .emplace<layers::ReLU>()
      .emplace<layers::MaxPool2d>()
      .add([](Generator* generator) { return layers::basic_block(5, 7, 1, generator); })
      .emplace<layers::Flatten>()
      .emplace_init<layers::Dense>(175, 10, true);
  return list;
}

struct Run {
  std::shared_ptr<layers::Sequential> model;
  std::shared_ptr<optim::Optimizer> optimizer;
  std::shared_ptr<optim::Strategy> strategy;  // null in one process
};

// Two epochs of `model` on random_images, each data shard reading its part
// of every batch, on `device`.
void fit(Run& run, int data_shards, const Device& device = cpu()) {
  optim::Trainer trainer(run.model, layers::cross_entropy, run.optimizer, test::quiet_options({}, run.strategy));
  models::DataLoader loader(
      random_images(), {.batch_size = test::kGlobalBatch / data_shards, .shuffle = true, .seed = 3, .device = device});
  trainer.fit(loader, {.epochs = 2});
}

// Two epochs of `layers` on random_images, in one process (tensor_ranks 0)
// or over `replicas` x `tensor_ranks` ranks, on `device`.
Run train(const layers::LayerList& layers, const MakeOptimizer& make, int tensor_ranks, int replicas = 1,
          const Device& device = cpu()) {
  Run run;
  Generator weights(31);
  manual_seed(32);  // dropout's masks
  if (tensor_ranks == 0) {
    run.model = layers.build(&weights);
  } else {
    ProcessGrid grid = ProcessGrid::split(Communicator::world(), replicas, 1, tensor_ranks);
    auto group = std::make_shared<const TensorGroup>(grid.tensor, AllreduceAlgorithm::ring);
    TensorPlan plan = plan_tensor_parallel(layers, tensor_ranks);
    run.model = build_tensor_parallel(layers, plan, group, &weights);
    run.strategy = std::make_shared<TensorParallel>(std::move(grid), group, std::move(plan));
  }
  run.model->to(device);
  run.optimizer = make(run.model->parameters());
  fit(run, replicas, device);
  return run;
}

// The same on the grid `config` assembles over every rank (make_setup).
Run train(const layers::LayerList& layers, const MakeOptimizer& make, const ParallelConfig& config) {
  Generator weights(31);
  manual_seed(32);
  const ParallelSetup setup =
      make_setup(config, Communicator::world(), layers,
                 {.sample_shape = Shape({1, 12, 12}), .batch = test::kGlobalBatch, .weights = &weights});
  Run run{setup.model, make(setup.model->parameters()), setup.strategy};
  fit(run, setup.data_ranks);
  return run;
}

// The state a checkpoint would hold, joined into the single-process format
// on the root: every float32 entry of the model's, and of the optimizer's.
struct Checkpoint {
  std::vector<std::vector<float>> model, optimizer;
};

Checkpoint checkpoint_of(const Run& run) {
  optim::TrainingState state{run.model->state_dict(), run.optimizer->state()};
  if (run.strategy) run.strategy->gather_state(*run.model, state);
  Checkpoint checkpoint;
  for (const auto& [entries, values] :
       {std::pair{&state.model, &checkpoint.model}, std::pair{&state.optimizer, &checkpoint.optimizer}}) {
    for (const auto& [name, tensor] : *entries) {
      if (tensor.dtype() == DType::Float32) values->push_back(tensor.to_vector<float>());
    }
  }
  return checkpoint;
}

// How far one run's entries are from another's: the largest difference of
// each entry relative to its largest magnitude. The row layers sum their
// partial products in another order than one process's GEMM, and float32's
// error of a sum scales with its largest terms, not with an element that
// came out near zero (a weight, a momentum that cancelled).
double difference_of(const std::vector<std::vector<float>>& split, const std::vector<std::vector<float>>& alone) {
  REQUIRE(split.size() == alone.size());
  double worst = 0.0;
  for (std::size_t e = 0; e < alone.size(); ++e) {
    REQUIRE(split[e].size() == alone[e].size());
    double scale = 0.0, difference = 0.0;
    for (std::size_t i = 0; i < alone[e].size(); ++i) {
      scale = std::max(scale, std::abs(static_cast<double>(alone[e][i])));
      difference = std::max(difference, std::abs(static_cast<double>(split[e][i]) - alone[e][i]));
    }
    if (scale > 0.0) worst = std::max(worst, difference / scale);
  }
  return worst;
}

// Whether a tensor-parallel run ended where one process did: its weights
// and buffers within 1e-5, and its optimizer state within 1e-4. The state
// (momentum, Adam's and Adadelta's accumulators) sums every step's
// gradients, and the gradients' rounding differences with them: measured
// up to 1.9e-5 after 8 steps of split_cnn without its dropout, where the weights
// stay within 4e-6.
void check_equal_to_one_process(const Checkpoint& split, const Checkpoint& alone) {
  CHECK(difference_of(split.model, alone.model) <= 1e-5);
  CHECK(difference_of(split.optimizer, alone.optimizer) <= 1e-4);
}

}  // namespace

TEST_CASE("TensorParallel: two epochs equal one process for every optimizer, dropout included") {
  const Communicator world = Communicator::world();
  const layers::LayerList layers = two_pairs(0.3f);
  for (const auto& [optimizer_name, make] : test::every_optimizer()) {
    const std::string name = optimizer_name;
    CAPTURE(name);
    const auto alone = checkpoint_of(train(layers, make, 0));
    const auto split = checkpoint_of(train(layers, make, world.size()));
    if (world.rank() == 0) check_equal_to_one_process(split, alone);  // only the root holds the joined state
  }
}

TEST_CASE("TensorParallel: convolutions, batch norm, pooling, dropout and a residual block equal one process") {
  const Communicator world = Communicator::world();
  const layers::LayerList layers = split_cnn();
  REQUIRE(plan_tensor_parallel(layers, world.size()).describe() == "column 0 + row 4; column 7.body.0 + row 7.body.3");
  for (const auto& [optimizer_name, make] : test::every_optimizer()) {
    const std::string name = optimizer_name;
    CAPTURE(name);
    const auto alone = checkpoint_of(train(layers, make, 0));
    const auto split = checkpoint_of(train(layers, make, world.size()));
    if (world.rank() == 0) check_equal_to_one_process(split, alone);
  }
}

TEST_CASE("TensorParallel: replicas of a tensor group average their gradients and equal one process") {
  const Communicator world = Communicator::world();
  if (world.size() != 4) return;  // 2 replicas x 2 tensor ranks
  const layers::LayerList layers = two_pairs(0.0f);
  const MakeOptimizer& sgd = test::every_optimizer().front().second;
  const auto alone = checkpoint_of(train(layers, sgd, 0));
  const auto grid = checkpoint_of(train(layers, sgd, 2, 2));
  if (world.rank() == 0) check_equal_to_one_process(grid, alone);
}

namespace {

// One way of writing the ranks as a 3-D grid.
struct GridShape {
  int data, tensor, stages;
  std::string str() const { return fmt::format("{} x {} x {} (dp x tp x pp)", data, tensor, stages); }
};

// Every D x T x P of `ranks`.
std::vector<GridShape> grid_shapes(int ranks) {
  std::vector<GridShape> shapes;
  for (int d = 1; d <= ranks; ++d) {
    for (int t = 1; d * t <= ranks; ++t) {
      if (ranks % (d * t) == 0) shapes.push_back({d, t, ranks / (d * t)});
    }
  }
  return shapes;
}

// The grid as make_setup takes it: 2 micro-batches per batch, stages
// balanced by layer count (where the tensor plan lets them begin).
ParallelConfig grid_config(const GridShape& shape) {
  return {.kind = StrategyKind::hybrid,
          .pipeline = {.micro_batches = 2},
          .layout = {.stages = shape.stages, .pipelines = shape.data, .balance = StageBalance::Layers},
          .tensor_ranks = shape.tensor};
}

}  // namespace

TEST_CASE("3-D grid: every dp x tp x pp of the ranks trains as one process, for every optimizer") {
  const Communicator world = Communicator::world();
  const layers::LayerList layers = two_pairs(0.0f);
  for (const auto& [optimizer_name, make] : test::every_optimizer()) {
    const std::string name = optimizer_name;
    CAPTURE(name);
    const auto alone = checkpoint_of(train(layers, make, 0));
    for (const GridShape& shape : grid_shapes(world.size())) {
      const std::string grid = shape.str();
      CAPTURE(grid);
      const Run run = train(layers, make, grid_config(shape));
      if (shape.tensor > 1) {
        // Every stage's split layers hold this rank's slices.
        const auto& pipeline = dynamic_cast<const Pipeline&>(*run.strategy);
        REQUIRE(pipeline.tensor_group() != nullptr);
        CHECK(pipeline.tensor_group()->size() == shape.tensor);
        for (const StageRange& stage : pipeline.stages())
          CHECK(pipeline.tensor_plan()->pair_across(stage.first).empty());
      }
      const auto joined = checkpoint_of(run);
      if (world.rank() == 0) check_equal_to_one_process(joined, alone);
    }
  }
}

TEST_CASE("3-D grid: a one-process checkpoint cut for every rank and gathered back is itself, bit for bit") {
  const Communicator world = Communicator::world();
  // Tensor groups of 2 where the ranks divide by 2 (a pipeline of them at 4 ranks), else one group of all.
  const int tensor = world.size() % 2 == 0 ? 2 : world.size();
  const GridShape shape{1, tensor, world.size() / tensor};
  CAPTURE(shape.str());
  const layers::LayerList layers = split_cnn();
  const MakeOptimizer& adam = test::every_optimizer().back().second;
  const Run alone = train(layers, adam, 0);
  const optim::TrainingState whole{alone.model->state_dict(), alone.optimizer->state()};
  Generator weights(31);
  const ParallelSetup setup =
      make_setup(grid_config(shape), world, layers,
                 {.sample_shape = Shape({1, 12, 12}), .batch = test::kGlobalBatch, .weights = &weights});
  optim::TrainingState state = whole;
  setup.strategy->select_state(*setup.model, state);
  // Each rank's part has its model's names and shapes.
  const std::vector<layers::NamedTensor> mine = setup.model->state_dict();
  REQUIRE(state.model.size() == mine.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    CHECK(state.model[i].first == mine[i].first);
    CHECK(state.model[i].second.shape() == mine[i].second.shape());
  }
  setup.strategy->gather_state(*setup.model, state);
  if (world.rank() != 0) return;
  // (A pair, not a structured binding: CAPTURE's lambda cannot name one under clang.)
  for (const auto& entries : {std::pair{&state.model, &whole.model}, std::pair{&state.optimizer, &whole.optimizer}}) {
    const auto& joined = *entries.first;
    const auto& original = *entries.second;
    REQUIRE(joined.size() == original.size());
    for (std::size_t i = 0; i < original.size(); ++i) {
      const std::string name = original[i].first;
      CAPTURE(name);
      CHECK(joined[i].first == name);
      CHECK(test::same_bits(joined[i].second, original[i].second));
    }
  }
}

TEST_CASE("3-D grid: grids that do not fit the ranks or the plan are refused on every rank with one message") {
  const Communicator world = Communicator::world();
  const auto refused = [&](const ParallelConfig& config) {
    try {
      Generator weights(31);
      make_setup(config, world, two_pairs(0.0f),
                 {.sample_shape = Shape({1, 12, 12}), .batch = 12, .weights = &weights});
    } catch (const ConfigError& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  ParallelConfig too_many = grid_config({1, world.size(), 2});
  CHECK(refused(too_many) == fmt::format("1 pipelines x 2 stages x {} tensor ranks need {} ranks; this job has {} "
                                         "(mpiexec -n {})",
                                         world.size(), 2 * world.size(), world.size(), 2 * world.size()));
  ParallelConfig sharded = grid_config({1, world.size(), 1});
  sharded.pipeline.sharding = Sharding::optimizer;
  CHECK(refused(sharded).starts_with("shard: does not combine with tensor groups"));
  ParallelConfig tensor_under_data{.kind = StrategyKind::data, .tensor_ranks = 2};
  CHECK(refused(tensor_under_data) ==
        "tp: splits layers over tensor groups under the tensor and hybrid strategies, not "
        "under data");
  if (world.size() % 2 == 0) {
    // two_pairs at 2 tensor ranks: column 1 + row 4, column 7 + row 9.
    ParallelConfig inside = grid_config({1, 2, world.size() / 2});
    inside.layout.split = world.size() == 4 ? "3" : "";
    if (world.size() == 4) {
      CHECK(refused(inside) ==
            "split: stage 1 would begin at layer 3, inside the tensor-parallel pair column 1 + "
            "row 4 (a sharded activation); cut before or after the pair");
    }
  }
  // The ranks still agree: a collective after the refusals completes.
  world.barrier();
}

TEST_CASE("TensorParallel: on GPUs it trains as on the CPU, over NCCL where each rank has a GPU of its own" *
          doctest::test_suite("cuda")) {
  const Communicator world = Communicator::world();
  if (!test::every_rank_has_a_gpu(world)) return test::skip("a rank has no CUDA device");
  const Device gpu = cuda(world.local_rank() % device_count(DeviceType::CUDA));
  const layers::LayerList layers = two_pairs(0.0f);
  const MakeOptimizer& sgd = test::every_optimizer().front().second;
  const auto on_cpu = checkpoint_of(train(layers, sgd, world.size()));
  const Run run = train(layers, sgd, world.size(), 1, gpu);
  const auto& strategy = dynamic_cast<const TensorParallel&>(*run.strategy);
  for (const Tensor& parameter : run.model->parameters()) CHECK(parameter.device() == gpu);
  // Ranks sharing a GPU sum through host memory; NCCL wants one GPU per rank.
  CHECK(strategy.group().over_nccl() == (test::gpus_of_their_own(world, gpu) && NcclCommunicator::built()));
  const auto on_gpu = checkpoint_of(run);
  // cuBLAS's and Eigen's sums differ in order: the runs agree to rounding.
  if (world.rank() == 0) {
    CHECK(difference_of(on_gpu.model, on_cpu.model) <= 1e-4);
    CHECK(difference_of(on_gpu.optimizer, on_cpu.optimizer) <= 1e-3);
  }
}

TEST_CASE("TensorParallel: a checkpoint's state cut for each rank is its slices, bit for bit") {
  const Communicator world = Communicator::world();
  const layers::LayerList layers = two_pairs(0.0f);
  const MakeOptimizer& adam = test::every_optimizer().back().second;
  const Run alone = train(layers, adam, 0);
  const Run split = train(layers, adam, world.size());
  optim::TrainingState state{alone.model->state_dict(), alone.optimizer->state()};
  split.strategy->select_state(*split.model, state);
  const std::vector<layers::NamedTensor> mine = split.model->state_dict();
  REQUIRE(state.model.size() == mine.size());
  const TensorGroup& group = dynamic_cast<const TensorParallel&>(*split.strategy).group();
  for (std::size_t i = 0; i < mine.size(); ++i) {
    CAPTURE(mine[i].first);
    CHECK(state.model[i].first == mine[i].first);
    CHECK(state.model[i].second.shape() == mine[i].second.shape());
  }
  // Layer 1 is the first column layer: its slice is the whole weight's columns.
  const Tensor whole = alone.model->state_dict()[0].second;
  const ChunkRange part = group.part(20);
  CHECK(state.model[0].second.to_vector<float>() == slice(whole, part.begin, part.end, 1).to_vector<float>());
  const std::vector<layers::NamedTensor> optimizer_state = split.optimizer->state();
  REQUIRE(state.optimizer.size() == optimizer_state.size());
  for (std::size_t i = 0; i < optimizer_state.size(); ++i) {
    CAPTURE(optimizer_state[i].first);
    CHECK(state.optimizer[i].second.shape() == optimizer_state[i].second.shape());
  }
}

TEST_CASE("TensorParallel: bad plans and grids are refused on every rank with one message") {
  const Communicator world = Communicator::world();
  layers::LayerList convolutions;
  convolutions.emplace_init<layers::Conv2d>(1, 4, layers::Conv2dOptions{}).emplace<layers::Flatten>();
  CHECK(throws_error_mentioning([&] { plan_tensor_parallel(convolutions, world.size()); },
                                {"no layer can be split", "Conv2d"}));
  layers::LayerList narrow;
  narrow.emplace_init<layers::Dense>(8, 1, true).emplace<layers::ReLU>().emplace_init<layers::Dense>(1, 3, true);
  CHECK(throws_error_mentioning([&] { plan_tensor_parallel(narrow, world.size()); }, {"at least", "Dense(8, 1)"}));
  // An optimizer over the parameters in another order would name its state
  // for the wrong ones in a checkpoint: refused at prepare, on every rank.
  const layers::LayerList mlp = two_pairs(0.0f);
  ProcessGrid grid = ProcessGrid::split(world, 1, 1, world.size());
  auto group = std::make_shared<const TensorGroup>(grid.tensor, AllreduceAlgorithm::ring);
  const TensorPlan plan = plan_tensor_parallel(mlp, world.size());
  Generator weights(3);
  const auto model = build_tensor_parallel(mlp, plan, group, &weights);
  TensorParallel strategy(std::move(grid), group, plan);
  std::vector<Tensor> reversed = model->parameters();
  std::reverse(reversed.begin(), reversed.end());
  optim::SGD sgd(reversed, optim::SgdOptions{.lr = 0.1});
  CHECK(throws_error_mentioning([&] { strategy.prepare(*model, &sgd); },
                                {"optimizer does not hold the model's 8 parameters in the model's order"}));
  CHECK(throws_error_mentioning([&] { ProcessGrid::split(world, 3, 1, world.size()); },
                                {fmt::format("3 data-parallel x 1 pipeline x {} tensor ranks need {} ranks; this job "
                                             "has {}",
                                             world.size(), 3 * world.size(), world.size())}));
}
