#include "tessera/io/safetensors.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "io_testing.h"
#include "tessera/core/file.h"
#include "testing.h"

namespace tessera {
namespace {

using io::load_safetensors;
using io::parse_safetensors;
using io::save_safetensors;
using testing::error_of;
using testing::make;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

// The bytes of a contiguous copy: round trips must be bit-exact (NaN too).
std::vector<uint8_t> bytes_of(const Tensor& tensor) {
  Tensor dense = tensor.contiguous();
  const auto* begin = static_cast<const uint8_t*>(dense.raw_data());
  return std::vector<uint8_t>(begin, begin + dense.numel() * dtype_size(dense.dtype()));
}

::testing::AssertionResult same_tensor(const Tensor& actual, const Tensor& expected) {
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure()
           << "got " << dtype_name(actual.dtype()) << " " << shape_str(actual.shape()) << ", want "
           << dtype_name(expected.dtype()) << " " << shape_str(expected.shape());
  }
  if (bytes_of(actual) != bytes_of(expected)) {
    return ::testing::AssertionFailure()
           << "bytes differ: " << to_string(actual) << " vs " << to_string(expected);
  }
  return ::testing::AssertionSuccess();
}

// An 8-byte little-endian length, the header text, then the data buffer;
// written here byte by byte, independently of the writer.
std::vector<uint8_t> assemble(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out;
  const uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(length >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// Values each dtype can hold exactly (floats get NaN, infinities, -0).
std::vector<double> values_for(DType dtype) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (dtype) {
    case DType::boolean:
      return {1, 0, 1, 1, 0, 0};
    case DType::u8:
      return {0, 1, 127, 128, 200, 255};
    case DType::i32:
      return {-2147483648.0, -1, 0, 1, 65536, 2147483647.0};
    case DType::i64:
      return {-1099511627776.0, -1, 0, 1, 3, 4503599627370496.0};
    default:
      return {1.5, -0.0, std::nan(""), inf, -inf, -3.25};
  }
}

TEST(Safetensors, RoundTripsEveryDtypeIncludingScalarAndEmpty) {
  TempDir dir;
  const DType dtypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16,
                          DType::i64, DType::i32, DType::u8,  DType::boolean};
  StateDict tensors;
  for (DType dtype : dtypes) {
    const std::string name = dtype_name(dtype);
    tensors.insert(name + ".matrix", make(values_for(dtype), {2, 3}, dtype));
    tensors.insert(name + ".scalar", make({values_for(dtype)[0]}, {}, dtype));
    tensors.insert(name + ".empty", Tensor::empty({0, 3}, dtype));
  }
  const std::string path = dir.file("all.safetensors");
  save_safetensors(path, tensors);
  io::SafetensorsFile loaded = load_safetensors(path);
  EXPECT_EQ(loaded.tensors.keys(), tensors.keys());  // StateDict order is kept
  EXPECT_TRUE(loaded.metadata.empty());
  for (const auto& [key, value] : tensors) {
    EXPECT_TRUE(same_tensor(loaded.tensors.at(key), value)) << key;
  }
  EXPECT_EQ(loaded.tensors.at("f32.scalar").dim(), 0);
}

TEST(Safetensors, NonContiguousTensorsAreSavedByValue) {
  TempDir dir;
  Tensor base = make({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4}, DType::f32);
  StateDict tensors;
  tensors.insert("transposed", base.t());
  tensors.insert("strided", base.slice(1, 0, 4, 2));
  tensors.insert("expanded", make({1, 2}, {2, 1}, DType::i32).expand({2, 3}));
  tensors.insert("offset", base.select(0, 2));
  const std::string path = dir.file("views.safetensors");
  save_safetensors(path, tensors);
  StateDict loaded = load_safetensors(path).tensors;
  EXPECT_TRUE(testing::all_close(loaded.at("transposed"), {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(loaded.at("transposed").shape(), (Shape{4, 3}));
  EXPECT_TRUE(testing::all_close(loaded.at("strided"), {0, 2, 4, 6, 8, 10}));
  EXPECT_TRUE(testing::all_close(loaded.at("expanded"), {1, 1, 1, 2, 2, 2}));
  EXPECT_TRUE(testing::all_close(loaded.at("offset"), {8, 9, 10, 11}));
}

TEST(Safetensors, MetadataRoundTrips) {
  TempDir dir;
  StateDict tensors;
  tensors.insert("x", make({1, 2}, {}, DType::f32));
  const std::map<std::string, std::string> metadata{
      {"format", "pt"}, {"note", "quotes \" and \\ and\nnewlines, ünïcode"}, {"empty", ""}};
  const std::string path = dir.file("meta.safetensors");
  save_safetensors(path, tensors, metadata);
  EXPECT_EQ(load_safetensors(path).metadata, metadata);
}

TEST(Safetensors, WriterProducesTheExactBytesOfTheFormat) {
  TempDir dir;
  StateDict tensors;
  tensors.insert("c", make({7}, {1}, DType::u8));
  tensors.insert("a", make({1.5, -2.0}, {2}, DType::f32));
  const std::string path = dir.file("exact.safetensors");
  save_safetensors(path, tensors);
  // Header in StateDict order; the wider f32 data comes first so it is aligned.
  std::string header = R"({"c":{"dtype":"U8","shape":[1],"data_offsets":[8,9]},)"
                       R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::vector<uint8_t> data{0x00, 0x00, 0xC0, 0x3F, 0x00, 0x00, 0x00, 0xC0, 0x07};
  EXPECT_EQ(read_bytes(path), assemble(header, data));
}

TEST(Safetensors, LoadsAHandAssembledFile) {
  const std::string header = R"({"__metadata__":{"source":"hand"},)"
                             R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("n":{"dtype":"I64","shape":[],"data_offsets":[8,16]},)"
                             R"("h":{"dtype":"F16","shape":[2],"data_offsets":[16,20]},)"
                             R"("b":{"dtype":"BF16","shape":[1,1],"data_offsets":[20,22]},)"
                             R"("m":{"dtype":"BOOL","shape":[2],"data_offsets":[22,24]},)"
                             R"("e":{"dtype":"F64","shape":[0,3],"data_offsets":[24,24]},)"
                             R"("u":{"dtype":"U8","shape":[3],"data_offsets":[24,27]},)"
                             R"("i":{"dtype":"I32","shape":[1],"data_offsets":[27,31]},)"
                             R"("d":{"dtype":"F64","shape":[1],"data_offsets":[31,39]}})";
  const std::vector<uint8_t> data{
      0x00, 0x00, 0xC0, 0x3F, 0x00, 0x00, 0x00, 0xC0,  // f32 1.5, -2
      0xFD, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,  // i64 -3
      0x00, 0x3C, 0x00, 0xC1,                          // f16 1, -2.5
      0x00, 0xBF,                                      // bf16 -0.5
      0x01, 0x00,                                      // bool true, false
      0x00, 0x7F, 0xFF,                                // u8 0, 127, 255
      0xFE, 0xFF, 0xFF, 0xFF,                          // i32 -2
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xD0, 0x3F,  // f64 0.25
  };
  const std::vector<uint8_t> bytes = assemble(header, data);
  io::SafetensorsFile file = parse_safetensors(bytes.data(), bytes.size(), "hand");
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"source", "hand"}}));
  EXPECT_EQ(file.tensors.keys(),
            (std::vector<std::string>{"w", "n", "h", "b", "m", "e", "u", "i", "d"}));
  const StateDict& t = file.tensors;
  EXPECT_EQ(t.at("w").dtype(), DType::f32);
  EXPECT_TRUE(testing::all_close(t.at("w"), {1.5, -2}));
  EXPECT_EQ(t.at("n").dtype(), DType::i64);
  EXPECT_EQ(t.at("n").dim(), 0);
  EXPECT_EQ(t.at("n").item<int64_t>(), -3);
  EXPECT_EQ(t.at("h").dtype(), DType::f16);
  EXPECT_TRUE(testing::all_close(t.at("h"), {1, -2.5}));
  EXPECT_EQ(t.at("b").dtype(), DType::bf16);
  EXPECT_EQ(t.at("b").shape(), (Shape{1, 1}));
  EXPECT_TRUE(testing::all_close(t.at("b"), {-0.5}));
  EXPECT_EQ(t.at("m").dtype(), DType::boolean);
  EXPECT_TRUE(testing::all_close(t.at("m"), {1, 0}));
  EXPECT_EQ(t.at("e").shape(), (Shape{0, 3}));
  EXPECT_EQ(t.at("u").dtype(), DType::u8);
  EXPECT_TRUE(testing::all_close(t.at("u"), {0, 127, 255}));
  EXPECT_EQ(t.at("i").dtype(), DType::i32);
  EXPECT_TRUE(testing::all_close(t.at("i"), {-2}));
  EXPECT_EQ(t.at("d").dtype(), DType::f64);
  EXPECT_TRUE(testing::all_close(t.at("d"), {0.25}));
}

