#include "tessera/global/collective_ops.h"

#include <algorithm>
#include <numeric>

#include "tessera/global/layout.h"
#include "tessera/global/process_groups.h"
#include "tessera/ops/concat.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/op.h"

namespace tessera::global {

namespace {

using distributed::ReduceOp;

// The ranks attribute: the default group's ranks when none are given.
std::vector<int64_t> ranks_attr(const std::vector<int>& ranks) {
  if (ranks.empty()) {
    std::vector<int64_t> all(static_cast<size_t>(distributed::default_group()->size()));
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  return {ranks.begin(), ranks.end()};
}

std::vector<int> ranks_of(const Attrs& attrs) {
  const std::vector<int64_t>& ranks = attrs.ints("ranks");
  return {ranks.begin(), ranks.end()};
}

// This process's position in the op's ranks.
int64_t position(const char* op, const Attrs& attrs) {
  const std::vector<int64_t>& ranks = attrs.ints("ranks");
  const auto at = std::find(ranks.begin(), ranks.end(), world_rank());
  TESSERA_CHECK(at != ranks.end(), "[", op, "] rank ", world_rank(), " is not among the ranks ",
                shape_str(ranks), " of this collective; only they may call it");
  return at - ranks.begin();
}

int64_t group_size(const Attrs& attrs) {
  return static_cast<int64_t>(attrs.ints("ranks").size());
}

distributed::Group& group(const char* op, const Attrs& attrs) {
  (void)position(op, attrs);
  return *group_of(ranks_of(attrs));
}

ReduceOp reduce_op(const Attrs& attrs) {
  const std::string& name = attrs.get<std::string>("reduce");
  if (name == "max") return ReduceOp::max;
  if (name == "min") return ReduceOp::min;
  return ReduceOp::sum;
}

// The per-rank sizes along a dim: `given` when set (checked), else
// split_range's pieces of `length`.
std::vector<int64_t> piece_sizes(const char* op, const char* what,
                                 const std::vector<int64_t>& given, int64_t length, int64_t parts) {
  if (given.empty()) {
    std::vector<int64_t> sizes;
    for (int64_t q = 0; q < parts; ++q) sizes.push_back(split_range(length, parts, q).size);
    return sizes;
  }
  TESSERA_CHECK(static_cast<int64_t>(given.size()) == parts, "[", op, "] ", what, " has ",
                given.size(), " entries for ", parts, " ranks");
  int64_t total = 0;
  for (int64_t size : given) {
    TESSERA_CHECK(size >= 0, "[", op, "] ", what, " ", shape_str(given), " has a negative size");
    total += size;
  }
  TESSERA_CHECK(total == length, "[", op, "] ", what, " ", shape_str(given), " add up to ", total,
                ", not the dim's ", length);
  return given;
}

std::vector<int64_t> optional_ints(const Attrs& attrs, const char* name) {
  return attrs.has(name) ? attrs.ints(name) : std::vector<int64_t>{};
}

// Every rank of the op has `mine` elements along the dim unless `sizes`
// says otherwise.
std::vector<int64_t> gathered_sizes(const char* op, const Attrs& attrs, const char* name,
                                    int64_t mine) {
  std::vector<int64_t> sizes = optional_ints(attrs, name);
  const int64_t n = group_size(attrs);
  if (sizes.empty()) return std::vector<int64_t>(static_cast<size_t>(n), mine);
  TESSERA_CHECK(static_cast<int64_t>(sizes.size()) == n, "[", op, "] ", name, " has ", sizes.size(),
                " entries for ", n, " ranks");
  TESSERA_CHECK(sizes[static_cast<size_t>(position(op, attrs))] == mine, "[", op, "] ", name, " ",
                shape_str(sizes), " gives this rank ",
                sizes[static_cast<size_t>(position(op, attrs))],
                " elements along the dim, but its tensor has ", mine);
  return sizes;
}

int64_t sum_of(const std::vector<int64_t>& sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
}

void check_reduction_grad(const GradContext& c, const char* op) {
  TESSERA_CHECK(c.attrs().get<std::string>("reduce") == "sum", "[", op,
                "] with reduce=", c.attrs().get<std::string>("reduce"),
                " has no gradient; only sum does");
}

// Moves dim `d` to the front; inverse_of(perm) moves it back.
std::vector<int64_t> front_perm(int64_t d, int64_t ndim) {
  std::vector<int64_t> perm{d};
  for (int64_t i = 0; i < ndim; ++i) {
    if (i != d) perm.push_back(i);
  }
  return perm;
}
std::vector<int64_t> inverse_of(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inverse;
}

const OpDef& all_reduce_op();
const OpDef& all_gather_op();
const OpDef& reduce_scatter_op();
const OpDef& all_to_all_op();

// ---- all_reduce: inputs {x}; attrs ranks, reduce.

void all_reduce_kernel(KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  out.copy_(ctx.inputs[0]);
  group("all_reduce", ctx.attrs).all_reduce(out, reduce_op(ctx.attrs));
}

// ---- all_reduce_: in place, as torch.distributed.all_reduce; inputs {x}
// (written); attrs ranks, reduce. Not differentiable (the out-of-place op
// is): gradient buckets and other no-grad code reduce their own buffers.
void all_reduce_in_place_kernel(KernelContext& ctx) {
  Tensor x = ctx.inputs[0];
  group("all_reduce_", ctx.attrs).all_reduce(x, reduce_op(ctx.attrs));
}

const OpDef& all_reduce_in_place_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "all_reduce_";
    d.kind = OpKind::collective;
    d.writes = {0};
    d.contiguous_inputs = true;
    d.differentiable = false;
    d.infer = [](const std::vector<TensorMeta>& in, const Attrs&) {
      return std::vector<TensorMeta>{in.at(0)};
    };
    d.torch_name = "torch.distributed.all_reduce";
    d.signature = "global::all_reduce_(x, op, ranks)";
    return d;
  }());
  return def;
}

