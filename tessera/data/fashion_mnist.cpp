#include "tessera/data/fashion_mnist.h"

#include <cstdlib>
#include <filesystem>

#include "tessera/data/idx.h"

namespace tessera::data {

namespace {

constexpr int64_t kSide = 28;

// The file `base` (.gz preferred) inside root; throws naming the file and
// the package that provides it when neither form exists.
std::string find_file(const std::string& root, const std::string& base) {
  namespace fs = std::filesystem;
  std::error_code error;
  for (const std::string& name : {base + ".gz", base}) {
    const fs::path path = fs::path(root) / name;
    if (fs::is_regular_file(path, error)) return path.string();
  }
  TESSERA_FAIL("[FashionMNIST] missing ", base, ".gz (or ", base, ") in ", root,
               "; install the Debian package dataset-fashion-mnist (apt-get install "
               "dataset-fashion-mnist), or point TESSERA_FASHION_MNIST or the root argument "
               "at a directory holding the four Fashion-MNIST IDX files");
}

}  // namespace

FashionMNIST::FashionMNIST(const std::string& root, bool train, bool normalize) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string image_path = find_file(root, prefix + "-images-idx3-ubyte");
  const std::string label_path = find_file(root, prefix + "-labels-idx1-ubyte");
  images_ = read_idx(image_path);
  labels_ = read_idx(label_path);
  TESSERA_CHECK(images_.dtype() == DType::u8 && images_.dim() == 3 && images_.size(1) == kSide &&
                    images_.size(2) == kSide,
                "[FashionMNIST] ", image_path, " holds ", dtype_name(images_.dtype()), " ",
                shape_str(images_.shape()), "; expected u8 [N, 28, 28]");
  TESSERA_CHECK(labels_.dtype() == DType::u8 && labels_.dim() == 1, "[FashionMNIST] ", label_path,
                " holds ", dtype_name(labels_.dtype()), " ", shape_str(labels_.shape()),
                "; expected u8 [N]");
  TESSERA_CHECK(images_.size(0) == labels_.size(0), "[FashionMNIST] ", image_path, " has ",
                images_.size(0), " images but ", label_path, " has ", labels_.size(0),
                " labels; they must match");
  const uint8_t* labels = labels_.data<uint8_t>();
  for (int64_t i = 0; i < labels_.size(0); ++i) {
    TESSERA_CHECK(labels[i] < kNumClasses, "[FashionMNIST] ", label_path, ": label ",
                  static_cast<int>(labels[i]), " at index ", i, " is outside [0, ", kNumClasses,
                  ")");
  }
  for (int value = 0; value < 256; ++value) {
    const double scaled = value / 255.0;
    pixel_table_[value] = static_cast<float>(normalize ? (scaled - kMean) / kStd : scaled);
  }
}

std::string FashionMNIST::default_root() {
  const char* root = std::getenv("TESSERA_FASHION_MNIST");
  return root != nullptr && *root != '\0' ? root : "/usr/share/datasets/fashion-mnist";
}

const char* FashionMNIST::class_name(int64_t label) {
  static const char* const kNames[kNumClasses] = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                                  "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                                  "Bag",         "Ankle boot"};
  TESSERA_CHECK(label >= 0 && label < kNumClasses, "[FashionMNIST::class_name] label ", label,
                " is outside [0, ", kNumClasses, ")");
  return kNames[label];
}

int64_t FashionMNIST::size() const {
  return images_.size(0);
}

Example FashionMNIST::get(int64_t index) const {
  Example batch = get_batch({index});
  return {batch.data.select(0, 0), batch.target.select(0, 0)};
}

Example FashionMNIST::get_batch(const std::vector<int64_t>& indices) const {
  check_indices(indices, "FashionMNIST");
  const auto batch = static_cast<int64_t>(indices.size());
  constexpr int64_t kPixels = kSide * kSide;
  Tensor data = Tensor::empty({batch, 1, kSide, kSide}, DType::f32);
  Tensor target = Tensor::empty({batch}, DType::i64);
  const uint8_t* images = images_.data<uint8_t>();
  const uint8_t* labels = labels_.data<uint8_t>();
  float* out = data.data<float>();
  int64_t* out_target = target.data<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const uint8_t* image = images + indices[static_cast<size_t>(b)] * kPixels;
    float* row = out + b * kPixels;
    for (int64_t p = 0; p < kPixels; ++p) row[p] = pixel_table_[image[p]];
    out_target[b] = labels[indices[static_cast<size_t>(b)]];
  }
  return {data, target};
}

}  // namespace tessera::data