// Loads `bytes` from a file and returns the error (or "no error").
class SafetensorsCorrupt : public ::testing::Test {
 protected:
  std::string load_error(const std::vector<uint8_t>& bytes) {
    write_bytes(path_, bytes);
    return error_of([&] { load_safetensors(path_); });
  }
  // A file whose data buffer is `data_size` zero bytes.
  std::string header_error(const std::string& header, size_t data_size = 8) {
    return load_error(assemble(header, std::vector<uint8_t>(data_size, 0)));
  }

  TempDir dir_;
  std::string path_ = dir_.file("corrupt.safetensors");
};

#define EXPECT_NAMES(message, key)          \
  do {                                      \
    const std::string text = (message);     \
    EXPECT_HAS(text, "[load_safetensors]"); \
    EXPECT_HAS(text, path_);                \
    EXPECT_HAS(text, key);                  \
  } while (0)

TEST_F(SafetensorsCorrupt, FileLevelErrorsNameTheFile) {
  const std::string missing = dir_.file("missing.safetensors");
  std::string message = error_of([&] { load_safetensors(missing); });
  EXPECT_HAS(message, missing);
  EXPECT_HAS(message, "No such file");
  message = error_of([&] { load_safetensors(dir_.path().string()); });
  EXPECT_HAS(message, "not a regular file");

  EXPECT_NAMES(load_error({}), "fewer than the 8-byte header length");
  EXPECT_NAMES(load_error({1, 0, 0}), "fewer than the 8-byte header length");
  EXPECT_NAMES(load_error({100, 0, 0, 0, 0, 0, 0, 0, '{', '}'}), "runs past the end");
  EXPECT_NAMES(load_error({0, 0, 0, 0, 0, 0, 0, 0x10, '{', '}'}), "absurd");
  // 100'000'001 is past the limit; exactly 100'000'000 is only longer than the file.
  EXPECT_NAMES(load_error({0x01, 0xE1, 0xF5, 0x05, 0, 0, 0, 0, '{', '}'}), "absurd");
  EXPECT_NAMES(load_error({0x00, 0xE1, 0xF5, 0x05, 0, 0, 0, 0, '{', '}'}), "runs past the end");
}

