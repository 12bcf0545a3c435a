#include "tessera/distributed/spmd_check.h"

#include <cstdlib>
#include <cstring>

#include "tessera/core/error.h"

namespace tessera::distributed {
namespace {

thread_local std::string current_scope;

// "f32 [*, 3]": the layout a rank describes, `*` where ranks may differ.
std::string layout_text(const Tensor& tensor, bool rows_may_differ) {
  std::string text = std::string(dtype_name(tensor.dtype())) + " [";
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    text += d ? ", " : "";
    text += d == 0 && rows_may_differ ? "*" : std::to_string(tensor.size(d));
  }
  return text + "]";
}

class SpmdCheckedGroup : public Group {
 public:
  explicit SpmdCheckedGroup(std::shared_ptr<Group> inner) : inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }

  void all_reduce(Tensor& tensor, ReduceOp op) override {
    check(str_cat("all_reduce(", layout_text(tensor, false), ", ", reduce_op_name(op), ")"));
    inner_->all_reduce(tensor, op);
  }
  std::vector<Tensor> all_gather(const Tensor& tensor) override {
    check(str_cat("all_gather(", layout_text(tensor, false), ")"));
    return inner_->all_gather(tensor);
  }
  std::vector<Tensor> all_gather_uneven(const Tensor& tensor) override {
    check(str_cat("all_gather_uneven(", layout_text(tensor, true), ")"));
    return inner_->all_gather_uneven(tensor);
  }
  void all_gather_into(const Tensor& piece, const Tensor& out, int64_t dim,
                       const std::vector<int64_t>& sizes) override {
    check(str_cat("all_gather_into(", layout_text(out, false), ", dim ", dim, ")"));
    inner_->all_gather_into(piece, out, dim, sizes);
  }
  Tensor reduce_scatter(const std::vector<Tensor>& inputs, ReduceOp op) override {
    check(str_cat("reduce_scatter(", inputs.empty() ? "" : layout_text(inputs[0], false), ", ",
                  reduce_op_name(op), ")"));
    return inner_->reduce_scatter(inputs, op);
  }
  std::vector<Tensor> all_to_all(const std::vector<Tensor>& inputs) override {
    check(str_cat("all_to_all(", inputs.empty() ? "" : layout_text(inputs[0], true), ")"));
    return inner_->all_to_all(inputs);
  }
  void broadcast(Tensor& tensor, int root) override {
    check(str_cat("broadcast(", layout_text(tensor, false), ", root ", root, ")"));
    inner_->broadcast(tensor, root);
  }
  void send(const Tensor& tensor, int peer, int tag) override { inner_->send(tensor, peer, tag); }
  void recv(Tensor& tensor, int peer, int tag) override { inner_->recv(tensor, peer, tag); }
  void barrier() override {
    check("barrier()");
    inner_->barrier();
  }
  std::shared_ptr<Group> split(const std::vector<int>& ranks) override {
    return std::make_shared<SpmdCheckedGroup>(inner_->split(ranks));
  }

 private:
  // Every rank reaches this exchange first, whatever collective it is
  // about to issue, so the exchange itself always matches.
  void check(const std::string& call) {
    const std::string text =
        str_cat("#", sequence_++, " ", call, current_scope.empty() ? "" : " in " + current_scope);
    std::vector<uint8_t> bytes(text.begin(), text.end());
    const std::vector<Tensor> all =
        inner_->all_gather_uneven(Tensor::from_vector(bytes, {static_cast<int64_t>(bytes.size())}));
    for (size_t peer = 0; peer < all.size(); ++peer) {
      const std::vector<uint8_t> theirs = all[peer].to_vector<uint8_t>();
      const std::string other(theirs.begin(), theirs.end());
      TESSERA_CHECK(other == text, "[spmd] ranks diverged: rank ", peer, " of ", size(), " issued ",
                    other, " while rank ", rank(), " issued ", text,
                    "; every rank must issue the same collectives in the same order (item(), "
                    "to_vector() and to_global() on global tensors are collectives too)");
    }
  }

  std::shared_ptr<Group> inner_;
  int64_t sequence_ = 0;
};

}  // namespace

bool spmd_check_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("TESSERA_DEBUG_SPMD");
    return value != nullptr && std::strcmp(value, "") != 0 && std::strcmp(value, "0") != 0;
  }();
  return enabled;
}

std::shared_ptr<Group> with_spmd_check(std::shared_ptr<Group> group) {
  if (!spmd_check_enabled() || group == nullptr) return group;
  return std::make_shared<SpmdCheckedGroup>(std::move(group));
}

SpmdScope::SpmdScope(std::string what) : previous_(std::move(current_scope)) {
  current_scope = std::move(what);
}

SpmdScope::~SpmdScope() {
  current_scope = std::move(previous_);
}

}  // namespace tessera::distributed
