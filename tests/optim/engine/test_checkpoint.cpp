// Checkpoints (optim/engine/checkpoint.hpp): round trips of every dtype and awkward
// shape, restoring a model and resuming an optimizer exactly, the atomic
// replace and failed saves that leave the previous file intact, a file built
// by hand from the documented byte table, and every kind of damaged file
// ending in an error that names the file and the problem.
#include "optim/optim_harness.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include <ddl/layers/activation.hpp>
#include <ddl/layers/dense.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/optim/adam.hpp>
#include <ddl/optim/engine/checkpoint.hpp>

using namespace ddl;
using ddl::optim::Checkpoint;
using ddl::test::same_bits;
using ddl::test::throws_error_mentioning;
namespace fs = std::filesystem;

using ddl::test::TempDir;

namespace {

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::vector<float>> values_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::vector<float>> values;
  for (const auto& entry : named) values.push_back(entry.second.to_vector<float>());
  return values;
}

// Random tensors of every dtype, including a scalar, empty tensors and rank 6.
Checkpoint random_checkpoint(std::uint64_t seed) {
  Generator generator(seed);
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  const std::vector<Shape> shapes{{}, {0}, {3, 0, 2}, {1}, {7}, {2, 3, 5}, {1, 2, 1, 3, 1, 2}};
  Checkpoint checkpoint;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const Shape& shape = shapes[k];
    const auto n = static_cast<std::size_t>(shape.numel());
    checkpoint.tensors.emplace_back("f32." + std::to_string(k), uniform(shape, -3.0f, 3.0f, {}, &generator));
    std::vector<std::int32_t> i32(n);
    for (auto& v : i32) v = static_cast<std::int32_t>(rng());
    checkpoint.tensors.emplace_back("i32." + std::to_string(k), from_vector(i32, shape));
    std::vector<std::int64_t> i64(n);
    for (auto& v : i64) v = static_cast<std::int64_t>((std::uint64_t{rng()} << 32) | rng());
    checkpoint.tensors.emplace_back("i64." + std::to_string(k), from_vector(i64, shape, {DType::Int64}));
  }
  checkpoint.integers = {{"epoch", 3}, {"step", 1234567890123}, {"rng.seed", -1}, {"rng.offset", 0}};
  checkpoint.strings = {{"model", "mnist_cnn"}, {"empty", ""}, {"bytes", std::string("a\0b\xff", 4)}};
  return checkpoint;
}

void check_same(const Checkpoint& loaded, const Checkpoint& saved) {
  REQUIRE(loaded.tensors.size() == saved.tensors.size());
  for (std::size_t i = 0; i < saved.tensors.size(); ++i) {
    CAPTURE(saved.tensors[i].first);
    CHECK(loaded.tensors[i].first == saved.tensors[i].first);
    CHECK(same_bits(loaded.tensors[i].second, saved.tensors[i].second));
  }
  CHECK(loaded.integers == saved.integers);
  CHECK(loaded.strings == saved.strings);
}

std::shared_ptr<layers::Sequential> small_model(std::uint64_t seed) {
  Generator generator(seed);
  return std::make_shared<layers::Sequential>(std::initializer_list<std::shared_ptr<layers::Module>>{
      std::make_shared<layers::Dense>(5, 7, true, &generator), std::make_shared<layers::ReLU>(),
      std::make_shared<layers::Dense>(7, 3, true, &generator)});
}

