#include "tessera/graph/dynamic.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "tessera/core/error.h"

namespace tessera::graph {

namespace {

// The marks graph::dynamic made, by tensor. A mark dies with its tensor: an
// entry whose tensor is gone (or whose address was reused) is ignored and
// pruned.
struct Mark {
  std::weak_ptr<TensorImpl> tensor;
  std::vector<int64_t> dims;
};
std::mutex marks_mutex;
std::unordered_map<const TensorImpl*, Mark>& marks() {
  static std::unordered_map<const TensorImpl*, Mark> table;
  return table;
}

// Where a number is, to name it in an error: a value's dim, a node's attr
// (item, element), a node's counter count, a constant.
struct NumberAt {
  enum Kind : uint8_t { dim, attr, count, constant } kind;
  int index = 0;  // value, node or constant
  int item = 0;   // dim, or attr item
  int element = 0;
  int step = -1;  // for an attr of a fused node's step: the step
};
// A graph's numbers, in one fixed order: every value's dims, every node's
// numeric attrs and random counter count, every constant. `whole` says
// which must be integers.
struct Numbers {
  std::vector<double> values;
  std::vector<bool> whole;
  std::vector<NumberAt> where;
  void add(double value, bool is_whole, NumberAt at) {
    values.push_back(value);
    whole.push_back(is_whole);
    where.push_back(at);
  }
};

Numbers numbers_of(const Graph& graph) {
  Numbers out;
  for (size_t v = 0; v < graph.values().size(); ++v) {
    const Shape& shape = graph.values()[v].meta.shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      out.add(static_cast<double>(shape[d]), true,
              {NumberAt::dim, static_cast<int>(v), static_cast<int>(d)});
    }
  }
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    auto add_attrs = [&](const Attrs& attrs, int step) {
      const auto& items = attrs.items();
      for (size_t i = 0; i < items.size(); ++i) {
        const AttrValue& value = items[i].second;
        NumberAt at{NumberAt::attr, static_cast<int>(n), static_cast<int>(i), 0, step};
        if (const auto* x = std::get_if<int64_t>(&value))
          out.add(static_cast<double>(*x), true, at);
        if (const auto* f = std::get_if<double>(&value)) out.add(*f, false, at);
        if (const auto* list = std::get_if<std::vector<int64_t>>(&value)) {
          for (size_t e = 0; e < list->size(); ++e) {
            at.element = static_cast<int>(e);
            out.add(static_cast<double>((*list)[e]), true, at);
          }
        }
      }
    };
    add_attrs(node.attrs, -1);
    if (node.fused) {
      for (size_t s = 0; s < node.fused->steps.size(); ++s) {
        add_attrs(node.fused->steps[s].attrs, static_cast<int>(s));
      }
    }
    out.add(static_cast<double>(node.random_count), true, {NumberAt::count, static_cast<int>(n)});
  }
  for (size_t c = 0; c < graph.constants().size(); ++c) {
    const Constant& constant = graph.constants()[c];
    const Tensor& tensor = constant.tensor;
    if (tensor.dim() != 0) continue;  // structure_difference: equal at every size
    out.add(constant.exact.value_or(tensor.item<double>()), !is_floating(tensor.dtype()),
            {NumberAt::constant, static_cast<int>(c)});
  }
  return out;
}

