#include <ddl/core/autograd.hpp>
#include <ddl/core/backend.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/core/ops/helpers.hpp>
#include <ddl/core/tensor.hpp>

#include <sstream>

namespace ddl {

Tensor Tensor::empty(const Shape& shape, const TensorOptions& options) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage =
      std::make_shared<Storage>(options.device, static_cast<std::size_t>(shape.numel()) * element_size(options.dtype));
  impl->shape = shape;
  impl->dtype = options.dtype;
  DDL_CHECK(!options.requires_grad || options.dtype == DType::Float32, "only float32 tensors can require grad (got {})",
            options.dtype);
  impl->requires_grad = options.requires_grad;
  return Tensor(std::move(impl));
}

TensorImpl& Tensor::checked_impl(const char* what) const {
  DDL_CHECK(impl_ != nullptr, "{}: the tensor is undefined", what);
  return *impl_;
}

const Shape& Tensor::shape() const { return checked_impl("shape").shape; }
DType Tensor::dtype() const { return checked_impl("dtype").dtype; }
const Device& Tensor::device() const { return checked_impl("device").storage->device(); }
void* Tensor::raw_data() const { return checked_impl("data").storage->data(); }
void* Tensor::stored_data() const { return checked_impl("stored_data").storage->stored_data(); }
std::shared_ptr<const MemoryForm> Tensor::stored_form() const { return checked_impl("stored_form").storage->form(); }
void Tensor::set_stored_form(std::shared_ptr<const MemoryForm> form) const {
  checked_impl("set_stored_form").storage->set_form(std::move(form));
}

std::int64_t Tensor::size(int dim) const { return shape()[shape().normalize_dim(dim, "size")]; }

template <class T>
T* Tensor::data() const {
  DDL_CHECK(dtype() == dtype_of<T>(), "data<{}>(): the tensor holds {}", dtype_name(dtype_of<T>()), dtype());
  return static_cast<T*>(raw_data());
}
template float* Tensor::data<float>() const;
template std::int32_t* Tensor::data<std::int32_t>() const;
template std::int64_t* Tensor::data<std::int64_t>() const;

Tensor Tensor::reshape(const Shape& new_shape) const {
  DDL_CHECK(new_shape.numel() == numel(), "reshape: cannot view shape {} ({} elements) as {} ({} elements)", shape(),
            numel(), new_shape, new_shape.numel());
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->shape = new_shape;
  impl->dtype = impl_->dtype;
  Tensor result(std::move(impl));
  if (autograd::needs_grad({this})) {
    const Shape old_shape = shape();
    autograd::record("ReshapeBackward", {this}, result,
                     [old_shape](const Tensor& g) { return std::vector{g.reshape(old_shape)}; });
  }
  return result;
}

