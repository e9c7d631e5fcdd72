// Tensor: a handle to an n-dimensional, contiguous, row-major array on one
// device, plus what autograd needs (requires_grad, .grad, the node that made
// it). Copies of a Tensor share data, like PyTorch's tensors; reshape and
// view also share data, every other op makes a new tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <ddl/core/allocator.hpp>
#include <ddl/core/device.hpp>
#include <ddl/core/dtype.hpp>
#include <ddl/core/shape.hpp>

namespace ddl {

class Node;
class Tensor;
struct TensorImpl;

// Called with the tensor after its .grad has been updated by backward().
using GradHook = std::function<void(Tensor&)>;

struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = cpu();
  bool requires_grad = false;

  TensorOptions with_dtype(DType d) const { return {d, device, requires_grad}; }
  TensorOptions with_device(Device d) const { return {dtype, d, requires_grad}; }
  TensorOptions with_requires_grad(bool r = true) const { return {dtype, device, r}; }
};

class Tensor {
 public:
  Tensor() = default;  // undefined: holds nothing
  // Uninitialised memory of the given shape; see zeros()/ones() for values.
  static Tensor empty(const Shape& shape, const TensorOptions& options = {});

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int dim() const { return shape().rank(); }
  std::int64_t size(int dim) const;
  std::int64_t numel() const { return shape().numel(); }
  DType dtype() const;
  const Device& device() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * element_size(dtype()); }

  // Raw pointer to the first element (device memory for CUDA tensors).
  void* raw_data() const;
  template <class T>
  T* data() const;

  // The data as stored, perhaps in another order than row-major, and that
  // order (null: row-major; core/memory_form.hpp), for the ops that read
  // any: data() and raw_data() put the elements in row-major order first.
  // set_stored_form says that the bytes a kernel has just written are in
  // `form` (a CPU tensor with memory of its own). data() may move the bytes
  // of a tensor in another form: a tensor handed to another thread while
  // this one may still read its stored data should be read with data()
  // first (no op in ddl shares one so).
  void* stored_data() const;
  std::shared_ptr<const MemoryForm> stored_form() const;
  void set_stored_form(std::shared_ptr<const MemoryForm> form) const;

  // Views and copies.
  Tensor reshape(const Shape& shape) const;  // same numel; differentiable
  Tensor view(const Shape& shape) const { return reshape(shape); }
  Tensor flatten(int start_dim = 0, int end_dim = -1) const;
  // Elements [begin, begin + shape.numel()) of this tensor, in row-major
  // order, as a tensor of `shape` sharing its memory (no autograd history):
  // e.g. gradients that live inside one flat buffer, as data parallelism's
  // buckets.
  Tensor flat_slice(std::int64_t begin, const Shape& shape) const;
  Tensor to(const Device& device) const;  // differentiable; a real copy unless same device
  Tensor clone() const;                   // differentiable
  Tensor detach() const;                  // shares data, cut from the graph
  // Overwrites this tensor's values with `source`'s (same shape and dtype,
  // any device), in place and outside autograd: how parameters are updated.
  void copy_from(const Tensor& source) const;
  // Copies this tensor's values into `place` (as many elements, the same
  // dtype and device; usually a flat_slice of a larger buffer) and keeps
  // them there from now on: every handle to this tensor reads and writes
  // `place`'s memory. How sharded data parallelism lays the parameters of a
  // bucket out in one flat buffer (PyTorch FSDP's flat parameter), which a
  // single allgather then fills in place.
  void move_into(const Tensor& place) const;

  // Host access, for tests and printing (copies from the device if needed).
  template <class T>
  std::vector<T> to_vector() const;
  float item() const;  // the value of a one-element float tensor
  template <class T>
  T item() const;
  float at(std::initializer_list<std::int64_t> index) const;  // float tensors

  // Autograd.
  bool requires_grad() const;
  Tensor& set_requires_grad(bool requires_grad = true);
  bool is_leaf() const;
  Tensor grad() const;  // undefined until backward() reaches this tensor
  void set_grad(const Tensor& grad) const;
  void zero_grad() const;  // drops .grad
  const std::shared_ptr<Node>& grad_fn() const;
  // Backward from this tensor: a scalar, or any shape with an explicit
  // upstream gradient of the same shape.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // On a leaf: runs after each backward() that updated its .grad.
  void register_grad_hook(GradHook hook) const;

  std::string str() const;

  // Internals, for ops and the autograd engine.
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  TensorImpl& checked_impl(const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& tensor);

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  DType dtype = DType::Float32;
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<Node> grad_fn;           // set on results of differentiable ops
  std::shared_ptr<Node> grad_accumulator;  // created lazily on leaves
  std::vector<GradHook> grad_hooks;
};

}  // namespace ddl
