// oneDNN path of the f32 conv kernels (see conv_internal.h). Like PyTorch, it
// lets oneDNN pick blocked layouts and reorders the NCHW buffers to and from
// them. Primitive descriptors and primitives are built once per problem and
// cached; temporary buffers come from the caching allocator.

#ifdef TESSERA_HAS_DNNL

#include <omp.h>

#include <array>
#include <dnnl.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "tessera/backend/cpu/conv_internal.h"
#include "tessera/core/tensor.h"
#include "tessera/core/thread_pool.h"

namespace tessera::cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

memory::dims src_dims(const ConvGeometry& g) { return {g.n, g.c, g.h, g.w}; }
memory::dims dst_dims(const ConvGeometry& g) { return {g.n, g.o, g.oh, g.ow}; }
memory::dims weight_dims(const ConvGeometry& g) {
  if (g.groups == 1) return {g.o, g.c, g.kh, g.kw};
  return {g.groups, g.group_outputs(), g.group_channels(), g.kh, g.kw};
}
Tag weight_tag(const ConvGeometry& g) { return g.groups == 1 ? Tag::oihw : Tag::goihw; }

memory::desc any_desc(const memory::dims& dims) {
  return memory::desc(dims, memory::data_type::f32, Tag::any);
}
memory::desc plain_desc(const memory::dims& dims, Tag tag) {
  return memory::desc(dims, memory::data_type::f32, tag);
}

// An operand in the user's plain layout and the layout a primitive wants,
// with the reorder between them when they differ.
struct Operand {
  memory::desc user, wanted;
  std::optional<dnnl::reorder> to_wanted, to_user;

  Operand(const memory::desc& user_desc, const memory::desc& wanted_desc, bool is_output)
      : user(user_desc), wanted(wanted_desc) {
    if (user == wanted) return;
    dnnl::engine& engine = cpu_engine();
    if (is_output) {
      to_user = dnnl::reorder(dnnl::reorder::primitive_desc(engine, wanted, engine, user));
    } else {
      to_wanted = dnnl::reorder(dnnl::reorder::primitive_desc(engine, user, engine, wanted));
    }
  }
};

// Primitives are built on first use (under `mutex`) and then only executed,
// which oneDNN allows from several threads at once. A failed build is
// remembered so it is not retried on every call.
struct Problem {
  std::mutex mutex;
  std::optional<dnnl::convolution_forward::primitive_desc> hint;
  bool forward_failed = false, data_failed = false, weights_failed = false;
  std::optional<dnnl::convolution_forward> forward;
  std::optional<dnnl::convolution_backward_data> backward_data;
  std::optional<dnnl::convolution_backward_weights> backward_weights;
  std::vector<Operand> forward_ops, data_ops, weights_ops;
  memory::desc forward_scratch, data_scratch, weights_scratch;
};

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::convolution_forward::desc forward_desc(const ConvGeometry& g, bool with_bias) {
  memory::desc bias = with_bias ? any_desc({g.o}) : memory::desc();
  return dnnl::convolution_forward::desc(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
      any_desc(src_dims(g)), any_desc(weight_dims(g)), bias, any_desc(dst_dims(g)),
      {g.sh, g.sw}, {g.dh - 1, g.dw - 1}, {g.ph, g.pw}, {g.ph, g.pw});
}

using Key = std::array<int64_t, 17>;

Key make_key(const ConvGeometry& g, bool with_bias) {
  return {g.n,  g.c,  g.h,  g.w,  g.o,  g.kh, g.kw,     g.oh,          g.ow,
          g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.groups, int64_t{with_bias}};
}

// The cached primitives for a problem; the bias variant only has a forward.
Problem& problem(const ConvGeometry& g, bool with_bias) {
  static std::mutex mutex;
  static std::map<Key, std::unique_ptr<Problem>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[make_key(g, with_bias)];
  if (!slot) slot = std::make_unique<Problem>();
  return *slot;
}

// The forward primitive descriptor that guides the backward ones' layouts.
const dnnl::convolution_forward::primitive_desc& hint(Problem& p, const ConvGeometry& g) {
  if (!p.hint) {
    p.hint = dnnl::convolution_forward::primitive_desc(forward_desc(g, false), cpu_engine());
  }
  return *p.hint;
}

// Buffers for one execution (kept alive until the stream finishes).
struct Workspace {
  std::vector<Tensor> buffers;
  dnnl::memory make(const memory::desc& desc, void* data = nullptr) {
    if (data == nullptr && desc.get_size() > 0) {
      buffers.push_back(Tensor::empty({static_cast<int64_t>(desc.get_size())}, DType::u8));
      data = buffers.back().raw_data();
    }
    return dnnl::memory(desc, cpu_engine(), data);
  }
};

// Runs primitive `op` with operand i bound to pointers[i] as argument
// args[i], reordering through temporary buffers where its layout differs.
void run(const dnnl::primitive& op, const std::vector<Operand>& operands,
         const std::vector<int>& args, const std::vector<void*>& pointers,
         const memory::desc& scratch) {
  dnnl::stream stream(cpu_engine());
  Workspace workspace;
  std::unordered_map<int, dnnl::memory> bound;
  std::vector<std::pair<const Operand*, std::pair<dnnl::memory, dnnl::memory>>> outputs;
  for (size_t i = 0; i < operands.size(); ++i) {
    const Operand& operand = operands[i];
    dnnl::memory user = workspace.make(operand.user, pointers[i]);
    if (operand.to_wanted) {
      dnnl::memory wanted = workspace.make(operand.wanted);
      operand.to_wanted->execute(stream, user, wanted);
      bound[args[i]] = wanted;
    } else if (operand.to_user) {
      dnnl::memory wanted = workspace.make(operand.wanted);
      outputs.push_back({&operand, {wanted, user}});
      bound[args[i]] = wanted;
    } else {
      bound[args[i]] = user;
    }
  }
  bound[DNNL_ARG_SCRATCHPAD] = workspace.make(scratch);
  op.execute(stream, bound);
  for (auto& [operand, memories] : outputs) {
    operand->to_user->execute(stream, memories.first, memories.second);
  }
  stream.wait();
}

