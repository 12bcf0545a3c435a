// The degenerate-shape sweep: every op family that takes a dim (and the
// elementwise families) on 0-d, empty (a zero dim) and size-1 inputs, over
// every valid dim (negative included) and the first invalid one on each
// side. Each case must give PyTorch's result and gradient, or, where PyTorch
// rejects it, a tessera::Error naming the op. PyTorch's results come from
// tests/ops/torch_degenerate.py, run once per test binary on the case list
// built here.

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "testing.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using Args = std::vector<int64_t>;
using Family = std::function<Tensor(const Tensor&, const Args&)>;

Dims tail(const Args& args) {
  return Dims(args.begin() + 1, args.end());
}

// The same functions as FAMILIES in torch_degenerate.py, through the public API.
const std::map<std::string, Family>& families() {
  static const std::map<std::string, Family> table = {
      {"sum", [](const Tensor& x, const Args& a) { return sum(x, tail(a), a[0]); }},
      {"mean", [](const Tensor& x, const Args& a) { return mean(x, tail(a), a[0]); }},
      {"max", [](const Tensor& x, const Args& a) { return max(x, tail(a), a[0]); }},
      {"min", [](const Tensor& x, const Args& a) { return min(x, tail(a), a[0]); }},
      {"var", [](const Tensor& x, const Args& a) { return var(x, tail(a), 1, a[0]); }},
      {"std", [](const Tensor& x, const Args& a) { return tessera::std(x, tail(a), 1, a[0]); }},
      {"logsumexp", [](const Tensor& x, const Args& a) { return logsumexp(x, tail(a), a[0]); }},
      {"argmax",
       [](const Tensor& x, const Args& a) {
         return argmax(x, a.size() > 1 ? std::optional<int64_t>(a[1]) : std::nullopt, a[0]);
       }},
      {"argmin",
       [](const Tensor& x, const Args& a) {
         return argmin(x, a.size() > 1 ? std::optional<int64_t>(a[1]) : std::nullopt, a[0]);
       }},
      {"softmax", [](const Tensor& x, const Args& a) { return softmax(x, a[0]); }},
      {"cumsum", [](const Tensor& x, const Args& a) { return cumsum(x, a[0]); }},
      {"cumprod", [](const Tensor& x, const Args& a) { return cumprod(x, a[0]); }},
      {"sort", [](const Tensor& x, const Args& a) { return std::get<0>(sort(x, a[0], true)); }},
      {"argsort", [](const Tensor& x, const Args& a) { return argsort(x, a[0]); }},
      {"topk", [](const Tensor& x, const Args& a) { return std::get<0>(topk(x, 0, a[0])); }},
      {"bucketize",
       [](const Tensor& x, const Args&) { return bucketize(x, make({-1, 0, 1}, {3})); }},
      {"log_softmax", [](const Tensor& x, const Args& a) { return log_softmax(x, a[0]); }},
      {"cat",
       [](const Tensor& x, const Args& a) {
         return cat({x, mul(x, 2.0)}, a[0]);
       }},
      {"stack",
       [](const Tensor& x, const Args& a) {
         return stack({x, mul(x, 2.0)}, a[0]);
       }},
      {"squeeze",
       [](const Tensor& x, const Args& a) { return a.empty() ? x.squeeze() : x.squeeze(a[0]); }},
      {"unsqueeze", [](const Tensor& x, const Args& a) { return x.unsqueeze(a[0]); }},
      {"flatten", [](const Tensor& x, const Args& a) { return x.flatten(a[0], a[1]); }},
      {"transpose", [](const Tensor& x, const Args& a) { return x.transpose(a[0], a[1]); }},
      {"narrow", [](const Tensor& x, const Args& a) { return x.narrow(a[0], a[1], a[2]); }},
      {"select", [](const Tensor& x, const Args& a) { return x.select(a[0], a[1]); }},
      {"slice", [](const Tensor& x, const Args& a) { return x.slice(a[0], a[1], a[2], a[3]); }},
      {"index_select",
       [](const Tensor& x, const Args& a) {
         return index_select(x, a[0], Tensor::from_vector<int64_t>({0}, {1}));
       }},
      {"gather", [](const Tensor& x,
                    const Args& a) { return gather(x, a[0], zeros(x.shape(), DType::i64)); }},
      {"tril", [](const Tensor& x, const Args& a) { return tril(x, a[0]); }},
      {"triu", [](const Tensor& x, const Args& a) { return triu(x, a[0]); }},
      {"split", [](const Tensor& x, const Args& a) { return cat(split(x, a[1], a[0]), a[0]); }},
      {"chunk", [](const Tensor& x, const Args& a) { return cat(chunk(x, a[1], a[0]), a[0]); }},
      {"neg", [](const Tensor& x, const Args&) { return neg(x); }},
      {"abs", [](const Tensor& x, const Args&) { return abs(x); }},
      {"exp", [](const Tensor& x, const Args&) { return exp(x); }},
      {"tanh", [](const Tensor& x, const Args&) { return tanh(x); }},
      {"sigmoid", [](const Tensor& x, const Args&) { return sigmoid(x); }},
      {"relu", [](const Tensor& x, const Args&) { return relu(x); }},
      {"gelu", [](const Tensor& x, const Args&) { return gelu(x); }},
      {"silu", [](const Tensor& x, const Args&) { return silu(x); }},
      {"softplus", [](const Tensor& x, const Args&) { return softplus(x); }},
      {"square", [](const Tensor& x, const Args&) { return square(x); }},
      {"add", [](const Tensor& x, const Args&) { return add(x, mul(x, 2.0)); }},
      {"mul", [](const Tensor& x, const Args&) { return mul(x, x); }},
      {"maximum", [](const Tensor& x, const Args&) { return maximum(x, neg(x)); }},
      {"where", [](const Tensor& x, const Args&) { return where(gt(x, 0.0), x, neg(x)); }},
      {"clamp", [](const Tensor& x, const Args&) { return clamp(x, -0.5, 0.5); }},
      {"eq", [](const Tensor& x, const Args&) { return eq(x, x); }},
      {"matmul", [](const Tensor& x, const Args&) { return matmul(x, x.transpose(-1, -2)); }},
      {"layer_norm",
       [](const Tensor& x, const Args& a) {
         Shape normalized(x.shape().end() - a[0], x.shape().end());
         return layer_norm(x, normalized);
       }},
      {"sin", [](const Tensor& x, const Args&) { return sin(x); }},
      {"cos", [](const Tensor& x, const Args&) { return cos(x); }},
      {"erf", [](const Tensor& x, const Args&) { return erf(x); }},
      {"math_unary",
       [](const Tensor& x, const Args&) {
         return stack({erfc(x), erfinv(mul(x, 0.4)), log1p(abs(x)), expm1(x), log2(add(abs(x), 1.0)),
                       log10(add(abs(x), 1.0)), exp2(x), reciprocal(add(abs(x), 1.0)), floor(x),
                       ceil(x), trunc(x), round(x), round(x, 1), frac(x), sign(x), nan_to_num(x)},
                      0);
       }},
      {"math_predicates",
       [](const Tensor& x, const Args&) {
         return stack({isnan(x), isinf(x), isfinite(x), logical_xor(gt(x, 0.0), lt(x, 1.0))}, 0);
       }},
      {"math_binary",
       [](const Tensor& x, const Args&) {
         return stack({remainder(x, 0.7), fmod(x, -0.7), atan2(x, add(x, 0.5)),
                       hypot(x, add(mul(x, 0.5), 1.0)), logaddexp(x, neg(x)),
                       logaddexp2(x, mul(x, 0.5)), lerp(x, neg(x), 0.3), addcmul(x, x, x, 0.5),
                       addcdiv(x, x, add(abs(x), 1.0), 2), div(x, 0.7, "floor"),
                       div(x, 0.7, "trunc"),
                       clamp(x, sub(mul(x, 0.0), 0.5), add(mul(x, 0.0), 0.5)),
                       clamp_min(x, 0.2), masked_fill(x, gt(x, 0.0), Tensor::scalar(1.5, DType::f64))},
                      0);
       }},
      {"sqrt", [](const Tensor& x, const Args&) { return sqrt(add(abs(x), 1.0)); }},
      {"rsqrt", [](const Tensor& x, const Args&) { return rsqrt(add(abs(x), 1.0)); }},
      {"log", [](const Tensor& x, const Args&) { return log(add(abs(x), 1.0)); }},
      {"pow", [](const Tensor& x, const Args&) { return pow(x, 3.0); }},
      {"div", [](const Tensor& x, const Args&) { return div(x, add(abs(x), 1.0)); }},
      {"sub", [](const Tensor& x, const Args&) { return sub(x, mul(x, 2.0)); }},
      {"minimum", [](const Tensor& x, const Args&) { return minimum(x, neg(x)); }},
      {"logical",
       [](const Tensor& x, const Args&) {
         return logical_or(logical_and(gt(x, 0.0), lt(x, 1.0)), logical_not(gt(x, -1.0)));
       }},
      {"compare",
       [](const Tensor& x, const Args&) {
         return stack({lt(x, 0.5), le(x, 0.5), gt(x, 0.5), ge(x, 0.5), ne(x, 0.5)}, 0);
       }},
      {"cast", [](const Tensor& x, const Args&) { return x.to(DType::f32).to(DType::f64); }},
      {"in_place",
       [](const Tensor& x, const Args&) {
         Tensor twos = zeros_like(x);
         twos.fill_(2.0);
         Tensor y = zeros_like(x);
         y.copy_(add(x, twos));
         return y;
       }},
      {"dropout", [](const Tensor& x, const Args&) { return dropout(x, 0.0, true); }},
      {"pad", [](const Tensor& x, const Args& a) { return pad(x, {a[0], a[1]}); }},
      {"index_add",
       [](const Tensor& x, const Args& a) {
         Shape shape = x.shape();
         const int64_t ndim = x.dim();
         if (a[0] >= -ndim && a[0] < ndim) shape[static_cast<size_t>(a[0] < 0 ? a[0] + ndim : a[0])] = 1;
         return index_add(x, a[0], Tensor::from_vector<int64_t>({0}, {1}),
                          ones(shape, DType::f64));
       }},
      {"scatter_add",
       [](const Tensor& x, const Args& a) {
         return scatter_add(x, a[0], zeros(x.shape(), DType::i64), x);
       }},
      {"scatter",
       [](const Tensor& x, const Args& a) {
         return scatter(x, a[0], zeros(x.shape(), DType::i64), x);
       }},
      {"scatter_reduce",
       [](const Tensor& x, const Args& a) {
         return scatter_reduce(x, a[0], zeros(x.shape(), DType::i64), x, "mean", false);
       }},
      {"embedding",
       [](const Tensor& x, const Args&) {
         return embedding(x, Tensor::from_vector<int64_t>({0, 0}, {2}));
       }},
      {"cross_entropy",
       [](const Tensor& x, const Args&) {
         Shape target = x.dim() == 2 ? Shape{x.size(0)} : Shape{};
         return cross_entropy(x, zeros(target, DType::i64));
       }},
      {"max_pool2d", [](const Tensor& x, const Args&) { return max_pool2d(x, 1); }},
      {"avg_pool2d", [](const Tensor& x, const Args&) { return avg_pool2d(x, 1); }},
      {"conv2d",
       [](const Tensor& x, const Args&) {
         const int64_t channels = x.dim() >= 3 ? x.size(-3) : 1;
         return conv2d(x, ones({1, channels, 1, 1}, DType::f64));
       }},
      {"batch_norm",
       [](const Tensor& x, const Args&) { return batch_norm(x, {}, {}, {}, {}, true); }},
      {"batch_norm_eval",
       [](const Tensor& x, const Args&) {
         const int64_t channels = x.dim() >= 2 ? x.size(1) : 1;
         Tensor weight = full({channels}, 2.0, DType::f64);
         return batch_norm(x, zeros({channels}, DType::f64), ones({channels}, DType::f64), weight,
                           weight);
       }},
  };
  return table;
}

