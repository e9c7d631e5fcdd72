// Which oneDNN call each tile of the CPU's large products runs
// (core/cpu/gemm_cpu.cpp). Internal: not installed.
#pragma once

namespace ddl::cpu_backend {

// By default (Auto) oneDNN's sgemm where its matmul would run that
// ("gemm:jit", as on AVX2), the matmul primitive elsewhere (its brgemm
// kernels on AVX-512); either one by name, so that the tests run both on
// any CPU.
enum class TileKernel { Auto, Sgemm, Primitive };
void set_tile_kernel(TileKernel kernel);

}  // namespace ddl::cpu_backend
