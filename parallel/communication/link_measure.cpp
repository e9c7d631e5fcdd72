// See link_measure.hpp.
#include <ddl/parallel/communication/link_measure.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>

#include <ddl/core/check.hpp>

namespace ddl::parallel {

double seconds_of(const std::function<void()>& operation) {
  const auto start = std::chrono::steady_clock::now();
  operation();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int agreed_repetitions(const Communicator& comm, double once, double budget) {
  std::vector<double> count{std::clamp(std::floor(budget / std::max(once, 1e-9)), 5.0, 2000.0)};
  comm.broadcast_bytes(std::as_writable_bytes(std::span(count)), 0);
  return static_cast<int>(count[0]);
}

double median(std::vector<double> values) {
  DDL_CHECK(!values.empty(), "median: no values");
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

FittedLink measure_link(const Communicator& comm, int peer, double budget, std::size_t largest) {
  DDL_CHECK(peer > 0 && peer < comm.size(), "measure_link: rank {} is not another rank of the {}", peer, comm.size());
  FittedLink fitted;
  std::vector<std::byte> buffer(std::max<std::size_t>(largest, 32));
  for (std::size_t bytes = 8; bytes <= buffer.size(); bytes *= 4) {
    const std::span<std::byte> message(buffer.data(), bytes);
    const auto ping_pong = [&] {
      if (comm.rank() == 0) {
        comm.send(message, peer, 7401);
        comm.recv(message, peer, 7401);
      } else if (comm.rank() == peer) {
        comm.recv(message, 0, 7401);
        comm.send(message, 0, 7401);
      }
    };
    const int repetitions = agreed_repetitions(comm, seconds_of(ping_pong), budget);
    std::vector<double> times;
    for (int i = 0; i < repetitions; ++i) times.push_back(seconds_of(ping_pong) / 2.0);
    std::vector<double> one_way{median(times)};
    comm.broadcast_bytes(std::as_writable_bytes(std::span(one_way)), 0);
    fitted.bytes.push_back(static_cast<double>(bytes));
    fitted.seconds.push_back(one_way[0]);
  }
  fitted.link = cost::fit_link(fitted.bytes, fitted.seconds);
  std::vector<double> errors;
  for (std::size_t i = 0; i < fitted.bytes.size(); ++i) {
    errors.push_back(std::abs(fitted.link.seconds(fitted.bytes[i]) / fitted.seconds[i] - 1.0));
  }
  fitted.max_error = *std::max_element(errors.begin(), errors.end());
  fitted.median_error = median(errors);
  return fitted;
}

}  // namespace ddl::parallel