struct Case {
  std::string family;
  Shape shape;
  Args args;
  std::string line() const {
    auto join = [](const std::vector<int64_t>& values) {
      std::string text;
      for (size_t i = 0; i < values.size(); ++i) {
        if (i > 0) text += ',';
        text += std::to_string(values[i]);
      }
      return text;
    };
    return family + "|" + join(shape) + "|" + join(args);
  }
};

// Every valid dim of an ndim-dim tensor, and the first invalid one each side.
std::vector<int64_t> dims_to_try(int64_t ndim) {
  int64_t bound = std::max<int64_t>(ndim, 1);
  std::vector<int64_t> dims;
  for (int64_t d = -bound - 1; d <= bound; ++d) dims.push_back(d);
  return dims;
}

std::vector<Case> all_cases() {
  const std::vector<Shape> shapes = {{}, {0}, {1}, {1, 1}, {2, 0}, {0, 2}, {2, 1}};
  std::vector<Case> cases;
  for (const Shape& shape : shapes) {
    const int64_t ndim = static_cast<int64_t>(shape.size());
    auto add = [&](const std::string& family, Args args) {
      cases.push_back({family, shape, std::move(args)});
    };
    for (const char* family : {"sum", "mean", "max", "min", "var", "std", "logsumexp"}) {
      for (int64_t keepdim : {0, 1}) {
        add(family, {keepdim});
        for (int64_t d : dims_to_try(ndim)) add(family, {keepdim, d});
        if (ndim >= 2) add(family, {keepdim, 0, -1});
      }
    }
    for (const char* family : {"argmax", "argmin"}) {
      for (int64_t keepdim : {0, 1}) {
        add(family, {keepdim});
        for (int64_t d : dims_to_try(ndim)) add(family, {keepdim, d});
      }
    }
    for (const char* family :
         {"softmax", "log_softmax", "cat", "squeeze", "index_select", "gather", "cumsum",
          "cumprod", "sort", "argsort", "topk"}) {
      for (int64_t d : dims_to_try(ndim)) add(family, {d});
    }
    add("squeeze", {});
    add("bucketize", {});
    for (const char* family : {"stack", "unsqueeze"}) {
      for (int64_t d : dims_to_try(ndim + 1)) add(family, {d});
    }
    for (int64_t d0 : dims_to_try(ndim)) {
      for (int64_t d1 : dims_to_try(ndim)) {
        add("flatten", {d0, d1});
        add("transpose", {d0, d1});
      }
    }
    for (int64_t d : dims_to_try(ndim)) {
      add("select", {d, 0});
      add("select", {d, -1});
      add("narrow", {d, 0, 0});
      add("narrow", {d, 0, 1});
      add("slice", {d, 0, 1, 1});
      add("split", {d, 1});
      add("chunk", {d, 2});
    }
    for (int64_t diagonal : {-1, 0, 1}) {
      add("tril", {diagonal});
      add("triu", {diagonal});
    }
    for (const char* family :
         {"neg", "abs", "exp", "tanh", "sigmoid", "relu", "gelu", "silu", "softplus", "square",
          "add", "mul", "maximum", "where", "clamp", "eq", "matmul"}) {
      add(family, {});
    }
    if (ndim >= 1) add("layer_norm", {1});
    for (const char* family :
         {"sin",        "cos",      "erf",        "sqrt",           "rsqrt",         "log",
          "pow",        "div",      "sub",        "minimum",        "logical",       "compare",
          "cast",       "in_place", "dropout",    "embedding",      "cross_entropy", "max_pool2d",
          "avg_pool2d", "conv2d",   "batch_norm", "batch_norm_eval"}) {
      add(family, {});
    }
    for (const char* family : {"math_unary", "math_predicates", "math_binary"}) add(family, {});
    for (int64_t d : dims_to_try(ndim)) {
      add("index_add", {d});
      add("scatter_add", {d});
      add("scatter", {d});
      add("scatter_reduce", {d});
    }
    add("pad", {1, 1});
    add("pad", {-1, 0});
  }
  // The spatial ops on 4-D inputs: an empty batch, no channels, an empty
  // spatial dim, and size 1.
  for (const Shape& shape :
       std::vector<Shape>{{0, 1, 2, 2}, {1, 0, 2, 2}, {1, 1, 0, 2}, {1, 1, 1, 1}, {1, 2, 2, 1}}) {
    for (const char* family : {"max_pool2d", "avg_pool2d", "conv2d"})
      cases.push_back({family, shape, {}});
  }
  return cases;
}

