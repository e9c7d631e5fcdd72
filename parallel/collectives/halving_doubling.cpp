// Recursive halving / doubling (Rabenseifner 2004; Thakur, Rabenseifner &
// Gropp 2005, the algorithm MPICH uses for long messages): an allreduce,
// and its two halves on their own, a reduce-scatter and an allgather.
//
// With p a power of two, in log2 p rounds of recursive halving each rank
// swaps half of its current range with the partner whose rank differs in
// one bit, keeps the half it is responsible for and adds the partner's copy
// of it: a reduce-scatter that ends with each rank owning 1/p of the buffer,
// summed. Recursive doubling then runs the rounds backwards, each rank
// sending the range it owns and receiving its partner's, until every rank
// holds everything (an allgather): 2 log2 p messages and 2n(p-1)/p bytes per
// rank for the allreduce, whose ranges are halved at their middle. The
// halves used apart halve at chunk boundaries instead (chunk_range), so rank
// r ends the reduce-scatter owning chunk r, as the ring's leaves it; where p
// is not a power of two those halves are uneven (at p = 3 a rank may send
// 2n/3 where the middle sends n/2). Where each range is cut does not change
// any element's sums, so both give the same bits.
//
// With p not a power of two, let q be the largest power of two below p and
// extra = p - q. Of ranks 0 .. 2·extra-1 each even rank folds into the odd
// rank after it, which stands for both among the q ranks that run the
// rounds (and owns both their chunks). An allreduce folds and unfolds
// whole buffers (n more bytes for those ranks, two more latencies); the
// reduce-scatter folds the whole buffer in and hands the even rank back
// its chunk; the allgather folds the even rank's chunk in and hands back
// the whole buffer.
#include <ddl/parallel/collectives/collectives.hpp>

#include <vector>

#include <ddl/parallel/collectives/transport.hpp>

