// Weights packed once for many products: while a PackedWeights scope is
// open on a thread, a CPU product x·W or x·Wᵀ of that thread whose right
// operand is one of its weights reads a copy of W that the GEMM library
// laid out for its kernel (oneDNN's blocked layout) the first time, instead
// of the library packing W anew in every call.
//
// Why: a GEMM kernel reads its operands in blocks sized to the caches and
// registers, so a library first copies ("packs") them into that order. For
// a product of a few rows by a large weight, as a pipeline's micro-batches
// make (wide_mlp: 8 rows by a 4096 x 4096 weight), packing the 64 MiB
// weight costs as much as the multiplication itself, and a batch cut into
// M micro-batches packs each weight 2M times (forward and input gradient).
// A weight does not change between two optimizer steps, so one copy per
// weight and orientation serves every micro-batch of the batch.
//
//   {
//     const PackedWeights packed(model.parameters());
//     for (int m = 0; m < M; ++m) forward_and_backward(micro_batch[m]);
//   }  // copies freed; the optimizer may change the weights again
//
// A weight must not change while a scope holding it is open (the copies
// would be stale): open one per step, between optimizer updates. Scopes
// nest (the innermost holding a weight serves it) and close in reverse
// order. A copy costs the weight's bytes, for each orientation used: a
// Dense layer's forward and input gradient hold two copies of its weight
// while the scope is open. The copies are the scope's own memory, not
// ddl's allocator's (they would read as activations in a step's memory
// peak): bytes() says what they hold. When a scope closes, its thread keeps
// its copies' memory, and how each was packed, for the next scope (a
// pipeline's next batch packs the same weights into buffers of the same
// sizes: fresh ones would be page-faulted and zeroed by the kernel, 64 MiB
// each, every step; pack_ahead() packs them all before they are needed),
// and frees what the scope before it left.
//
// Where it applies: float32 CPU products of an un-transposed left operand,
// under config::CpuPrecision::Float32, on a machine where oneDNN's matmul
// wants a packed layout for the shape (AVX-512: its brgemm kernels; on AVX2,
// oneDNN 2.6 reads plain weights, and Eigen's product runs as without a
// scope). The result is the same product in another summation order: it
// differs from the unpacked one by float32 rounding, and is deterministic.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ddl/core/tensor.hpp>

namespace ddl {

class PackedWeights {
 public:
  // `weights`: the tensors that may be packed (a model's parameters; those
  // not 2-D float32 on the CPU never are).
  explicit PackedWeights(const std::vector<Tensor>& weights);
  ~PackedWeights();
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;

  // The packed copies made so far, and the bytes they hold.
  std::size_t copies() const { return copies_.size(); }
  std::size_t bytes() const;

  // The innermost scope open on this thread that holds the weight whose
  // data is `data`, or nullptr. For the CPU backend's GEMM.
  static PackedWeights* holding(const float* data);

  // Packs now the copies the scope closed last on this thread made of
  // weights this one holds, into the memory that scope left: the copies a
  // product would otherwise make when it first needs them. For a thread
  // about to wait (a pipeline stage waiting for a message), so that the
  // packing fills the wait instead of delaying a product. `done`, when
  // given, is asked before each copy whether the wait is over: then the
  // rest stay for a later pack_ahead or for the products that first need
  // them, so packing never makes a wait longer than one copy.
  void pack_ahead(const std::function<bool()>& done = {});
  // Whether pack_ahead has copies left to pack.
  bool ahead() const;

  // The copy of the weight at `data`, transposed or not, in the layout
  // named `layout`, of `bytes` bytes: made by `pack` (which writes it into
  // the memory given; it must stay valid for later scopes, which pack the
  // weight's new values with it) the first time it is asked for. For the
  // CPU backend.
  const void* packed(const float* data, bool transposed, const std::string& layout, std::size_t bytes,
                     std::function<void(void*)> pack);

 private:
  using Memory = std::unique_ptr<void, void (*)(void*)>;
  struct Copy {
    const float* weight;
    Shape shape;  // the weight's
    bool transposed;
    std::string layout;
    Memory memory;
    std::size_t bytes;
    std::function<void(void*)> pack;
  };
  const Tensor* weight_at(const float* data) const;
  // Whether `copy`, of the scope closed last, is of a weight this one holds.
  bool holds(const Copy& copy) const;

  static thread_local std::vector<Copy> last_scope_;
  std::vector<Tensor> weights_;
  std::vector<Copy> copies_;
  PackedWeights* enclosing_;
};

}  // namespace ddl
