// Matrix products and transpose (core/ops/linalg.cpp): every operand
// layout matmul accepts against a triple loop, their gradients, and the
// errors for operands that do not fit.
#include <doctest/doctest.h>

#include <ddl/core/cpu/gemm_tiles.hpp>
#include <ddl/ddl.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include "support/gradcheck.hpp"
#include "support/skip.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;
using ddl::test::gradcheck;
using ddl::test::product_reference;
using ddl::test::ProductReference;
using ddl::test::throws_error_mentioning;
using ddl::test::transposed;

namespace {

// C[b] = A[b or shared] @ B[b or shared] by the triple loop, in double.
// A 2-D operand (batch 1 here) is shared across the other's batch.
std::vector<float> reference_matmul(const std::vector<float>& a, const std::vector<float>& b, std::int64_t batch,
                                    bool a_batched, bool b_batched, std::int64_t m, std::int64_t k, std::int64_t n) {
  std::vector<float> c(static_cast<std::size_t>(batch * m * n));
  for (std::int64_t p = 0; p < batch; ++p) {
    const std::int64_t a0 = a_batched ? p * m * k : 0, b0 = b_batched ? p * k * n : 0;
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double total = 0.0;
        for (std::int64_t q = 0; q < k; ++q) {
          total += static_cast<double>(a[static_cast<std::size_t>(a0 + i * k + q)]) *
                   b[static_cast<std::size_t>(b0 + q * n + j)];
        }
        c[static_cast<std::size_t>((p * m + i) * n + j)] = static_cast<float>(total);
      }
    }
  }
  return c;
}

// Float32 GEMM against the double loop: k products of values in [-1, 1)
// each rounded, plus k roundings of the running sum: <= 2 k u per term,
// about 1e-5 absolute for k <= 64.
constexpr double kGemmTolerance = 1e-5;

struct MatmulCase {
  Shape batch;  // of the result
  bool a_batched, b_batched;
};

Shape with_matrix(const Shape& batch, bool batched, std::int64_t rows, std::int64_t cols) {
  std::vector<std::int64_t> dims = batched ? batch.to_vector() : std::vector<std::int64_t>{};
  dims.push_back(rows);
  dims.push_back(cols);
  return Shape(dims);
}

void check_matmul_values(const MatmulCase& layout, std::int64_t m, std::int64_t k, std::int64_t n,
                         Generator& generator) {
  const Shape a_shape = with_matrix(layout.batch, layout.a_batched, m, k);
  const Shape b_shape = with_matrix(layout.batch, layout.b_batched, k, n);
  CAPTURE(a_shape);
  CAPTURE(b_shape);
  const Tensor a = test::uniform_tensor(a_shape, generator);
  const Tensor b = test::uniform_tensor(b_shape, generator);
  const Tensor c = matmul(a, b);
  CHECK(c.shape() == with_matrix(layout.batch, layout.a_batched || layout.b_batched, m, n));
  const std::int64_t batch = layout.a_batched || layout.b_batched ? layout.batch.numel() : 1;
  CHECK(all_close(
      c,
      reference_matmul(a.to_vector<float>(), b.to_vector<float>(), batch, layout.a_batched, layout.b_batched, m, k, n),
      kGemmTolerance, kGemmTolerance));
}

void check_matmul_gradients(const MatmulCase& layout, std::mt19937& rng, Generator& generator) {
  const std::int64_t m = test::awkward_size(rng), k = test::awkward_size(rng), n = test::awkward_size(rng);
  const Tensor a = test::uniform_tensor(with_matrix(layout.batch, layout.a_batched, m, k), generator);
  const Tensor b = test::uniform_tensor(with_matrix(layout.batch, layout.b_batched, k, n), generator);
  CAPTURE(a.shape());
  CAPTURE(b.shape());
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {a, b}));
}

}  // namespace

TEST_CASE("matmul: 2-D matches the triple loop, including sizes past GEMM blocking") {
  std::mt19937 rng(401);
  Generator generator(401);
  for (int trial = 0; trial < 4; ++trial) {
    check_matmul_values({{}, false, false}, test::awkward_size(rng), test::awkward_size(rng), test::awkward_size(rng),
                        generator);
  }
  check_matmul_values({{}, false, false}, 67, 61, 29, generator);
}

