#include "testing.h"

#include "tessera/global/choose_layout.h"

#include <cmath>
#include <random>
#include <sstream>

namespace tessera::testing {

Tensor make(const std::vector<double>& values, Shape shape, DType dtype) {
  if (shape.empty() && values.size() != 1) shape = {static_cast<int64_t>(values.size())};
  return Tensor::from_vector(values, shape).to(dtype);
}

Tensor uniform(const Shape& shape, double low, double high, uint64_t seed, DType dtype) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<double> distribution(low, high);
  std::vector<double> values(static_cast<size_t>(numel(shape)));
  for (double& value : values) value = distribution(engine);
  return Tensor::from_vector(values, shape).to(dtype);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

namespace {

bool close(double actual, double expected, double rtol, double atol) {
  if (std::isnan(expected)) return std::isnan(actual);
  if (std::isinf(expected)) return actual == expected;
  return std::abs(actual - expected) <= atol + rtol * std::abs(expected);
}

}  // namespace

::testing::AssertionResult all_close(const Tensor& actual, const std::vector<double>& expected,
                                     double rtol, double atol) {
  if (!actual.defined()) return ::testing::AssertionFailure() << "tensor is undefined";
  std::vector<double> values = actual.to_vector<double>();
  if (values.size() != expected.size()) {
    return ::testing::AssertionFailure() << "size " << values.size() << " vs expected "
                                         << expected.size() << " (shape "
                                         << shape_str(actual.shape()) << ")";
  }
  int shown = 0;
  std::ostringstream failures;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!close(values[i], expected[i], rtol, atol)) {
      if (shown++ < 8) failures << "\n  [" << i << "] got " << values[i] << ", want " << expected[i];
    }
  }
  if (shown == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << shown << " of " << values.size()
                                       << " elements differ:" << failures.str();
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double rtol,
                                     double atol) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.shape())
                                         << " vs expected " << shape_str(expected.shape());
  }
  return all_close(actual, expected.to_vector<double>(), rtol, atol);
}

namespace {

// Evaluates fn with input `index`'s element `element` replaced by `value`.
double perturbed_objective(const TensorFn& fn, const std::vector<Tensor>& inputs, size_t index,
                           size_t element, double value, const Tensor& weights) {
  std::vector<Tensor> shifted = inputs;
  std::vector<double> data = inputs[index].to_vector<double>();
  data[element] = value;
  shifted[index] = Tensor::from_vector(data, inputs[index].shape()).to(inputs[index].dtype());
  NoGradGuard no_grad;
  Tensor out = fn(shifted);
  return sum(mul(out.to(DType::f64), weights)).item<double>();
}

::testing::AssertionResult compare_gradients(const TensorFn& objective_fn,
                                             const std::vector<Tensor>& inputs, double eps,
                                             double rtol, double atol, const char* what) {
  std::vector<Tensor> leaves;
  std::vector<size_t> leaf_index;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor leaf = inputs[i].detach();
    if (inputs[i].requires_grad()) {
      leaf.set_requires_grad();
      leaf_index.push_back(i);
    }
    leaves.push_back(leaf);
  }
  if (leaf_index.empty()) return ::testing::AssertionFailure() << "no input requires grad";
  Tensor out = objective_fn(leaves);
  Tensor weights = uniform(out.shape(), 0.5, 1.5, 7);
  Tensor objective = sum(mul(out.to(DType::f64), weights));
  std::vector<Tensor> wrt;
  for (size_t i : leaf_index) wrt.push_back(leaves[i]);
  // An objective that does not depend on the inputs (e.g. the derivative of
  // a linear function) has zero gradient.
  std::vector<Tensor> analytic(wrt.size());
  if (objective.requires_grad()) analytic = grad({objective}, wrt, {}, false, false, true);

