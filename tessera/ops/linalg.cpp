// Linear algebra composed of matmul, views and indexing (see linalg.h).

#include "tessera/ops/linalg.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "tessera/ops/concat.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/index.h"
#include "tessera/ops/matmul.h"
#include "tessera/ops/pad.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

void check_operands(const char* op, const Tensor& a, int64_t a_dims, const Tensor& b,
                    int64_t b_dims) {
  TESSERA_CHECK(a.defined() && b.defined(), "[", op, "] got an undefined tensor");
  TESSERA_CHECK(a.dim() == a_dims && b.dim() == b_dims, "[", op, "] expects ", a_dims, "-D and ",
                b_dims, "-D tensors, got shapes ", shape_str(a.shape()), " and ",
                shape_str(b.shape()));
  TESSERA_CHECK(a.dtype() == b.dtype(), "[", op, "] expects tensors of one dtype, got ",
                dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
}

// beta * input + alpha * product, as the add* ops define it.
Tensor scaled_sum(const char* op, const Tensor& input, const Tensor& product, Scalar beta,
                  Scalar alpha) {
  TESSERA_CHECK(input.defined(), "[", op, "] got an undefined input");
  const Shape shape = broadcast_shapes(input.shape(), product.shape(), op);
  TESSERA_CHECK(shape == product.shape(), "[", op, "] input of shape ", shape_str(input.shape()),
                " does not broadcast to the product's shape ", shape_str(product.shape()));
  if (!is_floating(product.dtype())) {
    // Integer products take integer factors: PyTorch truncates 0.6 to 0.
    TESSERA_CHECK(std::isfinite(beta.to_double()) && std::isfinite(alpha.to_double()), "[", op,
                  "] beta and alpha must be finite for integer inputs, got beta ",
                  beta.to_double(), " and alpha ", alpha.to_double());
    beta = beta.truncated();
    alpha = alpha.truncated();
  }
  Tensor scaled = alpha.to_double() == 1.0 ? product : mul(product, alpha);
  if (beta.to_double() == 0.0) return scaled;
  Tensor base = beta.to_double() == 1.0 ? input : mul(input, beta);
  return add(base, scaled);
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  check_operands("mm", a, 2, b, 2);
  return matmul(a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_operands("bmm", a, 3, b, 3);
  TESSERA_CHECK(a.size(0) == b.size(0), "[bmm] batch sizes differ: ", shape_str(a.shape()),
                " and ", shape_str(b.shape()));
  return matmul(a, b);
}

Tensor mv(const Tensor& a, const Tensor& v) {
  check_operands("mv", a, 2, v, 1);
  return matmul(a, v);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  check_operands("dot", a, 1, b, 1);
  TESSERA_CHECK(a.size(0) == b.size(0), "[dot] expects tensors of one length, got ",
                a.size(0), " and ", b.size(0));
  return sum(mul(a, b));
}

Tensor outer(const Tensor& a, const Tensor& b) {
  TESSERA_CHECK(a.defined() && b.defined(), "[outer] got an undefined tensor");
  TESSERA_CHECK(a.dim() == 1 && b.dim() == 1, "[outer] expects 1-D tensors, got shapes ",
                shape_str(a.shape()), " and ", shape_str(b.shape()));
  return mul(a.unsqueeze(1), b.unsqueeze(0));
}

Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, Scalar beta, Scalar alpha) {
  return scaled_sum("addmm", input, mm(m1, m2), beta, alpha);
}

Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, Scalar beta,
             Scalar alpha) {
  return scaled_sum("addmv", input, mv(mat, vec), beta, alpha);
}

Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, Scalar beta,
               Scalar alpha) {
  return scaled_sum("baddbmm", input, bmm(batch1, batch2), beta, alpha);
}

Tensor addbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, Scalar beta,
              Scalar alpha) {
  return scaled_sum("addbmm", input, sum(bmm(batch1, batch2), {0}), beta, alpha);
}

Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims) {
  TESSERA_CHECK(a.defined() && b.defined(), "[tensordot] got an undefined tensor");
  TESSERA_CHECK(dims >= 0 && dims <= std::min(a.dim(), b.dim()), "[tensordot] dims = ", dims,
                " must be in [0, ", std::min(a.dim(), b.dim()), "] for shapes ",
                shape_str(a.shape()), " and ", shape_str(b.shape()));
  std::vector<int64_t> dims_a, dims_b;
  for (int64_t i = 0; i < dims; ++i) {
    dims_a.push_back(a.dim() - dims + i);
    dims_b.push_back(i);
  }
  return tensordot(a, b, dims_a, dims_b);
}