TEST_F(SafetensorsCorrupt, DeeplyNestedHeaderIsRefusedNotRecursedInto) {
  // A million nested arrays: small enough to pass the header-size limit,
  // deep enough to overflow the stack of anything that recurses over it.
  const int depth = 1'000'000;
  const std::string header = R"({"w":)" + std::string(depth, '[') + std::string(depth, ']') + "}";
  EXPECT_NAMES(header_error(header), "nests deeper than");
  EXPECT_NAMES(header_error(R"({"w":[[[[[[[[[[1]]]]]]]]]]})"), "nests deeper than");
}

TEST_F(SafetensorsCorrupt, HeaderErrorsNameTheFileAndKey) {
  const std::string ok = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
  EXPECT_NAMES(header_error(R"({"w":{)" + ok + "}", 8), "not valid JSON");
  EXPECT_NAMES(header_error("[1, 2]"), "must be a JSON object");
  EXPECT_NAMES(header_error(""), "must be a JSON object");
  EXPECT_NAMES(header_error("{\"w\": \"\xff\"}"), "not valid JSON");  // invalid UTF-8
  EXPECT_NAMES(header_error(R"({"w":3})"), "tensor 'w': entry must be an object");
  EXPECT_NAMES(header_error(R"({"w":{"shape":[2],"data_offsets":[0,8]}})"), "tensor 'w': 'dtype'");
  EXPECT_NAMES(header_error(R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})"),
               "tensor 'w': 'dtype'");
  std::string message = header_error(R"({"w":{"dtype":"I16","shape":[4],"data_offsets":[0,8]}})");
  EXPECT_NAMES(message, "tensor 'w'");
  EXPECT_HAS(message, "I16");
  EXPECT_HAS(message, "F64, F32, F16, BF16, I64, I32, U8, BOOL");
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})"),
               "tensor 'w': 'shape'");
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})"),
               "non-negative");
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})"),
               "tensor 'w'");
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],)"
                            R"("data_offsets":[0,8]}})"),
               "more elements than fit");
  // Even with a zero dim: strides are products of the other dims.
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","shape":[0,4294967296,4294967296],)"
                            R"("data_offsets":[0,0]}})",
                            0),
               "more elements than fit");
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","shape":[9223372036854775808],)"
                            R"("data_offsets":[0,8]}})"),
               "more elements than fit");
  for (const char* offsets :
       {"", R"(,"data_offsets":[0])", R"(,"data_offsets":[0,8,8])", R"(,"data_offsets":[0,"8"])",
        R"(,"data_offsets":[0,8.0])", R"(,"data_offsets":[-1,7])", R"(,"data_offsets":{"a":1})"}) {
    message = header_error(std::string(R"({"w":{"dtype":"F32","shape":[2])") + offsets + "}}");
    EXPECT_NAMES(message, "tensor 'w': 'data_offsets' must be two non-negative integers");
  }
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})"),
               "end before they begin");
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})"),
               "tensor 'w': data_offsets [0, 8] hold 8 bytes but shape [3]");
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})"),
               "tensor 'w': data_offsets [0, 16] run past the 8-byte data buffer");
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("v":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})"),
               "tensor 'v' bytes [4, 8) overlap tensor 'w'");
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("e":{"dtype":"F32","shape":[0],"data_offsets":[2,2]}})",
                            4),
               "tensor 'e' bytes [2, 2) overlap tensor 'w'");
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})"),
               "bytes [0, 4) of the data buffer before tensor 'w' belong to no tensor");
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})"),
               "the data buffer has 8 bytes but the tensors cover only 4 (the last is 'w')");
  EXPECT_NAMES(header_error("{}", 3), "cover only 0 (no tensors)");
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})"),
               "duplicate key 'w'");
  EXPECT_NAMES(header_error(R"({"w":{"dtype":"F32","dtype":"F32","shape":[2],)"
                            R"("data_offsets":[0,8]}})"),
               "duplicate key 'dtype'");
  EXPECT_NAMES(header_error(R"({"__metadata__":{"k":1},)"
                            R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})"),
               "metadata 'k' must be a string");
  EXPECT_NAMES(header_error(R"({"__metadata__":["k"],)"
                            R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})"),
               "'__metadata__' must be an object of strings");
  EXPECT_NAMES(
      load_error(assemble(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", {1, 2})),
      "tensor 'm': BOOL element 1 has byte value 2");
  // A well-formed empty file is fine.
  EXPECT_EQ(header_error("{}", 0), "no error");
}

// A small valid file with several dtypes, metadata and an empty tensor.
std::vector<uint8_t> valid_file_bytes(const TempDir& dir) {
  StateDict tensors;
  tensors.insert("weight", make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f32));
  tensors.insert("steps", make({7}, {}, DType::i64));
  tensors.insert("mask", make({1, 0, 1}, {3}, DType::boolean));
  tensors.insert("empty", Tensor::empty({0}, DType::f16));
  const std::string path = dir.file("valid.safetensors");
  save_safetensors(path, tensors, {{"k", "v"}});
  return read_bytes(path);
}

