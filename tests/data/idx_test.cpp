#include <sys/stat.h>

#include "data/idx_builder.h"
#include "testing.h"

namespace tessera::testing {
namespace {

using data::parse_idx;
using data::read_idx;

Tensor parse(const Bytes& bytes, const std::string& name = "buffer") {
  return parse_idx(bytes.data(), bytes.size(), name);
}

std::string parse_error(const Bytes& bytes) {
  return error_of([&] { parse(bytes, "hostile.idx"); });
}

TEST(Idx, ParsesU8) {
  Tensor t = parse(idx_bytes(0x08, {2, 3}, {0, 1, 2, 128, 254, 255}));
  EXPECT_EQ(t.dtype(), DType::u8);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 128, 254, 255}));
}

TEST(Idx, ParsesI8AsI32) {
  Tensor t = parse(idx_bytes(0x09, {4}, {0x00, 0x7f, 0x80, 0xff}));
  EXPECT_EQ(t.dtype(), DType::i32);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{0, 127, -128, -1}));
}

TEST(Idx, ParsesBigEndianI16AsI32) {
  Tensor t = parse(idx_bytes(0x0B, {3}, {0xff, 0xfe, 0x01, 0x2c, 0x80, 0x00}));
  EXPECT_EQ(t.dtype(), DType::i32);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{-2, 300, -32768}));
}

TEST(Idx, ParsesBigEndianI32) {
  Tensor t = parse(
      idx_bytes(0x0C, {1, 3}, {0x01, 0x02, 0x03, 0x04, 0xff, 0xff, 0xff, 0xff, 0x80, 0, 0, 0}));
  EXPECT_EQ(t.dtype(), DType::i32);
  EXPECT_EQ(t.shape(), (Shape{1, 3}));
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{16909060, -1, -2147483648LL}));
}

TEST(Idx, ParsesBigEndianF32) {
  // 1.5 = 0x3fc00000, -2 = 0xc0000000, 0.1f = 0x3dcccccd.
  Tensor t = parse(idx_bytes(0x0D, {3}, {0x3f, 0xc0, 0, 0, 0xc0, 0, 0, 0, 0x3d, 0xcc, 0xcc, 0xcd}));
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 0.1f}));
}

TEST(Idx, ParsesBigEndianF64) {
  // 0.1 = 0x3fb999999999999a, -0.125 = 0xbfc0000000000000.
  Tensor t = parse(idx_bytes(0x0E, {2},
                             {0x3f, 0xb9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a,  //
                              0xbf, 0xc0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(t.dtype(), DType::f64);
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{0.1, -0.125}));
}

TEST(Idx, ZeroDimsIsOneScalarAndEmptyDimsAreEmpty) {
  Tensor scalar = parse(idx_bytes(0x08, {}, {42}));
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item<int64_t>(), 42);
  Tensor empty = parse(idx_bytes(0x0D, {0, 28}, {}));
  EXPECT_EQ(empty.shape(), (Shape{0, 28}));
}

TEST(Idx, ParsesGzipAndMultiMemberGzip) {
  Bytes plain = idx_bytes(0x0B, {2, 2}, {0, 1, 0, 2, 0xff, 0xff, 0x10, 0x00});
  Tensor t = parse(gzip(plain));
  EXPECT_EQ(t.shape(), (Shape{2, 2}));
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, -1, 4096}));
  // A file split into two gzip members, as `cat a.gz b.gz` makes.
  Bytes first = gzip(Bytes(plain.begin(), plain.begin() + 7));
  Bytes second = gzip(Bytes(plain.begin() + 7, plain.end()));
  first.insert(first.end(), second.begin(), second.end());
  EXPECT_EQ(parse(first).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, -1, 4096}));
}

TEST(Idx, LargeGzipGrowsItsBuffer) {
  // 1 MiB of a repeating pattern compresses far below the initial buffer guess.
  Bytes payload(1 << 20);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7);
  Tensor t = parse(gzip(idx_bytes(0x08, {1024, 1024}, payload)));
  ASSERT_EQ(t.shape(), (Shape{1024, 1024}));
  const uint8_t* values = t.data<uint8_t>();
  EXPECT_EQ(values[0], 0);
  EXPECT_EQ(values[1000001], static_cast<uint8_t>(1000001 * 7));
}

