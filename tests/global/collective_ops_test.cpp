// The collective ops in one process (a group of one rank): what they give,
// their shapes on meta tensors, and their errors. Their values and
// gradients across 2-4 processes are checked by global_worker's
// collective_grads mode (global_test.cpp).

#include "tessera/global/collective_ops.h"
#include "tessera/ops/dispatch.h"
#include "testing.h"

namespace tessera::testing {
namespace {

using distributed::ReduceOp;

TEST(CollectiveOps, OneRankGivesItsOwnValuesAndGradients) {
  Tensor x = uniform({3, 4}, -1, 1, 1).set_requires_grad();
  const Tensor w = uniform({3, 4}, -1, 1, 2);
  const std::vector<Tensor> outputs = {global::all_reduce(x), global::all_gather(x, 1),
                                       global::reduce_scatter(x, 0), global::all_to_all(x, 1, 0),
                                       global::broadcast(x, 0)};
  Tensor loss = zeros({});
  for (const Tensor& y : outputs) {
    EXPECT_TRUE(all_close(y, x.detach()));
    loss = add(loss, sum(mul(y, w)));
  }
  loss.backward();
  EXPECT_TRUE(all_close(x.grad(), mul(w, 5.0)));
}

TEST(CollectiveOps, ShapesFollowFromTheSizesOnMetaTensors) {
  Tensor x = Tensor::empty({2, 5}, DType::f32, Device::meta());
  EXPECT_EQ(global::all_gather(x, 1).shape(), (Shape{2, 5}));
  EXPECT_EQ(global::reduce_scatter(x, -1).shape(), (Shape{2, 5}));
  EXPECT_TRUE(global::all_reduce(x).is_meta());
  EXPECT_EQ(find_op("all_reduce").kind, OpKind::collective);
}

TEST(CollectiveOps, MisuseGivesClearErrors) {
  Tensor x = uniform({4, 2});
  EXPECT_HAS(error_of([&] { global::all_reduce(x, ReduceOp::sum, {1}); }),
             "[all_reduce] rank 0 is not among the ranks [1] of this collective");
  EXPECT_HAS(error_of([&] { global::all_to_all(x, 0, 0); }),
             "[all_to_all] split_dim and concat_dim must differ");
  EXPECT_HAS(
      error_of([&] { global::all_gather(x, 0, {}, {3}); }),
      "[all_gather] sizes [3] gives this rank 3 elements along the dim, but its tensor has 4");
  EXPECT_HAS(error_of([&] {
               global::reduce_scatter(x, 0, ReduceOp::sum, {}, {1, 3});
             }),
             "[reduce_scatter] sizes has 2 entries for 1 ranks");
  EXPECT_HAS(error_of([&] { global::all_gather(Tensor::scalar(1.0), 0); }),
             "[all_gather] needs a tensor with at least one dim");
  EXPECT_HAS(error_of([&] { global::broadcast(x, 2); }), "[broadcast] root 2 is not an index");
  EXPECT_HAS(error_of([&] { global::all_to_all_single(x, {4}, {3}); }),
             "[all_to_all_single] input_split_sizes [3] add up to 3, not the dim's 4");
  EXPECT_HAS(error_of([&] {
               global::all_to_all_single(x, {4, 0}, {4});
             }),
             "[all_to_all_single] output_split_sizes has 2 entries for 1 ranks");
  Tensor g = x.to_global(Placement::cpu(1), Sbp::split(0));
  EXPECT_HAS(error_of([&] { global::all_reduce(g); }),
             "[all_reduce] is a collective on local tensors");
  Tensor y = global::all_reduce(uniform({2}).set_requires_grad(), ReduceOp::max);
  EXPECT_HAS(error_of([&] { sum(y).backward(); }), "[all_reduce] with reduce=max has no gradient");
}

// all_reduce_ writes its input, as torch.distributed.all_reduce does, and is
// not recorded by autograd.
TEST(CollectiveOps, InPlaceAllReduceWritesItsInput) {
  Tensor x = uniform({3, 2});
  const Tensor before = x.clone();
  const uint64_t version = x.version();
  global::all_reduce_(x);
  EXPECT_TRUE(all_close(x, before));  // one rank: the sum is x itself
  EXPECT_GT(x.version(), version);
  Tensor w = uniform({2}).set_requires_grad();
  EXPECT_HAS(error_of([&] { global::all_reduce_(w); }),
             "[all_reduce_] writes input 0 ([2]) in place, and it is a leaf that requires grad");
  EXPECT_HAS(error_of([&] { global::all_reduce_(x.t()); }),
             "[all_reduce_] writes input 0 in place and needs it contiguous");
}

using V = std::vector<Tensor>;
TESSERA_SBP_CASE(
    "all_to_all_single",
    [] {
      return V{uniform({3, 4}, -1, 1, 7)};
    },
    Attrs{{"ranks", std::vector<int64_t>{0}},
          {"input_split_sizes", std::vector<int64_t>{3}},
          {"output_split_sizes", std::vector<int64_t>{3}}});
TESSERA_SBP_CASE(
    "all_reduce_",
    [] {
      return V{uniform({3, 4}, -1, 1, 6)};
    },
    Attrs{{"ranks", std::vector<int64_t>{0}}, {"reduce", std::string("sum")}});
TESSERA_SBP_CASE(
    "all_reduce",
    [] {
      return V{uniform({3, 4}, -1, 1, 1)};
    },
    Attrs{{"ranks", std::vector<int64_t>{0}}, {"reduce", std::string("sum")}});
TESSERA_SBP_CASE(
    "all_gather",
    [] {
      return V{uniform({3, 4}, -1, 1, 2)};
    },
    Attrs{{"ranks", std::vector<int64_t>{0}}, {"dim", int64_t{1}}});
TESSERA_SBP_CASE(
    "reduce_scatter",
    [] {
      return V{uniform({3, 4}, -1, 1, 3)};
    },
    Attrs{{"ranks", std::vector<int64_t>{0}}, {"dim", int64_t{0}}, {"reduce", std::string("sum")}});
TESSERA_SBP_CASE(
    "all_to_all",
    [] {
      return V{uniform({3, 4}, -1, 1, 4)};
    },
    Attrs{
        {"ranks", std::vector<int64_t>{0}}, {"split_dim", int64_t{1}}, {"concat_dim", int64_t{0}}});
TESSERA_SBP_CASE(
    "broadcast",
    [] {
      return V{uniform({3, 4}, -1, 1, 5)};
    },
    Attrs{{"ranks", std::vector<int64_t>{0}}, {"root", int64_t{0}}});

}  // namespace
}  // namespace tessera::testing