const OpDef& all_reduce_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "all_reduce";
    d.kind = OpKind::collective;
    d.infer = [](const std::vector<TensorMeta>& in, const Attrs&) {
      return std::vector<TensorMeta>{in.at(0)};
    };
    d.saves_inputs = false;
    d.grad = [](const GradContext& c) {
      check_reduction_grad(c, "all_reduce");
      return std::vector<Tensor>{call1(all_reduce_op(), {c.grad_output(0)}, c.attrs())};
    };
    d.torch_name = "torch.distributed.nn.functional.all_reduce";
    d.signature = "global::all_reduce(x, op, ranks)";
    return d;
  }());
  return def;
}

// ---- all_gather: inputs {x}; attrs ranks, dim, sizes (optional).

void all_gather_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const int64_t dim = ctx.attrs.i("dim");
  const std::vector<int64_t> sizes =
      gathered_sizes("all_gather", ctx.attrs, "sizes", x.shape()[static_cast<size_t>(dim)]);
  // The gathered dim goes first, where all_gather_uneven lets ranks differ.
  const std::vector<int64_t> perm = front_perm(dim, x.dim());
  std::vector<Tensor> parts =
      group("all_gather", ctx.attrs).all_gather_uneven(x.permute(perm).contiguous());
  for (size_t q = 0; q < parts.size(); ++q) {
    TESSERA_CHECK(parts[q].dim() == x.dim() && parts[q].shape()[0] == sizes[q],
                  "[all_gather] rank ", q, " of the collective sent ", shape_str(parts[q].shape()),
                  " where ", sizes[q], " elements along dim ", dim, " were expected");
  }
  ctx.outputs[0].copy_(cat(parts, 0).permute(inverse_of(perm)));
}

