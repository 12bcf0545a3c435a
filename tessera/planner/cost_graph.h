#pragma once

// The planner's search problem with the framework left out (DESIGN §8):
// choice nodes, each with a few strategies that cost time and memory, and
// edges whose cost depends on the strategies at both ends. A node is an op
// (its strategies are its SBP signatures) or a tensor the step does not
// compute (a parameter, a batch: its strategies are layouts); an edge is a
// value passed from one to the other, costing the boxing between the
// producer's layout and the layout the consumer takes.
//
// solve() minimises   Σ node cost + memory_weight · Σ node memory + Σ edge cost
// by eliminating nodes (a node with one neighbour folds into it, a node
// with two into an edge between them, parallel edges add up: the idea of
// OneFlow's SBP-graph elimination), then local search and branch and
// bound over what is left; when branch and bound is too long, an integer
// program over what is left (CBC, ilp.h) within a time limit.

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::planner {

// A cost that rules a combination out (an in-place op moving what it
// writes): large, but finite so sums stay ordered.
inline constexpr double kInfeasible = 1e15;

struct ChoiceNode {
  std::string name;
  std::vector<double> cost;    // seconds, per strategy
  std::vector<double> memory;  // bytes per rank, per strategy
  // Per strategy, a number for its part on each mesh axis (strategies
  // that agree on an axis have the same number there); empty: not given.
  // Lets the search change one axis at a time on a 2-D mesh.
  std::vector<std::vector<int>> parts;
};

struct ChoiceEdge {
  int from = -1;
  int to = -1;
  // Row-major: cost[f * (strategies of to) + t].
  std::vector<double> cost;
};

class CostGraph {
 public:
  // `memory` empty means none; otherwise one entry per strategy; so is
  // `parts` (each of the same length).
  int add_node(std::string name, std::vector<double> cost, std::vector<double> memory = {},
               std::vector<std::vector<int>> parts = {});
  // Adds `cost` (from's strategies x to's, row-major) to the edge between
  // the two nodes, making it if there is none.
  void add_edge(int from, int to, std::vector<double> cost);

  const std::vector<ChoiceNode>& nodes() const { return nodes_; }
  const std::vector<ChoiceEdge>& edges() const { return edges_; }
  size_t strategies(int node) const { return nodes_.at(static_cast<size_t>(node)).cost.size(); }

  // The objective of `choice` (a strategy per node), and its parts.
  double cost(const std::vector<int>& choice, double memory_weight = 0) const;
  double memory(const std::vector<int>& choice) const;

 private:
  std::vector<ChoiceNode> nodes_;
  std::vector<ChoiceEdge> edges_;
};

struct SearchOptions {
  double memory_weight = 0;  // seconds per byte of memory
  // Branch-and-bound steps over what elimination leaves before the search
  // settles for local search's best.
  int64_t exact_limit = 2'000'000;
  // Assignments (a strategy per node) local search also starts from, such
  // as a hand plan's: the answer is never worse than the best of them.
  std::vector<std::vector<int>> starts;
  // When branch and bound stops at exact_limit: seconds CBC may spend on
  // the graph as an integer program (ilp.h). It returns a proven bound on
  // the optimum and, given time, the optimum. When the program is too
  // large (a 2-D mesh), and the nodes give their parts per mesh axis, the
  // search instead improves one axis at a time, each a smaller program
  // over the strategies that keep the other axes as chosen. 0: no programs.
  double ilp_seconds = 10;
  // Where branch and bound does not finish and the graph repeats itself
  // (a model's identical layers), a start from the search with every
  // repeated node tied to one strategy (solve_tied in cost_graph.cpp).
  bool tie_repeats = true;
  size_t ilp_max_columns = 100'000;  // IlpOptions::max_columns
};

struct Solution {
  std::vector<int> choice;  // a strategy per node
  double cost = 0;          // the objective
  bool exact = false;       // proven optimal
  double lower_bound = 0;   // proven: no choice costs less (= cost when exact)
  int remaining = 0;        // nodes elimination could not remove
};

Solution solve(const CostGraph& graph, const SearchOptions& options = {});

// Tries every assignment: the reference for tests on small graphs. Raises
// when there are more than `limit` of them.
Solution solve_exhaustively(const CostGraph& graph, double memory_weight = 0, double limit = 5e7);

}  // namespace tessera::planner
