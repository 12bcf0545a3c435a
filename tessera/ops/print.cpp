// Tensor printing in PyTorch's layout (torch/_tensor_str.py).

#include "tessera/ops/print.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace tessera {
namespace {

std::mutex options_mutex;
PrintOptions current_options;

// How every element of one tensor is written: one format, one width.
class Formatter {
 public:
  Formatter(const std::vector<double>& values, DType dtype, int precision)
      : dtype_(dtype), precision_(precision) {
    if (is_floating(dtype)) {
      bool integral = true;
      double largest = 0.0;
      double smallest = INFINITY;
      for (double v : values) {
        if (!std::isfinite(v)) continue;
        if (v != std::nearbyint(v)) integral = false;
        if (v == 0.0) continue;
        largest = std::max(largest, std::fabs(v));
        smallest = std::min(smallest, std::fabs(v));
      }
      integral_ = integral;
      if (largest > 0.0) {
        scientific_ = largest / smallest > 1000.0 || largest > 1e8 ||
                      (!integral && smallest < 1e-4);
      }
    }
    for (double v : values) width_ = std::max(width_, text(v).size());
  }

  std::string operator()(double value) const {
    std::string s = text(value);
    return std::string(width_ - s.size(), ' ') + s;
  }
  size_t width() const { return width_; }

 private:
  std::string text(double value) const {
    char buffer[64];
    if (dtype_ == DType::boolean) return value != 0.0 ? "True" : "False";
    if (!is_floating(dtype_)) {
      std::snprintf(buffer, sizeof(buffer), "%lld", static_cast<long long>(value));
      return buffer;
    }
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    if (scientific_) {
      std::snprintf(buffer, sizeof(buffer), "%.*e", precision_, value);
    } else if (integral_) {
      std::snprintf(buffer, sizeof(buffer), "%.0f.", value);
    } else {
      std::snprintf(buffer, sizeof(buffer), "%.*f", precision_, value);
    }
    return buffer;
  }

  DType dtype_;
  int precision_;
  bool integral_ = false;
  bool scientific_ = false;
  size_t width_ = 1;
};

// The indices shown along a dim of `size`: all, or the edges around a gap
// (marked -1).
std::vector<int64_t> shown(int64_t size, bool summarize, int64_t edgeitems) {
  std::vector<int64_t> indices;
  if (summarize && size > 2 * edgeitems) {
    for (int64_t i = 0; i < edgeitems; ++i) indices.push_back(i);
    indices.push_back(-1);
    for (int64_t i = size - edgeitems; i < size; ++i) indices.push_back(i);
  } else {
    for (int64_t i = 0; i < size; ++i) indices.push_back(i);
  }
  return indices;
}

struct Printer {
  const std::vector<double>& values;
  const Shape& shape;
  std::vector<int64_t> row_major;  // element strides of the logical layout
  bool summarize;
  PrintOptions options;

  void collect(int64_t dim, int64_t base, std::vector<double>& out) const {
    if (dim == static_cast<int64_t>(shape.size())) {
      out.push_back(values[static_cast<size_t>(base)]);
      return;
    }
    for (int64_t i : shown(shape[dim], summarize, options.edgeitems)) {
      if (i >= 0) collect(dim + 1, base + i * row_major[dim], out);
    }
  }

  std::string vector_text(int64_t base, int64_t indent, const Formatter& format) const {
    const int64_t per_line = std::max<int64_t>(
        1, (options.linewidth - indent) / static_cast<int64_t>(format.width() + 2));
    std::vector<std::string> items;
    for (int64_t i : shown(shape.back(), summarize, options.edgeitems)) {
      items.push_back(i < 0 ? " ..." : format(values[static_cast<size_t>(base + i)]));
    }
    std::string out = "[";
    for (size_t k = 0; k < items.size(); ++k) {
      if (k > 0) {
        out += k % static_cast<size_t>(per_line) == 0
                   ? ",\n" + std::string(static_cast<size_t>(indent + 1), ' ')
                   : ", ";
      }
      out += items[k];
    }
    return out + "]";
  }

