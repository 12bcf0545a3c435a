#include "tessera/planner/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>
#include <utility>

#include "tessera/global/boxing.h"
#include "tessera/global/choose_layout.h"
#include "tessera/global/layout.h"

namespace tessera::planner {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string sbps_str(const std::vector<NdSbp>& sbps) {
  std::string text = "(";
  for (size_t i = 0; i < sbps.size(); ++i) text += (i ? ", " : "") + nd_sbp_str(sbps[i]);
  return text + ")";
}

// A layout's part on each mesh axis as a number (its kind and split dim):
// equal numbers, equal parts (CostGraph's node parts).
std::vector<int> axis_parts(const NdSbp& sbp) {
  std::vector<int> parts;
  for (int a = 0; a < sbp.ndim(); ++a) {
    parts.push_back(static_cast<int>(sbp[a].kind) * 64 + static_cast<int>(sbp[a].axis));
  }
  return parts;
}

// Every layout of `shape` on `mesh`: broadcast, or split along a dim at
// least as long as the mesh axis, on each axis.
std::vector<NdSbp> layouts_of(const Shape& shape, const Placement& mesh) {
  std::vector<std::vector<Sbp>> per_axis;
  for (int axis = 0; axis < mesh.ndim(); ++axis) {
    std::vector<Sbp> options{Sbp::broadcast()};
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] >= mesh.mesh()[static_cast<size_t>(axis)]) {
        options.push_back(Sbp::split(static_cast<int64_t>(d)));
      }
    }
    per_axis.push_back(std::move(options));
  }
  std::vector<NdSbp> layouts;
  std::vector<size_t> at(per_axis.size(), 0);
  while (true) {
    std::vector<Sbp> sbps;
    for (size_t a = 0; a < per_axis.size(); ++a) sbps.push_back(per_axis[a][at[a]]);
    layouts.emplace_back(sbps);
    size_t a = per_axis.size();
    while (a-- > 0) {
      if (++at[a] < per_axis[a].size()) break;
      at[a] = 0;
    }
    if (a == static_cast<size_t>(-1)) break;
  }
  return layouts;
}

double local_bytes(const TensorMeta& meta, const Placement& mesh, const NdSbp& sbp) {
  return static_cast<double>(numel(global::local_shape(meta.shape, mesh, sbp, 0))) *
         static_cast<double>(dtype_size(meta.dtype));
}

// What the planner knows of one traced step on one mesh: the choice nodes
// (first the tensors the step does not compute, then its op nodes) and how
// values reach them.
class Problem {
 public:
  Problem(const graph::Graph& graph, const PlanOptions& options,
          const nn::Module::NamedTensors& names)
      : graph_(graph), options_(options), mesh_(options.mesh) {
    TESSERA_CHECK(mesh_.defined(), "[planner] PlanOptions::mesh is not set");
    TESSERA_CHECK(mesh_.ndim() == 1 || mesh_.ndim() == 2,
                  "[planner] plans for 1-D and 2-D meshes; got ", placement_str(mesh_));
    TESSERA_CHECK(options.micro_batches >= 1, "[planner] PlanOptions::micro_batches must be ",
                  "at least 1, got ", options.micro_batches);
    TESSERA_CHECK(!graph.is_global(),
                  "[planner] plans a step traced on local tensors (the "
                  "logical step), not one already laid out on a mesh");
    const size_t count = graph.values().size();
    choice_of_value_.assign(count, -1);
    output_of_value_.assign(count, 0);
    make_sources(names);
    find_lifetimes();
    find_peak();
    make_ops();
    make_edges();
    for (const auto& [name, sbp] : options.pinned) {
      (void)sbp;
      const bool known = std::any_of(sources_.begin(), sources_.end(),
                                     [&](const Source& s) { return s.name == name; });
      TESSERA_CHECK(known, "[planner] pinned tensor '", name, "' is not in the step; its tensors ",
                    "are ", tensor_names());
    }
  }

  const CostGraph& cost_graph() const { return cost_; }

  Plan make_plan(const Solution& solution, double memory_weight) const {
    Plan plan;
    plan.mesh = mesh_;
    plan.choice_nodes = static_cast<int>(cost_.nodes().size());
    plan.remaining = solution.remaining;
    plan.exact = solution.exact;
    plan.lower_bound = solution.lower_bound;
    plan.objective = solution.cost;
    plan.memory_budget = options_.memory_budget;
    plan.prediction = predict(solution.choice);
    const std::vector<int>& choice = solution.choice;
    for (size_t k = 0; k < sources_.size(); ++k) {
      const Source& source = sources_[k];
      TensorChoice tensor;
      tensor.name = source.name;
      tensor.meta = graph_.value(source.value).meta;
      tensor.trained = source.trained;
      tensor.sbp = source.layouts[static_cast<size_t>(choice[k])];
      if (auto alt = runner_up(static_cast<int>(k), choice, memory_weight)) {
        tensor.runner_up = source.layouts[alt->first];
        tensor.gap_seconds = alt->second;
      }
      plan.tensors.push_back(std::move(tensor));
    }
    for (size_t k = 0; k < ops_.size(); ++k) {
      const int id = static_cast<int>(sources_.size() + k);
      const OpNode& node = ops_[k];
      const global::LayoutOption& option = node.options[static_cast<size_t>(choice[id])];
      OpChoice op;
      op.node = node.node;
      op.def = graph_.nodes()[static_cast<size_t>(node.node)].op;
      for (int value : graph_.nodes()[static_cast<size_t>(node.node)].inputs) {
        op.shapes.push_back(graph_.value(value).meta.shape);
      }
      op.op = op.def->name;
      op.inputs = option.input_sbps;
      op.outputs = option.output_sbps;
      op.compute_seconds = option.compute_seconds;
      op.boxing_seconds = boxing_into(static_cast<int>(k), choice);
      if (auto alt = runner_up(id, choice, memory_weight)) {
        op.runner_up_inputs = node.options[alt->first].input_sbps;
        op.runner_up_outputs = node.options[alt->first].output_sbps;
        op.gap_seconds = alt->second;
      }
      plan.ops.push_back(std::move(op));
      std::vector<std::pair<int, int>> inputs;
      for (int value : graph_.nodes()[static_cast<size_t>(node.node)].inputs) {
        inputs.emplace_back(choice_of_value_[static_cast<size_t>(value)], 0);
      }
      plan.op_inputs.push_back(std::move(inputs));
    }
    return plan;
  }

