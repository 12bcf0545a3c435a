#include "tessera/ops/sbp_rules.h"

namespace tessera {

std::vector<SbpSignature> broadcast_split_signatures(const MetaVector& inputs,
                                                     const Shape& out_shape, size_t num_outputs) {
  std::vector<SbpSignature> signatures;
  const int64_t out_ndim = static_cast<int64_t>(out_shape.size());
  for (int64_t axis = 0; axis < out_ndim; ++axis) {
    SbpSignature signature;
    for (const TensorMeta& input : inputs) {
      int64_t input_axis = axis - (out_ndim - static_cast<int64_t>(input.shape.size()));
      bool full = input_axis >= 0 && input.shape[input_axis] == out_shape[axis];
      signature.inputs.push_back(full ? Sbp::split(input_axis) : Sbp::broadcast());
    }
    signature.outputs.assign(num_outputs, Sbp::split(axis));
    signatures.push_back(std::move(signature));
  }
  return signatures;
}

std::vector<SbpSignature> same_split_signatures(size_t num_inputs, size_t num_outputs,
                                                const std::vector<int64_t>& axes) {
  std::vector<SbpSignature> signatures;
  for (int64_t axis : axes) {
    signatures.push_back(uniform_signature(num_inputs, num_outputs, Sbp::split(axis)));
  }
  return signatures;
}

SbpSignature uniform_signature(size_t num_inputs, size_t num_outputs, Sbp sbp) {
  return {std::vector<Sbp>(num_inputs, sbp), std::vector<Sbp>(num_outputs, sbp)};
}

}  // namespace tessera
