#pragma once

// Fashion-MNIST (Xiao et al. 2017): 28x28 grey images of clothing in 10
// classes, 60000 for training and 10000 for testing, read from the IDX files
// of Debian's dataset-fashion-mnist package (gzip or plain).

#include <string>

#include "tessera/data/dataset.h"

namespace tessera::data {

class FashionMNIST : public Dataset {
 public:
  // Mean and standard deviation of the training pixels scaled to [0, 1].
  static constexpr double kMean = 0.2860;
  static constexpr double kStd = 0.3530;
  static constexpr int64_t kNumClasses = 10;

  // Loads the train (60000) or test (10000) split from `root`. With
  // `normalize`, pixels become (p / 255 - kMean) / kStd, else p / 255.
  FashionMNIST(const std::string& root, bool train, bool normalize = true);

  // $TESSERA_FASHION_MNIST if set, else /usr/share/datasets/fashion-mnist.
  static std::string default_root();
  // "T-shirt/top", "Trouser", ... for labels 0..9.
  static const char* class_name(int64_t label);

  // Number of images.
  int64_t size() const override;
  // data: f32 [1, 28, 28]; target: i64 scalar.
  Example get(int64_t index) const override;
  // data: f32 [B, 1, 28, 28]; target: i64 [B]; one pass over the pixels.
  Example get_batch(const std::vector<int64_t>& indices) const override;

  // The raw images, u8 [N, 28, 28].
  const Tensor& images() const { return images_; }
  // The raw labels, u8 [N].
  const Tensor& labels() const { return labels_; }

 private:
  Tensor images_;
  Tensor labels_;
  float pixel_table_[256];  // pixel byte -> scaled (and normalised) f32
};

}  // namespace tessera::data