std::string number_name(const Graph& graph, const NumberAt& at) {
  auto op_of = [&](int n) { return graph.nodes()[static_cast<size_t>(n)].op->name; };
  switch (at.kind) {
    case NumberAt::dim: {
      const Value& value = graph.values()[static_cast<size_t>(at.index)];
      return str_cat("dim ", at.item, " of %", at.index,
                     value.kind == ValueKind::node ? " (" + op_of(value.node) + ")" : "");
    }
    case NumberAt::attr: {
      const Node& node = graph.nodes()[static_cast<size_t>(at.index)];
      const FusedStep* step =
          at.step >= 0 ? &node.fused->steps.at(static_cast<size_t>(at.step)) : nullptr;
      const auto& items = step != nullptr ? step->attrs.items() : node.attrs.items();
      const auto& [name, value] = items[static_cast<size_t>(at.item)];
      const bool list = std::holds_alternative<std::vector<int64_t>>(value);
      return str_cat(op_of(at.index),
                     step != nullptr ? str_cat(" step ", at.step, " (", step->op->name, ")") : "",
                     " attr ", name, list ? str_cat("[", at.element, "]") : std::string());
    }
    case NumberAt::count:
      return op_of(at.index) + "'s random counter count";
    case NumberAt::constant:
      return str_cat("the constant %", graph.constants()[static_cast<size_t>(at.index)].value);
  }
  return "a number";
}

// A random op's seed and offset, which every run sets to its own draw.
bool replaced_each_run(const Graph& graph, const NumberAt& at) {
  if (at.step >= 0) return false;  // a fused step draws nothing
  const Node& node = graph.nodes()[static_cast<size_t>(at.index)];
  const std::string& name = node.attrs.items()[static_cast<size_t>(at.item)].first;
  return node.draw >= 0 && (name == "seed" || name == "offset");
}

// numel(shape) / per, rounded up.
uint64_t counters_for(const Shape& shape, int64_t per) {
  return static_cast<uint64_t>((numel(shape) + per - 1) / per);
}

// What differs between two attr lists beyond their numbers ("" if nothing).
std::string attrs_difference(const Attrs& a, const Attrs& b) {
  if (a.items().size() != b.items().size()) return " has other attrs";
  for (size_t i = 0; i < a.items().size(); ++i) {
    const auto& [name, value] = a.items()[i];
    const auto& [other_name, other] = b.items()[i];
    if (name != other_name || value.index() != other.index()) return " attr " + name;
    const auto* list = std::get_if<std::vector<int64_t>>(&value);
    const bool numeric = std::holds_alternative<int64_t>(value) ||
                         std::holds_alternative<double>(value) || list != nullptr;
    if (list != nullptr && list->size() != std::get<std::vector<int64_t>>(other).size()) {
      return " attr " + name + " changes length";
    }
    if (!numeric && !(a.items()[i] == b.items()[i])) return " attr " + name + " changes";
  }
  return "";
}

// What differs between two fused programs beyond their numbers.
std::string program_difference(const FusedProgram& a, const FusedProgram& b) {
  if (a.num_inputs != b.num_inputs || a.results != b.results || a.steps.size() != b.steps.size()) {
    return " fuses other steps";
  }
  for (size_t s = 0; s < a.steps.size(); ++s) {
    const FusedStep &x = a.steps[s], &y = b.steps[s];
    if (x.op != y.op || x.operands != y.operands) return str_cat(" step ", s, " differs");
    const std::string attrs = attrs_difference(x.attrs, y.attrs);
    if (!attrs.empty()) return str_cat(" step ", s, attrs);
  }
  return "";
}

