#include "tessera/planner/cost_graph.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

#include "tessera/core/error.h"
#include "tessera/planner/ilp.h"

namespace tessera::planner {

int CostGraph::add_node(std::string name, std::vector<double> cost, std::vector<double> memory,
                        std::vector<std::vector<int>> parts) {
  TESSERA_CHECK(!cost.empty(), "[planner] node '", name, "' needs at least one strategy");
  TESSERA_CHECK(memory.empty() || memory.size() == cost.size(), "[planner] node '", name, "' has ",
                cost.size(), " strategies but ", memory.size(), " memory figures");
  TESSERA_CHECK(parts.empty() || parts.size() == cost.size(), "[planner] node '", name, "' has ",
                cost.size(), " strategies but parts for ", parts.size());
  for (const std::vector<int>& part : parts) {
    TESSERA_CHECK(part.size() == parts.front().size(), "[planner] node '", name,
                  "' gives its strategies parts on different numbers of mesh axes");
  }
  if (memory.empty()) memory.assign(cost.size(), 0.0);
  nodes_.push_back({std::move(name), std::move(cost), std::move(memory), std::move(parts)});
  return static_cast<int>(nodes_.size()) - 1;
}

void CostGraph::add_edge(int from, int to, std::vector<double> cost) {
  const auto count = static_cast<int>(nodes_.size());
  TESSERA_CHECK(from >= 0 && from < count && to >= 0 && to < count && from != to,
                "[planner] an edge joins two different nodes of the ", count, "; got ", from,
                " and ", to);
  const size_t rows = strategies(from);
  const size_t cols = strategies(to);
  TESSERA_CHECK(cost.size() == rows * cols, "[planner] the edge ", nodes_[from].name, " -> ",
                nodes_[to].name, " needs ", rows, " x ", cols, " costs, got ", cost.size());
  for (ChoiceEdge& edge : edges_) {
    if (edge.from == from && edge.to == to) {
      for (size_t k = 0; k < cost.size(); ++k) edge.cost[k] += cost[k];
      return;
    }
    if (edge.from == to && edge.to == from) {
      for (size_t f = 0; f < rows; ++f) {
        for (size_t t = 0; t < cols; ++t) edge.cost[t * rows + f] += cost[f * cols + t];
      }
      return;
    }
  }
  edges_.push_back({from, to, std::move(cost)});
}

double CostGraph::cost(const std::vector<int>& choice, double memory_weight) const {
  TESSERA_CHECK(choice.size() == nodes_.size(), "[planner] a choice per node: ", nodes_.size(),
                " nodes, ", choice.size(), " choices");
  double total = 0;
  for (size_t v = 0; v < nodes_.size(); ++v) {
    const auto s = static_cast<size_t>(choice[v]);
    total += nodes_[v].cost.at(s) + memory_weight * nodes_[v].memory.at(s);
  }
  for (const ChoiceEdge& edge : edges_) {
    const size_t cols = strategies(edge.to);
    total += edge.cost[static_cast<size_t>(choice[static_cast<size_t>(edge.from)]) * cols +
                       static_cast<size_t>(choice[static_cast<size_t>(edge.to)])];
  }
  return total;
}

double CostGraph::memory(const std::vector<int>& choice) const {
  double total = 0;
  for (size_t v = 0; v < nodes_.size(); ++v) {
    total += nodes_[v].memory.at(static_cast<size_t>(choice.at(v)));
  }
  return total;
}

namespace {

// A dense matrix of edge costs: rows are one end's strategies.
struct Matrix {
  size_t rows = 0;
  size_t cols = 0;
  std::vector<double> at;
  double operator()(size_t r, size_t c) const { return at[r * cols + c]; }
  Matrix transposed() const {
    Matrix t{cols, rows, std::vector<double>(at.size())};
    for (size_t r = 0; r < rows; ++r) {
      for (size_t c = 0; c < cols; ++c) t.at[c * rows + r] = at[r * cols + c];
    }
    return t;
  }
};

// One elimination, undone in reverse order to recover the choices.
struct Record {
  enum Kind : uint8_t { alone, leaf, series } kind = alone;
  int node = -1;
  int a = -1;  // the neighbour a leaf folds into; a series' first end
  int b = -1;  // a series' second end
  // The node's best strategy: alone: best[0]; leaf: per strategy of a;
  // series: per (strategy of a, strategy of b), row-major.
  std::vector<int> best;
};

// The graph as elimination changes it: costs include the memory term, and
// each edge is kept from both ends (adjacent[v][w] has v's strategies as
// rows).
class Reducer {
 public:
  Reducer(const CostGraph& graph, double memory_weight) {
    const size_t n = graph.nodes().size();
    cost_.resize(n);
    adjacent_.resize(n);
    alive_.assign(n, true);
    for (size_t v = 0; v < n; ++v) {
      const ChoiceNode& node = graph.nodes()[v];
      cost_[v] = node.cost;
      for (size_t s = 0; s < cost_[v].size(); ++s) cost_[v][s] += memory_weight * node.memory[s];
    }
    for (const ChoiceEdge& edge : graph.edges()) {
      Matrix m{graph.strategies(edge.from), graph.strategies(edge.to), edge.cost};
      add(edge.from, edge.to, m);
    }
  }