const OpDef& all_gather_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "all_gather";
    d.kind = OpKind::collective;
    d.infer = [](const std::vector<TensorMeta>& in, const Attrs& attrs) {
      TensorMeta out = in.at(0);
      const auto dim = static_cast<size_t>(attrs.i("dim"));
      out.shape[dim] = sum_of(gathered_sizes("all_gather", attrs, "sizes", out.shape[dim]));
      return std::vector<TensorMeta>{out};
    };
    d.saves_inputs = false;
    d.grad = [](const GradContext& c) {
      const std::vector<int64_t> sizes =
          gathered_sizes("all_gather", c.attrs(), "sizes",
                         c.input_meta(0).shape[static_cast<size_t>(c.attrs().i("dim"))]);
      Attrs attrs{{"ranks", c.attrs().ints("ranks")},
                  {"dim", c.attrs().i("dim")},
                  {"reduce", std::string("sum")},
                  {"sizes", sizes}};
      return std::vector<Tensor>{call1(reduce_scatter_op(), {c.grad_output(0)}, attrs)};
    };
    d.torch_name = "torch.distributed.nn.functional.all_gather";
    d.signature = "global::all_gather(x, dim, ranks, sizes)";
    return d;
  }());
  return def;
}

// ---- reduce_scatter: inputs {x}; attrs ranks, dim, reduce, sizes (optional).

void reduce_scatter_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const int64_t dim = ctx.attrs.i("dim");
  const int64_t n = group_size(ctx.attrs), k = position("reduce_scatter", ctx.attrs);
  const std::vector<int64_t> sizes =
      piece_sizes("reduce_scatter", "sizes", optional_ints(ctx.attrs, "sizes"),
                  x.shape()[static_cast<size_t>(dim)], n);
  distributed::Group& g = group("reduce_scatter", ctx.attrs);
  const bool even =
      std::all_of(sizes.begin(), sizes.end(), [&](int64_t size) { return size == sizes[0]; });
  int64_t start = 0;
  for (int64_t q = 0; q < k; ++q) start += sizes[static_cast<size_t>(q)];
  if (!even) {
    // Backends reduce-scatter equal pieces only: reduce the whole, keep mine.
    Tensor whole = x.contiguous().clone();
    g.all_reduce(whole, reduce_op(ctx.attrs));
    ctx.outputs[0].copy_(whole.narrow(dim, start, sizes[static_cast<size_t>(k)]));
    return;
  }
  std::vector<Tensor> pieces;
  int64_t at = 0;
  for (int64_t size : sizes) {
    pieces.push_back(x.narrow(dim, at, size).contiguous());
    at += size;
  }
  ctx.outputs[0].copy_(g.reduce_scatter(pieces, reduce_op(ctx.attrs)));
}

const OpDef& reduce_scatter_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "reduce_scatter";
    d.kind = OpKind::collective;
    d.infer = [](const std::vector<TensorMeta>& in, const Attrs& attrs) {
      TensorMeta out = in.at(0);
      const auto dim = static_cast<size_t>(attrs.i("dim"));
      const std::vector<int64_t> sizes =
          piece_sizes("reduce_scatter", "sizes", optional_ints(attrs, "sizes"), out.shape[dim],
                      group_size(attrs));
      out.shape[dim] = sizes[static_cast<size_t>(position("reduce_scatter", attrs))];
      return std::vector<TensorMeta>{out};
    };
    d.saves_inputs = false;
    d.grad = [](const GradContext& c) {
      check_reduction_grad(c, "reduce_scatter");
      const int64_t dim = c.attrs().i("dim");
      const std::vector<int64_t> sizes =
          piece_sizes("reduce_scatter", "sizes", optional_ints(c.attrs(), "sizes"),
                      c.input_meta(0).shape[static_cast<size_t>(dim)], group_size(c.attrs()));
      Attrs attrs{{"ranks", c.attrs().ints("ranks")}, {"dim", dim}, {"sizes", sizes}};
      return std::vector<Tensor>{call1(all_gather_op(), {c.grad_output(0)}, attrs)};
    };
    d.torch_name = "torch.distributed.nn.functional.reduce_scatter";
    d.signature = "global::reduce_scatter(x, dim, op, ranks, sizes)";
    return d;
  }());
  return def;
}

// ---- all_to_all: inputs {x}; attrs ranks, split_dim, concat_dim,
// split_sizes and concat_sizes (optional).

