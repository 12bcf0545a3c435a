#include "tessera/global/collective_ops.h"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <vector>

#include "tessera/core/work.h"
#include "tessera/distributed/collective_checks.h"
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

ReduceOp reduce_op(const Attrs& attrs) {
  const std::string& name = attrs.get<std::string>("reduce");
  if (name == "max") return ReduceOp::max;
  if (name == "min") return ReduceOp::min;
  return ReduceOp::sum;
}

// A collective kernel's work, with its own handles on the tensors and
// attributes, so it can finish on the group's communication thread after
// the dispatcher's call has returned.
struct Job {
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  Attrs attrs;
  // Looked up on the caller's thread: making a sub-group is itself a
  // collective, which the communication thread must never start.
  std::shared_ptr<distributed::Group> group;
};
using JobFn = void (*)(Job&);

bool async_of(const Attrs& attrs) {
  return attrs.has("async") && attrs.b("async");
}

// The attributes a gradient's collective runs with: it blocks, so no
// pending gradient ever reaches a leaf.
Attrs blocking(const Attrs& attrs) {
  Attrs copy = attrs;
  copy.erase("async");
  return copy;
}

// The kernel of a collective: its checks run here, on the caller's thread;
// its data movement is launched on the group (asynchronously with the
// "async" attribute where the backend allows). While it is in flight, the
// outputs' storage holds its Work, so any kernel that touches them waits.
template <JobFn body>
void launched(KernelContext& ctx) {
  (void)position(ctx.op.name.c_str(), ctx.attrs);
  auto job =
      std::make_shared<Job>(Job{ctx.inputs, ctx.outputs, ctx.attrs, group_of(ranks_of(ctx.attrs))});
  distributed::Group& g = *job->group;
  std::vector<Storage*> written;
  for (Tensor& out : ctx.outputs) {
    if (Storage* storage = out.impl().storage.get()) written.push_back(storage);
  }
  std::shared_ptr<Work> work = g.launch([job] { body(*job); }, async_of(ctx.attrs),
                                        [&](const std::shared_ptr<Work>& queued) {
                                          for (Storage* storage : written) {
                                            storage->set_pending(queued);
                                          }
                                        });
  if (work->is_completed()) {
    for (Storage* storage : written) storage->set_pending(nullptr);
    work->wait();  // rethrows what the collective threw
  }
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

const OpDef& all_reduce_op();
const OpDef& all_gather_op();
const OpDef& reduce_scatter_op();
const OpDef& all_to_all_op();

// ---- all_reduce: inputs {x}; attrs ranks, reduce.

void all_reduce_job(Job& job) {
  Tensor& out = job.outputs[0];
  out.copy_(job.inputs[0]);
  job.group->all_reduce(out, reduce_op(job.attrs));
}

// ---- all_reduce_: in place, as torch.distributed.all_reduce; inputs {x}
// (written); attrs ranks, reduce. Not differentiable (the out-of-place op
// is): gradient buckets and other no-grad code reduce their own buffers.
void all_reduce_in_place_job(Job& job) {
  job.group->all_reduce(job.inputs[0], reduce_op(job.attrs));
}

const OpDef& all_reduce_in_place_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "all_reduce_";
    d.kind = OpKind::collective;
    d.writes = {0};
    d.contiguous_inputs = true;
    d.differentiable = false;
    d.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in.at(0)}; };
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
    d.infer = [](const MetaVector& in, const Attrs&) { return MetaVector{in.at(0)}; };
    d.saves_inputs = false;
    d.grad = [](const GradContext& c) {
      check_reduction_grad(c, "all_reduce");
      return std::vector<Tensor>{call1(all_reduce_op(), {c.grad_output(0)}, blocking(c.attrs()))};
    };
    d.torch_name = "torch.distributed.nn.functional.all_reduce";
    d.signature = "global::all_reduce(x, op, ranks)";
    return d;
  }());
  return def;
}

// ---- all_gather: inputs {x}; attrs ranks, dim, sizes (optional).

void all_gather_job(Job& job) {
  const Tensor& x = job.inputs[0];
  const int64_t dim = job.attrs.i("dim");
  const std::vector<int64_t> sizes =
      gathered_sizes("all_gather", job.attrs, "sizes", x.shape()[static_cast<size_t>(dim)]);
  job.group->all_gather_into(x, job.outputs[0], dim, sizes);
}