TEST_CASE("matmul: batched [B, m, k] @ [B, k, n] matches the triple loop per matrix") {
  std::mt19937 rng(402);
  Generator generator(402);
  for (int trial = 0; trial < 3; ++trial) {
    check_matmul_values({{test::awkward_size(rng)}, true, true}, test::awkward_size(rng), test::awkward_size(rng),
                        test::awkward_size(rng), generator);
  }
  check_matmul_values({{2, 3}, true, true}, 5, 7, 3, generator);
}

TEST_CASE("matmul: batched @ 2-D shares the right matrix across the batch") {
  std::mt19937 rng(403);
  Generator generator(403);
  for (int trial = 0; trial < 3; ++trial) {
    check_matmul_values({{test::awkward_size(rng)}, true, false}, test::awkward_size(rng), test::awkward_size(rng),
                        test::awkward_size(rng), generator);
  }
  check_matmul_values({{3, 2}, true, false}, 7, 5, 13, generator);
}

TEST_CASE("matmul: 2-D @ batched shares the left matrix across the batch") {
  std::mt19937 rng(404);
  Generator generator(404);
  for (int trial = 0; trial < 3; ++trial) {
    check_matmul_values({{test::awkward_size(rng)}, false, true}, test::awkward_size(rng), test::awkward_size(rng),
                        test::awkward_size(rng), generator);
  }
  check_matmul_values({{2, 3}, false, true}, 3, 13, 7, generator);
}

TEST_CASE("matmul: an empty inner dim gives zeros, an empty outer dim an empty result") {
  const Tensor c = matmul(zeros({3, 0}), zeros({0, 4}));
  CHECK(c.shape() == Shape{3, 4});
  CHECK(c.to_vector<float>() == std::vector<float>(12, 0.0f));
  CHECK(matmul(zeros({0, 5}), ones({5, 2})).shape() == Shape{0, 2});
  CHECK(matmul(ones({2, 0, 3}), ones({3, 4})).shape() == Shape{2, 0, 4});
}

TEST_CASE("matmul: gradients through an empty inner dim are empty, for a batch @ a shared matrix too") {
  for (const Shape& a_shape : {Shape{3, 0}, Shape{2, 3, 0}}) {
    CAPTURE(a_shape);
    Tensor a = zeros(a_shape), b = zeros({0, 4});
    a.set_requires_grad(true);
    b.set_requires_grad(true);
    sum(matmul(a, b)).backward();
    CHECK(a.grad().shape() == a_shape);
    CHECK(b.grad().shape() == Shape{0, 4});
  }
}

TEST_CASE("matmul: 2-D gradients match finite differences") {
  std::mt19937 rng(405);
  Generator generator(405);
  for (int trial = 0; trial < 3; ++trial) check_matmul_gradients({{}, false, false}, rng, generator);
}

TEST_CASE("matmul: batched gradients match finite differences") {
  std::mt19937 rng(406);
  Generator generator(406);
  check_matmul_gradients({{3}, true, true}, rng, generator);
  check_matmul_gradients({{2, 2}, true, true}, rng, generator);
}

TEST_CASE("matmul: batched @ 2-D gradients sum the shared matrix's gradient over the batch") {
  std::mt19937 rng(407);
  Generator generator(407);
  check_matmul_gradients({{3}, true, false}, rng, generator);
  check_matmul_gradients({{2, 2}, true, false}, rng, generator);
}

TEST_CASE("matmul: 2-D @ batched gradients sum the shared matrix's gradient over the batch") {
  std::mt19937 rng(408);
  Generator generator(408);
  check_matmul_gradients({{3}, false, true}, rng, generator);
  check_matmul_gradients({{2, 2}, false, true}, rng, generator);
}

