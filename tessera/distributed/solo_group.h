#pragma once

#include "tessera/distributed/group.h"

namespace tessera::distributed {

// The group of one process: every collective is a local copy. The default
// group of a program that never calls init_process_group, so global tensors
// work unchanged in a single process.
class SoloGroup : public Group {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::sum) override;
  std::vector<Tensor> all_gather(const Tensor& tensor) override;
  std::vector<Tensor> all_gather_uneven(const Tensor& tensor) override;
  Tensor reduce_scatter(const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::sum) override;
  std::vector<Tensor> all_to_all(const std::vector<Tensor>& inputs) override;
  void broadcast(Tensor& tensor, int root) override;
  void send(const Tensor& tensor, int peer, int tag = 0) override;
  void recv(Tensor& tensor, int peer, int tag = 0) override;
  void barrier() override {}
  std::shared_ptr<Group> split(const std::vector<int>& ranks) override;
};

}  // namespace tessera::distributed