void all_to_all_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const int64_t i = ctx.attrs.i("concat_dim"), j = ctx.attrs.i("split_dim");
  const int64_t n = group_size(ctx.attrs);
  const std::vector<int64_t> split =
      piece_sizes("all_to_all", "split_sizes", optional_ints(ctx.attrs, "split_sizes"),
                  x.shape()[static_cast<size_t>(j)], n);
  const std::vector<int64_t> concat =
      gathered_sizes("all_to_all", ctx.attrs, "concat_sizes", x.shape()[static_cast<size_t>(i)]);
  // Pieces travel flat with the concat dim first (all_to_all lets only
  // dim 0 differ) and are reshaped with the known sizes.
  const std::vector<int64_t> perm = front_perm(i, x.dim());
  std::vector<Tensor> pieces;
  int64_t at = 0;
  for (int64_t size : split) {
    pieces.push_back(x.narrow(j, at, size).permute(perm).contiguous().reshape({-1}));
    at += size;
  }
  std::vector<Tensor> received = group("all_to_all", ctx.attrs).all_to_all(pieces);
  const Shape& out_shape = ctx.outputs[0].shape();
  Shape permuted;
  for (int64_t p : perm) permuted.push_back(out_shape[static_cast<size_t>(p)]);
  for (int64_t q = 0; q < n; ++q) {
    permuted[0] = concat[static_cast<size_t>(q)];
    Tensor& piece = received[static_cast<size_t>(q)];
    TESSERA_CHECK(piece.numel() == numel(permuted), "[all_to_all] rank ", q,
                  " of the collective sent ", piece.numel(), " elements where ", numel(permuted),
                  " (", shape_str(permuted), ") were expected");
    piece = piece.reshape(permuted);
  }
  ctx.outputs[0].copy_(cat(received, 0).permute(inverse_of(perm)));
}

const OpDef& all_to_all_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "all_to_all";
    d.kind = OpKind::collective;
    d.infer = [](const std::vector<TensorMeta>& in, const Attrs& attrs) {
      TensorMeta out = in.at(0);
      const auto i = static_cast<size_t>(attrs.i("concat_dim"));
      const auto j = static_cast<size_t>(attrs.i("split_dim"));
      const std::vector<int64_t> split =
          piece_sizes("all_to_all", "split_sizes", optional_ints(attrs, "split_sizes"),
                      out.shape[j], group_size(attrs));
      out.shape[i] = sum_of(gathered_sizes("all_to_all", attrs, "concat_sizes", out.shape[i]));
      out.shape[j] = split[static_cast<size_t>(position("all_to_all", attrs))];
      return std::vector<TensorMeta>{out};
    };
    d.saves_inputs = false;
    d.grad = [](const GradContext& c) {
      const Attrs& a = c.attrs();
      const Shape& in = c.input_meta(0).shape;
      const int64_t i = a.i("concat_dim"), j = a.i("split_dim");
      const std::vector<int64_t> split =
          piece_sizes("all_to_all", "split_sizes", optional_ints(a, "split_sizes"),
                      in[static_cast<size_t>(j)], group_size(a));
      const std::vector<int64_t> concat =
          gathered_sizes("all_to_all", a, "concat_sizes", in[static_cast<size_t>(i)]);
      Attrs back{{"ranks", a.ints("ranks")},
                 {"split_dim", i},
                 {"concat_dim", j},
                 {"split_sizes", concat},
                 {"concat_sizes", split}};
      return std::vector<Tensor>{call1(all_to_all_op(), {c.grad_output(0)}, back)};
    };
    d.torch_name = "torch.distributed.nn.functional.all_to_all";
    d.signature = "global::all_to_all(x, split_dim, concat_dim, ranks, split_sizes, concat_sizes)";
    return d;
  }());
  return def;
}

// ---- all_to_all_single: inputs {x}; attrs ranks, input_split_sizes and
// output_split_sizes (rows of dim 0 to each rank and from each rank). The
// point-to-point transfers of boxing's slice-intersection path.

void all_to_all_single_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  Tensor& out = ctx.outputs[0];
  const std::vector<int64_t>& sent = ctx.attrs.ints("input_split_sizes");
  const std::vector<int64_t>& expected = ctx.attrs.ints("output_split_sizes");
  std::vector<Tensor> pieces;
  int64_t at = 0;
  for (int64_t size : sent) {
    pieces.push_back(x.narrow(0, at, size));
    at += size;
  }
  const std::vector<Tensor> received = group("all_to_all_single", ctx.attrs).all_to_all(pieces);
  at = 0;
  for (size_t q = 0; q < received.size(); ++q) {
    const int64_t size = expected[q];
    TESSERA_CHECK(received[q].dim() >= 1 && received[q].shape()[0] == size, "[all_to_all_single] ",
                  "rank ", q, " of the collective sent ", shape_str(received[q].shape()), " where ",
                  size, " rows were expected (output_split_sizes ", shape_str(expected), ")");
    if (size > 0) out.narrow(0, at, size).copy_(received[q]);
    at += size;
  }
}