  StepPrediction predict(const std::vector<int>& choice) const {
    StepPrediction p;
    const auto n_sources = static_cast<int>(sources_.size());
    double update_seconds = 0;
    // One step's gradients are made during its backward pass (zero_grad
    // drops the last step's): each counts from the node that makes it.
    // Accumulated over micro-batches, they are alive all along.
    const bool gradients_made_in_step = options_.micro_batches == 1;
    std::vector<double> gradient_bytes(sources_.size(), 0.0);  // in the parameter's layout
    std::vector<double> made_bytes(sources_.size(), -1.0);     // as made; -1: not made yet
    double all_gradient_bytes = 0;
    for (size_t k = 0; k < sources_.size(); ++k) {
      const Source& source = sources_[k];
      const NdSbp& sbp = source.layouts[static_cast<size_t>(choice[k])];
      if (source.is_input) continue;
      const TensorMeta& meta = graph_.value(source.value).meta;
      const double held = allocated_bytes(meta, sbp);
      p.state_bytes += held * (source.trained ? 2 + options_.optimizer_states : 1);
      if (source.trained) {
        update_seconds += update_cost(local_bytes(meta, mesh_, sbp));
        gradient_bytes[k] = held;
        all_gradient_bytes += held;
      }
    }
    // The step in order: each node waits for its inputs' boxing; gradient
    // boxing starts when its gradient is made, on its own stream.
    double now = 0;
    double stream_free = 0;
    double blocking = 0;
    double gradients = 0;
    std::vector<double> live_bytes(graph_.values().size(), 0.0);
    size_t dying = 0;  // into deaths_
    // Boxed inputs kept past their op, by the tape or by views of them:
    // (the node after which they go, bytes).
    std::priority_queue<std::pair<int, double>, std::vector<std::pair<int, double>>, std::greater<>>
        boxed_saves;
    double live = 0;
    for (size_t k = 0; k < sources_.size(); ++k) {
      const Source& source = sources_[k];
      if (!source.is_input) continue;
      live += allocated_bytes(graph_.value(source.value).meta,
                              source.layouts[static_cast<size_t>(choice[k])]);
    }
    double peak = live;
    const int forward_end = forward_end_node();
    double bucket = 0;  // bytes of partial-sum gradients waiting in the open bucket
    auto flush_bucket = [&] {
      if (bucket > 0) {
        peak = std::max(peak, live + options_.model.allocated_bytes(bucket));
      }
      bucket = 0;
    };
    double gradients_inline = 0;  // gradient traffic on the compute's own path
    for (size_t k = 0; k < ops_.size(); ++k) {
      const OpNode& op = ops_[k];
      const int id = n_sources + static_cast<int>(k);
      const global::LayoutOption& option = op.options[static_cast<size_t>(choice[id])];
      const graph::Node& node = graph_.nodes()[static_cast<size_t>(op.node)];
      const double boxing = boxing_into(static_cast<int>(k), choice);
      blocking += boxing;
      double temporary = 0;
      const int released = tape_release_[static_cast<size_t>(op.node)];
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (op.boxed[i].empty()) continue;
        // A layout change makes a new tensor (slicing a broadcast one
        // included: the shard is copied to be contiguous).
        if (produced_layout(node.inputs[i], choice) != option.input_sbps[i]) {
          const double bytes =
              allocated_bytes(graph_.value(node.inputs[i]).meta, option.input_sbps[i]);
          // The tape saves the input as the op received it, boxed; a view
          // of it (or an in-place op's output) is the boxed copy, which
          // lives as long as the view does (a gathered weight, transposed
          // for a matmul that keeps it for the backward pass).
          int until = released;
          for (size_t o = 0; o < node.outputs.size(); ++o) {
            if (aliased_input(node, o) == node.inputs[i]) {
              until = std::max(until, last_use_[static_cast<size_t>(node.outputs[o])]);
            }
          }
          if (until > op.node) {
            live += bytes;
            boxed_saves.emplace(until, bytes);
          } else {
            temporary += bytes;
          }
        }
      }
      now += boxing + option.compute_seconds;
      p.compute_seconds += option.compute_seconds;
      p.flops += op.flops[static_cast<size_t>(choice[id])];
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        const int value = node.outputs[o];
        // A gradient's memory, or the memory a view of it will be: alive
        // from here to the step's end.
        const int gradient_of = gradient_memory_[static_cast<size_t>(value)];
        if (gradient_of >= 0) {
          const auto k = static_cast<size_t>(gradient_of);
          if (gradients_made_in_step && made_bytes[k] < 0) {
            // In the layout its op makes it in (a shard, a partial sum)
            // until boxing makes it the parameter's.
            const int made_value = gradient_value_[k];
            made_bytes[k] = made_value < 0 ? gradient_bytes[k]
                                           : allocated_bytes(graph_.value(made_value).meta,
                                                             produced_layout(made_value, choice));
            live += made_bytes[k];
          }
          continue;
        }
        if (aliased_input(node, o) >= 0) continue;
        live_bytes[static_cast<size_t>(value)] =
            allocated_bytes(graph_.value(value).meta, option.output_sbps[o]);
        live += live_bytes[static_cast<size_t>(value)];
      }
      peak = std::max(peak, live + temporary);
      for (const Gradient& gradient : gradients_) {
        if (gradient.node != op.node) continue;
        const double seconds = gradient_seconds(gradient, choice);
        gradients += seconds;
        const auto to = static_cast<size_t>(passages_[gradient.passage].to);
        if (seconds > 0 && gradients_made_in_step) {
          // The gradient as made (counted above) is held beside what
          // boxing makes of it: until the conversion ends, or, for a
          // partial sum waiting in a bucket, until the bucket is reduced
          // as one concatenated copy (which it is then a view of).
          const TensorMeta& meta = graph_.value(gradient.value).meta;
          const NdSbp& made = produced_layout(gradient.value, choice);
          if (options_.gradient_bucket_bytes > 0 &&
              only_sums_differ(made, sources_[to].layouts[static_cast<size_t>(choice[to])])) {
            bucket += local_bytes(meta, mesh_, made);
            if (bucket >= options_.gradient_bucket_bytes) flush_bucket();
          } else {
            peak = std::max(peak, live + gradient_bytes[to]);
            live += gradient_bytes[to] - std::max(0.0, made_bytes[to]);
            made_bytes[to] = gradient_bytes[to];
          }
        }
        if (options_.overlap_gradients && options_.model.overlaps_communication) {
          stream_free = std::max(stream_free, now) + seconds;
        } else {
          now += seconds;
          gradients_inline += seconds;
        }
      }
      while (!boxed_saves.empty() && boxed_saves.top().first <= op.node) {
        live -= boxed_saves.top().second;
        boxed_saves.pop();
      }
      // Free what no later node reads (an alias's base included).
      for (; dying < deaths_.size() && deaths_[dying].first <= op.node; ++dying) {
        const auto value = static_cast<size_t>(deaths_[dying].second);
        live -= live_bytes[value];
        live_bytes[value] = 0;
      }
      if (op.node == forward_end) {
        p.forward_seconds = now - gradients_inline;
        p.saved_bytes = live;
      }
    }
    flush_bucket();  // when backward ends
    // Gradients made by no node (a parameter's gradient that is itself a
    // traced input) do not occur; the optimizer runs once all are in.
    const double end = std::max(now, stream_free) + update_seconds;
    p.micro_batch_seconds = now - gradients_inline;
    p.update_seconds = update_seconds;
    p.gradient_tail_seconds = end - update_seconds - p.micro_batch_seconds;
    p.compute_seconds += update_seconds;
    p.communication_seconds = blocking + gradients;
    p.step_seconds = end;
    p.exposed_seconds = end - p.compute_seconds;
    p.gradient_bytes = all_gradient_bytes;
    if (gradients_made_in_step) {
      // The peak counted the gradients made by then; the state counts all.
      p.peak_bytes = p.state_bytes - all_gradient_bytes + peak;
      p.activation_bytes = p.peak_bytes - p.state_bytes;
    } else {
      p.activation_bytes = peak;
      p.peak_bytes = p.state_bytes + peak;
    }
    return p;
  }

  // Data parallelism's layouts for the tensors the step does not compute:
  // every input split by rows on every mesh axis (where it has enough),
  // every variable broadcast.
  std::map<std::string, NdSbp> data_parallel_pins() const {
    std::map<std::string, NdSbp> pins;
    for (const Source& source : sources_) {
      const Shape& shape = graph_.value(source.value).meta.shape;
      const bool rows = source.is_input && !shape.empty() && shape[0] >= mesh_.size();
      pins[source.name] =
          rows ? NdSbp(std::vector<Sbp>(static_cast<size_t>(mesh_.ndim()), Sbp::split(0)))
               : NdSbp::broadcast(mesh_.ndim());
    }
    return pins;
  }

  // `choice` of `pinned` (this step with some sources pinned) as a choice
  // of this problem: op nodes have the same options; a pinned source takes
  // the index of its layout here.
  std::vector<int> choice_from(const Problem& pinned, const std::vector<int>& choice) const {
    std::vector<int> mine = choice;
    for (size_t k = 0; k < sources_.size(); ++k) {
      const NdSbp& sbp = pinned.sources_[k].layouts[static_cast<size_t>(choice[k])];
      const std::vector<NdSbp>& here = sources_[k].layouts;
      mine[k] = static_cast<int>(std::find(here.begin(), here.end(), sbp) - here.begin());
      if (mine[k] == static_cast<int>(here.size())) return {};  // not one of ours
    }
    return mine;
  }

  std::string tensor_names() const {
    std::string text;
    for (size_t k = 0; k < sources_.size() && k < 12; ++k) {
      text += (k ? ", " : "") + sources_[k].name;
    }
    if (sources_.size() > 12) text += ", ...";
    return text;
  }

  // The largest state tensors under `choice`, for an unmet budget.
  std::string largest_state(const std::vector<int>& choice) const {
    std::vector<std::pair<double, std::string>> sizes;
    for (size_t k = 0; k < sources_.size(); ++k) {
      const Source& source = sources_[k];
      if (source.is_input) continue;
      const NdSbp& sbp = source.layouts[static_cast<size_t>(choice[k])];
      const double bytes = allocated_bytes(graph_.value(source.value).meta, sbp) *
                           (source.trained ? 2 + options_.optimizer_states : 1);
      sizes.emplace_back(bytes, source.name + " " + nd_sbp_str(sbp));
    }
    std::sort(sizes.rbegin(), sizes.rend());
    std::string text;
    for (size_t k = 0; k < sizes.size() && k < 3; ++k) {
      text += (k ? ", " : "") + sizes[k].second + " " + mib_str(sizes[k].first);
    }
    return text;
  }

 private:
  struct Source {
    int value = -1;
    std::string name;
    bool is_input = false;
    bool trained = false;
    std::vector<NdSbp> layouts;
  };
  struct OpNode {
    int node = -1;
    std::vector<global::LayoutOption> options;
    std::vector<double> flops;  // per option, on the largest shards
    // Per option: boxing its constant operands (numbers, broadcast) into it.
    std::vector<double> constant_boxing;
    // Per input: the edge (index into edges_) it travels, or empty for a
    // constant (whose boxing is in the node's own cost).
    std::vector<std::vector<size_t>> boxed;
  };
  // A value's passage from its producer's choice node to a consumer's:
  // costs[producer strategy][consumer strategy].
  struct Passage {
    int from = -1;
    int to = -1;
    std::vector<double> seconds;
  };
  struct Gradient {
    int node = -1;       // the graph node that makes it
    size_t passage = 0;  // into the parameter's layout
    int value = -1;      // the gradient as that node makes it
  };

  double update_cost(double bytes) const {
    // Read the parameter, its gradient and state; write the parameter and
    // state; a few FLOPs per element.
    const double states = options_.optimizer_states;
    return options_.model.compute_seconds(OpCost{bytes, bytes * (3 + 2 * states)},
                                          OpKind::elementwise);
  }

  const global::BoxingPlan& boxing(const TensorMeta& logical, const NdSbp& from,
                                   const NdSbp& to) const {
    std::string key = shape_str(logical.shape) + dtype_name(logical.dtype) + nd_sbp_str(from) +
                      "|" + nd_sbp_str(to);
    auto found = boxing_cache_.find(key);
    if (found != boxing_cache_.end()) return found->second;
    TensorMeta meta = logical;
    meta.device = Device{DeviceType::cpu, 0};
    meta.placement = mesh_;
    meta.sbp = from;
    return boxing_cache_.emplace(key, global::plan_boxing(meta, mesh_, to, options_.model))
        .first->second;
  }

  // The layout each strategy of `value`'s producer gives it.
  std::vector<NdSbp> producer_layouts(int value) const {
    const int id = choice_of_value_[static_cast<size_t>(value)];
    if (id < static_cast<int>(sources_.size())) return sources_[static_cast<size_t>(id)].layouts;
    const auto output = static_cast<size_t>(output_of_value_[static_cast<size_t>(value)]);
    std::vector<NdSbp> layouts;
    for (const global::LayoutOption& option :
         ops_[static_cast<size_t>(id) - sources_.size()].options) {
      layouts.push_back(option.output_sbps.at(output));
    }
    return layouts;
  }

  // Whether `from` becomes `to` by reducing partial sums alone (each mesh
  // axis the same, or P(sum) to B): what a gradient bucket reduces.
  static bool only_sums_differ(const NdSbp& from, const NdSbp& to) {
    bool any = false;
    for (int axis = 0; axis < from.ndim(); ++axis) {
      if (from[axis] == to[axis]) continue;
      if (from[axis].kind != SbpKind::partial_sum || !to[axis].is_broadcast()) return false;
      any = true;
    }
    return any;
  }

  // The layout `value` is made in under `choice`.
  const NdSbp& produced_layout(int value, const std::vector<int>& choice) const {
    const int id = choice_of_value_[static_cast<size_t>(value)];
    const auto picked = static_cast<size_t>(choice[static_cast<size_t>(id)]);
    if (id < static_cast<int>(sources_.size())) {
      return sources_[static_cast<size_t>(id)].layouts[picked];
    }
    return ops_[static_cast<size_t>(id) - sources_.size()].options[picked].output_sbps.at(
        static_cast<size_t>(output_of_value_[static_cast<size_t>(value)]));
  }

  void make_sources(const nn::Module::NamedTensors& names) {
    const auto& variables = graph_.variables();
    for (size_t k = 0; k < graph_.inputs().size(); ++k) {
      add_source(graph_.inputs()[k], "input " + std::to_string(k), true, false);
    }
    for (size_t k = 0; k < variables.size(); ++k) {
      const graph::Variable& variable = variables[k];
      TESSERA_CHECK(!variable.grad_of.defined(),
                    "[planner] the step reads a gradient accumulated before it; clear the "
                    "gradients (zero_grad(set_to_none)) before tracing the step to plan");
      std::string name = "variable " + std::to_string(k);
      for (const auto& [qualified, tensor] : names) {
        if (tensor.is_same(variable.tensor)) name = qualified;
      }
      bool trained = false;
      for (const graph::GradWrite& write : graph_.grad_writes()) {
        trained = trained || write.leaf.is_same(variable.tensor);
      }
      add_source(variable.value, name, false, trained);
    }
    gradient_source_.assign(graph_.values().size(), -1);
    for (const graph::GradWrite& write : graph_.grad_writes()) {
      if (write.value < 0) continue;
      for (size_t k = 0; k < sources_.size(); ++k) {
        if (!sources_[k].is_input &&
            graph_.variables()[k - graph_.inputs().size()].tensor.is_same(write.leaf)) {
          gradient_source_[static_cast<size_t>(write.value)] = static_cast<int>(k);
        }
      }
    }
    // A gradient may be a view of what an op made (a weight's gradient, the
    // transpose of a matmul's output): that memory is the gradient's, which
    // the state already counts, from the node that makes it.
    gradient_memory_ = gradient_source_;
    for (size_t n = graph_.nodes().size(); n-- > 0;) {
      const graph::Node& node = graph_.nodes()[n];
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        const int base = aliased_input(node, o);
        const int of = gradient_memory_[static_cast<size_t>(node.outputs[o])];
        if (base >= 0 && of >= 0) gradient_memory_[static_cast<size_t>(base)] = of;
      }
    }
  }

  void add_source(int value, std::string name, bool is_input, bool trained) {
    Source source;
    source.value = value;
    source.name = std::move(name);
    source.is_input = is_input;
    source.trained = trained;
    const TensorMeta& meta = graph_.value(value).meta;
    auto pin = options_.pinned.find(source.name);
    if (pin != options_.pinned.end()) {
      global::check_layout(meta.shape, mesh_, pin->second, "planner: pinned " + source.name);
      source.layouts = {pin->second};
    } else {
      source.layouts = layouts_of(meta.shape, mesh_);
    }
    std::vector<double> cost, memory;
    std::vector<std::vector<int>> parts;
    for (const NdSbp& sbp : source.layouts) {
      const double bytes = local_bytes(meta, mesh_, sbp);
      cost.push_back(trained ? update_cost(bytes) / static_cast<double>(options_.micro_batches)
                             : 0.0);
      const double held = allocated_bytes(meta, sbp);
      memory.push_back(is_input ? held : held * (trained ? 2 + options_.optimizer_states : 1));
      parts.push_back(axis_parts(sbp));
    }
    const int id =
        cost_.add_node(source.name, std::move(cost), std::move(memory), std::move(parts));
    choice_of_value_[static_cast<size_t>(value)] = id;
    sources_.push_back(std::move(source));
  }

  // When each value's memory can be freed, whatever the plan: last_use_,
  // per value the node after which nothing needs it (escaping values: past
  // the end), and deaths_, the same sorted by node. A view or an in-place
  // op's output is its input's memory, which lives until the last use of
  // any of its aliases (a view kept for the backward pass keeps its base).
  // tape_release_: per node, the node after which the tape lets go of its
  // saved inputs (-1: it keeps none).
  void find_lifetimes() {
    std::vector<int>& last = last_use_;
    last.assign(graph_.values().size(), -1);
    tape_release_.assign(graph_.nodes().size(), -1);
    for (size_t n = 0; n < graph_.nodes().size(); ++n) {
      for (int value : graph_.nodes()[n].inputs)
        last[static_cast<size_t>(value)] = static_cast<int>(n);
    }
    for (int value : graph_.escaping()) {
      last[static_cast<size_t>(value)] = static_cast<int>(graph_.nodes().size());
    }
    if (options_.tape_keeps_inputs) {
      // Autograd's tape keeps every input of an op that saves its inputs
      // until the op's backward, whether its gradient reads them or not;
      // that backward comes where the op's outputs are last read (its
      // gradient and its readers' gradients read them there).
      const int forward_end = forward_end_node();
      for (int n = forward_end; n >= 0; --n) {
        const graph::Node& node = graph_.nodes()[static_cast<size_t>(n)];
        if (!node.op->saves_inputs || !node.op->differentiable || node.op->kind == OpKind::view) {
          continue;
        }
        int backward = -1;
        for (int value : node.outputs)
          backward = std::max(backward, last[static_cast<size_t>(value)]);
        for (int value : node.inputs) {
          int& end = last[static_cast<size_t>(value)];
          end = std::max(end, backward);
        }
        tape_release_[static_cast<size_t>(n)] = backward;
      }
    }
    // Backwards, so a view of a view passes its use on to the root.
    for (size_t n = graph_.nodes().size(); n-- > 0;) {
      const graph::Node& node = graph_.nodes()[n];
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        const int base = aliased_input(node, o);
        if (base < 0) continue;
        int& end = last[static_cast<size_t>(base)];
        end = std::max(end, last[static_cast<size_t>(node.outputs[o])]);
      }
    }
    deaths_.clear();
    for (size_t v = 0; v < last.size(); ++v) {
      if (last[v] >= 0) deaths_.emplace_back(last[v], static_cast<int>(v));
    }
    std::sort(deaths_.begin(), deaths_.end());
  }

  // The node that makes the step's first output (the loss): where the
  // forward pass ends (-1: none).
  int forward_end_node() const {
    const std::vector<int>& outputs = graph_.outputs();
    return outputs.empty() || graph_.value(outputs[0]).kind != graph::ValueKind::node
               ? -1
               : graph_.value(outputs[0]).node;
  }

  // The input whose memory output `o` of `node` is (-1: new memory).
  static int aliased_input(const graph::Node& node, size_t o) {
    if (node.op->kind == OpKind::view) return node.inputs.empty() ? -1 : node.inputs[0];
    if (o < node.op->writes.size()) {
      return node.inputs.at(static_cast<size_t>(node.op->writes[o]));
    }
    return -1;
  }

  // What the device's allocator reserves for a tensor of `meta` laid out
  // as `sbp` on each rank (its size classes round requests up).
  double allocated_bytes(const TensorMeta& meta, const NdSbp& sbp) const {
    return options_.model.allocated_bytes(local_bytes(meta, mesh_, sbp));
  }

  // Which values are alive where the whole (unsplit) step peaks: the
  // memory the search weighs is theirs, split as each plan splits them.
  void find_peak() {
    const std::vector<int>& last = last_use_;
    const size_t count = graph_.nodes().size();
    std::vector<double> delta(count + 2, 0.0);
    auto bytes_of = [&](int value) {
      const TensorMeta& meta = graph_.value(value).meta;
      return static_cast<double>(numel(meta.shape)) * static_cast<double>(dtype_size(meta.dtype));
    };
    std::vector<std::pair<int, int>> spans(graph_.values().size(), {-1, -1});
    for (size_t n = 0; n < count; ++n) {
      const graph::Node& node = graph_.nodes()[n];
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        const int value = node.outputs[o];
        if (aliased_input(node, o) >= 0) continue;
        const int end = std::max(last[static_cast<size_t>(value)], static_cast<int>(n));
        spans[static_cast<size_t>(value)] = {static_cast<int>(n), end};
        delta[n] += bytes_of(value);
        delta[static_cast<size_t>(end) + 1] -= bytes_of(value);
      }
    }
    double live = 0;
    double peak = -1;
    int at = 0;
    for (size_t n = 0; n < count; ++n) {
      live += delta[n];
      if (live > peak) {
        peak = live;
        at = static_cast<int>(n);
      }
    }
    at_peak_.assign(graph_.values().size(), false);
    for (size_t v = 0; v < spans.size(); ++v) {
      at_peak_[v] = spans[v].first >= 0 && spans[v].first <= at && at <= spans[v].second;
    }
  }

  // A constant (full: zeros, ones) can be made in any layout: each rank
  // fills its own shard, as eager global code's zeros_like of a split
  // tensor does. Its op declares only broadcast (its kernel makes the
  // shape it is given), which would price every rank making all of it.
  std::vector<global::LayoutOption> constant_options(const graph::Node& node) const {
    const TensorMeta& meta = graph_.value(node.outputs.at(0)).meta;
    std::vector<global::LayoutOption> options;
    for (const NdSbp& sbp : layouts_of(meta.shape, mesh_)) {
      if (!global::splits_evenly(meta.shape, mesh_, sbp)) continue;
      global::LayoutOption option;
      for (int part : axis_parts(sbp)) option.choice.push_back(static_cast<size_t>(part));
      option.output_sbps = {sbp};
      const TensorMeta local{global::local_shape(meta.shape, mesh_, sbp, 0), meta.dtype,
                             meta.device};
      option.compute_seconds =
          options_.model.compute_seconds(op_cost(*node.op, {}, {local}, node.attrs), node.op->kind);
      options.push_back(std::move(option));
    }
    return options;
  }

  // With PlanOptions::fuse_elementwise: which values stay on chip, made
  // by an elementwise node and read only by the next kernel (an
  // elementwise, reduction or normalization node) that runs it inside.
  std::vector<bool> kept_on_chip() const {
    const graph::Graph& g = graph_;
    std::vector<bool> fused(g.values().size(), false);
    if (!options_.fuse_elementwise) return fused;
    std::vector<int> reader(g.values().size(), -1);  // the one reader, or -2 for several
    for (size_t n = 0; n < g.nodes().size(); ++n) {
      for (int value : g.nodes()[n].inputs) {
        int& r = reader[static_cast<size_t>(value)];
        r = r == -1 || r == static_cast<int>(n) ? static_cast<int>(n) : -2;
      }
    }
    for (int value : g.escaping()) reader[static_cast<size_t>(value)] = -2;
    auto pure = [](const graph::Node& node) {
      return node.op->writes.empty() && node.random_count == 0 && node.draw < 0;
    };
    for (const graph::Node& node : g.nodes()) {
      if (node.op->kind != OpKind::elementwise || !pure(node)) continue;
      for (int value : node.outputs) {
        const int r = reader[static_cast<size_t>(value)];
        if (r < 0) continue;
        const graph::Node& next = g.nodes()[static_cast<size_t>(r)];
        const OpKind kind = next.op->kind;
        fused[static_cast<size_t>(value)] =
            pure(next) && (kind == OpKind::elementwise || kind == OpKind::reduction ||
                           kind == OpKind::normalization);
      }
    }
    return fused;
  }

  void make_ops() {
    const graph::Graph& g = graph_;
    const std::vector<bool> on_chip = kept_on_chip();
    for (size_t n = 0; n < g.nodes().size(); ++n) {
      const graph::Node& node = g.nodes()[n];
      TESSERA_CHECK(!node.fused, "[planner] plans the traced step, before fusion");
      MetaVector metas;
      for (int value : node.inputs) metas.push_back(g.value(value).meta);
      OpNode op;
      op.node = static_cast<int>(n);
      op.options = global::layout_options(*node.op, metas, node.attrs, mesh_, options_.model);
      if (node.inputs.empty() && node.op->name == "full") op.options = constant_options(node);
      TESSERA_CHECK(!op.options.empty(), "[planner] ", node.op->name, " has no layout option on ",
                    placement_str(mesh_), " for ", global::layouts_str(metas));
      std::vector<double> cost, memory;
      std::vector<std::vector<int>> parts;  // per option: its signature on each mesh axis
      for (global::LayoutOption& option : op.options) {
        double constants = 0;
        double bytes = 0;
        double on_chip_bytes = 0;  // not moved through memory (fuse_elementwise)
        MetaVector local_in, local_out;
        for (size_t i = 0; i < node.inputs.size(); ++i) {
          const graph::Value& value = g.value(node.inputs[i]);
          local_in.push_back({global::local_shape(value.meta.shape, mesh_, option.input_sbps[i], 0),
                              value.meta.dtype, value.meta.device});
          if (value.kind == graph::ValueKind::constant) {
            constants +=
                boxing(value.meta, NdSbp::broadcast(mesh_.ndim()), option.input_sbps[i]).seconds;
          }
          if (on_chip[static_cast<size_t>(node.inputs[i])]) {
            on_chip_bytes += local_bytes(value.meta, mesh_, option.input_sbps[i]);
          }
        }
        bool runs_inside_next = false;
        for (size_t o = 0; o < node.outputs.size(); ++o) {
          const TensorMeta& meta = g.value(node.outputs[o]).meta;
          local_out.push_back({global::local_shape(meta.shape, mesh_, option.output_sbps[o], 0),
                               meta.dtype, meta.device});
          if (at_peak_[static_cast<size_t>(node.outputs[o])] &&
              gradient_value(node.outputs[o]) < 0) {
            bytes += local_bytes(meta, mesh_, option.output_sbps[o]);
          }
          if (on_chip[static_cast<size_t>(node.outputs[o])]) {
            on_chip_bytes += local_bytes(meta, mesh_, option.output_sbps[o]);
            runs_inside_next = true;
          }
        }
        const OpCost work = op_cost(*node.op, local_in, local_out, node.attrs);
        if (on_chip_bytes > 0) {
          // The kernel moves only the rest; one that runs inside the next
          // kernel costs no launch of its own.
          option.compute_seconds = options_.model.compute_seconds(
              {work.flops, std::max(0.0, work.bytes - on_chip_bytes)}, node.op->kind);
          if (runs_inside_next) {
            option.compute_seconds =
                std::max(0.0, option.compute_seconds -
                                  options_.model.compute(node.op->kind).seconds_per_call);
          }
        }
        op.flops.push_back(work.flops);
        op.constant_boxing.push_back(constants);
        cost.push_back(option.compute_seconds + constants);
        memory.push_back(bytes);
        parts.emplace_back(option.choice.begin(), option.choice.end());
      }
      const int id = cost_.add_node(node.op->name + " %" + std::to_string(n), std::move(cost),
                                    std::move(memory), std::move(parts));
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        choice_of_value_[static_cast<size_t>(node.outputs[o])] = id;
        output_of_value_[static_cast<size_t>(node.outputs[o])] = static_cast<int>(o);
      }
      ops_.push_back(std::move(op));
    }
  }

  int gradient_value(int value) const {
    return gradient_source_.empty() ? -1 : gradient_source_[static_cast<size_t>(value)];
  }

  // `weight`: how much the search weighs the passage per run of the step.
  size_t add_passage(int value, int to, const std::vector<NdSbp>& targets, bool in_place,
                     double weight = 1) {
    const std::vector<NdSbp> from = producer_layouts(value);
    const TensorMeta& meta = graph_.value(value).meta;
    Passage passage;
    passage.from = choice_of_value_[static_cast<size_t>(value)];
    passage.to = to;
    for (const NdSbp& source : from) {
      for (const NdSbp& target : targets) {
        passage.seconds.push_back(in_place ? (source == target ? 0.0 : kInfeasible)
                                           : boxing(meta, source, target).seconds);
      }
    }
    std::vector<double> weighed = passage.seconds;
    if (weight != 1) {
      for (double& seconds : weighed) {
        if (seconds < kInfeasible / 2) seconds *= weight;
      }
    }
    cost_.add_edge(passage.from, passage.to, std::move(weighed));
    passages_.push_back(std::move(passage));
    return passages_.size() - 1;
  }

  void make_edges() {
    gradient_value_.assign(sources_.size(), -1);
    const graph::Graph& g = graph_;
    for (size_t k = 0; k < ops_.size(); ++k) {
      OpNode& op = ops_[k];
      const graph::Node& node = g.nodes()[static_cast<size_t>(op.node)];
      const int id = static_cast<int>(sources_.size() + k);
      op.boxed.resize(node.inputs.size());
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const int value = node.inputs[i];
        if (g.value(value).kind == graph::ValueKind::constant) continue;
        std::vector<NdSbp> targets;
        for (const global::LayoutOption& option : op.options) {
          targets.push_back(option.input_sbps[i]);
        }
        const bool in_place = std::find(node.op->writes.begin(), node.op->writes.end(),
                                        static_cast<int>(i)) != node.op->writes.end();
        TESSERA_CHECK(choice_of_value_[static_cast<size_t>(value)] != id, "[planner] node %",
                      op.node, " reads its own output");
        op.boxed[i].push_back(add_passage(value, id, targets, in_place));
      }
    }
    for (const graph::GradWrite& write : g.grad_writes()) {
      if (write.value < 0) continue;
      const int source = gradient_value(write.value);
      const graph::Value& value = g.value(write.value);
      TESSERA_CHECK(source >= 0 && value.kind == graph::ValueKind::node,
                    "[planner] a gradient the step writes is not made by one of its ops");
      const size_t passage =
          add_passage(write.value, source, sources_[static_cast<size_t>(source)].layouts, false,
                      1 / static_cast<double>(options_.micro_batches));
      gradients_.push_back({value.node, passage, write.value});
      gradient_value_[static_cast<size_t>(source)] = write.value;
    }
  }

  double edge_seconds(const std::vector<size_t>& passages, const std::vector<int>& choice,
                      int to) const {
    double total = 0;
    for (size_t index : passages) {
      const Passage& passage = passages_[index];
      const size_t cols = cost_.strategies(to);
      total +=
          passage.seconds[static_cast<size_t>(choice[static_cast<size_t>(passage.from)]) * cols +
                          static_cast<size_t>(choice[static_cast<size_t>(to)])];
    }
    return total;
  }

  double boxing_into(int op, const std::vector<int>& choice) const {
    const int id = static_cast<int>(sources_.size()) + op;
    double total = 0;
    for (const std::vector<size_t>& passages : ops_[static_cast<size_t>(op)].boxed) {
      total += edge_seconds(passages, choice, id);
    }
    return total + ops_[static_cast<size_t>(op)]
                       .constant_boxing[static_cast<size_t>(choice[static_cast<size_t>(id)])];
  }

  double gradient_seconds(const Gradient& gradient, const std::vector<int>& choice) const {
    return edge_seconds({gradient.passage}, choice, passages_[gradient.passage].to);
  }

  // The best other strategy for node `v` with every other node kept, and
  // how much more the objective would be.
  std::optional<std::pair<size_t, double>> runner_up(int v, const std::vector<int>& choice,
                                                     double memory_weight) const {
    const ChoiceNode& node = cost_.nodes()[static_cast<size_t>(v)];
    if (node.cost.size() < 2) return std::nullopt;
    if (incident_.empty()) {
      incident_.resize(cost_.nodes().size());
      for (const ChoiceEdge& edge : cost_.edges()) {
        incident_[static_cast<size_t>(edge.from)].push_back(&edge);
        incident_[static_cast<size_t>(edge.to)].push_back(&edge);
      }
    }
    auto local = [&](size_t s) {
      double total = node.cost[s] + memory_weight * node.memory[s];
      for (const ChoiceEdge* incident : incident_[static_cast<size_t>(v)]) {
        const ChoiceEdge& edge = *incident;
        const size_t cols = cost_.strategies(edge.to);
        if (edge.from == v) {
          total += edge.cost[s * cols + static_cast<size_t>(choice[static_cast<size_t>(edge.to)])];
        } else if (edge.to == v) {
          total +=
              edge.cost[static_cast<size_t>(choice[static_cast<size_t>(edge.from)]) * cols + s];
        }
      }
      return total;
    };
    const auto chosen = static_cast<size_t>(choice[static_cast<size_t>(v)]);
    const double here = local(chosen);
    std::optional<std::pair<size_t, double>> best;
    for (size_t s = 0; s < node.cost.size(); ++s) {
      if (s == chosen) continue;
      const double gap = local(s) - here;
      if (gap >= kInfeasible / 2) continue;
      if (!best || gap < best->second) best = std::make_pair(s, gap);
    }
    return best;
  }

  const graph::Graph& graph_;
  const PlanOptions& options_;
  Placement mesh_;
  CostGraph cost_;
  std::vector<Source> sources_;
  std::vector<OpNode> ops_;
  std::vector<Passage> passages_;
  std::vector<Gradient> gradients_;
  std::vector<int> choice_of_value_;  // value id -> its producer's choice node
  std::vector<int> output_of_value_;  // value id -> which output of it
  std::vector<int> gradient_source_;  // value id -> the source it is the gradient of
  std::vector<int> gradient_memory_;  // value id -> the source whose gradient its memory is, or -1
  std::vector<int> gradient_value_;   // source -> the value written as its gradient, or -1
  std::vector<int> last_use_;          // find_lifetimes
  std::vector<std::pair<int, int>> deaths_;
  std::vector<int> tape_release_;
  std::vector<bool> at_peak_;
  mutable std::unordered_map<std::string, global::BoxingPlan> boxing_cache_;
  // Per choice node, its edges (built once the graph is complete, for runner-ups).
  mutable std::vector<std::vector<const ChoiceEdge*>> incident_;
};

}  // namespace