// What differs between two traces beyond their numbers ("" if nothing).
std::string structure_difference(const Graph& a, const Graph& b) {
  if (a.values().size() != b.values().size() || a.nodes().size() != b.nodes().size()) {
    return str_cat(a.nodes().size(), " nodes and ", a.values().size(), " values against ",
                   b.nodes().size(), " and ", b.values().size());
  }
  for (size_t v = 0; v < a.values().size(); ++v) {
    const Value &x = a.values()[v], &y = b.values()[v];
    if (x.kind != y.kind || x.node != y.node || x.output != y.output ||
        x.meta.dtype != y.meta.dtype || x.meta.device != y.meta.device ||
        x.meta.shape.size() != y.meta.shape.size() ||
        x.global.is_global() != y.global.is_global()) {
      return str_cat("value %", v, " is ", meta_str(x.meta), " against ", meta_str(y.meta));
    }
  }
  for (size_t n = 0; n < a.nodes().size(); ++n) {
    const Node &x = a.nodes()[n], &y = b.nodes()[n];
    const std::string where = str_cat("node ", n, " (", x.op->name, ")");
    if (x.op != y.op) return where + " is " + y.op->name;
    if (x.inputs != y.inputs || x.outputs != y.outputs) {
      return where + " reads or writes other values";
    }
    if (x.draw != y.draw) return where + " draws other random numbers";
    if (x.refresh.size() != y.refresh.size()) return where + " refreshes other attrs per run";
    if (static_cast<bool>(x.fused) != static_cast<bool>(y.fused)) {
      return where + " is fused at one size only";
    }
    const std::string attrs = attrs_difference(x.attrs, y.attrs);
    if (!attrs.empty()) return where + attrs;
    if (x.fused) {
      const std::string program = program_difference(*x.fused, *y.fused);
      if (!program.empty()) return where + program;
    }
  }
  auto same_variables = [&] {
    if (a.variables().size() != b.variables().size()) return false;
    for (size_t i = 0; i < a.variables().size(); ++i) {
      const Variable &x = a.variables()[i], &y = b.variables()[i];
      if (x.value != y.value || x.tensor.impl_ptr() != y.tensor.impl_ptr() ||
          x.grad_of.impl_ptr() != y.grad_of.impl_ptr()) {
        return false;
      }
    }
    return true;
  };
  if (!same_variables()) return "the captured tensors differ";
  auto same_writes = [&] {
    if (a.grad_writes().size() != b.grad_writes().size()) return false;
    for (size_t i = 0; i < a.grad_writes().size(); ++i) {
      if (a.grad_writes()[i].value != b.grad_writes()[i].value ||
          a.grad_writes()[i].leaf.impl_ptr() != b.grad_writes()[i].leaf.impl_ptr()) {
        return false;
      }
    }
    return true;
  };
  if (!same_writes()) return "the gradients written differ";
  if (a.inputs() != b.inputs() || a.outputs() != b.outputs() ||
      a.constants().size() != b.constants().size() || a.num_draws() != b.num_draws() ||
      a.host().effects.size() != b.host().effects.size() ||
      a.host().guards.size() != b.host().guards.size()) {
    return "the outputs, constants or host effects differ";
  }
  for (size_t c = 0; c < a.constants().size(); ++c) {
    const int id = a.constants()[c].value;
    if (id != b.constants()[c].value) return "the constants differ";
    // A constant of more than one number (the passes fold, e.g., position
    // ids) must be the same at every size: only 0-d ones are fitted.
    const Tensor &x = a.constants()[c].tensor, &y = b.constants()[c].tensor;
    if (x.dim() == 0 && y.dim() == 0 && x.dtype() == y.dtype() &&
        a.constants()[c].exact.has_value() == b.constants()[c].exact.has_value()) {
      continue;
    }
    if (x.shape() != y.shape() || x.dtype() != y.dtype()) {
      return str_cat("the constant %", id, " is ", meta_str(x.meta()), " against ",
                     meta_str(y.meta()));
    }
    const Tensor dx = x.contiguous(), dy = y.contiguous();
    if (std::memcmp(dx.raw_data(), dy.raw_data(),
                    static_cast<size_t>(dx.numel()) * dtype_size(dx.dtype())) != 0) {
      return str_cat("the constant %", id, " changes with the size");
    }
  }
  return "";
}

bool close_to(double value, double expected, bool whole) {
  if (whole) return std::abs(value - expected) < 1e-6;
  if (std::isnan(value) || std::isnan(expected)) return std::isnan(value) && std::isnan(expected);
  if (std::isinf(value) || std::isinf(expected)) return value == expected;
  return std::abs(value - expected) <= 1e-6 * std::max(1.0, std::abs(expected));
}

}  // namespace

