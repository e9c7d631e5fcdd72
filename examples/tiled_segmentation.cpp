// Domain-decomposed inference, end to end: trains context_net (a dilated
// fully-convolutional segmenter, models/zoo.hpp; or with --model
// pooled_context_net its encoder-decoder variant) on small synthetic images of
// discs, rectangles and triangles, then segments one image many times larger
// than any tile. The image is cut into exact tiles (parallel/planning/tile_plan.hpp)
// run on several devices (logical CPU devices or GPUs) or, under mpiexec,
// dealt to the ranks; the stitched prediction is checked against
// whole-image inference, and the input, the true mask and the prediction
// are written as PNG files.
//
//   tiled_segmentation                                  3x3 tiles on cpu:1, cpu:2 and cpu:3
//   tiled_segmentation --grid 3x4 --devices cpu:1,cpu:2,cpu:3
//   tiled_segmentation --memory-budget-mib 8           tiles as large as 8 MiB allows
//   mpiexec -n 2 tiled_segmentation --grid 4x4          trained data-parallel, tiles over the ranks
//
// Options that cannot work (a halo too narrow, a grid finer than the image, a
// budget too small) are refused before training, with what would work: exit
// code 2. Other failures exit 1.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <ddl/ddl.hpp>

namespace {

using namespace ddl;

struct Options {
  std::string model = "context_net";
  std::int64_t epochs = 4;
  std::int64_t samples = 2000;
  std::int64_t train_size = 64;
  std::int64_t height = 384, width = 512;
  std::string grid = "3x3", tile, window;
  double memory_budget_mib = 0;
  std::int64_t halo = -1;
  // cpu:0 holds the image and the stitched output; the tiles' devices hold
  // the model and one tile each, so their peaks show the tiles' memory.
  std::vector<std::string> devices{"cpu:1", "cpu:2", "cpu:3"};
  std::string out = "tiled_segmentation";
  std::uint64_t seed = 1;
};

// An option the command line parsed but that cannot work.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "3x4" -> {3, 4}.
std::pair<std::int64_t, std::int64_t> rows_by_cols(const std::string& text, const char* option) {
  std::int64_t rows = 0, cols = 0;
  char by = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%ld%c%ld%c", &rows, &by, &cols, &extra) != 3 || by != 'x' || rows < 1 || cols < 1) {
    throw UsageError(fmt::format("{} '{}': expected ROWSxCOLUMNS of positive integers, e.g. 2x3", option, text));
  }
  return {rows, cols};
}

parallel::TilingOptions tiling_options(const Options& options) {
  parallel::TilingOptions tiling{.halo = options.halo};
  if (!options.tile.empty()) {
    std::tie(tiling.tile_rows, tiling.tile_cols) = rows_by_cols(options.tile, "--tile");
  } else if (!options.window.empty()) {
    std::tie(tiling.window_rows, tiling.window_cols) = rows_by_cols(options.window, "--window");
  } else if (options.memory_budget_mib > 0) {
    tiling.memory_budget = static_cast<std::size_t>(options.memory_budget_mib * (1 << 20));
  } else {
    std::tie(tiling.grid_rows, tiling.grid_cols) = rows_by_cols(options.grid, "--grid");
  }
  return tiling;
}

// A step of the run that fails on one rank fails on all: rank 0 reports it.
struct Run {
  std::optional<parallel::Communicator> comm;  // under mpiexec with several ranks
  bool reporter() const { return !comm || comm->rank() == 0; }
  template <class... Args>
  void say(fmt::format_string<Args...> format, Args&&... args) const {
    if (reporter()) fmt::print("{}\n", fmt::format(format, std::forward<Args>(args)...));
  }
};

std::shared_ptr<layers::Sequential> train(const Run& run, const Options& options) {
  Generator generator(options.seed);
  auto model = models::make_model(options.model, &generator);
  const models::Dataset data = models::make_shapes(
      {.samples = options.samples, .height = options.train_size, .width = options.train_size, .seed = options.seed});
  models::DataLoader loader(data, {.batch_size = 16, .shuffle = true, .seed = options.seed});
  optim::TrainerOptions trainer_options{.metrics = {optim::Metric::accuracy, optim::Metric::mean_iou},
                                        .classes = models::kShapesClasses};
  if (run.comm) trainer_options.strategy = std::make_shared<parallel::DataParallel>(*run.comm);
  optim::Trainer trainer(model, layers::cross_entropy,
                         std::make_shared<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = 5e-3}),
                         trainer_options);
  run.say("training {} on {} synthetic {}x{} images for {} epochs{}", options.model, options.samples,
          options.train_size, options.train_size, options.epochs,
          run.comm ? fmt::format(", data-parallel over {} ranks", run.comm->size()) : "");
  trainer.fit(loader, {.epochs = options.epochs});
  return model;
}