std::string seconds_str(double seconds) {
  const double ms = seconds * 1e3;
  char text[32];
  if (std::abs(ms) >= 100) {
    std::snprintf(text, sizeof text, "%.0f ms", ms);
  } else if (std::abs(ms) >= 0.1) {
    std::snprintf(text, sizeof text, "%.3g ms", ms);
  } else {
    std::snprintf(text, sizeof text, "%.3g us", ms * 1e3);
  }
  return text;
}

std::string mib_str(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", bytes / kMiB);
  return text;
}

CostGraph cost_graph_of(const graph::Graph& graph, const PlanOptions& options,
                        const nn::Module::NamedTensors& names) {
  return Problem(graph, options, names).cost_graph();
}

Plan plan(const graph::Graph& graph, const PlanOptions& options,
          const nn::Module::NamedTensors& names) {
  const auto start = std::chrono::steady_clock::now();
  TESSERA_CHECK(options.memory_budget >= 0 && std::isfinite(options.memory_budget),
                "[planner] memory_budget must be bytes per rank (0: no limit), got ",
                options.memory_budget);
  Problem problem(graph, options, names);
  // Data parallelism (what is not pinned) is one start of the search, so
  // the plan is never predicted slower than it.
  std::vector<int> data_parallel;
  if (options.mesh.size() > 1) {
    PlanOptions pinned = options;
    for (const auto& [name, sbp] : problem.data_parallel_pins()) pinned.pinned.emplace(name, sbp);
    const Problem start(graph, pinned, names);
    SearchOptions quick = options.search;  // a start: local search and branch and bound suffice
    quick.ilp_seconds = options.search.ilp_seconds / 4;
    data_parallel = problem.choice_from(start, solve(start.cost_graph(), quick).choice);
  }
  auto search = [&](double weight) {
    SearchOptions search = options.search;
    search.memory_weight = weight;
    if (!data_parallel.empty()) search.starts.push_back(data_parallel);
    return solve(problem.cost_graph(), search);
  };
  Solution solution = search(0);
  double weight = 0;
  const double budget = options.memory_budget;
  if (budget > 0 && problem.predict(solution.choice).peak_bytes > budget) {
    // Weigh memory more until the plan fits, then back off to the
    // lightest weight that still fits (the fastest such plan).
    double low = 0;
    double high = 1e-15;
    Solution fitting;
    bool found = false;
    for (; high <= 1e3; high *= 16) {
      Solution trial = search(high);
      if (problem.predict(trial.choice).peak_bytes <= budget) {
        fitting = trial;
        found = true;
        break;
      }
      low = high;
      solution = trial;  // the lightest so far, for the message
    }
    if (!found) {
      const StepPrediction least = problem.predict(solution.choice);
      throw BudgetError(str_cat(
          "[planner] no plan fits ", mib_str(budget), " per rank on ", placement_str(options.mesh),
          ". The smallest plan found needs ", mib_str(least.peak_bytes), ": ",
          mib_str(least.state_bytes), " of parameters, gradients and optimizer state (largest: ",
          problem.largest_state(solution.choice), ") and ", mib_str(least.activation_bytes),
          " of activations at the peak. Give a budget of at least ", mib_str(least.peak_bytes),
          ", or more ranks"));
    }
    double fit_weight = high;
    for (int round = 0; round < 10 && low > 0; ++round) {
      const double middle = std::sqrt(low * fit_weight);
      Solution trial = search(middle);
      if (problem.predict(trial.choice).peak_bytes <= budget) {
        fitting = trial;
        fit_weight = middle;
      } else {
        low = middle;
      }
    }
    solution = fitting;
    weight = fit_weight;
  }
  // The search minimises summed costs, communication as if none overlapped;
  // the prediction hides gradient traffic behind the backward. Where data
  // parallelism (the start) is predicted faster and fits, it is the plan.
  // (Per step of options.micro_batches micro-batches: the gradients are
  // reduced and applied once.)
  bool kept_data_parallel = false;
  if (!data_parallel.empty() && data_parallel != solution.choice) {
    auto per_step = [&](const StepPrediction& p) {
      return static_cast<double>(options.micro_batches) * p.micro_batch_seconds +
             p.gradient_tail_seconds + p.update_seconds;
    };
    const StepPrediction found = problem.predict(solution.choice);
    const StepPrediction start_prediction = problem.predict(data_parallel);
    if ((budget <= 0 || start_prediction.peak_bytes <= budget) &&
        per_step(start_prediction) < per_step(found)) {
      solution.choice = data_parallel;
      solution.cost = problem.cost_graph().cost(data_parallel, weight);
      solution.exact = false;
      kept_data_parallel = true;
    }
  }
  Plan result = problem.make_plan(solution, weight);
  result.kept_data_parallel = kept_data_parallel;
  result.search_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

const NdSbp& Plan::sbp_of(const std::string& name) const {
  for (const TensorChoice& tensor : tensors) {
    if (tensor.name == name) return tensor.sbp;
  }
  std::string known;
  for (size_t k = 0; k < tensors.size() && k < 12; ++k) {
    known += (k ? ", " : "") + tensors[k].name;
  }
  TESSERA_CHECK(false, "[planner] the plan has no tensor named '", name, "'; it has ", known,
                tensors.size() > 12 ? ", ..." : "");
  return tensors.front().sbp;  // unreachable
}

std::string Plan::search_result() const {
  if (exact) return "proven optimal";
  if (lower_bound <= 0) return "best found";
  char text[96];
  std::snprintf(text, sizeof text, "best found, at most %.1f%% above the optimum",
                100.0 * (objective - lower_bound) / lower_bound);
  return text;
}

std::string Plan::explain() const {
  const StepPrediction& p = prediction;
  std::string text =
      str_cat("Plan for ", placement_str(mesh), ": ", tensors.size(), " tensors and ", ops.size(),
              " ops, searched in ", seconds_str(search_seconds), " (", choice_nodes, " choices, ",
              remaining, " left after elimination, ", search_result(), ")\n");
  if (kept_data_parallel) {
    text +=
        "Data parallelism kept: the search's answer, which counts gradient traffic as if "
        "none overlapped the backward, was predicted slower\n";
  }
  text += str_cat("Predicted step per rank: ", seconds_str(p.step_seconds), " = compute ",
                  seconds_str(p.compute_seconds), " + exposed communication ",
                  seconds_str(p.exposed_seconds), " (of ", seconds_str(p.communication_seconds),
                  " communication)\n");
  text += str_cat("Predicted peak memory per rank: ", mib_str(p.peak_bytes), " = parameters, ",
                  "gradients and optimizer state ", mib_str(p.state_bytes), " + activations ",
                  mib_str(p.activation_bytes));
  if (memory_budget > 0) text += str_cat(" (budget ", mib_str(memory_budget), ")");
  text += "\nTensors (layout, runner-up, how much slower the step would be with it):\n";
  for (const TensorChoice& tensor : tensors) {
    text +=
        str_cat("  ", tensor.name, " ", graph::meta_str(tensor.meta), ": ", nd_sbp_str(tensor.sbp));
    if (tensor.runner_up) {
      text += str_cat("  runner-up ", nd_sbp_str(*tensor.runner_up), " +",
                      seconds_str(tensor.gap_seconds));
    }
    text += "\n";
  }
  text += "Ops (signature, compute + boxing into it, runner-up):\n";
  for (const OpChoice& op : ops) {
    text +=
        str_cat("  %", op.node, " ", op.op, " ", sbps_str(op.inputs), " -> ", sbps_str(op.outputs),
                "  ", seconds_str(op.compute_seconds), " + ", seconds_str(op.boxing_seconds));
    if (op.runner_up_inputs) {
      text += str_cat("  runner-up ", sbps_str(*op.runner_up_inputs), " -> ",
                      sbps_str(op.runner_up_outputs), " +", seconds_str(op.gap_seconds));
    }
    text += "\n";
  }
  return text;
}

std::string Plan::dot() const {
  static const char* palette[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3",
                                  "#fdb462", "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd"};
  std::map<std::string, size_t> colours;
  auto colour = [&](const NdSbp& sbp) {
    const std::string key = nd_sbp_str(sbp);
    auto found = colours.find(key);
    if (found == colours.end()) found = colours.emplace(key, colours.size() % 10).first;
    return palette[found->second];
  };
  std::string text = "digraph plan {\n  node [shape=box, style=filled, fontname=monospace];\n";
  for (size_t k = 0; k < tensors.size(); ++k) {
    text +=
        str_cat("  t", k, " [shape=ellipse, label=\"", tensors[k].name, "\\n",
                nd_sbp_str(tensors[k].sbp), "\", fillcolor=\"", colour(tensors[k].sbp), "\"];\n");
  }
  for (size_t k = 0; k < ops.size(); ++k) {
    const OpChoice& op = ops[k];
    const NdSbp shown = op.outputs.empty() ? NdSbp::broadcast(mesh.ndim()) : op.outputs[0];
    text += str_cat("  n", k, " [label=\"", op.op, "\\n-> ", sbps_str(op.outputs),
                    "\", fillcolor=\"", colour(shown), "\"];\n");
    for (const auto& [from, unused] : op_inputs[k]) {
      (void)unused;
      if (from < 0) continue;
      const auto index = static_cast<size_t>(from);
      text += index < tensors.size() ? str_cat("  t", index, " -> n", k, ";\n")
                                     : str_cat("  n", index - tensors.size(), " -> n", k, ";\n");
    }
  }
  text += "  subgraph cluster_legend { label=\"layouts\";\n";
  for (const auto& [name, index] : colours) {
    text += str_cat("    \"", name, "\" [fillcolor=\"", palette[index], "\"];\n");
  }
  return text + "  }\n}\n";
}

std::vector<global::ScriptedSignature> Plan::signatures() const {
  std::vector<global::ScriptedSignature> steps;
  // A factory (no inputs) takes the layout its caller gives it.
  for (const OpChoice& op : ops) {
    if (!op.inputs.empty()) steps.push_back({op.def, op.inputs, op.outputs, op.shapes});
  }
  return steps;
}

std::string Plan::to_json() const {
  nlohmann::json root;
  root["mesh"] = mesh.mesh();
  nlohmann::json layouts = nlohmann::json::object();
  for (const TensorChoice& tensor : tensors) {
    std::vector<std::string> axes;
    for (const Sbp& sbp : tensor.sbp.sbps()) axes.push_back(sbp_str(sbp));
    layouts[tensor.name] = axes;
  }
  root["tensors"] = layouts;
  return root.dump(2) + "\n";
}

Sbp parse_sbp(const std::string& text) {
  if (text == "B") return Sbp::broadcast();
  if (text == "P(sum)" || text == "P") return Sbp::partial_sum();
  if (text == "P(max)") return Sbp::partial_max();
  if (text == "P(min)") return Sbp::partial_min();
  if (text.size() > 3 && text.rfind("S(", 0) == 0 && text.back() == ')') {
    const std::string digits = text.substr(2, text.size() - 3);
    const bool numeric =
        !digits.empty() && digits.size() < 10 &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (numeric) return Sbp::split(std::stoll(digits));
  }
  TESSERA_CHECK(false, "[planner] '", text,
                "' is not a layout; write B, S(dim), P(sum), P(max) or P(min)");
  return Sbp::broadcast();  // unreachable
}

std::map<std::string, NdSbp> pins_from_json(const std::string& text, int mesh_ndim) {
  const nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  TESSERA_CHECK(!root.is_discarded() && root.is_object() && root.contains("tensors") &&
                    root["tensors"].is_object(),
                "[planner] a plan file is a JSON object with an object 'tensors'");
  std::map<std::string, NdSbp> pins;
  for (const auto& [name, axes] : root["tensors"].items()) {
    TESSERA_CHECK(axes.is_array() && static_cast<int>(axes.size()) == mesh_ndim,
                  "[planner] tensor '", name, "' needs a list of ", mesh_ndim,
                  " layouts (one per mesh axis)");
    std::vector<Sbp> sbps;
    for (const nlohmann::json& axis : axes) {
      TESSERA_CHECK(axis.is_string(), "[planner] tensor '", name, "': layouts are strings");
      sbps.push_back(parse_sbp(axis.get<std::string>()));
    }
    pins.emplace(name, NdSbp(sbps));
  }
  return pins;
}

}  // namespace tessera::planner
