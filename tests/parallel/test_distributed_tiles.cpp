// Tiled inference over 2-4 ranks (parallel/inference/distributed_tiles.hpp): the
// root's stitched output equals the whole image's, for grids even and
// uneven and more or fewer tiles than ranks; a rank can run and keep its own
// tiles; a plan or input that cannot work fails on every rank with the same
// message, before any tile runs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include <ddl/ddl.hpp>
#include <ddl/parallel/inference/distributed_tiles.hpp>

#include "parallel/single_process/tiling_models.hpp"

namespace ddl::test {
namespace {

using parallel::Communicator;
using parallel::TilingOptions;

// Each rank on a logical device of its own where there are enough.
Device rank_device(const Communicator& comm) { return cpu(comm.rank() % std::max(device_count(DeviceType::CPU), 1)); }

// The same model and image on every rank, from the same seed.
struct Problem {
  std::shared_ptr<layers::Sequential> model;
  Tensor image;
};
Problem make_problem(ModelMaker make, const Shape& shape) {
  Generator generator(21);
  Problem problem{make(shape[1], generator), uniform(shape, -1.0f, 1.0f, {}, &generator)};
  return problem;
}

// The CPU convolution rounds a pixel differently on a tile (see
// tests/parallel/single_process/test_tiled_inference.cpp): 1e-6 of the
// output's largest value, the bound.
void check_close(const Tensor& tiled, const Tensor& whole) {
  REQUIRE(tiled.shape() == whole.shape());
  CHECK(relative_difference(tiled, whole) <= 1e-6);
}

TEST_CASE("distributed tiled_forward: the root's stitched output equals the whole image") {
  const Communicator comm = Communicator::world();
  for (ModelMaker make : {&dilated_model, &strided_model, &residual_model, &encoder_decoder_model}) {
    const Problem problem = make_problem(make, {2, 2, 45, 39});
    const Tensor whole = whole_image(*problem.model, problem.image);
    problem.model->train();
    for (const TilingOptions& options :
         {TilingOptions{.grid_rows = 2, .grid_cols = 2}, TilingOptions{.grid_rows = 3, .grid_cols = 1},
          TilingOptions{.grid_rows = 1, .grid_cols = 5}, TilingOptions{}}) {
      const auto plan = parallel::plan_tiles(comm, *problem.model, problem.image.shape(), options);
      CAPTURE(plan.describe());
      for (const int root : {0, comm.size() - 1}) {
        const Tensor input = comm.rank() == root ? problem.image : Tensor();
        std::size_t stitched = 0;
        const Tensor output =
            parallel::tiled_forward(comm, *problem.model, input, plan, rank_device(comm), root,
                                    [&](const parallel::Tile&, std::size_t done, std::size_t) { stitched = done; });
        if (comm.rank() == root) {
          CHECK(stitched == plan.tiles.size());
          check_close(output, whole);
        } else {
          CHECK(!output.defined());
        }
      }
      CHECK(problem.model->is_training());  // put back as it was
    }
  }
}

TEST_CASE("distributed tiles: each rank runs its own share, and together they cover the output") {
  const Communicator comm = Communicator::world();
  const Problem problem = make_problem(&dilated_model, {1, 2, 30, 26});
  const Tensor whole = whole_image(*problem.model, problem.image);
  const auto plan = parallel::plan_tiles(comm, *problem.model, problem.image.shape(), {.tile_rows = 7, .tile_cols = 9});
  // Each rank writes its own tiles into a zeroed output of its own; the sum
  // over ranks is the whole output, since every pixel has one owner.
  Tensor mine = zeros(plan.output);
  {
    parallel::InferenceScope scope(*problem.model, rank_device(comm));
    for (const std::size_t i : parallel::tiles_of_rank(plan, comm.rank(), comm.size())) {
      const auto& tile = plan.tiles[i];
      parallel::paste_tile(
          mine, tile,
          parallel::run_tile(*problem.model, parallel::crop(problem.image, tile.input), tile, rank_device(comm)));
    }
  }
  const auto values = mine.to_vector<float>();
  std::vector<double> sum(values.begin(), values.end());
  comm.sum_doubles(sum);
  check_close(from_vector(std::vector<float>(sum.begin(), sum.end()), plan.output), whole);
}

// The message `call` throws, or "" when it returns.
template <class Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return {};
}

// Every rank's `message` is rank 0's.
bool same_on_every_rank(const Communicator& comm, const std::string& message) {
  return !parallel::first_disagreement(comm, {message}).has_value();
}

TEST_CASE("distributed tiles: what cannot work fails on every rank with the same message") {
  const Communicator comm = Communicator::world();
  const Problem problem = make_problem(&dilated_model, {1, 1, 40, 30});
  SUBCASE("a halo too small") {
    const std::string message = error_of(
        [&] { parallel::plan_tiles(comm, *problem.model, problem.image.shape(), {.grid_rows = 2, .halo = 6}); });
    CHECK(message.find("tiled inference: a halo of 6 pixels is too small") != std::string::npos);
    CHECK(same_on_every_rank(comm, message));
  }
  SUBCASE("one rank asking for another grid") {
    const TilingOptions options{.grid_rows = comm.rank() == 1 ? 3 : 2};
    const std::string message =
        error_of([&] { parallel::plan_tiles(comm, *problem.model, problem.image.shape(), options); });
    CHECK(message.find("the ranks planned different tiles") != std::string::npos);
    CHECK(message.find("rank 1: 3x1 tiles") != std::string::npos);
    CHECK(same_on_every_rank(comm, message));
  }
  SUBCASE("an input of the wrong shape on the root") {
    const auto plan = parallel::plan_tiles(comm, *problem.model, problem.image.shape(), {.grid_rows = 2});
    const Tensor wrong = comm.rank() == 0 ? zeros({1, 1, 40, 31}) : Tensor();
    const std::string message =
        error_of([&] { parallel::tiled_forward(comm, *problem.model, wrong, plan, rank_device(comm)); });
    CHECK(message.find("rank 0: tiled_forward: the input has shape [1, 1, 40, 31], but the plan was made for "
                       "[1, 1, 40, 30]") != std::string::npos);
    CHECK(same_on_every_rank(comm, message));
  }
}

}  // namespace
}  // namespace ddl::test
