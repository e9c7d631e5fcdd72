// Model parallelism inside one process (parallel/planning/placement.hpp): plans are
// parsed and checked, and a placed model trains exactly as the same model on
// one device, with each parameter, gradient and optimizer buffer on its
// layer's device. ctest runs these with 2 logical CPU devices, and again with
// 4 (ddl_tests_placement_4_devices); logical devices run the same code, so
// placed and unplaced training agree bitwise.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <ddl/ddl.hpp>
#include <ddl/parallel/planning/placement.hpp>

#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/test_data.hpp"

namespace ddl::test {
namespace {

using parallel::parse_placement;

constexpr std::int64_t kSamples = 24;  // three steps of 8
constexpr std::int64_t kBatch = 8;

models::Dataset random_digits() {
  Generator generator(7);
  const Tensor inputs = uniform({kSamples, 1, 28, 28}, 0.0f, 1.0f, {}, &generator);
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < kSamples; ++i) labels.push_back((i * 3) % 10);
  return {inputs, from_vector(labels, {kSamples})};
}

std::shared_ptr<optim::Optimizer> make_optimizer(const std::string& name, std::vector<Tensor> params) {
  if (name == "sgd") {
    return std::make_shared<optim::SGD>(std::move(params), optim::SgdOptions{.lr = 0.05, .momentum = 0.9});
  }
  return std::make_shared<optim::Adadelta>(std::move(params), optim::AdadeltaOptions{});
}

struct Run {
  std::shared_ptr<layers::Sequential> model;
  std::shared_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::Trainer> trainer;
};

// A bundled model, placed by `plan` (empty: on cpu:0 alone), with its
// optimizer made after placing and a Trainer whose data lies on `data`.
Run make_run(const std::string& model_name, const std::string& optimizer, const std::string& plan,
             const Device& data = cpu(0)) {
  Generator generator(11);
  Run run;
  run.model = models::make_model(model_name, &generator);
  if (plan.empty()) {
    run.model->to(data);
  } else {
    parallel::place(*run.model, parse_placement(plan, *run.model), data);
  }
  run.optimizer = make_optimizer(optimizer, run.model->parameters());
  run.trainer = std::make_unique<optim::Trainer>(run.model, layers::cross_entropy, run.optimizer, quiet_options());
  return run;
}

std::vector<float> train(Run& run, std::int64_t epochs, const Device& data = cpu(0)) {
  manual_seed(5);  // dropout's masks: the same for every run
  models::DataLoader loader(random_digits(), {.batch_size = kBatch, .shuffle = true, .seed = 3, .device = data});
  run.trainer->fit(loader, {.epochs = epochs});
  return flat_parameters(*run.model);
}

// A plan over `devices` logical CPU devices: contiguous runs of layers.
std::string split_plan(std::size_t layers, int devices) {
  std::string plan;
  for (int d = 0; d < devices; ++d) {
    const std::size_t first = layers * d / devices, last = layers * (d + 1) / devices - 1;
    plan += fmt::format("{}{}-{}=cpu:{}", d == 0 ? "" : ",", first, last, d);
  }
  return plan;
}

void check_state_is_on_its_layers_device(const Run& run) {
  const auto& model = *run.model;
  std::size_t k = 0;
  const auto state = run.optimizer->state();
  for (std::size_t i = 0; i < model.size(); ++i) {
    for (const Tensor& param : model[i].parameters()) {
      CHECK(param.device() == model.placement()[i]);
      REQUIRE(param.grad().defined());
      CHECK(param.grad().device() == model.placement()[i]);
      for (const auto& [name, buffer] : state) {
        if (name.starts_with(fmt::format("{}.", k))) CHECK(buffer.device() == model.placement()[i]);
      }
      ++k;
    }
    for (const auto& [name, buffer] : model[i].named_buffers()) CHECK(buffer.device() == model.placement()[i]);
  }
}

}  // namespace

