#pragma once

// The graph IR (DESIGN §5, graph mode): what tracing an eager function
// records. Values are typed by a TensorMeta (shape, dtype, device, and for
// global values placement and SBP); nodes are op calls with their attrs.
// Every value has one producer: a graph input, a captured variable (a
// parameter or buffer the function read), a constant (a number it was
// given) or a node's output. An in-place write makes a new value, so the
// IR is SSA; the executor writes it back to the variable's tensor.

#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/ops/op.h"

namespace tessera::graph {

enum class ValueKind : uint8_t { input, variable, constant, node };
const char* value_kind_name(ValueKind kind);

struct Value {
  TensorMeta meta;
  ValueKind kind = ValueKind::node;
  int node = -1;   // the producing node, for ValueKind::node
  int output = 0;  // which of its outputs
};

struct Node {
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<int> inputs;   // value ids
  std::vector<int> outputs;  // value ids
  // For a random op: the counters it reserves from the default generator.
  // Each run reserves them afresh, so every run draws new numbers.
  uint64_t random_count = 0;
};

// A captured tensor: the variable value it enters the graph as, and the
// tensor itself (shared, so the graph reads and writes the caller's).
struct Variable {
  int value = -1;
  Tensor tensor;
};

class Graph {
 public:
  int add_input(const TensorMeta& meta);
  int add_variable(const Tensor& tensor);
  int add_constant(const Tensor& tensor);
  // Appends a node and one new value per output meta; returns the node id.
  int add_node(const OpDef& op, const Attrs& attrs, std::vector<int> inputs,
               const MetaVector& outputs, uint64_t random_count = 0);
  void set_outputs(std::vector<int> outputs) { outputs_ = std::move(outputs); }

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }
  const std::vector<Variable>& variables() const { return variables_; }
  const std::vector<std::pair<int, Tensor>>& constants() const { return constants_; }
  const Value& value(int id) const { return values_.at(static_cast<size_t>(id)); }

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
  std::vector<Variable> variables_;
  std::vector<std::pair<int, Tensor>> constants_;
};

// "f32[32, 128]", with the device when it is not the CPU and the layout of
// a global value.
std::string meta_str(const TensorMeta& meta);

}  // namespace tessera::graph