// Positive dims with a `[d, start, end, step]` slice make no sense on PyTorch's
// indexing for negative d; keep slice cases to dims PyTorch can express.
bool expressible(const Case& c) {
  if (c.family == "slice") return c.args[0] >= 0;
  return true;
}

Tensor input(const Shape& shape) {
  std::vector<double> values(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = 2 * std::sin(static_cast<double>(i + 1));
  return Tensor::from_vector(values, shape);
}

std::vector<std::string> split_on(const std::string& text, char separator) {
  std::vector<std::string> pieces;
  std::string piece;
  std::istringstream stream(text);
  while (std::getline(stream, piece, separator)) pieces.push_back(piece);
  if (!text.empty() && text.back() == separator) pieces.emplace_back();
  return pieces;
}

std::vector<double> parse_numbers(const std::string& text) {
  std::vector<double> values;
  for (const std::string& piece : split_on(text, ',')) {
    if (!piece.empty()) values.push_back(std::strtod(piece.c_str(), nullptr));
  }
  return values;
}

class DegenerateShapes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cases_ = new std::vector<Case>();
    for (const Case& c : all_cases()) {
      if (expressible(c)) cases_->push_back(c);
    }
    expected_ = new std::vector<std::string>();
    skip_reason_ = new std::string(run_reference());
  }
  static void TearDownTestSuite() {
    delete cases_;
    delete expected_;
    delete skip_reason_;
  }
  void SetUp() override {
    if (!skip_reason_->empty()) {
      // CI sets TESSERA_REQUIRE_TORCH so a missing PyTorch fails instead of skipping.
      if (std::getenv("TESSERA_REQUIRE_TORCH")) FAIL() << *skip_reason_;
      GTEST_SKIP() << *skip_reason_;
    }
  }

  // Runs the reference script on the case list; returns "" or why not.
  static std::string run_reference() {
    const char* python = std::getenv("TESSERA_TORCH_PYTHON");
    std::string interpreter = python ? python : "/usr/bin/python3";
    if (std::system((interpreter + " -c 'import torch' 2>/dev/null").c_str()) != 0) {
      return interpreter + " cannot import torch (Debian package python3-torch)";
    }
    const fs::path dir =
        fs::temp_directory_path() / ("tessera_degenerate_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    {
      std::ofstream out(dir / "cases.txt");
      for (const Case& c : *cases_) out << c.line() << "\n";
    }
    const fs::path script = fs::path(TESSERA_SOURCE_DIR) / "tests/ops/torch_degenerate.py";
    const std::string command = interpreter + " " + script.string() + " " +
                                (dir / "cases.txt").string() + " " +
                                (dir / "expected.txt").string();
    std::string why;
    if (std::system(command.c_str()) != 0) {
      why = "failed: " + command;
    } else {
      std::ifstream in(dir / "expected.txt");
      for (std::string line; std::getline(in, line);) expected_->push_back(line);
      if (expected_->size() != cases_->size()) why = "the reference answered too few cases";
    }
    std::error_code ignored;
    fs::remove_all(dir, ignored);
    return why;
  }

  static std::vector<Case>* cases_;
  static std::vector<std::string>* expected_;
  static std::string* skip_reason_;
};
std::vector<Case>* DegenerateShapes::cases_ = nullptr;
std::vector<std::string>* DegenerateShapes::expected_ = nullptr;
std::string* DegenerateShapes::skip_reason_ = nullptr;