  // Eliminates until every node left has three neighbours or more.
  void eliminate() {
    bool changed = true;
    while (changed) {
      changed = false;
      for (size_t v = 0; v < cost_.size(); ++v) {
        if (!alive_[v]) continue;
        const size_t degree = adjacent_[v].size();
        if (degree == 0) {
          remove_alone(static_cast<int>(v));
        } else if (degree == 1) {
          remove_leaf(static_cast<int>(v));
        } else if (degree == 2) {
          remove_series(static_cast<int>(v));
        } else {
          continue;
        }
        changed = true;
      }
    }
  }

  std::vector<int> left() const {
    std::vector<int> nodes;
    for (size_t v = 0; v < alive_.size(); ++v) {
      if (alive_[v]) nodes.push_back(static_cast<int>(v));
    }
    return nodes;
  }

  // Chooses strategies for the nodes left (`choice` holds them on entry:
  // a start for local search), then undoes the eliminations. Returns
  // whether the choice of those left is proven optimal.
  bool finish(std::vector<int>& choice, const SearchOptions& options) {
    const std::vector<int> kernel = left();
    bool exact = true;
    if (!kernel.empty()) {
      local_search(kernel, choice, options.starts);
      exact = branch_and_bound(kernel, choice, options.exact_limit);
    }
    for (auto record = records_.rbegin(); record != records_.rend(); ++record) {
      const auto node = static_cast<size_t>(record->node);
      switch (record->kind) {
        case Record::alone:
          choice[node] = record->best[0];
          break;
        case Record::leaf:
          choice[node] = record->best[static_cast<size_t>(choice[static_cast<size_t>(record->a)])];
          break;
        case Record::series: {
          const size_t cols = cost_[static_cast<size_t>(record->b)].size();
          choice[node] =
              record->best[static_cast<size_t>(choice[static_cast<size_t>(record->a)]) * cols +
                           static_cast<size_t>(choice[static_cast<size_t>(record->b)])];
          break;
        }
      }
    }
    return exact;
  }

 private:
  void add(int from, int to, const Matrix& m) {
    auto& forward = adjacent_[static_cast<size_t>(from)];
    auto found = forward.find(to);
    if (found == forward.end()) {
      forward.emplace(to, m);
      adjacent_[static_cast<size_t>(to)].emplace(from, m.transposed());
      return;
    }
    Matrix& there = found->second;
    Matrix& back = adjacent_[static_cast<size_t>(to)].at(from);
    for (size_t r = 0; r < m.rows; ++r) {
      for (size_t c = 0; c < m.cols; ++c) {
        there.at[r * m.cols + c] += m(r, c);
        back.at[c * m.rows + r] += m(r, c);
      }
    }
  }

  void drop(int v) {
    for (const auto& [w, m] : adjacent_[static_cast<size_t>(v)]) {
      adjacent_[static_cast<size_t>(w)].erase(v);
    }
    adjacent_[static_cast<size_t>(v)].clear();
    alive_[static_cast<size_t>(v)] = false;
  }

  void remove_alone(int v) {
    const std::vector<double>& c = cost_[static_cast<size_t>(v)];
    const auto best = static_cast<int>(std::min_element(c.begin(), c.end()) - c.begin());
    records_.push_back({Record::alone, v, -1, -1, {best}});
    drop(v);
  }

