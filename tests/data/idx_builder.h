#pragma once

// Hand-made IDX images and gzip for the data tests, built byte by byte so
// they do not share code with the reader under test.

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tessera::testing {

using Bytes = std::vector<uint8_t>;

// Header (0 0 type ndims, big-endian dims) followed by `payload` as given.
inline Bytes idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const Bytes& payload) {
  Bytes out = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t dim : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(dim >> shift));
  }
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

// A gzip member holding `plain` (zlib with the gzip wrapper).
inline Bytes gzip(const Bytes& plain) {
  z_stream stream{};
  EXPECT_EQ(
      deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
      Z_OK);
  Bytes out(deflateBound(&stream, static_cast<uLong>(plain.size())) + 32);
  stream.next_in = const_cast<Bytef*>(plain.data());
  stream.avail_in = static_cast<uInt>(plain.size());
  stream.next_out = out.data();
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

// A fresh empty directory under the system temp dir, removed by the destructor.
class DataTempDir {
 public:
  explicit DataTempDir(const std::string& tag) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("tessera_" + tag + "_" + std::string(info ? info->name() : "test") + "_" +
             std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~DataTempDir() {
    std::error_code error;
    std::filesystem::remove_all(path_, error);
  }
  // Writes `bytes` to `name` inside the directory and returns the full path.
  std::string write(const std::string& name, const Bytes& bytes) const {
    const std::string file = (path_ / name).string();
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return file;
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace tessera::testing
