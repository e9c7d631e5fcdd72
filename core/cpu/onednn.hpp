// Internal: what ddl's CPU kernels share to run oneDNN primitives (Intel's
// Deep Neural Network Library, Debian's libdnnl 2.6: to the CPU what cuDNN
// is to the GPU). oneDNN's fastest kernels read and write blocked layouts
// (nChw16c: channels in blocks of 16, innermost); ddl's tensors are NCHW,
// so a call reorders into the primitive's layout through buffers each
// thread keeps between calls (a fresh multi-MiB buffer per call would
// page-fault on first touch, as the caching allocator explains), unless
// the tensor is in that layout already: a result may stay in it
// (Layout, Result; core/memory_form.hpp).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <ddl/core/memory_form.hpp>
#include <ddl/core/tensor.hpp>

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace ddl::cpu_backend::onednn {

using Arguments = std::unordered_map<int, dnnl::memory>;

// The one CPU engine every primitive runs on.
const dnnl::engine& engine();

// Runs `primitive` on ddl's thread count (config::num_threads) and waits
// for it; a oneDNN failure becomes a ddl::Error naming `what`.
void execute(std::string_view what, const dnnl::primitive& primitive, const Arguments& arguments);

// While one lives on a thread, oneDNN sees one thread there: a primitive
// made then plans no split of its work across threads (for some shapes a
// matmul splits the sum over k, and the split follows the thread count),
// and a primitive run then runs on the calling thread alone. The tiled
// GEMM makes its primitives and runs its tiles under one, so that a
// product's bits do not depend on the thread count.
class OneThread {
 public:
  OneThread();
  ~OneThread();
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int threads_before_;
};

// The thread count oneDNN sees on this thread from now on: one in a
// OneThread scope, else config::num_threads(); set as OpenMP's here (only
// set_num_threads' own thread has it set already), and returned.
int use_threads();

// A dense float32 buffer of `dims` in the plain `tag` layout, not copied.
dnnl::memory wrap(const dnnl::memory::dims& dims, dnnl::memory::format_tag tag, const void* data);

// The staging buffers, one set per thread; a slot's buffer grows to the
// largest request and is kept. The slots a call uses must differ.
enum class Slot {
  Input,
  Weights,
  Output,
  Scratchpad,
  Strip,  // rows of an image, a point's channels side by side (conv2d_winograd_cpu.cpp)
  ProductA,  // a GEMM's operands, copied with longer rows (gemm_cpu.cpp)
  ProductB,
  Count
};
void* staging(Slot slot, std::size_t bytes);

// `user`'s data in the layout `wanted`: `user` itself when they agree,
// otherwise a copy reordered into `slot`.
dnnl::memory to_layout(const dnnl::memory& user, const dnnl::memory::desc& wanted, Slot slot, std::string_view what);

// Memory of layout `wanted` for a primitive to write: `user` itself when the
// layouts agree, otherwise `slot`'s buffer, to be copied back into `user`
// with copy_back().
dnnl::memory for_output(const dnnl::memory& user, const dnnl::memory::desc& wanted, Slot slot);
void copy_back(const dnnl::memory& written, const dnnl::memory& user, std::string_view what);

// A tensor's elements in a layout of oneDNN's (core/memory_form.hpp): how a
// convolution leaves its result, so that the next one reads it unreordered.
class Layout final : public MemoryForm {
 public:
  explicit Layout(dnnl::memory::desc desc) : desc_(std::move(desc)) {}
  const dnnl::memory::desc& desc() const { return desc_; }
  std::size_t bytes() const override { return desc_.get_size(); }
  void to_row_major(const void* from, void* to) const override;
  bool same_as(const MemoryForm& other) const override;

 private:
  dnnl::memory::desc desc_;
};

// oneDNN's channel-blocked layout of 4-D float32 `dims`, nChwBc (NCHW with
// a pixel's channels in blocks of B = 8 or 16, innermost), and the B a
// tensor is stored in that layout with (0: it is not). With B = 1 it
// would be NCHW itself; code that loops over it can take both.
std::shared_ptr<const Layout> channel_blocked(const dnnl::memory::dims& dims, int block);
int channel_block(const Tensor& tensor);

// `tensor` (float32, `dims`) as oneDNN memory: in the layout it is stored
// in, where that is a Layout of these dims, else in row-major order, the
// plain `tag` (put in that order first if it was in another form).
dnnl::memory stored(const Tensor& tensor, const dnnl::memory::dims& dims, dnnl::memory::format_tag tag);

// Where a primitive writes `tensor`'s elements (float32, `dims`, row-major
// the plain `tag`) in the layout `wanted`: into the tensor's own memory,
// which then holds that layout (a Layout), or, where the tensor cannot
// take it (a part of a larger block, or a layout of another size), into
// `slot`'s buffer, reordered into the tensor by finish().
class Result {
 public:
  Result(const Tensor& tensor, const dnnl::memory::dims& dims, dnnl::memory::format_tag tag,
         const dnnl::memory::desc& wanted, Slot slot);
  const dnnl::memory& memory() const { return memory_; }
  void finish(std::string_view what) const;

 private:
  Tensor tensor_;
  dnnl::memory::desc plain_;
  dnnl::memory memory_;
  bool in_place_;
};

// Primitive attributes with the scratchpad left to the caller (so that it
// comes from `Slot::Scratchpad`, not from an allocation per call).
dnnl::primitive_attr user_scratchpad();

// Primitives made once per key (a convolution's geometry, a GEMM's shape)
// and shared by every thread (a primitive may run on several threads at
// once), for the kCapacity keys used last. Kept for every key, shapes that
// keep changing (images of many sizes, tiles, a fuzzer's inputs) would grow
// the cache without end, about 0.15 MB per shape (oneDNN's own primitive
// cache, 1,024 entries by default, may keep a dropped one's code a while
// longer); a training loop uses a few dozen. Callers hold what get()
// returns: a primitive dropped from the cache while it runs lives until the
// call is done. A primitive plans its split of the work for the thread
// count it is made at, so that count is part of the key: after
// config::set_num_threads a shape gets a primitive planned for the new
// count, where it kept the old one's plan (the bf16 4096 x 4096 Dense layer
// ran no faster on 2 threads after 1; docs/PERFORMANCE.md).
template <class Key, class Value>
class Cache {
 public:
  static constexpr std::size_t kCapacity = 256;

  template <class Make>
  std::shared_ptr<Value> get(const Key& shape, Make&& make) {
    const Planned key{use_threads(), shape};
    const std::lock_guard lock(mutex_);
    if (const auto found = entries_.find(key); found != entries_.end()) {
      recent_.splice(recent_.begin(), recent_, found->second.position);
      return found->second.value;
    }
    auto value = std::make_shared<Value>(make());
    recent_.push_front(key);
    entries_.emplace(key, Entry{value, recent_.begin()});
    if (entries_.size() > kCapacity) {
      entries_.erase(recent_.back());
      recent_.pop_back();
    }
    return value;
  }

 private:
  using Planned = std::pair<int, Key>;  // the thread count, and the caller's key
  struct Entry {
    std::shared_ptr<Value> value;
    typename std::list<Planned>::iterator position;  // in recent_
  };
  std::mutex mutex_;
  std::list<Planned> recent_;  // the keys, most recently used first
  std::map<Planned, Entry> entries_;
};

[[noreturn]] void fail(std::string_view what, const dnnl::error& error);

// Runs `make` (which creates a primitive descriptor) and turns oneDNN's
// failure into a ddl::Error naming `what`.
template <class Make>
auto describe(std::string_view what, Make&& make) -> decltype(make()) {
  try {
    return make();
  } catch (const dnnl::error& error) {
    fail(what, error);
  }
}

}  // namespace ddl::cpu_backend::onednn