  void remove_leaf(int v) {
    const auto& [a, m] = *adjacent_[static_cast<size_t>(v)].begin();
    const std::vector<double>& own = cost_[static_cast<size_t>(v)];
    std::vector<double>& theirs = cost_[static_cast<size_t>(a)];
    Record record{Record::leaf, v, a, -1, std::vector<int>(theirs.size())};
    for (size_t t = 0; t < theirs.size(); ++t) {
      double best = std::numeric_limits<double>::infinity();
      for (size_t s = 0; s < own.size(); ++s) {
        const double total = own[s] + m(s, t);
        if (total < best) {
          best = total;
          record.best[t] = static_cast<int>(s);
        }
      }
      theirs[t] += best;
    }
    records_.push_back(std::move(record));
    drop(v);
  }

  void remove_series(int v) {
    auto it = adjacent_[static_cast<size_t>(v)].begin();
    const int a = it->first;
    const Matrix va = it->second;  // v x a
    ++it;
    const int b = it->first;
    const Matrix& vb = it->second;  // v x b
    const std::vector<double>& own = cost_[static_cast<size_t>(v)];
    Matrix ab{va.cols, vb.cols, std::vector<double>(va.cols * vb.cols)};
    Record record{Record::series, v, a, b, std::vector<int>(ab.at.size())};
    for (size_t i = 0; i < ab.rows; ++i) {
      for (size_t j = 0; j < ab.cols; ++j) {
        double best = std::numeric_limits<double>::infinity();
        for (size_t s = 0; s < own.size(); ++s) {
          const double total = va(s, i) + own[s] + vb(s, j);
          if (total < best) {
            best = total;
            record.best[i * ab.cols + j] = static_cast<int>(s);
          }
        }
        ab.at[i * ab.cols + j] = best;
      }
    }
    records_.push_back(std::move(record));
    drop(v);
    add(a, b, ab);
  }

  // The cost of strategy s of v given its neighbours' current choices.
  double local_cost(int v, size_t s, const std::vector<int>& choice) const {
    double total = cost_[static_cast<size_t>(v)][s];
    for (const auto& [w, m] : adjacent_[static_cast<size_t>(v)]) {
      total += m(s, static_cast<size_t>(choice[static_cast<size_t>(w)]));
    }
    return total;
  }

  double kernel_cost(const std::vector<int>& kernel, const std::vector<int>& choice) const {
    double total = 0;
    for (int v : kernel) {
      const auto s = static_cast<size_t>(choice[static_cast<size_t>(v)]);
      total += cost_[static_cast<size_t>(v)][s];
      for (const auto& [w, m] : adjacent_[static_cast<size_t>(v)]) {
        if (w > v) total += m(s, static_cast<size_t>(choice[static_cast<size_t>(w)]));
      }
    }
    return total;
  }

  // Moves one node at a time to its best strategy given the others, from
  // several starts (each node's cheapest strategy; then random ones), until
  // no move helps. Leaves the best found in `choice`.
  void local_search(const std::vector<int>& kernel, std::vector<int>& choice,
                    const std::vector<std::vector<int>>& starts) const {
    std::mt19937_64 random(12345);
    std::vector<int> best_choice;
    double best = std::numeric_limits<double>::infinity();
    const int given = static_cast<int>(starts.size());
    for (int start = 0; start < 8 + given; ++start) {
      std::vector<int> current = choice;
      for (int v : kernel) {
        const std::vector<double>& c = cost_[static_cast<size_t>(v)];
        int& at = current[static_cast<size_t>(v)];
        if (start < given) {
          at = starts[static_cast<size_t>(start)].at(static_cast<size_t>(v));
        } else if (start == given) {
          at = static_cast<int>(std::min_element(c.begin(), c.end()) - c.begin());
        } else {
          at = static_cast<int>(random() % c.size());
        }
      }
      for (int pass = 0; pass < 100; ++pass) {
        bool moved = false;
        for (int v : kernel) {
          const size_t count = cost_[static_cast<size_t>(v)].size();
          auto& at = current[static_cast<size_t>(v)];
          double here = local_cost(v, static_cast<size_t>(at), current);
          for (size_t s = 0; s < count; ++s) {
            const double there = local_cost(v, s, current);
            if (there < here - 1e-15 * std::abs(here)) {
              here = there;
              at = static_cast<int>(s);
              moved = true;
            }
          }
        }
        if (!moved) break;
      }
      const double total = kernel_cost(kernel, current);
      if (total < best) {
        best = total;
        best_choice = std::move(current);
      }
    }
    choice = std::move(best_choice);
  }

