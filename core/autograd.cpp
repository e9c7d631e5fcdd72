#include <ddl/core/autograd.hpp>
#include <ddl/core/backend.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/kernels.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/core/timeline.hpp>

#include <optional>
#include <unordered_map>

namespace ddl {
namespace {
thread_local bool grad_mode_enabled = true;
}

bool grad_enabled() { return grad_mode_enabled; }

NoGradGuard::NoGradGuard() : previous_(grad_mode_enabled) { grad_mode_enabled = false; }
NoGradGuard::~NoGradGuard() { grad_mode_enabled = previous_; }
EnableGradGuard::EnableGradGuard() : previous_(grad_mode_enabled) { grad_mode_enabled = true; }
EnableGradGuard::~EnableGradGuard() { grad_mode_enabled = previous_; }

std::vector<Tensor> AccumulateGrad::backward(const Tensor& grad_output, const BackwardPass& /*pass*/) {
  const std::shared_ptr<TensorImpl> leaf = leaf_.lock();
  if (!leaf) return {};  // the parameter is gone; nobody will read its grad
  Tensor tensor(leaf);
  DDL_CHECK(grad_output.shape() == leaf->shape && grad_output.device() == tensor.device(),
            "AccumulateGrad: gradient of shape {} on {} for a leaf of shape {} on {}", grad_output.shape(),
            grad_output.device(), leaf->shape, tensor.device());
  if (!leaf->grad) {
    // A gradient nobody else holds (the engine's reference is the only one,
    // and its memory is its own) becomes .grad as it is: a Dense weight's
    // is as large as the weight, and a copy would hold it twice at once.
    // Otherwise a copy, since grad_output may be shared with other nodes'
    // results or be a part of another tensor.
    const std::shared_ptr<Storage>& storage = grad_output.impl()->storage;
    const bool unshared = grad_output.impl().use_count() == 1 && storage.use_count() == 1 && storage->owns_memory();
    leaf->grad = (unshared ? grad_output.detach() : grad_output.detach().clone()).impl();
  } else {
    // In place, so buffers that alias .grad (e.g. gradient buckets) see it.
    float* grad = static_cast<float*>(leaf->grad->storage->data());
    backend::launch(tensor.device(), grad_output.numel(),
                    kernels::Zip2<fn::Add>{grad, grad_output.data<float>(), grad, {}});
  }
  autograd::run_grad_hooks(leaf);
  return {};
}

namespace autograd {

bool needs_grad(const std::vector<const Tensor*>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor* input : inputs) {
    if (input->defined() && input->requires_grad()) return true;
  }
  return false;
}

void run_grad_hooks(const std::shared_ptr<TensorImpl>& leaf) {
  Tensor tensor(leaf);
  for (GradHook& hook : leaf->grad_hooks) hook(tensor);
}

Tensor grad_to_add_into(const std::shared_ptr<TensorImpl>& leaf) {
  if (!leaf || !leaf->grad || !leaf->requires_grad || leaf->grad_fn) return {};
  // One owner is the leaf, one the single node that records it as input.
  if (leaf->grad_accumulator.use_count() != 2) return {};
  const Tensor grad(leaf->grad), tensor(leaf);
  if (grad.shape() != tensor.shape() || grad.device() != tensor.device()) return {};
  // On the CPU in float32 a GEMM adding into zeros gives the bits of the
  // product alone (Eigen adds each depth block's sum into C either way), so
  // a bucket made before or after the weight's gradient holds the same
  // values. cuBLAS may choose another kernel for beta = 1, and bfloat16
  // products go through another oneDNN primitive; neither is checked yet,
  // so their gradients go through the accumulator as before.
  if (grad.device().type() != DeviceType::CPU || config::cpu_precision() != config::CpuPrecision::Float32) return {};
  return grad;
}

std::shared_ptr<Node> edge_to(const Tensor& input) {
  if (!input.defined() || !input.requires_grad()) return nullptr;
  TensorImpl& impl = *input.impl();
  if (impl.grad_fn) return impl.grad_fn;
  if (!impl.grad_accumulator) impl.grad_accumulator = std::make_shared<AccumulateGrad>(input.impl());
  return impl.grad_accumulator;
}

void record(const std::shared_ptr<Node>& node, const std::vector<const Tensor*>& inputs, Tensor& output) {
  for (const Tensor* input : inputs) node->next.push_back(edge_to(*input));
  output.impl()->grad_fn = node;
  output.impl()->requires_grad = true;
}

void record(const char* name, const std::vector<const Tensor*>& inputs, Tensor& output, BackwardFn backward) {
  record(std::make_shared<FunctionNode>(name, std::move(backward)), inputs, output);
}

void record(const char* name, const std::vector<const Tensor*>& inputs, Tensor& output, PassBackwardFn backward) {
  record(std::make_shared<FunctionNode>(name, std::move(backward)), inputs, output);
}

void run_backward(const Tensor& root, const Tensor& grad_root, bool retain_graph, const BackwardPass& caller_pass) {
  DDL_CHECK(root.defined(), "backward: the tensor is undefined");
  DDL_CHECK(root.requires_grad(), "backward: tensor of shape {} does not require grad and has no grad_fn",
            root.shape());
  Tensor seed = grad_root;
  if (!seed.defined()) {
    DDL_CHECK(root.numel() == 1, "backward: a gradient must be given for a non-scalar output of shape {}",
              root.shape());
    seed = ones(root.shape(), {DType::Float32, root.device(), false});
  }
  DDL_CHECK(seed.shape() == root.shape() && seed.device() == root.device(),
            "backward: gradient of shape {} on {} does not match the output's shape {} on {}", seed.shape(),
            seed.device(), root.shape(), root.device());
  const NoGradGuard no_grad;
  BackwardPass pass = caller_pass;
  pass.retain_graph = retain_graph;
  const std::shared_ptr<Node> root_node = edge_to(root);

  // Count, for every reachable node, how many edges lead into it; a node is
  // ready once all of them delivered their gradient (Kahn's algorithm gives
  // the reverse topological order, visiting each node once).
  std::unordered_map<Node*, int> pending_inputs;
  std::vector<Node*> stack{root_node.get()};
  pending_inputs[root_node.get()] = 0;
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const auto& next : node->next) {
      if (!next) continue;
      if (pending_inputs.find(next.get()) == pending_inputs.end()) stack.push_back(next.get());
      ++pending_inputs[next.get()];
    }
  }

  std::unordered_map<Node*, Tensor> gradients{{root_node.get(), seed}};
  std::vector<Node*> ready{root_node.get()};
  while (!ready.empty()) {
    Node* node = ready.back();
    ready.pop_back();
    DDL_CHECK(!node->released, "backward: {} was already freed by an earlier backward(); pass retain_graph=true "
              "to the first call to backward through the graph twice", node->name());
    const Tensor grad = std::move(gradients[node]);
    gradients.erase(node);
    std::vector<Tensor> input_grads;
    if (grad.defined()) {
      std::optional<timeline::Span> span;
      if (timeline::per_layer()) span.emplace("compute", node->name());
      input_grads = node->backward(grad, pass);
    }
    if (!retain_graph && dynamic_cast<AccumulateGrad*>(node) == nullptr) {
      node->release_saved();
      node->released = true;
    }
    for (std::size_t i = 0; i < node->next.size(); ++i) {
      Node* next = node->next[i].get();
      if (next == nullptr) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        Tensor& slot = gradients[next];
        slot = slot.defined() ? add(slot, input_grads[i]) : input_grads[i];
      }
      if (--pending_inputs[next] == 0) ready.push_back(next);
    }
  }
}

}  // namespace autograd
}  // namespace ddl
