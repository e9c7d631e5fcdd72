// Tiled inference, measured (issue "domain-decomposed inference"): for a
// fully-convolutional model on one image,
//   1. tile count: time, throughput and the tile device's peak memory per
//      grid, and the halo's recomputation (the tiles' input pixels over the
//      image's) beside the time it costs;
//   2. image size: the device's peak memory for the whole image and for
//      fixed-size tiles as the image grows;
//   3. a memory budget: the largest square image whose whole-image pass fits
//      it, and the tiles that let any image run within it.
// Tiles run on logical CPU device cpu:1 (DDL_CPU_DEVICES=2 is set if unset),
// so its allocator counts the model, one tile and its activations, apart
// from the image and the stitched output on cpu:0. Under mpiexec the tiles
// are dealt to the ranks (distributed_tiles.hpp) and table 1 is timed that
// way. Prints tables; asserts nothing.
//
//   build/bench/ddl_bench_tiled_inference [--model context_net] [--size 1024] [--budget-mib 64]
//   mpiexec -n 2 build/bench/ddl_bench_tiled_inference
#include <cstdlib>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <ddl/ddl.hpp>
#include <ddl/parallel/inference/distributed_tiles.hpp>

#include "timing.hpp"

namespace {

using namespace ddl;

double mib(std::size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

struct Settings {
  std::string model = "context_net";
  std::int64_t size = 1024;
  std::int64_t channels = 1;
  std::vector<std::int64_t> grids{1, 2, 4, 8};
  std::vector<std::int64_t> sizes{256, 512, 1024, 2048};
  std::int64_t tile = 256;
  double budget_mib = 64;
  int reps = 3;
};

// One tiled pass, on cpu:1 in one process or over the ranks.
Tensor run(const parallel::Communicator* comm, layers::Module& model, const Tensor& image,
           const parallel::TilePlan& plan) {
  if (comm != nullptr) return parallel::tiled_forward(*comm, model, image, plan, cpu(comm->rank() % 2));
  return parallel::tiled_forward(model, image, plan, {cpu(1)});
}

// The tile device's peak bytes during one pass (in one process).
std::size_t measured_peak(layers::Module& model, const Tensor& image, const parallel::TilePlan& plan) {
  reset_peak_memory_stats(cpu(1));
  run(nullptr, model, image, plan);
  return memory_stats(cpu(1)).peak_bytes;
}

void tile_count_table(const parallel::Communicator* comm, layers::Module& model, const Settings& settings,
                      Generator& generator) {
  const bool root = comm == nullptr || comm->rank() == 0;
  const Tensor image = uniform({1, settings.channels, settings.size, settings.size}, 0.0f, 1.0f, {}, &generator);
  if (root) {
    fmt::print("\n1. Tile count: a {}x{} image{}\n", settings.size, settings.size,
               comm != nullptr ? fmt::format(", tiles dealt to {} ranks", comm->size()) : "");
    fmt::print("{:>6} {:>10} {:>10} {:>10} {:>12} {:>12} {:>12} {:>12}\n", "grid", "tiles", "ms", "Mpixel/s",
               "time ratio", "read ratio", "peak MiB", "estimate");
  }
  double whole_ms = 0;
  for (const std::int64_t grid : settings.grids) {
    const parallel::TilingOptions options{.grid_rows = grid, .grid_cols = grid};
    const auto plan = comm != nullptr ? parallel::plan_tiles(*comm, model, image.shape(), options)
                                      : parallel::plan_tiles(model, image.shape(), options);
    const bench::Timing timing = bench::time_it([&] { run(comm, model, image, plan); }, settings.reps);
    if (grid == settings.grids.front()) whole_ms = timing.median_ms;
    const std::size_t peak = comm == nullptr ? measured_peak(model, image, plan) : 0;
    if (!root) continue;
    fmt::print("{:>6} {:>10} {:>10.1f} {:>10.2f} {:>12.3f} {:>12.3f} {:>12} {:>12.1f}\n",
               fmt::format("{}x{}", grid, grid), plan.tiles.size(), timing.median_ms,
               static_cast<double>(settings.size * settings.size) / (timing.median_ms * 1e3),
               timing.median_ms / whole_ms, plan.read_ratio(),
               comm == nullptr ? fmt::format("{:.1f}", mib(peak)) : std::string("-"), mib(plan.largest_tile.tensors));
  }
}

void image_size_table(layers::Module& model, const Settings& settings, Generator& generator) {
  fmt::print("\n2. Image size: peak MiB on the device, whole image vs tiles of {}x{} output pixels\n", settings.tile,
             settings.tile);
  fmt::print("{:>8} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "side", "whole", "(estimate)", "tiled", "(estimate)",
             "staging, tile");
  for (const std::int64_t side : settings.sizes) {
    const Tensor image = uniform({1, settings.channels, side, side}, 0.0f, 1.0f, {}, &generator);
    const auto whole = parallel::plan_tiles(model, image.shape(), {});
    const auto tiled =
        parallel::plan_tiles(model, image.shape(), {.tile_rows = settings.tile, .tile_cols = settings.tile});
    fmt::print("{:>8} {:>12.1f} {:>12.1f} {:>12.1f} {:>12.1f} {:>12.1f}\n", side,
               mib(measured_peak(model, image, whole)), mib(whole.whole_image.tensors),
               mib(measured_peak(model, image, tiled)), mib(tiled.largest_tile.tensors),
               mib(tiled.largest_tile.staging));
  }
}

void budget_table(layers::Module& model, const Settings& settings) {
  const auto budget = static_cast<std::size_t>(settings.budget_mib * (1 << 20));
  const parallel::SpatialModel spatial(model);
  // The largest square image whose whole-image pass fits, by bisection.
  std::int64_t fits = 1, too_big = 1 << 16;
  while (too_big - fits > 1) {
    const std::int64_t middle = (fits + too_big) / 2;
    const Shape shape{1, settings.channels, middle, middle};
    (spatial.memory(shape, DeviceType::CPU).total() <= budget ? fits : too_big) = middle;
  }
  const Shape large{1, settings.channels, 4 * fits, 4 * fits};
  const auto plan = parallel::plan_tiles(model, large, {.memory_budget = budget});
  fmt::print("\n3. A budget of {:.0f} MiB a device (tensors and convolution staging buffers)\n", settings.budget_mib);
  fmt::print("   whole image: at most {}x{} pixels\n", fits, fits);
  fmt::print("   tiled: a {}x{} image (16x the pixels) in {}\n", large[2], large[3], plan.describe());
}

}  // namespace

int main(int argc, char** argv) {
  setenv("DDL_CPU_DEVICES", "2", 0);
  CLI::App app{"Tiled inference: time, throughput and memory per device against tile count and image size"};
  Settings settings;
  app.add_option("--model", settings.model, "a fully-convolutional bundled model");
  app.add_option("--size", settings.size, "image side for the tile-count table")->check(CLI::PositiveNumber);
  app.add_option("--channels", settings.channels, "image channels (the model's input channels)")
      ->check(CLI::PositiveNumber);
  app.add_option("--grids", settings.grids, "grids (n means n x n tiles)")->delimiter(',');
  app.add_option("--sizes", settings.sizes, "image sides for the memory table")->delimiter(',');
  app.add_option("--tile", settings.tile, "tile side (output pixels) for the memory table")->check(CLI::PositiveNumber);
  app.add_option("--budget-mib", settings.budget_mib, "memory budget per device for table 3")
      ->check(CLI::PositiveNumber);
  app.add_option("--reps", settings.reps, "timed repetitions (median reported)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  Generator generator(1);
  const auto model = models::make_model(settings.model, &generator);
  std::optional<parallel::Communicator> comm;
  if (parallel::Communicator::launched_by_mpi()) comm = parallel::Communicator::world();
  const bool distributed = comm && comm->size() > 1;
  if (!distributed || comm->rank() == 0) {
    fmt::print("model {}: receptive field {}; {} threads\n", settings.model,
               parallel::receptive_field(*model).describe(), config::num_threads());
  }
  tile_count_table(distributed ? &*comm : nullptr, *model, settings, generator);
  if (!distributed) {
    image_size_table(*model, settings, generator);
    budget_table(*model, settings);
  }
  return 0;
}
