// One rank of the multi-process global-tensor tests (global_test.cpp starts
// N copies through tessera-run). Every check compares against a reference
// this rank computes alone on whole tensors. The first mismatch is printed
// to stderr and the rank exits 1. Modes (argv[1]):
//   boxing    every SBP conversion on 1-D meshes, 2-D meshes (4 ranks) and
//             between placements, uneven sizes included
//   ops       every registered SBP case, run on global inputs in each of its
//             signatures
//   autograd  gradients through global ops and to_global/to_local
//   errors    SBP misuse gives clear errors
//   ckpt_save DIR / ckpt_load DIR
//             a tensor-parallel MLP, trained 3 steps, saved sharded; loaded
//             back with data parallelism (or on one process) it gives the
//             same outputs
//   diverge   the last rank issues another op (for TESSERA_DEBUG_SPMD=1)
//   item_alone  rank 0 alone calls item() on a global loss (TESSERA_DEBUG_SPMD=1)
//   train     data-, tensor- and 2-D-parallel training of an MLP and a small
//             GPT tracks single-process training step by step
//   auto      the planner lays out the MLP (also under a memory budget data
//             parallel cannot meet) and the GPT: training on its layouts,
//             eager and compiled on the plan (planner::compile), tracks
//             single-process training step by step
//   compile   the train mode's layouts, each step compiled into a graph
//             (graph::compile): the same losses and parameters as eager
//             global training (bit for bit but for the tensor-parallel GPT), with
//             the boxing and gradient all-reduces as nodes of the graph
//   collective_grads
//             the collective ops (global/collective_ops.h): values against
//             references from every rank's inputs, and gradients against
//             finite differences of the loss summed over all ranks

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../../examples/models/gpt.h"
#include "tessera/global/boxing.h"
#include "tessera/global/collective_ops.h"
#include "tessera/global/process_groups.h"
#include "tessera/graph/compile.h"
#include "tessera/planner/auto_parallel.h"
#include "testing.h"

using namespace tessera;