namespace ddl::parallel {
namespace {

constexpr int kFoldTag = 201;
constexpr int kHalvingTag = 202;
constexpr int kDoublingTag = 203;
constexpr int kUnfoldTag = 204;

// The q ranks (a power of two) that run the rounds, and how the p real
// ranks map onto them: the first 2·extra fold pairwise into their odd one.
struct Fold {
  int q = 1, extra = 0;
  explicit Fold(int p) {
    while (q * 2 <= p) q *= 2;
    extra = p - q;
  }
  bool folded_away(int r) const { return r < 2 * extra && r % 2 == 0; }  // waits out the rounds
  bool holds_two(int r) const { return r < 2 * extra && r % 2 == 1; }    // stands for r - 1 too
  int virtual_rank(int r) const { return r < 2 * extra ? r / 2 : r - extra; }
  int real_rank(int v) const { return v < extra ? 2 * v + 1 : v + extra; }
  // The first of the chunks virtual rank v owns (its real ranks' chunks).
  int first_chunk(int v) const { return v < extra ? 2 * v : v + extra; }
};

// The range a rank owns at one round, and the half it hands over.
struct Round {
  int partner;  // real rank
  ChunkRange kept, given;
};

// Where recursive halving cuts a range: at its middle (the allreduce: even
// halves), or at the chunk boundary between the two blocks of virtual ranks
// it stands for (the reduce-scatter and allgather: each rank ends on its
// own chunk).
enum class Cut { middle, chunks };

// Recursive halving's rounds for real rank r (not folded away) over n
// elements in p chunks: each halves the block of virtual ranks the rank's
// range stands for, keeping the lower block where the rank's bit is 0.
std::vector<Round> halving_rounds(const Fold& fold, int p, int r, std::int64_t n, Cut cut) {
  const int v = fold.virtual_rank(r);
  const auto chunk_begin = [&](int virtual_rank) {
    return virtual_rank == fold.q ? n : chunk_range(n, p, fold.first_chunk(virtual_rank)).begin;
  };
  std::vector<Round> rounds;
  int first = 0, last = fold.q;
  ChunkRange owned{0, n};
  for (int mask = fold.q / 2; mask >= 1; mask /= 2) {
    const int partner = v ^ mask, middle = first + (last - first) / 2;
    const std::int64_t split = cut == Cut::chunks ? chunk_begin(middle) : owned.begin + owned.size() / 2;
    const ChunkRange lower{owned.begin, split}, upper{split, owned.end};
    const bool keep_lower = v < partner;
    rounds.push_back({fold.real_rank(partner), keep_lower ? lower : upper, keep_lower ? upper : lower});
    (keep_lower ? last : first) = middle;
    owned = rounds.back().kept;
  }
  return rounds;
}

template <class Transport>
void halve(Transport& transport, float* data, const std::vector<Round>& rounds) {
  for (const Round& round : rounds) {
    transport.exchange_add(data + round.given.begin, round.given.size(), round.partner, data + round.kept.begin,
                           round.kept.size(), round.partner, kHalvingTag);
  }
}

// The rounds backwards, each handing over what it kept.
template <class Transport>
void double_up(Transport& transport, float* data, const std::vector<Round>& rounds) {
  for (auto round = rounds.rbegin(); round != rounds.rend(); ++round) {
    transport.exchange(data + round->kept.begin, round->kept.size(), round->partner, data + round->given.begin,
                       round->given.size(), round->partner, kDoublingTag);
  }
}

// What the allreduce and the reduce-scatter share, on a rank that runs the
// rounds: its folded neighbour's buffer added in, the halving, the owned
// range completed (averaged, rounded). Returns the rounds, which the
// allreduce doubles back over.
template <class Transport>
std::vector<Round> fold_and_halve(Transport& transport, float* data, std::int64_t n, ReduceOp op, const Fold& fold,
                                  Cut cut) {
  const int p = transport.size(), r = transport.rank();
  if (fold.holds_two(r)) transport.exchange_add(nullptr, 0, r - 1, data, n, r - 1, kFoldTag);
  std::vector<Round> rounds = halving_rounds(fold, p, r, n, cut);
  halve(transport, data, rounds);
  // With Cut::chunks: the rank's chunk, and with the fold its even
  // neighbour's before it.
  const ChunkRange owned = rounds.back().kept;
  transport.complete(data + owned.begin, owned.size(), op);
  return rounds;
}

}  // namespace

namespace detail {

template <class Transport>
void halving_doubling_allreduce(Transport& transport, float* data, std::int64_t n, ReduceOp op) {
  const int p = transport.size(), r = transport.rank();
  if (p == 1) return;
  const Fold fold(p);
  if (fold.folded_away(r)) {
    transport.exchange(data, n, r + 1, nullptr, 0, r + 1, kFoldTag);
    transport.exchange(nullptr, 0, r + 1, data, n, r + 1, kUnfoldTag);
    return;
  }
  double_up(transport, data, fold_and_halve(transport, data, n, op, fold, Cut::middle));
  if (fold.holds_two(r)) transport.exchange(data, n, r - 1, nullptr, 0, r - 1, kUnfoldTag);
}

template <class Transport>
void halving_reduce_scatter(Transport& transport, float* data, std::int64_t n, ReduceOp op) {
  const int p = transport.size(), r = transport.rank();
  if (p == 1) return;
  const Fold fold(p);
  const ChunkRange mine = chunk_range(n, p, r);
  if (fold.folded_away(r)) {
    transport.exchange(data, n, r + 1, nullptr, 0, r + 1, kFoldTag);
    transport.exchange(nullptr, 0, r + 1, data + mine.begin, mine.size(), r + 1, kUnfoldTag);
    return;
  }
  fold_and_halve(transport, data, n, op, fold, Cut::chunks);
  if (fold.holds_two(r)) {
    const ChunkRange theirs = chunk_range(n, p, r - 1);
    transport.exchange(data + theirs.begin, theirs.size(), r - 1, nullptr, 0, r - 1, kUnfoldTag);
  }
}

template <class Transport>
void doubling_allgather(Transport& transport, float* data, std::int64_t n) {
  const int p = transport.size(), r = transport.rank();
  if (p == 1) return;
  const Fold fold(p);
  const ChunkRange mine = chunk_range(n, p, r);
  if (fold.folded_away(r)) {
    transport.exchange(data + mine.begin, mine.size(), r + 1, nullptr, 0, r + 1, kFoldTag);
    transport.exchange(nullptr, 0, r + 1, data, n, r + 1, kUnfoldTag);
    return;
  }
  if (fold.holds_two(r)) {
    const ChunkRange theirs = chunk_range(n, p, r - 1);
    transport.exchange(nullptr, 0, r - 1, data + theirs.begin, theirs.size(), r - 1, kFoldTag);
  }
  double_up(transport, data, halving_rounds(fold, p, r, n, Cut::chunks));
  if (fold.holds_two(r)) transport.exchange(data, n, r - 1, nullptr, 0, r - 1, kUnfoldTag);
}

DDL_FOR_BOTH_TRANSPORTS(halving_doubling_allreduce, float*, std::int64_t, ReduceOp)
DDL_FOR_BOTH_TRANSPORTS(halving_reduce_scatter, float*, std::int64_t, ReduceOp)
DDL_FOR_BOTH_TRANSPORTS(doubling_allgather, float*, std::int64_t)

}  // namespace detail

void halving_doubling_allreduce(const Communicator& comm, std::span<float> data) {
  detail::HostTransport transport(comm, WireFormat::float32);
  detail::halving_doubling_allreduce(transport, data.data(), static_cast<std::int64_t>(data.size()), ReduceOp::sum);
}

void halving_reduce_scatter(const Communicator& comm, std::span<float> data, ReduceOp op) {
  detail::HostTransport transport(comm, WireFormat::float32);
  detail::halving_reduce_scatter(transport, data.data(), static_cast<std::int64_t>(data.size()), op);
}

void doubling_allgather(const Communicator& comm, std::span<float> data) {
  detail::HostTransport transport(comm, WireFormat::float32);
  detail::doubling_allgather(transport, data.data(), static_cast<std::int64_t>(data.size()));
}

}  // namespace ddl::parallel