// oneDNN's OpenMP threads follow Tessera's thread count; failures while
// running (not expected once a primitive was built) become Tessera errors.
void execute(const dnnl::primitive& op, const std::vector<Operand>& operands,
             const std::vector<int>& args, const std::vector<void*>& pointers,
             const memory::desc& scratch) {
  omp_set_num_threads(num_threads());
  try {
    run(op, operands, args, pointers, scratch);
  } catch (const dnnl::error& error) {
    TESSERA_FAIL("[conv2d] oneDNN failed to run a primitive: ", error.what());
  }
}

}  // namespace

bool dnnl_conv_forward(const ConvGeometry& g, const float* x, const float* weight,
                       const float* bias, float* y) {
  Problem& p = problem(g, bias != nullptr);
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    if (p.forward_failed) return false;
    if (!p.forward) try {
      auto pd = dnnl::convolution_forward::primitive_desc(forward_desc(g, bias != nullptr),
                                                          user_scratchpad(), cpu_engine());
      p.forward_ops = {Operand(plain_desc(src_dims(g), Tag::nchw), pd.src_desc(), false),
                       Operand(plain_desc(weight_dims(g), weight_tag(g)), pd.weights_desc(), false),
                       Operand(plain_desc(dst_dims(g), Tag::nchw), pd.dst_desc(), true)};
      if (bias) p.forward_ops.emplace_back(plain_desc({g.o}, Tag::x), pd.bias_desc(), false);
      p.forward_scratch = pd.scratchpad_desc();
      p.forward = dnnl::convolution_forward(pd);
    } catch (const dnnl::error&) {
      p.forward_failed = true;
      return false;
    }
  }
  std::vector<int> args = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
  std::vector<void*> pointers = {const_cast<float*>(x), const_cast<float*>(weight), y};
  if (bias) {
    args.push_back(DNNL_ARG_BIAS);
    pointers.push_back(const_cast<float*>(bias));
  }
  execute(*p.forward, p.forward_ops, args, pointers, p.forward_scratch);
  return true;
}

bool dnnl_conv_backward_data(const ConvGeometry& g, const float* grad_y, const float* weight,
                             float* grad_x) {
  Problem& p = problem(g, false);
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    if (p.data_failed) return false;
    if (!p.backward_data) try {
      dnnl::convolution_backward_data::desc desc(
          dnnl::algorithm::convolution_direct, any_desc(src_dims(g)), any_desc(weight_dims(g)),
          any_desc(dst_dims(g)), {g.sh, g.sw}, {g.dh - 1, g.dw - 1}, {g.ph, g.pw}, {g.ph, g.pw});
      dnnl::convolution_backward_data::primitive_desc pd(desc, user_scratchpad(), cpu_engine(),
                                                         hint(p, g));
      p.data_ops = {
          Operand(plain_desc(dst_dims(g), Tag::nchw), pd.diff_dst_desc(), false),
          Operand(plain_desc(weight_dims(g), weight_tag(g)), pd.weights_desc(), false),
          Operand(plain_desc(src_dims(g), Tag::nchw), pd.diff_src_desc(), true)};
      p.data_scratch = pd.scratchpad_desc();
      p.backward_data = dnnl::convolution_backward_data(pd);
    } catch (const dnnl::error&) {
      p.data_failed = true;
      return false;
    }
  }
  execute(*p.backward_data, p.data_ops, {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
          {const_cast<float*>(grad_y), const_cast<float*>(weight), grad_x}, p.data_scratch);
  return true;
}

bool dnnl_conv_backward_weights(const ConvGeometry& g, const float* x, const float* grad_y,
                                float* grad_weight) {
  Problem& p = problem(g, false);
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    if (p.weights_failed) return false;
    if (!p.backward_weights) try {
      dnnl::convolution_backward_weights::desc desc(
          dnnl::algorithm::convolution_direct, any_desc(src_dims(g)), any_desc(weight_dims(g)),
          any_desc(dst_dims(g)), {g.sh, g.sw}, {g.dh - 1, g.dw - 1}, {g.ph, g.pw}, {g.ph, g.pw});
      dnnl::convolution_backward_weights::primitive_desc pd(desc, user_scratchpad(),
                                                            cpu_engine(), hint(p, g));
      p.weights_ops = {
          Operand(plain_desc(src_dims(g), Tag::nchw), pd.src_desc(), false),
          Operand(plain_desc(dst_dims(g), Tag::nchw), pd.diff_dst_desc(), false),
          Operand(plain_desc(weight_dims(g), weight_tag(g)), pd.diff_weights_desc(), true)};
      p.weights_scratch = pd.scratchpad_desc();
      p.backward_weights = dnnl::convolution_backward_weights(pd);
    } catch (const dnnl::error&) {
      p.weights_failed = true;
      return false;
    }
  }
  execute(*p.backward_weights, p.weights_ops,
          {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS},
          {const_cast<float*>(x), const_cast<float*>(grad_y), grad_weight}, p.weights_scratch);
  return true;
}

}  // namespace tessera::cpu

#endif  // TESSERA_HAS_DNNL