Tensor dynamic(const Tensor& x, int64_t dim) {
  TESSERA_CHECK(x.defined(), "[graph::dynamic] the tensor is undefined");
  TESSERA_CHECK(!x.is_global(), "[graph::dynamic] global tensors cannot have dynamic dims yet ",
                "(got ", meta_str(x.meta()), ")");
  const auto ndim = static_cast<int64_t>(x.dim());
  const bool in_range = ndim > 0 && dim >= -ndim && dim < ndim;
  const std::string valid =
      ndim > 0 ? str_cat(-ndim, " to ", ndim - 1) : std::string("none, it is 0-d");
  TESSERA_CHECK(in_range, "[graph::dynamic] dim ", dim, " is out of range for a tensor of shape ",
                shape_str(x.shape()), " (valid: ", valid, ")");
  if (dim < 0) dim += ndim;
  std::lock_guard lock(marks_mutex);
  auto& table = marks();
  if (table.size() > 1024) {
    std::erase_if(table, [](const auto& entry) { return entry.second.tensor.expired(); });
  }
  Mark& mark = table[x.impl_ptr().get()];
  if (mark.tensor.lock() != x.impl_ptr()) mark = Mark{x.impl_ptr(), {}};
  if (std::find(mark.dims.begin(), mark.dims.end(), dim) == mark.dims.end()) {
    mark.dims.push_back(dim);
    std::sort(mark.dims.begin(), mark.dims.end());
  }
  return x;
}

std::vector<int64_t> dynamic_dims(const Tensor& x) {
  if (!x.defined()) return {};
  std::lock_guard lock(marks_mutex);
  auto it = marks().find(x.impl_ptr().get());
  if (it == marks().end() || it->second.tensor.lock() != x.impl_ptr()) return {};
  return it->second.dims;
}

std::vector<DynamicSize> group_sizes(const MetaVector& signature,
                                     const std::vector<std::vector<int64_t>>& marks,
                                     bool by_dim_too) {
  std::vector<DynamicSize> sizes;
  for (size_t i = 0; i < signature.size() && i < marks.size(); ++i) {
    for (int64_t dim : marks[i]) {
      if (dim >= static_cast<int64_t>(signature[i].shape.size())) continue;
      const int64_t size = signature[i].shape[static_cast<size_t>(dim)];
      auto same = std::find_if(sizes.begin(), sizes.end(), [&](const DynamicSize& s) {
        return s.traced == size && (!by_dim_too || s.dims.front().second == dim);
      });
      if (same == sizes.end()) {
        sizes.push_back({{}, size});
        same = sizes.end() - 1;
      }
      same->dims.emplace_back(i, dim);
    }
  }
  return sizes;
}

ProbeTraces trace_probes(const TracedFn& fn, const MetaVector& signature,
                         const std::vector<DynamicSize>& sizes) {
  TESSERA_CHECK(!sizes.empty(), "[graph::dynamic] no dim is marked dynamic");
  TESSERA_CHECK(sizes.size() <= 2, "[graph::dynamic] ", sizes.size(),
                " different dynamic sizes; at most two are supported (dims of equal size at ",
                "the trace share one)");
  for (const TensorMeta& meta : signature) {
    TESSERA_CHECK(!meta.is_global(), "[graph::dynamic] a function of global tensors cannot ",
                  "have dynamic dims yet");
  }
  auto traces_at = [&](bool up) {
    std::vector<int64_t> probe, check;
    for (const DynamicSize& size : sizes) {
      const int64_t t = size.traced;
      TESSERA_CHECK(up || t >= 4, "[graph::dynamic] no probe size below ", t);
      probe.push_back(up ? t + 1 : t - 1);
      check.push_back(up ? 2 * t + 3 : t / 2);
    }
    // With one size: the probe and the check. With two: each probe alone,
    // both, and the check.
    ProbeTraces out;
    if (sizes.size() == 1) {
      out.points = {probe, check};
    } else {
      out.points = {{probe[0], sizes[1].traced}, {sizes[0].traced, probe[1]}, probe, check};
    }
    for (const std::vector<int64_t>& point : out.points) {
      MetaVector metas = signature;
      for (size_t s = 0; s < sizes.size(); ++s) {
        for (const auto& [input, dim] : sizes[s].dims) {
          metas[input].shape[static_cast<size_t>(dim)] = point[s];
        }
      }
      out.graphs.push_back(trace(fn, metas));
    }
    return out;
  };
  // (Any exception: the function's own checks may throw at a probe size.)
  try {
    return traces_at(true);
  } catch (const std::exception& up) {
    try {
      return traces_at(false);
    } catch (const std::exception& down) {
      TESSERA_FAIL("[graph::dynamic] tracing at another size failed: above the traced sizes: ",
                   up.what(), "; below: ", down.what());
    }
  }
}