Tensor tensordot(const Tensor& a, const Tensor& b, const std::vector<int64_t>& dims_a,
                 const std::vector<int64_t>& dims_b) {
  TESSERA_CHECK(a.defined() && b.defined(), "[tensordot] got an undefined tensor");
  TESSERA_CHECK(dims_a.size() == dims_b.size(), "[tensordot] dims_a ", shape_str(dims_a),
                " and dims_b ", shape_str(dims_b), " must have the same length");
  std::vector<bool> contracted_a(static_cast<size_t>(a.dim()), false);
  std::vector<bool> contracted_b(static_cast<size_t>(b.dim()), false);
  std::vector<int64_t> order_a, order_b;
  int64_t k = 1;
  for (size_t i = 0; i < dims_a.size(); ++i) {
    const int64_t da = normalize_dim(dims_a[i], a.dim(), "tensordot");
    const int64_t db = normalize_dim(dims_b[i], b.dim(), "tensordot");
    TESSERA_CHECK(!contracted_a[da] && !contracted_b[db], "[tensordot] a dim is contracted twice");
    TESSERA_CHECK(a.size(da) == b.size(db), "[tensordot] contracted dims differ in size: dim ",
                  dims_a[i], " of ", shape_str(a.shape()), " and dim ", dims_b[i], " of ",
                  shape_str(b.shape()));
    contracted_a[da] = contracted_b[db] = true;
    k *= a.size(da);
  }
  Shape out;
  std::vector<int64_t> free_a, free_b;
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (contracted_a[d]) continue;
    free_a.push_back(d);
    out.push_back(a.size(d));
    rows *= a.size(d);
  }
  for (int64_t d = 0; d < b.dim(); ++d) {
    if (contracted_b[d]) continue;
    free_b.push_back(d);
    out.push_back(b.size(d));
    cols *= b.size(d);
  }
  order_a = free_a;
  for (int64_t d : dims_a) order_a.push_back(normalize_dim(d, a.dim(), "tensordot"));
  for (int64_t d : dims_b) order_b.push_back(normalize_dim(d, b.dim(), "tensordot"));
  order_b.insert(order_b.end(), free_b.begin(), free_b.end());
  Tensor left = (a.dim() ? a.permute(order_a) : a).reshape({rows, k});
  Tensor right = (b.dim() ? b.permute(order_b) : b).reshape({k, cols});
  return matmul(left, right).reshape(out);
}

Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  TESSERA_CHECK(x.defined(), "[diagonal] got an undefined tensor");
  TESSERA_CHECK(x.dim() >= 2, "[diagonal] needs at least 2 dims, got shape ",
                shape_str(x.shape()));
  const int64_t d1 = normalize_dim(dim1, x.dim(), "diagonal");
  const int64_t d2 = normalize_dim(dim2, x.dim(), "diagonal");
  TESSERA_CHECK(d1 != d2, "[diagonal] dim1 and dim2 must differ, both are ", d1);
  // The two dims last, rows then columns, flattened into one.
  std::vector<int64_t> order;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d != d1 && d != d2) order.push_back(d);
  }
  Shape batch;
  for (int64_t d : order) batch.push_back(x.size(d));
  order.push_back(d1);
  order.push_back(d2);
  const int64_t rows = x.size(d1), cols = x.size(d2);
  const int64_t length =
      std::max<int64_t>(0, offset >= 0 ? std::min(rows, cols - offset) : std::min(rows + offset, cols));
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < length; ++i) {
    positions.push_back(offset >= 0 ? i * cols + i + offset : (i - offset) * cols + i);
  }
  Shape flat = batch;
  flat.push_back(rows * cols);
  Tensor planes = x.permute(order).reshape(flat);
  Tensor index = Tensor::from_vector<int64_t>(positions, {length});
  return index_select(planes, static_cast<int64_t>(batch.size()), index);
}

