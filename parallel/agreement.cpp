// Layout agreement and the stall inspector (see agreement.hpp).
#include <ddl/parallel/agreement.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <ddl/core/check.hpp>
#include <ddl/parallel/config.hpp>

namespace ddl::parallel {
namespace {

constexpr int kArrivalTag = 901;
constexpr int kGoTag = 902;
constexpr std::size_t kEntryBytes = 480;  // a description is cut to this length in the report

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t hash = 1469598103934665603ull;
  for (const char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash;
}

template <class T>
std::vector<T> gather(const Communicator& comm, const std::vector<T>& mine) {
  const auto bytes = comm.allgather_bytes(std::as_bytes(std::span<const T>(mine)));
  std::vector<T> all(bytes.size() / sizeof(T));
  std::memcpy(all.data(), bytes.data(), bytes.size());
  return all;
}

}  // namespace

std::string layout_disagreement(const Communicator& comm, const std::vector<std::string>& lines,
                                const std::string& what) {
  const int p = comm.size();
  const auto counts = gather(comm, std::vector<std::int64_t>{static_cast<std::int64_t>(lines.size())});
  const std::int64_t longest = *std::max_element(counts.begin(), counts.end());
  std::vector<std::uint64_t> hashes(static_cast<std::size_t>(longest), fnv1a("<nothing>"));
  for (std::size_t i = 0; i < lines.size(); ++i) hashes[i] = fnv1a(lines[i]);
  const auto all = gather(comm, hashes);
  std::int64_t first_difference = -1;
  for (std::int64_t i = 0; i < longest && first_difference < 0; ++i) {
    for (int r = 1; r < p; ++r) {
      if (all[static_cast<std::size_t>(r * longest + i)] != all[static_cast<std::size_t>(i)]) first_difference = i;
    }
  }
  if (first_difference < 0) return {};

  std::vector<char> entry(kEntryBytes, '\0');
  const std::string mine = first_difference < static_cast<std::int64_t>(lines.size())
                               ? lines[static_cast<std::size_t>(first_difference)]
                               : std::string("nothing (it has only ") + std::to_string(lines.size()) + " entries)";
  std::memcpy(entry.data(), mine.data(), std::min(mine.size(), kEntryBytes - 1));
  const auto entries = gather(comm, entry);
  std::string report = fmt::format("{}: the ranks disagree on entry {} of {}", what, first_difference, longest);
  for (int r = 0; r < p; ++r) {
    report += fmt::format("; rank {} has '{}'", r, std::string(entries.data() + r * kEntryBytes));
  }
  return report + "; every rank must build the same model and submit the same tensors";
}

void agree_on_layout(const Communicator& comm, const std::vector<std::string>& lines, const std::string& what) {
  const std::string disagreement = layout_disagreement(comm, lines, what);
  if (!disagreement.empty()) comm.abort(disagreement + " (aborting every rank)");
}

void agree_all_can_proceed(const Communicator& comm, const std::string& problem, const std::string& what) {
  std::vector<double> blocked(static_cast<std::size_t>(comm.size()), 0.0);
  blocked[static_cast<std::size_t>(comm.rank())] = problem.empty() ? 0.0 : 1.0;
  comm.sum_doubles(blocked);
  if (!problem.empty()) throw Error(problem);
  std::vector<int> ranks;
  for (int r = 0; r < comm.size(); ++r) {
    if (blocked[static_cast<std::size_t>(r)] != 0.0) ranks.push_back(r);
  }
  DDL_CHECK(ranks.empty(), "{}: rank {} cannot go on because rank(s) {} cannot (their errors say why)", what,
            comm.rank(), fmt::join(ranks, ", "));
}

void StallInspector::arrive(std::int64_t step, const std::string& what) {
  const int p = comm_.size();
  if (p == 1) return;
  const double timeout = config::stall_timeout_seconds();
  const auto start = std::chrono::steady_clock::now();
  const auto waited = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const auto int_bytes = [](std::int64_t& value) { return std::as_writable_bytes(std::span<std::int64_t>(&value, 1)); };

  if (comm_.rank() != 0) {
    std::int64_t mine = step, go = 0;
    Request arrival = comm_.isend(int_bytes(mine), 0, kArrivalTag);
    Request reply = comm_.irecv(int_bytes(go), 0, kGoTag);
    while (!(arrival.test() & reply.test())) {
      if (waited() > timeout) {
        comm_.abort(fmt::format("stalled: rank 0 has not confirmed within {:g} s that every rank reached {} of step "
                                "{}; rank 0 names the missing ranks, unless it is the one missing (DDL_STALL_TIMEOUT)",
                                timeout, what, step));
      }
      std::this_thread::yield();
    }
    return;
  }
  std::vector<std::int64_t> steps(static_cast<std::size_t>(p), -1);
  std::vector<Request> arrivals;
  for (int r = 1; r < p; ++r) arrivals.push_back(comm_.irecv(int_bytes(steps[static_cast<std::size_t>(r)]), r, kArrivalTag));
  std::vector<bool> arrived(static_cast<std::size_t>(p), false);
  arrived[0] = true;
  for (;;) {
    bool all = true;
    for (int r = 1; r < p; ++r) {
      if (!arrived[static_cast<std::size_t>(r)]) arrived[static_cast<std::size_t>(r)] = arrivals[r - 1].test();
      all = all && arrived[static_cast<std::size_t>(r)];
    }
    if (all) break;
    if (waited() > timeout) {
      std::vector<int> missing;
      for (int r = 1; r < p; ++r) {
        if (!arrived[static_cast<std::size_t>(r)]) missing.push_back(r);
      }
      comm_.abort(fmt::format("stalled: rank(s) {} have not reached {} of step {} after {:g} s (DDL_STALL_TIMEOUT); "
                              "they are stuck, dead, or took another path; aborting every rank",
                              fmt::join(missing, ", "), what, step, timeout));
    }
    std::this_thread::yield();
  }
  for (int r = 1; r < p; ++r) {
    if (steps[static_cast<std::size_t>(r)] != step) {
      comm_.abort(fmt::format("rank {} reached {} of step {} while rank 0 is at step {}; the ranks ran different "
                              "numbers of steps (uneven data?); aborting every rank",
                              r, what, steps[static_cast<std::size_t>(r)], step));
    }
  }
  std::int64_t go = step;
  std::vector<Request> replies;
  for (int r = 1; r < p; ++r) replies.push_back(comm_.isend(int_bytes(go), r, kGoTag));
  for (Request& reply : replies) reply.wait();
}

Device local_gpu(const Communicator& comm, const std::string& who, const std::string& what, bool or_the_only_one) {
  // A rank without its GPU must not leave the others waiting in the first
  // collective, so every rank learns here whether all have theirs.
  const int gpus = device_count(DeviceType::CUDA);
  const bool the_only_one = or_the_only_one && gpus == 1;
  std::string problem;
  if (comm.local_rank() >= gpus && !the_only_one) {
    problem = fmt::format("{}: rank {} is rank {} of {} on its node, which has {} GPU(s); {} takes one GPU per rank "
                          "(name a device, cuda:0, to make the ranks share one, which NCCL does not allow)",
                          who, comm.rank(), comm.local_rank(), comm.local_size(), gpus, what);
  }
  agree_all_can_proceed(comm, problem, who + ": choosing each rank's GPU");
  return cuda(the_only_one ? 0 : comm.local_rank());
}

}  // namespace ddl::parallel
