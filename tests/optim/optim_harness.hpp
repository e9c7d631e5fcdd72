// Shared by the optimizer tests: a few parameters of awkward sizes with
// values and per-step gradients given by formulas (so a test's double
// reference can recompute them), and the checks every optimizer must pass:
// a run against a hand-written reference, the state round trip, and the
// same result on two devices.
#pragma once

#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/optim/optimizer.hpp>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "support/skip.hpp"
#include "support/test_data.hpp"

namespace ddl::test::optim {

inline const std::vector<Shape> kShapes{{7}, {3, 5}, {1}, {2, 3, 13}};

inline double initial_value(std::size_t k, std::size_t i) {
  return std::sin(0.37 * static_cast<double>(i) + static_cast<double>(k)) * 0.8;
}
// Gradients change sign and size from step to step and parameter to parameter.
inline double grad_value(int step, std::size_t k, std::size_t i) {
  return std::cos(0.91 * static_cast<double>(i) + 1.7 * step + 0.3 * static_cast<double>(k)) *
         (0.5 + 0.25 * static_cast<double>(k) + 0.1 * step);
}
// Parameter 2 has no gradient on step 1: it must be skipped, state untouched.
inline bool has_grad(int step, std::size_t k) { return !(step == 1 && k == 2); }

inline std::vector<Tensor> make_params(const Device& device = cpu(), const std::vector<Shape>& shapes = kShapes) {
  std::vector<Tensor> params;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    std::vector<float> values(static_cast<std::size_t>(shapes[k].numel()));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(initial_value(k, i));
    params.push_back(from_vector(values, shapes[k], {DType::Float32, device, false}).set_requires_grad());
  }
  return params;
}

inline void set_grads(const std::vector<Tensor>& params, int step) {
  for (std::size_t k = 0; k < params.size(); ++k) {
    if (!has_grad(step, k)) {
      params[k].zero_grad();
      continue;
    }
    std::vector<float> values(static_cast<std::size_t>(params[k].numel()));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(grad_value(step, k, i));
    params[k].set_grad(from_vector(values, params[k].shape(), {DType::Float32, params[k].device(), false}));
  }
}

// A double-precision reference: (parameter values, gradient, state slots of
// that parameter, 1-based step number) -> updates values and state in place.
using ReferenceUpdate = std::function<void(std::vector<double>& p, const std::vector<double>& g,
                                           std::vector<std::vector<double>>& state, int t)>;

// Runs `steps` steps of the optimizer and of the reference (whose state per
// parameter is `slots` vectors filled with `initial`) and compares every
// parameter after every step.
inline void check_against_reference(
    const std::function<std::unique_ptr<ddl::optim::Optimizer>(std::vector<Tensor>)>& make,
    const ReferenceUpdate& reference, int slots, double initial = 0.0, int steps = 4, double tolerance = 2e-5) {
  std::vector<Tensor> params = make_params();
  std::unique_ptr<ddl::optim::Optimizer> optimizer = make(params);
  std::vector<std::vector<double>> p(kShapes.size());
  std::vector<std::vector<std::vector<double>>> state(kShapes.size());
  for (std::size_t k = 0; k < kShapes.size(); ++k) {
    const auto n = static_cast<std::size_t>(kShapes[k].numel());
    for (std::size_t i = 0; i < n; ++i) p[k].push_back(static_cast<float>(initial_value(k, i)));
    state[k].assign(static_cast<std::size_t>(slots), std::vector<double>(n, initial));
  }
  for (int step = 0; step < steps; ++step) {
    set_grads(params, step);
    optimizer->step();
    for (std::size_t k = 0; k < kShapes.size(); ++k) {
      if (has_grad(step, k)) {
        std::vector<double> g;
        for (std::size_t i = 0; i < p[k].size(); ++i) g.push_back(static_cast<float>(grad_value(step, k, i)));
        reference(p[k], g, state[k], step + 1);
      }
      const std::vector<float> expected(p[k].begin(), p[k].end());
      INFO("step " << step << ", parameter " << k);
      CHECK(all_close(params[k], expected, tolerance, tolerance));
    }
  }
  CHECK(optimizer->step_count() == steps);
}

// Snapshot of named tensors (state() shares the optimizer's memory).
inline std::vector<std::pair<std::string, Tensor>> copy_state(
    const std::vector<std::pair<std::string, Tensor>>& state) {
  std::vector<std::pair<std::string, Tensor>> copy;
  for (const auto& [name, tensor] : state) copy.emplace_back(name, tensor.clone());
  return copy;
}