  std::ostringstream failures;
  int bad = 0;
  for (size_t n = 0; n < leaf_index.size(); ++n) {
    size_t i = leaf_index[n];
    std::vector<double> base = inputs[i].to_vector<double>();
    std::vector<double> got = analytic[n].defined() ? analytic[n].to_vector<double>()
                                                    : std::vector<double>(base.size(), 0.0);
    for (size_t e = 0; e < base.size(); ++e) {
      double plus = perturbed_objective(objective_fn, inputs, i, e, base[e] + eps, weights);
      double minus = perturbed_objective(objective_fn, inputs, i, e, base[e] - eps, weights);
      double numeric = (plus - minus) / (2 * eps);
      if (!close(got[e], numeric, rtol, atol)) {
        if (bad++ < 8) {
          failures << "\n  input " << i << " element " << e << ": autograd " << got[e]
                   << ", finite difference " << numeric;
        }
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " gradient elements differ"
                                       << failures.str();
}

}  // namespace

::testing::AssertionResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                                     double eps, double rtol, double atol) {
  return compare_gradients(fn, inputs, eps, rtol, atol, "gradcheck");
}

::testing::AssertionResult gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                                         double eps, double rtol, double atol) {
  // The function under test becomes x -> d(sum(fn(x) * v))/dx, built with
  // create_graph so its own gradient comes from autograd.
  std::vector<Tensor> probe;
  for (const Tensor& input : inputs) probe.push_back(input.detach());
  Tensor probe_out;
  {
    NoGradGuard no_grad;
    probe_out = fn(probe);
  }
  Tensor v = uniform(probe_out.shape(), 0.5, 1.5, 11);
  TensorFn first_derivative = [&](const std::vector<Tensor>& xs) {
    std::vector<Tensor> leaves;
    std::vector<Tensor> wrt;
    for (size_t i = 0; i < xs.size(); ++i) {
      Tensor leaf = xs[i];
      if (!leaf.requires_grad() && inputs[i].requires_grad()) {
        leaf = xs[i].detach().set_requires_grad();
      }
      leaves.push_back(leaf);
      if (inputs[i].requires_grad()) wrt.push_back(leaf);
    }
    GradModeGuard enable(true);
    Tensor out = sum(mul(fn(leaves).to(DType::f64), v));
    std::vector<Tensor> grads = grad({out}, wrt, {}, true, true, true);
    // A fixed random projection of all first derivatives: its gradient is
    // a Hessian-vector product, checked against finite differences.
    Tensor projection = zeros({}, DType::f64);
    for (size_t n = 0; n < grads.size(); ++n) {
      if (!grads[n].defined()) continue;
      Tensor u = uniform(grads[n].shape(), 0.5, 1.5, 20 + n);
      projection = add(projection, sum(mul(grads[n].to(DType::f64), u)));
    }
    return projection;
  };
  return compare_gradients(first_derivative, inputs, eps, rtol, atol, "gradgradcheck");
}

// ---------------------------------------------------------------------------
// SBP checker.

