// Recursive halving / doubling allreduce (Rabenseifner 2004; Thakur,
// Rabenseifner & Gropp 2005, the algorithm MPICH uses for long messages).
//
// With p a power of two, in log2 p rounds of recursive halving each rank
// swaps half of its current range with the partner whose rank differs in
// one bit, keeps the half it is responsible for and adds the partner's copy
// of it: a reduce-scatter that ends with each rank owning 1/p of the buffer,
// summed. Recursive doubling then runs the rounds backwards, each rank
// sending the range it owns and receiving its partner's, until every rank
// holds everything: 2 log2 p messages and 2n(p-1)/p bytes per rank.
//
// With p not a power of two, let q be the largest power of two below p and
// extra = p - q. First, of ranks 0 .. 2·extra-1 each even rank sends its
// whole buffer to the odd rank after it, which adds it; the even ranks then
// wait while the other q ranks run the algorithm above, and finally receive
// the result from their odd neighbour. That costs n more bytes for those
// ranks, and two more latencies.
#include <ddl/parallel/collectives/collectives.hpp>

#include <vector>

#include <ddl/parallel/collectives/transport.hpp>

namespace ddl::parallel {
namespace {

constexpr int kFoldTag = 201;
constexpr int kHalvingTag = 202;
constexpr int kDoublingTag = 203;
constexpr int kUnfoldTag = 204;

// The range a rank owns at one round, and the half it hands over.
struct Round {
  int partner;  // real rank
  ChunkRange kept, given;
};

}  // namespace

namespace detail {

template <class Transport>
void halving_doubling_allreduce(Transport& transport, float* data, std::int64_t n, ReduceOp op) {
  const int p = transport.size(), r = transport.rank();
  if (p == 1) return;
  int q = 1;
  while (q * 2 <= p) q *= 2;
  const int extra = p - q;

  // Fold the first 2·extra ranks pairwise, so q ranks remain.
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      transport.exchange(data, n, r + 1, nullptr, 0, r + 1, kFoldTag);
      transport.exchange(nullptr, 0, r + 1, data, n, r + 1, kUnfoldTag);
      return;
    }
    transport.exchange_add(nullptr, 0, r - 1, data, n, r - 1, kFoldTag);
  }
  // Ranks among the q that remain: odd folded ranks r/2, the rest r - extra.
  const int virtual_rank = r < 2 * extra ? r / 2 : r - extra;
  const auto real_rank = [&](int v) { return v < extra ? 2 * v + 1 : v + extra; };

  // Recursive halving: a reduce-scatter over ever smaller ranges.
  std::vector<Round> rounds;
  ChunkRange owned{0, n};
  for (int mask = q / 2; mask >= 1; mask /= 2) {
    const int partner_virtual = virtual_rank ^ mask;
    const std::int64_t middle = owned.begin + owned.size() / 2;
    const ChunkRange lower{owned.begin, middle}, upper{middle, owned.end};
    const bool keep_lower = virtual_rank < partner_virtual;
    const Round round{real_rank(partner_virtual), keep_lower ? lower : upper, keep_lower ? upper : lower};
    transport.exchange_add(data + round.given.begin, round.given.size(), round.partner, data + round.kept.begin,
                           round.kept.size(), round.partner, kHalvingTag);
    rounds.push_back(round);
    owned = round.kept;
  }
  transport.complete(data + owned.begin, owned.size(), op);
  // Recursive doubling: the rounds backwards, each handing over what it kept.
  for (auto round = rounds.rbegin(); round != rounds.rend(); ++round) {
    transport.exchange(data + round->kept.begin, round->kept.size(), round->partner, data + round->given.begin,
                       round->given.size(), round->partner, kDoublingTag);
  }
  // Unfold: hand the result to the even rank folded into this one.
  if (r < 2 * extra) transport.exchange(data, n, r - 1, nullptr, 0, r - 1, kUnfoldTag);
}

DDL_FOR_BOTH_TRANSPORTS(halving_doubling_allreduce, float*, std::int64_t, ReduceOp)

}  // namespace detail

void halving_doubling_allreduce(const Communicator& comm, std::span<float> data) {
  detail::HostTransport transport(comm, WireFormat::float32);
  detail::halving_doubling_allreduce(transport, data.data(), static_cast<std::int64_t>(data.size()), ReduceOp::sum);
}

}  // namespace ddl::parallel
