// mm, bmm, mv, dot, outer, addmm, addmv, baddbmm, addbmm, tensordot, diag,
// diagonal, trace, cross: hand values and PyTorch in the same run (values
// and gradients, empty and non-contiguous inputs).

#include <cmath>
#include <limits>

#include "testing.h"
#include "torch_check.h"

namespace tessera::testing {
namespace {

using V = std::vector<Tensor>;

TEST(Linalg, HandValues) {
  Tensor m = make({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(all_close(mv(m, make({1, 1}, {2})), {3, 7}));
  EXPECT_TRUE(all_close(dot(make({1, 2, 3}, {3}), make({4, 5, 6}, {3})), {32}));
  EXPECT_TRUE(all_close(trace(m), {5}));
  EXPECT_TRUE(all_close(diag(make({1, 2}, {2}), 1), {0, 1, 0, 0, 0, 2, 0, 0, 0}));
  EXPECT_TRUE(all_close(diagonal(m, -1), {3}));
  EXPECT_TRUE(all_close(cross(make({1, 0, 0}, {3}), make({0, 1, 0}, {3})), {0, 0, 1}));
  EXPECT_TRUE(all_close(addmm(make({10.0}), m, m, 0.5, 2), {19, 25, 35, 49}));
  // beta = 0: NaN and inf in the input are not propagated (PyTorch's docs).
  Tensor poisoned = make({std::nan(""), std::numeric_limits<double>::infinity(), 1, 1}, {2, 2});
  EXPECT_TRUE(all_close(addmm(poisoned, m, m, 0, 1), {7, 10, 15, 22}));
  EXPECT_TRUE(all_close(baddbmm(poisoned.unsqueeze(0), m.unsqueeze(0), m.unsqueeze(0), 0, 1),
                        {7, 10, 15, 22}));
}

TEST(LinalgTorch, Products) {
  EXPECT_TRUE(sweep_torch("torch.mm(a, b)", {{{3, 4}, {4, 5}}, {{0, 4}, {4, 2}}, {{3, 0}, {0, 2}}},
                          [](const V& x) { return mm(x[0], x[1]); }));
  EXPECT_TRUE(sweep_torch("torch.bmm(a, b)", {{{2, 3, 4}, {2, 4, 5}}, {{0, 3, 4}, {0, 4, 5}}},
                          [](const V& x) { return bmm(x[0], x[1]); }));
  EXPECT_TRUE(sweep_torch("torch.mv(a, b)", {{{3, 4}, {4}}, {{0, 4}, {4}}},
                          [](const V& x) { return mv(x[0], x[1]); }));
  EXPECT_TRUE(sweep_torch("torch.dot(a, b)", {{{4}, {4}}, {{0}, {0}}, {{3}, {4}}},
                          [](const V& x) { return dot(x[0], x[1]); }));
  EXPECT_TRUE(sweep_torch("torch.outer(a, b)", {{{4}, {3}}, {{0}, {3}}},
                          [](const V& x) { return outer(x[0], x[1]); }));
  EXPECT_TRUE(sweep_torch("torch.addmm(a, b, c, beta=0.5, alpha=2)",
                          {{{3, 5}, {3, 4}, {4, 5}}, {{5}, {3, 4}, {4, 5}}, {{}, {2, 0}, {0, 3}}},
                          [](const V& x) { return addmm(x[0], x[1], x[2], 0.5, 2); }));
  EXPECT_TRUE(sweep_torch("torch.addmv(a, b, c)", {{{3}, {3, 4}, {4}}},
                          [](const V& x) { return addmv(x[0], x[1], x[2]); }));
  EXPECT_TRUE(sweep_torch("torch.baddbmm(a, b, c, beta=0.5, alpha=-1)",
                          {{{2, 3, 5}, {2, 3, 4}, {2, 4, 5}}},
                          [](const V& x) { return baddbmm(x[0], x[1], x[2], 0.5, -1); }));
  // PyTorch 1.13's baddbmm with beta=0 and inputs that require grad leaves
  // some outputs uninitialised (NaN now and then), so beta=0 is compared
  // with the product it documents: input ignored, its gradient zero.
  EXPECT_TRUE(sweep_torch("-torch.bmm(b, c) + 0 * a", {{{2, 3, 5}, {2, 3, 4}, {2, 4, 5}}},
                          [](const V& x) { return baddbmm(x[0], x[1], x[2], 0, -1); }));
  EXPECT_TRUE(sweep_torch("torch.addbmm(a, b, c)", {{{3, 5}, {2, 3, 4}, {2, 4, 5}}},
                          [](const V& x) { return addbmm(x[0], x[1], x[2]); }));
  EXPECT_TRUE(sweep_torch("torch.tensordot(a, b, 2)", {{{2, 3, 4}, {3, 4, 5}}, {{3, 4}, {3, 4}}},
                          [](const V& x) { return tensordot(x[0], x[1], 2); }));
  EXPECT_TRUE(sweep_torch("torch.tensordot(a, b, ([0, 2], [2, 0]))", {{{2, 3, 4}, {4, 5, 2}}},
                          [](const V& x) { return tensordot(x[0], x[1], {0, 2}, {2, 0}); }));
  EXPECT_TRUE(sweep_torch("torch.tensordot(a, b, 0)", {{{2}, {3}}},
                          [](const V& x) { return tensordot(x[0], x[1], 0); }));
}

TEST(LinalgTorch, DiagonalsAndCross) {
  for (int64_t k : {-2, -1, 0, 1, 3}) {
    EXPECT_TRUE(sweep_torch("torch.diag(a, " + std::to_string(k) + ")", {{{3}}, {{3, 4}}, {{0}}},
                            [k](const V& x) { return diag(x[0], k); }));
    EXPECT_TRUE(sweep_torch("torch.diagonal(a, " + std::to_string(k) + ", 0, -1)",
                            {{{3, 4}}, {{2, 3, 4}}, {{0, 3}}},
                            [k](const V& x) { return diagonal(x[0], k, 0, -1); }));
  }
  EXPECT_TRUE(sweep_torch("torch.diagonal(a, 1, 2, 1)", {{{2, 3, 4}}},
                          [](const V& x) { return diagonal(x[0], 1, 2, 1); }));
  EXPECT_TRUE(sweep_torch("torch.trace(a)", {{{3, 4}}, {{0, 0}}, {{3}}},
                          [](const V& x) { return trace(x[0]); }));
  EXPECT_TRUE(sweep_torch("torch.cross(a, b)", {{{4, 3}, {4, 3}}, {{3, 2}, {3, 1}}},
                          [](const V& x) { return cross(x[0], x[1]); }));
  EXPECT_TRUE(sweep_torch("torch.linalg.cross(a, b)", {{{4, 3}, {1, 3}}, {{4, 2}, {4, 2}}},
                          [](const V& x) { return linalg_cross(x[0], x[1]); }));
}

TEST(LinalgTorch, Einsum) {
  struct Case {
    const char* equation;
    std::vector<std::vector<Shape>> shapes;
  };
  const std::vector<Case> cases = {
      {"ij,jk->ik", {{{3, 4}, {4, 5}}, {{0, 4}, {4, 2}}, {{3, 0}, {0, 2}}}},
      {"bij,bjk->bik", {{{2, 3, 4}, {2, 4, 5}}}},
      {"ij,jk", {{{3, 4}, {4, 5}}}},                       // implicit output
      {"ii->i", {{{4, 4}}}},                               // diagonal
      {"ii", {{{4, 4}}}},                                  // trace
      {"iji->j", {{{3, 2, 3}}}},
      {"ij->ji", {{{3, 4}}}},
      {"ij->", {{{3, 4}}}},
      {"i,i->", {{{5}, {5}}}},
      {"i,j->ij", {{{3}, {4}}}},
      {"i,j", {{{3}, {4}}}},
      {"bn,anm,bm->ba", {{{2, 3}, {4, 3, 5}, {2, 5}}}},   // bilinear
      {"...ij,...jk->...ik", {{{2, 3, 4}, {4, 5}}, {{2, 1, 3, 4}, {5, 4, 2}}}},
      {"...ij->...ji", {{{2, 3, 4}}, {{3, 4}}}},
      {"b...->b", {{{2, 3, 4}}}},
      {"...ii->...i", {{{2, 3, 3}}}},
      {"ij,ij->ij", {{{3, 4}, {1, 4}}, {{3, 1}, {3, 4}}}},  // size-1 broadcast
      {"Ba,aB->", {{{2, 3}, {3, 2}}}},
      {"ab, bc -> ca", {{{2, 3}, {3, 4}}}},               // spaces
      {"i->", {{{0}}}},
      {"", {{{}}}},
      {"a,b,c,d->", {{{2}, {3}, {1}, {2}}}},
  };
  for (const Case& c : cases) {
    const std::string equation = c.equation;
    const size_t operands = c.shapes[0].size();
    std::string args;
    for (size_t k = 0; k < operands; ++k) args += std::string(", ") + char('a' + k);
    EXPECT_TRUE(sweep_torch("torch.einsum('" + equation + "'" + args + ")", c.shapes,
                            [equation](const V& x) { return einsum(equation, x); }))
        << equation;
  }
  // Errors on both sides: wrong operand count, size mismatch, bad subscripts.
  for (const char* equation : {"ij,jk->ik", "ij->ik", "i,i->i", "ij->jj", "i1->i"}) {
    EXPECT_TRUE(matches_torch(std::string("torch.einsum('") + equation + "', a, b)",
                              {uniform({3, 4}), uniform({3, 4})},
                              [equation](const V& x) { return einsum(equation, x); }))
        << equation;
  }
  EXPECT_HAS(error_of([] { einsum("ij,jk->ik", {uniform({3, 4}), uniform({5, 2})}); }),
             "[einsum] subscript 'j'");
}

TEST(LinalgTorch, VectorNorm) {
  for (const char* ord : {"2", "1", "3", "0.5", "inf", "-inf", "0", "-1"}) {
    const std::string o = ord;
    const double p = o == "inf" ? INFINITY : o == "-inf" ? -INFINITY : std::stod(o);
    const std::string ord_text = o == "inf" ? "math.inf" : o == "-inf" ? "-math.inf" : o;
    EXPECT_TRUE(sweep_torch("torch.linalg.vector_norm(a, " + ord_text + ")",
                            {{{3, 4}}, {{5}}, {{}}},
                            [p](const V& x) { return vector_norm(x[0], p); }))
        << ord;
    EXPECT_TRUE(sweep_torch("torch.linalg.vector_norm(a, " + ord_text + ", dim=(0, -1), keepdim=True)",
                            {{{2, 3, 4}}},
                            [p](const V& x) { return vector_norm(x[0], p, {0, -1}, true); }))
        << ord;
    // Zero vectors: PyTorch's gradient there is zero; empty reductions.
    EXPECT_TRUE(matches_torch("torch.linalg.vector_norm(a, " + ord_text + ", dim=1)",
                              {zeros({2, 3}, DType::f64)},
                              [p](const V& x) { return vector_norm(x[0], p, {1}); }))
        << ord;
    EXPECT_TRUE(matches_torch("torch.linalg.vector_norm(a, " + ord_text + ", dim=0)",
                              {zeros({0, 3}, DType::f64)},
                              [p](const V& x) { return vector_norm(x[0], p, {0}); }))
        << ord;
  }
  EXPECT_TRUE(matches_torch("torch.linalg.vector_norm(a, dtype=torch.float64)",
                            {uniform({4}).to(DType::f32)},
                            [](const V& x) { return vector_norm(x[0], 2, {}, false, DType::f64); }));
  EXPECT_TRUE(matches_torch("torch.linalg.vector_norm(a, dtype=torch.float32)", {uniform({4})},
                            [](const V& x) { return vector_norm(x[0], 2, {}, false, DType::f32); }));
  EXPECT_TRUE(matches_torch("torch.linalg.vector_norm(a)", {Tensor::from_vector<int64_t>({3, 4}, {2})},
                            [](const V& x) { return vector_norm(x[0]); }));
  EXPECT_TRUE(sweep_torch("torch.norm(a)", {{{3, 4}}}, [](const V& x) { return norm(x[0]); }));
  EXPECT_TRUE(sweep_torch("torch.norm(a, p='fro', dim=(0, 1))", {{{3, 4, 2}}},
                          [](const V& x) { return norm(x[0], "fro", {0, 1}); }));
  EXPECT_TRUE(sweep_torch("torch.norm(a, 1, dim=1, keepdim=True)", {{{3, 4}}},
                          [](const V& x) { return norm(x[0], 1, {1}, true); }));
  EXPECT_TRUE(sweep_torch("a.norm(3, dim=0)", {{{3, 4}}},
                          [](const V& x) { return x[0].norm(3, {0}); }));
  EXPECT_HAS(error_of([] { norm(uniform({2, 2}), "nuc"); }), "[norm] p='nuc' is not supported");
  // Over all dims, the error names the dim that is empty.
  EXPECT_HAS(error_of([] { vector_norm(zeros({3, 0}, DType::f64), INFINITY); }),
             "norm over the empty dim 1 of shape [3, 0]");
}

TEST(SoftmaxAndSumDtype, CastBeforeTheOp) {
  Tensor x = uniform({3, 4}).to(DType::f32);
  EXPECT_TRUE(matches_torch("torch.softmax(a, 1, dtype=torch.float64)", {x},
                            [](const V& v) { return softmax(v[0], 1, DType::f64); }));
  EXPECT_TRUE(matches_torch("torch.log_softmax(a, 0, dtype=torch.float64)", {x},
                            [](const V& v) { return log_softmax(v[0], 0, DType::f64); }));
  EXPECT_TRUE(matches_torch("a.softmax(-1, dtype=torch.float64)", {x},
                            [](const V& v) { return v[0].softmax(-1, DType::f64); }));
  Tensor ints = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(matches_torch("torch.sum(a, (1,), False, dtype=torch.float32)", {ints},
                            [](const V& v) { return sum(v[0], {1}, false, DType::f32); }));
  EXPECT_TRUE(matches_torch("torch.mean(a, (0,), True, dtype=torch.float64)", {ints},
                            [](const V& v) { return mean(v[0], {0}, true, DType::f64); }));
  EXPECT_TRUE(matches_torch("torch.softmax(a, 1, dtype=torch.float64)", {ints},
                            [](const V& v) { return softmax(v[0], 1, DType::f64); }));
}

}  // namespace
}  // namespace tessera::testing