namespace {

int g_rank = 0;
int g_checks = 0;

#define CHECK_WORKER(cond, ...)                                                           \
  do {                                                                                    \
    ++g_checks;                                                                           \
    if (!(cond))                                                                          \
      TESSERA_FAIL("rank ", g_rank, " line ", __LINE__, ": ", #cond, " ", ##__VA_ARGS__); \
  } while (0)

void check_close(const Tensor& actual, const Tensor& expected, double tol,
                 const std::string& what) {
  auto result = tessera::testing::all_close(actual, expected, tol, tol);
  CHECK_WORKER(result, what, ": ", result.message());
}

// This rank's shard of `whole` laid out as `sbp` on `placement`, built level
// by level from the test's own sharding (random decompositions for partial
// values, the same on every rank that shares the outer coordinates).
Tensor reference_shard(const Tensor& whole, const Placement& placement, const NdSbp& sbp,
                       int index) {
  std::vector<int64_t> coord = placement.coordinate(index);
  Tensor level = whole;
  uint64_t seed = 7;
  for (int a = 0; a < sbp.ndim(); ++a) {
    std::vector<std::vector<int64_t>> starts;
    auto shards = tessera::testing::make_shards(level, sbp[a], placement.mesh()[a], seed, starts);
    level = shards[static_cast<size_t>(coord[static_cast<size_t>(a)])];
    seed = seed * 31 + static_cast<uint64_t>(coord[static_cast<size_t>(a)]) + 1;
  }
  return level;
}

Tensor make_source(const Tensor& whole, const Placement& placement, const NdSbp& sbp) {
  const int index = placement.index_of(g_rank);
  Tensor local = index >= 0 ? reference_shard(whole, placement, sbp, index) : Tensor();
  return make_global(local, whole.shape(), whole.dtype(), placement, sbp);
}

// Reduces a global tensor's partial axes with raw collectives and compares
// this rank's data with its region of `whole`.
void check_global(const Tensor& y, const Tensor& whole, const std::string& what,
                  double tol = 1e-5) {
  CHECK_WORKER(y.is_global() && y.shape() == whole.shape(), what);
  const Placement placement = y.placement();
  const int index = placement.index_of(g_rank);
  if (index < 0) {
    CHECK_WORKER(!y.local_shard().defined(), what, ": a rank outside the placement holds data");
    return;
  }
  Tensor local = y.local_shard().clone();
  std::vector<Sbp> as_broadcast = y.nd_sbp().sbps();
  for (int a = y.nd_sbp().ndim(); a-- > 0;) {
    const Sbp& s = y.nd_sbp()[a];
    if (!s.is_partial()) continue;
    auto group = global::group_of(global::axis_ranks(placement, index, a));
    group->all_reduce(local, s.kind == SbpKind::partial_sum   ? distributed::ReduceOp::sum
                             : s.kind == SbpKind::partial_max ? distributed::ReduceOp::max
                                                              : distributed::ReduceOp::min);
    as_broadcast[static_cast<size_t>(a)] = Sbp::broadcast();
  }
  global::Region region =
      global::shard_region(whole.shape(), placement, NdSbp(as_broadcast), index);
  Tensor expected = whole;
  for (size_t d = 0; d < region.size.size(); ++d) {
    expected = expected.narrow(static_cast<int64_t>(d), region.start[d], region.size[d]);
  }
  check_close(local, expected, tol, what);
}

std::string layout_str(const Placement& p, const NdSbp& s) {
  return placement_str(p) + " " + nd_sbp_str(s);
}

void convert_and_check(const Tensor& whole, const Placement& from_p, const NdSbp& from_s,
                       const Placement& to_p, const NdSbp& to_s) {
  Tensor x = make_source(whole, from_p, from_s);
  if (std::getenv("GLOBAL_WORKER_TRACE")) {
    std::fprintf(stderr, "%s -> %s\n", layout_str(from_p, from_s).c_str(),
                 layout_str(to_p, to_s).c_str());
  }
  Tensor y = x.to_global(to_p, to_s);
  const std::string what = layout_str(from_p, from_s) + " -> " + layout_str(to_p, to_s) + " of " +
                           shape_str(whole.shape());
  check_global(y, whole, what);
  // Again, counting what this rank hands the backend: exactly what the plan
  // priced (the groups exist now, so nothing else communicates).
  const global::RankTraffic planned =
      global::rank_traffic(global::plan_boxing(x.meta(), to_p, to_s), g_rank);
  distributed::reset_traffic();
  (void)x.to_global(to_p, to_s);
  const distributed::Traffic moved = distributed::traffic();
  CHECK_WORKER(moved.calls == planned.calls &&
                   static_cast<double>(moved.payload_bytes) == planned.payload_bytes,
               what, ": the backend moved ", moved.payload_bytes, " bytes in ", moved.calls,
               " collectives; the plan priced ", planned.payload_bytes, " bytes in ",
               planned.calls);
  // The source is unchanged (boxing never writes into it).
  check_global(x, whole, "source after boxing");
}

std::vector<NdSbp> one_d_sbps() {
  return {Sbp::split(0),      Sbp::split(1),      Sbp::broadcast(),
          Sbp::partial_sum(), Sbp::partial_max(), Sbp::partial_min()};
}

void run_boxing(int n) {
  Tensor whole = tessera::testing::uniform({5, 7}, -3, 3, 11, DType::f32);
  Placement all = Placement::cpu(n);
  for (const NdSbp& from : one_d_sbps()) {
    for (const NdSbp& to : one_d_sbps()) convert_and_check(whole, all, from, all, to);
  }
  // Integer data moves too.
  Tensor ints = tessera::testing::uniform({6, 3}, -50, 50, 3, DType::f64).to(DType::i64);
  for (const NdSbp& from : {NdSbp(Sbp::split(0)), NdSbp(Sbp::partial_sum())}) {
    for (const NdSbp& to : {NdSbp(Sbp::split(1)), NdSbp(Sbp::broadcast())}) {
      convert_and_check(ints, all, from, all, to);
    }
  }
  // Every dtype moves (boolean masks and bf16 activations included): the
  // layouts that only move data, through all-gather, all-to-all and slicing.
  for (DType dtype : {DType::bf16, DType::f16, DType::i32, DType::u8, DType::boolean}) {
    Tensor typed = tessera::testing::uniform({6, 4}, -3, 3, 5, DType::f32).to(dtype);
    for (const NdSbp& from :
         {NdSbp(Sbp::split(0)), NdSbp(Sbp::split(1)), NdSbp(Sbp::broadcast())}) {
      for (const NdSbp& to :
           {NdSbp(Sbp::split(1)), NdSbp(Sbp::broadcast()), NdSbp(Sbp::split(0))}) {
        convert_and_check(typed, all, from, all, to);
      }
    }
  }
  // Between placements: a subset, the reversed order, and back.
  std::vector<int> reversed;
  for (int r = n; r-- > 0;) reversed.push_back(r);
  std::vector<int> first(reversed.rbegin() + 1, reversed.rend());  // [0, n-1)
  std::vector<int> last(reversed.begin(), reversed.end() - 1);     // ranks n-1 .. 1
  const std::vector<Placement> others{Placement(DeviceType::cpu, reversed),
                                      Placement(DeviceType::cpu, first),
                                      Placement(DeviceType::cpu, last)};
  for (const Placement& other : others) {
    for (const NdSbp& from : one_d_sbps()) {
      for (const NdSbp& to : {NdSbp(Sbp::split(0)), NdSbp(Sbp::split(1)), NdSbp(Sbp::broadcast()),
                              NdSbp(Sbp::partial_sum())}) {
        convert_and_check(whole, all, from, other, to);
        convert_and_check(whole, other, to, all, from);
      }
    }
  }
  if (n != 4) return;
  // A [2, 2] mesh: every pair of a representative set of 2-D SBPs.
  Placement mesh = Placement::cpu_mesh({2, 2});
  const Sbp s0 = Sbp::split(0), s1 = Sbp::split(1), b = Sbp::broadcast(), p = Sbp::partial_sum(),
            pmax = Sbp::partial_max();
  std::vector<NdSbp> two_d{NdSbp({s0, s1}), NdSbp({s0, s0}), NdSbp({b, s0}), NdSbp({p, s1}),
                           NdSbp({s1, p}),  NdSbp({b, b}),   NdSbp({p, p}),  NdSbp({pmax, b}),
                           NdSbp({s1, s0}), NdSbp({s1, s1}), NdSbp({p, b}),  NdSbp({b, p})};
  for (const NdSbp& from : two_d) {
    for (const NdSbp& to : two_d) convert_and_check(whole, mesh, from, mesh, to);
  }
  // 2-D <-> 1-D placements.
  for (const NdSbp& from : two_d) {
    convert_and_check(whole, mesh, from, all, Sbp::split(1));
    convert_and_check(whole, all, Sbp::partial_sum(), mesh, from);
  }
}

// Each registered SBP case, on global inputs laid out as each signature
// says, must give the single-process result.
void run_ops(int n) {
  Placement all = Placement::cpu(n);
  int cases = 0;
  for (const tessera::testing::SbpCase& sbp_case : tessera::testing::sbp_cases()) {
    const OpDef& op = find_op(sbp_case.op);
    std::vector<Tensor> inputs = sbp_case.inputs();
    if (inputs.empty()) continue;  // factories: see check_factories
    if (op.kind == OpKind::collective) continue;  // local tensors only: collective_grads
    MetaVector metas;
    for (const Tensor& input : inputs) metas.push_back(input.meta());
    NoGradGuard no_grad;
    // An in-place op writes its inputs: the reference writes copies.
    std::vector<Tensor> reference_inputs;
    for (const Tensor& input : inputs) {
      reference_inputs.push_back(op.writes.empty() ? input : input.clone());
    }
    std::vector<Tensor> expected = call(op, reference_inputs, sbp_case.attrs);
    for (const SbpSignature& signature : sbp_signatures(op, metas, sbp_case.attrs)) {
      std::vector<Tensor> global_inputs;
      for (size_t i = 0; i < inputs.size(); ++i) {
        // An in-place op writes its (global) inputs: each signature gets copies.
        const Tensor source = op.writes.empty() ? inputs[i] : inputs[i].clone();
        global_inputs.push_back(make_source(source, all, signature.inputs[i]));
      }
      const std::string where = "[" + sbp_case.op + "] " + signature_str(signature);
      std::vector<Tensor> outputs = call(op, global_inputs, sbp_case.attrs);
      // The same call on global meta tensors decides the same layouts.
      std::vector<Tensor> meta_inputs;
      for (const Tensor& input : global_inputs) meta_inputs.push_back(input.to_meta());
      std::vector<Tensor> meta_outputs = call(op, meta_inputs, sbp_case.attrs);
      CHECK_WORKER(meta_outputs.size() == outputs.size(), where, ": meta call gave ",
                   meta_outputs.size(), " outputs");
      for (size_t o = 0; o < outputs.size(); ++o) {
        CHECK_WORKER(meta_outputs[o].is_meta() && meta_outputs[o].shape() == outputs[o].shape() &&
                         meta_outputs[o].dtype() == outputs[o].dtype() &&
                         meta_outputs[o].nd_sbp() == outputs[o].nd_sbp(),
                     where, " output ", o, ": meta gave ", to_string(meta_outputs[o]),
                     ", the real call ", to_string(outputs[o]));
      }
      for (size_t o = 0; o < outputs.size(); ++o) {
        // Random ops (dropout) give the same values whatever the layout.
        check_global(outputs[o], expected[o], where + " output " + std::to_string(o),
                     std::max(sbp_case.rtol, 1e-4));
      }
      ++cases;
    }
  }
  CHECK_WORKER(cases > 100, "only ", cases, " signature cases ran");
}

// Global factories give the single-process values in any layout.
void check_factories(int n) {
  Placement all = Placement::cpu(n);
  for (const NdSbp& sbp : one_d_sbps()) {
    Generator a(42), b(42);
    check_global(rand({5, 3}, all, sbp, DType::f32, &a), rand({5, 3}, DType::f32, &b),
                 "rand " + nd_sbp_str(sbp));
    check_global(randn({3, 5}, all, sbp, DType::f32, &a), randn({3, 5}, DType::f32, &b),
                 "randn " + nd_sbp_str(sbp));
    check_global(full({4, 3}, 2.5, all, sbp), full({4, 3}, 2.5), "full " + nd_sbp_str(sbp));
    Tensor like = ones_like(zeros({7, 2}, all, sbp));
    CHECK_WORKER(like.nd_sbp() == sbp, "ones_like keeps the layout");
    check_global(like, ones({7, 2}), "ones_like " + nd_sbp_str(sbp));
  }
  if (n == 4) {
    // Each rank draws only its box, nested splits of one dim included.
    const Placement mesh = Placement::cpu_mesh({2, 2});
    for (const NdSbp& sbp :
         {NdSbp({Sbp::split(0), Sbp::split(1)}), NdSbp({Sbp::split(1), Sbp::split(1)}),
          NdSbp({Sbp::broadcast(), Sbp::split(0)})}) {
      Generator a(7), b(7);
      check_global(randn({5, 7}, mesh, sbp, DType::f32, &a), randn({5, 7}, DType::f32, &b),
                   "randn on [2, 2] " + nd_sbp_str(sbp));
      check_global(rand({3, 5}, mesh, sbp, DType::f64, &a), rand({3, 5}, DType::f64, &b),
                   "rand after it on [2, 2] " + nd_sbp_str(sbp));
    }
  }
  // copy_ into a global tensor from a local (logical) value and from a global one.
  Tensor value = tessera::testing::uniform({5, 4}, -1, 1, 9, DType::f32);
  for (const NdSbp& sbp : one_d_sbps()) {
    Tensor dst = zeros({5, 4}, all, sbp);
    dst.copy_(value);
    check_global(dst, value, "copy_ from local into " + nd_sbp_str(sbp));
    dst.zero_();
    dst.copy_(make_source(value, all, Sbp::split(1)));
    check_global(dst, value, "copy_ from S(1) into " + nd_sbp_str(sbp));
  }
}

void run_autograd(int n) {
  Placement all = Placement::cpu(n);
  Tensor x_whole = tessera::testing::uniform({7, 5}, -1, 1, 1, DType::f64);
  Tensor w_whole = tessera::testing::uniform({5, 3}, -1, 1, 2, DType::f64);
  Tensor c_whole = tessera::testing::uniform({7, 3}, -1, 1, 3, DType::f64);
  // Reference on whole tensors.
  Tensor w_ref = w_whole.clone().set_requires_grad();
  Tensor x_ref = x_whole.clone().set_requires_grad();
  sum(mul(relu(matmul(x_ref, w_ref)), c_whole)).backward();

  // Data split by rows, weight broadcast: the weight's gradient arrives
  // partial and is all-reduced into its own layout.
  for (const NdSbp& x_sbp : {NdSbp(Sbp::split(0)), NdSbp(Sbp::split(1)), NdSbp(Sbp::broadcast())}) {
    Tensor x = make_source(x_whole, all, x_sbp).detach().set_requires_grad();
    Tensor w = make_source(w_whole, all, Sbp::broadcast()).detach().set_requires_grad();
    Tensor c = make_source(c_whole, all, Sbp::split(0));
    Tensor loss = sum(mul(relu(matmul(x, w)), c));
    CHECK_WORKER(loss.is_global(), "loss is global");
    check_global(loss, sum(mul(relu(matmul(x_whole, w_whole)), c_whole)), "loss", 1e-9);
    loss.backward();
    CHECK_WORKER(w.grad().nd_sbp() == NdSbp(Sbp::broadcast()), "weight grad layout ",
                 nd_sbp_str(w.grad().nd_sbp()));
    CHECK_WORKER(x.grad().nd_sbp() == x_sbp, "input grad layout ", nd_sbp_str(x.grad().nd_sbp()));
    check_global(w.grad(), w_ref.grad(), "weight grad with x " + nd_sbp_str(x_sbp), 1e-9);
    check_global(x.grad(), x_ref.grad(), "input grad with x " + nd_sbp_str(x_sbp), 1e-9);
  }

  // Through to_global / to_local from local tensors: each rank's rows.
  global::Range rows = global::split_range(7, n, g_rank);
  Tensor mine = x_whole.narrow(0, rows.start, rows.size).clone().set_requires_grad();
  Tensor xg = mine.to_global(all, Sbp::split(0));
  CHECK_WORKER(xg.shape() == Shape({7, 5}), "logical shape ", shape_str(xg.shape()));
  Tensor w = make_source(w_whole, all, Sbp::broadcast()).detach().set_requires_grad();
  Tensor out = relu(matmul(xg, w)).to_global(all, Sbp::broadcast());
  sum(mul(out.to_local(), c_whole)).backward();
  // Each rank's loss uses the whole (broadcast) output: the ranks' losses
  // are one logical loss, as in SPMD.
  check_close(mine.grad(), x_ref.grad().narrow(0, rows.start, rows.size), 1e-9, "local input grad");
  check_global(w.grad(), w_ref.grad(), "weight grad through to_local", 1e-9);

  // Mean losses over split samples: the sums stay with each rank's samples
  // and only the divisor is made whole, so the gradient stays split. Class
  // weights, an ignored class and label smoothing change the divisor.
  const Tensor logits_whole = tessera::testing::uniform({9, 4}, -2, 2, 4, DType::f64);
  const Tensor target_whole = Tensor::from_vector<int64_t>({0, 3, 1, 2, 3, 1, 0, 2, 3}, {9});
  const Tensor class_weight = Tensor::from_vector<double>({0.5, 2.0, 1.0, 1.5}, {4});
  for (const bool weighted : {false, true}) {
    for (const double smoothing : {0.0, 0.1}) {
      const std::string what =
          str_cat("cross_entropy mean (weighted ", weighted, ", smoothing ", smoothing, ")");
      Tensor ref_logits = logits_whole.clone().set_requires_grad();
      Tensor ref = cross_entropy(ref_logits, target_whole, weighted ? class_weight : Tensor(), 1,
                                 "mean", smoothing);
      ref.backward();
      Tensor logits = make_source(logits_whole, all, Sbp::split(0)).detach().set_requires_grad();
      Tensor target = make_source(target_whole, all, Sbp::split(0));
      Tensor weight = weighted ? make_source(class_weight, all, Sbp::broadcast()) : Tensor();
      Tensor loss = cross_entropy(logits, target, weight, 1, "mean", smoothing);
      // Partial: each rank's samples summed where they are, none gathered.
      CHECK_WORKER(loss.nd_sbp() == NdSbp(Sbp::partial_sum()), what, " loss layout ",
                   nd_sbp_str(loss.nd_sbp()));
      check_global(loss, ref, what, 1e-12);
      loss.backward();
      CHECK_WORKER(logits.grad().nd_sbp() == NdSbp(Sbp::split(0)), what, " grad layout ",
                   nd_sbp_str(logits.grad().nd_sbp()));
      check_global(logits.grad(), ref_logits.grad(), what + " grad", 1e-12);
    }
  }
  {
    Tensor ref_input = log_softmax(logits_whole, 1).detach().set_requires_grad();
    Tensor ref = nll_loss(ref_input, target_whole, class_weight, 1, "mean");
    ref.backward();
    Tensor input = make_source(ref_input.detach(), all, Sbp::split(0)).detach().set_requires_grad();
    Tensor loss = nll_loss(input, make_source(target_whole, all, Sbp::split(0)),
                           make_source(class_weight, all, Sbp::broadcast()), 1, "mean");
    check_global(loss, ref, "nll_loss mean", 1e-12);
    loss.backward();
    check_global(input.grad(), ref_input.grad(), "nll_loss mean grad", 1e-12);
  }

  // Broadcast from local: the first rank's data wins.
  Tensor rank_value = full({2}, static_cast<double>(g_rank + 1), DType::f64);
  Tensor b = rank_value.to_global(all, Sbp::broadcast());
  check_close(b.to_local(), full({2}, 1.0, DType::f64), 0, "broadcast from local");
  CHECK_WORKER(rank_value.to_vector<double>()[0] == g_rank + 1, "caller's tensor kept");
}

void run_errors(int n) {
  Placement all = Placement::cpu(n);
  Tensor a = zeros({4, 4}, all, Sbp::split(0));
  Tensor other = zeros({4, 4}, Placement(DeviceType::cpu, {0}), Sbp::broadcast());
  std::string message = tessera::testing::error_of([&] { add(a, other); });
  CHECK_WORKER(message.find("[add]") != std::string::npos &&
                   message.find("share one placement") != std::string::npos &&
                   message.find("S(0)") != std::string::npos,
               message);
  message = tessera::testing::error_of([&] { a.to_global(all, Sbp::split(2)); });
  CHECK_WORKER(message.find("splits dim 2") != std::string::npos, message);
  message = tessera::testing::error_of([&] { a.to_global(Placement::cpu(n + 1), Sbp::split(0)); });
  CHECK_WORKER(message.find("processes") != std::string::npos, message);
  message = tessera::testing::error_of([&] { add(a, ones({4, 4})); });
  CHECK_WORKER(message.find("local tensor") != std::string::npos, message);
  message = tessera::testing::error_of([&] { (void)a.data<float>(); });
  CHECK_WORKER(message.find("to_local") != std::string::npos, message);
  // Shards that do not follow the uneven rule.
  Tensor piece = zeros({g_rank == 0 ? 1 : 3, 2});
  message = tessera::testing::error_of([&] { piece.to_global(all, Sbp::split(0)); });
  CHECK_WORKER(message.find("uneven") != std::string::npos, message);
}

// One way to lay out a training run; no placement means one process.
struct Layout {
  std::string name;
  Placement placement;
  std::map<std::string, global::TpStyle> plan;
  int dp_axis = -1;  // -1: the batch is broadcast
  int tp_axis = -1;
};

Tensor batch_on(const Tensor& whole, const Layout& layout) {
  if (!layout.placement.defined()) return whole;
  const int ndim = layout.placement.ndim();
  Tensor broadcast = whole.to_global(layout.placement, NdSbp::broadcast(ndim));
  if (layout.dp_axis < 0) return broadcast;
  return broadcast.to_global(layout.placement, global::batch_sbp(ndim, layout.dp_axis));
}

double value_of(const Tensor& loss) {
  if (!loss.is_global()) return loss.item<double>();
  return loss.to_global(loss.placement(), NdSbp::broadcast(loss.placement().ndim()))
      .to_local()
      .item<double>();
}

// What a training run gives: the loss of every step, and (when asked) the
// parameters at the end as whole tensors.
struct Track {
  std::vector<double> losses;
  std::vector<Tensor> parameters;
  std::string graph;  // the compiled step's IR, when compiled
};

// Trains `steps` steps with `layout`. `compiled`: each step runs as a graph
// (graph::compile), batch conversion, backward and update included.
// `clip`: gradients are clipped to norm 1 (on the host in eager, in the
// graph when compiled, so the two differ in rounding).
// The training modes' optimizers: AdamW (lr 3e-3) or SGD with momentum.
std::unique_ptr<optim::Optimizer> make_optimizer(nn::Module& model, bool adam) {
  if (adam) {
    optim::AdamWOptions options;
    options.lr = 3e-3;
    return std::make_unique<optim::AdamW>(model.parameters(), options);
  }
  optim::SGDOptions options;
  options.lr = 0.1;
  options.momentum = 0.9;
  return std::make_unique<optim::SGD>(model.parameters(), options);
}

template <typename Model, typename MakeModel, typename MakeBatch>
Track train_track(const Layout& layout, MakeModel make_model, MakeBatch make_batch, int steps,
                  bool adam, bool compiled, bool clip) {
  manual_seed(1234);
  std::shared_ptr<Model> model = make_model();
  if (layout.placement.defined()) {
    global::parallelize(*model, layout.placement, layout.plan, layout.tp_axis);
    for (const auto& [name, param] : model->named_parameters()) {
      CHECK_WORKER(param.is_global() && param.placement() == layout.placement, name);
      auto [module, leaf] =
          std::make_pair(name.substr(0, name.rfind('.')), name.substr(name.rfind('.') + 1));
      auto style = layout.plan.find(module);
      const bool split = style != layout.plan.end() &&
                         (leaf == "weight" || style->second == global::TpStyle::column);
      CHECK_WORKER(!param.nd_sbp().all_broadcast() == split, name, " is ",
                   nd_sbp_str(param.nd_sbp()));
    }
  }
  std::unique_ptr<optim::Optimizer> optimizer = make_optimizer(*model, adam);
  auto step = [&](const TensorVector& batch) -> TensorVector {
    Tensor logits = model->forward(batch_on(batch[0], layout));
    Tensor loss = cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                batch_on(batch[1], layout).reshape({-1}));
    optimizer->zero_grad();
    loss.backward();
    if (clip) optim::clip_grad_norm_(model->parameters(), 1.0);
    optimizer->step();
    return {loss};
  };
  graph::CompiledFunction compiled_step = graph::compile(step);
  Track track;
  for (int s = 0; s < steps; ++s) {
    auto [inputs, targets] = make_batch(s);
    const TensorVector batch{inputs, targets};
    Tensor loss = compiled ? compiled_step(batch)[0] : step(batch)[0];
    track.losses.push_back(value_of(loss));
  }
  if (compiled) {
    CHECK_WORKER(compiled_step.compiles() == 1, "compiled ", compiled_step.compiles(), " times");
    track.graph = compiled_step.last_graph().str();
  }
  NoGradGuard no_grad;
  for (const Tensor& param : model->parameters()) {
    track.parameters.push_back(
        param.is_global()
            ? param.to_global(param.placement(), NdSbp::broadcast(param.placement().ndim()))
                  .to_local()
            : param.detach().clone());
  }
  return track;
}

template <typename Model, typename MakeModel, typename MakeBatch>
std::vector<double> train(const Layout& layout, MakeModel make_model, MakeBatch make_batch,
                          int steps, bool adam) {
  return train_track<Model>(layout, make_model, make_batch, steps, adam, false, true).losses;
}

void check_tracks(const std::vector<double>& got, const std::vector<double>& want,
                  const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i) {
    const double relative = std::abs(got[i] - want[i]) / std::max(std::abs(want[i]), 1e-12);
    CHECK_WORKER(relative <= 1e-4, what, " step ", i, ": loss ", got[i], " vs one process ",
                 want[i], " (relative ", relative, ")");
  }
  if (g_rank == 0) {
    std::printf("%s: 20 steps, loss %.5f -> %.5f, matches one process\n", what.c_str(), got.front(),
                got.back());
  }
}

