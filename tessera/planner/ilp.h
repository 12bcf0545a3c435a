#pragma once

// The planner's search problem (cost_graph.h) as an integer linear
// program, solved by CBC (COIN-OR branch and cut): the bound the heuristic
// search is measured against, and the exact search where branch and bound
// would take too long.
//
// Each node v chooses one strategy (binary x[v][s], Σs x[v][s] = 1). Each
// edge (u, v) gets continuous y[s][t] ≥ 0 with Σt y[s][t] = x[u][s] and
// Σs y[s][t] = x[v][t]: with the x integral, y is 1 exactly at the pair
// chosen, so Σ edge cost · y is the edge's cost (the linearisation Alpa's
// inter-operator ILP uses). Combinations costing kInfeasible get no column.

#include <vector>

#include "tessera/planner/cost_graph.h"

namespace tessera::planner {

struct IlpOptions {
  double memory_weight = 0;  // as SearchOptions::memory_weight
  // CBC's time limit. Its first linear relaxation runs to the end
  // whatever the limit, which is why there is max_columns.
  double seconds = 10;
  // A larger program is not solved (too_large). Strategies multiply on a
  // 2-D mesh: a 4-layer GPT has 3e4 columns on 4 ranks in a row, 8e5 on
  // [2, 2], whose relaxation alone takes minutes.
  size_t max_columns = 100'000;
  // A strategy per node to start from (empty: none); CBC keeps the best of
  // it and what it finds.
  std::vector<int> start;
  // CBC's preprocessing (Cgl). The neighbourhood programs of the large
  // searches turn it off: on some of them, stopped by the time limit, its
  // post-processing crashed (CglPreProcess::postProcess, CBC 2.10).
  bool preprocess = true;
};

struct IlpSolution {
  std::vector<int> choice;  // a strategy per node; empty when CBC found none in time
  bool too_large = false;   // over max_columns: not solved (columns counts those made)
  double cost = 0;          // the objective of `choice`
  double lower_bound = 0;   // CBC's proven bound on the optimum
  bool optimal = false;     // CBC proved `choice` optimal
  int columns = 0;          // variables of the program
  int rows = 0;             // constraints
  double seconds = 0;       // spent in CBC
};

IlpSolution solve_ilp(const CostGraph& graph, const IlpOptions& options = {});

}  // namespace tessera::planner
