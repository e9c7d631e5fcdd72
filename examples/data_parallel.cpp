// Data parallelism as an embedder writes it: the bundled CNN on a slice of
// Fashion-MNIST over every rank mpiexec starts, the run assembled by
// parallel::make_setup (the call ddl-train makes). One process trains alone.
//   mpiexec -n 2 build/examples/data_parallel [allreduce: ring, rhd, tree, naive, shm, builtin]
#include <exception>
#include <iostream>

#include <ddl/ddl.hpp>

using namespace ddl;

void train_and_report(int argc, char** argv) {
  const auto ranks = parallel::job_ranks();
  parallel::ParallelConfig config{.kind = ranks ? parallel::StrategyKind::data : parallel::StrategyKind::none};
  if (argc > 1) config.data.algorithm = parallel::parse_allreduce(argv[1]);
  Generator weights(1);
  const std::int64_t batch = 128;
  const auto setup = parallel::make_setup(config, ranks, models::model_layers("mnist_cnn"),
                                          {.sample_shape = Shape({1, 28, 28}), .batch = batch, .weights = &weights});
  auto optimizer = std::make_shared<optim::Adadelta>(setup.model->parameters(), optim::AdadeltaOptions{});
  optim::Trainer trainer(setup.model, layers::cross_entropy, optimizer,
                         {.metrics = {optim::Metric::accuracy}, .verbosity = optim::Verbosity::quiet,
                          .strategy = setup.strategy});
  models::DataLoader train(models::load_fashion_mnist(models::kFashionMnistDir, true, 4096),
                           {.batch_size = batch / setup.data_ranks, .shuffle = true, .seed = 1, .device = setup.device});
  models::DataLoader test(models::load_fashion_mnist(models::kFashionMnistDir, false, 1000),
                          {.batch_size = 500, .device = setup.device});
  trainer.fit(train, {.epochs = 2});
  const optim::Logs logs = trainer.evaluate(test);   // every rank: the metrics are summed over them
  const std::string report = setup.strategy->report(*setup.model, *optimizer);
  if (setup.strategy->is_root()) {
    std::cout << setup.strategy->describe(batch / setup.data_ranks) << "\ntest accuracy " << logs.at("accuracy")
              << '\n' << report;
  }
}

int main(int argc, char** argv) {
  try {
    train_and_report(argc, argv);
    return 0;
  } catch (const std::exception& error) {  // a configuration the job cannot run, or a failure while training
    std::cerr << "data_parallel: error: " << error.what() << '\n';
    return 1;
  }
}