// The models the train and compile modes train. MLP 12-32-5, batch 10
// (uneven over 3 and 4 ranks), and its tensor-parallel plan.
std::shared_ptr<nn::Sequential> make_mlp() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(12, 32), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(32, 5)});
}
std::pair<Tensor, Tensor> mlp_batch(int step) {
  Generator gen(100 + static_cast<uint64_t>(step));
  return std::make_pair(randn({10, 12}, DType::f32, &gen), randint(0, 5, {10}, DType::i64, &gen));
}
const std::map<std::string, global::TpStyle> kMlpPlan{{"0", global::TpStyle::column},
                                                      {"2", global::TpStyle::row}};

// GPT (2 layers, d 16, 4 heads), batch 4 x 8 tokens, and its plan.
models::GPTConfig gpt_config(double dropout) {
  models::GPTConfig config;
  config.vocab_size = 24;
  config.context = 8;
  config.d_model = 16;
  config.heads = 4;
  config.layers = 2;
  config.dropout = dropout;
  return config;
}
std::pair<Tensor, Tensor> gpt_batch(int step) {
  Generator gen(500 + static_cast<uint64_t>(step));
  Tensor tokens = randint(0, 24, {4, 9}, DType::i64, &gen);
  return std::make_pair(tokens.narrow(1, 0, 8).contiguous(), tokens.narrow(1, 1, 8).contiguous());
}
std::map<std::string, global::TpStyle> gpt_tp_plan() {
  std::map<std::string, global::TpStyle> plan{{"token", global::TpStyle::vocab},
                                              {"head", global::TpStyle::column}};
  for (int b = 0; b < 2; ++b) {
    const std::string block = "blocks." + std::to_string(b) + ".";
    plan[block + "linear1"] = global::TpStyle::column;
    plan[block + "linear2"] = global::TpStyle::row;
  }
  return plan;
}