ShapeTemplate::ShapeTemplate(const MetaVector& signature, Graph traced,
                             std::vector<DynamicSize> sizes, const ProbeTraces& probe_traces,
                             const std::function<Graph(const Graph&)>& transform)
    : signature_(signature), traced_(std::move(traced)), sizes_(std::move(sizes)) {
  TESSERA_CHECK(probe_traces.points.size() == (sizes_.size() == 1 ? 2u : 4u) &&
                    probe_traces.graphs.size() == probe_traces.points.size(),
                "[graph::dynamic] ", probe_traces.graphs.size(), " probe traces for ",
                sizes_.size(), " dynamic sizes; trace_probes makes them");
  // Global parameters too (trace_probes looked at the inputs only).
  TESSERA_CHECK(!traced_.is_global(), "[graph::dynamic] a function of global tensors cannot ",
                "have dynamic dims yet");
  // The probes as the template compares them: transformed as the trace
  // was, or the traces themselves (not copied).
  std::vector<Graph> transformed;
  if (transform) {
    for (const Graph& graph : probe_traces.graphs) transformed.push_back(transform(graph));
  }
  const std::vector<Graph>& probe_graphs = transform ? transformed : probe_traces.graphs;
  std::vector<std::pair<std::vector<int64_t>, const Graph&>> probes;
  for (size_t p = 0; p < probe_traces.points.size(); ++p) {
    probes.emplace_back(probe_traces.points[p], probe_graphs[p]);
  }

  const Numbers at_trace = numbers_of(traced_);
  std::vector<Numbers> at_probe;
  for (const auto& [point, graph] : probes) {
    const std::string difference = structure_difference(traced_, graph);
    TESSERA_CHECK(difference.empty(), "[graph::dynamic] the graph changes with the size (at ",
                  describe(point), ": ", difference, ")");
    at_probe.push_back(numbers_of(graph));
  }
  // A random op's counter count is a rounded share of its output's size
  // (dropout reserves one counter per four elements), which is not affine
  // when the output grows in two dims (attention's [T, T]): such counts are
  // worked out from the inferred output at each size instead.
  random_per_.assign(traced_.nodes().size(), 0);
  for (size_t n = 0; n < traced_.nodes().size(); ++n) {
    const Node& node = traced_.nodes()[n];
    if (node.random_count == 0 || node.outputs.empty()) continue;
    for (int64_t per : {1, 4}) {
      auto fits = [&](const Graph& graph) {
        const Node& at = graph.nodes()[n];
        return at.random_count == counters_for(graph.value(at.outputs[0]).meta.shape, per);
      };
      bool all = fits(traced_);
      for (const auto& probe : probes) all = all && fits(probe.second);
      if (all) {
        random_per_[n] = per;
        break;
      }
    }
  }

  const bool two = sizes_.size() == 2;
  const double d0 = static_cast<double>(probes[0].first[0] - sizes_[0].traced);
  const double d1 = two ? static_cast<double>(probes[1].first[1] - sizes_[1].traced) : 1;
  fits_.resize(at_trace.values.size());
  for (size_t k = 0; k < fits_.size(); ++k) {
    Fit& fit = fits_[k];
    fit.c = at_trace.values[k];
    const NumberAt& at = at_trace.where[k];
    if (at.kind == NumberAt::count && random_per_[static_cast<size_t>(at.index)] > 0) continue;
    if (at.kind == NumberAt::attr && replaced_each_run(traced_, at)) continue;
    bool constant = true;  // the same everywhere (an infinity too)
    for (const Numbers& numbers : at_probe) {
      constant =
          constant && std::bit_cast<uint64_t>(numbers.values[k]) == std::bit_cast<uint64_t>(fit.c);
    }
    if (constant) continue;
    // A fraction the host computed from the size and stored below double
    // precision reaches the fit rounded: the fitted line would be a unit in
    // the last place off at other sizes. Constant folding keeps `full`'s
    // double, which is fitted instead; any other such constant makes
    // graph::compile fit the traced graph.
    if (at.kind == NumberAt::constant && !at_trace.whole[k]) {
      const Constant& constant = traced_.constants()[static_cast<size_t>(at.index)];
      const Tensor& number = constant.tensor;
      TESSERA_CHECK(number.dtype() == DType::f64 || constant.exact.has_value(), "[graph::dynamic] ",
                    number_name(traced_, at), " (", dtype_name(number.dtype()),
                    ") is a fraction computed from the size (", fit.c, " at ",
                    describe(at_trace_sizes()), "); rounded to ", dtype_name(number.dtype()),
                    " it cannot be evaluated exactly at other sizes");
    }
    fit.varies = true;
    fit.a0 = (at_probe[0].values[k] - fit.c) / d0;
    if (two) {
      fit.a1 = (at_probe[1].values[k] - fit.c) / d1;
      fit.a01 = (at_probe[2].values[k] - at_probe[0].values[k] - at_probe[1].values[k] + fit.c) /
                (d0 * d1);
    }
    const std::vector<int64_t>& check = probes.back().first;
    const double expected = at_probe.back().values[k];
    TESSERA_CHECK(close_to(evaluate(fit, check), expected, at_trace.whole[k]), "[graph::dynamic] ",
                  number_name(traced_, at), " does not follow the dynamic ",
                  "sizes linearly: it is ", fit.c, " at ", describe(at_trace_sizes()), ", ",
                  at_probe[0].values[k], " at ", describe(probes[0].first), " and ", expected,
                  " at ", describe(check));
  }
}

