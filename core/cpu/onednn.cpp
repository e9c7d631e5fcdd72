#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/cpu/onednn.hpp>

#include <omp.h>

#include <array>
#include <memory>

namespace ddl::cpu_backend::onednn {
namespace {

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

// One thread's staging buffers (64-byte aligned, as AVX-512 loads like).
struct StagingBuffers {
  std::array<std::unique_ptr<void, AlignedFree>, static_cast<std::size_t>(Slot::Count)> data;
  std::array<std::size_t, static_cast<std::size_t>(Slot::Count)> bytes{};
};

// How many OneThread scopes are open on this thread.
thread_local int one_thread_scopes = 0;

}  // namespace

OneThread::OneThread() : threads_before_(omp_get_max_threads()) {
  ++one_thread_scopes;
  omp_set_num_threads(1);
}

OneThread::~OneThread() {
  --one_thread_scopes;
  omp_set_num_threads(threads_before_);
}

int use_threads() {
  const int threads = one_thread_scopes > 0 ? 1 : config::num_threads();
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
  return threads;
}

const dnnl::engine& engine() {
  static const dnnl::engine cpu(dnnl::engine::kind::cpu, 0);
  return cpu;
}

void fail(std::string_view what, const dnnl::error& error) {
  detail::fail("{}: oneDNN failed ({}, status {})", what, error.what(), static_cast<int>(error.status));
}

void execute(std::string_view what, const dnnl::primitive& primitive, const Arguments& arguments) {
  // oneDNN's OpenMP regions take the calling thread's thread count.
  use_threads();
  try {
    dnnl::stream stream(engine());
    primitive.execute(stream, arguments);
    stream.wait();
  } catch (const dnnl::error& error) {
    fail(what, error);
  }
}

dnnl::memory wrap(const dnnl::memory::dims& dims, dnnl::memory::format_tag tag, const void* data) {
  return dnnl::memory({dims, dnnl::memory::data_type::f32, tag}, engine(), const_cast<void*>(data));
}

void* staging(Slot slot, std::size_t bytes) {
  thread_local StagingBuffers buffers;
  const auto i = static_cast<std::size_t>(slot);
  if (buffers.bytes[i] < bytes) {
    constexpr std::size_t kAlignment = 64;
    const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    buffers.data[i].reset(std::aligned_alloc(kAlignment, rounded));
    DDL_CHECK(buffers.data[i] != nullptr, "oneDNN staging: out of memory allocating {} bytes", rounded);
    buffers.bytes[i] = rounded;
  }
  return buffers.data[i].get();
}

dnnl::memory to_layout(const dnnl::memory& user, const dnnl::memory::desc& wanted, Slot slot, std::string_view what) {
  if (user.get_desc() == wanted) return user;
  dnnl::memory copy(wanted, engine(), staging(slot, wanted.get_size()));
  execute(what, dnnl::reorder(user, copy), {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, copy}});
  return copy;
}

dnnl::memory for_output(const dnnl::memory& user, const dnnl::memory::desc& wanted, Slot slot) {
  if (user.get_desc() == wanted) return user;
  return dnnl::memory(wanted, engine(), staging(slot, wanted.get_size()));
}

void copy_back(const dnnl::memory& written, const dnnl::memory& user, std::string_view what) {
  if (written.get_data_handle() == user.get_data_handle()) return;
  execute(what, dnnl::reorder(written, user), {{DNNL_ARG_FROM, written}, {DNNL_ARG_TO, user}});
}

void Layout::to_row_major(const void* from, void* to) const {
  const dnnl::memory::dims dims = desc_.dims();
  dnnl::memory::dims strides(dims.size(), 1);
  for (std::size_t d = dims.size() - 1; d > 0; --d) strides[d - 1] = strides[d] * dims[d];
  const dnnl::memory source(desc_, engine(), const_cast<void*>(from));
  const dnnl::memory target({dims, desc_.data_type(), strides}, engine(), to);
  execute("putting a tensor in row-major order", dnnl::reorder(source, target),
          {{DNNL_ARG_FROM, source}, {DNNL_ARG_TO, target}});
}

bool Layout::same_as(const MemoryForm& other) const {
  const auto* layout = dynamic_cast<const Layout*>(&other);
  return layout != nullptr && layout->desc_ == desc_;
}

std::shared_ptr<const Layout> channel_blocked(const dnnl::memory::dims& dims, int block) {
  DDL_CHECK(dims.size() == 4 && (block == 8 || block == 16), "channel_blocked: {}-D dims, block {}", dims.size(),
            block);
  using Tag = dnnl::memory::format_tag;
  return std::make_shared<Layout>(
      dnnl::memory::desc(dims, dnnl::memory::data_type::f32, block == 16 ? Tag::nChw16c : Tag::nChw8c));
}

int channel_block(const Tensor& tensor) {
  const auto form = tensor.stored_form();
  const auto* layout = dynamic_cast<const Layout*>(form.get());
  if (layout == nullptr || tensor.dim() != 4) return 0;
  const dnnl::memory::dims dims = tensor.shape().to_vector();
  for (const int block : {8, 16}) {
    if (dims[1] % block == 0 && channel_blocked(dims, block)->same_as(*layout)) return block;
  }
  return 0;
}

dnnl::memory stored(const Tensor& tensor, const dnnl::memory::dims& dims, dnnl::memory::format_tag tag) {
  if (const auto form = tensor.stored_form()) {
    const auto* layout = dynamic_cast<const Layout*>(form.get());
    if (layout != nullptr && layout->desc().dims() == dims) {
      return dnnl::memory(layout->desc(), engine(), tensor.stored_data());
    }
  }
  return wrap(dims, tag, tensor.raw_data());
}

Result::Result(const Tensor& tensor, const dnnl::memory::dims& dims, dnnl::memory::format_tag tag,
               const dnnl::memory::desc& wanted, Slot slot)
    : tensor_(tensor), plain_(dims, dnnl::memory::data_type::f32, tag) {
  const Storage& storage = *tensor.impl()->storage;
  if (wanted == plain_) {
    memory_ = dnnl::memory(wanted, engine(), tensor.raw_data());
    in_place_ = true;
  } else {
    in_place_ = storage.can_take_form() && storage.bytes() == wanted.get_size();
    memory_ = dnnl::memory(wanted, engine(), in_place_ ? tensor.stored_data() : staging(slot, wanted.get_size()));
  }
}

void Result::finish(std::string_view what) const {
  if (!in_place_) return copy_back(memory_, dnnl::memory(plain_, engine(), tensor_.raw_data()), what);
  if (memory_.get_desc() != plain_) tensor_.set_stored_form(std::make_shared<Layout>(memory_.get_desc()));
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attributes;
  attributes.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attributes;
}

}  // namespace ddl::cpu_backend::onednn