TEST_CASE("placement: plans by index range and by name") {
  REQUIRE_MESSAGE(device_count(DeviceType::CPU) >= 2, "run with DDL_CPU_DEVICES=2 (ctest sets it)");
  Generator generator(1);
  const auto cnn = models::make_model("mnist_cnn", &generator);
  const parallel::PlacementPlan plan = parse_placement("0-6=cpu:0, 7-10=cpu:1", *cnn);
  REQUIRE(plan.devices.size() == 11);
  for (std::size_t i = 0; i < 11; ++i) CHECK(plan.devices[i] == cpu(i < 7 ? 0 : 1));
  // Any layer may go anywhere, not only contiguous runs.
  const auto alternating = parse_placement("0=cpu:1,1-9=cpu:0,10=cpu:1", *cnn).devices;
  CHECK(alternating.front() == cpu(1));
  CHECK(alternating[5] == cpu(0));
  CHECK(alternating.back() == cpu(1));

  layers::Sequential named;
  named.add("features", std::make_shared<layers::Dense>(4, 8, true, &generator))
      .add("act", std::make_shared<layers::ReLU>())
      .add("head-out", std::make_shared<layers::Dense>(8, 2, true, &generator));
  CHECK(named.named_parameters().front().first == "features.weight");
  const auto by_name = parse_placement("features-act=cpu:1,head-out=cpu:0", named).devices;
  CHECK(by_name == std::vector<Device>{cpu(1), cpu(1), cpu(0)});
  CHECK(parse_placement("0-1=cpu:0,2=cpu:1", named).devices == std::vector<Device>{cpu(0), cpu(0), cpu(1)});
}

TEST_CASE("placement: bad plans are refused, naming what is wrong") {
  Generator generator(1);
  const auto cnn = models::make_model("mnist_cnn", &generator);
  CHECK(throws_error_mentioning([&] { parse_placement("", *cnn); }, {"empty", "0-10=cpu:0"}));
  CHECK(throws_error_mentioning([&] { parse_placement("0-6cpu:0", *cnn); }, {"'0-6cpu:0'", "not RANGE=DEVICE"}));
  CHECK(throws_error_mentioning([&] { parse_placement("0-6=cpu:0,conv9-10=cpu:0", *cnn); },
                                {"no layer is named 'conv9'", "11 layers", "0 (Conv2d)", "10 (Dense)"}));
  CHECK(throws_error_mentioning([&] { parse_placement("0-11=cpu:0", *cnn); },
                                {"layer 11 is out of range", "11 layers (0-10)"}));
  CHECK(throws_error_mentioning([&] { parse_placement("6-0=cpu:0,7-10=cpu:0", *cnn); }, {"runs backwards"}));
  CHECK(throws_error_mentioning([&] { parse_placement("0-6=cpu:0,6-10=cpu:1", *cnn); },
                                {"layer 6 is placed twice", "'0-6=cpu:0'", "'6-10=cpu:1'"}));
  CHECK(throws_error_mentioning([&] { parse_placement("0-3=cpu:0,5-8=cpu:0", *cnn); },
                                {"layer(s) 4,9-10 have no device"}));
  CHECK(throws_error_mentioning([&] { parse_placement("0-6=cpu:0,7-10=cpu:9", *cnn); },
                                {"'7-10=cpu:9'", "device cpu:9 does not exist", "DDL_CPU_DEVICES"}));
  CHECK(throws_error_mentioning([&] { parse_placement("0-10=gpu:0", *cnn); }, {"'0-10=gpu:0'", "gpu:0"}));
  CHECK(throws_error_mentioning([&] { parse_placement("0-10=cuda:7", *cnn); }, {"cuda:7 does not exist"}));
  CHECK(throws_error_mentioning([&] { parse_placement("0=cpu:0", layers::Sequential{}); }, {"no layers"}));

  layers::Sequential named;
  named.add("a", std::make_shared<layers::ReLU>());
  CHECK(throws_error_mentioning([&] { named.add("a", std::make_shared<layers::ReLU>()); }, {"'a'", "already taken"}));
  CHECK(throws_error_mentioning([&] { named.add("b.c", std::make_shared<layers::ReLU>()); }, {"'b.c'", "'.'"}));
}

