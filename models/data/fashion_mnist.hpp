// Fashion-MNIST (Xiao, Rasul and Vollgraf 2017): 60,000 training and 10,000
// test images of 28x28 grey pixels in 10 classes, stored as IDX files in the
// layout of MNIST, so this loader reads MNIST directories too.
#pragma once

#include <cstdint>
#include <string>

#include <ddl/models/data/dataset.hpp>

namespace ddl::models {

// Where Debian's dataset-fashion-mnist package installs the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Class names, indexed by label.
inline constexpr const char* kFashionMnistClasses[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                         "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// Reads an images file ([N, H, W]) and a labels file ([N], values 0..9) into
// inputs float32 [N, 1, H, W] scaled to [0, 1] and targets int64 [N]. With
// limit >= 0 only the first `limit` samples are kept. Throws ddl::Error naming
// the file when either is malformed or their counts differ.
Dataset load_idx_classification(const std::string& images_path, const std::string& labels_path,
                                std::int64_t limit = -1);

// The training (train = true, 60,000 samples) or test (10,000) split of the
// MNIST-layout directory `dir`: files train-/t10k-{images-idx3,labels-idx1}-ubyte,
// with or without .gz (also the ".idx3-ubyte" spelling). Throws ddl::Error
// listing every name looked for when a file is missing.
Dataset load_fashion_mnist(const std::string& dir = kFashionMnistDir, bool train = true, std::int64_t limit = -1);

}  // namespace ddl::models
