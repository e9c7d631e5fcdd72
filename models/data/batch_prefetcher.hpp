// A background thread that prepares an epoch's batches ahead of the training
// loop (DataLoader's prefetch option), so gathering the next batch overlaps
// the current step, as PyTorch's DataLoader workers and tf.data's prefetch do.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include <ddl/optim/engine/batch_source.hpp>

namespace ddl::models {

class BatchPrefetcher {
 public:
  // Starts a thread that calls make_batch(0), ..., make_batch(count - 1) in
  // order, keeping at most `capacity` (>= 1) batches made or being made ahead
  // of next(). make_batch runs on that thread, so it must only read state
  // nothing else writes meanwhile.
  BatchPrefetcher(std::function<optim::Batch(std::int64_t)> make_batch, std::int64_t count, int capacity);
  // Stops the thread (it finishes the batch it is making) and joins it.
  ~BatchPrefetcher() = default;
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The next batch in order, waiting for it if need be; nullopt after the
  // last. If make_batch threw, the batches before it are returned first,
  // then next() rethrows that exception, then returns nullopt.
  std::optional<optim::Batch> next();

 private:
  void produce(const std::stop_token& stop, std::int64_t count);

  std::function<optim::Batch(std::int64_t)> make_batch_;
  std::size_t capacity_;
  std::mutex mutex_;
  std::condition_variable_any changed_;  // a batch was pushed or popped, or the producer ended
  std::deque<optim::Batch> ready_;
  bool finished_ = false;
  std::exception_ptr error_;
  // Declared last: destroyed first, so the thread is stopped and joined
  // before the state it uses goes away.
  std::jthread producer_;
};

}  // namespace ddl::models
