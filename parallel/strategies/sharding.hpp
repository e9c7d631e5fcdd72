// Sharded data parallelism (ZeRO: Rajbhandari et al. 2020; PyTorch FSDP;
// DeepSpeed): each of the N ranks of a data-parallel group keeps 1/N of
// the training state instead of all of it, and the whole exists only
// briefly. The unit of sharding is the gradient bucket (gradient_buckets.hpp):
// rank r owns chunk r of every bucket (chunk_range, the first n mod N
// chunks one element longer), the chunk a reduce-scatter leaves summed on
// rank r.
//
//   stage           a rank keeps                  after backward
//   none            everything (DataParallel)     allreduce
//   optimizer (1)   the optimizer state of its    reduce-scatter, update
//                   chunks                        the chunks, allgather the
//                                                 parameters
//   gradients (2)   and of the gradients only its as stage 1; each bucket's
//                   chunks (a bucket exists from  gradients freed as soon
//                   the backward that fills it    as it is reduced
//                   until it is reduced)
//   parameters (3)  and of the parameters only    as stage 2; no allgather
//                   its chunks: a bucket's are    after the update: a
//                   gathered just before the      bucket's parameters are
//                   first layer that uses them    gathered before its
//                   and released after the last,  layers' forward and
//                   in forward and in backward    again before their
//                                                 backward (FSDP)
//
// Per rank, with Ψ parameters, N ranks and K bytes of optimizer state per
// parameter (float32: SGD with momentum 4, Adagrad 4, Adadelta and Adam 8),
// the ZeRO paper's formula in float32 bytes:
//
//   none       (4 + 4 + K) Ψ
//   optimizer  (4 + 4) Ψ + K Ψ / N
//   gradients  4 Ψ + (4 + K) Ψ / N
//   parameters (4 + 4 + K) Ψ / N, plus the buckets gathered at the moment
//
// Exactness: a ring allreduce is its reduce-scatter followed by its
// allgather, and every optimizer's update is elementwise, so updating each
// chunk where it was summed and gathering the results performs the same
// additions and multiplications as DataParallel's allreduce and update: the
// weights are the same bits (rhd too; MPI's builtin may sum in another
// order than its own allreduce, so there it agrees to float32 rounding).
//
// The parameters of each bucket are laid out in one flat buffer of the
// bucket's layout (Tensor::move_into; PyTorch FSDP's flat parameter), so
// the allgather fills every other rank's chunk in place, and the optimizer
// steps views of this rank's chunk (Optimizer::keep_slices). Under stage
// 3 the optimizer steps a persistent copy of the chunk instead, and a
// released bucket's flat buffer keeps its addresses but gives its memory
// back (ReservedMemory: the host's pages, or a GPU's physical memory under
// CUDA's virtual memory management): the tensors forward saved for
// backward still point into it, and read the gathered values again once
// backward has gathered the bucket anew. Checkpoints
// hold the single-process format: the optimizer's state is gathered from
// its chunks when saved and cut into this rank's slices when loaded, so a
// run resumes at any rank count and under any strategy.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ddl/core/reserved_memory.hpp>
#include <ddl/core/tensor.hpp>
#include <ddl/optim/engine/strategy.hpp>
#include <ddl/optim/optimizer.hpp>
#include <ddl/parallel/collectives/collectives.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/communication/nccl_communicator.hpp>
#include <ddl/parallel/strategies/bucket_gatherer.hpp>
#include <ddl/parallel/strategies/gradient_buckets.hpp>

namespace ddl::parallel {

enum class Sharding { none, optimizer, gradients, parameters };

// "none", "optimizer", "gradients", "parameters", and back.
std::string_view sharding_name(Sharding sharding);
Sharding parse_sharding(std::string_view name);
const std::vector<Sharding>& all_shardings();

// Bytes of training state one rank holds, by kind.
struct StateBytes {
  std::int64_t parameters = 0;
  std::int64_t gradients = 0;
  std::int64_t optimizer = 0;
  std::int64_t total() const { return parameters + gradients + optimizer; }
};

// What the formula above says a rank holds: `parameters` float32 values,
// `optimizer_buffers` float32 state values per parameter, N ranks.
StateBytes zero_formula(Sharding sharding, std::int64_t parameters, std::int64_t optimizer_buffers, int ranks);

// One rank's share of the buckets' state, for DataParallel: the parameters
// laid out flat, this rank's slices of them stepped by the optimizer, and
// (stage 2) the reduced gradients of its chunks.
class ShardedState {
 public:
  // Moves each bucket's parameters into a flat buffer of the bucket's
  // layout, gathered with `algorithm` over a duplicate of `comm` (a
  // collective); under stages 2 and 3 the buckets come without buffers
  // (make_buckets' `allocate`). The parameters lie on the CPU or all on one
  // GPU, where the flat buffers, the chunks of gradients and the
  // optimizer's slices stay too, gathered over NCCL with `on_gpu` (the
  // gradients are reduced there) or else through host memory (ddl::Error
  // for a model over several devices). With `prefetch`
  // (stage 3), gathers run on a thread of their own, the next bucket's
  // while the current one's layers compute (bucket_gatherer.hpp).
  ShardedState(Sharding sharding, std::vector<GradientBucket>& buckets, Communicator comm, AllreduceAlgorithm algorithm,
               bool prefetch, bool on_gpu);

  Sharding sharding() const { return sharding_; }
  bool shards_gradients() const { return sharding_ == Sharding::gradients || shards_parameters(); }
  bool shards_parameters() const { return sharding_ == Sharding::parameters; }
  // This rank's chunk of bucket b: where its reduce-scatter leaves the average.
  ChunkRange chunk(std::size_t b) const;