TEST(Safetensors, EveryTruncationThrows) {
  TempDir dir;
  const std::vector<uint8_t> bytes = valid_file_bytes(dir);
  ASSERT_GT(bytes.size(), 100u);
  for (size_t length = 0; length < bytes.size(); ++length) {
    // An exact-size heap copy, so reading past `length` trips AddressSanitizer.
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(length));
    EXPECT_THROW(parse_safetensors(prefix.data(), prefix.size(), "truncated"), Error) << length;
  }
  // Through the file path too, at a few points.
  const std::string path = dir.file("truncated.safetensors");
  for (size_t length : {size_t{0}, size_t{7}, size_t{8}, size_t{20}, bytes.size() - 1}) {
    write_bytes(
        path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(length)));
    EXPECT_HAS(error_of([&] { load_safetensors(path); }), path);
  }
}

TEST(Safetensors, MutatedHeaderBytesThrowOrLoadButNeverCrash) {
  TempDir dir;
  const std::vector<uint8_t> bytes = valid_file_bytes(dir);
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  int errors = 0;
  for (size_t position = 0; position < 8 + header_size; ++position) {
    for (uint8_t replacement :
         {uint8_t{0xFF}, uint8_t{'"'}, uint8_t{'}'}, uint8_t{'9'}, uint8_t{'-'}, uint8_t{0}}) {
      std::vector<uint8_t> mutated = bytes;
      if (mutated[position] == replacement) continue;
      mutated[position] = replacement;
      try {
        parse_safetensors(mutated.data(), mutated.size(), "mutated");
      } catch (const Error&) {
        ++errors;
      }
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(Safetensors, LyingOffsetsInAValidFileAreCaught) {
  TempDir dir;
  StateDict tensors;
  tensors.insert("a", make({1, 2}, {2}, DType::f32));
  tensors.insert("b", make({3, 4}, {2}, DType::f32));
  const std::string path = dir.file("lie.safetensors");
  save_safetensors(path, tensors);
  std::vector<uint8_t> bytes = read_bytes(path);
  std::string text(bytes.begin(), bytes.end());
  // Point b at a's bytes: the same length, so only the overlap check sees it.
  const size_t at = text.find("[8,16]");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 6, "[0, 8]");
  const std::string message = error_of([&] {
    parse_safetensors(reinterpret_cast<const uint8_t*>(text.data()), text.size(), "lie");
  });
  EXPECT_HAS(message, "tensor 'b' bytes [0, 8) overlap tensor 'a'");
}

TEST(Safetensors, SaveRejectsBadInputAndWritesNothing) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  StateDict undefined;
  undefined.insert("ghost", Tensor());
  std::string message = error_of([&] { save_safetensors(path, undefined); });
  EXPECT_HAS(message, "[save_safetensors]");
  EXPECT_HAS(message, path);
  EXPECT_HAS(message, "'ghost' is undefined");
  StateDict reserved;
  reserved.insert("__metadata__", make({1}, {1}));
  EXPECT_HAS(error_of([&] { save_safetensors(path, reserved); }), "'__metadata__' is reserved");
  StateDict bad_utf8;
  bad_utf8.insert("bad\xff", make({1}, {1}));
  EXPECT_HAS(error_of([&] { save_safetensors(path, bad_utf8); }), "valid UTF-8");
  EXPECT_TRUE(dir.entries().empty());
}

TEST(Safetensors, SaveIntoAMissingDirectoryThrowsAndLeavesNothing) {
  TempDir dir;
  const std::string path = dir.file("no_such_dir/model.safetensors");
  StateDict tensors;
  tensors.insert("x", make({1, 2}, {2}));
  const std::string message = error_of([&] { save_safetensors(path, tensors); });
  EXPECT_HAS(message, "[save_safetensors]");
  EXPECT_HAS(message, path);
  EXPECT_HAS(message, "No such file or directory");
  EXPECT_TRUE(dir.entries().empty());
}

TEST(Safetensors, FailedRenameRemovesTheTemporaryFile) {
  TempDir dir;
  // A directory where the file should go: everything succeeds but the rename.
  const std::string path = dir.file("taken");
  std::filesystem::create_directory(path);
  std::filesystem::create_directory(path + "/inside");
  StateDict tensors;
  tensors.insert("x", make({1, 2}, {2}));
  const std::string message = error_of([&] { save_safetensors(path, tensors); });
  EXPECT_HAS(message, path);
  EXPECT_HAS(message, "rename");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"taken"}));
}

