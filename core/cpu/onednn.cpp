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

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attributes;
  attributes.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attributes;
}

}  // namespace ddl::cpu_backend::onednn