  // Cuts `optimizer` down to this rank's chunks (once; its parameters must
  // be the model's, any order). ddl::Error naming a parameter that is not.
  void slice(optim::Optimizer& optimizer);
  bool sliced() const { return sliced_; }

  // Stage 2: bucket b's buffer, made when its first gradient of the step's
  // last backward arrives (on the training thread), and the parameters that
  // have no gradient yet pointed at their views in it; so a bucket exists
  // only from then until it is reduced. A no-op otherwise.
  void ensure_buffer(std::size_t b);
  // After bucket b's reduce-scatter: stages 2 and 3 keep the chunk and
  // free the bucket. Called on whichever thread reduced it; the training
  // thread dropped the parameters' .grad (views of the bucket) when it
  // handed the bucket on, since only this rank's chunk becomes an average.
  void reduced(std::size_t b);
  // Stage 2: the most bucket buffers that have existed at once.
  int peak_live_buckets() const;

  // The optimizer's step on this rank's slices, then (stages 1 and 2)
  // every bucket's parameters allgathered.
  void step(optim::Optimizer& optimizer);

  // Stage 3. gather: bucket b's parameters whole (a collective; nothing if
  // they are). prefetch: asked for ahead of their use. release: their
  // memory given back. release_all: every bucket's. reshard: after the
  // parameters were written whole (the first prepare, a broadcast, a
  // checkpoint load), this rank's chunks kept and every bucket released.
  // gathered: whether bucket b is whole now.
  void gather(std::size_t b);
  void prefetch(std::size_t b);
  // Stage 3, before the parameters are written from outside (a checkpoint
  // load): every bucket gathered, and at the next gather this rank's
  // chunks taken from what was written (reshard) instead of overwritten.
  void expect_written_parameters();
  void release(std::size_t b);
  void release_all();
  void reshard();
  bool gathered(std::size_t b) const;
  // The bucket that holds `parameter`, if any.
  std::optional<std::size_t> bucket_of(const Tensor& parameter) const;
  // The most buckets, and bytes of parameters, gathered at once so far;
  // gathers whose bucket a prefetch had asked for.
  int peak_gathered_groups() const;
  std::int64_t peak_gathered_bytes() const;
  std::int64_t prefetch_hits() const;
  // Stage 3, for a checkpoint: the model's parameters in `model` (named
  // tensors of Module::state_dict) replaced by gathered copies, one bucket
  // at a time (a collective).
  void gather_model_state(std::vector<std::pair<std::string, Tensor>>& model);

  // The optimizer's state of this rank's slices as a single process names
  // it (Optimizer::state() of the unsliced optimizer), gathered over the
  // ranks; a collective. Every rank gets the whole.
  void gather_optimizer_state(std::vector<std::pair<std::string, Tensor>>& state) const;
  // The inverse: this rank's slices of a single process's state, in place.
  void select_optimizer_state(std::vector<std::pair<std::string, Tensor>>& state) const;

  // The parameter and gradient bytes this rank holds between steps.
  StateBytes resident() const;
  // The communicator the parameters are gathered on (a duplicate of the
  // one the gradients are reduced on), for its byte count.
  const Communicator& gather_communicator() const { return comm_; }

 private:
  struct Slice {
    std::size_t bucket = 0, entry = 0;
    std::size_t parameter = 0;  // its index in the unsliced optimizer
    optim::ElementRange range;  // of the parameter's elements
    Tensor values;              // the optimizer's slice
    Tensor gradient;            // where its reduced gradient lies
  };

  // Where a slice begins in its bucket.
  std::int64_t at(const Slice& slice) const;
  // Bucket b's flat parameters allgathered in place; stage 3 first copies
  // this rank's chunk in.
  void allgather_flat(std::size_t b) const;
  void gather_now(std::size_t b);

  Sharding sharding_;
  int rank_, ranks_;
  Communicator comm_;
  std::optional<NcclCommunicator> nccl_;  // comm_'s ranks over NCCL, when the parameters are gathered on the GPU
  AllreduceAlgorithm algorithm_;
  Device device_;  // the parameters'
  std::vector<GradientBucket>& buckets_;
  std::vector<Tensor> flat_parameters_;   // per bucket
  std::vector<Tensor> chunk_gradients_;   // per bucket, stages 2 and 3
  std::vector<Tensor> shard_parameters_;  // per bucket, stage 3: this rank's chunk
  std::vector<std::shared_ptr<ReservedMemory>> reserved_;  // per bucket, stage 3: where its flat buffer lies
  // Stages 2 and 3's gradient buckets in existence and the most at once,
  // under `live_mutex_` (either thread frees them).
  mutable std::mutex live_mutex_;
  int live_buckets_ = 0, peak_live_buckets_ = 0;
  std::unique_ptr<BucketGatherer> gatherer_;  // stage 3's buckets of parameters
  bool written_ = false;                      // see expect_written_parameters
  // Where each parameter lies (bucket, entry), by the identity of its tensor:
  // what slice() and every stage-3 forward's bucket_of() look up.
  std::map<const TensorImpl*, std::pair<std::size_t, std::size_t>> where_;
  std::vector<Slice> slices_;
  std::vector<std::string> buffer_names_;
  // Per bucket entry: its parameter's index in the unsliced optimizer, if it has one.
  std::vector<std::vector<std::optional<std::size_t>>> optimizer_index_;
  std::size_t optimizer_parameters_ = 0;
  bool sliced_ = false;
};

}  // namespace ddl::parallel