TEST_CASE("transpose: swaps the last two dims, per matrix of a batch") {
  std::mt19937 rng(409);
  Generator generator(409);
  for (int rank = 2; rank <= 4; ++rank) {
    const Shape shape = test::random_shape(rng, rank, 1000);
    CAPTURE(shape);
    const Tensor x = test::uniform_tensor(shape, generator);
    const Tensor y = transpose(x);
    const std::int64_t rows = shape[rank - 2], cols = shape[rank - 1], batch = shape.numel() / (rows * cols);
    std::vector<std::int64_t> dims = shape.to_vector();
    std::swap(dims[static_cast<std::size_t>(rank - 2)], dims[static_cast<std::size_t>(rank - 1)]);
    CHECK(y.shape() == Shape(dims));
    const std::vector<float> in = x.to_vector<float>(), out = y.to_vector<float>();
    bool all_equal = true;
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) {
          all_equal &= out[static_cast<std::size_t>((b * cols + c) * rows + r)] ==
                       in[static_cast<std::size_t>((b * rows + r) * cols + c)];
        }
      }
    }
    CHECK(all_equal);
  }
}

TEST_CASE("transpose: gradients match finite differences") {
  std::mt19937 rng(410);
  Generator generator(410);
  for (int rank = 2; rank <= 3; ++rank) {
    const Shape shape = test::random_shape(rng, rank, 150);
    CAPTURE(shape);
    // Multiplied by a fixed tensor so the check sees where each element went.
    const Tensor scale = test::uniform_tensor(transpose(zeros(shape)).shape(), generator);
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return transpose(in[0]) * scale; },
                    {test::uniform_tensor(shape, generator)}));
  }
}

TEST_CASE("matmul: mismatched inner dims throw naming the op and both shapes") {
  CHECK(throws_error_mentioning([] { matmul(zeros({2, 3}), zeros({4, 5})); }, {"matmul", "[2, 3]", "[4, 5]"}));
  CHECK(throws_error_mentioning([] { matmul(zeros({7, 2, 3}), zeros({2, 5})); }, {"matmul", "[7, 2, 3]", "[2, 5]"}));
}

TEST_CASE("matmul: different batch dims throw naming both shapes") {
  CHECK(throws_error_mentioning(
      [] {
        matmul(zeros({2, 3, 4}), zeros({3, 4, 5}));
      },
      {"matmul", "batch", "[2, 3, 4]", "[3, 4, 5]"}));
}

TEST_CASE("matmul: an operand with fewer than 2 dims throws naming the shapes") {
  CHECK(throws_error_mentioning([] { matmul(zeros({3}), zeros({3, 2})); }, {"matmul", "[3]", "[3, 2]"}));
}

TEST_CASE("matmul: operands on two devices throw naming both devices") {
  REQUIRE_MESSAGE(device_count(DeviceType::CPU) >= 2, "run with DDL_CPU_DEVICES=2 (ctest sets it)");
  CHECK(throws_error_mentioning(
      [] {
        matmul(zeros({2, 3}), zeros({3, 4}, TensorOptions{}.with_device(cpu(1))));
      },
      {"matmul", "cpu:0", "cpu:1", "[2, 3]", "[3, 4]"}));
}

TEST_CASE("matmul and transpose: integer tensors throw naming the op and dtype") {
  const Tensor i = zeros({2, 2}, TensorOptions{}.with_dtype(DType::Int32));
  CHECK(throws_error_mentioning([&] { matmul(i, ones({2, 2})); }, {"matmul", "int32", "[2, 2]"}));
  CHECK(throws_error_mentioning([&] { transpose(i); }, {"transpose", "int32", "[2, 2]"}));
}

TEST_CASE("transpose: a tensor with fewer than 2 dims throws naming its shape") {
  CHECK(throws_error_mentioning([] { transpose(zeros({5})); }, {"transpose", "[5]"}));
}