void run_train(int n) {
  const int steps = 20;
  std::vector<Layout> mlp_layouts{{"MLP data parallel", Placement::cpu(n), {}, 0, -1},
                                  {"MLP tensor parallel", Placement::cpu(n), kMlpPlan, -1, 0}};
  if (n == 4) {
    mlp_layouts.push_back({"MLP 2-D [2, 2]", Placement::cpu_mesh({2, 2}), kMlpPlan, 0, 1});
  }
  std::vector<double> reference =
      train<nn::Sequential>(Layout{}, make_mlp, mlp_batch, steps, false);
  for (const Layout& layout : mlp_layouts) {
    check_tracks(train<nn::Sequential>(layout, make_mlp, mlp_batch, steps, false), reference,
                 layout.name + " on " + std::to_string(n) + " ranks");
  }

  // The GPT, AdamW.
  const models::GPTConfig config = gpt_config(0.0);
  auto make_gpt = [config] { return std::make_shared<models::GPT>(config); };
  const std::map<std::string, global::TpStyle> gpt_plan = gpt_tp_plan();
  std::vector<Layout> gpt_layouts{{"GPT data parallel", Placement::cpu(n), {}, 0, -1},
                                  {"GPT tensor parallel", Placement::cpu(n), gpt_plan, -1, 0}};
  if (n == 4)
    gpt_layouts.push_back({"GPT 2-D [2, 2]", Placement::cpu_mesh({2, 2}), gpt_plan, 0, 1});
  reference = train<models::GPT>(Layout{}, make_gpt, gpt_batch, steps, true);
  for (const Layout& layout : gpt_layouts) {
    check_tracks(train<models::GPT>(layout, make_gpt, gpt_batch, steps, true), reference,
                 layout.name + " on " + std::to_string(n) + " ranks");
  }
}