  // Depth-first over the kernel's nodes (each joined to those before it
  // where it can be), bounded below by the cost so far plus every node
  // left at its cheapest; starts from local search's answer. False when
  // it stopped at `limit` steps.
  bool branch_and_bound(const std::vector<int>& kernel, std::vector<int>& choice,
                        int64_t limit) const {
    // Order: breadth-first from the node of most neighbours, so a node's
    // edges to nodes already placed count as early as they can.
    std::vector<int> order;
    std::vector<bool> placed(cost_.size(), false);
    std::vector<int> by_degree = kernel;
    std::stable_sort(by_degree.begin(), by_degree.end(), [&](int x, int y) {
      return adjacent_[static_cast<size_t>(x)].size() > adjacent_[static_cast<size_t>(y)].size();
    });
    for (int root : by_degree) {
      if (placed[static_cast<size_t>(root)]) continue;
      size_t head = order.size();
      order.push_back(root);
      placed[static_cast<size_t>(root)] = true;
      for (; head < order.size(); ++head) {
        for (const auto& [w, m] : adjacent_[static_cast<size_t>(order[head])]) {
          if (placed[static_cast<size_t>(w)]) continue;
          placed[static_cast<size_t>(w)] = true;
          order.push_back(w);
        }
      }
    }
    const size_t n = order.size();
    std::vector<size_t> position(cost_.size(), 0);
    for (size_t k = 0; k < n; ++k) position[static_cast<size_t>(order[k])] = k;
    // Lower bound of the nodes from k on: their cheapest strategies.
    std::vector<double> rest(n + 1, 0.0);
    for (size_t k = n; k-- > 0;) {
      const std::vector<double>& c = cost_[static_cast<size_t>(order[k])];
      rest[k] = rest[k + 1] + *std::min_element(c.begin(), c.end());
    }
    double best = kernel_cost(kernel, choice);
    std::vector<int> current = choice;
    int64_t steps = 0;
    bool complete = true;
    // Iterative depth-first search: at[k] is the next strategy to try at depth k.
    std::vector<size_t> at(n, 0);
    std::vector<double> partial(n + 1, 0.0);
    size_t depth = 0;
    while (true) {
      const int v = order[depth];
      const size_t count = cost_[static_cast<size_t>(v)].size();
      if (at[depth] >= count) {
        at[depth] = 0;
        if (depth == 0) break;
        --depth;
        continue;
      }
      if (++steps > limit) {
        complete = false;
        break;
      }
      const size_t s = at[depth]++;
      double added = cost_[static_cast<size_t>(v)][s];
      for (const auto& [w, m] : adjacent_[static_cast<size_t>(v)]) {
        if (position[static_cast<size_t>(w)] < depth) {
          added += m(s, static_cast<size_t>(current[static_cast<size_t>(w)]));
        }
      }
      const double sum = partial[depth] + added;
      if (sum + rest[depth + 1] >= best) continue;
      current[static_cast<size_t>(v)] = static_cast<int>(s);
      if (depth + 1 == n) {
        best = sum;
        choice = current;
        continue;
      }
      partial[depth + 1] = sum;
      ++depth;
    }
    return complete;
  }