TEST(Idx, ReadsPlainAndGzipFiles) {
  DataTempDir dir("idx");
  Bytes plain = idx_bytes(0x08, {3}, {7, 8, 9});
  EXPECT_EQ(read_idx(dir.write("a.idx", plain)).to_vector<int64_t>(),
            (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(read_idx(dir.write("a.idx.gz", gzip(plain))).to_vector<int64_t>(),
            (std::vector<int64_t>{7, 8, 9}));
}

TEST(Idx, MissingFileOrDirectoryNamesThePath) {
  DataTempDir dir("idx");
  std::string message = error_of([&] { read_idx(dir.path() + "/nope-idx1-ubyte"); });
  EXPECT_HAS(message, "[read_idx] cannot open");
  EXPECT_HAS(message, "nope-idx1-ubyte");
  EXPECT_HAS(message, "No such file");
  EXPECT_HAS(error_of([&] { read_idx(dir.path()); }), "is a directory");
}

TEST(Idx, TruncatedHeader) {
  EXPECT_HAS(parse_error({0, 0, 8}), "truncated header: 3 bytes");
  EXPECT_HAS(parse_error({}), "truncated header: 0 bytes");
  // Three dims promised, one given.
  std::string message = parse_error({0, 0, 8, 3, 0, 0, 0, 1});
  EXPECT_HAS(message, "hostile.idx");
  EXPECT_HAS(message, "3 dims need 16 header bytes");
}

TEST(Idx, BadMagicAndUnknownType) {
  std::string message = parse_error({0x01, 0x00, 0x08, 0x01, 0, 0, 0, 0});
  EXPECT_HAS(message, "[parse_idx] hostile.idx: bad magic 0x01 0x00");
  message = parse_error({0, 0, 0x0a, 1, 0, 0, 0, 0});
  EXPECT_HAS(message, "unknown element type 0x0a");
  EXPECT_HAS(message, "0x08 (u8)");
}

TEST(Idx, DimsThatOverflowOrExceedTheData) {
  std::string message = parse_error(idx_bytes(0x0E, {0xffffffff, 0xffffffff, 0xffffffff}, {}));
  EXPECT_HAS(message, "[4294967295, 4294967295, 4294967295] are too large");
  // A zero dim makes the data empty, but the strides of the other dims still overflow
  // (found by fuzz/idx_fuzz.cpp).
  message = parse_error(idx_bytes(0x0B, {0xa3a3a3a3, 0x00081800, 0, 0x600, 0xfffe012c}, {}));
  EXPECT_HAS(message, "too large");
  EXPECT_EQ(parse(idx_bytes(0x0B, {0xffff, 0, 0xffff}, {})).shape(), (Shape{0xffff, 0, 0xffff}));
  // The element count fits in 63 bits but its size in bytes does not fit in 64.
  message = parse_error(idx_bytes(0x0E, {0x7fffffff, 0x7fffffff}, {}));
  EXPECT_HAS(message, "need more than 2^64 data bytes");
  message = parse_error(idx_bytes(0x0D, {60000, 28, 28}, {1, 2, 3, 4}));
  EXPECT_HAS(message, "[60000, 28, 28] of f32 need 188160000 data bytes, but only 4 follow");
}

TEST(Idx, TrailingGarbage) {
  std::string message = parse_error(idx_bytes(0x08, {2}, {1, 2, 3}));
  EXPECT_HAS(message, "1 bytes of trailing garbage after the 2 data bytes");
}

TEST(Idx, CorruptTruncatedAndPaddedGzip) {
  Bytes plain = idx_bytes(0x08, {64}, Bytes(64, 5));
  Bytes packed = gzip(plain);
  Bytes corrupt = packed;
  for (size_t i = 10; i < corrupt.size() - 8; ++i) corrupt[i] ^= 0x5a;
  EXPECT_HAS(parse_error(corrupt), "corrupt gzip data");
  Bytes bad_crc = packed;
  bad_crc[bad_crc.size() - 6] ^= 1;  // inside the CRC-32 trailer
  EXPECT_HAS(parse_error(bad_crc), "corrupt gzip data");
  Bytes truncated(packed.begin(), packed.end() - 5);
  EXPECT_HAS(parse_error(truncated), "ends early");
  EXPECT_HAS(parse_error({0x1f, 0x8b}), "ends early");
  Bytes padded = packed;
  padded.insert(padded.end(), {0, 0, 0});
  EXPECT_HAS(parse_error(padded), "unexpected 3 bytes after the end of the gzip stream");
}

TEST(Idx, GzipWithHostileHeaderFailsOnTheRealSize) {
  // Declares 1 GiB of f64 but carries 8 bytes: must fail without trying to allocate it.
  std::string message = parse_error(gzip(idx_bytes(0x0E, {0x800, 0x800, 0x20}, Bytes(8, 0))));
  EXPECT_HAS(message, "hostile.idx (after gunzip)");
  EXPECT_HAS(message, "but only 8 follow");
}

TEST(Idx, GzipBombIsRefusedByItsDeclaredSizeBeforeInflating) {
  // A header declaring more than the limit is refused as soon as it is
  // inflated, whatever follows (here 32 MiB of zeros in a few KiB of gzip).
  Bytes bomb = idx_bytes(0x08, {0x10000, 0x10001}, {});
  bomb.resize(bomb.size() + (size_t{32} << 20), 0);
  std::string message = parse_error(gzip(bomb));
  EXPECT_HAS(message, "[parse_idx] hostile.idx: the IDX header declares 4295032844 bytes");
  EXPECT_HAS(message, "more than the 4294967296-byte limit");
  // Within the limit, inflating stops one byte past what the header declares.
  Bytes padded = idx_bytes(0x08, {2}, {1, 2});
  padded.resize(padded.size() + (size_t{32} << 20), 0);
  message = parse_error(gzip(padded));
  EXPECT_HAS(message, "decompresses to more than the 10 bytes its IDX header declares");
}

TEST(Idx, NamedPipeIsRefusedNotWaitedOn) {
  DataTempDir dir("idx");
  const std::string fifo = dir.path() + "/pipe-idx1-ubyte";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string message = error_of([&] { read_idx(fifo); });
  EXPECT_HAS(message, "[read_idx]");
  EXPECT_HAS(message, "is not a regular file (it is a named pipe)");
}

}  // namespace
}  // namespace tessera::testing
