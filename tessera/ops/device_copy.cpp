// Tensor::to(Device): a copy to another device is the op "to_device", so
// the dispatcher (and a tracer) sees every transfer. Its kernel is chosen
// by the source's device (backend/cpu/copy.cpp, backend/cuda/copy.cpp) and
// writes an output the dispatcher allocated on the target device.

#include "tessera/ops/op.h"

namespace tessera {

namespace {

const OpDef& to_device_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "to_device";
    d.kind = OpKind::other;
    d.saves_inputs = false;
    d.infer = [](const MetaVector& in, const Attrs& attrs) {
      const TensorMeta& x = in.at(0);
      const Device device{static_cast<DeviceType>(attrs.i("device_type")),
                          static_cast<int>(attrs.i("device_index"))};
      return MetaVector{{x.shape, x.dtype, device}};
    };
    // The gradient goes back to the device the input came from.
    d.grad = [](const GradContext& ctx) -> std::vector<Tensor> {
      return {ctx.grad_output(0).to(ctx.input_meta(0).device)};
    };
    d.torch_name = "torch.Tensor.to";
    d.signature = "x.to(device), x.cuda(index), x.cpu()";
    return d;
  }());
  return def;
}

const bool registered = (to_device_op(), true);

}  // namespace

Tensor Tensor::to(Device target) const {
  const TensorImpl& t = impl();
  if (t.device == target) return *this;
  if (target.type == DeviceType::meta) return to_meta();
  if (t.device.type == DeviceType::meta) (void)raw_data();  // raises: nothing to copy
  TESSERA_CHECK(!t.global, "[to] a global tensor (", placement_str(placement()), ", ",
                nd_sbp_str(nd_sbp()), ") cannot change device; move its local_shard() instead");
  return call1(to_device_op(), {*this},
               {{"device_type", static_cast<int64_t>(target.type)},
                {"device_index", static_cast<int64_t>(target.index)}});
}

Tensor Tensor::cuda(int index) const {
  return to(Device{DeviceType::cuda, index});
}

Tensor Tensor::cpu() const {
  return to(Device{});
}

}  // namespace tessera