  std::vector<std::vector<double>> cost_;
  std::vector<std::map<int, Matrix>> adjacent_;
  std::vector<bool> alive_;
  std::vector<Record> records_;
};

IlpOptions ilp_options_of(const SearchOptions& options) {
  IlpOptions ilp;
  ilp.memory_weight = options.memory_weight;
  ilp.seconds = options.ilp_seconds;
  ilp.max_columns = options.ilp_max_columns;
  return ilp;
}

// The same for a neighbourhood program (improve_within), without CBC's
// preprocessing (IlpOptions::preprocess).
IlpOptions neighbourhood_options_of(const SearchOptions& options) {
  IlpOptions ilp = ilp_options_of(options);
  ilp.preprocess = false;
  return ilp;
}

// The integer program over a neighbourhood of `choice`: node v may take
// the strategies allowed[v] (its chosen one first). Replaces `choice` when
// the program finds a cheaper assignment; returns whether it did, and sets
// `too_large` when the program was too large to state.
bool improve_within(const CostGraph& graph, const IlpOptions& options,
                    const std::vector<std::vector<int>>& allowed, std::vector<int>& choice,
                    bool& too_large) {
  const std::vector<ChoiceNode>& nodes = graph.nodes();
  CostGraph neighbourhood;
  IlpOptions ilp = options;
  ilp.start.clear();
  for (size_t v = 0; v < nodes.size(); ++v) {
    std::vector<double> cost, memory;
    for (int s : allowed[v]) {
      cost.push_back(nodes[v].cost[static_cast<size_t>(s)]);
      memory.push_back(nodes[v].memory[static_cast<size_t>(s)]);
    }
    neighbourhood.add_node({}, std::move(cost), std::move(memory));
    ilp.start.push_back(0);
  }
  for (const ChoiceEdge& edge : graph.edges()) {
    const size_t cols = graph.strategies(edge.to);
    const std::vector<int>& rows_kept = allowed[static_cast<size_t>(edge.from)];
    const std::vector<int>& cols_kept = allowed[static_cast<size_t>(edge.to)];
    std::vector<double> cost;
    cost.reserve(rows_kept.size() * cols_kept.size());
    for (int f : rows_kept) {
      for (int t : cols_kept)
        cost.push_back(edge.cost[static_cast<size_t>(f) * cols + static_cast<size_t>(t)]);
    }
    neighbourhood.add_edge(edge.from, edge.to, std::move(cost));
  }
  const IlpSolution solved = solve_ilp(neighbourhood, ilp);
  too_large = solved.too_large;
  if (solved.choice.empty()) return false;
  std::vector<int> candidate(nodes.size());
  for (size_t v = 0; v < nodes.size(); ++v) {
    candidate[v] = allowed[v][static_cast<size_t>(solved.choice[v])];
  }
  if (graph.cost(candidate, options.memory_weight) <
      graph.cost(choice, options.memory_weight) * (1 - 1e-12)) {
    choice = std::move(candidate);
    return true;
  }
  return false;
}

// Improves `choice` one mesh axis at a time (a large-neighbourhood
// search): for axis a, each node may take any strategy that agrees with
// its chosen one on every other axis, and the integer program over those
// picks the best; rounds repeat while one helps. Only on 2-D meshes.
void improve_by_axis(const CostGraph& graph, const SearchOptions& options,
                     std::vector<int>& choice) {
  const std::vector<ChoiceNode>& nodes = graph.nodes();
  size_t axes = 0;
  for (const ChoiceNode& node : nodes) {
    if (!node.parts.empty()) axes = std::max(axes, node.parts.front().size());
  }
  if (axes < 2) return;
  // An axis's neighbourhood is fixed by the others' parts: once `axes`
  // programs in a row (the one that last changed the choice included)
  // changed nothing, none would.
  size_t unchanged = 0;
  for (size_t step = 0; step < 4 * axes && unchanged < axes; ++step) {
    const size_t axis = step % axes;
    std::vector<std::vector<int>> allowed(nodes.size());
    for (size_t v = 0; v < nodes.size(); ++v) {
      const ChoiceNode& node = nodes[v];
      const int chosen = choice[v];
      allowed[v].push_back(chosen);
      for (size_t s = 0; s < node.cost.size(); ++s) {
        if (static_cast<int>(s) == chosen) continue;
        bool agrees = true;
        if (!node.parts.empty()) {
          const std::vector<int>& mine = node.parts[static_cast<size_t>(chosen)];
          for (size_t b = 0; b < mine.size() && agrees; ++b) {
            agrees = b == axis || node.parts[s][b] == mine[b];
          }
        }
        if (agrees) allowed[v].push_back(static_cast<int>(s));
      }
    }
    bool too_large = false;
    ++unchanged;
    if (improve_within(graph, neighbourhood_options_of(options), allowed, choice, too_large)) {
      unchanged = 1;
    }
  }
}

// Improves `choice` window by window (a large-neighbourhood search where
// the whole program is too large): a run of consecutive nodes, with the
// nodes they share an edge with, may take any strategy, every other node
// keeps its own, and the integer program over that picks the best. The
// windows are centred on the nodes that cost the most under the current
// choice (their own cost and their edges'), the costliest first; they
// halve while their program is too large, and sweeps repeat while one
// helps, within a quarter of options.ilp_seconds in all. This is what
// moves chains of ops that must change layout together (a head, its loss
// and their backward), which single-node moves cannot.
void improve_by_window(const CostGraph& graph, const SearchOptions& options,
                       std::vector<int>& choice) {
  const std::vector<ChoiceNode>& nodes = graph.nodes();
  const size_t n = nodes.size();
  if (n < 2 || options.ilp_seconds <= 0) return;
  const auto started = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  std::vector<std::vector<const ChoiceEdge*>> incident(n);
  for (const ChoiceEdge& edge : graph.edges()) {
    incident[static_cast<size_t>(edge.from)].push_back(&edge);
    incident[static_cast<size_t>(edge.to)].push_back(&edge);
  }
  IlpOptions ilp = neighbourhood_options_of(options);
  ilp.seconds = options.ilp_seconds / 16;
  size_t width = std::min<size_t>(n, 256);
  for (int sweep = 0; sweep < 4; ++sweep) {
    std::vector<double> share(n, 0.0);
    for (size_t v = 0; v < n; ++v) {
      const auto s = static_cast<size_t>(choice[v]);
      share[v] = nodes[v].cost[s] + options.memory_weight * nodes[v].memory[s];
      for (const ChoiceEdge* edge : incident[v]) {
        share[v] += edge->cost[static_cast<size_t>(choice[static_cast<size_t>(edge->from)]) *
                                   graph.strategies(edge->to) +
                               static_cast<size_t>(choice[static_cast<size_t>(edge->to)])];
      }
    }
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return share[a] > share[b]; });
    std::vector<bool> covered(n, false);
    bool improved = false;
    for (size_t k = 0; k < n; ++k) {
      const size_t centre = order[k];
      if (covered[centre]) continue;
      if (elapsed() > options.ilp_seconds / 4) return;
      // The window: the `width` nodes nearest the centre in the graph
      // (breadth first), so an op's forward and its backward, which the
      // node order puts far apart, change together.
      std::vector<bool> free(n, false);
      std::vector<size_t> window = {centre};
      free[centre] = true;
      for (size_t head = 0; head < window.size() && window.size() < width; ++head) {
        for (const ChoiceEdge* edge : incident[window[head]]) {
          for (int end : {edge->from, edge->to}) {
            const auto e = static_cast<size_t>(end);
            if (free[e] || window.size() >= width) continue;
            free[e] = true;
            window.push_back(e);
          }
        }
      }
      std::vector<std::vector<int>> allowed(n);
      for (size_t v = 0; v < n; ++v) {
        allowed[v].push_back(choice[v]);
        if (!free[v]) continue;
        for (size_t s = 0; s < nodes[v].cost.size(); ++s) {
          if (static_cast<int>(s) != choice[v]) allowed[v].push_back(static_cast<int>(s));
        }
      }
      bool too_large = false;
      improved = improve_within(graph, ilp, allowed, choice, too_large) || improved;
      if (too_large && width > 8) {
        width /= 2;  // this centre again, a smaller window
        --k;
        continue;
      }
      for (size_t v : window) covered[v] = true;
    }
    if (!improved) return;
  }
}

