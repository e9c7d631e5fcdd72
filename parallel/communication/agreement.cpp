// Layout agreement and the stall inspector (see agreement.hpp).
#include <ddl/parallel/communication/agreement.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include <ddl/core/check.hpp>
#include <ddl/core/cuda/runtime.hpp>
#include <ddl/parallel/config.hpp>

namespace ddl::parallel {
namespace {

constexpr int kArrivalTag = 901;
constexpr std::size_t kEntryBytes = 1024;  // a description or an error is cut to this length

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t hash = 1469598103934665603ull;
  for (const char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash;
}

template <class T>
std::vector<T> gather(const Communicator& comm, const std::vector<T>& mine) {
  return allgather_values(comm, std::span<const T>(mine));
}

// Every rank's `text`, cut to kEntryBytes - 1 bytes (collective).
std::vector<std::string> gather_texts(const Communicator& comm, const std::string& text) {
  std::vector<char> entry(kEntryBytes, '\0');
  std::memcpy(entry.data(), text.data(), std::min(text.size(), kEntryBytes - 1));
  const auto entries = gather(comm, entry);
  std::vector<std::string> texts;
  for (int r = 0; r < comm.size(); ++r) texts.emplace_back(entries.data() + static_cast<std::size_t>(r) * kEntryBytes);
  return texts;
}

}  // namespace

std::optional<Disagreement> first_disagreement(const Communicator& comm, const std::vector<std::string>& lines) {
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
  if (first_difference < 0) return std::nullopt;
  const std::string mine = first_difference < static_cast<std::int64_t>(lines.size())
                               ? lines[static_cast<std::size_t>(first_difference)]
                               : std::string("nothing (it has only ") + std::to_string(lines.size()) + " entries)";
  return Disagreement{first_difference, longest, gather_texts(comm, mine)};
}

std::string layout_disagreement(const Communicator& comm, const std::vector<std::string>& lines,
                                const std::string& what) {
  const auto disagreement = first_disagreement(comm, lines);
  if (!disagreement) return {};
  std::string report =
      fmt::format("{}: the ranks disagree on entry {} of {}", what, disagreement->entry, disagreement->entries);
  for (std::size_t r = 0; r < disagreement->per_rank.size(); ++r) {
    report += fmt::format("; rank {} has '{}'", r, disagreement->per_rank[r]);
  }
  return report + "; every rank must build the same model and submit the same tensors";
}

void agree_on_layout(const Communicator& comm, const std::vector<std::string>& lines, const std::string& what) {
  const std::string disagreement = layout_disagreement(comm, lines, what);
  if (!disagreement.empty()) comm.abort(disagreement + " (aborting every rank)");
}

std::vector<RankProblem> gather_problems(const Communicator& comm, const std::string& problem) {
  std::vector<double> blocked(static_cast<std::size_t>(comm.size()), 0.0);
  blocked[static_cast<std::size_t>(comm.rank())] = problem.empty() ? 0.0 : 1.0;
  comm.sum_doubles(blocked);
  if (std::all_of(blocked.begin(), blocked.end(), [](double b) { return b == 0.0; })) return {};
  const std::vector<std::string> texts = gather_texts(comm, problem);
  std::vector<RankProblem> problems;
  for (int r = 0; r < comm.size(); ++r) {
    if (blocked[static_cast<std::size_t>(r)] != 0.0) problems.push_back({r, texts[static_cast<std::size_t>(r)]});
  }
  return problems;
}

std::string describe_problems(const std::vector<RankProblem>& problems) {
  // Ranks with the same message (a bad variable everywhere) share one entry.
  std::vector<std::pair<std::string, std::vector<int>>> grouped;
  for (const RankProblem& problem : problems) {
    auto same = std::find_if(grouped.begin(), grouped.end(), [&](const auto& g) { return g.first == problem.what; });
    if (same == grouped.end()) same = grouped.insert(grouped.end(), {problem.what, {}});
    same->second.push_back(problem.rank);
  }
  std::vector<std::string> parts;
  for (const auto& [what, ranks] : grouped) {
    parts.push_back(fmt::format("rank{} {}: {}", ranks.size() == 1 ? "" : "s", fmt::join(ranks, ", "), what));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

void agree_all_can_proceed(const Communicator& comm, const std::string& problem, const std::string& what) {
  const std::vector<RankProblem> problems = gather_problems(comm, problem);
  if (!problem.empty()) throw Error(problem);
  DDL_CHECK(problems.empty(), "{}: rank {} cannot go on because {} cannot ({})", what, comm.rank(),
            problems.size() == 1 ? fmt::format("rank {}", problems.front().rank) : std::string("other ranks"),
            describe_problems(problems));
}

void StallInspector::arrive(std::int64_t step, const std::string& what) {
  const int p = comm_.size();
  if (p == 1) return;
  const auto int_bytes = [](std::int64_t& value) { return std::as_writable_bytes(std::span<std::int64_t>(&value, 1)); };
  if (comm_.rank() != 0) {
    report_ = Request();  // the previous report has gone (an eager send: at once)
    reported_step_ = step;
    report_ = comm_.isend(int_bytes(reported_step_), 0, kArrivalTag);
    return;
  }
  // Rank 0 waits for every report, within the stall timeout.
  const double timeout = config::stall_timeout_seconds();
  const auto start = std::chrono::steady_clock::now();
  const auto waited = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
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
      std::vector<std::string> missing;
      for (int r = 1; r < p; ++r) {
        if (!arrived[static_cast<std::size_t>(r)]) missing.push_back(fmt::format("{} on {}", comm_.world_rank(r), comm_.host(r)));
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
}

int local_gpu_index(const Communicator& comm) {
  return device_count(DeviceType::CUDA) == 1 ? 0 : comm.local_rank();
}

Device local_gpu(const Communicator& comm, const std::string& who, const std::string& what) {
  // A rank without its GPU must not leave the others waiting in the first
  // collective, so every rank learns here whether all have theirs.
  const int gpus = device_count(DeviceType::CUDA);
  const int index = local_gpu_index(comm);
  std::string problem;
  if (index >= gpus) {
    problem = fmt::format("{}: rank {} is rank {} of {} on its node, which has {} GPU(s); {} takes one GPU per rank "
                          "(or the only one a rank sees, as CUDA_VISIBLE_DEVICES set per rank gives it)",
                          who, comm.rank(), comm.local_rank(), comm.local_size(), gpus, what);
  }
  agree_all_can_proceed(comm, problem, who + ": choosing each rank's GPU");
  return cuda(index);
}

std::vector<std::string> gather_gpu_uuids(const Communicator& comm, std::optional<int> device) {
  constexpr std::size_t kUuidBytes = 48;  // "GPU-" and 36 characters, padded with zeros
  std::vector<char> mine(kUuidBytes, '\0');
  if (device) {
    // A rank whose device cannot be read still joins the gather (the others
    // would wait for it), as a rank without a GPU.
    std::string uuid;
    try {
      uuid = cuda_backend::device_uuid(*device);
    } catch (const Error&) {
    }
    std::copy_n(uuid.begin(), std::min(uuid.size(), kUuidBytes - 1), mine.begin());
  }
  const std::vector<char> all = gather(comm, mine);
  std::vector<std::string> uuids;
  for (int r = 0; r < comm.size(); ++r) uuids.emplace_back(all.data() + static_cast<std::size_t>(r) * kUuidBytes);
  return uuids;
}

bool every_rank_has_its_gpu(const Communicator& comm, std::optional<int> device) {
  const std::vector<std::string> uuids = gather_gpu_uuids(comm, device);
  const std::set<std::string> distinct(uuids.begin(), uuids.end());
  return distinct.size() == uuids.size() && !distinct.contains("");
}

}  // namespace ddl::parallel
