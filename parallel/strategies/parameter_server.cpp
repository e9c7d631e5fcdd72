// The parameter-server strategy (see parameter_server.hpp). A push is the
// gradients of the parameters one server owns, concatenated in parameter
// order; a pull is their values, laid out the same way.
#include <ddl/parallel/strategies/parameter_server.hpp>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>
#include <thread>

#include <ddl/core/backend.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/timeline.hpp>
#include <ddl/optim/optimizer.hpp>
#include <ddl/parallel/collectives/local_reduce.hpp>
#include <ddl/parallel/config.hpp>
#include <ddl/parallel/strategies/initial_state.hpp>

namespace ddl::parallel {
namespace {

constexpr int kPushTag = 1101;
constexpr int kPullTag = 1102;
constexpr int kCheckpointTag = 1103;

std::span<std::byte> bytes_of(std::vector<float>& values) { return std::as_writable_bytes(std::span(values)); }

}  // namespace

struct ParameterServer::State {
  State(Communicator communicator, ParameterServerOptions opts) : comm(std::move(communicator)), options(opts) {}

  Communicator comm;
  ParameterServerOptions options;
  int workers = 0;
  std::vector<Tensor> parameters;               // registration order
  std::vector<std::vector<std::size_t>> owned;  // per server: indices into parameters
  std::vector<std::int64_t> owned_elements;     // per server
  // Asynchronous servers: pushes served per worker, and the workers whose
  // answer waits for the slowest to catch up.
  std::vector<std::int64_t> pushes;
  std::vector<int> deferred;
  std::int64_t staleness_seen = 0;
  std::int64_t steps_left = 0;  // a server's steps left in the epoch

  int server_index() const { return comm.rank() - workers; }
  bool is_server() const { return comm.rank() >= workers; }

  // The owned parameters' gradients (zeros where none) or values, flattened.
  std::vector<float> pack(int server, bool gradients) const {
    std::vector<float> flat(static_cast<std::size_t>(owned_elements[static_cast<std::size_t>(server)]), 0.0f);
    std::size_t offset = 0;
    for (const std::size_t i : owned[static_cast<std::size_t>(server)]) {
      const Tensor source = gradients ? parameters[i].grad() : parameters[i];
      if (source.defined())
        backend::copy_bytes(cpu(), flat.data() + offset, source.device(), source.raw_data(), source.nbytes());
      offset += static_cast<std::size_t>(parameters[i].numel());
    }
    return flat;
  }

  void unpack_values(int server, const std::vector<float>& flat) const {
    std::size_t offset = 0;
    for (const std::size_t i : owned[static_cast<std::size_t>(server)]) {
      const Tensor& p = parameters[i];
      backend::copy_bytes(p.device(), p.raw_data(), cpu(), flat.data() + offset, p.nbytes());
      offset += static_cast<std::size_t>(p.numel());
    }
  }

  void set_gradients(int server, const std::vector<float>& flat) const {
    std::size_t offset = 0;
    for (const std::size_t i : owned[static_cast<std::size_t>(server)]) {
      const Tensor& p = parameters[i];
      const Tensor grad = Tensor::empty(p.shape(), {DType::Float32, p.device(), false});
      backend::copy_bytes(p.device(), grad.raw_data(), cpu(), flat.data() + offset, grad.nbytes());
      p.set_grad(grad);
      offset += static_cast<std::size_t>(p.numel());
    }
  }

  void answer(int worker) {
    // Measured here from the counts, not taken from release_deferred's
    // test, so that a wrong test shows.
    const std::int64_t ahead = pushes[static_cast<std::size_t>(worker)] - std::ranges::min(pushes);
    staleness_seen = std::max(staleness_seen, ahead);
    std::vector<float> values = pack(server_index(), false);
    comm.send(bytes_of(values), worker, kPullTag);
  }