// The fraction of pixels whose most likely class is the true one.
double pixel_accuracy(const Tensor& logits, const Tensor& mask) {
  const auto predicted = argmax(logits, 1).to_vector<std::int64_t>();
  const auto truth = mask.to_vector<std::int64_t>();
  std::size_t right = 0;
  for (std::size_t i = 0; i < truth.size(); ++i) right += predicted[i] == truth[i] ? 1 : 0;
  return static_cast<double>(right) / static_cast<double>(truth.size());
}

// The largest |value| of a tensor.
float largest_magnitude(const Tensor& x) { return max(abs(x).reshape({x.numel()}), 0).values.item(); }

void write_images(const Options& options, const Tensor& image, const Tensor& mask, const Tensor& logits) {
  std::filesystem::create_directories(options.out);
  const Shape plane{options.height, options.width};
  const std::string input = options.out + "/input.png", truth = options.out + "/mask.png",
                    prediction = options.out + "/prediction.png";
  models::write_png(input, models::grayscale_image(image.reshape(plane)));
  models::write_png(truth, models::class_image(mask.reshape(plane)));
  models::write_png(prediction, models::class_image(argmax(logits, 1).reshape(plane)));
  fmt::print("wrote {}, {} and {}\n", input, truth, prediction);
}

int run_example(const Options& options) {
  Run run;
  run.comm = parallel::job_ranks();
  // Everything that can be refused is refused before training: these
  // errors are the command line's (exit code 2).
  std::vector<Device> devices;
  parallel::TilingOptions tiling;
  parallel::TilePlan plan;
  try {
    for (const std::string& name : options.devices) devices.push_back(Device::parse(name));
    for (const Device& device : devices) check_device_exists(device);
    if (devices.empty()) throw UsageError("--devices: give at least one device, e.g. cpu:0,cpu:1");
    const Shape image_shape{1, 1, options.height, options.width};
    tiling = tiling_options(options);
    const auto geometry = models::make_model(options.model);
    // The masks have the images' size: so must the model's outputs.
    const parallel::SpatialModel spatial(*geometry);
    for (const auto& [rows, cols] :
         {std::pair{options.train_size, options.train_size}, {options.height, options.width}}) {
      const Shape output = spatial.output_shape({1, 1, rows, cols});
      if (output[2] != rows || output[3] != cols) {
        throw UsageError(
            fmt::format("--model {} turns a {}x{} image into {}x{} outputs, not one a pixel (it pools by 2 "
                        "and upsamples by 2: give even sizes)",
                        options.model, rows, cols, output[2], output[3]));
      }
    }
    plan = run.comm ? parallel::plan_tiles(*run.comm, *geometry, image_shape, tiling, devices.front().type())
                    : parallel::plan_tiles(*geometry, image_shape, tiling, devices.front().type());
  } catch (const std::exception& error) {
    if (run.reporter()) std::cerr << "tiled_segmentation: error: " << error.what() << '\n';
    return 2;
  }
  const DeviceType type = devices.front().type();
  run.say("tiles: {}", plan.describe());

  const auto model = train(run, options);
  // One large image of many shapes, from a seed the training images never used.
  const std::int64_t shapes = std::max<std::int64_t>(1, options.height * options.width / 1200);
  const models::Dataset large = models::make_shapes({.samples = 1,
                                                     .height = options.height,
                                                     .width = options.width,
                                                     .shapes_per_image = shapes,
                                                     .seed = options.seed + 1000});
  const auto progress = [&](const parallel::Tile& tile, std::size_t done, std::size_t total) {
    fmt::print("tile {}/{}: output rows {}-{}, columns {}-{}\n", done, total, tile.output.rows.begin,
               tile.output.rows.end - 1, tile.output.cols.begin, tile.output.cols.end - 1);
    std::fflush(stdout);
  };
  Tensor tiled;
  if (run.comm) {
    const Device device = type == DeviceType::CUDA
                              ? parallel::local_gpu(*run.comm, "tiled_segmentation", "tiles")
                              : devices[static_cast<std::size_t>(run.comm->rank()) % devices.size()];
    tiled = parallel::tiled_forward(*run.comm, *model, large.inputs, plan, device, 0, progress);
  }
  if (!run.comm) {
    for (const Device& device : devices) reset_peak_memory_stats(device);
    tiled = parallel::tiled_forward(*model, large.inputs, plan, devices, progress);
    // Planned again for the estimate: the trained model carries its
    // gradients to every device, which the untrained one had not.
    const auto estimate = parallel::plan_tiles(*model, large.inputs.shape(), tiling, type).largest_tile.tensors;
    for (const Device& device : devices) {
      fmt::print("{}: peak {:.2f} MiB of tensors (the estimate for the largest tile: {:.2f} MiB)\n", device.str(),
                 static_cast<double>(memory_stats(device).peak_bytes) / (1 << 20),
                 static_cast<double>(estimate) / (1 << 20));
    }
  }
  if (!run.reporter()) return 0;

  // The whole image in one piece, to show the tiles changed nothing.
  model->eval();
  NoGradGuard no_grad;
  const Tensor whole = (*model)(large.inputs);
  const auto truth = large.targets.to_vector<std::int64_t>();
  const double background = static_cast<double>(std::count(truth.begin(), truth.end(), models::kShapesBackground)) /
                            static_cast<double>(truth.size());
  fmt::print(
      "tiled vs whole image: largest difference {:.3g} of the largest logit; pixel accuracy {:.2f}% "
      "(background everywhere: {:.2f}%)\n",
      largest_magnitude(tiled - whole) / largest_magnitude(whole), 100 * pixel_accuracy(tiled, large.targets),
      100 * background);
  write_images(options, large.inputs, large.targets, tiled);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Four logical CPU devices unless the user chose a number.
  setenv("DDL_CPU_DEVICES", "4", 0);
  CLI::App app{
      "Trains context_net (or pooled_context_net) on synthetic shapes, then segments a large image in exact tiles over "
      "devices or "
      "MPI ranks, and writes input.png, mask.png and prediction.png",
      "tiled_segmentation"};
  Options options;
  app.add_option("--model", options.model, "the segmenter to train and tile")
      ->check(CLI::IsMember({"context_net", "pooled_context_net"}))
      ->capture_default_str();
  app.add_option("--epochs", options.epochs, "training epochs")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--samples", options.samples, "training images")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--train-size", options.train_size, "training images' side in pixels")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--height", options.height, "the large image's height")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--width", options.width, "the large image's width")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  auto* grid = app.add_option("--grid", options.grid, "ROWSxCOLUMNS tiles of near-equal size")->capture_default_str();
  auto* tile = app.add_option("--tile", options.tile, "ROWSxCOLUMNS output pixels per tile (the last ones smaller)");
  auto* window = app.add_option("--window", options.window, "ROWSxCOLUMNS input pixels per tile, halo included");
  auto* budget = app.add_option("--memory-budget-mib", options.memory_budget_mib,
                                "the largest square tiles whose pass fits this many MiB a device")
                     ->check(CLI::PositiveNumber);
  tile->excludes(window)->excludes(budget);
  window->excludes(budget);
  grid->excludes(tile)->excludes(window)->excludes(budget);
  app.add_option("--halo", options.halo, "input pixels read around each tile (-1: what the model needs, 15)")
      ->check(CLI::Range(-1, 1 << 20))
      ->capture_default_str();
  app.add_option("--devices", options.devices, "devices the tiles run on in turn (one process)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--out", options.out, "directory for the PNG files")->capture_default_str();
  app.add_option("--seed", options.seed, "seed of the data and the weights")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);
    std::cerr << "tiled_segmentation: error: " << error.what() << " (see --help)\n";
    return 2;
  }
  try {
    return run_example(options);
  } catch (const std::exception& error) {
    std::cerr << "tiled_segmentation: error: " << error.what() << '\n';
    return 1;
  }
}
