#include "tessera/data/dataset.h"

#include "tessera/ops/concat.h"

namespace tessera::data {

Example Dataset::get_batch(const std::vector<int64_t>& indices) const {
  // get() checks each index and names the concrete dataset.
  TESSERA_CHECK(!indices.empty(),
                "[Dataset::get_batch] needs at least one index to make a batch, "
                "got none");
  std::vector<Tensor> data, targets;
  data.reserve(indices.size());
  targets.reserve(indices.size());
  for (int64_t index : indices) {
    Example example = get(index);
    data.push_back(example.data);
    targets.push_back(example.target);
  }
  return {stack(data), stack(targets)};
}

void Dataset::check_index(int64_t index, const char* dataset_name) const {
  check_indices({index}, dataset_name);
}

void Dataset::check_indices(const std::vector<int64_t>& indices, const char* dataset_name) const {
  TESSERA_CHECK(!indices.empty(), "[", dataset_name,
                "] needs at least one index to make a batch, got none");
  const int64_t count = size();
  for (int64_t index : indices) {
    TESSERA_CHECK(index >= 0 && index < count, "[", dataset_name, "] index ", index,
                  " is out of range for a dataset of size ", count, "; valid indices are [0, ",
                  count, ")");
  }
}

}  // namespace tessera::data