std::vector<int64_t> ShapeTemplate::at_trace_sizes() const {
  std::vector<int64_t> out;
  for (const DynamicSize& size : sizes_) out.push_back(size.traced);
  return out;
}

double ShapeTemplate::evaluate(const Fit& fit, const std::vector<int64_t>& sizes) const {
  const double x = static_cast<double>(sizes[0] - sizes_[0].traced);
  const double y = sizes_.size() > 1 ? static_cast<double>(sizes[1] - sizes_[1].traced) : 0;
  return fit.c + fit.a0 * x + fit.a1 * y + fit.a01 * x * y;
}

std::string ShapeTemplate::describe(const std::vector<int64_t>& sizes) const {
  std::string text;
  for (size_t s = 0; s < sizes_.size(); ++s) {
    for (const auto& [input, dim] : sizes_[s].dims) {
      text += str_cat(text.empty() ? "" : ", ", "input ", input, " dim ", dim, " = ", sizes[s]);
    }
  }
  return text;
}

std::optional<std::vector<int64_t>> ShapeTemplate::sizes_of(const MetaVector& signature) const {
  if (signature.size() != signature_.size()) return std::nullopt;
  std::vector<int64_t> sizes(sizes_.size(), -1);
  for (size_t i = 0; i < signature.size(); ++i) {
    const TensorMeta &now = signature[i], &then = signature_[i];
    if (now.dtype != then.dtype || now.device != then.device || now.is_global() ||
        now.shape.size() != then.shape.size()) {
      return std::nullopt;
    }
    for (size_t d = 0; d < now.shape.size(); ++d) {
      int which = -1;
      for (size_t s = 0; s < sizes_.size(); ++s) {
        for (const auto& [input, dim] : sizes_[s].dims) {
          if (input == i && static_cast<size_t>(dim) == d) which = static_cast<int>(s);
        }
      }
      if (which < 0) {
        if (now.shape[d] != then.shape[d]) return std::nullopt;
        continue;
      }
      int64_t& size = sizes[static_cast<size_t>(which)];
      if (now.shape[d] < 1 || (size >= 0 && size != now.shape[d])) return std::nullopt;
      size = now.shape[d];
    }
  }
  return sizes;
}