Tensor diag(const Tensor& x, int64_t diagonal_index) {
  TESSERA_CHECK(x.defined(), "[diag] got an undefined tensor");
  TESSERA_CHECK(x.dim() == 1 || x.dim() == 2, "[diag] expects a 1-D or 2-D tensor, got shape ",
                shape_str(x.shape()));
  if (x.dim() == 2) return diagonal(x, diagonal_index, 0, 1);
  const int64_t n = x.size(0);
  const int64_t k = diagonal_index;
  Tensor square = mul(eye(n, n, x.dtype()), x.unsqueeze(0));
  if (k == 0) return square;
  const int64_t s = k > 0 ? k : -k;
  // pads: (left, right) of the columns, then (top, bottom) of the rows.
  return k > 0 ? pad(square, {s, 0, 0, s}) : pad(square, {0, s, s, 0});
}

Tensor trace(const Tensor& x) {
  TESSERA_CHECK(x.defined(), "[trace] got an undefined tensor");
  TESSERA_CHECK(x.dim() == 2, "[trace] expects a matrix, got shape ", shape_str(x.shape()));
  return sum(diagonal(x));
}

Tensor linalg_cross(const Tensor& a, const Tensor& b, int64_t dim) {
  TESSERA_CHECK(a.defined() && b.defined(), "[cross] got an undefined tensor");
  TESSERA_CHECK(a.dim() == b.dim(), "[cross] expects tensors with the same number of dims, got ",
                shape_str(a.shape()), " and ", shape_str(b.shape()));
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "cross");
  const int64_t d = normalize_dim(dim, static_cast<int64_t>(shape.size()), "cross");
  TESSERA_CHECK(shape[d] == 3, "[cross] dim ", dim, " must have size 3, got shape ",
                shape_str(shape));
  Tensor x = a.expand(shape), y = b.expand(shape);
  auto part = [d](const Tensor& t, int64_t i) { return t.narrow(d, i, 1); };
  Tensor c0 = sub(mul(part(x, 1), part(y, 2)), mul(part(x, 2), part(y, 1)));
  Tensor c1 = sub(mul(part(x, 2), part(y, 0)), mul(part(x, 0), part(y, 2)));
  Tensor c2 = sub(mul(part(x, 0), part(y, 1)), mul(part(x, 1), part(y, 0)));
  return cat({c0, c1, c2}, d);
}

Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> dim) {
  TESSERA_CHECK(a.defined() && b.defined(), "[cross] got an undefined tensor");
  if (dim) return linalg_cross(a, b, *dim);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "cross");
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 3) return linalg_cross(a, b, static_cast<int64_t>(d));
  }
  TESSERA_FAIL("[cross] no dim of size 3 in shape ", shape_str(shape), "; pass dim");
}

namespace {

// s^(1/ord) with a zero gradient where s is zero (the root's slope there is
// infinite, and PyTorch defines the norm's gradient at zero as zero).
Tensor safe_root(const Tensor& s, double ord) {
  const Tensor zero = eq(s, 0.0);
  const Tensor base = where(zero, ones_like(s), s);
  const Tensor root = ord == 2.0 ? sqrt(base) : pow(base, 1.0 / ord);
  return where(zero, zeros_like(s), root);
}

}  // namespace

