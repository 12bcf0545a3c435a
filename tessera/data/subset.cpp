#include "tessera/data/subset.h"

#include "tessera/core/error.h"
#include "tessera/data/dataloader.h"

namespace tessera::data {

Subset::Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices)
    : dataset_(std::move(dataset)), indices_(std::move(indices)) {
  TESSERA_CHECK(dataset_ != nullptr, "[Subset] needs a dataset, got a null pointer");
  const int64_t size = dataset_->size();
  for (size_t i = 0; i < indices_.size(); ++i) {
    TESSERA_CHECK(indices_[i] >= 0 && indices_[i] < size, "[Subset] index ", indices_[i],
                  " (position ", i, ") is out of range for a dataset of size ", size);
  }
}

Example Subset::get(int64_t index) const {
  check_index(index, "Subset");
  return dataset_->get(indices_[static_cast<size_t>(index)]);
}

Example Subset::get_batch(const std::vector<int64_t>& indices) const {
  check_indices(indices, "Subset");
  std::vector<int64_t> mapped;
  mapped.reserve(indices.size());
  for (int64_t index : indices) mapped.push_back(indices_[static_cast<size_t>(index)]);
  return dataset_->get_batch(mapped);
}

std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<int64_t>& lengths,
                                                  uint64_t seed) {
  TESSERA_CHECK(dataset != nullptr, "[random_split] needs a dataset, got a null pointer");
  int64_t total = 0;
  for (int64_t length : lengths) {
    TESSERA_CHECK(length >= 0, "[random_split] lengths must be non-negative, got ", length);
    total += length;
  }
  TESSERA_CHECK(total == dataset->size(), "[random_split] the lengths add up to ", total,
                " but the dataset has ", dataset->size(), " examples");
  const std::vector<int64_t> order = DataLoader::permutation(total, seed, 0);
  std::vector<std::shared_ptr<Subset>> out;
  auto begin = order.begin();
  for (int64_t length : lengths) {
    out.push_back(std::make_shared<Subset>(dataset, std::vector<int64_t>(begin, begin + length)));
    begin += length;
  }
  return out;
}

}  // namespace tessera::data