TEST_CASE("matmul in bf16 mixed precision multiplies bf16-rounded operands and sums within float32's bound") {
  if (!config::cpu_has_bf16()) {
    return test::skip("this CPU lacks AVX512-BF16: the bf16 GEMM cannot run (test_conv2d checks the refusal)");
  }
  const test::CpuPrecisionGuard guard;
  Generator generator(29);
  // 2-D; rows of a batched A stacked against a shared B; a shared A against
  // a batched B; both batched. Backward multiplies by transposes.
  for (const auto& shapes : {std::pair{Shape{5, 33}, Shape{33, 7}}, std::pair{Shape{3, 9, 64}, Shape{64, 13}},
                             std::pair{Shape{9, 11}, Shape{2, 11, 3}}, std::pair{Shape{2, 4, 17}, Shape{2, 17, 6}}}) {
    // Named, not bound: CAPTURE's lambda captures no structured binding
    // before clang 16 (the sanitizer builds use clang 14).
    const Shape& a_shape = shapes.first;
    const Shape& b_shape = shapes.second;
    CAPTURE(a_shape);
    CAPTURE(b_shape);
    const Tensor a = test::uniform_tensor(a_shape, generator), b = test::uniform_tensor(b_shape, generator);
    set_cpu_precision(config::CpuPrecision::BFloat16);
    const Tensor as = a.clone().set_requires_grad(), bs = b.clone().set_requires_grad();
    const Tensor c = matmul(as, bs);
    const Tensor dc = test::uniform_tensor(c.shape(), generator);
    c.backward(dc);
    set_cpu_precision(guard.saved);
    CHECK(c.to_vector<float>() != matmul(a, b).to_vector<float>());  // the operands really were rounded
    // Per matrix of the batch, from the operands as bf16 rounds them.
    const std::int64_t batch = c.dim() == 3 ? c.size(0) : 1, m = c.size(-2), n = c.size(-1), k = a.size(-1);
    const std::vector<float> ar = test::bf16_rounded(a.to_vector<float>()),
                             br = test::bf16_rounded(b.to_vector<float>());
    const std::vector<float> dcr = test::bf16_rounded(dc.to_vector<float>());
    const auto matrix = [](const std::vector<float>& all, bool batched, std::int64_t p, std::int64_t size) {
      const std::int64_t first = batched ? p * size : 0;
      return std::vector<float>(all.begin() + first, all.begin() + first + size);
    };
    ProductReference y, da, db;
    for (std::int64_t p = 0; p < batch; ++p) {
      const ProductReference yp =
          product_reference(matrix(ar, a.dim() == 3, p, m * k), matrix(br, b.dim() == 3, p, k * n), m, k, n);
      y.value.insert(y.value.end(), yp.value.begin(), yp.value.end());
      y.magnitude.insert(y.magnitude.end(), yp.magnitude.begin(), yp.magnitude.end());
    }
    double ratio_c = 0, ratio_da = 0, ratio_db = 0;
    CHECK(test::within_dot_product_bound(c, y.value, y.magnitude, k, &ratio_c));
    // dA = dC B^T and dB = A^T dC per matrix; a matrix shared by the batch
    // gets the sum over the batch (batch times the terms).
    const auto add_in = [](ProductReference& total, const ProductReference& part, bool shared) {
      if (!shared || total.value.empty()) {
        total.value.insert(total.value.end(), part.value.begin(), part.value.end());
        total.magnitude.insert(total.magnitude.end(), part.magnitude.begin(), part.magnitude.end());
        return;
      }
      for (std::size_t i = 0; i < part.value.size(); ++i) {
        total.value[i] += part.value[i];
        total.magnitude[i] += part.magnitude[i];
      }
    };
    const bool a_shared = a.dim() == 2 && batch > 1, b_shared = b.dim() == 2 && batch > 1;
    for (std::int64_t p = 0; p < batch; ++p) {
      const auto ap = matrix(ar, a.dim() == 3, p, m * k), bp = matrix(br, b.dim() == 3, p, k * n),
                 dcp = matrix(dcr, true, p, m * n);
      add_in(da, product_reference(dcp, transposed(bp, k, n), m, n, k), a_shared);
      add_in(db, product_reference(transposed(ap, m, k), dcp, k, m, n), b_shared);
    }
    CHECK(test::within_dot_product_bound(as.grad(), da.value, da.magnitude, n * (a_shared ? batch : 1), &ratio_da));
    CHECK(test::within_dot_product_bound(bs.grad(), db.value, db.magnitude, m * (b_shared ? batch : 1), &ratio_db));
    MESSAGE("worst error / (2^-24 sum |terms|): product " << ratio_c << ", dA " << ratio_da << ", dB " << ratio_db);
  }
  // Empty operands as in float32: an empty outer dim, an empty sum of zeros.
  set_cpu_precision(config::CpuPrecision::BFloat16);
  const Tensor empty_rows = matmul(zeros({0, 5}), ones({5, 3}));
  const Tensor empty_sum = matmul(zeros({2, 0}), zeros({0, 3}));
  set_cpu_precision(guard.saved);
  CHECK(empty_rows.shape() == Shape{0, 3});
  CHECK(empty_sum.to_vector<float>() == std::vector<float>(6, 0.0f));
}