TEST(Safetensors, OverwriteReplacesTheWholeFileAndLeavesNoTemporaryFile) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  StateDict big;
  big.insert("x", testing::uniform({100, 100}, -1, 1, 3, DType::f32));
  big.insert("y", make({1, 2, 3}, {3}, DType::i64));
  save_safetensors(path, big, {{"run", "first"}});
  StateDict small;
  small.insert("z", make({5}, {1}, DType::f32));
  save_safetensors(path, small);
  const std::string reference = dir.file("reference.safetensors");
  save_safetensors(reference, small);
  EXPECT_EQ(read_bytes(path), read_bytes(reference));  // no leftover tail of the big file
  io::SafetensorsFile loaded = load_safetensors(path);
  EXPECT_EQ(loaded.tensors.keys(), (std::vector<std::string>{"z"}));
  EXPECT_TRUE(loaded.metadata.empty());
  EXPECT_EQ(dir.entries(),
            (std::vector<std::string>{"model.safetensors", "reference.safetensors"}));
}

TEST(Safetensors, TemporaryFilesOfKilledWritersAreRemovedByTheNextSave) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  std::string host_name = host;
  for (char& c : host_name) {
    if (c == '/' || c == '-') c = '_';
  }
  // A process that has exited (the child below), this live one, and another host.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const std::string dead =
      "model.safetensors.tmp-" + host_name + "-" + std::to_string(child) + "-0";
  const std::string live =
      "model.safetensors.tmp-" + host_name + "-" + std::to_string(::getpid()) + "-7";
  const std::string remote = "model.safetensors.tmp-otherhost-1-0";
  for (const std::string& name : {dead, live, remote}) write_bytes(dir.file(name), {1, 2, 3});
  StateDict tensors;
  tensors.insert("x", make({1, 2}, {2}));
  save_safetensors(path, tensors);
  std::vector<std::string> expected{"model.safetensors", live, remote};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(dir.entries(), expected);
}

