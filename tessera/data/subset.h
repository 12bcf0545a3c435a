#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/data/dataset.h"

namespace tessera::data {

// The examples of `dataset` at `indices`, in that order, as
// torch.utils.data.Subset: example i is dataset->get(indices[i]).
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Example get(int64_t index) const override;
  Example get_batch(const std::vector<int64_t>& indices) const override;
  const std::vector<int64_t>& indices() const { return indices_; }
  const std::shared_ptr<const Dataset>& dataset() const { return dataset_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::vector<int64_t> indices_;
};

// Splits `dataset` into non-overlapping subsets of the given lengths, which
// must add up to its size, over a random permutation fixed by `seed`
// (torch.utils.data.random_split with a seeded generator).
std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<int64_t>& lengths,
                                                  uint64_t seed = 0);

}  // namespace tessera::data