const OpDef& all_to_all_single_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "all_to_all_single";
    d.kind = OpKind::collective;
    d.contiguous_inputs = true;
    d.infer = [](const std::vector<TensorMeta>& in, const Attrs& attrs) {
      TensorMeta out = in.at(0);
      TESSERA_CHECK(!out.shape.empty(), "[all_to_all_single] needs a tensor with at least one ",
                    "dim, got a 0-d one");
      const int64_t n = group_size(attrs);
      (void)piece_sizes("all_to_all_single", "input_split_sizes", attrs.ints("input_split_sizes"),
                        out.shape[0], n);
      const std::vector<int64_t>& output = attrs.ints("output_split_sizes");
      TESSERA_CHECK(static_cast<int64_t>(output.size()) == n, "[all_to_all_single] ",
                    "output_split_sizes has ", output.size(), " entries for ", n, " ranks");
      for (int64_t size : output) {
        TESSERA_CHECK(size >= 0, "[all_to_all_single] output_split_sizes ", shape_str(output),
                      " has a negative size");
      }
      out.shape[0] = sum_of(output);
      return std::vector<TensorMeta>{out};
    };
    d.saves_inputs = false;
    // The rows go back the way they came.
    d.grad = [](const GradContext& c) {
      const Attrs& a = c.attrs();
      Attrs back{{"ranks", a.ints("ranks")},
                 {"input_split_sizes", a.ints("output_split_sizes")},
                 {"output_split_sizes", a.ints("input_split_sizes")}};
      return std::vector<Tensor>{call1(all_to_all_single_op(), {c.grad_output(0)}, back)};
    };
    d.torch_name = "torch.distributed.nn.functional.all_to_all_single";
    d.signature = "global::all_to_all_single(x, output_split_sizes, input_split_sizes, ranks)";
    return d;
  }());
  return def;
}

// ---- broadcast: inputs {x}; attrs ranks, root.

void broadcast_kernel(KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  out.copy_(ctx.inputs[0]);
  group("broadcast", ctx.attrs).broadcast(out, static_cast<int>(ctx.attrs.i("root")));
}

const OpDef& broadcast_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "broadcast";
    d.kind = OpKind::collective;
    d.infer = [](const std::vector<TensorMeta>& in, const Attrs& attrs) {
      const int64_t root = attrs.i("root");
      TESSERA_CHECK(root >= 0 && root < group_size(attrs), "[broadcast] root ", root,
                    " is not an index into the ", group_size(attrs), " ranks ",
                    shape_str(attrs.ints("ranks")));
      return std::vector<TensorMeta>{in.at(0)};
    };
    d.saves_inputs = false;
    d.grad = [](const GradContext& c) {
      // Only the root's input reached the outputs: it gets every rank's gradient.
      Attrs sum{{"ranks", c.attrs().ints("ranks")}, {"reduce", std::string("sum")}};
      Tensor total = call1(all_reduce_op(), {c.grad_output(0)}, sum);
      const bool root = position("broadcast", c.attrs()) == c.attrs().i("root");
      return std::vector<Tensor>{root ? total : zeros_like(total)};
    };
    d.torch_name = "torch.distributed.nn.functional.broadcast";
    d.signature = "global::broadcast(x, root, ranks)";
    return d;
  }());
  return def;
}

const std::vector<DType> kCollectiveDTypes = {DType::f32, DType::f64, DType::i64, DType::i32,
                                              DType::u8};

