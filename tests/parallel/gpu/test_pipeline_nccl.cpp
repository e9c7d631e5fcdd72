// The pipeline's stages on GPUs of their own exchanging activations and
// gradients over NCCL, under mpiexec with one GPU per rank (skipped, exit 77,
// elsewhere: mpi_main.cpp). The transport must not change a single value:
// NCCL and MPI through host memory train the same weights bit for bit.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include "parallel/training_fixtures.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using namespace ddl::parallel;

namespace {

std::vector<float> train_pipeline(const Communicator& world, bool nccl, bool* used_nccl) {
  layers::LayerList list;
  list.emplace<layers::Flatten>()
      .emplace_init<layers::Dense>(144, 32, true)
      .emplace<layers::ReLU>()
      .emplace_init<layers::Dense>(32, 16, true)
      .emplace<layers::Tanh>()
      .emplace_init<layers::Dense>(16, 10, true);
  auto pipeline = std::make_shared<Pipeline>(world, balanced_split(std::vector<double>(list.size(), 1.0), world.size()),
                                             PipelineOptions{.micro_batches = 3, .nccl = nccl});
  const Device gpu = pipeline->device(DeviceType::CUDA);
  Generator generator(3);
  auto model = build_stage(list, *pipeline, &generator);
  model->to(gpu);
  optim::Trainer trainer(model, layers::cross_entropy,
                         std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.05, .momentum = 0.9}),
                         test::quiet_options({}, pipeline));
  models::DataLoader data(test::random_images(), {.batch_size = test::kGlobalBatch, .shuffle = true, .seed = 3,
                                                  .device = gpu});
  trainer.fit(data, {.epochs = 2});
  *used_nccl = pipeline->over_nccl();
  return test::flat_parameters(*model);
}

}  // namespace

TEST_CASE("Pipeline: stages on GPUs of their own train over NCCL exactly as through host memory") {
  const Communicator world = Communicator::world();
  bool nccl_used = false, host_used = true;
  const std::vector<float> over_nccl = train_pipeline(world, true, &nccl_used);
  const std::vector<float> over_host = train_pipeline(world, false, &host_used);
  CHECK(nccl_used == (world.size() > 1));  // one stage has no neighbour to talk to
  CHECK_FALSE(host_used);
  CHECK(over_nccl == over_host);
}