TEST_CASE("placement: a placed model trains exactly as on one device, its state on its layers' devices") {
  const int devices = device_count(DeviceType::CPU);
  REQUIRE_MESSAGE(devices >= 2, "run with DDL_CPU_DEVICES=2 (ctest sets it)");
  for (const std::string model : {"mnist_cnn", "resnet_small"}) {
    for (const std::string optimizer : {"sgd", "adadelta"}) {
      for (int used = 2; used <= std::min(devices, 4); ++used) {
        CAPTURE(model);
        CAPTURE(optimizer);
        CAPTURE(used);
        Run single = make_run(model, optimizer, "");
        const std::string plan = split_plan(single.model->size(), used);
        CAPTURE(plan);
        Run placed = make_run(model, optimizer, plan);
        const std::vector<float> expected = train(single, 1);
        const std::vector<float> actual = train(placed, 1);
        REQUIRE(actual.size() == expected.size());
        CHECK(actual == expected);  // the same kernels on every logical device: bitwise
        check_state_is_on_its_layers_device(placed);
      }
    }
  }
}

TEST_CASE("placement: the input comes from the data's device and the output goes back to it") {
  REQUIRE_MESSAGE(device_count(DeviceType::CPU) >= 2, "run with DDL_CPU_DEVICES=2 (ctest sets it)");
  // Data, loss and targets on cpu:1; the first layers on cpu:0.
  Run single = make_run("mnist_cnn", "sgd", "", cpu(1));
  Run placed = make_run("mnist_cnn", "sgd", "0-6=cpu:0,7-10=cpu:1", cpu(1));
  CHECK(train(placed, 1, cpu(1)) == train(single, 1, cpu(1)));
  models::DataLoader loader(random_digits(), {.batch_size = kBatch, .device = cpu(1)});
  const Tensor predicted = placed.trainer->predict(loader);
  CHECK(predicted.device() == cpu(1));
  CHECK(predicted.to_vector<float>() == single.trainer->predict(loader).to_vector<float>());
  // The summary runs through the placement and says where each layer is.
  const std::string summary = layers::summary(*placed.model, {1, 28, 28});
  CHECK(summary.find("Device") != std::string::npos);
  CHECK(summary.find("cpu:1") != std::string::npos);
  // Moving the whole model to one device ends the placement.
  placed.model->to(cpu(0));
  CHECK(placed.model->placement().empty());
  CHECK(placed.model->output_device() == cpu(0));
}

TEST_CASE("placement: checkpoints of a placed model load into an unplaced one and back, and training continues alike") {
  REQUIRE_MESSAGE(device_count(DeviceType::CPU) >= 2, "run with DDL_CPU_DEVICES=2 (ctest sets it)");
  const TempDir dir("placement");
  const std::string plan = "0-2=cpu:1,3-6=cpu:0,7-8=cpu:1";
  Run reference = make_run("resnet_small", "sgd", "");  // 2 epochs without a break
  const std::vector<float> expected = train(reference, 2);

  Run placed = make_run("resnet_small", "sgd", plan);
  train(placed, 1);
  placed.trainer->save_checkpoint((dir.path / "placed.ckpt").string());
  Run unplaced = make_run("resnet_small", "sgd", "");
  unplaced.trainer->load_checkpoint((dir.path / "placed.ckpt").string());
  CHECK(train(unplaced, 2) == expected);

  Run first = make_run("resnet_small", "sgd", "");
  train(first, 1);
  first.trainer->save_checkpoint((dir.path / "unplaced.ckpt").string());
  Run replaced = make_run("resnet_small", "sgd", plan);
  replaced.trainer->load_checkpoint((dir.path / "unplaced.ckpt").string());
  CHECK(train(replaced, 2) == expected);
  check_state_is_on_its_layers_device(replaced);  // loading copies into place: the placement stands
}