// Trains the model on the layouts the planner chose for `mesh` (under a
// budget of `budget_fraction` of data parallel's predicted peak when
// positive): the losses of every step.
// `compiled`: each step runs as a graph on the plan (planner::compile).
template <typename Model, typename MakeModel, typename MakeBatch>
std::vector<double> train_auto(const Placement& mesh, MakeModel make_model, MakeBatch make_batch,
                               int steps, bool adam, double budget_fraction, planner::Plan& plan,
                               bool compiled = false) {
  manual_seed(1234);
  std::shared_ptr<Model> model = make_model();
  auto loss_of = [&](const TensorVector& batch) {
    Tensor logits = model->forward(batch[0]);
    return cross_entropy(logits.reshape({-1, logits.size(-1)}), batch[1].reshape({-1}));
  };
  auto [x0, y0] = make_batch(0);
  planner::PlanOptions options;
  options.optimizer_states = adam ? 2 : 1;
  if (budget_fraction > 0) {
    planner::PlanOptions data_parallel = options;
    data_parallel.mesh = mesh;
    // Data parallel over the whole mesh: the batch split on every axis.
    const NdSbp rows(std::vector<Sbp>(static_cast<size_t>(mesh.ndim()), Sbp::split(0)));
    data_parallel.pinned = {{"input 0", rows}, {"input 1", rows}};
    for (const auto& [name, param] : model->named_parameters()) {
      data_parallel.pinned.emplace(name, NdSbp::broadcast(mesh.ndim()));
    }
    const nn::Module::NamedTensors names = model->named_parameters();
    const double peak =
        planner::plan(planner::trace_step(*model, loss_of, {x0, y0}), data_parallel, names)
            .prediction.peak_bytes;
    options.memory_budget = budget_fraction * peak;
  }
  plan = planner::auto_parallelize(*model, mesh, loss_of, {x0, y0}, options);
  CHECK_WORKER(options.memory_budget == 0 || plan.prediction.peak_bytes <= options.memory_budget,
               "the plan needs ", plan.prediction.peak_bytes, " bytes, over the budget ",
               options.memory_budget);
  std::unique_ptr<optim::Optimizer> optimizer = make_optimizer(*model, adam);
  auto laid_out = [&](const Tensor& whole, const std::string& name) {
    return whole.to_global(mesh, NdSbp::broadcast(mesh.ndim())).to_global(mesh, plan.sbp_of(name));
  };
  std::vector<double> losses;
  if (compiled) {
    graph::CompiledFunction step =
        planner::compile(plan, [&](const TensorVector& batch) -> TensorVector {
          optimizer->zero_grad();
          Tensor loss = loss_of(batch);
          loss.backward();
          optim::clip_grad_norm_(model->parameters(), 1.0);
          optimizer->step();
          return {loss};
        });
    for (int s = 0; s < steps; ++s) {
      auto [inputs, targets] = make_batch(s);
      losses.push_back(value_of(step({inputs, targets})[0]));
    }
    CHECK_WORKER(step.compiles() == 1, "compiled ", step.compiles(), " times");
    bool threw = false;
    try {
      step({make_batch(0).first});
    } catch (const Error& error) {
      threw = std::string(error.what()).find("the plan has 2 inputs; the step was called with 1") !=
              std::string::npos;
    }
    CHECK_WORKER(threw, "a call with too few inputs is refused");
    return losses;
  }
  for (int s = 0; s < steps; ++s) {
    auto [inputs, targets] = make_batch(s);
    optimizer->zero_grad();
    Tensor loss;
    {
      // Every op call takes the plan's signature, as the prediction assumed.
      global::LayoutScript follow = plan.script();
      loss = loss_of({laid_out(inputs, "input 0"), laid_out(targets, "input 1")});
      loss.backward();
      // Eager issues some calls differently from the local trace (on
      // global tensors, a layer norm's backward is made of other ops); the
      // rest follow the plan.
      CHECK_WORKER(follow.followed() >= 3 * follow.missed(), "the step followed ",
                   follow.followed(), " of the plan's signatures; missed:\n", follow.missed_str());
      if (s == 0 && g_rank == 0) {
        std::printf("followed %d of the plan's %d signatures\n", follow.followed(),
                    follow.followed() + follow.missed());
      }
    }
    optim::clip_grad_norm_(model->parameters(), 1.0);
    optimizer->step();
    losses.push_back(value_of(loss));
  }
  return losses;
}

// Trains with graph::compile(step, {.mesh, .auto_parallel = true}), the
// model and optimizer made as for one device: the first call plans the
// step, lays the parameters out and runs it; later calls run it compiled.
// The losses of every step, and the plan.
template <typename Model, typename MakeModel, typename MakeBatch>
std::vector<double> train_graph_auto(const Placement& mesh, MakeModel make_model,
                                     MakeBatch make_batch, int steps, bool adam,
                                     planner::Plan& plan) {
  manual_seed(1234);
  std::shared_ptr<Model> model = make_model();
  std::unique_ptr<optim::Optimizer> optimizer = make_optimizer(*model, adam);
  graph::CompiledFunction step = graph::compile(
      [&](const TensorVector& batch) -> TensorVector {
        optimizer->zero_grad();
        Tensor logits = model->forward(batch[0]);
        Tensor loss = cross_entropy(logits.reshape({-1, logits.size(-1)}), batch[1].reshape({-1}));
        loss.backward();
        optim::clip_grad_norm_(model->parameters(), 1.0);
        optimizer->step();
        return {loss};
      },
      {.mesh = mesh, .auto_parallel = true, .names = model->named_parameters()});
  CHECK_WORKER(step.parallel_plan() == nullptr, "a plan before the first call");
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    auto [inputs, targets] = make_batch(s);
    losses.push_back(value_of(step({inputs, targets})[0]));
  }
  CHECK_WORKER(step.compiles() == 1, "compiled ", step.compiles(), " times");
  plan = planner::plan_of(step);
  CHECK_WORKER(step.parallel_plan()->explain() == plan.explain(), "two explanations");
  for (const auto& [name, param] : model->named_parameters()) {
    CHECK_WORKER(param.is_global() && placement_str(param.placement()) == placement_str(mesh),
                 "parameter '", name, "' was not laid out on the mesh");
    CHECK_WORKER(param.nd_sbp() == plan.sbp_of(name), "parameter '", name, "' is ",
                 nd_sbp_str(param.nd_sbp()), ", the plan says ", nd_sbp_str(plan.sbp_of(name)));
  }
  return losses;
}

void run_auto(int n) {
  const int steps = 20;
  const Placement mesh = n == 4 ? Placement::cpu_mesh({2, 2}) : Placement::cpu(n);
  const std::string on = " on " + placement_str(mesh);
  planner::Plan plan;
  const std::vector<double> mlp_reference =
      train<nn::Sequential>(Layout{}, make_mlp, mlp_batch, steps, false);
  check_tracks(train_auto<nn::Sequential>(mesh, make_mlp, mlp_batch, steps, false, 0, plan),
               mlp_reference, "MLP auto-parallel" + on);
  check_tracks(train_auto<nn::Sequential>(mesh, make_mlp, mlp_batch, steps, false, 0.7, plan),
               mlp_reference, "MLP auto-parallel in 0.7x data parallel's memory" + on);
  check_tracks(train_auto<nn::Sequential>(mesh, make_mlp, mlp_batch, steps, false, 0, plan, true),
               mlp_reference, "MLP auto-parallel, compiled" + on);
  check_tracks(train_graph_auto<nn::Sequential>(mesh, make_mlp, mlp_batch, steps, false, plan),
               mlp_reference, "MLP graph::compile auto_parallel" + on);
  if (g_rank == 0) std::printf("%s", plan.explain().c_str());

  const models::GPTConfig config = gpt_config(0.0);
  auto make_gpt = [config] { return std::make_shared<models::GPT>(config); };
  const std::vector<double> gpt_reference =
      train<models::GPT>(Layout{}, make_gpt, gpt_batch, steps, true);
  check_tracks(train_auto<models::GPT>(mesh, make_gpt, gpt_batch, steps, true, 0, plan),
               gpt_reference, "GPT auto-parallel" + on);
  check_tracks(train_auto<models::GPT>(mesh, make_gpt, gpt_batch, steps, true, 0, plan, true),
               gpt_reference, "GPT auto-parallel, compiled" + on);
  check_tracks(train_graph_auto<models::GPT>(mesh, make_gpt, gpt_batch, steps, true, plan),
               gpt_reference, "GPT graph::compile auto_parallel" + on);
}

