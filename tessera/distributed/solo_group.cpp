#include "tessera/distributed/solo_group.h"

#include "tessera/core/error.h"

namespace tessera::distributed {

namespace {

void check_single(const std::vector<Tensor>& inputs, const char* op) {
  TESSERA_CHECK(inputs.size() == 1, "[", op, "] a one-process group needs 1 input, got ",
                inputs.size());
}

void check_self(int peer, const char* op) {
  TESSERA_CHECK(peer == 0, "[", op, "] rank ", peer, " is outside the one-process group [0, 1)");
}

}  // namespace

void SoloGroup::all_reduce(Tensor&, ReduceOp) {}

std::vector<Tensor> SoloGroup::all_gather(const Tensor& tensor) { return {tensor.clone()}; }

std::vector<Tensor> SoloGroup::all_gather_uneven(const Tensor& tensor) {
  return {tensor.clone()};
}

Tensor SoloGroup::reduce_scatter(const std::vector<Tensor>& inputs, ReduceOp) {
  check_single(inputs, "reduce_scatter");
  return inputs[0].clone();
}

std::vector<Tensor> SoloGroup::all_to_all(const std::vector<Tensor>& inputs) {
  check_single(inputs, "all_to_all");
  return {inputs[0].clone()};
}

void SoloGroup::broadcast(Tensor&, int root) { check_self(root, "broadcast"); }

void SoloGroup::send(const Tensor&, int peer, int) {
  check_self(peer, "send");
  TESSERA_FAIL("[send] a one-process group cannot send to itself");
}

void SoloGroup::recv(Tensor&, int peer, int) {
  check_self(peer, "recv");
  TESSERA_FAIL("[recv] a one-process group cannot receive from itself");
}

std::shared_ptr<Group> SoloGroup::split(const std::vector<int>& ranks) {
  TESSERA_CHECK(ranks.size() == 1 && ranks[0] == 0, "[split] a one-process group splits only "
                "into [0]");
  return std::make_shared<SoloGroup>();
}

}  // namespace tessera::distributed