TEST_CASE("placement: the report says what each device holds") {
  REQUIRE_MESSAGE(device_count(DeviceType::CPU) >= 2, "run with DDL_CPU_DEVICES=2 (ctest sets it)");
  Run placed = make_run("mnist_cnn", "adadelta", "0-6=cpu:0,7-10=cpu:1");
  auto monitor = std::make_shared<optim::StepMemoryMonitor>(parallel::placement_devices(*placed.model));
  manual_seed(5);
  models::DataLoader loader(random_digits(), {.batch_size = kBatch, .shuffle = true, .seed = 3});
  placed.trainer->fit(loader, {.epochs = 1, .callbacks = {monitor}});

  const auto usage = parallel::placement_report(*placed.model, placed.optimizer.get(), monitor.get());
  REQUIRE(usage.size() == 2);
  CHECK(usage[0].device == cpu(0));
  CHECK(usage[0].layers == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6});
  CHECK(usage[1].layers == std::vector<std::size_t>{7, 8, 9, 10});
  const std::size_t conv_bytes = 4 * ((1 * 9 + 1) * 32 + (32 * 9 + 1) * 64);
  const std::size_t dense_bytes = 4 * ((9216 + 1) * 128 + (128 + 1) * 10);
  CHECK(usage[0].parameter_bytes == conv_bytes);
  CHECK(usage[1].parameter_bytes == dense_bytes);
  CHECK(usage[0].optimizer_bytes == 2 * conv_bytes);  // Adadelta keeps two buffers per parameter
  CHECK(usage[1].optimizer_bytes == 2 * dense_bytes);
  CHECK(usage[0].gradient_bytes == conv_bytes);
  CHECK(usage[1].gradient_bytes == dense_bytes);
  // At the least, each device holds its layers' inputs for backward: the
  // first convolution's output (8 x 32 x 26 x 26 floats) on cpu:0, the
  // flattened features copied across the boundary (8 x 9216) on cpu:1.
  CHECK(usage[0].peak_activation_bytes >= std::size_t{4} * 8 * 32 * 26 * 26);
  CHECK(usage[1].peak_activation_bytes >= std::size_t{4} * 8 * 9216);
  // And not the optimizer's state, which the first step makes and keeps
  // (counted, it alone would reach the bound).
  CHECK(usage[1].peak_activation_bytes < usage[1].optimizer_bytes);
  const std::string table = parallel::format_placement_report(usage);
  CHECK(table.find("0-6") != std::string::npos);
  CHECK(table.find("7-10") != std::string::npos);
}

TEST_CASE("placement: across GPUs, or a CPU and a GPU, training matches one device to float32's own error" *
          doctest::test_suite("cuda")) {
  const int gpus = device_count(DeviceType::CUDA);
  if (gpus == 0) return test::skip("needs a CUDA device, and this machine has none");
  // Two GPUs exchange activations by peer copies; with one, the dense layers
  // run on the GPU and the convolutions on the CPU.
  const Device first = gpus >= 2 ? cuda(0) : cpu(0);
  const Device second = gpus >= 2 ? cuda(1) : cuda(0);
  const std::string plan = fmt::format("0-6={},7-10={}", first.str(), second.str());
  CAPTURE(plan);
  Run on_first = make_run("mnist_cnn", "sgd", "", first);
  Run on_second = make_run("mnist_cnn", "sgd", "", second);
  Run placed = make_run("mnist_cnn", "sgd", plan, first);
  const std::vector<float> a = train(on_first, 1, first);
  const std::vector<float> b = train(on_second, 1, second);
  const std::vector<float> p = train(placed, 1, first);
  check_state_is_on_its_layers_device(placed);
  // The placed run computes each layer as one of the two single-device runs
  // does, so it may differ from the first by at most what the two devices
  // differ by (bitwise equal between two GPUs of one kind).
  double devices_apart = 0.0, placed_apart = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    devices_apart = std::max(devices_apart, std::abs(double{a[i]} - b[i]));
    placed_apart = std::max(placed_apart, std::abs(double{p[i]} - a[i]));
  }
  CHECK(placed_apart <= 2.0 * devices_apart + 1e-7);
}

}  // namespace ddl::test
