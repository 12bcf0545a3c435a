#include "testing.h"

namespace tessera::testing {
namespace {

using data::Example;
using data::TensorDataset;

// rows x cols tensor with value 10 * row + col, so every row is recognisable.
Tensor numbered(int64_t rows, int64_t cols, DType dtype = DType::f32) {
  std::vector<double> values;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) values.push_back(10.0 * r + c);
  }
  return make(values, {rows, cols}, dtype);
}

TEST(TensorDataset, GetReturnsRows) {
  TensorDataset dataset(numbered(5, 3), make({0, 1, 2, 3, 4}, {5}, DType::i64));
  EXPECT_EQ(dataset.size(), 5);
  Example example = dataset.get(3);
  EXPECT_EQ(example.data.shape(), (Shape{3}));
  EXPECT_TRUE(all_close(example.data, {30, 31, 32}));
  EXPECT_EQ(example.target.dim(), 0);
  EXPECT_EQ(example.target.item<int64_t>(), 3);
}

TEST(TensorDataset, GetBatchGathersRowsInOrder) {
  TensorDataset dataset(numbered(6, 2, DType::f64), numbered(6, 1, DType::i64));
  Example batch = dataset.get_batch({4, 0, 4, 2});
  EXPECT_EQ(batch.data.shape(), (Shape{4, 2}));
  EXPECT_EQ(batch.data.dtype(), DType::f64);
  EXPECT_TRUE(all_close(batch.data, {40, 41, 0, 1, 40, 41, 20, 21}));
  EXPECT_EQ(batch.target.shape(), (Shape{4, 1}));
  EXPECT_EQ(batch.target.to_vector<int64_t>(), (std::vector<int64_t>{40, 0, 40, 20}));
}

TEST(TensorDataset, NonContiguousInputsAreGatheredByLogicalRow) {
  // transpose of [[0, 1, 2], [10, 11, 12]]: rows are (0, 10), (1, 11), (2, 12).
  TensorDataset dataset(numbered(2, 3).t(), make({7, 8, 9}, {3}, DType::i64));
  EXPECT_EQ(dataset.size(), 3);
  EXPECT_TRUE(all_close(dataset.get_batch({2, 1}).data, {2, 12, 1, 11}));
  EXPECT_TRUE(all_close(dataset.get(0).data, {0, 10}));
}

TEST(TensorDataset, DefaultGetBatchStacksExamples) {
  // A dataset that only implements get(): the base class stacks.
  struct Squares : data::Dataset {
    int64_t size() const override { return 4; }
    Example get(int64_t index) const override {
      check_index(index, "Squares");
      return {make({double(index), double(index * index)}, {2}), make({double(index)})};
    }
  };
  Squares squares;
  Example batch = squares.get_batch({3, 1});
  EXPECT_EQ(batch.data.shape(), (Shape{2, 2}));
  EXPECT_TRUE(all_close(batch.data, {3, 9, 1, 1}));
  EXPECT_TRUE(all_close(batch.target, {3, 1}));
  EXPECT_HAS(error_of([&] { squares.get_batch({1, 4}); }), "[Squares] index 4 is out of range");
  EXPECT_HAS(error_of([&] { squares.get_batch({}); }), "at least one index");
}

TEST(TensorDataset, RejectsMismatchedOrScalarInputs) {
  std::string message = error_of([] { TensorDataset(numbered(5, 2), numbered(4, 1)); });
  EXPECT_HAS(message, "[TensorDataset]");
  EXPECT_HAS(message, "[5, 2]");
  EXPECT_HAS(message, "[4, 1]");
  EXPECT_HAS(error_of([] { TensorDataset(make({1.0}), make({1.0})); }), "leading example dim");
  EXPECT_HAS(error_of([] { TensorDataset(Tensor(), numbered(1, 1)); }), "defined");
}

TEST(TensorDataset, OutOfRangeIndexNamesIndexAndSize) {
  TensorDataset dataset(numbered(3, 1), numbered(3, 1));
  std::string message = error_of([&] { dataset.get(3); });
  EXPECT_HAS(message, "[TensorDataset] index 3");
  EXPECT_HAS(message, "size 3");
  EXPECT_HAS(message, "[0, 3)");
  EXPECT_HAS(error_of([&] { dataset.get(-1); }), "index -1");
  EXPECT_HAS(error_of([&] { dataset.get_batch({0, 7}); }), "index 7");
}

}  // namespace
}  // namespace tessera::testing
