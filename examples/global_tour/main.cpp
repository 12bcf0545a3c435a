// A tour of global tensors, the code of docs/global_tensors.md. Run it on
// four processes:
//
//   ./build/tools/tessera-run -n 4 ./build/examples/global_tour
//
// Every rank runs this same program (SPMD). Each step prints what rank 0
// sees and checks the values against one-process results; a mismatch exits 1.
#include <cstdio>
#include <cstdlib>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "global_tour: %s is wrong\n", what);
    std::exit(1);
  }
}

bool same(const Tensor& a, const Tensor& b) {
  return max(abs(sub(a, b))).item<double>() < 1e-5;
}

}  // namespace

namespace {

int run() {
  // --- 1. Placement and SBP -------------------------------------------------
  auto world = distributed::init_process_group();  // RANK, WORLD_SIZE from tessera-run
  const int rank = world->rank();
  expect(world->size() == 4, "the number of processes (run with tessera-run -n 4)");
  const Placement ranks = Placement::cpu(world->size());  // a 1-D mesh [0, 1, 2, 3]

  manual_seed(0);
  Tensor a = randn({6, 4});  // the same values on every rank (same seed)
  Tensor rows = a.to_global(ranks, Sbp::broadcast()).to_global(ranks, Sbp::split(0));
  if (rank == 0) {
    std::printf("logical shape %s, this rank holds %s\n", shape_str(rows.shape()).c_str(),
                shape_str(rows.to_local().shape()).c_str());
  }

  // --- 2. Ops on global tensors ---------------------------------------------
  Tensor w = randn({4, 3}).to_global(ranks, Sbp::broadcast());
  Tensor y = relu(matmul(rows, w));  // runs as (S(0), B) -> S(0): no communication
  expect(y.nd_sbp() == NdSbp(Sbp::split(0)), "the layout of y");
  expect(same(y.to_global(ranks, Sbp::broadcast()).to_local(), relu(matmul(a, w.to_local()))),
         "y");

  // --- 3. Boxing --------------------------------------------------------------
  Tensor cols = rows.to_global(ranks, Sbp::split(1));     // all-to-all
  Tensor whole = cols.to_global(ranks, Sbp::broadcast());  // all-gather
  expect(same(whole.to_local(), a), "S(0) -> S(1) -> B");
  Tensor partial = matmul(rows.to_global(ranks, Sbp::split(1)), w.to_global(ranks, Sbp::split(0)));
  if (rank == 0) std::printf("inner dim split: x @ w is %s\n", nd_sbp_str(partial.nd_sbp()).c_str());
  expect(same(partial.to_global(ranks, Sbp::broadcast()).to_local(), matmul(a, w.to_local())),
         "the all-reduce of a partial sum");

  // --- 4. Data parallel -------------------------------------------------------
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 2)});
  global::parallelize(*model, ranks, {});  // every parameter broadcast
  optim::SGD sgd(model->parameters(), {.lr = 0.1});
  Tensor inputs = randn({8, 4});
  Tensor batch = inputs.to_global(ranks, Sbp::broadcast()).to_global(ranks, Sbp::split(0));
  Tensor labels =
      randint(0, 2, {8}).to_global(ranks, Sbp::broadcast()).to_global(ranks, Sbp::split(0));
  Tensor loss = cross_entropy(model->forward(batch), labels);
  loss.backward();  // weight gradients arrive P(sum) and are all-reduced to B
  sgd.step();
  const double dp_loss = loss.item<double>();  // a collective: every rank asks
  if (rank == 0) std::printf("data parallel: loss %.4f\n", dp_loss);

  // --- 5. Tensor parallel -----------------------------------------------------
  auto mlp = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 2)});
  Tensor expected = mlp->forward(inputs).detach();  // one process, before the split
  global::parallelize(*mlp, ranks, {{"0", global::TpStyle::column}, {"2", global::TpStyle::row}});
  if (rank == 0) std::printf("%s", global::describe_layout(*mlp).c_str());
  Tensor out = mlp->forward(batch.to_global(ranks, Sbp::broadcast()));  // ends P(sum)
  expect(same(out.to_global(ranks, Sbp::broadcast()).to_local(), expected),
         "the tensor-parallel output");

  // --- 6. Two dimensions: data x tensor on a [2, 2] mesh ----------------------
  const Placement mesh = Placement::cpu_mesh({2, world->size() / 2});
  auto net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 2)});
  global::parallelize(*net, mesh, {{"0", global::TpStyle::column}, {"2", global::TpStyle::row}},
                      /*tp_axis=*/1);
  Tensor batch_2d = batch.to_global(mesh, global::batch_sbp(2, /*dp_axis=*/0));
  Tensor labels_2d = labels.to_global(mesh, global::batch_sbp(2, /*dp_axis=*/0));
  Tensor loss_2d = cross_entropy(net->forward(batch_2d), labels_2d);
  loss_2d.backward();
  const double loss_2d_value = loss_2d.item<double>();
  if (rank == 0) std::printf("2-D: loss %.4f on %s\n", loss_2d_value, placement_str(mesh).c_str());
  if (rank == 0) std::printf("global_tour: all checks passed\n");
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "global_tour: %s\n", error.what());
    return 1;
  }
}
