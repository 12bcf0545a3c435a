#pragma once

// The graph IR (DESIGN §5, graph mode): what tracing an eager function
// records. Values are typed by a TensorMeta (shape, dtype, device, and for
// global values placement and SBP); nodes are op calls with their attrs.
// Every value has one producer: a graph input, a captured variable (a
// parameter or buffer the function read), a constant (a number it was
// given) or a node's output. An in-place write makes a new value, so the
// IR is SSA; the executor writes it back to the variable's tensor.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/ops/op.h"
#include "tessera/ops/tile_kernels.h"

namespace tessera::graph {

enum class ValueKind : uint8_t { input, variable, constant, node };
const char* value_kind_name(ValueKind kind);

struct Value {
  TensorMeta meta;
  ValueKind kind = ValueKind::node;
  int node = -1;   // the producing node, for ValueKind::node
  int output = 0;  // which of its outputs
  // For an input or variable that is this rank's shard of a global tensor:
  // that tensor's meta (logical shape, placement, SBP). A global function
  // traces into local ops and collectives on shards, as every rank runs it.
  TensorMeta global;
};

struct FusedProgram;

struct Node {
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<int> inputs;   // value ids
  std::vector<int> outputs;  // value ids
  // For a random op: the counters it reserves from the default generator.
  // Each run reserves them afresh, so every run draws new numbers.
  uint64_t random_count = 0;
  // For a random op: which of the run's draws its seed and offset are. A
  // node that replays an earlier draw (dropout's gradient regenerates the
  // forward's mask) has the earlier node's draw and a random_count of 0.
  int draw = -1;
  // For a fused elementwise node (passes/elementwise_fusion.cpp): the
  // chain of ops it runs tile by tile; `op` is then fused_elementwise_op().
  std::shared_ptr<const FusedProgram> fused;
  // Rewrites of attrs the host may change between runs (an optimizer's
  // learning rate), applied before each run.
  std::vector<std::function<void(Attrs&)>> refresh;
};

// What a fused elementwise node runs: `steps` in order over each tile of
// its output shape. Operand k < num_inputs is the node's input k; operand
// num_inputs + j is step j's value. `results[o]` is the step whose value is
// the node's output o.
struct FusedStep {
  const OpDef* op = nullptr;
  TileKernel kernel = nullptr;  // the op's tile kernel (ops/tile_kernels.h)
  Attrs attrs;
  std::vector<int> operands;
};
struct FusedProgram {
  int num_inputs = 0;
  std::vector<FusedStep> steps;
  std::vector<int> results;
  // Set by plan_program (graph/fused.h): the scratch tile each step writes
  // (-1: a result, written to the output), reused once no later step reads
  // it; and the steps as the backend's chain kernel runs them, or none
  // (ops/tile_kernels.h).
  std::vector<int> scratch_slot;
  int num_slots = 0;
  std::vector<ChainStep> chain;
};

// The op a fused node is printed as. It is not registered and has no
// kernel: the executor runs the node's program (graph/fused.h).
const OpDef& fused_elementwise_op();

// A captured tensor: the variable value it enters the graph as, and the
// tensor itself (shared, so the graph reads and writes the caller's).
struct Variable {
  int value = -1;
  Tensor tensor;
  // When defined, the variable is this leaf's .grad as it is when the graph
  // runs (backward replaces a leaf's gradient tensor each step), and
  // `tensor` is the gradient seen while tracing.
  Tensor grad_of;
};

// A tensor the graph holds (an op's operand the trace saw as a number, or a
// value the passes folded).
struct Constant {
  int value = -1;
  Tensor tensor;
  // For a 0-d floating constant folded from `full`: the host's double before
  // it was rounded to the dtype. A dynamic dim's template fits this number,
  // which follows the size exactly where the rounded one does not.
  std::optional<double> exact;
};

// A leaf's .grad that a run sets, as the traced backward did: to the value
// `value`, or (value -1) to none.
struct GradWrite {
  Tensor leaf;
  int value = -1;
  // For a global leaf: the layout its gradient had (the value is the shard).
  TensorMeta global;
};

// Host-side state the graph depends on (recorded by record_host_effect and
// record_guard while tracing): effects a run repeats, and guards that say
// what changed once the graph no longer matches the host.
struct HostState {
  std::vector<std::function<void()>> effects;
  std::vector<std::function<std::string()>> guards;
};

class Graph {
 public:
  // `meta` is the value's own (for a shard of a global input, the shard's);
  // `global` the global tensor's it is a shard of, if any.
  int add_input(const TensorMeta& meta, const TensorMeta& global = {});
  // A global tensor enters as its shard on this rank.
  int add_variable(const Tensor& tensor, const Tensor& grad_of = Tensor());
  int add_constant(const Tensor& tensor, std::optional<double> exact = std::nullopt);
  // Appends a node and one new value per output meta; returns the node id.
  int add_node(const OpDef& op, const Attrs& attrs, std::vector<int> inputs,
               const MetaVector& outputs, uint64_t random_count = 0, int draw = -1);
  // Appends a fused elementwise node running `program` (its attrs name the
  // ops, for printing).
  int add_fused_node(std::shared_ptr<const FusedProgram> program, std::vector<int> inputs,
                     const MetaVector& outputs);
  // `globals[i]`, when given and global, is the layout output i is a shard
  // of: a run hands the caller a global tensor around it.
  void set_outputs(std::vector<int> outputs, std::vector<TensorMeta> globals = {});
  void add_grad_write(const Tensor& leaf, int value, const TensorMeta& global = {});
  void add_refresh(int node, std::function<void(Attrs&)> refresh);
  HostState& host() { return host_; }

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }
  // Per output: the global layout it is a shard of (an empty meta if local).
  const std::vector<TensorMeta>& output_globals() const { return output_globals_; }
  // Whether any input, variable or output is a shard of a global tensor.
  bool is_global() const;
  const std::vector<Variable>& variables() const { return variables_; }
  const std::vector<Constant>& constants() const { return constants_; }
  const std::vector<GradWrite>& grad_writes() const { return grad_writes_; }
  const HostState& host() const { return host_; }
  const Value& value(int id) const { return values_.at(static_cast<size_t>(id)); }
  // How many draws from the generator a run makes (Node::draw).
  int num_draws() const { return num_draws_; }
  // The values a caller sees after a run: the outputs and the gradients
  // written to leaves. Passes must keep them, and keep them apart.
  std::vector<int> escaping() const;

  // The IR as text, one node per line:
  //   %3: f32[32, 128] = matmul(%0, %1)
  std::string str() const;
  // A Graphviz picture: values as edges, nodes as boxes.
  std::string dot() const;

 private:
  int add_value(Value value);

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
  std::vector<TensorMeta> output_globals_;
  std::vector<Variable> variables_;
  std::vector<Constant> constants_;
  std::vector<GradWrite> grad_writes_;
  HostState host_;
  int num_draws_ = 0;
};

// "f32[32, 128]", with the device when it is not the CPU and the layout of
// a global value.
std::string meta_str(const TensorMeta& meta);

// A tensor's part on this rank: a global tensor's shard, a local tensor
// itself.
Tensor shard_of(const Tensor& tensor);
// `shard` wrapped as the global tensor of `global`'s layout, or `shard`
// itself when `global` is not global.
Tensor wrap_shard(const Tensor& shard, const TensorMeta& global);

}  // namespace tessera::graph