Tensor vector_norm(const Tensor& x, double ord, const std::vector<int64_t>& dims, bool keepdim,
                   std::optional<DType> dtype) {
  TESSERA_CHECK(x.defined(), "[vector_norm] got an undefined tensor");
  TESSERA_CHECK(is_floating(x.dtype()), "[vector_norm] expects a floating input, got ",
                dtype_name(x.dtype()), " of shape ", shape_str(x.shape()));
  if (dtype) {
    TESSERA_CHECK(is_floating(*dtype), "[vector_norm] dtype must be floating, got ",
                  dtype_name(*dtype));
    TESSERA_CHECK(promote_types(x.dtype(), *dtype) == *dtype, "[vector_norm] the input's dtype ",
                  dtype_name(x.dtype()), " does not convert to dtype ", dtype_name(*dtype),
                  " without narrowing");
  }
  TESSERA_CHECK(!std::isnan(ord), "[vector_norm] ord must be a number, got nan");
  const Tensor v = dtype ? x.to(*dtype) : x;
  if (ord < 0 || std::isinf(ord)) {
    // max, min and negative powers have no identity: no empty reductions.
    std::vector<int64_t> reduced = dims;
    if (reduced.empty()) {
      for (int64_t d = 0; d < v.dim(); ++d) reduced.push_back(d);
    }
    for (int64_t d : reduced) {
      const int64_t wrapped = normalize_dim(d, std::max<int64_t>(v.dim(), 1), "vector_norm");
      TESSERA_CHECK(v.dim() == 0 || v.shape()[wrapped] != 0, "[vector_norm] cannot compute the ",
                    ord, " norm over the empty dim ", d, " of shape ", shape_str(v.shape()),
                    ": the reduction has no identity");
    }
  }
  const Tensor a = abs(v);
  if (std::isinf(ord)) return ord > 0 ? amax(a, dims, keepdim) : amin(a, dims, keepdim);
  if (ord == 0.0) return sum(ne(v, 0.0).to(v.dtype()), dims, keepdim);
  if (ord == 1.0) return sum(a, dims, keepdim);
  if (ord == 2.0) return safe_root(sum(mul(v, v), dims, keepdim), 2.0);
  if (ord > 1.0) return safe_root(sum(pow(a, ord), dims, keepdim), ord);
  // 0 < ord < 1 and ord < 0: |x|^ord has an infinite slope (or value) at
  // zero, so zeros take their limit directly: 0 for ord > 0, and inf for
  // ord < 0 (which makes the norm 0).
  const Tensor nonzero = ne(a, 0.0);
  const Tensor powered = pow(where(nonzero, a, ones_like(a)), ord);
  const double at_zero = ord > 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return safe_root(sum(where(nonzero, powered, at_zero), dims, keepdim), ord);
}

Tensor norm(const Tensor& x, double p, const std::vector<int64_t>& dims, bool keepdim) {
  return vector_norm(x, p, dims, keepdim);
}

Tensor norm(const Tensor& x, const std::string& p, const std::vector<int64_t>& dims,
            bool keepdim) {
  TESSERA_CHECK(p == "fro", "[norm] p='", p, "' is not supported; valid: 'fro' or a number",
                p == "nuc" ? " (the nuclear norm needs an SVD, which Tessera does not have yet)"
                           : "");
  TESSERA_CHECK(dims.size() <= 2, "[norm] the Frobenius norm takes at most 2 dims, got ",
                dims.size());
  return vector_norm(x, 2.0, dims, keepdim);
}

