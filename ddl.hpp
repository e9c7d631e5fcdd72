// The whole public API of ddl in one include: #include <ddl/ddl.hpp>.
#pragma once

#include <ddl/build_config.hpp>

// core/: tensors, devices, autograd, ops
#include <ddl/core/allocator.hpp>
#include <ddl/core/autograd.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/device.hpp>
#include <ddl/core/dtype.hpp>
#include <ddl/core/error.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/core/random.hpp>
#include <ddl/core/shape.hpp>
#include <ddl/core/tensor.hpp>

// layers/: modules, layers, losses, initialisers
#include <ddl/layers/activation.hpp>
#include <ddl/layers/batchnorm2d.hpp>
#include <ddl/layers/conv2d.hpp>
#include <ddl/layers/dense.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/layers/init.hpp>
#include <ddl/layers/layer_list.hpp>
#include <ddl/layers/loss.hpp>
#include <ddl/layers/module.hpp>
#include <ddl/layers/pool2d.hpp>
#include <ddl/layers/residual.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/layers/summary.hpp>
#include <ddl/layers/upsample2d.hpp>

// optim/: optimizers, learning-rate schedules and the training engine
#include <ddl/optim/adadelta.hpp>
#include <ddl/optim/adagrad.hpp>
#include <ddl/optim/adam.hpp>
#include <ddl/optim/engine/batch_source.hpp>
#include <ddl/optim/engine/callback.hpp>
#include <ddl/optim/engine/callbacks.hpp>
#include <ddl/optim/engine/checkpoint.hpp>
#include <ddl/optim/engine/loggers.hpp>
#include <ddl/optim/engine/logs.hpp>
#include <ddl/optim/engine/memory_monitor.hpp>
#include <ddl/optim/engine/metrics.hpp>
#include <ddl/optim/engine/progress.hpp>
#include <ddl/optim/engine/strategy.hpp>
#include <ddl/optim/engine/trainer.hpp>
#include <ddl/optim/optimizer.hpp>
#include <ddl/optim/schedule.hpp>
#include <ddl/optim/sgd.hpp>

// parallel/: the setup that assembles a run's parallel configuration;
// communicators and collectives; the strategies across ranks (data
// parallelism, parameter server, pipelines, tensor parallelism) and inside
// one process (layer placement); tiled inference. Built in every build: without MPI a
// Communicator cannot be made, and says why.
#include <ddl/parallel/collectives/collectives.hpp>
#include <ddl/parallel/communication/agreement.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/communication/nccl_communicator.hpp>
#include <ddl/parallel/communication/timeline_gather.hpp>
#include <ddl/parallel/inference/distributed_tiles.hpp>
#include <ddl/parallel/inference/tiled_inference.hpp>
#include <ddl/parallel/planning/cost_model.hpp>
#include <ddl/parallel/planning/placement.hpp>
#include <ddl/parallel/planning/receptive_field.hpp>
#include <ddl/parallel/planning/tile_plan.hpp>
#include <ddl/parallel/setup.hpp>
#include <ddl/parallel/strategies/data_parallel.hpp>
#include <ddl/parallel/strategies/gradient_buckets.hpp>
#include <ddl/parallel/strategies/initial_state.hpp>
#include <ddl/parallel/strategies/layer_placement.hpp>
#include <ddl/parallel/strategies/parameter_server.hpp>
#include <ddl/parallel/strategies/pipeline/pipeline.hpp>
#include <ddl/parallel/strategies/pipeline/pipeline_report.hpp>
#include <ddl/parallel/strategies/pipeline/pipeline_schedule.hpp>
#include <ddl/parallel/strategies/pipeline/stage_split.hpp>
#include <ddl/parallel/strategies/tensor_parallel.hpp>
#include <ddl/parallel/tensor/conjugate_ops.hpp>
#include <ddl/parallel/tensor/parallel_conv2d.hpp>
#include <ddl/parallel/tensor/parallel_dense.hpp>
#include <ddl/parallel/tensor/sharded_batchnorm2d.hpp>
#include <ddl/parallel/tensor/sharded_dropout.hpp>
#include <ddl/parallel/tensor/tensor_plan.hpp>
#include <ddl/parallel/tensor/tensor_state.hpp>

// models/: bundled architectures, data sets and the DataLoader
#include <ddl/models/data/csv.hpp>
#include <ddl/models/data/data_loader.hpp>
#include <ddl/models/data/dataset.hpp>
#include <ddl/models/data/fashion_mnist.hpp>
#include <ddl/models/data/idx.hpp>
#include <ddl/models/data/normalization.hpp>
#include <ddl/models/data/png.hpp>
#include <ddl/models/data/sampler.hpp>
#include <ddl/models/data/stress_strain.hpp>
#include <ddl/models/data/synthetic_shapes.hpp>
#include <ddl/models/zoo.hpp>
