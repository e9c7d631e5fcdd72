// The index kernels behind dropout (one body for CPU and GPU; listed in
// layer_kernels.hpp). Internal: not installed.
#pragma once

#include <cstdint>

#include <ddl/core/macros.hpp>
#include <ddl/core/random.hpp>

namespace ddl::kernels {

// Whether lane `lane` (0..7) of a Philox call keeps its element: its
// 16-bit uniform, in (0, 1], above p. (16 bits resolve p to 1/65536, ample
// for a drop rate, and halve the Philox work per element.) Selects rather
// than bits.out[lane / 2]: an array indexed by a variable does not
// vectorise.
DDL_HOST_DEVICE inline bool dropout_keeps(const Philox4x32& bits, int lane, float p) {
  const std::uint32_t word = lane < 2 ? bits.out[0] : lane < 4 ? bits.out[1] : lane < 6 ? bits.out[2] : bits.out[3];
  const std::uint32_t r16 = (word >> (16 * (lane % 2))) & 0xFFFFu;
  return (static_cast<float>(r16) + 1.0f) * (1.0f / 65536.0f) > p;
}

// Draws the keep decisions: one Philox call gives four 32-bit words, eight
// 16-bit uniforms, so index j decides elements 8j .. 8j+7 with counter
// offset + j and stores them as the eight bytes of mask[j], 1 to keep and 0
// to drop, byte l (little-endian) for element 8j + l. A byte per element,
// not a bit: DropoutApply then reads its element's decision with a plain
// load, which vectorises; picking bit i % 8 of word i / 8 did not, and
// that loop cost 4x the drawing (perf, the MNIST CNN's step). Drawing apart
// from applying keeps both loops free of branches and of state shared
// between iterations: the one loop that did both, with a bounds check per
// element, ran scalar and 5x slower.
struct DropoutMask {
  std::int64_t* mask;
  std::uint64_t seed;
  std::uint64_t offset;
  float p;
  static constexpr std::int64_t kPerCall = 8;
  static std::int64_t calls(std::int64_t n) { return (n + kPerCall - 1) / kPerCall; }
  DDL_HOST_DEVICE void operator()(std::int64_t j) const {
    const Philox4x32 bits(offset + static_cast<std::uint64_t>(j), seed);
    std::uint64_t keep_bytes = 0;
    for (int lane = 0; lane < kPerCall; ++lane) {
      keep_bytes |= static_cast<std::uint64_t>(dropout_keeps(bits, lane, p)) << (8 * lane);
    }
    mask[j] = static_cast<std::int64_t>(keep_bytes);
  }
};

// The keep decisions of a part of a tensor, stored as DropoutMask stores
// them: the part holds `width` of each row's `whole_width` elements, from
// `begin` on (a tensor-parallel rank's features), and each of its elements
// gets the decision its index in the whole tensor gets there, so the parts
// of all ranks together carry the whole tensor's mask. One Philox call per
// element, eight times DropoutMask's work.
struct DropoutMaskOfPart {
  std::int64_t* mask;
  std::uint64_t seed;
  std::uint64_t offset;
  float p;
  std::int64_t width, whole_width, begin;
  DDL_HOST_DEVICE void operator()(std::int64_t j) const {
    std::uint64_t keep_bytes = 0;
    for (int lane = 0; lane < DropoutMask::kPerCall; ++lane) {
      const std::int64_t i = j * DropoutMask::kPerCall + lane;
      const std::int64_t whole = i / width * whole_width + begin + i % width;
      const Philox4x32 bits(offset + static_cast<std::uint64_t>(whole / DropoutMask::kPerCall), seed);
      const bool keep = dropout_keeps(bits, static_cast<int>(whole % DropoutMask::kPerCall), p);
      keep_bytes |= static_cast<std::uint64_t>(keep) << (8 * lane);
    }
    mask[j] = static_cast<std::int64_t>(keep_bytes);
  }
};

// out[i] = keep[i] ? in[i] / (1 - p) : 0: the forward pass on the input,
// the backward pass on the output's gradient, with the same decisions
// (`keep`: a DropoutMask's words read as bytes).
struct DropoutApply {
  const float* in;
  float* out;
  const std::uint8_t* keep;
  float p;
  DDL_HOST_DEVICE void operator()(std::int64_t i) const {
    const float scaled = in[i] * (1.0f / (1.0f - p));
    out[i] = keep[i] != 0 ? scaled : 0.0f;
  }
};

}  // namespace ddl::kernels