namespace {

int64_t shard_start(int64_t size, int64_t parts, int64_t rank) {
  int64_t base = size / parts, extra = size % parts;
  return rank * base + std::min(rank, extra);
}

int64_t shard_size(int64_t size, int64_t parts, int64_t rank) {
  return size / parts + (rank < size % parts ? 1 : 0);
}

::testing::AssertionResult combine_and_compare(const std::vector<Tensor>& shards, const Sbp& sbp,
                                               const Tensor& expected, double rtol, double atol,
                                               const std::string& where) {
  const Shape& shape = expected.shape();
  std::vector<double> combined(static_cast<size_t>(expected.numel()), 0.0);
  if (sbp.is_broadcast()) {
    for (size_t r = 0; r < shards.size(); ++r) {
      auto result = all_close(shards[r], expected, rtol, atol);
      if (!result) return ::testing::AssertionFailure() << where << ", rank " << r << ": " << result.message();
    }
    return ::testing::AssertionSuccess();
  }
  if (sbp.is_split()) {
    int64_t axis = sbp.axis;
    if (axis >= static_cast<int64_t>(shape.size())) {
      return ::testing::AssertionFailure() << where << ": output split axis " << axis
                                           << " is out of range for shape " << shape_str(shape);
    }
    int64_t inner = 1;
    for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
    int64_t start = 0;
    for (size_t r = 0; r < shards.size(); ++r) {
      Shape want = shape;
      want[axis] = shards[r].shape().size() > static_cast<size_t>(axis) ? shards[r].shape()[axis] : -1;
      if (shards[r].shape() != want) {
        return ::testing::AssertionFailure() << where << ": shard " << r << " has shape "
                                             << shape_str(shards[r].shape()) << ", which does not "
                                             << "fit a split of " << shape_str(shape) << " on axis " << axis;
      }
      int64_t length = shards[r].shape()[axis];
      std::vector<double> values = shards[r].to_vector<double>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t a = 0; a < length; ++a) {
          for (int64_t i = 0; i < inner; ++i) {
            combined[(o * shape[axis] + start + a) * inner + i] = values[(o * length + a) * inner + i];
          }
        }
      }
      start += length;
    }
    if (start != shape[axis]) {
      return ::testing::AssertionFailure() << where << ": shards cover " << start << " of "
                                           << shape[axis] << " along axis " << axis;
    }
  } else {
    for (size_t r = 0; r < shards.size(); ++r) {
      if (shards[r].shape() != shape) {
        return ::testing::AssertionFailure() << where << ": partial shard " << r << " has shape "
                                             << shape_str(shards[r].shape()) << ", want " << shape_str(shape);
      }
      std::vector<double> values = shards[r].to_vector<double>();
      for (size_t e = 0; e < values.size(); ++e) {
        if (r == 0) {
          combined[e] = values[e];
        } else if (sbp.kind == SbpKind::partial_sum) {
          combined[e] += values[e];
        } else if (sbp.kind == SbpKind::partial_max) {
          combined[e] = std::max(combined[e], values[e]);
        } else {
          combined[e] = std::min(combined[e], values[e]);
        }
      }
    }
  }
  Tensor combined_tensor = Tensor::from_vector(combined, shape);
  auto result = all_close(combined_tensor, expected.to_vector<double>(), rtol, atol);
  if (!result) {
    return ::testing::AssertionFailure() << where << ": combined shards differ from the "
                                         << "unsharded result: " << result.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

// Shards of `x` under `sbp` on `parts` ranks, plus each shard's start index.
std::vector<Tensor> make_shards(const Tensor& x, const Sbp& sbp, int64_t parts, uint64_t seed,
                                std::vector<std::vector<int64_t>>& starts) {
  std::vector<Tensor> shards;
  starts.assign(parts, std::vector<int64_t>(x.dim(), 0));
  if (sbp.is_split()) {
    for (int64_t r = 0; r < parts; ++r) {
      int64_t start = shard_start(x.shape()[sbp.axis], parts, r);
      starts[r][sbp.axis] = start;
      shards.push_back(x.narrow(sbp.axis, start, shard_size(x.shape()[sbp.axis], parts, r)).contiguous());
    }
    return shards;
  }
  if (sbp.is_broadcast()) {
    for (int64_t r = 0; r < parts; ++r) shards.push_back(x.clone());
    return shards;
  }
  std::vector<double> values = x.to_vector<double>();
  std::mt19937_64 engine(seed);
  std::vector<std::vector<double>> pieces(parts, values);
  if (sbp.kind == SbpKind::partial_sum) {
    bool integral = !is_floating(x.dtype());
    std::uniform_real_distribution<double> noise(-2.0, 2.0);
    for (size_t e = 0; e < values.size(); ++e) {
      double rest = values[e];
      for (int64_t r = 0; r + 1 < parts; ++r) {
        double piece = integral ? std::round(noise(engine)) : noise(engine);
        pieces[r][e] = piece;
        rest -= piece;
      }
      pieces[parts - 1][e] = rest;
    }
  } else {
    // One random rank holds the true value; the others hold smaller (for
    // max) or larger (for min) values.
    bool is_max = sbp.kind == SbpKind::partial_max;
    std::uniform_real_distribution<double> gap(0.25, 2.0);
    std::uniform_int_distribution<int64_t> owner_of(0, parts - 1);
    for (size_t e = 0; e < values.size(); ++e) {
      int64_t owner = owner_of(engine);
      for (int64_t r = 0; r < parts; ++r) {
        if (r == owner) continue;
        double delta = is_floating(x.dtype()) ? gap(engine) : 1.0;
        pieces[r][e] = is_max ? values[e] - delta : values[e] + delta;
      }
    }
  }
  for (int64_t r = 0; r < parts; ++r) {
    shards.push_back(Tensor::from_vector(pieces[r], x.shape()).to(x.dtype()));
  }
  return shards;
}

namespace {

// Whether layout choice offers `signature` for these inputs split over
// `parts` ranks of one mesh axis.
bool takes_signature(const OpDef& op, const MetaVector& metas, const Attrs& attrs,
                     const SbpSignature& signature, int64_t parts) {
  const Placement line = Placement::cpu(static_cast<int>(parts));
  for (const global::LayoutOption& option : global::layout_options(op, metas, attrs, line)) {
    bool same = true;
    for (size_t i = 0; i < signature.inputs.size(); ++i) {
      same = same && option.input_sbps[i] == NdSbp({signature.inputs[i]});
    }
    for (size_t o = 0; o < signature.outputs.size(); ++o) {
      same = same && option.output_sbps[o] == NdSbp({signature.outputs[o]});
    }
    if (same) return true;
  }
  return false;
}

}  // namespace

::testing::AssertionResult check_sbp(const std::string& op_name, const std::vector<Tensor>& inputs,
                                     const Attrs& attrs, double rtol, double atol) {
  const OpDef& op = find_op(op_name);
  NoGradGuard no_grad;
  MetaVector metas;
  for (const Tensor& input : inputs) metas.push_back(input.meta());
  // An in-place op writes its inputs: each call gets its own copies.
  auto fresh = [&](const std::vector<Tensor>& tensors) {
    if (op.writes.empty()) return tensors;
    std::vector<Tensor> copies;
    for (const Tensor& t : tensors) copies.push_back(t.clone());
    return copies;
  };
  std::vector<Tensor> expected = call(op, fresh(inputs), attrs);
  std::vector<SbpSignature> signatures = sbp_signatures(op, metas, attrs);
  for (const SbpSignature& signature : signatures) {
    int checked = 0;
    for (int64_t parts : {2, 3, 4}) {
      std::string where = "[" + op_name + "] signature " + signature_str(signature) + " on " +
                          std::to_string(parts) + " shards";
      if (signature.inputs.size() != inputs.size() || signature.outputs.size() != expected.size()) {
        return ::testing::AssertionFailure() << where << ": signature arity does not match the op";
      }
      // Where layout choice would not take the signature for these shards
      // (a reshape dividing a dim into groups the split cuts), nothing
      // runs it.
      if (!takes_signature(op, metas, attrs, signature, parts)) continue;
      ++checked;
      std::vector<std::vector<Tensor>> shards_per_input;
      std::vector<std::vector<std::vector<int64_t>>> starts_per_input;
      for (size_t i = 0; i < inputs.size(); ++i) {
        std::vector<std::vector<int64_t>> starts;
        shards_per_input.push_back(make_shards(inputs[i], signature.inputs[i], parts, 100 + i, starts));
        starts_per_input.push_back(starts);
      }
      std::vector<std::vector<Tensor>> outputs_per_rank;
      for (int64_t r = 0; r < parts; ++r) {
        std::vector<Tensor> local;
        MetaVector local_metas;
        ShardOffsets offsets;
        for (size_t i = 0; i < inputs.size(); ++i) {
          local.push_back(shards_per_input[i][r]);
          local_metas.push_back(local.back().meta());
          offsets.push_back(starts_per_input[i][r]);
        }
        Attrs local_attrs = op.localize ? op.localize(attrs, local_metas, metas, offsets) : attrs;
        try {
          outputs_per_rank.push_back(call(op, fresh(local), local_attrs));
        } catch (const std::exception& error) {
          return ::testing::AssertionFailure() << where << ": rank " << r << " threw: " << error.what();
        }
      }
      for (size_t o = 0; o < expected.size(); ++o) {
        std::vector<Tensor> shards;
        for (int64_t r = 0; r < parts; ++r) shards.push_back(outputs_per_rank[r][o]);
        auto result = combine_and_compare(shards, signature.outputs[o], expected[o], rtol, atol,
                                          where + ", output " + std::to_string(o));
        if (!result) return result;
      }
    }
    if (checked == 0) {
      return ::testing::AssertionFailure()
             << "[" << op_name << "] signature " << signature_str(signature)
             << " holds on none of 2, 3 and 4 shards of these inputs: give the case shapes it "
                "holds for";
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<SbpCase>& sbp_cases() {
  static std::vector<SbpCase> cases;
  return cases;
}

bool add_sbp_case(std::string op, std::function<std::vector<Tensor>()> inputs, Attrs attrs,
                  double rtol, double atol) {
  sbp_cases().push_back(SbpCase{std::move(op), std::move(inputs), std::move(attrs), rtol, atol});
  return true;
}

}  // namespace tessera::testing
