// core's DDL_* environment variables, each read here and nowhere else with
// its default and meaning (NCCL_PARAM / Horovod common.h style); the
// parallel module's are in parallel/config.hpp. The README lists them all.
#pragma once

#include <cstdint>

namespace ddl::config {

// DDL_CPU_DEVICES (default 1): number of logical CPU devices cpu:0..N-1.
int cpu_device_count();

// DDL_NUM_THREADS (default: OpenMP's choice, usually the core count):
// threads used by ddl's CPU kernels, its tiled GEMM, oneDNN's primitives
// and Eigen.
int num_threads();

// Overrides DDL_NUM_THREADS for the rest of the process (1 to kMaxThreads:
// far past any core count, below where OpenMP's runtime breaks).
inline constexpr int kMaxThreads = 1024;
void set_num_threads(int threads);

// DDL_CPU_CONV (default auto): how the CPU convolution (oneDNN) computes.
//   auto:     oneDNN's choice for the shape where the channel counts are
//             multiples of 16, direct elsewhere. On AVX-512 it takes
//             Winograd's F(4x4, 3x3) for 3x3 kernels at stride 1 when the
//             problem is large enough (the Keras MNIST CNN's 32->64 layer:
//             ~2x faster than direct).
//   direct:   the direct sum of products everywhere.
//   winograd: Winograd wherever oneDNN has it (3x3, stride 1, no dilation,
//             channels in 16s, AVX-512), direct elsewhere.
// Where oneDNN has no Winograd kernel (CPUs without AVX-512), ddl's own
// F(4x4, 3x3) takes its place in float32: in auto where the channels come
// in 16s and the output is at least 7x7, with at least 32 channels or 16
// at 16x16 or more (where it measured faster than oneDNN's direct
// kernel), in winograd for every undilated 3x3 stride-1 convolution with
// padding up to 2 (layers/conv2d_winograd_cpu.cpp).
//   ddl-winograd: ddl's own F(4x4, 3x3) for every undilated 3x3
//             stride-1 convolution with padding up to 2 in float32, also
//             where oneDNN has a Winograd kernel and where `auto` would
//             not run one (a first layer's one input channel): to test
//             and time ddl's kernels on AVX-512; elsewhere as winograd.
// Winograd's rounding error is larger than the direct sum's but stays
// within float32's worst-case bound for the algorithm
// (tests/layers/test_conv2d.cpp).
enum class CpuConvolution { Auto, Direct, Winograd, DdlWinograd };
CpuConvolution cpu_convolution();
void set_cpu_convolution(CpuConvolution algorithm);

// DDL_CUDA_CONV (default deterministic): which of cuDNN's convolution
// algorithms the GPU takes, each the first in a ranking for the shape that
// fits the workspace budget.
//   deterministic: only those whose results repeat bit for bit run to run
//                  (cuDNN's fastest backward-filter and backward-data
//                  algorithms sum with atomics, in an order that varies),
//                  as cuDNN's heuristic ranks them.
//   fastest:       any, as cuDNN's heuristic ranks them.
//   benchmark:     any, as cuDNN ranks them by running each once, at the
//                  first use of each shape (PyTorch's cudnn.benchmark): the
//                  first step of each shape is slower, and results can
//                  differ in the last bits run to run (from the algorithm,
//                  as with fastest, and from the choice itself).
enum class CudaConvolution { Deterministic, Fastest, Benchmark };
CudaConvolution cuda_convolution();
void set_cuda_convolution(CudaConvolution algorithms);

// DDL_CPU_PRECISION (default float32): the precision of the CPU's matrix
// products, the convolutions' and the GEMMs' (Dense, matmul).
//   float32: float32 throughout.
//   bf16:    mixed precision, as Keras's mixed_bfloat16 policy and
//            torch.autocast: the operands are rounded to bfloat16 (8
//            significant bits) for the products, which are summed in
//            float32; the results, the weights, the elementwise layers and
//            the optimizer stay float32. Needs AVX512-BF16 (AMD Zen 4,
//            Intel Cooper Lake and Sapphire Rapids and later): elsewhere
//            choosing it is an error (oneDNN would only emulate it, slower
//            than float32).
enum class CpuPrecision { Float32, BFloat16 };
CpuPrecision cpu_precision();
void set_cpu_precision(CpuPrecision precision);
// Whether this CPU has the AVX512-BF16 instructions bf16 needs.
bool cpu_has_bf16();

// DDL_OP_FUSION (default on): whether Sequential runs a Conv2d followed
// directly by a ReLU as one op, conv2d_relu, which on the CPU saves a pass
// over the convolution's output, and a ReLU followed by a max pooling that
// shrinks the image as the pooling and then the ReLU, over fewer values
// (layers/sequential.hpp: each pair on one device, in one recomputed
// segment if any). Set before training: forward reads it per pass.
//   on:  as above. The same bits as the layers in order wherever the
//        convolution's sum is a number; a NaN sum can come out 0 instead
//        of NaN (layers/conv2d.hpp says when).
//   off: every layer on its own, in order.
bool op_fusion();
void set_op_fusion(bool on);

// The CPUs this process may run on (its affinity mask): more threads than
// these only slow the kernels down.
int available_cpus();

// Reads every core DDL_* variable now, so a bad value is an error here (at
// start-up) rather than wherever it is first used; parallel has its own.
void check_environment();

// The readers of DDL_* variables, for the settings other modules keep
// beside their code (parallel/config.hpp): the variable's value, or
// `fallback` when it is unset or empty; anything but a positive number (up
// to `max`, which keeps a value the reader converts, as seconds into a
// clock's nanoseconds, from overflowing) is an error naming the variable.
double positive_double_from_environment(const char* name, double fallback, double max);
std::int64_t positive_bytes_from_environment(const char* name, std::int64_t fallback);

}  // namespace ddl::config

namespace ddl {
using config::set_cpu_convolution;
using config::set_cpu_precision;
using config::set_cuda_convolution;
using config::set_num_threads;
using config::set_op_fusion;
}