namespace {

// An einsum operand during contraction: its tensor and one label per dim.
struct Labelled {
  Tensor tensor;
  std::vector<char> labels;
};

constexpr char kEllipsisBase = '0';  // labels '0'.. stand for the "..." dims

int64_t label_position(const std::vector<char>& labels, char label) {
  auto it = std::find(labels.begin(), labels.end(), label);
  return it == labels.end() ? -1 : static_cast<int64_t>(it - labels.begin());
}

// Takes the diagonal for each label repeated within one operand ("ii").
Labelled take_diagonals(Labelled x, const std::string& equation) {
  for (size_t i = 0; i < x.labels.size(); ++i) {
    for (size_t j = i + 1; j < x.labels.size(); ++j) {
      if (x.labels[i] != x.labels[j]) continue;
      const auto a = static_cast<int64_t>(i), b = static_cast<int64_t>(j);
      TESSERA_CHECK(x.tensor.shape()[i] == x.tensor.shape()[j], "[einsum] subscript '",
                    x.labels[i], "' is repeated in an operand of '", equation,
                    "' with different sizes ", x.tensor.shape()[i], " and ", x.tensor.shape()[j]);
      const char label = x.labels[i];
      x.tensor = diagonal(x.tensor, 0, a, b);
      x.labels.erase(x.labels.begin() + b);
      x.labels.erase(x.labels.begin() + a);
      x.labels.push_back(label);
      return take_diagonals(std::move(x), equation);
    }
  }
  return x;
}

// Sums the dims whose labels are not in `keep`.
Labelled sum_unneeded(Labelled x, const std::vector<char>& keep) {
  std::vector<int64_t> dims;
  std::vector<char> kept;
  for (size_t d = 0; d < x.labels.size(); ++d) {
    if (label_position(keep, x.labels[d]) < 0) {
      dims.push_back(static_cast<int64_t>(d));
    } else {
      kept.push_back(x.labels[d]);
    }
  }
  if (dims.empty()) return x;
  return {sum(x.tensor, dims), kept};
}

// x permuted to `order` (labels it has) and reshaped to the groups' sizes.
Tensor arrange(const Labelled& x, const std::vector<std::vector<char>>& groups,
               const std::map<char, int64_t>& sizes) {
  std::vector<int64_t> order;
  Shape shape;
  for (const auto& group : groups) {
    int64_t size = 1;
    for (char label : group) {
      order.push_back(label_position(x.labels, label));
      size *= sizes.at(label);
    }
    shape.push_back(size);
  }
  return x.tensor.permute(order).reshape(shape);
}

// a and b contracted over their shared labels not in `keep`, as one bmm:
// the result's labels are the shared kept ones, then a's own, then b's own.
Labelled contract(const Labelled& a, const Labelled& b, const std::vector<char>& keep,
                  const std::map<char, int64_t>& sizes) {
  std::vector<char> batch, summed, a_only, b_only;
  for (char label : a.labels) {
    if (label_position(b.labels, label) < 0) {
      a_only.push_back(label);
    } else if (label_position(keep, label) >= 0) {
      batch.push_back(label);
    } else {
      summed.push_back(label);
    }
  }
  for (char label : b.labels) {
    if (label_position(a.labels, label) < 0) b_only.push_back(label);
  }
  const Tensor left = arrange(a, {batch, a_only, summed}, sizes);
  const Tensor right = arrange(b, {batch, summed, b_only}, sizes);
  Shape shape;
  std::vector<char> labels;
  for (const auto* group : {&batch, &a_only, &b_only}) {
    for (char label : *group) {
      shape.push_back(sizes.at(label));
      labels.push_back(label);
    }
  }
  // An operand summed on its own may have widened (i32 sums to i64).
  const DType common = promote_types(left.dtype(), right.dtype());
  return {bmm(left.to(common), right.to(common)).reshape(shape), labels};
}

// The labels of one side of the equation ("ij", "...k"), with the
// ellipsis expanded to `ellipsis_dims` labels ending at '0' + 15.
std::vector<char> parse_labels(const std::string& term, int64_t ellipsis_dims,
                               const std::string& equation, bool& has_ellipsis) {
  std::vector<char> labels;
  has_ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (c == '.') {
      TESSERA_CHECK(term.compare(i, 3, "...") == 0 && !has_ellipsis, "[einsum] '", equation,
                    "' has a '.' that is not part of one '...' per operand");
      has_ellipsis = true;
      for (int64_t e = 0; e < ellipsis_dims; ++e) {
        labels.push_back(static_cast<char>(kEllipsisBase + 16 - ellipsis_dims + e));
      }
      i += 2;
      continue;
    }
    TESSERA_CHECK(std::isalpha(static_cast<unsigned char>(c)), "[einsum] '", equation,
                  "' has the subscript '", c, "'; subscripts are letters a-z and A-Z");
    labels.push_back(c);
  }
  return labels;
}