Tensor Tensor::flat_slice(std::int64_t begin, const Shape& shape) const {
  DDL_CHECK(begin >= 0 && begin + shape.numel() <= numel(),
            "flat_slice: elements [{}, {}) lie outside a tensor of shape {} ({} elements)", begin,
            begin + shape.numel(), this->shape(), numel());
  const std::size_t element = element_size(dtype());
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(impl_->storage, static_cast<std::size_t>(begin) * element,
                                            static_cast<std::size_t>(shape.numel()) * element);
  impl->shape = shape;
  impl->dtype = impl_->dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::flatten(int start_dim, int end_dim) const {
  const Shape& s = shape();
  if (s.rank() == 0) return reshape(Shape{1});
  const int start = s.normalize_dim(start_dim, "flatten");
  const int end = s.normalize_dim(end_dim, "flatten");
  DDL_CHECK(start <= end, "flatten: start_dim {} is after end_dim {} for shape {}", start_dim, end_dim, s);
  std::vector<std::int64_t> dims;
  for (int i = 0; i < start; ++i) dims.push_back(s[i]);
  std::int64_t merged = 1;
  for (int i = start; i <= end; ++i) merged *= s[i];
  dims.push_back(merged);
  for (int i = end + 1; i < s.rank(); ++i) dims.push_back(s[i]);
  return reshape(Shape(dims));
}

Tensor Tensor::to(const Device& target) const {
  if (target == device()) return *this;
  Tensor result = Tensor::empty(shape(), {dtype(), target, false});
  backend::copy_bytes(target, result.raw_data(), device(), raw_data(), nbytes());
  if (autograd::needs_grad({this})) {
    const Device source = device();
    autograd::record("ToDeviceBackward", {this}, result,
                     [source](const Tensor& g) { return std::vector{g.to(source)}; });
  }
  return result;
}

Tensor Tensor::clone() const {
  Tensor result = Tensor::empty(shape(), {dtype(), device(), false});
  backend::copy_bytes(device(), result.raw_data(), device(), raw_data(), nbytes());
  if (autograd::needs_grad({this})) {
    autograd::record("CloneBackward", {this}, result, [](const Tensor& g) { return std::vector{g}; });
  }
  return result;
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = checked_impl("detach").storage;
  impl->shape = impl_->shape;
  impl->dtype = impl_->dtype;
  return Tensor(std::move(impl));
}

void Tensor::copy_from(const Tensor& source) const {
  DDL_CHECK(source.defined(), "copy_from: the source tensor is undefined");
  DDL_CHECK(source.shape() == shape() && source.dtype() == dtype(),
            "copy_from: source {} {} does not match destination {} {}", source.dtype(), source.shape(), dtype(),
            shape());
  backend::copy_bytes(device(), raw_data(), source.device(), source.raw_data(), nbytes());
}

void Tensor::move_into(const Tensor& place) const {
  TensorImpl& impl = checked_impl("move_into");
  DDL_CHECK(place.defined() && place.numel() == numel() && place.dtype() == dtype() && place.device() == device(),
            "move_into: a {} {} tensor on {} cannot move into {}", dtype(), shape(), device(),
            place.defined() ? fmt::format("a {} {} tensor on {}", place.dtype(), place.shape(), place.device())
                            : std::string("an undefined tensor"));
  backend::copy_bytes(device(), place.raw_data(), device(), raw_data(), nbytes());
  impl.storage = place.impl()->storage;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  DDL_CHECK(dtype() == dtype_of<T>(), "to_vector<{}>(): the tensor holds {}", dtype_name(dtype_of<T>()), dtype());
  std::vector<T> values(static_cast<std::size_t>(numel()));
  backend::copy_bytes(cpu(), values.data(), device(), raw_data(), nbytes());
  return values;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<std::int32_t> Tensor::to_vector<std::int32_t>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;

template <class T>
T Tensor::item() const {
  DDL_CHECK(numel() == 1, "item(): the tensor has shape {} ({} elements), not one element", shape(), numel());
  return to_vector<T>()[0];
}
template float Tensor::item<float>() const;
template std::int32_t Tensor::item<std::int32_t>() const;
template std::int64_t Tensor::item<std::int64_t>() const;

float Tensor::item() const { return item<float>(); }

float Tensor::at(std::initializer_list<std::int64_t> index) const {
  DDL_CHECK(dtype() == DType::Float32, "at(): the tensor of shape {} holds {}, not float32", shape(), dtype());
  const Shape& s = shape();
  DDL_CHECK(static_cast<int>(index.size()) == s.rank(), "at(): {} indices given for shape {}", index.size(), s);
  const auto strides = s.strides();
  std::int64_t offset = 0;
  int d = 0;
  for (const std::int64_t i : index) {
    DDL_CHECK(i >= 0 && i < s[d], "at(): index {} is out of range for dim {} of shape {}", i, d, s);
    offset += i * strides[static_cast<std::size_t>(d)];
    ++d;
  }
  float value = 0.0f;
  backend::copy_bytes(cpu(), &value, device(), data<float>() + offset, sizeof(float));
  return value;
}

bool Tensor::requires_grad() const { return checked_impl("requires_grad").requires_grad; }

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  TensorImpl& impl = checked_impl("set_requires_grad");
  DDL_CHECK(impl.grad_fn == nullptr,
            "set_requires_grad: only leaf tensors can change requires_grad (this one was "
            "made by {}); use detach() first",
            impl.grad_fn ? impl.grad_fn->name() : "");
  DDL_CHECK(!requires_grad || impl.dtype == DType::Float32,
            "set_requires_grad: only float32 tensors can require "
            "grad (got {})",
            impl.dtype);
  impl.requires_grad = requires_grad;
  return *this;
}

bool Tensor::is_leaf() const { return checked_impl("is_leaf").grad_fn == nullptr; }

Tensor Tensor::grad() const { return Tensor(checked_impl("grad").grad); }

void Tensor::set_grad(const Tensor& grad) const {
  TensorImpl& impl = checked_impl("set_grad");
  if (grad.defined()) {
    DDL_CHECK(grad.shape() == impl.shape && grad.device() == device(),
              "set_grad: gradient of shape {} on {} does not match the tensor's shape {} on {}", grad.shape(),
              grad.device(), impl.shape, device());
  }
  impl.grad = grad.impl();
}

void Tensor::zero_grad() const { checked_impl("zero_grad").grad.reset(); }

const std::shared_ptr<Node>& Tensor::grad_fn() const { return checked_impl("grad_fn").grad_fn; }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::run_backward(*this, gradient, retain_graph);
}

void Tensor::register_grad_hook(GradHook hook) const {
  TensorImpl& impl = checked_impl("register_grad_hook");
  DDL_CHECK(impl.grad_fn == nullptr && impl.requires_grad,
            "register_grad_hook: only leaf tensors that require grad have gradient hooks");
  impl.grad_hooks.push_back(std::move(hook));
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(shape=" << shape() << ", dtype=" << dtype() << ", device=" << device();
  if (requires_grad()) os << ", requires_grad";
  os << ", values=[";
  constexpr std::int64_t kShown = 8;
  const std::int64_t shown = std::min(numel(), kShown);
  const Tensor head = slice(flatten().detach(), 0, shown);
  const auto append = [&](const auto& values) {
    for (std::size_t i = 0; i < values.size(); ++i) os << (i ? ", " : "") << values[i];
  };
  switch (dtype()) {
    case DType::Float32:
      append(head.to_vector<float>());
      break;
    case DType::Int32:
      append(head.to_vector<std::int32_t>());
      break;
    case DType::Int64:
      append(head.to_vector<std::int64_t>());
      break;
  }
  if (numel() > shown) os << ", ... (" << numel() << " total)";
  os << "])";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& tensor) { return os << tensor.str(); }

}  // namespace ddl
