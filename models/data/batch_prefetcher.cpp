// BatchPrefetcher: one producer thread, one consumer, a bounded queue and a
// condition variable; no busy waiting, and a stop request wakes the producer.
#include <ddl/models/data/batch_prefetcher.hpp>

#include <utility>

#include <ddl/core/timeline.hpp>

namespace ddl::models {

BatchPrefetcher::BatchPrefetcher(std::function<optim::Batch(std::int64_t)> make_batch, std::int64_t count, int capacity)
    : make_batch_(std::move(make_batch)), capacity_(static_cast<std::size_t>(capacity)) {
  producer_ = std::jthread([this, count](const std::stop_token& stop) { produce(stop, count); });
}

void BatchPrefetcher::produce(const std::stop_token& stop, std::int64_t count) {
  timeline::name_this_thread("prefetch");
  try {
    for (std::int64_t k = 0; k < count; ++k) {
      {
        std::unique_lock lock(mutex_);
        // Counting the batch about to be made, at most capacity_ exist ahead.
        if (!changed_.wait(lock, stop, [this] { return ready_.size() < capacity_; })) return;
      }
      // Made outside the lock so next() can hand out earlier batches meanwhile.
      optim::Batch batch = [&] {
        timeline::Span span("data", "make batch");
        span.arg("batch", k);
        return make_batch_(k);
      }();
      const std::lock_guard lock(mutex_);
      ready_.push_back(std::move(batch));
      changed_.notify_all();
    }
  } catch (...) {
    const std::lock_guard lock(mutex_);
    error_ = std::current_exception();
  }
  const std::lock_guard lock(mutex_);
  finished_ = true;
  changed_.notify_all();
}

std::optional<optim::Batch> BatchPrefetcher::next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !ready_.empty() || finished_; });
  if (!ready_.empty()) {
    optim::Batch batch = std::move(ready_.front());
    ready_.pop_front();
    changed_.notify_all();
    return batch;
  }
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return std::nullopt;
}

}  // namespace ddl::models