// Compiled global training equals eager global training: the graph runs
// the local ops and collectives eager issues, in the same order, so the
// losses and parameters agree bit for bit (clipping off: its traced form
// rounds differently from the host's, see clip_grad_norm_), except the
// tensor-parallel GPT's, which agree to rounding.
void run_compile(int n) {
  const int steps = 12;
  const models::GPTConfig config = gpt_config(0.1);  // each run draws fresh masks, as eager does
  auto make_gpt = [config] { return std::make_shared<models::GPT>(config); };
  const std::map<std::string, global::TpStyle> gpt_plan = gpt_tp_plan();
  const std::map<std::string, global::TpStyle>& mlp_plan = kMlpPlan;
  std::vector<std::pair<bool, Layout>> cases{
      {false, {"MLP data parallel", Placement::cpu(n), {}, 0, -1}},
      {false, {"MLP tensor parallel", Placement::cpu(n), mlp_plan, -1, 0}},
      {true, {"GPT data parallel", Placement::cpu(n), {}, 0, -1}},
      {true, {"GPT tensor parallel", Placement::cpu(n), gpt_plan, -1, 0}}};
  if (n == 4) {
    cases.push_back({false, {"MLP 2-D [2, 2]", Placement::cpu_mesh({2, 2}), mlp_plan, 0, 1}});
    cases.push_back({true, {"GPT 2-D [2, 2]", Placement::cpu_mesh({2, 2}), gpt_plan, 0, 1}});
  }
  for (const auto& [gpt, layout] : cases) {
    auto run = [&](bool compiled) {
      return gpt ? train_track<models::GPT>(layout, make_gpt, gpt_batch, steps, true, compiled,
                                            false)
                 : train_track<nn::Sequential>(layout, make_mlp, mlp_batch, steps, false, compiled,
                                               false);
    };
    const Track eager = run(false);
    const Track compiled = run(true);
    const std::string what = layout.name + " on " + std::to_string(n) + " ranks";
    // Tensor-parallel GPT steps differ in rounding (not from a pass: it
    // stays with fusion and simplification off). The losses agree to 1e-6;
    // the parameters to 2e-3, as Adam turns the rounding noise of gradients
    // that are zero in exact arithmetic (the attention's key bias) into
    // steps of the learning rate's size. The rest agree exactly.
    const bool exact = !(gpt && layout.tp_axis >= 0);
    const double tol = exact ? 0.0 : 1e-6;
    for (size_t i = 0; i < eager.losses.size(); ++i) {
      const double gap = std::abs(compiled.losses[i] - eager.losses[i]);
      CHECK_WORKER(gap <= tol * std::abs(eager.losses[i]), what, " step ", i, ": compiled loss ",
                   compiled.losses[i], " vs eager ", eager.losses[i]);
    }
    CHECK_WORKER(compiled.parameters.size() == eager.parameters.size(), what);
    for (size_t p = 0; p < eager.parameters.size(); ++p) {
      check_close(compiled.parameters[p], eager.parameters[p], exact ? 0.0 : 2e-3,
                  what + " parameter " + std::to_string(p));
    }
    // The data movement is in the graph: gradient all-reduces (data
    // parallel) or the boxing of activations (tensor parallel).
    CHECK_WORKER(compiled.graph.find("all_reduce") != std::string::npos ||
                     compiled.graph.find("all_gather") != std::string::npos ||
                     compiled.graph.find("reduce_scatter") != std::string::npos,
                 what, ": no collective in the graph");
    CHECK_WORKER(compiled.graph.find("shard of") != std::string::npos, what);
    if (g_rank == 0) {
      std::printf("%s: %d steps compiled, loss %.5f -> %.5f, %s eager\n", what.c_str(), steps,
                  compiled.losses.front(), compiled.losses.back(),
                  exact ? "equal to" : "within 1e-6 of");
    }
  }
  if (n > 1) {
    // A collective's result is new memory each run; it goes after its last
    // use, not at the end of the run. Two gathers of n MiB, the first
    // summed before the second is made, take no more than one: keeping the
    // first to the end of the run would add its n MiB.
    const Placement all = Placement::cpu(n);
    const int64_t rows = 1024 * n;  // 256 f32 per row: n MiB gathered
    const Tensor x =
        ones({rows, 256}).to_global(all, NdSbp::broadcast(1)).to_global(all, NdSbp(Sbp::split(0)));
    auto gathered_sum = [&](const Tensor& t) {
      return t.to_global(all, NdSbp::broadcast(1)).sum();
    };
    graph::CompiledFunction one = graph::compile(
        [&](const TensorVector& in) -> TensorVector { return {gathered_sum(in[0])}; });
    graph::CompiledFunction two = graph::compile([&](const TensorVector& in) -> TensorVector {
      return {add(gathered_sum(in[0]), gathered_sum(mul(in[0], 2.0)))};
    });
    auto peak_mib = [&](graph::CompiledFunction& f, double expected) {
      for (int run = 0; run < 2; ++run) (void)f({x});  // eager, compile
      const int64_t before = CpuAllocator::instance().stats().current_bytes;
      CpuAllocator::instance().reset_peak();
      const double total = f({x})[0].to_local().item<double>();
      CHECK_WORKER(total == expected, "gathered sums: ", total, " where ", expected);
      return static_cast<double>(CpuAllocator::instance().stats().peak_bytes - before) / (1 << 20);
    };
    const double values = static_cast<double>(rows) * 256;
    const double one_peak = peak_mib(one, values);
    const double two_peak = peak_mib(two, 3 * values);
    CHECK_WORKER(one_peak >= n && two_peak < one_peak + 0.5 * n, "a compiled run with two ", n,
                 " MiB gathers took ", two_peak, " MiB, with one ", one_peak,
                 " MiB: the first is kept past its last use\n", two.last_graph().str());
  }
  if (n == 4) {
    // Boxing by slice intersections (one all-to-all of the exact pieces,
    // joined with cat) in a graph: (S(0), S(1)) to (S(1), S(0)) on [2, 2].
    const Placement grid = Placement::cpu_mesh({2, 2});
    const Tensor whole = arange(0, 48, 1, DType::f32).reshape({6, 8});
    const Tensor x = whole.to_global(grid, NdSbp::broadcast(2))
                         .to_global(grid, NdSbp({Sbp::split(0), Sbp::split(1)}));
    const NdSbp swapped({Sbp::split(1), Sbp::split(0)});
    graph::CompiledFunction box = graph::compile(
        [&](const TensorVector& in) -> TensorVector { return {in[0].to_global(grid, swapped)}; });
    (void)box({x});  // eager
    const Tensor y = box({x})[0];
    CHECK_WORKER(box.last_graph().str().find("all_to_all_single") != std::string::npos,
                 "the slice-intersection boxing is not in the graph:\n", box.last_graph().str());
    CHECK_WORKER(y.nd_sbp() == swapped, "boxed to ", nd_sbp_str(y.nd_sbp()));
    check_close(y.to_global(grid, NdSbp::broadcast(2)).to_local(), whole, 0.0,
                "slice-intersection boxing, compiled");
  }
}

// BatchNorm2d over a batch split on the ranks (7 rows: uneven over 2, 3 and 4
// ranks), two training steps and one in eval. Global statistics give one
// process's outputs, gradients and running statistics; per-rank statistics
// give, on each rank, what its shard alone gives (DDP's semantics), with the
// parameter gradients summed over the ranks.
void run_batch_norm(int n) {
  const Placement all = Placement::cpu(n);
  Generator gen(31);
  Tensor x = randn({7, 3, 4, 5}, DType::f32, &gen);
  Tensor g = randn({7, 3, 4, 5}, DType::f32, &gen);
  auto make = [] {
    auto bn = std::make_shared<nn::BatchNorm2d>(3);
    NoGradGuard no_grad;
    Generator init(8);
    bn->weight.copy_(add(rand({3}, DType::f32, &init), 0.5));
    bn->bias.copy_(randn({3}, DType::f32, &init));
    return bn;
  };
  const Layout split{"split", all, {}, 0, -1};
  auto whole = [](const Tensor& t) {
    return t.is_global() ? t.to_global(t.placement(), NdSbp::broadcast(t.placement().ndim())).to_local()
                         : t;
  };
  auto check = [&](const Tensor& got, const Tensor& want, const std::string& what) {
    auto result = tessera::testing::all_close(whole(got), want, 1e-4, 1e-5);
    CHECK_WORKER(result, "BatchNorm ", what, " on ", n, " ranks: ", result.message());
  };
  for (bool per_rank : {false, true}) {
    auto one = make();
    auto dp = make();
    global::parallelize(*dp, all, {});
    dp->set_per_rank_statistics(per_rank);
    const std::string mode = per_rank ? "per-rank " : "global ";
    // The reference: one process over the whole batch, or over this rank's rows.
    const global::Range rows = global::split_range(7, n, g_rank);
    Tensor x_ref = per_rank ? x.narrow(0, rows.start, rows.size).contiguous() : x;
    Tensor g_ref = per_rank ? g.narrow(0, rows.start, rows.size).contiguous() : g;
    for (int step = 0; step < 3; ++step) {
      if (step == 2) {
        one->eval();
        dp->eval();
      }
      Tensor leaf = x_ref.clone().set_requires_grad();
      Tensor y_ref = one->forward(leaf);
      one->weight.set_grad(Tensor());
      one->bias.set_grad(Tensor());
      sum(mul(y_ref, g_ref)).backward();
      Tensor x_global = batch_on(x, split).detach().set_requires_grad();
      Tensor y = dp->forward(x_global);
      dp->weight.set_grad(Tensor());
      dp->bias.set_grad(Tensor());
      sum(mul(y, batch_on(g, split))).backward();
      const std::string at = mode + "step " + std::to_string(step);
      if (per_rank) {
        check(y.to_local(), y_ref, at + " output");
        check(x_global.grad().to_local(), leaf.grad(), at + " input gradient");
        check(dp->running_mean.local_shard(), one->running_mean, at + " running_mean");
        check(dp->running_var.local_shard(), one->running_var, at + " running_var");
        // The parameter gradients: the sum of every rank's.
        Tensor summed = one->weight.grad().to_global(all, Sbp::partial_sum());
        check(dp->weight.grad(), whole(summed), at + " weight gradient");
      } else {
        check(y, y_ref, at + " output");
        check(x_global.grad(), leaf.grad(), at + " input gradient");
        check(dp->running_mean, one->running_mean, at + " running_mean");
        check(dp->running_var, one->running_var, at + " running_var");
        check(dp->weight.grad(), one->weight.grad(), at + " weight gradient");
        check(dp->bias.grad(), one->bias.grad(), at + " bias gradient");
      }
    }
  }
  if (g_rank == 0) std::printf("batch norm checks passed\n");
}

