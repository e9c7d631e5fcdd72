// The order a CPU tensor's elements are stored in, where it is not the
// row-major order every op assumes. oneDNN's convolutions run fastest on
// "blocked" activations (on AVX-512 NCHW's channels in blocks of 16, the
// block innermost: nChw16c), and reordering each convolution's input into
// that layout and its output back cost the MNIST CNN about a sixth of its
// step (docs/PERFORMANCE.md). So a convolution may leave its result in its
// own layout, and the tensor says so: its storage carries a MemoryForm.
//
// Nothing else needs to know. Reading a tensor's data (Tensor::data,
// raw_data) first puts its elements in row-major order, once, in place for
// every handle and view that shares the storage (PyTorch's "opaque" MKL-DNN
// tensors without their explicit to_dense()). The ops that do not care
// about the order read and write it as it is: the pointwise maps (ReLU, its
// gradient: helpers.hpp), the convolutions, whose kernels take any layout
// oneDNN can describe (layers/conv2d_cpu.cpp), and max pooling, which loops
// over the channel-blocked ones (layers/pool2d_cpu.cpp). So between two
// convolutions with only ReLUs and max pooling between them, forward and
// backward, the activations and their gradients never go back to NCHW.
#pragma once

#include <cstddef>

namespace ddl {

class MemoryForm {
 public:
  virtual ~MemoryForm() = default;
  // The bytes the elements take in this form (a storage must hold them).
  virtual std::size_t bytes() const = 0;
  // Writes the elements held at `from` in this form to `to` in row-major
  // order (the two do not overlap).
  virtual void to_row_major(const void* from, void* to) const = 0;
  // Whether `other` orders the same elements of the same shape the same
  // way, so that a pointwise op may pair them as they are.
  virtual bool same_as(const MemoryForm& other) const = 0;
};

}  // namespace ddl
