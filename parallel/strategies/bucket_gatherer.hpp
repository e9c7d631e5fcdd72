// Stage 3 of sharded data parallelism (sharding.hpp) gathers each bucket's
// parameters before its layers run and releases them after. BucketGatherer
// keeps track of which buckets are whole and runs the gathers:
//
//   without prefetch  on the calling thread, when a layer needs the bucket;
//   with prefetch     on a thread of its own, in the order they were asked
//                     for, so the next bucket's allgather runs while the
//                     current one's layers compute (PyTorch FSDP's forward
//                     and backward prefetch). A prefetch waits while
//                     `limit` buckets are whole or on their way, and is
//                     sent when one is released, so prefetching never
//                     makes more than `limit` whole at once (a layer whose
//                     parameters span more buckets gathers them all).
//
// Every rank must ask for the same buckets in the same order (the
// collectives match by order); the layers' order, the same everywhere,
// gives it. Releases are local.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace ddl::parallel {

class BucketGatherer {
 public:
  // gather(b) makes bucket b whole (a collective), release(b) frees it;
  // bytes[b] is its size.
  BucketGatherer(std::vector<std::int64_t> bytes, std::function<void(std::size_t)> gather,
                 std::function<void(std::size_t)> release, bool prefetch, int limit = 2);
  ~BucketGatherer();
  BucketGatherer(const BucketGatherer&) = delete;
  BucketGatherer& operator=(const BucketGatherer&) = delete;

  // Bucket b is whole on return (asked for at once if it was not).
  void gather(std::size_t b);
  // Bucket b asked for ahead of its use (without prefetch: nothing).
  void prefetch(std::size_t b);
  // Bucket b freed, if it is whole; a waiting prefetch may go.
  void release(std::size_t b);
  // Bucket b counted whole without a gather: its parameters were written.
  void mark_whole(std::size_t b);
  bool whole(std::size_t b) const;
  bool prefetching() const { return prefetch_; }

  // Whether buckets made whole from now on count in the peaks below
  // (ShardedState turns it off while it gathers the whole model between
  // steps for a caller, which the peaks of training should not show).
  void measure_peaks(bool on);
  // The most buckets, and bytes, whole at once so far; gathers that found
  // their bucket whole or on its way (prefetched).
  int peak_whole() const;
  std::int64_t peak_bytes() const;
  std::int64_t prefetch_hits() const;

 private:
  enum class Phase { released, waiting, asked, whole };

  // Under mutex_: onto the worker's queue; and counted whole.
  void ask(std::size_t b);
  void became_whole(std::size_t b);
  void serve(const std::stop_token& stop);

  std::vector<std::int64_t> bytes_;
  std::function<void(std::size_t)> gather_, release_;
  bool prefetch_;
  int limit_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Phase> phase_;
  std::vector<bool> prefetched_;     // asked ahead of its use, not yet used
  std::deque<std::size_t> queue_;    // asked, for the worker, in order
  std::deque<std::size_t> waiting_;  // prefetches held back by the limit, in order
  int busy_ = 0;                     // buckets whole or asked
  bool measuring_ = true;
  int whole_ = 0, peak_whole_ = 0;
  std::int64_t whole_bytes_ = 0, peak_bytes_ = 0, hits_ = 0;
  std::exception_ptr failure_;
  std::jthread worker_;
};

}  // namespace ddl::parallel
