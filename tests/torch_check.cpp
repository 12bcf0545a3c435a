#include "torch_check.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <sstream>

#include "testing.h"

namespace tessera::testing {

namespace {

namespace fs = std::filesystem;

// The long-lived PyTorch interpreter of this test process.
class TorchServer {
 public:
  static TorchServer& get() {
    static TorchServer server;
    return server;
  }

  // Why PyTorch cannot answer ("" when it can).
  const std::string& unavailable() {
    if (!started_) start();
    return unavailable_;
  }

  // Sends one request and returns the answer line ("" if the server died).
  std::string ask(const std::string& request) {
    if (!started_) start();
    if (!unavailable_.empty()) return "";
    std::string line = request + "\n";
    if (::write(to_server_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return "";
    }
    std::string answer;
    char c;
    while (true) {
      ssize_t n = ::read(from_server_, &c, 1);
      if (n <= 0) return "";
      if (c == '\n') return answer;
      answer += c;
    }
  }

  fs::path scratch() const { return scratch_; }

  ~TorchServer() {
    if (pid_ > 0) {
      ::close(to_server_);  // the server ends at end of input
      ::close(from_server_);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    std::error_code ignored;
    if (!scratch_.empty()) fs::remove_all(scratch_, ignored);
  }

 private:
  void start() {
    started_ = true;
    const char* python = std::getenv("TESSERA_TORCH_PYTHON");
    const std::string interpreter = python ? python : "/usr/bin/python3";
    if (std::system((interpreter + " -c 'import torch' 2>/dev/null").c_str()) != 0) {
      unavailable_ = interpreter + " cannot import torch (Debian package python3-torch)";
      return;
    }
    scratch_ = fs::temp_directory_path() / ("tessera_torch_check_" + std::to_string(::getpid()));
    fs::create_directories(scratch_);
    const std::string script = (fs::path(TESSERA_SOURCE_DIR) / "tests/torch_check.py").string();
    int to_child[2], from_child[2];
    if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) {
      unavailable_ = "cannot create pipes for the PyTorch interpreter";
      return;
    }
    // A server that dies must not kill the test with SIGPIPE.
    ::signal(SIGPIPE, SIG_IGN);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(to_child[0], 0);
      ::dup2(from_child[1], 1);
      ::execl(interpreter.c_str(), interpreter.c_str(), "-u", script.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    to_server_ = to_child[1];
    from_server_ = from_child[0];
    if (pid_ < 0) unavailable_ = "cannot start " + interpreter;
  }

  bool started_ = false;
  std::string unavailable_;
  pid_t pid_ = -1;
  int to_server_ = -1;
  int from_server_ = -1;
  fs::path scratch_;
};

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> parts;
  std::stringstream stream(line);
  std::string part;
  while (std::getline(stream, part, '\t')) parts.push_back(part);
  return parts;
}

std::string escape_newlines(const std::string& text) {
  std::string escaped;
  for (char c : text) {
    if (c == '\n') {
      escaped += "\\n";
    } else if (c == '\t') {
      escaped += ' ';
    } else {
      escaped += c;
    }
  }
  return escaped;
}

Tensor random_like(const Tensor& x, uint64_t seed) {
  return uniform(x.shape(), -1.0, 1.0, seed, x.dtype());
}

std::string describe(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + shape_str(t.shape());
}

// Values, with NaN matching NaN and infinities matching exactly.
::testing::AssertionResult same_values(const Tensor& actual, const Tensor& expected, double rtol,
                                       double atol) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << shape_str(actual.shape()) << ", PyTorch's " << shape_str(expected.shape());
  }
  if (!is_floating(expected.dtype())) rtol = atol = 0;
  return all_close(actual, expected, rtol, atol);
}

}  // namespace

Tensor non_contiguous_copy(const Tensor& x) {
  NoGradGuard no_grad;
  if (x.dim() == 0 || x.numel() == 0) return x.clone();
  // Every element one apart: the first half of a [..., 2] stack.
  Tensor spread = stack({x, x}, -1).select(-1, 0);
  return spread;
}