Graph ShapeTemplate::instantiate(const std::vector<int64_t>& sizes) const {
  const std::string where = describe(sizes);
  // The numbers in numbers_of()'s order: one that does not vary with the
  // sizes keeps its traced value exactly (an int64 bound such as INT64_MAX
  // would not survive a double); one that does is evaluated.
  size_t at = 0;
  auto varies = [&]() { return fits_.at(at).varies; };
  auto next = [&]() { return evaluate(fits_.at(at++), sizes); };
  // `what` names the number (called only to say it is not whole).
  auto next_whole = [&](const auto& what) {
    const double value = next();
    const double whole = std::round(value);
    TESSERA_CHECK(std::abs(value - whole) < 1e-6, "[graph::dynamic] ", what(), " would be ", value,
                  " at ", where, ", not a whole number");
    return static_cast<int64_t>(whole);
  };
  auto keep_or_number = [&](double traced) {
    if (varies()) return next();
    ++at;
    return traced;
  };
  auto keep_or_whole = [&](int64_t traced, const auto& what) {
    if (varies()) return next_whole(what);
    ++at;
    return traced;
  };

  std::vector<Shape> shapes;
  for (size_t v = 0; v < traced_.values().size(); ++v) {
    Shape shape;
    const Shape& traced_shape = traced_.values()[v].meta.shape;
    for (size_t d = 0; d < traced_shape.size(); ++d) {
      shape.push_back(
          keep_or_whole(traced_shape[d], [&] { return str_cat("dim ", d, " of %", v); }));
      TESSERA_CHECK(shape.back() >= 0, "[graph::dynamic] dim ", d, " of %", v, " would be ",
                    shape.back(), " at ", where, ", a negative size");
    }
    shapes.push_back(std::move(shape));
  }
  std::vector<Attrs> attrs;
  std::vector<std::shared_ptr<const FusedProgram>> programs;
  std::vector<uint64_t> random_counts;
  for (const Node& node : traced_.nodes()) {
    auto evaluate_attrs = [&](const Attrs& traced_attrs, const std::string& op_name) {
      Attrs now;
      for (const auto& [name, value] : traced_attrs.items()) {
        auto what = [&] { return str_cat(op_name, "'s ", name); };
        if (const auto* i = std::get_if<int64_t>(&value)) {
          now.set(name, keep_or_whole(*i, what));
        } else if (const auto* f = std::get_if<double>(&value)) {
          now.set(name, keep_or_number(*f));
        } else if (const auto* list = std::get_if<std::vector<int64_t>>(&value)) {
          std::vector<int64_t> numbers;
          for (int64_t x : *list) numbers.push_back(keep_or_whole(x, what));
          now.set(name, std::move(numbers));
        } else {
          now.set(name, value);
        }
      }
      return now;
    };
    attrs.push_back(evaluate_attrs(node.attrs, node.op->name));
    if (node.fused) {
      auto program = std::make_shared<FusedProgram>(*node.fused);
      for (FusedStep& step : program->steps) step.attrs = evaluate_attrs(step.attrs, step.op->name);
      programs.push_back(std::move(program));
    } else {
      programs.push_back(nullptr);
    }
    const int64_t count = keep_or_whole(static_cast<int64_t>(node.random_count),
                                        [&] { return node.op->name + "'s counter count"; });
    random_counts.push_back(static_cast<uint64_t>(count));
  }
  std::unordered_map<int, Constant> constants;
  for (const Constant& constant : traced_.constants()) {
    const int id = constant.value;
    const Tensor& tensor = constant.tensor;
    if (tensor.dim() != 0 || !varies()) {  // (folded tensors: the same at every size)
      if (tensor.dim() == 0) ++at;
      constants[id] = constant;
      continue;
    }
    const bool whole = !is_floating(tensor.dtype());
    const double number =
        whole ? static_cast<double>(next_whole([&] { return str_cat("the constant %", id); }))
              : next();
    // Rounded to the dtype as `full` rounds the host's double.
    constants[id] = {id, Tensor::scalar(number, tensor.dtype()),
                     constant.exact ? std::optional<double>(number) : std::nullopt};
  }

  // The values in the trace's order, so every id stays what it was.
  Graph out;
  std::unordered_map<int, const Variable*> variables;
  for (const Variable& variable : traced_.variables()) variables[variable.value] = &variable;
  for (size_t v = 0; v < traced_.values().size(); ++v) {
    const Value& value = traced_.values()[v];
    int id = -1;
    switch (value.kind) {
      case ValueKind::input: {
        TensorMeta meta = value.meta;
        meta.shape = shapes[v];
        id = out.add_input(meta);
        break;
      }
      case ValueKind::variable: {
        const Variable& variable = *variables.at(static_cast<int>(v));
        id = out.add_variable(variable.tensor, variable.grad_of);
        break;
      }
      case ValueKind::constant:
        id = out.add_constant(constants.at(static_cast<int>(v)).tensor,
                              constants.at(static_cast<int>(v)).exact);
        break;
      case ValueKind::node: {
        if (value.output != 0) continue;  // added with its node's first output
        const auto n = static_cast<size_t>(value.node);
        const Node& node = traced_.nodes()[n];
        MetaVector inputs;
        for (int input : node.inputs) inputs.push_back(out.value(input).meta);
        MetaVector inferred;
        if (programs[n] != nullptr) {  // each step's shape from its operands'
          MetaVector operands = inputs;
          for (const FusedStep& step : programs[n]->steps) {
            MetaVector step_inputs;
            for (int operand : step.operands) {
              step_inputs.push_back(operands.at(static_cast<size_t>(operand)));
            }
            operands.push_back(step.op->infer(step_inputs, step.attrs).at(0));
          }
          for (int result : programs[n]->results) {
            inferred.push_back(operands.at(static_cast<size_t>(programs[n]->num_inputs + result)));
          }
        } else {
          inferred = node.op->infer(inputs, attrs[n]);
        }
        for (size_t o = 0; o < node.outputs.size(); ++o) {
          const Shape& expected = shapes[static_cast<size_t>(node.outputs[o])];
          TESSERA_CHECK(inferred[o].shape == expected, "[graph::dynamic] ", node.op->name,
                        " (node ", n, ") gives ", shape_str(inferred[o].shape), " at ", where,
                        ", where the traced sizes say ", shape_str(expected));
        }
        const uint64_t count = random_per_[n] > 0
                                   ? counters_for(inferred.at(0).shape, random_per_[n])
                                   : random_counts[n];
        const int added =
            programs[n] != nullptr
                ? out.add_fused_node(programs[n], node.inputs, inferred)
                : out.add_node(*node.op, attrs[n], node.inputs, inferred, count, node.draw);
        for (const auto& refresh : node.refresh) out.add_refresh(added, refresh);
        id = out.nodes()[static_cast<size_t>(added)].outputs[0];
        break;
      }
    }
    TESSERA_CHECK(id == static_cast<int>(v), "[graph::dynamic] internal error: value %", v,
                  " was re-made as %", id);
  }
  out.set_outputs(traced_.outputs(), traced_.output_globals());
  for (const GradWrite& write : traced_.grad_writes()) {
    out.add_grad_write(write.leaf, write.value, write.global);
  }
  out.host() = traced_.host();
  return out;
}

}  // namespace tessera::graph
