// Which buckets are whole, and the gathers (see bucket_gatherer.hpp).
#include <ddl/parallel/strategies/bucket_gatherer.hpp>

#include <algorithm>

namespace ddl::parallel {

BucketGatherer::BucketGatherer(std::vector<std::int64_t> bytes, std::function<void(std::size_t)> gather,
                               std::function<void(std::size_t)> release, bool prefetch, int limit)
    : bytes_(std::move(bytes)),
      gather_(std::move(gather)),
      release_(std::move(release)),
      prefetch_(prefetch),
      limit_(limit),
      phase_(bytes_.size(), Phase::released),
      prefetched_(bytes_.size(), false) {
  if (prefetch_) worker_ = std::jthread([this](const std::stop_token& stop) { serve(stop); });
}

BucketGatherer::~BucketGatherer() {
  if (worker_.joinable()) {
    worker_.request_stop();
    changed_.notify_all();
    worker_.join();
  }
}

void BucketGatherer::became_whole(std::size_t b) {
  phase_[b] = Phase::whole;
  whole_bytes_ += bytes_[b];
  ++whole_;
  if (!measuring_) return;
  peak_whole_ = std::max(peak_whole_, whole_);
  peak_bytes_ = std::max(peak_bytes_, whole_bytes_);
}

void BucketGatherer::measure_peaks(bool on) {
  const std::lock_guard lock(mutex_);
  measuring_ = on;
}

void BucketGatherer::ask(std::size_t b) {
  phase_[b] = Phase::asked;
  ++busy_;
  queue_.push_back(b);
  changed_.notify_all();
}

void BucketGatherer::gather(std::size_t b) {
  if (!prefetch_) {
    {
      const std::lock_guard lock(mutex_);
      if (phase_[b] == Phase::whole) return;
    }
    gather_(b);
    const std::lock_guard lock(mutex_);
    ++busy_;
    became_whole(b);
    return;
  }
  std::unique_lock lock(mutex_);
  // A hit: a prefetch sent this bucket's gather before it was needed.
  if (prefetched_[b]) {
    prefetched_[b] = false;
    if (phase_[b] != Phase::waiting) ++hits_;
  }
  if (phase_[b] == Phase::waiting) {
    // Needed now: past the limit, which only holds prefetches back.
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), b));
    ask(b);
  } else if (phase_[b] == Phase::released) {
    ask(b);
  }
  changed_.wait(lock, [&] { return phase_[b] == Phase::whole || failure_; });
  if (failure_) std::rethrow_exception(failure_);
}

void BucketGatherer::prefetch(std::size_t b) {
  if (!prefetch_) return;
  const std::lock_guard lock(mutex_);
  if (phase_[b] != Phase::released) return;
  prefetched_[b] = true;
  if (busy_ >= limit_) {
    phase_[b] = Phase::waiting;
    waiting_.push_back(b);
    return;
  }
  ask(b);
}

void BucketGatherer::release(std::size_t b) {
  {
    std::unique_lock lock(mutex_);
    // On its way: its allgather is a collective every rank runs, so it
    // finishes before the bucket is freed, on every rank alike.
    changed_.wait(lock, [&] { return phase_[b] != Phase::asked || failure_; });
    if (phase_[b] == Phase::waiting) {  // never sent: forget it
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), b));
      phase_[b] = Phase::released;
      prefetched_[b] = false;
      return;
    }
    if (phase_[b] != Phase::whole) return;
    phase_[b] = Phase::released;
    --busy_;
    --whole_;
    whole_bytes_ -= bytes_[b];
  }
  release_(b);
  const std::lock_guard lock(mutex_);
  while (!waiting_.empty() && busy_ < limit_) {
    const std::size_t next = waiting_.front();
    waiting_.pop_front();
    ask(next);
  }
}

void BucketGatherer::mark_whole(std::size_t b) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return phase_[b] != Phase::asked || failure_; });
  if (phase_[b] == Phase::whole) return;
  if (phase_[b] == Phase::waiting) waiting_.erase(std::find(waiting_.begin(), waiting_.end(), b));
  prefetched_[b] = false;
  ++busy_;
  phase_[b] = Phase::whole;
  ++whole_;
  whole_bytes_ += bytes_[b];
}

bool BucketGatherer::whole(std::size_t b) const {
  const std::lock_guard lock(mutex_);
  return phase_[b] == Phase::whole;
}

int BucketGatherer::peak_whole() const {
  const std::lock_guard lock(mutex_);
  return peak_whole_;
}

std::int64_t BucketGatherer::peak_bytes() const {
  const std::lock_guard lock(mutex_);
  return peak_bytes_;
}

std::int64_t BucketGatherer::prefetch_hits() const {
  const std::lock_guard lock(mutex_);
  return hits_;
}

void BucketGatherer::serve(const std::stop_token& stop) {
  for (;;) {
    std::size_t b = 0;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop.stop_requested() || !queue_.empty(); });
      if (stop.stop_requested()) return;
      b = queue_.front();
      queue_.pop_front();
    }
    try {
      gather_(b);
    } catch (...) {
      // The waiter rethrows it; the collectives after it cannot match.
      const std::lock_guard lock(mutex_);
      failure_ = std::current_exception();
      changed_.notify_all();
      return;
    }
    const std::lock_guard lock(mutex_);
    became_whole(b);
    changed_.notify_all();
  }
}

}  // namespace ddl::parallel
