// Tiles dealt to MPI ranks, stitched on the root (see distributed_tiles.hpp).
#include <ddl/parallel/inference/distributed_tiles.hpp>

#include <deque>
#include <optional>
#include <string>

#include <fmt/format.h>

#include <ddl/core/check.hpp>
#include <ddl/core/error.hpp>
#include <ddl/parallel/communication/agreement.hpp>

namespace ddl::parallel {
namespace {

// Messages between the root and one rank arrive in the order they were sent
// (MPI's non-overtaking rule), so each direction needs one tag.
constexpr int kTileInputTag = 1201;
constexpr int kTileOutputTag = 1202;

// How many rounds of tiles (one per rank each) the root's inputs run ahead
// of its stitching, and each rank's outputs of the root's receives: enough
// that no rank waits for a message between two tiles, few enough that at
// most two tiles a rank are in flight.
constexpr std::size_t kRoundsInFlight = 2;

int owner(std::size_t tile, int ranks) { return static_cast<int>(tile % static_cast<std::size_t>(ranks)); }

// Every rank's `problem` (empty: none); when any rank has one, every rank
// throws the same error naming the ranks and their reasons.
void throw_if_any_rank_fails(const Communicator& comm, const std::string& problem) {
  const auto problems = gather_problems(comm, problem);
  if (!problems.empty()) throw Error(describe_problems(problems));
}

template <class Step>
std::string problem_of(Step&& step) {
  try {
    step();
  } catch (const std::exception& error) {
    return error.what();
  }
  return {};
}

// What the ranks compare: the plan's geometry and a hash of every tile's
// regions (FNV-1a), so plans that differ only in how they cut disagree too.
// Not the memory estimates, which count each rank's own threads.
std::vector<std::string> plan_signature(const TilePlan& plan) {
  std::uint64_t hash = 14695981039346656037ull;
  for (const Tile& tile : plan.tiles) {
    for (const PixelRange& range : {tile.output.rows, tile.output.cols, tile.input.rows, tile.input.cols}) {
      for (const std::int64_t value : {range.begin, range.end}) {
        hash = (hash ^ static_cast<std::uint64_t>(value)) * 1099511628211ull;
      }
    }
  }
  return {fmt::format("{}x{} tiles (input {} -> output {}, halo {}, tiles hash {:016x})", plan.grid_rows,
                      plan.grid_cols, plan.input, plan.output, plan.halo.describe(), hash)};
}

Shape tile_input_shape(const TilePlan& plan, const Tile& tile) {
  return {plan.input[0], plan.input[1], tile.input.rows.size(), tile.input.cols.size()};
}

Shape tile_output_shape(const TilePlan& plan, const Tile& tile) {
  return {plan.output[0], plan.output[1], tile.output.rows.size(), tile.output.cols.size()};
}

// The root: sends inputs a round ahead, runs its own tiles, stitches.
Tensor stitch_on_root(const Communicator& comm, layers::Module& model, const Tensor& image, const TilePlan& plan,
                      const Device& device, const TileProgress& progress) {
  const int ranks = comm.size(), root = comm.rank();
  const std::size_t tiles = plan.tiles.size(), per_round = static_cast<std::size_t>(ranks);
  const std::size_t rounds = (tiles + per_round - 1) / per_round;
  Tensor output = Tensor::empty(plan.output, {DType::Float32, image.device(), false});
  std::deque<std::vector<TensorMessage>> sent;  // one entry per round
  const auto send_round = [&](std::size_t round) {
    std::vector<TensorMessage> messages;
    for (std::size_t i = round * per_round; i < std::min(tiles, (round + 1) * per_round); ++i) {
      if (owner(i, ranks) != root)
        messages.push_back(comm.isend(crop(image, plan.tiles[i].input), owner(i, ranks), kTileInputTag));
    }
    sent.push_back(std::move(messages));
  };
  for (std::size_t round = 0; round < std::min(rounds, kRoundsInFlight); ++round) send_round(round);
  std::size_t done = 0;
  for (std::size_t round = 0; round < rounds; ++round) {
    for (std::size_t i = round * per_round; i < std::min(tiles, (round + 1) * per_round); ++i) {
      const Tile& tile = plan.tiles[i];
      if (owner(i, ranks) == root) {
        paste_tile(output, tile, run_tile(model, crop(image, tile.input), tile, device));
      } else {
        TensorMessage owned =
            comm.irecv(tile_output_shape(plan, tile), DType::Float32, owner(i, ranks), kTileOutputTag);
        owned.request.wait();
        paste_tile(output, tile, owned.host);
      }
      if (progress) progress(tile, ++done, tiles);
    }
    sent.pop_front();  // every input of this round has been used, so these sends are done
    if (round + kRoundsInFlight < rounds) send_round(round + kRoundsInFlight);
  }
  return output;
}

// Any other rank: receives each of its tiles' inputs, sends the owned outputs.
void serve_tiles(const Communicator& comm, layers::Module& model, const TilePlan& plan, const Device& device,
                 int root) {
  std::deque<TensorMessage> in_flight;
  for (const std::size_t i : tiles_of_rank(plan, comm.rank(), comm.size())) {
    const Tile& tile = plan.tiles[i];
    const Tensor tile_input = Tensor::empty(tile_input_shape(plan, tile), {DType::Float32, cpu(), false});
    comm.recv(tile_input, root, kTileInputTag);
    in_flight.push_back(comm.isend(run_tile(model, tile_input, tile, device), root, kTileOutputTag));
    if (in_flight.size() > kRoundsInFlight) in_flight.pop_front();  // waits for the oldest
  }
}

}  // namespace

TilePlan plan_tiles(const Communicator& comm, const layers::Module& model, const Shape& input,
                    const TilingOptions& options, DeviceType device) {
  std::optional<TilePlan> plan;
  throw_if_any_rank_fails(comm, problem_of([&] { plan = plan_tiles(model, input, options, device); }));
  if (const auto disagreement = first_disagreement(comm, plan_signature(*plan))) {
    std::string per_rank;
    for (std::size_t rank = 0; rank < disagreement->per_rank.size(); ++rank) {
      per_rank += fmt::format("{}rank {}: {}", rank == 0 ? "" : "; ", rank, disagreement->per_rank[rank]);
    }
    throw Error(
        fmt::format("tiled inference: the ranks planned different tiles (other options, model or input "
                    "shape): {}",
                    per_rank));
  }
  return *plan;
}

std::vector<std::size_t> tiles_of_rank(const TilePlan& plan, int rank, int ranks) {
  DDL_CHECK(ranks > 0 && rank >= 0 && rank < ranks, "tiles_of_rank: rank {} of {} ranks", rank, ranks);
  std::vector<std::size_t> tiles;
  for (std::size_t i = static_cast<std::size_t>(rank); i < plan.tiles.size(); i += static_cast<std::size_t>(ranks)) {
    tiles.push_back(i);
  }
  return tiles;
}

Tensor tiled_forward(const Communicator& comm, layers::Module& model, const Tensor& input, const TilePlan& plan,
                     const Device& device, int root, const TileProgress& progress) {
  const int rank = comm.rank();
  // Every rank learns whether all can start, so that a bad input on the root
  // or a missing device on another stops every rank, none waiting for tiles.
  throw_if_any_rank_fails(comm, problem_of([&] {
                            DDL_CHECK(root >= 0 && root < comm.size(), "tiled_forward: root {} is not a rank of {}",
                                      root, comm.size());
                            check_device_exists(device);
                            if (rank == root) plan.check_input(input, "tiled_forward");
                          }));
  InferenceScope scope(model, device);
  try {
    if (rank == root) {
      return stitch_on_root(comm, model, input.device().is_cpu() ? input : input.to(cpu()), plan, device, progress);
    }
    serve_tiles(comm, model, plan, device, root);
    return {};
  } catch (const std::exception& error) {
    comm.abort(fmt::format("tiled inference on {}: {}", device.str(), error.what()));
  }
}

}  // namespace ddl::parallel