TEST(Safetensors, AFileSizeLimitIsAnErrorNotAKill) {
  TempDir dir;
  const std::string path = dir.file("big.safetensors");
  StateDict tensors;
  tensors.insert("x", zeros({10000}));
  // `ulimit -f 4`, for this test only (the soft limit goes back up after).
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit limited = saved;
  limited.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  const std::string message = error_of([&] { save_safetensors(path, tensors); });
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  EXPECT_HAS(message, "[save_safetensors] writing '" + path + "' failed");
  EXPECT_HAS(message, "File too large");
  EXPECT_TRUE(dir.entries().empty());
}

TEST(Safetensors, ANamedPipeIsRefusedNotWaitedOn) {
  TempDir dir;
  const std::string path = dir.file("pipe.safetensors");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  const std::string message = error_of([&] { load_safetensors(path); });
  EXPECT_HAS(message, "[load_safetensors] '" + path + "'");
  EXPECT_HAS(message, "is not a regular file (it is a named pipe)");
}

TEST(RegularFile, AFileTruncatedWhileReadIsAnError) {
  TempDir dir;
  const std::string path = dir.file("shrinking");
  write_bytes(path, std::vector<uint8_t>(8192, 7));
  RegularFile file(path, "reader");
  EXPECT_EQ(file.size(), 8192u);
  std::vector<uint8_t> bytes(4096);
  file.read_at(bytes.data(), bytes.size(), 0);
  std::filesystem::resize_file(path, 5000);  // another process truncates it
  const std::string message = error_of([&] { file.read_at(bytes.data(), bytes.size(), 4096); });
  EXPECT_HAS(message, "[reader] '" + path + "' ended at byte 5000 while 8192 bytes were expected");
}

