#include "tessera/planner/ilp.h"

#include <Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "tessera/core/error.h"

namespace tessera::planner {
namespace {

// A column of the program: its objective coefficient and its entries.
struct Column {
  double objective = 0;
  double upper = 1;
  bool integer = false;
  std::vector<std::pair<int, double>> entries;  // (row, coefficient)
};

struct CbcDeleter {
  void operator()(Cbc_Model* model) const { Cbc_deleteModel(model); }
};

bool feasible(double cost) {
  return cost < kInfeasible / 2;
}

// Numbers 0..count-1 into classes of `same`: the class of each, numbered
// in order of first appearance.
template <typename Same>
std::vector<int> classes(size_t count, const Same& same) {
  std::vector<int> of(count, -1);
  std::vector<size_t> first;  // a member of each class
  for (size_t k = 0; k < count; ++k) {
    for (size_t c = 0; c < first.size() && of[k] < 0; ++c) {
      if (same(first[c], k)) of[k] = static_cast<int>(c);
    }
    if (of[k] < 0) {
      of[k] = static_cast<int>(first.size());
      first.push_back(k);
    }
  }
  return of;
}

}  // namespace

IlpSolution solve_ilp(const CostGraph& graph, const IlpOptions& options) {
  TESSERA_CHECK(options.seconds > 0 && std::isfinite(options.seconds),
                "[planner] the ILP's time limit must be positive seconds, got ", options.seconds);
  const std::vector<ChoiceNode>& nodes = graph.nodes();
  TESSERA_CHECK(options.start.empty() || options.start.size() == nodes.size(),
                "[planner] an ILP start needs a strategy per node: ", nodes.size(), " nodes, ",
                options.start.size(), " strategies");
  const auto began = std::chrono::steady_clock::now();

  // Node costs with the memory term; the objective is scaled so its
  // largest coefficient is 1e6 (costs are seconds, often microseconds:
  // CBC's absolute tolerances would otherwise swallow them).
  std::vector<std::vector<double>> node_cost(nodes.size());
  double largest = 0;
  for (size_t v = 0; v < nodes.size(); ++v) {
    node_cost[v] = nodes[v].cost;
    for (size_t s = 0; s < node_cost[v].size(); ++s) {
      node_cost[v][s] += options.memory_weight * nodes[v].memory[s];
      if (feasible(node_cost[v][s])) largest = std::max(largest, std::abs(node_cost[v][s]));
    }
  }
  for (const ChoiceEdge& edge : graph.edges()) {
    for (double c : edge.cost) {
      if (feasible(c)) largest = std::max(largest, std::abs(c));
    }
  }
  const double scale = largest > 0 ? 1e6 / largest : 1.0;

  std::vector<Column> columns;
  std::vector<double> row_value;  // each row is an equality
  std::vector<std::vector<int>> x(nodes.size());
  for (size_t v = 0; v < nodes.size(); ++v) {
    const int row = static_cast<int>(row_value.size());
    row_value.push_back(1.0);
    for (size_t s = 0; s < node_cost[v].size(); ++s) {
      x[v].push_back(static_cast<int>(columns.size()));
      const double c = node_cost[v][s];
      columns.push_back(
          {feasible(c) ? c * scale : 0.0, feasible(c) ? 1.0 : 0.0, true, {{row, 1.0}}});
    }
  }
  for (const ChoiceEdge& edge : graph.edges()) {
    const bool free =
        std::all_of(edge.cost.begin(), edge.cost.end(), [](double c) { return c == 0.0; });
    if (free) continue;  // joins nothing the objective sees
    // Strategies of one end whose costs agree against every strategy of
    // the other are one class (ops of several signatures often produce
    // the same layout): y is kept per pair of classes, which is exact.
    const size_t rows = x[static_cast<size_t>(edge.from)].size();
    const size_t cols = x[static_cast<size_t>(edge.to)].size();
    auto same_row = [&](size_t a, size_t b) {
      return std::equal(edge.cost.begin() + static_cast<std::ptrdiff_t>(a * cols),
                        edge.cost.begin() + static_cast<std::ptrdiff_t>((a + 1) * cols),
                        edge.cost.begin() + static_cast<std::ptrdiff_t>(b * cols));
    };
    auto same_col = [&](size_t a, size_t b) {
      for (size_t s = 0; s < rows; ++s) {
        if (edge.cost[s * cols + a] != edge.cost[s * cols + b]) return false;
      }
      return true;
    };
    const std::vector<int> row_class = classes(rows, same_row);
    const std::vector<int> col_class = classes(cols, same_col);
    const int row_classes = *std::max_element(row_class.begin(), row_class.end()) + 1;
    const int col_classes = *std::max_element(col_class.begin(), col_class.end()) + 1;
    // Row from_row + i: Σj y[i][j] - Σ(s in class i) x[from][s] = 0; to_row + j likewise.
    const int from_row = static_cast<int>(row_value.size());
    const int to_row = from_row + row_classes;
    row_value.resize(row_value.size() + static_cast<size_t>(row_classes + col_classes), 0.0);
    for (size_t s = 0; s < rows; ++s) {
      columns[static_cast<size_t>(x[static_cast<size_t>(edge.from)][s])].entries.emplace_back(
          from_row + row_class[s], -1.0);
    }
    for (size_t t = 0; t < cols; ++t) {
      columns[static_cast<size_t>(x[static_cast<size_t>(edge.to)][t])].entries.emplace_back(
          to_row + col_class[t], -1.0);
    }
    std::vector<bool> made(static_cast<size_t>(row_classes * col_classes), false);
    for (size_t s = 0; s < rows; ++s) {
      for (size_t t = 0; t < cols; ++t) {
        const double c = edge.cost[s * cols + t];
        const size_t pair = static_cast<size_t>(row_class[s] * col_classes + col_class[t]);
        if (!feasible(c) || made[pair]) continue;
        made[pair] = true;
        columns.push_back({c * scale,
                           1.0,
                           false,
                           {{from_row + row_class[s], 1.0}, {to_row + col_class[t], 1.0}}});
      }
    }
    if (columns.size() > options.max_columns) {
      IlpSolution skipped;
      skipped.columns = static_cast<int>(columns.size());
      skipped.rows = static_cast<int>(row_value.size());
      skipped.too_large = true;
      return skipped;
    }
  }

  // Column-major arrays for CBC.
  std::vector<CoinBigIndex> start{0};
  std::vector<int> index;
  std::vector<double> value, lower(columns.size(), 0.0), upper, objective;
  for (Column& column : columns) {
    std::sort(column.entries.begin(), column.entries.end());
    for (const auto& [row, coefficient] : column.entries) {
      index.push_back(row);
      value.push_back(coefficient);
    }
    start.push_back(static_cast<CoinBigIndex>(index.size()));
    upper.push_back(column.upper);
    objective.push_back(column.objective);
  }
  std::unique_ptr<Cbc_Model, CbcDeleter> model(Cbc_newModel());
  Cbc_setLogLevel(model.get(), 0);
  Cbc_loadProblem(model.get(), static_cast<int>(columns.size()), static_cast<int>(row_value.size()),
                  start.data(), index.data(), value.data(), lower.data(), upper.data(),
                  objective.data(), row_value.data(), row_value.data());
  for (size_t c = 0; c < columns.size(); ++c) {
    if (columns[c].integer) Cbc_setInteger(model.get(), static_cast<int>(c));
  }
  if (!options.start.empty()) {
    std::vector<int> given;
    std::vector<double> ones;
    for (size_t v = 0; v < nodes.size(); ++v) {
      const int s = options.start[v];
      TESSERA_CHECK(s >= 0 && static_cast<size_t>(s) < x[v].size(),
                    "[planner] an ILP start gives node ", v, " strategy ", s, " of ", x[v].size());
      for (size_t k = 0; k < x[v].size(); ++k) {
        given.push_back(x[v][k]);
        ones.push_back(static_cast<int>(k) == s ? 1.0 : 0.0);
      }
    }
    Cbc_setMIPStartI(model.get(), static_cast<int>(given.size()), given.data(), ones.data());
  }
  Cbc_setMaximumSeconds(model.get(), options.seconds);
  if (!options.preprocess) Cbc_setParameter(model.get(), "preprocess", "off");
  Cbc_solve(model.get());

  IlpSolution solution;
  solution.columns = static_cast<int>(columns.size());
  solution.rows = static_cast<int>(row_value.size());
  // CBC's bound, when it has one: none when it proved the program
  // infeasible (every assignment costs kInfeasible somewhere) or ran out of
  // time before a relaxation.
  const double bound = Cbc_getBestPossibleObjValue(model.get()) / scale;
  if (!Cbc_isProvenInfeasible(model.get()) && std::isfinite(bound) && bound < kInfeasible / 2) {
    solution.lower_bound = std::max(0.0, bound);
  }
  if (const double* best = Cbc_bestSolution(model.get())) {
    solution.choice.resize(nodes.size());
    for (size_t v = 0; v < nodes.size(); ++v) {
      size_t chosen = 0;
      for (size_t k = 1; k < x[v].size(); ++k) {
        if (best[x[v][k]] > best[x[v][chosen]]) chosen = k;
      }
      solution.choice[v] = static_cast<int>(chosen);
    }
    solution.cost = graph.cost(solution.choice, options.memory_weight);
    solution.optimal = Cbc_isProvenOptimal(model.get()) != 0;
    // The bound is CBC's, computed on scaled costs; it never exceeds what
    // the choice costs.
    solution.lower_bound = std::min(solution.lower_bound, solution.cost);
    if (solution.optimal) solution.lower_bound = solution.cost;
  }
  solution.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return solution;
}

}  // namespace tessera::planner