// Classes of interchangeable nodes: the same strategies at the same costs,
// joined by the same edges to nodes of the same classes (colour refinement,
// as Weisfeiler-Lehman's test does it, a few rounds). The layers of a
// model repeated L times are the same classes but for the first and last.
std::vector<int> repeated_classes(const CostGraph& graph, int rounds) {
  const std::vector<ChoiceNode>& nodes = graph.nodes();
  const size_t n = nodes.size();
  auto mix = [](uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
  };
  auto hash_doubles = [&](uint64_t h, const std::vector<double>& values) {
    for (double v : values) h = mix(h, std::hash<double>{}(v));
    return h;
  };
  std::vector<uint64_t> colour(n);
  for (size_t v = 0; v < n; ++v) {
    colour[v] = hash_doubles(hash_doubles(nodes[v].cost.size(), nodes[v].cost), nodes[v].memory);
  }
  // Each edge as each end sees it (its strategies the rows), so an edge's
  // direction matters only where its costs are not symmetric.
  std::vector<std::pair<uint64_t, uint64_t>> edge_hash;
  edge_hash.reserve(graph.edges().size());
  for (const ChoiceEdge& edge : graph.edges()) {
    const size_t rows = graph.strategies(edge.from), cols = graph.strategies(edge.to);
    std::vector<double> transposed(edge.cost.size());
    for (size_t f = 0; f < rows; ++f) {
      for (size_t t = 0; t < cols; ++t) transposed[t * rows + f] = edge.cost[f * cols + t];
    }
    edge_hash.emplace_back(hash_doubles(rows, edge.cost), hash_doubles(cols, transposed));
  }
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::vector<uint64_t>> seen(n);
    for (size_t e = 0; e < graph.edges().size(); ++e) {
      const ChoiceEdge& edge = graph.edges()[e];
      const auto from = static_cast<size_t>(edge.from), to = static_cast<size_t>(edge.to);
      seen[from].push_back(mix(edge_hash[e].first, colour[to]));
      seen[to].push_back(mix(edge_hash[e].second, colour[from]));
    }
    std::vector<uint64_t> next(n);
    for (size_t v = 0; v < n; ++v) {
      std::sort(seen[v].begin(), seen[v].end());
      uint64_t h = colour[v];
      for (uint64_t x : seen[v]) h = mix(h, x);
      next[v] = h;
    }
    colour = std::move(next);
  }
  std::map<uint64_t, int> numbers;
  std::vector<int> classes(n);
  for (size_t v = 0; v < n; ++v) {
    classes[v] = numbers.emplace(colour[v], static_cast<int>(numbers.size())).first->second;
  }
  return classes;
}

