#include <zlib.h>

#include <cmath>
#include <filesystem>

#include "data/idx_builder.h"
#include "testing.h"

namespace tessera::testing {
namespace {

using data::FashionMNIST;

constexpr int64_t kPixels = 28 * 28;

// Bytes [offset, offset + count) of a gzip file, read with zlib directly.
Bytes gunzip_range(const std::string& path, size_t offset, size_t count) {
  gzFile file = gzopen(path.c_str(), "rb");
  EXPECT_NE(file, nullptr) << path;
  Bytes out(offset + count);
  if (file == nullptr) return {};
  EXPECT_EQ(gzread(file, out.data(), static_cast<unsigned>(out.size())),
            static_cast<int>(out.size()));
  gzclose(file);
  return Bytes(out.begin() + static_cast<std::ptrdiff_t>(offset), out.end());
}

bool package_installed() {
  return std::filesystem::exists(FashionMNIST::default_root() + "/train-labels-idx1-ubyte.gz");
}

// Writes a tiny Fashion-MNIST-shaped split: image i has every pixel equal to 40 * i + p % 7.
void write_split(const DataTempDir& dir, const std::string& prefix, int images, int labels,
                 uint8_t bad_label = 0) {
  Bytes pixels;
  for (int i = 0; i < images; ++i) {
    for (int p = 0; p < kPixels; ++p) pixels.push_back(static_cast<uint8_t>(40 * i + p % 7));
  }
  Bytes label_bytes;
  for (int i = 0; i < labels; ++i) label_bytes.push_back(static_cast<uint8_t>(i % 10));
  if (bad_label != 0) label_bytes.back() = bad_label;
  dir.write(prefix + "-images-idx3-ubyte.gz",
            gzip(idx_bytes(0x08, {static_cast<uint32_t>(images), 28, 28}, pixels)));
  // Labels uncompressed: both file forms are accepted.
  dir.write(prefix + "-labels-idx1-ubyte",
            idx_bytes(0x08, {static_cast<uint32_t>(labels)}, label_bytes));
}

TEST(FashionMNIST, MissingFilesNameFileAndPackage) {
  DataTempDir dir("fmnist");
  std::string message = error_of([&] { FashionMNIST(dir.path(), true); });
  EXPECT_HAS(message, "[FashionMNIST] missing train-images-idx3-ubyte.gz");
  EXPECT_HAS(message, "dataset-fashion-mnist");
  EXPECT_HAS(message, dir.path());
  EXPECT_HAS(error_of([&] { FashionMNIST(dir.path() + "/absent", false); }),
             "t10k-images-idx3-ubyte.gz");
}

TEST(FashionMNIST, DefaultRootHonoursEnvironment) {
  ::setenv("TESSERA_FASHION_MNIST", "/somewhere/else", 1);
  EXPECT_EQ(FashionMNIST::default_root(), "/somewhere/else");
  ::unsetenv("TESSERA_FASHION_MNIST");
  EXPECT_EQ(FashionMNIST::default_root(), "/usr/share/datasets/fashion-mnist");
}

TEST(FashionMNIST, SmallSplitScalesNormalisesAndBatches) {
  DataTempDir dir("fmnist");
  write_split(dir, "t10k", 3, 3);
  FashionMNIST raw(dir.path(), /*train=*/false, /*normalize=*/false);
  FashionMNIST normalised(dir.path(), /*train=*/false);
  EXPECT_EQ(raw.size(), 3);
  data::Example batch = raw.get_batch({2, 0});
  ASSERT_EQ(batch.data.shape(), (Shape{2, 1, 28, 28}));
  EXPECT_EQ(batch.data.dtype(), DType::f32);
  EXPECT_EQ(batch.target.dtype(), DType::i64);
  EXPECT_EQ(batch.target.to_vector<int64_t>(), (std::vector<int64_t>{2, 0}));
  std::vector<double> expected_raw, expected_normalised;
  for (int image : {2, 0}) {
    for (int p = 0; p < kPixels; ++p) {
      const double scaled = (40 * image + p % 7) / 255.0;
      expected_raw.push_back(scaled);
      expected_normalised.push_back((scaled - 0.2860) / 0.3530);
    }
  }
  EXPECT_TRUE(all_close(batch.data, expected_raw, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(normalised.get_batch({2, 0}).data, expected_normalised, 1e-6, 1e-6));
  data::Example one = normalised.get(1);
  EXPECT_EQ(one.data.shape(), (Shape{1, 28, 28}));
  EXPECT_EQ(one.target.item<int64_t>(), 1);
  EXPECT_HAS(error_of([&] { raw.get(3); }), "[FashionMNIST] index 3 is out of range");
}

TEST(FashionMNIST, MismatchedCountsAndBadLabelsAreErrors) {
  DataTempDir dir("fmnist");
  write_split(dir, "train", 3, 4);
  std::string message = error_of([&] { FashionMNIST(dir.path(), true); });
  EXPECT_HAS(message, "has 3 images but");
  EXPECT_HAS(message, "has 4 labels");
  write_split(dir, "t10k", 2, 2, /*bad_label=*/10);
  EXPECT_HAS(error_of([&] { FashionMNIST(dir.path(), false); }), "label 10 at index 1");
}

TEST(FashionMNIST, ClassNames) {
  EXPECT_STREQ(FashionMNIST::class_name(0), "T-shirt/top");
  EXPECT_STREQ(FashionMNIST::class_name(9), "Ankle boot");
  EXPECT_HAS(error_of([] { FashionMNIST::class_name(10); }), "label 10");
}

TEST(FashionMNIST, PackagedSplitsMatchTheRawFiles) {
  if (!package_installed()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string root = FashionMNIST::default_root();
  FashionMNIST train(root, true);
  FashionMNIST test(root, false);
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(test.size(), 10000);
  // Labels read independently: 8-byte header, then one byte per label.
  Bytes first_labels = gunzip_range(root + "/train-labels-idx1-ubyte.gz", 8, 16);
  EXPECT_EQ(train.get(0).target.item<int64_t>(), first_labels[0]);
  data::Example head = train.get_batch({0, 1, 15});
  EXPECT_EQ(head.target.to_vector<int64_t>(),
            (std::vector<int64_t>{first_labels[0], first_labels[1], first_labels[15]}));
  // The pixels of image 1 (16-byte header).
  Bytes pixels = gunzip_range(root + "/train-images-idx3-ubyte.gz", 16 + kPixels, kPixels);
  std::vector<double> expected;
  for (uint8_t value : pixels) expected.push_back((value / 255.0 - 0.2860) / 0.3530);
  EXPECT_TRUE(all_close(head.data.select(0, 1).flatten(), expected, 1e-6, 1e-6));
  // Fashion-MNIST is balanced: 6000 (train) and 1000 (test) images per class.
  for (const FashionMNIST* split : {&train, &test}) {
    std::vector<int64_t> counts(10, 0);
    for (int64_t label : split->labels().to_vector<int64_t>()) {
      ASSERT_GE(label, 0);
      ASSERT_LT(label, 10);
      counts[static_cast<size_t>(label)]++;
    }
    EXPECT_EQ(counts, std::vector<int64_t>(10, split->size() / 10));
  }
}

}  // namespace
}  // namespace tessera::testing