// PyTorch interoperability through tests/io/torch_safetensors.py; skipped
// when the interpreter has no torch.
class SafetensorsTorch : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* python = std::getenv("TESSERA_TORCH_PYTHON");
    interpreter_ = python ? python : "/usr/bin/python3";
    if (std::system((interpreter_ + " -c 'import torch' 2>/dev/null").c_str()) != 0) {
      if (std::getenv("TESSERA_REQUIRE_TORCH")) FAIL() << interpreter_ << " cannot import torch";
      GTEST_SKIP() << interpreter_ << " cannot import torch (Debian package python3-torch)";
    }
  }
  // Runs the script with `mode` on `path`; true when it exits 0.
  bool run_script(const std::string& mode, const std::string& path) {
    const std::string script = std::string(TESSERA_SOURCE_DIR) + "/tests/io/torch_safetensors.py";
    return std::system((interpreter_ + " " + script + " " + mode + " '" + path + "'").c_str()) == 0;
  }

  std::string interpreter_;
  TempDir dir_;
};

TEST_F(SafetensorsTorch, LoadsAFileWrittenByPyTorch) {
  const std::string path = dir_.file("from_torch.safetensors");
  ASSERT_TRUE(run_script("write", path));
  io::SafetensorsFile file = load_safetensors(path);
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"framework", "pt"}}));
  const StateDict& t = file.tensors;
  EXPECT_EQ(t.keys(), (std::vector<std::string>{"f32", "f64", "f16", "bf16", "i64", "i32", "u8",
                                                "bool", "transposed", "scalar", "empty"}));
  EXPECT_TRUE(
      same_tensor(t.at("f32"), make({-0.5, -0.25, 0, 0.25, 0.5, 0.75}, {2, 3}, DType::f32)));
  EXPECT_TRUE(same_tensor(t.at("f64"), make({-1, -0.5, 0, 0.5, 1}, {5}, DType::f64)));
  EXPECT_TRUE(same_tensor(t.at("f16"), make({0.5, -1.25, 65504}, {3}, DType::f16)));
  EXPECT_TRUE(same_tensor(t.at("bf16"), make({1, -3.5, 0.0078125}, {3}, DType::bf16)));
  EXPECT_EQ(t.at("i64").dtype(), DType::i64);
  EXPECT_EQ(t.at("i64").to_vector<int64_t>(),
            (std::vector<int64_t>{-(int64_t{1} << 40), 0, int64_t{1} << 62}));
  EXPECT_TRUE(same_tensor(t.at("i32"), make({-7, 2147483647.0}, {2, 1}, DType::i32)));
  EXPECT_TRUE(same_tensor(t.at("u8"), make({0, 128, 255}, {3}, DType::u8)));
  EXPECT_TRUE(same_tensor(t.at("bool"), make({1, 0, 1}, {3}, DType::boolean)));
  EXPECT_TRUE(same_tensor(t.at("transposed"), make({0, 3, 1, 4, 2, 5}, {3, 2}, DType::f32)));
  EXPECT_TRUE(same_tensor(t.at("scalar"), make({3.25}, {}, DType::f32)));
  EXPECT_TRUE(same_tensor(t.at("empty"), Tensor::empty({0, 4}, DType::f32)));
}

TEST_F(SafetensorsTorch, PyTorchReadsAFileWrittenByTessera) {
  StateDict t;
  t.insert("f32", make({-0.5, -0.25, 0, 0.25, 0.5, 0.75}, {2, 3}, DType::f32));
  t.insert("f64", make({-1, -0.5, 0, 0.5, 1}, {5}, DType::f64));
  t.insert("f16", make({0.5, -1.25, 65504}, {3}, DType::f16));
  t.insert("bf16", make({1, -3.5, 0.0078125}, {3}, DType::bf16));
  t.insert("i64", Tensor::from_vector<int64_t>({-(int64_t{1} << 40), 0, int64_t{1} << 62}, {3}));
  t.insert("i32", make({-7, 2147483647.0}, {2, 1}, DType::i32));
  t.insert("u8", make({0, 128, 255}, {3}, DType::u8));
  t.insert("bool", make({1, 0, 1}, {3}, DType::boolean));
  t.insert("transposed", make({0, 1, 2, 3, 4, 5}, {2, 3}, DType::f32).t());
  t.insert("scalar", make({3.25}, {}, DType::f32));
  t.insert("empty", Tensor::empty({0, 4}, DType::f32));
  const std::string path = dir_.file("from_tessera.safetensors");
  save_safetensors(path, t, {{"framework", "tessera"}});
  EXPECT_TRUE(run_script("check", path));
}

}  // namespace
}  // namespace tessera