// The search with every class of repeated_classes tied to one strategy: a
// graph of one node per class (costs and memory summed over its members,
// edges between classes summed, an edge inside a class counted where both
// ends agree), solved, and spread back. A model of L identical layers
// becomes one of about one layer, so the search sees a choice for all
// layers at once, which no move within a few layers can make (the plan of
// every layer changing together). Returns no choice when the graph does
// not repeat itself at least four times over (a few layers: the search
// over the whole graph does as well, and the tied one would only add its
// time); the tied search gets a quarter of options.ilp_seconds.
std::vector<int> solve_tied(const CostGraph& graph, const SearchOptions& options) {
  const std::vector<ChoiceNode>& nodes = graph.nodes();
  const std::vector<int> classes = repeated_classes(graph, 3);
  const int count = *std::max_element(classes.begin(), classes.end()) + 1;
  if (static_cast<size_t>(count) * 4 > nodes.size()) return {};
  std::vector<int> first(static_cast<size_t>(count), -1);
  std::vector<std::vector<double>> cost(static_cast<size_t>(count)), memory(cost.size());
  for (size_t v = 0; v < nodes.size(); ++v) {
    const auto c = static_cast<size_t>(classes[v]);
    if (first[c] < 0) {
      first[c] = static_cast<int>(v);
      cost[c].assign(nodes[v].cost.size(), 0.0);
      memory[c].assign(nodes[v].cost.size(), 0.0);
    }
    // (Classes are hashes: should two nodes of different strategy counts
    // ever share one, there is no tied graph.)
    if (cost[c].size() != nodes[v].cost.size()) return {};
    for (size_t s = 0; s < nodes[v].cost.size(); ++s) {
      cost[c][s] += nodes[v].cost[s];
      memory[c][s] += nodes[v].memory[s];
    }
  }
  std::map<std::pair<int, int>, std::vector<double>> between;
  for (const ChoiceEdge& edge : graph.edges()) {
    const int a = classes[static_cast<size_t>(edge.from)];
    const int b = classes[static_cast<size_t>(edge.to)];
    const size_t cols = graph.strategies(edge.to);
    if (a == b) {
      for (size_t s = 0; s < cols; ++s) cost[static_cast<size_t>(a)][s] += edge.cost[s * cols + s];
      continue;
    }
    std::vector<double>& sum = between[{a, b}];
    if (sum.empty()) sum.assign(edge.cost.size(), 0.0);
    for (size_t k = 0; k < edge.cost.size(); ++k) sum[k] += edge.cost[k];
  }
  CostGraph tied;
  for (int c = 0; c < count; ++c) {
    const ChoiceNode& node = nodes[static_cast<size_t>(first[static_cast<size_t>(c)])];
    tied.add_node(node.name, std::move(cost[static_cast<size_t>(c)]),
                  std::move(memory[static_cast<size_t>(c)]), node.parts);
  }
  for (auto& [ends, sum] : between) tied.add_edge(ends.first, ends.second, std::move(sum));
  SearchOptions inner = options;
  inner.starts.clear();
  inner.tie_repeats = false;
  inner.ilp_seconds = options.ilp_seconds / 4;
  const Solution solved = solve(tied, inner);
  std::vector<int> choice(nodes.size());
  for (size_t v = 0; v < nodes.size(); ++v) {
    choice[v] = solved.choice[static_cast<size_t>(classes[v])];
  }
  return choice;
}

}  // namespace