::testing::AssertionResult matches_torch(const std::string& torch_expression, const Inputs& inputs,
                                         const OpFn& fn, const TorchOptions& options) {
  TorchServer& server = TorchServer::get();
  if (!server.unavailable().empty()) {
    if (std::getenv("TESSERA_REQUIRE_TORCH")) {
      return ::testing::AssertionFailure() << server.unavailable();
    }
    static std::once_flag noted;
    std::call_once(noted, [&] {
      std::fprintf(stderr, "torch_check: comparisons skipped: %s\n", server.unavailable().c_str());
    });
    return ::testing::AssertionSuccess();
  }
  const std::string where = "`" + torch_expression + "`";

  // Tessera's side, on fresh leaves.
  std::vector<Tensor> leaves;
  std::vector<bool> wants_grad;
  for (const Tensor& input : inputs) {
    Tensor leaf = input.detach();
    const bool grad = options.grad && is_floating(input.dtype());
    if (grad) leaf.set_requires_grad(true);
    leaves.push_back(leaf);
    wants_grad.push_back(grad);
  }
  std::string tessera_error;
  std::vector<Tensor> outputs;
  try {
    outputs = fn(leaves).tensors;
  } catch (const Error& error) {
    tessera_error = error.what();
  }

  // PyTorch's side, on the same values.
  StateDict request;
  std::string flags;
  for (size_t i = 0; i < leaves.size(); ++i) {
    request.insert("i" + std::to_string(i), leaves[i].detach().contiguous());
    flags += std::string(i ? "," : "") + (wants_grad[i] ? "1" : "0");
  }
  std::vector<Tensor> weights(outputs.size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (outputs[k].defined() && is_floating(outputs[k].dtype())) {
      weights[k] = random_like(outputs[k].detach(), 1000 + k);
      request.insert("w" + std::to_string(k), weights[k]);
    }
  }
  static int counter = 0;
  const int id = counter++;
  const fs::path case_file = server.scratch() / ("case" + std::to_string(id) + ".safetensors");
  const fs::path result_file = server.scratch() / ("result" + std::to_string(id) + ".safetensors");
  io::save_safetensors(case_file.string(), request, {{"grad", flags}});
  const std::string answer = server.ask(case_file.string() + "\t" + result_file.string() + "\t" +
                                        escape_newlines(torch_expression));
  std::error_code ignored;
  fs::remove(case_file, ignored);
  if (answer.empty()) {
    return ::testing::AssertionFailure() << where << ": the PyTorch interpreter stopped answering";
  }
  const std::vector<std::string> parts = split_tabs(answer);
  if (parts[0] == "internal") {
    return ::testing::AssertionFailure()
           << where << ": the test's PyTorch expression is broken: " << answer.substr(9);
  }
  if (parts[0] == "error") {
    const std::string message = parts.size() > 1 ? parts[1] : "";
    if (!tessera_error.empty()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << where << ": PyTorch raises (" << message << ") but Tessera returns a result";
  }
  StateDict result = io::load_safetensors(result_file.string()).tensors;
  fs::remove(result_file, ignored);
  if (!tessera_error.empty()) {
    return ::testing::AssertionFailure()
           << where << ": Tessera raises (" << tessera_error << ") but PyTorch returns a result";
  }
  const size_t torch_count = static_cast<size_t>(std::stoll(parts.at(1)));
  if (torch_count != outputs.size()) {
    return ::testing::AssertionFailure() << where << ": Tessera returns " << outputs.size()
                                         << " outputs, PyTorch " << torch_count;
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor expected = result.at("o" + std::to_string(k));
    const Tensor& actual = outputs[k];
    if (!actual.defined()) {
      return ::testing::AssertionFailure() << where << ": output " << k << " is undefined";
    }
    if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape()) {
      return ::testing::AssertionFailure() << where << ": output " << k << " is "
                                           << describe(actual) << ", PyTorch's is "
                                           << describe(expected);
    }
    auto values = same_values(actual.detach(), expected, options.rtol, options.atol);
    if (!values) {
      return ::testing::AssertionFailure() << where << ": output " << k << " differs: "
                                           << values.message();
    }
  }

  // Gradients.
  const std::string note = parts.size() > 2 ? parts[2] : "-";
  if (note != "-") return ::testing::AssertionSuccess();  // nothing to compare
  Tensor objective;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!weights[k].defined() || !outputs[k].requires_grad()) continue;
    Tensor term = sum(mul(outputs[k], weights[k].to(outputs[k].dtype())));
    objective = objective.defined() ? add(objective, term) : term;
  }
  if (!objective.defined()) {
    bool any_torch_grad = false;
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (!result.contains("g" + std::to_string(i))) continue;
      const Tensor& torch_grad = result.at("g" + std::to_string(i));
      if (torch_grad.numel() == 0) continue;  // an empty gradient carries nothing
      any_torch_grad = any_torch_grad || max(abs(torch_grad)).item<double>() != 0.0;
    }
    if (any_torch_grad) {
      return ::testing::AssertionFailure()
             << where << ": PyTorch's outputs carry a gradient, Tessera's do not require grad";
    }
    return ::testing::AssertionSuccess();
  }
  try {
    objective.backward();
  } catch (const Error& error) {
    return ::testing::AssertionFailure() << where << ": Tessera's backward raises: "
                                         << error.what();
  }
  for (size_t i = 0; i < leaves.size(); ++i) {
    const std::string key = "g" + std::to_string(i);
    if (!wants_grad[i] || !result.contains(key)) continue;
    const Tensor expected = result.at(key);
    Tensor actual = leaves[i].grad();
    if (!actual.defined()) actual = zeros_like(leaves[i]);
    auto values = same_values(actual, expected, options.grad_rtol, options.grad_atol);
    if (!values) {
      return ::testing::AssertionFailure() << where << ": the gradient of input " << i << " ("
                                           << describe(leaves[i]) << ") differs: "
                                           << values.message();
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult sweep_torch(const std::string& torch_expression,
                                       const std::vector<std::vector<Shape>>& cases,
                                       const OpFn& fn, const TorchOptions& options) {
  uint64_t seed = 1;
  for (const std::vector<Shape>& shapes : cases) {
    Inputs inputs;
    for (const Shape& shape : shapes) {
      if (is_floating(options.dtype)) {
        inputs.push_back(uniform(shape, options.low, options.high, seed++, options.dtype));
      } else {
        std::vector<double> values =
            uniform(shape, options.low, options.high, seed++).to_vector<double>();
        for (double& value : values) value = std::floor(value);
        inputs.push_back(Tensor::from_vector(values, shape).to(options.dtype));
      }
    }
    std::string shape_list;
    for (const Shape& shape : shapes) shape_list += shape_str(shape) + " ";
    auto contiguous = matches_torch(torch_expression, inputs, fn, options);
    if (!contiguous) return contiguous << " (inputs " << shape_list << ")";
    if (!options.non_contiguous) continue;
    Inputs spread;
    for (const Tensor& input : inputs) spread.push_back(non_contiguous_copy(input));
    auto strided = matches_torch(torch_expression, spread, fn, options);
    if (!strided) return strided << " (non-contiguous inputs " << shape_list << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tessera::testing
