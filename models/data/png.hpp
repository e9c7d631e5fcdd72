// Writing images as PNG files, for looking at what a segmentation network
// sees and predicts: 8-bit grayscale or RGB, zlib-compressed (PNG
// specification, W3C 2003), written atomically. Plus the conversions from a
// float image and from a class map to 8-bit pixels.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <ddl/core/tensor.hpp>

namespace ddl::models {

// An 8-bit image: `height` rows of `width` pixels of `channels` bytes each
// (1: gray, 3: red, green, blue), row after row, top row first.
struct Image {
  std::int64_t height = 0;
  std::int64_t width = 0;
  int channels = 1;
  std::vector<std::uint8_t> pixels;
};

// Writes `image` to `path` as a PNG file (no filtering, default
// compression). The bytes go to path + ".tmp" in the same directory first,
// which is flushed, fsynced and renamed over `path`, so `path` holds either
// its old contents or the whole new image, never a part. Throws ddl::Error
// naming `path` for an image that is not 1 or 3 channels of 1 .. 2^31 - 1
// rows and columns with exactly height·width·channels bytes, and for every
// I/O failure (no such directory, no permission, a full disk), with the
// system's reason; the temp file is removed then.
void write_png(const std::string& path, const Image& image);

// A float32 image [H, W] (on any device) as 8-bit gray: `low` and below
// black, `high` and above white, linear in between. Throws ddl::Error for
// another shape or dtype, a non-finite value, or unless low < high (finite).
Image grayscale_image(const Tensor& values, float low, float high);
// The same over the image's own range: its minimum black, its maximum white
// (an image of one value all black).
Image grayscale_image(const Tensor& values);

// Class colours: background (0) black, then colours that stay apart for
// readers with the common colour-vision deficiencies (Okabe & Ito 2008).
inline constexpr std::array<std::array<std::uint8_t, 3>, 8> kClassPalette{{{0, 0, 0},
                                                                           {230, 159, 0},
                                                                           {86, 180, 233},
                                                                           {0, 158, 115},
                                                                           {240, 228, 66},
                                                                           {0, 114, 178},
                                                                           {213, 94, 0},
                                                                           {204, 121, 167}}};

// A class map [H, W] of int32 or int64 labels (on any device) as RGB, class
// c in kClassPalette[c]. Throws ddl::Error naming a label outside 0 .. 7 and
// where it is, or another shape or dtype.
Image class_image(const Tensor& classes);

}  // namespace ddl::models