// The documented format written by hand, with an independent CRC-32 (IEEE,
// reflected polynomial 0xEDB88320, as zlib's crc32).
struct Bytes {
  std::vector<char> data;
  template <class T>
  Bytes& put(T value) {
    const auto* p = reinterpret_cast<const char*>(&value);
    data.insert(data.end(), p, p + sizeof value);
    return *this;
  }
  Bytes& text(const std::string& s) {
    put(static_cast<std::uint32_t>(s.size()));
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
};

std::uint32_t reference_crc32(const std::vector<char>& bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const char c : bytes) {
    crc ^= static_cast<std::uint8_t>(c);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::vector<char> file_from_payload(const std::vector<char>& payload, std::uint32_t version = 1) {
  Bytes file;
  file.data = {'D', 'D', 'L', 'C', 'K', 'P', 'T', '\0'};
  file.put(version).put(std::uint32_t{0}).put(static_cast<std::uint64_t>(payload.size())).put(reference_crc32(payload));
  file.data.insert(file.data.end(), payload.begin(), payload.end());
  return file.data;
}

// One float32 [2, 3] tensor "w", integer "epoch" = 3, string "model" = "mlp".
// `tweak` edits the fields a test wants to break.
struct HandPayload {
  std::string name = "w";
  std::uint32_t tensor_count = 1;
  std::uint8_t dtype = 0;
  std::vector<std::int64_t> dims{2, 3};
  std::uint64_t byte_count = 24;
  bool duplicate_integer = false;
  std::size_t extra_bytes = 0;

  std::vector<char> build() const {
    Bytes p;
    p.put(tensor_count).text(name).put(dtype).put(static_cast<std::uint8_t>(dims.size()));
    for (const auto d : dims) p.put(d);
    p.put(byte_count);
    for (int i = 0; i < 6; ++i) p.put(0.5f * static_cast<float>(i));
    p.put(std::uint32_t{duplicate_integer ? 2u : 1u}).text("epoch").put(std::int64_t{3});
    if (duplicate_integer) p.text("epoch").put(std::int64_t{4});
    p.put(std::uint32_t{1}).text("model").text("mlp");
    p.data.insert(p.data.end(), extra_bytes, '\0');
    return p.data;
  }
};

}  // namespace

TEST_CASE(
    "checkpoint: float32, int32 and int64 tensors of awkward shapes round-trip bitwise with integers and strings") {
  TempDir dir("checkpoint");
  const std::string path = dir.file("run.ckpt");
  const Checkpoint saved = random_checkpoint(7);
  ddl::optim::write_checkpoint_file(path, saved);
  CHECK(dir.entries() == std::vector<std::string>{"run.ckpt"});
  const Checkpoint loaded = ddl::optim::read_checkpoint_file(path);
  check_same(loaded, saved);
  for (const auto& entry : loaded.tensors) CHECK(entry.second.device() == cpu());

  SUBCASE("an empty checkpoint round-trips too") {
    ddl::optim::write_checkpoint_file(path, Checkpoint{});
    const Checkpoint empty = ddl::optim::read_checkpoint_file(path);
    CHECK(empty.tensors.empty());
    CHECK(empty.integers.empty());
    CHECK(empty.strings.empty());
  }
}

TEST_CASE("checkpoint: tensors on another device are saved and loaded onto the requested device") {
  if (device_count(DeviceType::CPU) < 2) return test::skip("needs DDL_CPU_DEVICES >= 2");
  TempDir dir("checkpoint");
  const std::string path = dir.file("run.ckpt");
  Checkpoint saved = random_checkpoint(11);
  for (auto& entry : saved.tensors) entry.second = entry.second.to(cpu(1));
  ddl::optim::write_checkpoint_file(path, saved);
  const Checkpoint loaded = ddl::optim::read_checkpoint_file(path, cpu(1));
  check_same(loaded, saved);
  for (const auto& entry : loaded.tensors) CHECK(entry.second.device() == cpu(1));
}

TEST_CASE("checkpoint: a file written by hand from the documented byte table loads") {
  TempDir dir("checkpoint");
  const std::string path = dir.file("hand.ckpt");
  write_bytes(path, file_from_payload(HandPayload{}.build()));
  const Checkpoint loaded = ddl::optim::read_checkpoint_file(path);
  REQUIRE(loaded.tensors.size() == 1);
  CHECK(loaded.tensors[0].first == "w");
  CHECK(loaded.tensors[0].second.shape() == Shape{2, 3});
  CHECK(loaded.tensors[0].second.to_vector<float>() == std::vector<float>{0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f});
  CHECK(loaded.integers == std::map<std::string, std::int64_t>{{"epoch", 3}});
  CHECK(loaded.strings == std::map<std::string, std::string>{{"model", "mlp"}});

  // And the library writes exactly those bytes.
  Checkpoint same;
  same.tensors.emplace_back("w", from_vector({0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f}, {2, 3}));
  same.integers["epoch"] = 3;
  same.strings["model"] = "mlp";
  ddl::optim::write_checkpoint_file(path, same);
  CHECK(read_bytes(path) == file_from_payload(HandPayload{}.build()));
}

TEST_CASE("checkpoint: restoring a model's parameters gives bitwise-equal values") {
  TempDir dir("checkpoint");
  const std::string path = dir.file("model.ckpt");
  const auto original = small_model(1);
  const auto other = small_model(2);
  Checkpoint checkpoint;
  ddl::optim::add_tensors(checkpoint, "model.", original->named_parameters());
  ddl::optim::write_checkpoint_file(path, checkpoint);

  const Checkpoint loaded = ddl::optim::read_checkpoint_file(path);
  CHECK(loaded.tensors.front().first == "model.0.weight");
  const auto targets = other->named_parameters();
  REQUIRE_FALSE(same_bits(targets[0].second, original->named_parameters()[0].second));
  ddl::optim::restore_tensors(loaded, "model.", targets);
  const auto expected = original->named_parameters();
  REQUIRE(targets.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(expected[i].first);
    CHECK(same_bits(targets[i].second, expected[i].second));
    CHECK(targets[i].second.requires_grad());
  }
  // The restored model computes what the original computes.
  const Tensor input = uniform({4, 5}, -1.0f, 1.0f);
  CHECK(same_bits((*other)(input), (*original)(input)));
}

TEST_CASE("checkpoint: an optimizer resumed from a checkpoint continues as an uninterrupted run") {
  using ddl::test::optim::make_params;
  using ddl::test::optim::set_grads;
  const auto adam = [](std::vector<Tensor> params) {
    return std::make_unique<ddl::optim::Adam>(std::move(params), ddl::optim::AdamOptions{.lr = 0.01});
  };
  std::vector<Tensor> straight = make_params();
  auto uninterrupted = adam(straight);
  for (int step = 0; step < 5; ++step) {
    set_grads(straight, step);
    uninterrupted->step();
  }

  TempDir dir("checkpoint");
  const std::string path = dir.file("resume.ckpt");
  {
    std::vector<Tensor> first = make_params();
    auto before = adam(first);
    for (int step = 0; step < 2; ++step) {
      set_grads(first, step);
      before->step();
    }
    Checkpoint checkpoint;
    for (std::size_t k = 0; k < first.size(); ++k)
      checkpoint.tensors.emplace_back("model." + std::to_string(k), first[k]);
    ddl::optim::add_tensors(checkpoint, "optimizer.", before->state());
    checkpoint.integers["step"] = before->step_count();
    ddl::optim::write_checkpoint_file(path, checkpoint);
  }

  const Checkpoint loaded = ddl::optim::read_checkpoint_file(path);
  std::vector<Tensor> resumed = make_params();
  for (auto& param : resumed) param = zeros_like(param).set_requires_grad();  // nothing left of the first run
  std::vector<std::pair<std::string, Tensor>> targets;
  for (std::size_t k = 0; k < resumed.size(); ++k) targets.emplace_back(std::to_string(k), resumed[k]);
  ddl::optim::restore_tensors(loaded, "model.", targets);
  auto after = adam(resumed);
  after->load_state(ddl::optim::tensors_with_prefix(loaded, "optimizer."));
  CHECK(after->step_count() == 2);
  CHECK(loaded.integers.at("step") == 2);
  for (int step = 2; step < 5; ++step) {
    set_grads(resumed, step);
    after->step();
  }
  for (std::size_t k = 0; k < straight.size(); ++k) CHECK(same_bits(resumed[k], straight[k]));
  const auto a = uninterrupted->state(), b = after->state();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(same_bits(a[i].second, b[i].second));
}

TEST_CASE("checkpoint: saving over an existing checkpoint replaces it and leaves no temp file") {
  TempDir dir("checkpoint");
  const std::string path = dir.file("run.ckpt");
  ddl::optim::write_checkpoint_file(path, random_checkpoint(1));
  const Checkpoint second = random_checkpoint(2);
  ddl::optim::write_checkpoint_file(path, second);
  check_same(ddl::optim::read_checkpoint_file(path), second);
  CHECK(dir.entries() == std::vector<std::string>{"run.ckpt"});
}

TEST_CASE("checkpoint: a save that fails mid-write throws and leaves the previous file intact") {
  TempDir dir("checkpoint");
  const std::string path = dir.file("run.ckpt");
  const Checkpoint previous = random_checkpoint(3);
  ddl::optim::write_checkpoint_file(path, previous);
  const std::vector<char> before = read_bytes(path);

  // A file-size limit makes write() fail with EFBIG part-way through the
  // payload: a real I/O error after the temp file has been created.
  Checkpoint big;
  big.tensors.emplace_back("big", zeros({64, 1024}));
  rlimit old_limit{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old_limit;
  small.rlim_cur = 16 * 1024;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  const auto result = throws_error_mentioning([&] { ddl::optim::write_checkpoint_file(path, big); },
                                              {"write_checkpoint_file", path, std::strerror(EFBIG)});
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  CHECK(result);
  CHECK(read_bytes(path) == before);
  CHECK(dir.entries() == std::vector<std::string>{"run.ckpt"});
  check_same(ddl::optim::read_checkpoint_file(path), previous);
}

TEST_CASE("checkpoint: saving to a directory or into a missing directory throws naming the path and the reason") {
  TempDir dir("checkpoint");
  const std::string folder = dir.file("a_directory");
  fs::create_directory(folder);
  CHECK(throws_error_mentioning([&] { ddl::optim::write_checkpoint_file(folder, random_checkpoint(4)); },
                                {folder, std::strerror(EISDIR)}));
  CHECK(fs::is_directory(folder));
  CHECK(dir.entries() == std::vector<std::string>{"a_directory"});

  const std::string orphan = dir.file("missing/run.ckpt");
  CHECK(throws_error_mentioning([&] { ddl::optim::write_checkpoint_file(orphan, random_checkpoint(4)); },
                                {orphan, std::strerror(ENOENT)}));
}

TEST_CASE("checkpoint: invalid contents are refused before anything is written") {
  TempDir dir("checkpoint");
  const std::string path = dir.file("run.ckpt");
  Checkpoint twice;
  twice.tensors.emplace_back("w", zeros({2}));
  twice.tensors.emplace_back("w", zeros({3}));
  CHECK(throws_error_mentioning([&] { ddl::optim::write_checkpoint_file(path, twice); }, {path, "'w' appears twice"}));
  Checkpoint long_name;
  long_name.integers[std::string(5000, 'x')] = 1;
  CHECK(throws_error_mentioning([&] { ddl::optim::write_checkpoint_file(path, long_name); }, {path, "5000 bytes"}));
  Checkpoint undefined;
  undefined.tensors.emplace_back("u", Tensor());
  CHECK(throws_error_mentioning([&] { ddl::optim::write_checkpoint_file(path, undefined); }, {path, "undefined"}));
  CHECK(dir.entries().empty());
}

TEST_CASE("checkpoint: a missing file or a directory is an error naming it") {
  TempDir dir("checkpoint");
  const std::string path = dir.file("nothing.ckpt");
  CHECK(throws_error_mentioning([&] { ddl::optim::read_checkpoint_file(path); }, {path, "no such file"}));
  CHECK(throws_error_mentioning([&] { ddl::optim::read_checkpoint_file(dir.path.string()); }, {"is a directory"}));
}

TEST_CASE("checkpoint: a file truncated at any point is reported as truncated") {
  TempDir dir("checkpoint");
  const std::string path = dir.file("run.ckpt");
  ddl::optim::write_checkpoint_file(path, random_checkpoint(5));
  const std::vector<char> whole = read_bytes(path);
  const std::string cut = dir.file("cut.ckpt");
  for (const std::size_t size : {std::size_t{0}, std::size_t{5}, std::size_t{8}, std::size_t{20}, std::size_t{27},
                                 std::size_t{28}, std::size_t{40}, whole.size() / 2, whole.size() - 1}) {
    CAPTURE(size);
    write_bytes(cut, std::vector<char>(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(size)));
    CHECK(throws_error_mentioning([&] { ddl::optim::read_checkpoint_file(cut); }, {cut, "truncated"}));
  }
}

TEST_CASE("checkpoint: a flipped byte anywhere in the payload or the stored CRC is a checksum mismatch") {
  TempDir dir("checkpoint");
  const std::string path = dir.file("run.ckpt");
  ddl::optim::write_checkpoint_file(path, random_checkpoint(6));
  const std::vector<char> whole = read_bytes(path);
  const std::string bad = dir.file("bad.ckpt");
  for (const std::size_t at : {std::size_t{24}, std::size_t{28}, std::size_t{33}, whole.size() / 2, whole.size() - 1}) {
    CAPTURE(at);
    std::vector<char> bytes = whole;
    bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
    write_bytes(bad, bytes);
    CHECK(throws_error_mentioning([&] { ddl::optim::read_checkpoint_file(bad); }, {bad, "checksum mismatch"}));
  }
}

TEST_CASE("checkpoint: bad magic, another version, unknown flags and trailing garbage are named") {
  TempDir dir("checkpoint");
  const std::string path = dir.file("run.ckpt");
  ddl::optim::write_checkpoint_file(path, random_checkpoint(8));
  const std::vector<char> whole = read_bytes(path);
  const std::string bad = dir.file("bad.ckpt");

  std::vector<char> magic = whole;
  magic[0] = 'X';
  write_bytes(bad, magic);
  CHECK(throws_error_mentioning([&] { ddl::optim::read_checkpoint_file(bad); }, {bad, "bad magic"}));
  write_bytes(bad, {'h', 'e', 'l', 'l', 'o'});
  CHECK(throws_error_mentioning([&] { ddl::optim::read_checkpoint_file(bad); }, {bad, "bad magic"}));

  write_bytes(bad, file_from_payload(HandPayload{}.build(), 2));
  CHECK(throws_error_mentioning([&] { ddl::optim::read_checkpoint_file(bad); }, {bad, "unsupported version 2"}));

  std::vector<char> flags = whole;
  flags[12] = 1;
  write_bytes(bad, flags);
  CHECK(throws_error_mentioning([&] { ddl::optim::read_checkpoint_file(bad); }, {bad, "unsupported flags"}));

  std::vector<char> trailing = whole;
  trailing.insert(trailing.end(), {'j', 'u', 'n', 'k'});
  write_bytes(bad, trailing);
  CHECK(throws_error_mentioning([&] { ddl::optim::read_checkpoint_file(bad); }, {bad, "trailing garbage", "4 bytes"}));
}

TEST_CASE("checkpoint: implausible fields behind a valid checksum are refused without huge allocations") {
  TempDir dir("checkpoint");
  const std::string bad = dir.file("crafted.ckpt");
  const auto check_refused = [&](const HandPayload& payload, const std::string& problem) {
    CAPTURE(problem);
    write_bytes(bad, file_from_payload(payload.build()));
    CHECK(throws_error_mentioning([&] { ddl::optim::read_checkpoint_file(bad); }, {bad, problem}));
  };
  HandPayload p;
  p.name = std::string(5000, 'n');
  check_refused(p, "implausible name length 5000");
  p = {};
  p.dims = {1, 1, 1, 1, 1, 1, 1};
  check_refused(p, "implausible rank 7");
  p = {};
  p.dims = {2, -3};
  check_refused(p, "negative dimension");
  p = {};
  p.dims = {std::int64_t{1} << 20, std::int64_t{1} << 20, 0};  // zero elements: fine, but byte count 24 is wrong
  check_refused(p, "byte count 24");
  p = {};
  p.dims = {std::int64_t{1} << 40, std::int64_t{1} << 40};  // the product overflows 64 bits
  check_refused(p, "implausible shape");
  p = {};
  p.dims = {std::int64_t{1} << 20, std::int64_t{1} << 20};  // 4 TiB promised, 73 bytes present
  p.byte_count = std::uint64_t{4} << 40;
  check_refused(p, "implausible size");
  p = {};
  p.dtype = 9;
  check_refused(p, "unknown dtype code 9");
  p = {};
  p.tensor_count = 100000;
  check_refused(p, "implausible tensor count 100000");
  p = {};
  p.duplicate_integer = true;
  check_refused(p, "'epoch' appears twice");
  p = {};
  p.extra_bytes = 3;
  check_refused(p, "3 unparsed bytes");
}

TEST_CASE("checkpoint: restore_tensors with a missing, unexpected or misshapen tensor throws and changes nothing") {
  const auto source = small_model(1);
  const auto target = small_model(2);
  const auto targets = target->named_parameters();
  const auto before = values_of(targets);
  const auto saved = source->named_parameters();

  Checkpoint missing;
  ddl::optim::add_tensors(missing, "model.", {saved.begin(), saved.end() - 1});
  CHECK(throws_error_mentioning([&] { ddl::optim::restore_tensors(missing, "model.", targets); },
                                {"'model.2.bias'", "missing"}));

  Checkpoint extra;
  ddl::optim::add_tensors(extra, "model.", saved);
  extra.tensors.emplace_back("model.3.weight", zeros({2}));
  extra.tensors.emplace_back("optimizer.step", zeros({1}, {DType::Int64}));  // other prefixes are not considered
  CHECK(throws_error_mentioning([&] { ddl::optim::restore_tensors(extra, "model.", targets); },
                                {"unexpected", "'model.3.weight'"}));

  Checkpoint misshapen;
  ddl::optim::add_tensors(misshapen, "model.", saved);
  misshapen.tensors.back().second = zeros({4});
  CHECK(throws_error_mentioning([&] { ddl::optim::restore_tensors(misshapen, "model.", targets); },
                                {"'model.2.bias'", "[4]", "[3]"}));

  Checkpoint wrong_dtype;
  ddl::optim::add_tensors(wrong_dtype, "model.", saved);
  wrong_dtype.tensors.back().second = zeros({3}, {DType::Int32});
  CHECK(throws_error_mentioning([&] { ddl::optim::restore_tensors(wrong_dtype, "model.", targets); },
                                {"'model.2.bias'", "int32", "float32"}));

  CHECK(values_of(targets) == before);
}

TEST_CASE("checkpoint: temp files of dead writers on this host are removed, living and other hosts' ones stay") {
  TempDir dir("checkpoint");
  const std::string path = (dir.path / "last.ckpt").string();
  const std::string mine = optim::checkpoint_temp_path(path);  // this process: alive
  CHECK(mine.rfind(path + ".tmp.", 0) == 0);
  const std::string marker = mine.substr(path.size(), mine.rfind('.') + 1 - path.size());  // ".tmp.<host>."
  // Above Linux's largest pid_max (2^22): no such process can exist.
  const std::string dead = path + marker + "4194305";
  const std::string other_host = path + ".tmp.some-other-host.4194305";
  const std::string not_a_pid = path + marker + "12x";
  for (const std::string& name : {mine, dead, other_host, not_a_pid}) std::ofstream(name) << "partial";
  CHECK(optim::remove_stale_temp_files(dir.path.string()) == std::vector<std::string>{dead});
  for (const std::string& name : {mine, other_host, not_a_pid}) CHECK(std::filesystem::exists(name));
  CHECK_FALSE(std::filesystem::exists(dead));
  CHECK(optim::remove_stale_temp_files((dir.path / "missing").string()).empty());
}