Solution solve(const CostGraph& graph, const SearchOptions& options) {
  Reducer reducer(graph, options.memory_weight);
  reducer.eliminate();
  Solution solution;
  solution.remaining = static_cast<int>(reducer.left().size());
  solution.choice.assign(graph.nodes().size(), 0);
  for (const std::vector<int>& start : options.starts) {
    TESSERA_CHECK(start.size() == graph.nodes().size(),
                  "[planner] a start needs a strategy per node: ", graph.nodes().size(), " nodes, ",
                  start.size(), " strategies");
    for (size_t v = 0; v < start.size(); ++v) {
      TESSERA_CHECK(
          start[v] >= 0 && static_cast<size_t>(start[v]) < graph.strategies(static_cast<int>(v)),
          "[planner] a start gives node ", v, " strategy ", start[v], " of ",
          graph.strategies(static_cast<int>(v)));
    }
  }
  solution.exact = reducer.finish(solution.choice, options);
  solution.cost = graph.cost(solution.choice, options.memory_weight);
  if (!solution.exact && options.tie_repeats) {
    std::vector<int> tied = solve_tied(graph, options);
    const double tied_cost = tied.empty() ? 0.0 : graph.cost(tied, options.memory_weight);
    if (!tied.empty() && tied_cost < solution.cost) {
      solution.choice = std::move(tied);
      solution.cost = tied_cost;
    }
  }
  solution.lower_bound = solution.exact ? solution.cost : 0.0;
  if (!solution.exact && options.ilp_seconds > 0) {
    // The whole graph, not what elimination left: its edges are boxing
    // costs by layout, which the program's classes compress (ilp.cpp);
    // elimination's folded edges have no such structure.
    IlpOptions ilp = ilp_options_of(options);
    ilp.start = solution.choice;
    const IlpSolution solved = solve_ilp(graph, ilp);  // (too_large: no choice, bound 0)
    if (!solved.choice.empty() && solved.cost < solution.cost) {
      solution.choice = solved.choice;
      solution.cost = solved.cost;
    }
    solution.exact = solved.optimal && solved.cost <= solution.cost;
    solution.lower_bound =
        solution.exact ? solution.cost : std::min(solved.lower_bound, solution.cost);
    if (solved.too_large) {
      // On a 2-D mesh, axis by axis first (each axis's program over the
      // whole graph); then, on any mesh, windows with every axis free:
      // they move what must change on both axes at once (a weight
      // gradient computed split or reduced), which neither axis alone can.
      improve_by_axis(graph, options, solution.choice);
      improve_by_window(graph, options, solution.choice);
      solution.cost = graph.cost(solution.choice, options.memory_weight);
    }
  }
  return solution;
}

Solution solve_exhaustively(const CostGraph& graph, double memory_weight, double limit) {
  double count = 1;
  for (const ChoiceNode& node : graph.nodes()) count *= static_cast<double>(node.cost.size());
  TESSERA_CHECK(count <= limit, "[planner] ", count,
                " assignments are too many to try every one; the limit is ", limit);
  const size_t n = graph.nodes().size();
  std::vector<int> choice(n, 0);
  Solution best;
  best.cost = std::numeric_limits<double>::infinity();
  best.exact = true;
  while (true) {
    const double total = graph.cost(choice, memory_weight);
    if (total < best.cost) {
      best.cost = total;
      best.choice = choice;
    }
    size_t v = 0;
    for (; v < n; ++v) {
      if (static_cast<size_t>(++choice[v]) < graph.strategies(static_cast<int>(v))) break;
      choice[v] = 0;
    }
    if (v == n) break;
  }
  return best;
}

}  // namespace tessera::planner
