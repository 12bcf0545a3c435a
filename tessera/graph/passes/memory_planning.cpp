#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>

#include "tessera/core/error.h"
#include "tessera/graph/ir.h"
#include "tessera/graph/passes/passes.h"
#include "tessera/ops/tile_kernels.h"
#include "tessera/ops/workspace_region.h"

namespace tessera::graph {

namespace {

constexpr int64_t kAlignment = 64;
static_assert(kAlignment % kLentAlignment == 0,
              "a kernel's workspace in the arena starts where its Workspace may take buffers");

int64_t aligned(int64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

struct Interval {
  int value;  // -1: the workspace of node `first`
  int64_t bytes;
  int first, last;  // node indices, inclusive
  // Values written over this one in place, sharing its memory.
  std::vector<int> in_place = {};
};

// Whether the node may write its one output over an input of the same
// shape and dtype: every output element is computed from the inputs'
// elements at the same index only (or broadcast numbers). A fused program qualifies when its one
// result is its last step (no step reads an input after the output tile is
// written).
bool may_write_over_input(const Node& node) {
  if (node.outputs.size() != 1) return false;
  if (node.fused) {
    const FusedProgram& program = *node.fused;
    return program.results.size() == 1 &&
           program.results[0] == static_cast<int>(program.steps.size()) - 1;
  }
  // An op with a tile kernel (ops/tile_kernels.h) is such an op; other
  // elementwise-kind ops (as_strided, copy_slices) move elements around.
  return node.op->kind == OpKind::elementwise && node.op->writes.empty() && !node.op->view &&
         tile_kernel(node.op->name) != nullptr;
}

// The interval of an input node `n` (see may_write_over_input) can write
// its output over: one that dies at n, of the output's shape and dtype, and
// not also read through a view (x * x.t() would read overwritten
// elements); -1 if none.
int dying_input(const Graph& graph, const Node& node, int n, const std::vector<int>& root,
                const std::vector<int>& last_use, const std::vector<int>& interval_of) {
  if (!may_write_over_input(node)) return -1;
  const TensorMeta& out = graph.value(node.outputs[0]).meta;
  for (int input : node.inputs) {
    const int slot = interval_of[static_cast<size_t>(input)];
    const TensorMeta& dying = graph.value(input).meta;
    if (slot < 0 || last_use[static_cast<size_t>(input)] != n || dying.shape != out.shape ||
        dying.dtype != out.dtype) {
      continue;
    }
    const bool viewed_too = std::any_of(node.inputs.begin(), node.inputs.end(), [&](int other) {
      return other != input && root[static_cast<size_t>(other)] == input;
    });
    if (!viewed_too) return slot;
  }
  return -1;
}

// Places every interval at the lowest offset where it overlaps no placed
// interval that is live at the same time, visiting them in `order`.
int64_t place(const std::vector<Interval>& intervals, const std::vector<size_t>& order,
              std::vector<int64_t>& offsets) {
  // The blocks placed so far, kept by (offset, end): a walk over them meets
  // those live at the same time as the next interval in offset order.
  struct Block {
    int64_t begin, end;
    size_t interval;
  };
  std::vector<Block> placed;
  placed.reserve(order.size());
  int64_t peak = 0;
  for (size_t i : order) {
    const Interval& it = intervals[i];
    // Best fit: the smallest gap that holds it, else the end.
    int64_t best = -1, best_gap = 0, cursor = 0;
    for (const Block& block : placed) {
      const Interval& other = intervals[block.interval];
      if (other.first > it.last || it.first > other.last) continue;  // not live together
      const int64_t gap = block.begin - cursor;
      if (gap >= it.bytes && (best < 0 || gap < best_gap)) {
        best = cursor;
        best_gap = gap;
      }
      cursor = std::max(cursor, block.end);
    }
    offsets[i] = best >= 0 ? best : cursor;
    peak = std::max(peak, offsets[i] + it.bytes);
    const Block block{offsets[i], offsets[i] + it.bytes, i};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), block,
                                   [](const Block& a, const Block& b) {
                                     return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
                                   }),
                  block);
  }
  return peak;
}

}  // namespace

ValueRoots value_roots(const Graph& graph) {
  const auto& nodes = graph.nodes();
  ValueRoots roots;
  roots.root.resize(graph.values().size());
  std::iota(roots.root.begin(), roots.root.end(), 0);
  roots.last_use.assign(graph.values().size(), -1);
  auto root_of = [&](int value) -> int& { return roots.root[static_cast<size_t>(value)]; };
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    if (node.op->view && !node.fused) root_of(node.outputs[0]) = root_of(node.inputs[0]);
    for (size_t o = 0; o < node.op->writes.size() && !node.fused; ++o) {
      root_of(node.outputs[o]) = root_of(node.inputs.at(static_cast<size_t>(node.op->writes[o])));
    }
    for (int input : node.inputs) {
      int& last = roots.last_use[static_cast<size_t>(root_of(input))];
      last = std::max(last, static_cast<int>(n));
    }
  }
  return roots;
}

