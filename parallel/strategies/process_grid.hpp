// The ranks of a job as a 3-D grid: D data-parallel replicas x P pipeline
// stages x T tensor ranks (Megatron-LM's and DeepSpeed's grid). A rank's
// place in it is (d, s, t), and it talks along three lines:
//
//   tensor    the T ranks of (d, s): they split each layer of the stage and
//             talk inside every split layer's forward and backward;
//   pipeline  the P ranks of (d, t): one per stage, passing activations on
//             and gradients back;
//   data      the D ranks of (s, t): the same slice of the same stage in
//             every replica, averaging its gradients once a step.
//
//   world rank r = t + T (s + P d)
//
// Tensor groups are innermost since they talk most (every layer, in both
// passes), so on a node of T or more ranks they stay inside it; then the
// pipeline (every micro-batch), then data (once a step).
#pragma once

#include <ddl/parallel/communication/communicator.hpp>

namespace ddl::parallel {

struct ProcessGrid {
  Communicator world;     // every rank of the grid
  Communicator pipeline;  // (d, t) by stage
  Communicator data;      // (s, t) by replica
  Communicator tensor;    // (d, s) by tensor rank

  // Collective over `world`. Throws ddl::Error, alike on every rank, unless
  // data_parallel * stages * tensor_ranks == world.size().
  static ProcessGrid split(const Communicator& world, int data_parallel, int stages, int tensor_ranks = 1);
};

}  // namespace ddl::parallel