int64_t explicit_labels(const std::string& term) {
  int64_t count = 0;
  for (char c : term) count += std::isalpha(static_cast<unsigned char>(c)) ? 1 : 0;
  return count;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  std::string text;
  for (char c : equation) {
    if (!std::isspace(static_cast<unsigned char>(c))) text.push_back(c);
  }
  const size_t arrow = text.find("->");
  const std::string inputs = text.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = inputs.find(',', start);
    terms.push_back(inputs.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  TESSERA_CHECK(terms.size() == operands.size(), "[einsum] '", equation, "' names ",
                terms.size(), " operands but ", operands.size(), " were given");
  // Labels and sizes per operand; "..." dims broadcast, aligned from the right.
  std::vector<Labelled> items;
  std::map<char, int64_t> sizes;
  std::map<char, int> occurrences;  // of each letter in the inputs, before diagonals
  int64_t ellipsis_dims = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    const Tensor& x = operands[k];
    TESSERA_CHECK(x.defined(), "[einsum] operand ", k, " is undefined");
    TESSERA_CHECK(x.dtype() == operands[0].dtype(), "[einsum] operands must have one dtype: ",
                  "operand 0 is ", dtype_name(operands[0].dtype()), ", operand ", k, " is ",
                  dtype_name(x.dtype()));
    const int64_t named = explicit_labels(terms[k]);
    const bool dots = terms[k].find("...") != std::string::npos;
    const int64_t extra = x.dim() - named;
    TESSERA_CHECK(dots ? extra >= 0 : extra == 0, "[einsum] operand ", k, " of '", equation,
                  "' has ", x.dim(), " dims (shape ", shape_str(x.shape()), ") but '", terms[k],
                  "' names ", named, dots ? " or more" : "");
    TESSERA_CHECK(extra <= 16, "[einsum] '...' may stand for at most 16 dims, got ", extra);
    bool has_ellipsis = false;
    Labelled item{x, parse_labels(terms[k], dots ? extra : 0, equation, has_ellipsis)};
    for (char label : item.labels) {
      if (label >= 'A') ++occurrences[label];
    }
    if (dots) ellipsis_dims = std::max(ellipsis_dims, extra);
    items.push_back(take_diagonals(std::move(item), equation));
  }
  for (size_t k = 0; k < items.size(); ++k) {
    const Labelled& item = items[k];
    for (size_t d = 0; d < item.labels.size(); ++d) {
      const int64_t size = item.tensor.shape()[d];
      auto [it, added] = sizes.emplace(item.labels[d], size);
      if (added || it->second == size) continue;
      TESSERA_CHECK(it->second == 1 || size == 1, "[einsum] subscript '",
                    item.labels[d] >= 'A' ? std::string(1, item.labels[d]) : std::string("..."),
                    "' of '", equation, "' has size ", it->second, " in one operand and ", size,
                    " in operand ", k, "; sizes must match or be 1");
      it->second = std::max(it->second, size);
    }
  }
  // The output's labels: as written after "->", else the ellipsis dims and
  // then the labels that appear once, in sorted order.
  std::vector<char> output;
  if (arrow != std::string::npos) {
    const std::string term = text.substr(arrow + 2);
    bool has_ellipsis = false;
    output = parse_labels(term, ellipsis_dims, equation, has_ellipsis);
    for (size_t d = 0; d < output.size(); ++d) {
      TESSERA_CHECK(sizes.count(output[d]) > 0, "[einsum] the output subscript '", output[d], "' of '", equation,
                    "' appears in no operand");
      TESSERA_CHECK(std::count(output.begin(), output.end(), output[d]) == 1,
                    "[einsum] the output subscript '", output[d], "' of '", equation,
                    "' appears more than once");
    }
    // An output that omits "..." sums the broadcast dims away, as PyTorch's.
  } else {
    for (int64_t e = 0; e < ellipsis_dims; ++e) {
      output.push_back(static_cast<char>(kEllipsisBase + 16 - ellipsis_dims + e));
    }
    for (const auto& [label, count] : occurrences) {
      if (count == 1) output.push_back(label);
    }
  }
  // Broadcast size-1 dims to the label's size, then contract left to right,
  // summing each label as soon as no later operand and not the output needs it.
  for (Labelled& item : items) {
    Shape shape;
    for (char label : item.labels) shape.push_back(sizes.at(label));
    if (shape != item.tensor.shape()) item.tensor = item.tensor.expand(shape);
  }
  auto needed_after = [&](size_t k) {
    std::vector<char> keep = output;
    for (size_t j = k + 1; j < items.size(); ++j) {
      keep.insert(keep.end(), items[j].labels.begin(), items[j].labels.end());
    }
    return keep;
  };
  Labelled result = sum_unneeded(items[0], needed_after(0));
  for (size_t k = 1; k < items.size(); ++k) {
    const std::vector<char> keep = needed_after(k);
    std::vector<char> keep_with_result = keep;
    keep_with_result.insert(keep_with_result.end(), result.labels.begin(), result.labels.end());
    const Labelled next = sum_unneeded(items[k], keep_with_result);
    result = contract(result, next, keep, sizes);
  }
  result = sum_unneeded(result, output);
  std::vector<int64_t> order;
  for (char label : output) order.push_back(label_position(result.labels, label));
  return result.tensor.permute(order);
}

}  // namespace tessera