// Registered at load time, for every device a Group can move data on.
const bool registered = [] {
  const std::pair<const OpDef*, KernelFn> kernels[] = {
      {&all_reduce_op(), all_reduce_kernel},
      {&all_reduce_in_place_op(), all_reduce_in_place_kernel},
      {&all_gather_op(), all_gather_kernel},
      {&reduce_scatter_op(), reduce_scatter_kernel},
      {&all_to_all_op(), all_to_all_kernel},
      {&all_to_all_single_op(), all_to_all_single_kernel},
      {&broadcast_op(), broadcast_kernel}};
  for (const auto& [op, kernel] : kernels) {
    register_kernel(op->name, DeviceType::cpu, kCollectiveDTypes, kernel);
    register_kernel(op->name, DeviceType::cuda, kCollectiveDTypes, kernel);
  }
  return true;
}();

int64_t checked_dim(const char* op, int64_t dim, const Tensor& x) {
  TESSERA_CHECK(x.defined(), "[", op, "] got an undefined tensor");
  TESSERA_CHECK(x.dim() >= 1, "[", op, "] needs a tensor with at least one dim, got a 0-d one");
  return normalize_dim(dim, x.dim(), op);
}

const char* reduce_name(ReduceOp op) {
  return distributed::reduce_op_name(op);
}

}  // namespace

Tensor all_reduce(const Tensor& x, ReduceOp op, const std::vector<int>& ranks) {
  return call1(all_reduce_op(), {x},
               {{"ranks", ranks_attr(ranks)}, {"reduce", std::string(reduce_name(op))}});
}

void all_reduce_(const Tensor& x, ReduceOp op, const std::vector<int>& ranks) {
  call(all_reduce_in_place_op(), {x},
       {{"ranks", ranks_attr(ranks)}, {"reduce", std::string(reduce_name(op))}});
}

Tensor all_gather(const Tensor& x, int64_t dim, const std::vector<int>& ranks,
                  const std::vector<int64_t>& sizes) {
  Attrs attrs{{"ranks", ranks_attr(ranks)}, {"dim", checked_dim("all_gather", dim, x)}};
  if (!sizes.empty()) attrs.set("sizes", sizes);
  return call1(all_gather_op(), {x}, attrs);
}

Tensor reduce_scatter(const Tensor& x, int64_t dim, ReduceOp op, const std::vector<int>& ranks,
                      const std::vector<int64_t>& sizes) {
  Attrs attrs{{"ranks", ranks_attr(ranks)},
              {"dim", checked_dim("reduce_scatter", dim, x)},
              {"reduce", std::string(reduce_name(op))}};
  if (!sizes.empty()) attrs.set("sizes", sizes);
  return call1(reduce_scatter_op(), {x}, attrs);
}

Tensor all_to_all(const Tensor& x, int64_t split_dim, int64_t concat_dim,
                  const std::vector<int>& ranks, const std::vector<int64_t>& split_sizes,
                  const std::vector<int64_t>& concat_sizes) {
  const int64_t j = checked_dim("all_to_all", split_dim, x);
  const int64_t i = checked_dim("all_to_all", concat_dim, x);
  TESSERA_CHECK(i != j, "[all_to_all] split_dim and concat_dim must differ, both are ", i);
  Attrs attrs{{"ranks", ranks_attr(ranks)}, {"split_dim", j}, {"concat_dim", i}};
  if (!split_sizes.empty()) attrs.set("split_sizes", split_sizes);
  if (!concat_sizes.empty()) attrs.set("concat_sizes", concat_sizes);
  return call1(all_to_all_op(), {x}, attrs);
}

Tensor all_to_all_single(const Tensor& x, const std::vector<int64_t>& output_split_sizes,
                         const std::vector<int64_t>& input_split_sizes,
                         const std::vector<int>& ranks) {
  TESSERA_CHECK(x.defined(), "[all_to_all_single] got an undefined tensor");
  return call1(all_to_all_single_op(), {x},
               {{"ranks", ranks_attr(ranks)},
                {"input_split_sizes", input_split_sizes},
                {"output_split_sizes", output_split_sizes}});
}

Tensor broadcast(const Tensor& x, int root, const std::vector<int>& ranks) {
  return call1(broadcast_op(), {x}, {{"ranks", ranks_attr(ranks)}, {"root", int64_t{root}}});
}

}  // namespace tessera::global
