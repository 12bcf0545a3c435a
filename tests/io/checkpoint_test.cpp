#include "tessera/io/checkpoint.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <string>

#include "io_testing.h"
#include "tessera/io/safetensors.h"
#include "testing.h"

namespace tessera {
namespace {

using io::Checkpoint;
using io::load_checkpoint;
using io::save_checkpoint;
using testing::error_of;
using testing::make;
using testing::TempDir;

Checkpoint example_checkpoint() {
  Checkpoint checkpoint;
  checkpoint.model.insert("fc.weight", make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f32));
  checkpoint.model.insert("fc.bias", make({-1, 1}, {2}, DType::f32));
  checkpoint.model.insert("bn.num_batches_tracked", make({9}, {}, DType::i64));
  checkpoint.optimizer.insert("state.0.exp_avg", make({0.5, 0.25}, {2}, DType::f32));
  checkpoint.optimizer.insert("state.0.step", make({42}, {}, DType::i64));
  checkpoint.step = 42;
  checkpoint.rng = {{1234, std::numeric_limits<uint64_t>::max()}};
  return checkpoint;
}

void expect_same(const StateDict& actual, const StateDict& expected) {
  ASSERT_EQ(actual.keys(), expected.keys());
  for (const auto& [key, value] : expected) {
    const Tensor& loaded = actual.at(key);
    EXPECT_EQ(loaded.dtype(), value.dtype()) << key;
    EXPECT_EQ(loaded.shape(), value.shape()) << key;
    EXPECT_EQ(loaded.to_vector<double>(), value.to_vector<double>()) << key;
  }
}

TEST(Checkpoint, RoundTripsModelOptimizerStepAndRng) {
  TempDir dir;
  const std::string path = dir.file("run.ckpt.safetensors");
  const Checkpoint saved = example_checkpoint();
  save_checkpoint(path, saved);
  const Checkpoint loaded = load_checkpoint(path);
  expect_same(loaded.model, saved.model);
  expect_same(loaded.optimizer, saved.optimizer);
  EXPECT_EQ(loaded.step, 42);
  ASSERT_TRUE(loaded.rng.has_value());
  EXPECT_EQ(loaded.rng->first, 1234u);
  EXPECT_EQ(loaded.rng->second, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"run.ckpt.safetensors"}));
}

TEST(Checkpoint, WithoutRngAndEmptyOptimizer) {
  TempDir dir;
  const std::string path = dir.file("plain.safetensors");
  Checkpoint saved;
  saved.model.insert("w", make({1, 2}, {2}, DType::f64));
  saved.step = std::numeric_limits<int64_t>::max();
  save_checkpoint(path, saved);
  const Checkpoint loaded = load_checkpoint(path);
  expect_same(loaded.model, saved.model);
  EXPECT_TRUE(loaded.optimizer.empty());
  EXPECT_EQ(loaded.step, std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(loaded.rng.has_value());
}

TEST(Checkpoint, IsOneSafetensorsFileWithPrefixesAndMetadata) {
  TempDir dir;
  const std::string path = dir.file("layout.safetensors");
  save_checkpoint(path, example_checkpoint());
  const io::SafetensorsFile file = io::load_safetensors(path);
  EXPECT_EQ(
      file.tensors.keys(),
      (std::vector<std::string>{"model.fc.weight", "model.fc.bias", "model.bn.num_batches_tracked",
                                "optimizer.state.0.exp_avg", "optimizer.state.0.step"}));
  EXPECT_EQ(file.metadata,
            (std::map<std::string, std::string>{{"format", "tessera-checkpoint"},
                                                {"version", "1"},
                                                {"step", "42"},
                                                {"rng_seed", "1234"},
                                                {"rng_offset", "18446744073709551615"}}));
}

// Writes a plain safetensors file with one model tensor and `metadata`, and
// returns the error load_checkpoint gives for it.
std::string error_for(const TempDir& dir, const std::map<std::string, std::string>& metadata,
                      const std::string& key = "model.w") {
  const std::string path = dir.file("bad.safetensors");
  StateDict tensors;
  tensors.insert(key, make({1}, {1}));
  io::save_safetensors(path, tensors, metadata);
  return error_of([&] { load_checkpoint(path); });
}

TEST(Checkpoint, RejectsFilesThatAreNotTesseraCheckpoints) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  std::string message = error_for(dir, {});
  EXPECT_HAS(message, "[load_checkpoint]");
  EXPECT_HAS(message, path);
  EXPECT_HAS(message, "not a Tessera checkpoint: metadata 'format' is missing");
  message = error_for(dir, {{"format", "pt"}, {"version", "1"}, {"step", "1"}});
  EXPECT_HAS(message, "metadata 'format' is \"pt\"; expected \"tessera-checkpoint\"");
  message = error_for(dir, {{"format", "tessera-checkpoint"}, {"version", "2"}, {"step", "1"}});
  EXPECT_HAS(message, "version \"2\" is not supported");
  message = error_for(dir, {{"format", "tessera-checkpoint"}, {"version", "1"}});
  EXPECT_HAS(message, "'step' is missing");
  // A missing file is reported by the safetensors reader.
  EXPECT_HAS(error_of([&] { load_checkpoint(dir.file("absent")); }), "No such file");
}

TEST(Checkpoint, RejectsMalformedNumbers) {
  TempDir dir;
  const std::map<std::string, std::string> good{
      {"format", "tessera-checkpoint"}, {"version", "1"}, {"step", "7"}};
  for (const char* step : {"", "7x", " 7", "1.5", "99999999999999999999", "+7"}) {
    auto metadata = good;
    metadata["step"] = step;
    const std::string message = error_for(dir, metadata);
    EXPECT_HAS(message, "metadata 'step' is \"" + std::string(step) + "\"");
    EXPECT_HAS(message, "expected an integer");
  }
  auto metadata = good;
  metadata["rng_seed"] = "-1";
  metadata["rng_offset"] = "0";
  EXPECT_HAS(error_for(dir, metadata), "metadata 'rng_seed' is \"-1\"");
  metadata.erase("rng_offset");
  EXPECT_HAS(error_for(dir, metadata), "'rng_seed' without 'rng_offset'");
}

TEST(Checkpoint, RejectsKeysWithoutAKnownPrefix) {
  TempDir dir;
  const std::string message = error_for(
      dir, {{"format", "tessera-checkpoint"}, {"version", "1"}, {"step", "3"}}, "optim.state.0");
  EXPECT_HAS(message, dir.file("bad.safetensors"));
  EXPECT_HAS(message, "tensor 'optim.state.0' starts with none of 'model.', 'optimizer.' and 'scheduler.'");
}

TEST(Checkpoint, SaveFailureLeavesThePreviousCheckpoint) {
  TempDir dir;
  const std::string path = dir.file("run.safetensors");
  save_checkpoint(path, example_checkpoint());
  Checkpoint broken = example_checkpoint();
  broken.optimizer.insert("ghost", Tensor());
  EXPECT_HAS(error_of([&] { save_checkpoint(path, broken); }), "'optimizer.ghost' is undefined");
  EXPECT_EQ(load_checkpoint(path).step, 42);
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"run.safetensors"}));
}

}  // namespace
}  // namespace tessera