// Two steps, checkpoint (parameters + state), a fresh optimizer on copies
// of the parameters loads it and runs three more: bitwise the same as five
// uninterrupted steps.
inline void check_resume(const std::function<std::unique_ptr<ddl::optim::Optimizer>(std::vector<Tensor>)>& make) {
  std::vector<Tensor> straight = make_params();
  auto uninterrupted = make(straight);
  for (int step = 0; step < 5; ++step) {
    set_grads(straight, step);
    uninterrupted->step();
  }

  std::vector<Tensor> first = make_params();
  auto before = make(first);
  for (int step = 0; step < 2; ++step) {
    set_grads(first, step);
    before->step();
  }
  const auto checkpoint = copy_state(before->state());
  std::vector<Tensor> resumed;
  for (const Tensor& param : first) resumed.push_back(param.detach().clone().set_requires_grad());
  // The rest of the first run must not leak into the checkpoint.
  set_grads(first, 2);
  before->step();

  auto after = make(resumed);
  after->load_state(checkpoint);
  CHECK(after->step_count() == 2);
  for (int step = 2; step < 5; ++step) {
    set_grads(resumed, step);
    after->step();
  }
  for (std::size_t k = 0; k < straight.size(); ++k) CHECK(all_close(resumed[k], straight[k], 0, 0));
  const auto a = uninterrupted->state(), b = after->state();
  REQUIRE(a.size() == b.size());
  for (std::size_t e = 0; e < a.size(); ++e) {
    CHECK(a[e].first == b[e].first);
    if (a[e].second.dtype() == DType::Float32) CHECK(all_close(a[e].second, b[e].second, 0, 0));
  }
}

// The same optimizer on cpu:0 and on cpu:1 (a logical device running the
// same kernels): bitwise-equal parameters and state. One parameter is large
// enough for the CPU loop to go parallel.
inline void check_devices_agree(
    const std::function<std::unique_ptr<ddl::optim::Optimizer>(std::vector<Tensor>)>& make) {
  if (device_count(DeviceType::CPU) < 2) return ddl::test::skip("needs DDL_CPU_DEVICES >= 2");
  std::vector<Shape> shapes = kShapes;
  shapes.push_back({40009});
  std::vector<Tensor> on0 = make_params(cpu(0), shapes), on1 = make_params(cpu(1), shapes);
  auto optimizer0 = make(on0), optimizer1 = make(on1);
  for (int step = 0; step < 3; ++step) {
    set_grads(on0, step);
    set_grads(on1, step);
    optimizer0->step();
    optimizer1->step();
  }
  for (std::size_t k = 0; k < on0.size(); ++k) {
    CHECK(on1[k].device() == cpu(1));
    CHECK(all_close(on1[k], on0[k], 0, 0));
  }
  const auto state0 = optimizer0->state(), state1 = optimizer1->state();
  for (std::size_t e = 1; e < state0.size(); ++e) {
    CHECK(state1[e].second.device() == cpu(1));
    CHECK(all_close(state1[e].second, state0[e].second, 0, 0));
  }
}

// keep_slices (sharded data parallelism): after a step of the whole, the
// optimizer is cut into slices at odd offsets (one parameter large enough
// for the CPU loop to go parallel, its slices unaligned); stepping every
// slice with its part of the gradient changes the parameters exactly as
// stepping the whole, its state carried over, and state() names the slices.
inline void check_slices(const std::function<std::unique_ptr<ddl::optim::Optimizer>(std::vector<Tensor>)>& make) {
  std::vector<Shape> shapes = kShapes;
  shapes.push_back({40009});
  std::vector<Tensor> whole = make_params(cpu(), shapes), cut = make_params(cpu(), shapes);
  auto reference = make(whole), sliced = make(cut);
  set_grads(whole, 0);
  set_grads(cut, 0);
  reference->step();
  sliced->step();
  // Parameter k in k + 1 slices of uneven lengths.
  std::vector<std::pair<std::size_t, ddl::optim::ElementRange>> where;
  const std::vector<Tensor> slices = sliced->keep_slices([&](std::size_t k, const Tensor& param) {
    std::vector<ddl::optim::ElementRange> ranges;
    const std::int64_t n = param.numel(), parts = std::min<std::int64_t>(n, static_cast<std::int64_t>(k) + 1);
    for (std::int64_t j = 0; j < parts; ++j) ranges.push_back({n * j / parts, n * (j + 1) / parts});
    for (const auto& range : ranges) where.emplace_back(k, range);
    return ranges;
  });
  REQUIRE(slices.size() == where.size());
  const auto state = sliced->state();
  const std::size_t buffers = sliced->buffer_names().size();
  REQUIRE(state.size() == 1 + buffers * slices.size());
  if (buffers > 0) {
    CHECK(state[1].first == "0." + sliced->buffer_names()[0]);
    CHECK(state.back().first == std::to_string(slices.size() - 1) + "." + sliced->buffer_names().back());
  }
  for (int step = 1; step < 4; ++step) {
    set_grads(whole, step);
    set_grads(cut, step);
    reference->step();
    for (std::size_t i = 0; i < slices.size(); ++i) {
      const auto& [k, range] = where[i];
      const Tensor grad = cut[k].grad();
      slices[i].set_grad(grad.defined() ? grad.flat_slice(range.begin, slices[i].shape()) : Tensor());
    }
    sliced->step();
    for (std::size_t k = 0; k < whole.size(); ++k) {
      INFO("step " << step << ", parameter " << k);
      CHECK(all_close(cut[k], whole[k], 0, 0));
    }
  }
  CHECK(sliced->step_count() == reference->step_count());
}

}  // namespace ddl::test::optim