// Cases where Tessera deliberately throws a clear error although PyTorch
// gives a result; each with the reason.
std::string documented_divergence(const Case& c) {
  if ((c.family == "index_select" || c.family == "gather" || c.family == "index_add" ||
       c.family == "scatter_add" || c.family == "scatter" || c.family == "scatter_reduce") &&
      c.shape.empty()) {
    return "the indexing ops require x to have at least one dim";
  }
  if (c.family == "conv2d" && c.shape.size() == 4 && c.shape[1] == 0) {
    // PyTorch 1.13 returns an empty tensor of the input's shape here,
    // whatever the output channels; the sum over no input channels is zeros
    // of [N, out_channels, H, W], which Tessera returns.
    return "conv2d with no input channels";
  }
  return "";
}

// One case against PyTorch's line; returns "" when it agrees, else why not.
std::string check_case(const Case& c, const std::string& expected_line) {
  const std::vector<std::string> expected = split_on(expected_line, '|');
  const Family& fn = families().at(c.family);
  Tensor x = input(c.shape).set_requires_grad(true);
  if (!documented_divergence(c).empty()) {
    // Not compared with PyTorch; it must still not crash, and errors name the op.
    try {
      (void)fn(x, c.args);
    } catch (const Error& error) {
      if (error.what()[0] != '[') return std::string("error without [op]: ") + error.what();
    }
    return "";
  }
  Tensor y;
  try {
    y = fn(x, c.args);
  } catch (const Error& error) {
    std::string message = error.what();
    if (expected[0] == "ok") {
      return "PyTorch gives a result, Tessera throws: " + message;
    }
    if (message.empty() || message[0] != '[') return "error without [op]: " + message;
    return "";
  }
  if (expected[0] != "ok") return "PyTorch rejects it (" + expected[1] + "), Tessera does not";
  Shape shape;
  for (double size : parse_numbers(expected[1])) shape.push_back(static_cast<int64_t>(size));
  if (y.shape() != shape) {
    return "shape " + shape_str(y.shape()) + ", PyTorch " + shape_str(shape);
  }
  auto values = all_close(y.detach(), parse_numbers(expected[2]), 1e-9, 1e-12);
  if (!values) return std::string("values: ") + values.message();
  if (expected[3] == "-" || !is_floating(y.dtype())) return "";
  Tensor gradient;
  try {
    auto grads = grad({sum(mul(y, y))}, {x}, {}, false, false, true);
    gradient = grads[0].defined() ? grads[0] : zeros_like(x);
  } catch (const Error& error) {
    return std::string("backward throws: ") + error.what();
  }
  auto gradients = all_close(gradient, parse_numbers(expected[3]), 1e-9, 1e-12);
  if (!gradients) return std::string("gradient: ") + gradients.message();
  return "";
}