bool may_run_async(const Node& node) {
  if (node.op->kind != OpKind::collective) return false;
  const std::string& name = node.op->name;
  return name != "send" && name != "recv";
}

MemoryPlan plan_memory(const Graph& graph, int variant,
                       const std::vector<int64_t>& workspace_bytes) {
  const size_t num_values = graph.values().size();
  const auto& nodes = graph.nodes();
  TESSERA_CHECK(workspace_bytes.empty() || workspace_bytes.size() == nodes.size(),
                "[graph::plan_memory] ", workspace_bytes.size(), " workspace sizes for ",
                nodes.size(), " nodes");
  MemoryPlan plan;
  plan.offsets.assign(num_values, -1);
  plan.workspace_offsets.assign(nodes.size(), -1);

  // Every value's root: the value whose memory it is (a view's or an
  // in-place write's output is its input's memory).
  ValueRoots roots = value_roots(graph);
  std::vector<int>& root = roots.root;
  std::vector<int>& last_use = roots.last_use;
  std::vector<bool> escapes(num_values, false);
  // The outputs are the caller's: never in the arena. The gradients a run
  // leaves on parameters live in it to the end of the run (and until the
  // next run overwrites them), so their memory can be the activations'
  // that died before them, as eager's is; unless the graph adds to the last
  // run's gradients, which it would then read while writing.
  for (int id : graph.outputs()) escapes[static_cast<size_t>(root[static_cast<size_t>(id)])] = true;
  bool accumulates = false;
  for (const Variable& variable : graph.variables()) {
    accumulates = accumulates || variable.grad_of.defined();
  }
  for (const GradWrite& write : graph.grad_writes()) {
    if (write.value < 0) continue;
    const auto r = static_cast<size_t>(root[static_cast<size_t>(write.value)]);
    if (accumulates) {
      escapes[r] = true;
    } else {
      last_use[r] = static_cast<int>(nodes.size());
    }
  }
  // An out-of-place collective launched asynchronously reads its inputs
  // until it completes, which the executor makes sure of before the last
  // node that uses its outputs: its inputs' memory is kept until then.
  plan.collective_ready.assign(nodes.size(), -1);
  const int last_node = static_cast<int>(nodes.size()) - 1;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    if (!may_run_async(node) || !node.op->writes.empty()) continue;
    int ready = static_cast<int>(n);
    for (int output : node.outputs) {
      const auto r = static_cast<size_t>(root[static_cast<size_t>(output)]);
      ready = std::max(ready, escapes[r] ? last_node : std::min(last_use[r], last_node));
    }
    plan.collective_ready[n] = ready;
    for (int input : node.inputs) {
      int& last = last_use[static_cast<size_t>(root[static_cast<size_t>(input)])];
      last = std::max(last, ready);
    }
  }
  plan.roots = root;
  // What a collective writes in place (a gradient bucket) gets memory of its
  // own, made each run: the executor may launch the collective
  // asynchronously, and a pending collective makes every reader and writer
  // of its storage wait, so in the arena it would hold up the whole plan.
  for (const Node& node : nodes) {
    if (node.op->kind != OpKind::collective) continue;
    for (int w : node.op->writes) {
      escapes[static_cast<size_t>(
          root[static_cast<size_t>(node.inputs.at(static_cast<size_t>(w)))])] = true;
    }
  }
  plan.last_use = last_use;
  for (size_t v = 0; v < num_values; ++v) {
    if (escapes[v]) plan.last_use[v] = static_cast<int>(nodes.size());
  }

  // The arena holds the outputs of nodes that make new tensors on the CPU
  // and that no caller keeps: temporaries, and the gradients (above). With
  // `in_place`, an elementwise node whose input dies there writes its
  // output over it: the two share one interval.
  auto intervals_of = [&](bool in_place) {
    std::vector<Interval> intervals;
    std::vector<int> interval_of(num_values, -1);
    for (size_t n = 0; n < nodes.size(); ++n) {
      const Node& node = nodes[n];
      if ((node.op->view || !node.op->writes.empty()) && !node.fused) continue;
      if (node.op->kind == OpKind::collective) continue;
      for (int output : node.outputs) {
        const auto v = static_cast<size_t>(output);
        const TensorMeta& meta = graph.value(output).meta;
        if (root[v] != output || escapes[v] || meta.is_global() || meta.device != Device{})
          continue;
        const int64_t bytes =
            aligned(numel(meta.shape) * static_cast<int64_t>(dtype_size(meta.dtype)));
        if (bytes == 0) continue;
        const int last = std::min(std::max(last_use[v], static_cast<int>(n)),
                                  static_cast<int>(nodes.size()) - 1);
        const int reused =
            in_place ? dying_input(graph, node, static_cast<int>(n), root, last_use, interval_of)
                     : -1;
        if (reused >= 0) {
          Interval& shared = intervals[static_cast<size_t>(reused)];
          shared.last = std::max(shared.last, last);
          shared.in_place.push_back(output);
          interval_of[v] = reused;
          continue;
        }
        interval_of[v] = static_cast<int>(intervals.size());
        intervals.push_back({output, bytes, static_cast<int>(n), last});
      }
    }
    // A kernel's workspace lives while its node runs (next to its inputs
    // and outputs).
    for (size_t n = 0; n < workspace_bytes.size(); ++n) {
      if (workspace_bytes[n] > 0) {
        intervals.push_back(
            {-1, aligned(workspace_bytes[n]), static_cast<int>(n), static_cast<int>(n)});
      }
    }
    return intervals;
  };

  // Without and with in-place writes, several orders of placement, each
  // packed best fit; the smallest arena wins (ties: the earlier try).
  // Variant number: in_place * kOrders + the order's index.
  constexpr int kOrders = 4;
  TESSERA_CHECK(variant >= -1 && variant < 2 * kOrders, "[graph::plan_memory] variant ", variant,
                " is not -1 (try all) or a placement in [0, ", 2 * kOrders, ")");
  plan.arena_bytes = -1;
  plan.lower_bound = -1;
  for (const bool in_place : {false, true}) {
    if (variant >= 0 && (variant >= kOrders) != in_place) continue;
    const std::vector<Interval> intervals = intervals_of(in_place);
    // The bound no placement can beat: the most bytes live at one node.
    // (Each interval adds its bytes where it starts and takes them back
    // after its last node: a running sum is what is live at each node.)
    std::vector<int64_t> change(nodes.size() + 2, 0);
    for (const Interval& it : intervals) {
      change[static_cast<size_t>(it.first)] += it.bytes;
      change[static_cast<size_t>(it.last) + 1] -= it.bytes;
    }
    int64_t bound = 0, live = 0;
    for (int64_t bytes : change) bound = std::max(bound, live += bytes);
    plan.lower_bound = plan.lower_bound < 0 ? bound : std::min(plan.lower_bound, bound);
    if (plan.unplanned_bytes == 0) {  // in place or not, the same values
      for (const Interval& it : intervals) {
        plan.unplanned_bytes += it.bytes * static_cast<int64_t>(1 + it.in_place.size());
      }
    }
    auto span = [&](size_t i) { return int64_t{intervals[i].last - intervals[i].first + 1}; };
    const std::pair<const char*, std::function<bool(size_t, size_t)>> orders[kOrders] = {
        {"largest first",
         [&](size_t a, size_t b) { return intervals[a].bytes > intervals[b].bytes; }},
        {"in execution order", [](size_t a, size_t b) { return a < b; }},
        {"longest-lived first", [&](size_t a, size_t b) { return span(a) > span(b); }},
        {"largest bytes x lifetime first",
         [&](size_t a, size_t b) {
           return static_cast<double>(intervals[a].bytes) * static_cast<double>(span(a)) >
                  static_cast<double>(intervals[b].bytes) * static_cast<double>(span(b));
         }},
    };
    for (int o = 0; o < kOrders; ++o) {
      const int this_variant = (in_place ? kOrders : 0) + o;
      if (variant >= 0 && variant != this_variant) continue;
      const auto& [name, before] = orders[o];
      std::vector<size_t> order(intervals.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), before);
      std::vector<int64_t> offsets(intervals.size());
      const int64_t peak = place(intervals, order, offsets);
      if (plan.arena_bytes >= 0 && peak >= plan.arena_bytes) continue;
      plan.arena_bytes = peak;
      plan.heuristic = std::string(name) + ", best fit" + (in_place ? ", in place" : "");
      plan.variant = this_variant;
      std::fill(plan.offsets.begin(), plan.offsets.end(), -1);
      for (size_t i = 0; i < intervals.size(); ++i) {
        if (intervals[i].value < 0) {
          plan.workspace_offsets[static_cast<size_t>(intervals[i].first)] = offsets[i];
          continue;
        }
        plan.offsets[static_cast<size_t>(intervals[i].value)] = offsets[i];
        for (int value : intervals[i].in_place)
          plan.offsets[static_cast<size_t>(value)] = offsets[i];
      }
    }
  }
  return plan;
}

std::string MemoryPlan::str() const {
  auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  char text[256];
  std::snprintf(text, sizeof text,
                "arena %.2f MiB (%s); lower bound %.2f MiB (gap %.1f%%); without reuse %.2f MiB",
                mib(arena_bytes), heuristic.c_str(), mib(lower_bound),
                lower_bound > 0 ? 100.0 * static_cast<double>(arena_bytes - lower_bound) /
                                      static_cast<double>(lower_bound)
                                : 0.0,
                mib(unplanned_bytes));
  return text;
}

}  // namespace tessera::graph