std::shared_ptr<nn::Sequential> checkpoint_mlp() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(6, 10), std::make_shared<nn::GELU>(),
      std::make_shared<nn::Linear>(10, 4)});
}

Tensor checkpoint_input() {
  Generator gen(77);
  return randn({5, 6}, DType::f32, &gen);
}

void run_checkpoint(int n, const std::string& mode, const std::string& dir) {
  using global::TpStyle;
  Placement all = Placement::cpu(n);
  if (mode == "ckpt_save") {
    manual_seed(1);
    auto model = checkpoint_mlp();
    global::parallelize(*model, all, {{"0", TpStyle::column}, {"2", TpStyle::row}});
    optim::SGD sgd(model->parameters(), {0.5});
    for (int step = 0; step < 3; ++step) {
      Tensor x = checkpoint_input().to_global(all, Sbp::broadcast());
      Tensor loss = sum(square(model->forward(x)));
      sgd.zero_grad();
      loss.backward();
      sgd.step();
    }
    global::save_sharded(dir, model->state_dict());
    Tensor out = model->forward(checkpoint_input().to_global(all, Sbp::broadcast()));
    StateDict expected;
    expected.insert("output", Tensor::from_vector(out.to_vector<float>(), out.shape()));
    if (g_rank == 0) io::save_safetensors(dir + "/expected_output.safetensors", expected);
    return;
  }
  manual_seed(999);  // different initial values: only the checkpoint can make them agree
  auto model = checkpoint_mlp();
  if (n > 1) global::parallelize(*model, all, {});
  global::load_sharded(dir, model->state_dict());
  Tensor x = checkpoint_input();
  if (n > 1) x = x.to_global(all, Sbp::broadcast()).to_global(all, Sbp::split(0));
  Tensor out = model->forward(x);
  Tensor expected = io::load_safetensors(dir + "/expected_output.safetensors").tensors.at("output");
  Tensor got = Tensor::from_vector(out.to_vector<float>(), out.shape());
  check_close(got, expected, 1e-6, "outputs after loading on " + std::to_string(n) + " ranks");
  std::string message = tessera::testing::error_of([&] {
    auto other = std::make_shared<nn::Linear>(6, 3);
    global::load_sharded(dir, other->state_dict());
  });
  CHECK_WORKER(message.find("missing keys") != std::string::npos, message);
}

// ---- collective_grads --------------------------------------------------

// Rank q's input of one case: the same numbers on every rank that computes it.
Tensor case_input(const Shape& shape, int q, uint64_t salt) {
  Generator gen(1000 * salt + static_cast<uint64_t>(q));
  return randn(shape, DType::f64, &gen);
}

struct CollectiveCase {
  std::string name;
  std::vector<int> ranks;                   // who takes part (empty: everyone)
  std::function<Shape(int)> input_shape;    // per rank
  std::function<Tensor(const Tensor&)> op;  // this rank's call
  // This rank's expected output from every member's input (by position).
  std::function<Tensor(const std::vector<Tensor>&, int)> reference;
};

// Sum over ranks of sum(weights_r * op(x_r)): every rank's own loss, added.
double total_loss(const std::vector<double>& own) {
  Tensor value = Tensor::from_vector(own, {1});
  distributed::default_group()->all_reduce(value);
  return value.to_vector<double>()[0];
}

void check_collective(const CollectiveCase& c, int n, uint64_t salt) {
  std::vector<int> ranks = c.ranks;
  if (ranks.empty()) {
    for (int r = 0; r < n; ++r) ranks.push_back(r);
  }
  const auto member = std::find(ranks.begin(), ranks.end(), g_rank);
  const bool in = member != ranks.end();
  const int k = in ? static_cast<int>(member - ranks.begin()) : -1;
  std::vector<Tensor> inputs;  // by position
  for (int r : ranks) inputs.push_back(case_input(c.input_shape(r), r, salt));

  Tensor x, weights;
  if (in) {
    x = inputs[static_cast<size_t>(k)].clone().set_requires_grad();
    Tensor y = c.op(x);
    check_close(y, c.reference(inputs, k), 1e-12, c.name + " output");
    Generator gen(7000 + salt + static_cast<uint64_t>(g_rank));
    weights = randn(y.shape(), DType::f64, &gen);
    sum(mul(y, weights)).backward();
    CHECK_WORKER(x.grad().defined(), c.name, ": no gradient reached the input");
  }
  // Finite differences, one element of one rank's input at a time: every
  // rank runs the op, and the losses of all ranks are added.
  auto loss_with = [&](int rank, int64_t element, double delta) {
    double own = 0;
    if (in) {
      NoGradGuard no_grad;
      Tensor probe = inputs[static_cast<size_t>(k)].clone();
      if (rank == g_rank) {
        Tensor flat = probe.reshape({-1});
        flat.narrow(0, element, 1).add_(delta);
      }
      own = sum(mul(c.op(probe), weights)).item<double>();
    }
    return total_loss({own});
  };
  const double h = 1e-3;
  for (size_t position = 0; position < ranks.size(); ++position) {
    const int rank = ranks[position];
    const int64_t count = numel(c.input_shape(rank));
    for (int64_t e = 0; e < count; ++e) {
      const double numeric = (loss_with(rank, e, h) - loss_with(rank, e, -h)) / (2 * h);
      if (rank != g_rank) continue;
      const double analytic = x.grad().reshape({-1}).to_vector<double>()[static_cast<size_t>(e)];
      CHECK_WORKER(std::abs(numeric - analytic) <= 1e-6 * (1 + std::abs(numeric)), c.name,
                   ": d loss / d x[", e, "] on rank ", rank, " is ", analytic, " by backward and ",
                   numeric, " by finite differences");
    }
  }
}