namespace {

// One Dense-like pass at float32, x [rows, in] · w [in, out] and back with
// an upstream gradient, twice, the second adding into w's gradient (a
// GEMM with beta = 1): its outputs for the checks below.
struct DensePass {
  Tensor x1, x2, g1, g2, y1, x1_grad, w_grad;
};

DensePass dense_pass(std::int64_t rows, const Tensor& w_values, Generator& generator) {
  DensePass pass;
  const Tensor w = w_values.clone().set_requires_grad();
  // Extreme magnitudes beside ordinary ones, and a row of zeros.
  const Tensor scale = concat({full({1, 1}, 1e15f), full({1, 1}, 0.0f), ones({rows - 2, 1})});
  pass.x1 = test::uniform_tensor({rows, w.size(0)}, generator) * scale;
  pass.x2 = test::uniform_tensor({rows, w.size(0)}, generator);
  pass.g1 = test::uniform_tensor({rows, w.size(1)}, generator);
  pass.g2 = test::uniform_tensor({rows, w.size(1)}, generator);
  const Tensor x1 = pass.x1.clone().set_requires_grad();
  pass.y1 = matmul(x1, w);
  pass.y1.backward(pass.g1);
  pass.x1_grad = x1.grad();
  matmul(pass.x2, w).backward(pass.g2);
  pass.w_grad = w.grad();
  pass.y1 = pass.y1.detach();
  return pass;
}

// Products past kTiledMinMultiplyAdds (2^20, core/cpu/gemm_cpu.cpp) run on
// oneDNN's matmul in tiles of C; these shapes leave tails in both
// dimensions of C (cut evenly into at most 256 x 512, finer down to 64 x 128). The
// fourth one's weight gradient, a 64 x 10 sum over 4099 rows, is a shape
// oneDNN's own threading splits across threads by k. The last one's rows
// of w (2 KiB), of x (4 KiB) and of g are copied with padding first: w in
// x·W, x and g in xᵀ·g.
constexpr std::array<std::array<std::int64_t, 3>, 5> kTiledShapes{
    {{300, 97, 600}, {129, 1000, 70}, {64, 4099, 10}, {4099, 64, 10}, {130, 1024, 512}}};

}  // namespace

// Against float64, and the same bits on one thread and on two: the tiles
// follow from the shape alone and each runs on one thread, so the thread
// count changes only which thread computes a tile. (Each tile shape's
// primitive is made once, on one thread: without that, the first call's
// thread count would fix oneDNN's split of k for the process's life, which
// this test, running each shape once, cannot tell apart.) Both kernels a
// tile may run, whichever this CPU's default is.
TEST_CASE(
    "matmul past the small-product threshold: x·W, g·Wᵀ and accumulated xᵀ·g within float32's bound, the same "
    "bits on one thread and on two, through oneDNN's sgemm and its matmul primitive") {
  Generator generator(405);
  const test::NumThreadsGuard threads;
  // Not a structured binding: clang before 16 cannot capture one (CAPTURE).
  for (const auto& kernel : {std::pair{cpu_backend::TileKernel::Sgemm, "sgemm"},
                             std::pair{cpu_backend::TileKernel::Primitive, "matmul primitive"}}) {
    const char* name = kernel.second;
    CAPTURE(name);
    cpu_backend::set_tile_kernel(kernel.first);
    for (const auto& shape : kTiledShapes) {
      const std::int64_t rows = shape[0], in = shape[1], out = shape[2];
      CAPTURE(rows);
      CAPTURE(in);
      CAPTURE(out);
      const Tensor w = test::uniform_tensor({in, out}, generator);
      Generator first(408), second(408);
      set_num_threads(1);
      const DensePass pass = dense_pass(rows, w, first);
      set_num_threads(2);
      const DensePass two = dense_pass(rows, w, second);
      CHECK(pass.y1.to_vector<float>() == two.y1.to_vector<float>());
      CHECK(pass.x1_grad.to_vector<float>() == two.x1_grad.to_vector<float>());
      CHECK(pass.w_grad.to_vector<float>() == two.w_grad.to_vector<float>());

      const std::vector<float> wv = w.to_vector<float>();
      double ratio = 0.0;
      const ProductReference y = product_reference(pass.x1.to_vector<float>(), wv, rows, in, out);
      CHECK(test::within_dot_product_bound(pass.y1, y.value, y.magnitude, in, &ratio));
      const ProductReference dx = product_reference(pass.g1.to_vector<float>(), transposed(wv, in, out), rows, out, in);
      CHECK(test::within_dot_product_bound(pass.x1_grad, dx.value, dx.magnitude, out, &ratio));
      std::vector<double> dw(static_cast<std::size_t>(in * out)), dw_magnitude(dw.size());
      test::add_weight_gradient_reference(pass.x1, pass.g1, dw, dw_magnitude);
      test::add_weight_gradient_reference(pass.x2, pass.g2, dw, dw_magnitude);
      CHECK(test::within_dot_product_bound(pass.w_grad, dw, dw_magnitude, 2 * rows, &ratio));
    }
  }
  cpu_backend::set_tile_kernel(cpu_backend::TileKernel::Auto);
}