const OpDef& all_gather_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "all_gather";
    d.kind = OpKind::collective;
    d.infer = [](const MetaVector& in, const Attrs& attrs) {
      TensorMeta out = in.at(0);
      const auto dim = static_cast<size_t>(attrs.i("dim"));
      out.shape[dim] = sum_of(gathered_sizes("all_gather", attrs, "sizes", out.shape[dim]));
      return MetaVector{out};
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

void reduce_scatter_job(Job& job) {
  const Tensor& x = job.inputs[0];
  const int64_t dim = job.attrs.i("dim");
  const int64_t n = group_size(job.attrs), k = position("reduce_scatter", job.attrs);
  const std::vector<int64_t> sizes =
      piece_sizes("reduce_scatter", "sizes", optional_ints(job.attrs, "sizes"),
                  x.shape()[static_cast<size_t>(dim)], n);
  distributed::Group& g = *job.group;
  const bool even =
      std::all_of(sizes.begin(), sizes.end(), [&](int64_t size) { return size == sizes[0]; });
  int64_t start = 0;
  for (int64_t q = 0; q < k; ++q) start += sizes[static_cast<size_t>(q)];
  if (!even) {
    // Backends reduce-scatter equal pieces only: reduce the whole, keep mine.
    Tensor whole = x.contiguous().clone();
    g.all_reduce(whole, reduce_op(job.attrs));
    job.outputs[0].copy_(whole.narrow(dim, start, sizes[static_cast<size_t>(k)]));
    return;
  }
  std::vector<Tensor> pieces;
  int64_t at = 0;
  for (int64_t size : sizes) {
    pieces.push_back(x.narrow(dim, at, size).contiguous());
    at += size;
  }
  job.outputs[0].copy_(g.reduce_scatter(pieces, reduce_op(job.attrs)));
}

const OpDef& reduce_scatter_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "reduce_scatter";
    d.kind = OpKind::collective;
    d.infer = [](const MetaVector& in, const Attrs& attrs) {
      TensorMeta out = in.at(0);
      const auto dim = static_cast<size_t>(attrs.i("dim"));
      const std::vector<int64_t> sizes =
          piece_sizes("reduce_scatter", "sizes", optional_ints(attrs, "sizes"), out.shape[dim],
                      group_size(attrs));
      out.shape[dim] = sizes[static_cast<size_t>(position("reduce_scatter", attrs))];
      return MetaVector{out};
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

void all_to_all_job(Job& job) {
  const Tensor& x = job.inputs[0];
  const int64_t i = job.attrs.i("concat_dim"), j = job.attrs.i("split_dim");
  const int64_t n = group_size(job.attrs);
  const std::vector<int64_t> split =
      piece_sizes("all_to_all", "split_sizes", optional_ints(job.attrs, "split_sizes"),
                  x.shape()[static_cast<size_t>(j)], n);
  const std::vector<int64_t> concat =
      gathered_sizes("all_to_all", job.attrs, "concat_sizes", x.shape()[static_cast<size_t>(i)]);
  // Pieces travel flat (all_to_all lets only dim 0 differ) and are written
  // into their blocks along the concat dim.
  std::vector<Tensor> pieces;
  int64_t at = 0;
  for (int64_t size : split) {
    pieces.push_back(x.narrow(j, at, size).contiguous().reshape({-1}));
    at += size;
  }
  distributed::write_blocks("all_to_all", job.outputs[0], i, concat, job.group->all_to_all(pieces));
}

const OpDef& all_to_all_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "all_to_all";
    d.kind = OpKind::collective;
    d.infer = [](const MetaVector& in, const Attrs& attrs) {
      TensorMeta out = in.at(0);
      const auto i = static_cast<size_t>(attrs.i("concat_dim"));
      const auto j = static_cast<size_t>(attrs.i("split_dim"));
      const std::vector<int64_t> split =
          piece_sizes("all_to_all", "split_sizes", optional_ints(attrs, "split_sizes"),
                      out.shape[j], group_size(attrs));
      out.shape[i] = sum_of(gathered_sizes("all_to_all", attrs, "concat_sizes", out.shape[i]));
      out.shape[j] = split[static_cast<size_t>(position("all_to_all", attrs))];
      return MetaVector{out};
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

void all_to_all_single_job(Job& job) {
  const Tensor& x = job.inputs[0];
  Tensor& out = job.outputs[0];
  const std::vector<int64_t>& sent = job.attrs.ints("input_split_sizes");
  const std::vector<int64_t>& expected = job.attrs.ints("output_split_sizes");
  std::vector<Tensor> pieces;
  int64_t at = 0;
  for (int64_t size : sent) {
    pieces.push_back(x.narrow(0, at, size));
    at += size;
  }
  const std::vector<Tensor> received = job.group->all_to_all(pieces);
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
    d.infer = [](const MetaVector& in, const Attrs& attrs) {
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
      return MetaVector{out};
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

void broadcast_job(Job& job) {
  Tensor& out = job.outputs[0];
  out.copy_(job.inputs[0]);
  job.group->broadcast(out, static_cast<int>(job.attrs.i("root")));
}

const OpDef& broadcast_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "broadcast";
    d.kind = OpKind::collective;
    d.infer = [](const MetaVector& in, const Attrs& attrs) {
      const int64_t root = attrs.i("root");
      TESSERA_CHECK(root >= 0 && root < group_size(attrs), "[broadcast] root ", root,
                    " is not an index into the ", group_size(attrs), " ranks ",
                    shape_str(attrs.ints("ranks")));
      return MetaVector{in.at(0)};
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

// ---- send and recv: one rank's tensor to one peer (an index into ranks),
// matched by tag, as torch.distributed.send/recv. send: inputs {x}; attrs
// ranks, peer, tag; its output is a 0-d zero, a token whose backward
// receives x's gradient from the peer. recv: no inputs; attrs ranks, peer,
// tag, shape, dtype, device_type, device_index. A received tensor is a
// leaf: the receiving stage sends its gradient back with send.

const OpDef& recv_op();

void check_peer(const char* op, const Attrs& attrs) {
  const int64_t peer = attrs.i("peer"), n = group_size(attrs);
  TESSERA_CHECK(peer >= 0 && peer < n, "[", op, "] peer ", peer, " is not an index into the ", n,
                " ranks ", shape_str(attrs.ints("ranks")));
  TESSERA_CHECK(peer != position(op, attrs), "[", op, "] peer ", peer,
                " is this rank itself; a point-to-point transfer needs another rank");
  TESSERA_CHECK(attrs.i("tag") >= 0, "[", op, "] tag must be >= 0, got ", attrs.i("tag"));
}

void send_job(Job& job) {
  job.outputs[0].fill_(0.0);
  job.group->send(job.inputs[0], static_cast<int>(job.attrs.i("peer")),
                  static_cast<int>(job.attrs.i("tag")));
}

const OpDef& send_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "send";
    d.kind = OpKind::collective;
    d.contiguous_inputs = true;
    d.infer = [](const MetaVector& in, const Attrs& attrs) {
      check_peer("send", attrs);
      TensorMeta token = in.at(0);
      token.shape = {};
      token.dtype = DType::f32;
      return MetaVector{token};
    };
    d.saves_inputs = false;
    d.grad = [](const GradContext& c) {
      const TensorMeta& x = c.input_meta(0);
      Attrs from_peer{{"ranks", c.attrs().ints("ranks")},
                      {"peer", c.attrs().i("peer")},
                      {"tag", c.attrs().i("tag")},
                      {"shape", x.shape.vec()},
                      {"dtype", x.dtype},
                      {"device_type", static_cast<int64_t>(x.device.type)},
                      {"device_index", static_cast<int64_t>(x.device.index)}};
      return std::vector<Tensor>{call1(recv_op(), {}, from_peer)};
    };
    d.torch_name = "torch.distributed.send";
    d.signature = "global::send(x, peer, tag, ranks)";
    return d;
  }());
  return def;
}

void recv_job(Job& job) {
  job.group->recv(job.outputs[0], static_cast<int>(job.attrs.i("peer")),
                  static_cast<int>(job.attrs.i("tag")));
}

const OpDef& recv_op() {
  static const OpDef& def = register_op([] {
    OpDef d;
    d.name = "recv";
    d.kind = OpKind::collective;
    d.differentiable = false;
    d.infer = [](const MetaVector&, const Attrs& attrs) {
      check_peer("recv", attrs);
      TensorMeta out;
      out.shape = attrs.ints("shape");
      (void)checked_numel(out.shape, "recv");
      out.dtype = attrs.get<DType>("dtype");
      out.device = Device{static_cast<DeviceType>(attrs.i("device_type")),
                          static_cast<int>(attrs.i("device_index"))};
      return MetaVector{out};
    };
    d.torch_name = "torch.distributed.recv";
    d.signature = "global::recv(shape, dtype, peer, tag, ranks, device)";
    return d;
  }());
  return def;
}

// Reductions add, compare and multiply in these dtypes; the collectives
// that only move data move bytes, so they take every dtype (a boolean mask,
// bf16 activations).
const std::vector<DType> kReducingDTypes = {DType::f32, DType::f64, DType::i64, DType::i32,
                                            DType::u8};
const std::vector<DType>& kMovingDTypes = distributed::kMoveDTypes;

// Registered at load time, for every device a Group can move data on.
const bool registered = [] {
  const std::tuple<const OpDef*, KernelFn, const std::vector<DType>*> kernels[] = {
      {&all_reduce_op(), launched<all_reduce_job>, &kReducingDTypes},
      {&all_reduce_in_place_op(), launched<all_reduce_in_place_job>, &kReducingDTypes},
      {&all_gather_op(), launched<all_gather_job>, &kMovingDTypes},
      {&reduce_scatter_op(), launched<reduce_scatter_job>, &kReducingDTypes},
      {&all_to_all_op(), launched<all_to_all_job>, &kMovingDTypes},
      {&all_to_all_single_op(), launched<all_to_all_single_job>, &kMovingDTypes},
      {&broadcast_op(), launched<broadcast_job>, &kMovingDTypes},
      {&send_op(), launched<send_job>, &kMovingDTypes},
      {&recv_op(), launched<recv_job>, &kMovingDTypes}};
  for (const auto& [op, kernel, dtypes] : kernels) {
    register_kernel(op->name, DeviceType::cpu, *dtypes, kernel);
    register_kernel(op->name, DeviceType::cuda, *dtypes, kernel);
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

// Calls a collective op; with `async` the data may still be moving when
// this returns, and the handle's wait() finishes it.
PendingTensor issue(const OpDef& op, const Tensor& x, Attrs attrs, bool async) {
  if (async) attrs.set("async", true);
  std::vector<Tensor> inputs;
  if (x.defined()) inputs.push_back(x);
  return PendingTensor(call1(op, inputs, attrs));
}

Attrs reduction_attrs(ReduceOp op, const std::vector<int>& ranks) {
  return {{"ranks", ranks_attr(ranks)}, {"reduce", std::string(reduce_name(op))}};
}

Attrs all_gather_attrs(const Tensor& x, int64_t dim, const std::vector<int>& ranks,
                       const std::vector<int64_t>& sizes) {
  Attrs attrs{{"ranks", ranks_attr(ranks)}, {"dim", checked_dim("all_gather", dim, x)}};
  if (!sizes.empty()) attrs.set("sizes", sizes);
  return attrs;
}

Attrs reduce_scatter_attrs(const Tensor& x, int64_t dim, ReduceOp op, const std::vector<int>& ranks,
                           const std::vector<int64_t>& sizes) {
  Attrs attrs{{"ranks", ranks_attr(ranks)},
              {"dim", checked_dim("reduce_scatter", dim, x)},
              {"reduce", std::string(reduce_name(op))}};
  if (!sizes.empty()) attrs.set("sizes", sizes);
  return attrs;
}

Attrs all_to_all_single_attrs(const Tensor& x, const std::vector<int64_t>& output_split_sizes,
                              const std::vector<int64_t>& input_split_sizes,
                              const std::vector<int>& ranks) {
  TESSERA_CHECK(x.defined(), "[all_to_all_single] got an undefined tensor");
  return {{"ranks", ranks_attr(ranks)},
          {"input_split_sizes", input_split_sizes},
          {"output_split_sizes", output_split_sizes}};
}

Attrs broadcast_attrs(int root, const std::vector<int>& ranks) {
  return {{"ranks", ranks_attr(ranks)}, {"root", int64_t{root}}};
}

Attrs point_to_point_attrs(int peer, int tag, const std::vector<int>& ranks) {
  return {{"ranks", ranks_attr(ranks)}, {"peer", int64_t{peer}}, {"tag", int64_t{tag}}};
}

Attrs recv_attrs(const Shape& shape, DType dtype, int peer, int tag, const std::vector<int>& ranks,
                 Device device) {
  Attrs attrs = point_to_point_attrs(peer, tag, ranks);
  attrs.set("shape", shape.vec());
  attrs.set("dtype", dtype);
  attrs.set("device_type", static_cast<int64_t>(device.type));
  attrs.set("device_index", static_cast<int64_t>(device.index));
  return attrs;
}

}  // namespace

PendingTensor::PendingTensor(Tensor result) : result_(std::move(result)) {}

Tensor PendingTensor::wait() {
  if (result_.defined() && !result_.is_meta() && !result_.is_global()) {
    result_.impl().storage->wait_pending();
  }
  return result_;
}

bool PendingTensor::is_completed() const {
  if (!result_.defined() || result_.is_meta() || result_.is_global()) return true;
  const std::shared_ptr<Work> work = result_.impl().storage->pending();
  return work == nullptr || work->is_completed();
}

Tensor all_reduce(const Tensor& x, ReduceOp op, const std::vector<int>& ranks) {
  return all_reduce_async(x, op, ranks, false).wait();
}

PendingTensor all_reduce_async(const Tensor& x, ReduceOp op, const std::vector<int>& ranks,
                               bool async) {
  return issue(all_reduce_op(), x, reduction_attrs(op, ranks), async);
}

void all_reduce_(const Tensor& x, ReduceOp op, const std::vector<int>& ranks) {
  all_reduce_async_(x, op, ranks, false).wait();
}

PendingTensor all_reduce_async_(const Tensor& x, ReduceOp op, const std::vector<int>& ranks,
                                bool async) {
  Attrs attrs = reduction_attrs(op, ranks);
  if (async) attrs.set("async", true);
  call(all_reduce_in_place_op(), {x}, attrs);
  return PendingTensor(x);
}

Tensor all_gather(const Tensor& x, int64_t dim, const std::vector<int>& ranks,
                  const std::vector<int64_t>& sizes) {
  return all_gather_async(x, dim, ranks, sizes, false).wait();
}

PendingTensor all_gather_async(const Tensor& x, int64_t dim, const std::vector<int>& ranks,
                               const std::vector<int64_t>& sizes, bool async) {
  return issue(all_gather_op(), x, all_gather_attrs(x, dim, ranks, sizes), async);
}

Tensor reduce_scatter(const Tensor& x, int64_t dim, ReduceOp op, const std::vector<int>& ranks,
                      const std::vector<int64_t>& sizes) {
  return reduce_scatter_async(x, dim, op, ranks, sizes, false).wait();
}

PendingTensor reduce_scatter_async(const Tensor& x, int64_t dim, ReduceOp op,
                                   const std::vector<int>& ranks, const std::vector<int64_t>& sizes,
                                   bool async) {
  return issue(reduce_scatter_op(), x, reduce_scatter_attrs(x, dim, op, ranks, sizes), async);
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
  return issue(all_to_all_op(), x, attrs, false).wait();
}

Tensor all_to_all_single(const Tensor& x, const std::vector<int64_t>& output_split_sizes,
                         const std::vector<int64_t>& input_split_sizes,
                         const std::vector<int>& ranks) {
  return all_to_all_single_async(x, output_split_sizes, input_split_sizes, ranks, false).wait();
}

PendingTensor all_to_all_single_async(const Tensor& x,
                                      const std::vector<int64_t>& output_split_sizes,
                                      const std::vector<int64_t>& input_split_sizes,
                                      const std::vector<int>& ranks, bool async) {
  return issue(all_to_all_single_op(), x,
               all_to_all_single_attrs(x, output_split_sizes, input_split_sizes, ranks), async);
}

Tensor broadcast(const Tensor& x, int root, const std::vector<int>& ranks) {
  return broadcast_async(x, root, ranks, false).wait();
}

PendingTensor broadcast_async(const Tensor& x, int root, const std::vector<int>& ranks,
                              bool async) {
  return issue(broadcast_op(), x, broadcast_attrs(root, ranks), async);
}

Tensor send(const Tensor& x, int peer, int tag, const std::vector<int>& ranks) {
  return send_async(x, peer, tag, ranks, false).wait();
}

PendingTensor send_async(const Tensor& x, int peer, int tag, const std::vector<int>& ranks,
                         bool async) {
  TESSERA_CHECK(x.defined(), "[send] got an undefined tensor");
  return issue(send_op(), x, point_to_point_attrs(peer, tag, ranks), async);
}

Tensor recv(const Shape& shape, DType dtype, int peer, int tag, const std::vector<int>& ranks,
            Device device) {
  return recv_async(shape, dtype, peer, tag, ranks, device, false).wait();
}

PendingTensor recv_async(const Shape& shape, DType dtype, int peer, int tag,
                         const std::vector<int>& ranks, Device device, bool async) {
  return issue(recv_op(), Tensor(), recv_attrs(shape, dtype, peer, tag, ranks, device), async);
}

}  // namespace tessera::global
