// Tensor::to_global and Tensor::to_local. Their ops (to_global,
// local_to_global, to_local: OpDef::global_only) belong to the global layer
// (global/global_tensor.cpp), which registers them with the eager-global
// handler that runs them; this layer finds them by name and never names the
// global layer.

#include "tessera/ops/layout_attrs.h"
#include "tessera/ops/op.h"

namespace tessera {

namespace {

const OpDef& conversion_op(const char* name) {
  const OpDef* op = lookup_op(name);
  TESSERA_CHECK(op != nullptr, "[", name, "] global tensors need Tessera's global layer ",
                "(libtessera_global), which this program does not load; link Tessera::tessera");
  return *op;
}

}  // namespace

Tensor Tensor::to_global(const Placement& placement, const NdSbp& sbp) const {
  if (is_global() && this->placement() == placement && nd_sbp() == sbp) return *this;
  Attrs attrs;
  set_layout_attrs(attrs, placement, sbp);
  if (is_global()) {
    static const OpDef& redistribute = conversion_op("to_global");
    return call1(redistribute, {*this}, attrs);
  }
  // Broadcast copies come from the first rank (every rank passes its piece).
  attrs.set("broadcast_first", true);
  static const OpDef& from_local = conversion_op("local_to_global");
  return call1(from_local, {*this}, attrs);
}

Tensor Tensor::to_local() const {
  if (!is_global()) return *this;
  static const OpDef& to_local_op = conversion_op("to_local");
  return call1(to_local_op, {*this});
}

}  // namespace tessera