// A shared left matrix with rows of 2 KiB: the right one's gradient, one
// product per matrix of the batch reading the same Aᵀ, copies A with
// padding once for all of them.
TEST_CASE("matmul past the small-product threshold: a shared matrix's rows copied once for the batch's gradients") {
  Generator generator(407);
  const std::int64_t batch = 3, m = 70, k = 512, n = 40;  // 4.3 M multiply-adds a gradient
  const Tensor a = test::uniform_tensor({m, k}, generator);
  const Tensor b = test::uniform_tensor({batch, k, n}, generator).set_requires_grad();
  const Tensor g = test::uniform_tensor({batch, m, n}, generator);
  matmul(a, b).backward(g);
  const std::vector<float> at = transposed(a.to_vector<float>(), m, k), gv = g.to_vector<float>();
  ProductReference all;
  for (std::int64_t p = 0; p < batch; ++p) {
    const ProductReference part =
        product_reference(at, std::vector<float>(gv.begin() + p * m * n, gv.begin() + (p + 1) * m * n), k, m, n);
    all.value.insert(all.value.end(), part.value.begin(), part.value.end());
    all.magnitude.insert(all.magnitude.end(), part.magnitude.begin(), part.magnitude.end());
  }
  double ratio = 0.0;
  CHECK(test::within_dot_product_bound(b.grad(), all.value, all.magnitude, m, &ratio));
}

// n = 512 makes rows of B 2 KiB long, which the product copies with padding
// first, one copy per matrix of a batched B (a shared one is folded into
// the rows of one product).
TEST_CASE(
    "matmul past the small-product threshold: a batch against a shared or a batched matrix, each within float32's "
    "bound") {
  Generator generator(406);
  const std::int64_t batch = 3, m = 70, k = 130;  // 2.5 M multiply-adds and more
  for (const std::int64_t n : {90, 512}) {
    for (const bool b_batched : {false, true}) {
      CAPTURE(n);
      CAPTURE(b_batched);
      const Tensor a = test::uniform_tensor({batch, m, k}, generator);
      const Tensor b = test::uniform_tensor(b_batched ? Shape{batch, k, n} : Shape{k, n}, generator);
      const Tensor c = matmul(a, b);
      const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
      const auto matrix = [](const std::vector<float>& values, std::int64_t p, std::int64_t size) {
        return std::vector<float>(values.begin() + p * size, values.begin() + (p + 1) * size);
      };
      ProductReference all;
      for (std::int64_t p = 0; p < batch; ++p) {
        const ProductReference part =
            product_reference(matrix(av, p, m * k), b_batched ? matrix(bv, p, k * n) : bv, m, k, n);
        all.value.insert(all.value.end(), part.value.begin(), part.value.end());
        all.magnitude.insert(all.magnitude.end(), part.magnitude.begin(), part.magnitude.end());
      }
      double ratio = 0.0;
      CHECK(test::within_dot_product_bound(c, all.value, all.magnitude, k, &ratio));
    }
  }
}
