// A pipeline as an embedder writes it: the bundled CNN cut into one stage
// per rank (balanced by parameter bytes), each batch into 4 micro-batches
// under 1F1B, on a slice of Fashion-MNIST; the run assembled by
// parallel::make_setup (the call ddl-train makes). Each rank builds and
// holds its own stage alone; rank 0 reports.
//   mpiexec -n 2 build/examples/pipeline
#include <exception>
#include <iostream>

#include <ddl/ddl.hpp>

using namespace ddl;

void train_and_report() {
  const auto ranks = parallel::job_ranks();  // none: this process alone, a pipeline of one stage
  const parallel::ParallelConfig config{.kind = parallel::StrategyKind::pipeline,
                                        .pipeline = {.micro_batches = 4},
                                        .layout = {.balance = parallel::StageBalance::Parameters}};
  Generator weights(1);
  const std::int64_t batch = 128;
  const auto setup = parallel::make_setup(config, ranks, models::model_layers("mnist_cnn"),
                                          {.sample_shape = Shape({1, 28, 28}), .batch = batch, .weights = &weights});
  auto optimizer = std::make_shared<optim::Adadelta>(setup.model->parameters(), optim::AdadeltaOptions{});
  optim::Trainer trainer(setup.model, layers::cross_entropy, optimizer,
                         {.metrics = {optim::Metric::accuracy}, .verbosity = optim::Verbosity::quiet,
                          .strategy = setup.strategy});
  // Every stage reads every batch: the first its inputs, the last its targets.
  models::DataLoader train(models::load_fashion_mnist(models::kFashionMnistDir, true, 4096),
                           {.batch_size = batch, .shuffle = true, .seed = 1, .device = setup.device});
  models::DataLoader test(models::load_fashion_mnist(models::kFashionMnistDir, false, 1000),
                          {.batch_size = 500, .device = setup.device});
  trainer.fit(train, {.epochs = 2});
  const optim::Logs logs = trainer.evaluate(test);  // rank 0 holds the metrics
  const std::string report = setup.strategy->report(*setup.model, *optimizer);  // every rank: gathered
  if (setup.strategy->is_root()) std::cout << setup.stages << "\ntest accuracy " << logs.at("accuracy") << '\n' << report;
}

int main() {
  try {
    train_and_report();
    return 0;
  } catch (const std::exception& error) {  // a configuration the job cannot run, or a failure while training
    std::cerr << "pipeline: error: " << error.what() << '\n';
    return 1;
  }
}