void run_collective_grads(int n) {
  using global::split_range;
  auto sum_all = [](const std::vector<Tensor>& xs) {
    Tensor total = zeros_like(xs[0]);
    for (const Tensor& x : xs) total = add(total, x);
    return total;
  };
  const auto n64 = static_cast<int64_t>(n);
  std::vector<int64_t> gather_sizes;  // rank r has r + 1 columns
  for (int r = 0; r < n; ++r) gather_sizes.push_back(r + 1);
  std::vector<CollectiveCase> cases;
  cases.push_back({"all_reduce",
                   {},
                   [](int) {
                     return Shape{3, 2};
                   },
                   [](const Tensor& x) { return global::all_reduce(x); },
                   [&](const std::vector<Tensor>& xs, int) { return sum_all(xs); }});
  cases.push_back({"all_reduce on ranks {1, 0}",
                   {1, 0},
                   [](int) { return Shape{4}; },
                   [](const Tensor& x) {
                     return global::all_reduce(x, distributed::ReduceOp::sum, {1, 0});
                   },
                   [&](const std::vector<Tensor>& xs, int) { return sum_all(xs); }});
  cases.push_back({"all_gather (uneven, dim 1)",
                   {},
                   [](int r) {
                     return Shape{2, r + 1};
                   },
                   [&](const Tensor& x) { return global::all_gather(x, 1, {}, gather_sizes); },
                   [](const std::vector<Tensor>& xs, int) { return cat(xs, 1); }});
  cases.push_back({"all_gather (uneven, the middle of 3 dims)",
                   {},
                   [](int r) {
                     return Shape{2, r + 1, 3};
                   },
                   [&](const Tensor& x) { return global::all_gather(x, 1, {}, gather_sizes); },
                   [](const std::vector<Tensor>& xs, int) { return cat(xs, 1); }});
  for (int64_t rows : {2 * n64, 2 * n64 + 1}) {
    cases.push_back({"reduce_scatter of " + std::to_string(rows) + " rows",
                     {},
                     [rows](int) {
                       return Shape{rows, 2};
                     },
                     [](const Tensor& x) { return global::reduce_scatter(x, 0); },
                     [&, rows](const std::vector<Tensor>& xs, int k) {
                       const global::Range r = split_range(rows, n64, k);
                       return sum_all(xs).narrow(0, r.start, r.size);
                     }});
  }
  // Rank r has r + 1 rows and n + 1 columns; column pieces of split_range.
  cases.push_back(
      {"all_to_all (uneven)",
       {},
       [n](int r) {
         return Shape{r + 1, n + 1};
       },
       [&](const Tensor& x) { return global::all_to_all(x, 1, 0, {}, {}, gather_sizes); },
       [&](const std::vector<Tensor>& xs, int k) {
         std::vector<Tensor> pieces;
         const global::Range r = split_range(n64 + 1, n64, k);
         for (const Tensor& x : xs) pieces.push_back(x.narrow(1, r.start, r.size));
         return cat(pieces, 0);
       }});
  // Rank r has n + 1 rows and r + 1 columns: row pieces, joined along columns.
  cases.push_back(
      {"all_to_all (uneven, joined along dim 1)",
       {},
       [n](int r) {
         return Shape{n + 1, r + 1};
       },
       [&](const Tensor& x) { return global::all_to_all(x, 0, 1, {}, {}, gather_sizes); },
       [&](const std::vector<Tensor>& xs, int k) {
         std::vector<Tensor> pieces;
         const global::Range r = split_range(n64 + 1, n64, k);
         for (const Tensor& x : xs) pieces.push_back(x.narrow(0, r.start, r.size));
         return cat(pieces, 1);
       }});
  // Rank r sends (r + 2q) % 3 rows (some none) to rank q.
  auto rows_to = [](int r, int q) { return static_cast<int64_t>((r + 2 * q) % 3); };
  auto sizes_from = [n, rows_to](int r, bool sending) {
    std::vector<int64_t> sizes;
    for (int q = 0; q < n; ++q) sizes.push_back(sending ? rows_to(r, q) : rows_to(q, r));
    return sizes;
  };
  cases.push_back({"all_to_all_single (uneven, empty pieces)",
                   {},
                   [n, rows_to](int r) {
                     int64_t rows = 0;
                     for (int q = 0; q < n; ++q) rows += rows_to(r, q);
                     return Shape{rows, 2};
                   },
                   [&](const Tensor& x) {
                     return global::all_to_all_single(x, sizes_from(g_rank, false),
                                                      sizes_from(g_rank, true));
                   },
                   [n, rows_to](const std::vector<Tensor>& xs, int k) {
                     std::vector<Tensor> pieces;
                     for (int r = 0; r < n; ++r) {
                       int64_t start = 0;
                       for (int q = 0; q < k; ++q) start += rows_to(r, q);
                       pieces.push_back(xs[static_cast<size_t>(r)].narrow(0, start, rows_to(r, k)));
                     }
                     return cat(pieces, 0);
                   }});
  cases.push_back(
      {"broadcast from the last rank",
       {},
       [](int) {
         return Shape{2, 3};
       },
       [n](const Tensor& x) { return global::broadcast(x, n - 1); },
       [n](const std::vector<Tensor>& xs, int) { return xs[static_cast<size_t>(n - 1)]; }});
  // The _async forms, waited on at once, give the same values and gradients.
  cases.push_back({"all_reduce (async)",
                   {},
                   [](int) {
                     return Shape{3, 2};
                   },
                   [](const Tensor& x) { return global::all_reduce_async(x).wait(); },
                   [&](const std::vector<Tensor>& xs, int) { return sum_all(xs); }});
  cases.push_back(
      {"all_gather (async, uneven, dim 1)",
       {},
       [](int r) {
         return Shape{2, r + 1};
       },
       [&](const Tensor& x) { return global::all_gather_async(x, 1, {}, gather_sizes).wait(); },
       [](const std::vector<Tensor>& xs, int) { return cat(xs, 1); }});
  uint64_t salt = 1;
  for (const CollectiveCase& c : cases) check_collective(c, n, salt++);

  // Several collectives in flight at once, with compute between them; a
  // kernel reading a buffer that an in-place all-reduce still writes waits.
  {
    std::vector<Tensor> a, b, c;
    for (int r = 0; r < n; ++r) {
      a.push_back(case_input({64}, r, 200));
      b.push_back(case_input({3, 5}, r, 201));
      c.push_back(case_input({8}, r, 202));
    }
    global::PendingTensor ra = global::all_reduce_async(a[static_cast<size_t>(g_rank)]);
    global::PendingTensor rb = global::all_gather_async(b[static_cast<size_t>(g_rank)], 0);
    Tensor buffer = c[static_cast<size_t>(g_rank)].clone();
    global::PendingTensor rc = global::all_reduce_async_(buffer);
    if (n >= 3 && (g_rank == 0 || g_rank == 2)) {
      // A sub-group made while the world has work in flight: making it is
      // a collective of its own, on this thread, after that work.
      Tensor pair =
          global::all_reduce(c[static_cast<size_t>(g_rank)], distributed::ReduceOp::sum, {0, 2});
      check_close(pair, add(c[0], c[2]), 1e-12, "a new sub-group while collectives are in flight");
    }
    Tensor product = matmul(ones({48, 48}), ones({48, 48}));
    check_close(product, full({48, 48}, 48.0), 0, "compute while collectives are in flight");
    check_close(rb.wait(), cat(b, 0), 0, "all_gather in flight");
    check_close(ra.wait(), sum_all(a), 1e-12, "all_reduce in flight");
    check_close(add(buffer, 0.0), sum_all(c), 1e-12, "all_reduce_ in flight, read by a kernel");
    CHECK_WORKER(rc.is_completed(), "the in-place all-reduce was waited for by the kernel");
  }

  // Point to point: rank 2p sends 3x to rank 2p + 1, whose loss is
  // sum(y * y * w); the gradient comes back through the send's token.
  const int partner = g_rank ^ 1;
  if (partner < n) {
    const Shape shape{2, 3};
    if (g_rank % 2 == 0) {
      Tensor x = case_input(shape, g_rank, 300).clone().set_requires_grad();
      Tensor h = mul(x, 3.0);
      Tensor token = global::send(h, partner, 7);
      CHECK_WORKER(token.dim() == 0 && token.item<float>() == 0.0f, "send's token is a 0-d zero");
      token.backward();
      CHECK_WORKER(x.grad().defined(), "send: no gradient came back");
      const Tensor w = case_input(shape, partner, 301);
      check_close(x.grad(), mul(mul(h.detach(), w), 6.0), 1e-12, "send gradient");
    } else {
      Tensor y = global::recv_async(shape, DType::f64, partner, 7).wait().set_requires_grad();
      check_close(y, mul(case_input(shape, partner, 300), 3.0), 0, "recv");
      sum(mul(mul(y, y), case_input(shape, g_rank, 301))).backward();
      global::send(y.grad(), partner, 7);
    }
  }
  const std::string to_self = tessera::testing::error_of([&] { global::send(ones({2}), g_rank); });
  CHECK_WORKER(to_self.find("[send] peer " + std::to_string(g_rank) + " is this rank itself") !=
                   std::string::npos,
               "got: ", to_self);

  // max has no gradient, and the message says so.
  Tensor x = case_input({3}, g_rank, 99).set_requires_grad();
  Tensor y = global::all_reduce(x, distributed::ReduceOp::max);
  Tensor expected = case_input({3}, 0, 99);
  for (int r = 1; r < n; ++r) expected = maximum(expected, case_input({3}, r, 99));
  check_close(y, expected, 0, "all_reduce max");
  const std::string error = tessera::testing::error_of([&] { sum(y).backward(); });
  CHECK_WORKER(error.find("[all_reduce] with reduce=max has no gradient") != std::string::npos,
               "got: ", error);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "boxing";
  try {
    auto world = distributed::init_process_group();
    g_rank = world->rank();
    const int n = world->size();
    if (mode == "boxing") {
      run_boxing(n);
    } else if (mode == "ops") {
      run_ops(n);
      check_factories(n);
    } else if (mode == "autograd") {
      run_autograd(n);
    } else if (mode == "ckpt_save" || mode == "ckpt_load") {
      CHECK_WORKER(argc > 2, "checkpoint modes need a folder");
      run_checkpoint(n, mode, argv[2]);
    } else if (mode == "diverge") {  // run with TESSERA_DEBUG_SPMD=1
      Tensor a = ones({4}, Placement::cpu(n), Sbp::split(0));
      Tensor b = g_rank == n - 1 ? mul(a, a) : add(a, a);
      (void)b;
    } else if (mode == "item_alone") {  // run with TESSERA_DEBUG_SPMD=1
      Tensor loss = sum(ones({4}, Placement::cpu(n), Sbp::split(0)));
      // Rank 0 alone reads the loss: item() on a global tensor is a collective.
      if (g_rank == 0) std::printf("loss %g\n", static_cast<double>(loss.item<float>()));
      Tensor next = add(loss, loss);
      (void)next;
    } else if (mode == "batch_norm") {
      run_batch_norm(n);
    } else if (mode == "train") {
      run_train(n);
    } else if (mode == "auto") {
      run_auto(n);
    } else if (mode == "compile") {
      run_compile(n);
    } else if (mode == "errors") {
      run_errors(n);
    } else if (mode == "collective_grads") {
      run_collective_grads(n);
    } else {
      std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
      return 2;
    }
    world->barrier();
    std::printf("%s: %d checks passed\n", mode.c_str(), g_checks);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "rank %d failed: %s\n", g_rank, error.what());
    return 1;
  }
}
