// Products of a few rows by a large weight, y[m, n] = x[m, k] W[k, n], as a
// pipeline's micro-batches make them (wide_mlp: k = n = 4096, m = 128 / M):
// ddl's matmul (Eigen, which copies W into its blocked layout in every
// call) against oneDNN's matmul on a W reordered into oneDNN's blocked
// layout once, as a cache of packed weights would hold it for a batch's
// micro-batches (docs/PERFORMANCE.md, "Weight gradients once per batch").
// One thread; medians of `reps` runs after a warm-up.
//
//   bench/ddl_bench_small_gemm [k=4096] [n=4096] [reps=7]
#include <cstdint>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <ddl/ddl.hpp>

#include "time_it.hpp"

int main(int argc, char** argv) {
  using namespace ddl;
  const std::int64_t k = argc > 1 ? std::atoll(argv[1]) : 4096;
  const std::int64_t n = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 7;
  if (k < 1 || n < 1 || reps < 1) {
    fmt::print(stderr, "usage: {} [k >= 1] [n >= 1] [reps >= 1]\n", argv[0]);
    return 2;
  }
  set_num_threads(1);
  constexpr std::int64_t kBatch = 128;
  Generator generator(1);
  const Tensor weight = uniform({k, n}, -1.0f, 1.0f, {}, &generator);
  const Tensor rows = uniform({kBatch, k}, -1.0f, 1.0f, {}, &generator);

  using dnnl::memory;
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  fmt::print("y[m, {}] = x[m, {}] W, 1 thread, median ms of {} runs\n", n, k, reps);
  fmt::print("{:>5} {:>10} {:>14} {:>12} | {:>22} {:>22}\n", "m", "ddl", "oneDNN packed", "reorder W", "batch of 128: ddl",
             "oneDNN (reorder once)");
  for (const std::int64_t m : {8, 16, 32, 64, 128}) {
    const Tensor x = slice(rows, 0, m);
    const double ddl_ms = bench::time_it([&] { (void)matmul(x, weight); }, reps).median_ms;

    const memory::desc x_desc({m, k}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc y_desc({m, n}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc any_weight({k, n}, memory::data_type::f32, memory::format_tag::any);
    const dnnl::matmul::primitive_desc product(dnnl::matmul::desc(x_desc, any_weight, y_desc), engine);
    memory plain_weight({{k, n}, memory::data_type::f32, memory::format_tag::ab}, engine,
                        const_cast<float*>(weight.data<float>()));
    memory packed_weight(product.weights_desc(), engine);
    const double reorder_ms = bench::time_it([&] {
                                dnnl::reorder(plain_weight, packed_weight).execute(stream, plain_weight, packed_weight);
                                stream.wait();
                              }, reps).median_ms;
    memory x_memory(x_desc, engine, const_cast<float*>(x.data<float>()));
    std::vector<float> y(static_cast<std::size_t>(m * n));
    memory y_memory(y_desc, engine, y.data());
    const dnnl::matmul multiply(product);
    const double packed_ms = bench::time_it([&] {
                               multiply.execute(stream, {{DNNL_ARG_SRC, x_memory},
                                                         {DNNL_ARG_WEIGHTS, packed_weight},
                                                         {DNNL_ARG_DST, y_memory}});
                               stream.wait();
                             }, reps).median_ms;
    const double products = static_cast<double>(kBatch / m);
    fmt::print("{:>5} {:>10.2f} {:>14.2f} {:>12.2f} | {:>22.1f} {:>22.1f}\n", m, ddl_ms, packed_ms, reorder_ms,
               products * ddl_ms, reorder_ms + products * packed_ms);
  }
}
