// Writes the binary seeds of fuzz/corpus/ with the library's own writers,
// so they are valid files of the current formats: IDX raw and gzip'd, and
// checkpoints prefixed with the checkpoint target's mode byte. Run it again
// after a format changes:  fuzz_write_seeds fuzz/corpus
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <ddl/core/ops.hpp>
#include <ddl/models/data/idx.hpp>
#include <ddl/optim/engine/checkpoint.hpp>

namespace {

namespace fs = std::filesystem;

void write_idx_seeds(const fs::path& folder) {
  using ddl::models::IdxArray;
  const IdxArray labels{{5}, {3, 1, 4, 1, 5}};
  std::vector<std::uint8_t> pixels(2 * 3 * 3);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 15);
  const IdxArray images{{2, 3, 3}, pixels};
  const IdxArray empty{{0, 28, 28}, {}};
  ddl::models::write_idx((folder / "labels.idx").string(), labels);
  ddl::models::write_idx((folder / "labels.idx.gz").string(), labels, true);
  ddl::models::write_idx((folder / "images.idx").string(), images);
  ddl::models::write_idx((folder / "images.idx.gz").string(), images, true);
  ddl::models::write_idx((folder / "empty.idx").string(), empty);
}

// The checkpoint file with the fuzz target's mode byte in front.
void write_with_mode(const fs::path& file, const fs::path& seed, std::uint8_t mode) {
  std::ifstream in(file, std::ios::binary);
  std::vector<char> bytes{static_cast<char>(mode)};
  bytes.insert(bytes.end(), std::istreambuf_iterator<char>(in), {});
  std::ofstream(seed, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void write_checkpoint_seeds(const fs::path& folder) {
  using namespace ddl;
  optim::Checkpoint checkpoint;
  checkpoint.tensors = {
      {"model.0.weight", arange(6).reshape({2, 3})},
      {"model.0.bias", full({3}, 0.5f)},
      {"optimizer.step", Tensor::empty({}, TensorOptions{}.with_dtype(DType::Int64))},
      {"optimizer.0.empty", Tensor::empty({0, 4}, TensorOptions{}.with_dtype(DType::Int32))},
  };
  *checkpoint.tensors[2].second.data<std::int64_t>() = 7;
  checkpoint.integers = {{"epoch", 2}, {"step", 7}, {"rng.seed", 1}, {"rng.offset", 4096}};
  checkpoint.strings = {{"data", "fashion-mnist crc32 0x1234abcd"}, {"empty", ""}};
  const fs::path file = folder / "checkpoint.tmp";
  optim::write_checkpoint_file(file.string(), checkpoint);
  write_with_mode(file, folder / "small-repaired", 1);
  write_with_mode(file, folder / "small-as-written", 0);
  optim::write_checkpoint_file(file.string(), {});
  write_with_mode(file, folder / "empty-as-written", 0);
  fs::remove(file);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (fuzz/corpus)\n", argv[0]);
    return 2;
  }
  const fs::path corpus = argv[1];
  fs::create_directories(corpus / "idx");
  fs::create_directories(corpus / "checkpoint");
  write_idx_seeds(corpus / "idx");
  write_checkpoint_seeds(corpus / "checkpoint");
  return 0;
}