  std::string text(int64_t dim, int64_t base, int64_t indent, const Formatter& format) const {
    const int64_t rank = static_cast<int64_t>(shape.size());
    if (dim == rank - 1) return vector_text(base, indent, format);
    // Appended piece by piece: GCC 12 misreads "," + std::string(...) under -Wrestrict.
    std::string separator = ",";
    separator.append(static_cast<size_t>(rank - dim - 1), '\n');
    separator.append(static_cast<size_t>(indent + 1), ' ');
    std::string out = "[";
    bool first = true;
    for (int64_t i : shown(shape[dim], summarize, options.edgeitems)) {
      if (!first) out += separator;
      first = false;
      out += i < 0 ? "..." : text(dim + 1, base + i * row_major[dim], indent + 1, format);
    }
    return out + "]";
  }
};

}  // namespace

void set_print_options(const PrintOptions& options) {
  TESSERA_CHECK(options.precision >= 0 && options.precision <= 30 && options.threshold >= 0 &&
                    options.edgeitems >= 1 && options.linewidth >= 1,
                "[set_print_options] got precision ", options.precision, ", threshold ",
                options.threshold, ", edgeitems ", options.edgeitems, ", linewidth ",
                options.linewidth, "; valid: precision in [0, 30], threshold >= 0, edgeitems >= 1, "
                "linewidth >= 1");
  std::lock_guard<std::mutex> lock(options_mutex);
  current_options = options;
}

PrintOptions print_options() {
  std::lock_guard<std::mutex> lock(options_mutex);
  return current_options;
}

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) {
  if (!tensor.defined()) return out << "tensor(undefined)";
  const PrintOptions options = print_options();
  const std::vector<double> values = tensor.to_vector<double>();
  const Shape& shape = tensor.shape();
  Printer printer{values, shape, contiguous_strides(shape), tensor.numel() > options.threshold,
                  options};
  std::vector<double> displayed;
  printer.collect(0, 0, displayed);
  const Formatter format(displayed, tensor.dtype(), options.precision);
  out << "tensor(";
  if (tensor.dim() == 0) {
    out << format(values.at(0));
  } else if (tensor.numel() == 0) {
    out << "[]";
  } else {
    out << printer.text(0, 0, 7, format);
  }
  if (tensor.numel() == 0 && tensor.dim() != 1) {
    out << ", size=(";
    for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
    out << (shape.size() == 1 ? ",)" : ")");
  }
  const DType dtype = tensor.dtype();
  if (dtype != DType::f32 && dtype != DType::i64 && dtype != DType::boolean) {
    out << ", dtype=" << dtype_name(dtype);
  }
  if (tensor.device().type != DeviceType::cpu) out << ", device='" << device_str(tensor.device()) << "'";
  if (tensor.is_global()) {
    out << ", placement=" << placement_str(tensor.placement())
        << ", sbp=" << nd_sbp_str(tensor.nd_sbp());
  }
  if (tensor.requires_grad()) out << ", requires_grad=True";
  return out << ")";
}

// Declared with Tensor (core/tensor.h); reading values needs the ops.
std::string to_string(const Tensor& tensor) {
  if (!tensor.defined()) return "tensor(undefined)";
  std::ostringstream out;
  out << "tensor(shape=" << shape_str(tensor.shape()) << ", " << dtype_name(tensor.dtype());
  if (tensor.device().type != DeviceType::cpu) out << ", device=" << device_str(tensor.device());
  if (tensor.is_global()) {
    out << ", placement=" << placement_str(tensor.placement())
        << ", sbp=" << nd_sbp_str(tensor.nd_sbp()) << ", local=" << to_string(tensor.local_shard())
        << ")";
    return out.str();
  }
  if (tensor.numel() <= 64 && !tensor.is_meta()) {
    out << ", values=[";
    std::vector<double> values = tensor.to_vector<double>();
    for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
    out << "]";
  }
  out << ")";
  return out.str();
}

}  // namespace tessera