  // Answers deferred workers that are no longer too far ahead.
  void release_deferred() {
    const std::int64_t slowest = *std::min_element(pushes.begin(), pushes.end());
    for (auto it = deferred.begin(); it != deferred.end();) {
      if (pushes[static_cast<std::size_t>(*it)] - slowest <= options.max_staleness) {
        answer(*it);
        it = deferred.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Asynchronous: serve `workers` pushes from whoever sends them, each its
  // own optimizer step.
  void serve_asynchronously(layers::Module& model, optim::Optimizer& optimizer) {
    const double timeout = config::stall_timeout_seconds();
    for (int served = 0; served < workers; ++served) {
      const auto start = std::chrono::steady_clock::now();
      std::optional<int> worker;
      while (!(worker = comm.probe_any(kPushTag))) {
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout) {
          comm.abort(
              fmt::format("stalled: parameter server rank {} has had no push from any worker for {:g} s "
                          "(DDL_STALL_TIMEOUT)",
                          comm.rank(), timeout));
        }
        std::this_thread::yield();
      }
      std::vector<float> flat(static_cast<std::size_t>(owned_elements[static_cast<std::size_t>(server_index())]));
      comm.recv(bytes_of(flat), *worker, kPushTag);
      set_gradients(server_index(), flat);
      optimizer.step();
      model.zero_grad();
      ++pushes[static_cast<std::size_t>(*worker)];
      deferred.push_back(*worker);
      release_deferred();
    }
  }
};

ParameterServer::ParameterServer(Communicator comm, ParameterServerOptions options)
    : state_(std::make_unique<State>(std::move(comm), options)) {
  config::check_environment();  // a bad DDL_* value named here, not in a later wait
  State& s = *state_;
  DDL_CHECK(options.servers >= 1 && options.servers < s.comm.size(),
            "ParameterServer: {} server(s) among {} ranks leaves no worker; use 1 .. {} servers", options.servers,
            s.comm.size(), s.comm.size() - 1);
  DDL_CHECK(options.max_staleness >= 0, "ParameterServer: max_staleness must be >= 0, got {}", options.max_staleness);
  s.workers = s.comm.size() - options.servers;
  s.pushes.assign(static_cast<std::size_t>(s.workers), 0);
}

ParameterServer::~ParameterServer() = default;

int ParameterServer::rank() const { return state_->comm.rank(); }
int ParameterServer::world_size() const { return state_->comm.size(); }
bool ParameterServer::is_server() const { return state_->is_server(); }
int ParameterServer::worker_count() const { return state_->workers; }
std::int64_t ParameterServer::staleness_seen() const { return state_->staleness_seen; }

std::string ParameterServer::describe(std::int64_t shard_batch) const {
  return fmt::format("{} parameter server: {} worker(s) of {} per step and {} server(s)",
                     state_->options.asynchronous ? "asynchronous" : "synchronous", worker_count(), shard_batch,
                     world_size() - worker_count());
}
optim::Shard ParameterServer::shard() const { return {state_->is_server() ? 0 : rank(), state_->workers}; }

void ParameterServer::prepare(layers::Module& model, optim::Optimizer* optimizer) {
  State& s = *state_;
  broadcast_initial_state(s.comm, model, optimizer, "ParameterServer");
  s.parameters = model.parameters();
  // Largest parameters first, each to the least loaded server: balanced
  // traffic, and the same assignment on every rank.
  std::vector<std::size_t> order(s.parameters.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return s.parameters[a].numel() > s.parameters[b].numel(); });
  s.owned.assign(static_cast<std::size_t>(s.options.servers), {});
  s.owned_elements.assign(static_cast<std::size_t>(s.options.servers), 0);
  for (const std::size_t i : order) {
    const auto least = static_cast<std::size_t>(std::min_element(s.owned_elements.begin(), s.owned_elements.end()) -
                                                s.owned_elements.begin());
    s.owned[least].push_back(i);
    s.owned_elements[least] += s.parameters[i].numel();
  }
  for (auto& indices : s.owned) std::sort(indices.begin(), indices.end());
}

void ParameterServer::begin_epoch(optim::BatchSource& data, std::int64_t epoch) {
  if (!state_->is_server()) return Strategy::begin_epoch(data, epoch);
  state_->steps_left = data.batches_per_epoch(shard());
}

std::optional<optim::Batch> ParameterServer::next_batch(optim::BatchSource& data) {
  State& s = *state_;
  if (!s.is_server()) return Strategy::next_batch(data);
  if (s.steps_left == 0) return std::nullopt;
  --s.steps_left;
  return optim::Batch{};
}

optim::StepOutput ParameterServer::forward_backward(layers::Module& model, const optim::LossFunction& loss,
                                                    const optim::Batch& batch, const optim::StepShare& share) {
  if (state_->is_server()) return {};
  return Strategy::forward_backward(model, loss, batch, share);
}

optim::StepOutput ParameterServer::forward(layers::Module& model, const optim::Batch& batch,
                                           const optim::LossFunction& loss) {
  if (state_->is_server()) return {};
  return Strategy::forward(model, batch, loss);
}

void ParameterServer::update(layers::Module& model, optim::Optimizer& optimizer) {
  State& s = *state_;
  if (!s.is_server()) {
    // Push each server its share, then take each server's new values.
    {
      const timeline::Span push("communication", "push gradients");
      std::vector<std::vector<float>> pushes;
      std::vector<Request> sends;
      for (int server = 0; server < s.options.servers; ++server) pushes.push_back(s.pack(server, true));
      for (int server = 0; server < s.options.servers; ++server) {
        sends.push_back(s.comm.isend(bytes_of(pushes[static_cast<std::size_t>(server)]), s.workers + server, kPushTag));
      }
      for (Request& send : sends) send.wait();
    }
    const timeline::Span pull("communication", "pull parameters");
    for (int server = 0; server < s.options.servers; ++server) {
      std::vector<float> values(static_cast<std::size_t>(s.owned_elements[static_cast<std::size_t>(server)]));
      s.comm.recv(bytes_of(values), s.workers + server, kPullTag);
      s.unpack_values(server, values);
    }
    return;
  }
  if (s.options.asynchronous) return s.serve_asynchronously(model, optimizer);
  // Synchronous: one step on the average of every worker's push, summed in
  // worker order, then every worker gets the new values.
  const auto elements = static_cast<std::size_t>(s.owned_elements[static_cast<std::size_t>(s.server_index())]);
  std::vector<float> sum(elements, 0.0f), push(elements);
  {
    const timeline::Span receive("communication", "receive pushes");
    for (int worker = 0; worker < s.workers; ++worker) {
      s.comm.recv(bytes_of(push), worker, kPushTag);
      detail::add_into(sum.data(), push.data(), static_cast<std::int64_t>(elements));
    }
  }
  detail::scale(sum.data(), static_cast<std::int64_t>(elements), 1.0f / static_cast<float>(s.workers));
  s.set_gradients(s.server_index(), sum);
  optimizer.step();
  const timeline::Span answer("communication", "answer pulls");
  for (int worker = 0; worker < s.workers; ++worker) s.answer(worker);
}

void ParameterServer::gather_state(const layers::Module& /*model*/, optim::TrainingState& state) {
  const State& s = *state_;
  if (!s.is_server() && s.comm.rank() != 0) return;
  // Entries "<k>.<buffer>" belong to parameter k's owner; "step" comes from
  // the first server (every server steps once per update).
  std::vector<int> owner(s.parameters.size(), 0);
  for (std::size_t server = 0; server < s.owned.size(); ++server) {
    for (const std::size_t k : s.owned[server]) owner[k] = static_cast<int>(server);
  }
  const auto owner_of = [&](const std::string& name) {
    if (name == "step") return 0;
    const std::size_t k = std::stoul(name.substr(0, name.find('.')));
    DDL_CHECK(k < owner.size(), "ParameterServer: optimizer state entry '{}' names parameter {}, but the model has {}",
              name, k, owner.size());
    return owner[k];
  };
  for (auto& [name, tensor] : state.optimizer) {
    const int server_rank = s.workers + owner_of(name);
    if (s.comm.rank() == server_rank) s.comm.send(tensor, 0, kCheckpointTag);
    if (s.comm.rank() == 0) {
      // The entry shares rank 0's optimizer's memory: receive into a copy.
      tensor = tensor.detach().clone();
      s.comm.recv(tensor, server_rank, kCheckpointTag);
    }
  }
}

void ParameterServer::sum_over_ranks(std::vector<double>& values) { state_->comm.sum_doubles(values); }

}  // namespace ddl::parallel