// Which registered ops the families reach (forward, and backward through
// the gradient each case takes), so a newly registered op must join the sweep.
TEST(DegenerateShapesCoverage, EveryRegisteredOpIsSwept) {
  const std::set<std::string> reached = {
      // reductions and their compositions
      "sum", "max", "min", "argmax", "argmin", "softmax", "log_softmax",
      // shape and indexing
      "cat", "reshape", "permute", "slice", "slice_backward", "expand", "copy", "index_select",
      "gather", "index_add", "scatter_add", "embedding", "tril", "triu", "pad", "pad_backward",
      // elementwise
      "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "erf", "tanh", "sigmoid", "relu",
      "relu_backward", "gelu", "gelu_backward", "silu", "softplus", "add", "sub", "mul", "div",
      "pow", "maximum", "minimum", "where", "clamp", "eq", "ne", "lt", "le", "gt", "ge",
      "logical_and", "logical_or", "logical_not", "cast", "dropout", "copy_", "fill_",
      // layers
      "matmul", "layer_norm", "layer_norm_backward", "cross_entropy", "cross_entropy_backward",
      "max_pool2d", "max_pool2d_backward", "max_pool2d_select", "avg_pool2d", "avg_pool2d_backward",
      "conv2d", "conv2d_backward_input", "conv2d_backward_weight",
      // math and activations (issue 11)
      "erfc", "erfinv", "log1p", "expm1", "log2", "log10", "exp2", "reciprocal", "floor", "ceil",
      "trunc", "round", "frac", "sign", "nan_to_num", "isnan", "isinf", "isfinite", "remainder",
      "fmod", "atan2", "hypot", "logaddexp", "logaddexp2", "logical_xor", "div_rounding",
      "clamp_tensor",

      // reductions, scans, sorting and linear algebra (issue 11)
      "cumsum", "cumprod", "cumprod_backward", "sort", "topk", "searchsorted",

      // shape and indexing (issue 11)
      "scatter", "scatter_reduce",

      // convolution, pooling and padding (issue 11)
      "max_pool2d_with_indices", "adaptive_max_pool2d", "adaptive_avg_pool2d", "unfold", "fold",

      // losses and functional layers (issue 11)

      // normalisation (issue 11)
      "batch_norm_stats", "batch_norm_elemt", "batch_norm_backward_reduce",
      "batch_norm_backward_elemt", "batch_norm_update_stats",

      // Tensor API (issue 11)

      // nn, optim and data (issue 11)
  };
  // Factories take no tensor and no dim; tests/ops/creation_test.cpp covers
  // their empty shapes.
  const std::set<std::string> factories = {"arange", "eye",   "full",   "linspace",
                                           "rand",   "randn", "randint"};
  // Optimizer updates, collectives, the local <-> global conversions and
  // device transfers take no dim: tests/optim, tests/global
  // (collective_ops_test, global_worker) and tests/backend/cuda_test.cpp
  // cover them.
  const std::set<std::string> dimless = {
      "sgd_step",    "sgd_momentum_step", "adam_step",  "all_reduce",
      "all_gather",  "reduce_scatter",    "all_to_all", "broadcast",
      "to_global",   "local_to_global",   "to_local",   "to_device",
      "all_reduce_", "all_to_all_single", "send",       "recv"};
  std::string missing;
  for (const OpDef* op : all_ops()) {
    if (!reached.count(op->name) && !factories.count(op->name) && !dimless.count(op->name)) {
      missing += " " + op->name;
    }
  }
  EXPECT_TRUE(missing.empty()) << "ops the degenerate-shape sweep does not reach:" << missing;
}

TEST_F(DegenerateShapes, EveryCaseMatchesPyTorchOrNamesTheOp) {
  ASSERT_EQ(expected_->size(), cases_->size());
  int failures = 0;
  for (size_t i = 0; i < cases_->size(); ++i) {
    const Case& c = (*cases_)[i];
    std::string why = check_case(c, (*expected_)[i]);
    if (!why.empty() && failures++ < 60) ADD_FAILURE() << c.line() << ": " << why;
  }
  EXPECT_EQ(failures, 0) << "of " << cases_->size() << " cases";
}

}  // namespace
}  // namespace tessera::testing
