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
#include "tessera/ops/op.h"

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

// One primitive with the layouts of its operands; built on first use.
struct Built {
  std::optional<dnnl::primitive> primitive;
  std::vector<Operand> operands;
  memory::desc scratch;
  bool failed = false;  // oneDNN has no implementation: not retried on every call
};

// Everything cached for one problem. Building happens under `mutex`; built
// primitives are only executed, which oneDNN allows from several threads.
struct Problem {
  std::mutex mutex;
  std::optional<dnnl::convolution_forward::primitive_desc> hint;
  Built forward, backward_data, backward_weights;
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
  return {g.n,  g.c,  g.h,  g.w,  g.o,  g.kh, g.kw, g.oh, g.ow,
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

// oneDNN memory over `data`, or over a buffer from the kernel's workspace
// (which outlives the execution).
struct Buffers {
  Workspace& workspace;
  dnnl::memory make(const memory::desc& desc, void* data = nullptr) {
    if (data == nullptr && desc.get_size() > 0) data = workspace.allocate(desc.get_size());
    return dnnl::memory(desc, cpu_engine(), data);
  }
};

// Runs primitive `op` with operand i bound to pointers[i] as argument
// args[i], reordering through temporary buffers where its layout differs.
void run(const dnnl::primitive& op, const std::vector<Operand>& operands,
         const std::vector<int>& args, const std::vector<void*>& pointers,
         const memory::desc& scratch, Workspace& kernel_workspace) {
  dnnl::stream stream(cpu_engine());
  Buffers workspace{kernel_workspace};
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
             const memory::desc& scratch, Workspace& workspace) {
  omp_set_num_threads(num_threads());
  try {
    run(op, operands, args, pointers, scratch, workspace);
  } catch (const dnnl::error& error) {
    TESSERA_FAIL("[conv2d] oneDNN failed to run a primitive: ", error.what());
  }
}

// Builds `built` with build(built) unless done before; false when oneDNN
// cannot run the problem.
template <typename Build>
bool ensure_built(Problem& p, Built& built, Build&& build) {
  std::lock_guard<std::mutex> lock(p.mutex);
  if (built.failed) return false;
  if (built.primitive) return true;
  // Building may run OpenMP regions too; a team bigger than Tessera's thread
  // count left over from it was measured to slow every later call 2x.
  omp_set_num_threads(num_threads());
  try {
    build(built);
  } catch (const dnnl::error&) {
    built.failed = true;
    return false;
  }
  return true;
}

void execute(const Built& built, const std::vector<int>& args, const std::vector<void*>& pointers,
             Workspace& workspace) {
  execute(*built.primitive, built.operands, args, pointers, built.scratch, workspace);
}

}  // namespace

bool dnnl_conv_forward(const ConvGeometry& g, const float* x, const float* weight,
                       const float* bias, float* y, Workspace& workspace) {
  Problem& p = problem(g, bias != nullptr);
  bool ok = ensure_built(p, p.forward, [&](Built& built) {
    dnnl::convolution_forward::primitive_desc pd(forward_desc(g, bias != nullptr),
                                                 user_scratchpad(), cpu_engine());
    built.operands = {Operand(plain_desc(src_dims(g), Tag::nchw), pd.src_desc(), false),
                      Operand(plain_desc(weight_dims(g), weight_tag(g)), pd.weights_desc(), false),
                      Operand(plain_desc(dst_dims(g), Tag::nchw), pd.dst_desc(), true)};
    if (bias) built.operands.emplace_back(plain_desc({g.o}, Tag::x), pd.bias_desc(), false);
    built.scratch = pd.scratchpad_desc();
    built.primitive = dnnl::convolution_forward(pd);
  });
  if (!ok) return false;
  std::vector<int> args = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
  std::vector<void*> pointers = {const_cast<float*>(x), const_cast<float*>(weight), y};
  if (bias) {
    args.push_back(DNNL_ARG_BIAS);
    pointers.push_back(const_cast<float*>(bias));
  }
  execute(p.forward, args, pointers, workspace);
  return true;
}

bool dnnl_conv_backward_data(const ConvGeometry& g, const float* grad_y, const float* weight,
                             float* grad_x, Workspace& workspace) {
  Problem& p = problem(g, false);
  bool ok = ensure_built(p, p.backward_data, [&](Built& built) {
    dnnl::convolution_backward_data::desc desc(
        dnnl::algorithm::convolution_direct, any_desc(src_dims(g)), any_desc(weight_dims(g)),
        any_desc(dst_dims(g)), {g.sh, g.sw}, {g.dh - 1, g.dw - 1}, {g.ph, g.pw}, {g.ph, g.pw});
    dnnl::convolution_backward_data::primitive_desc pd(desc, user_scratchpad(), cpu_engine(),
                                                       hint(p, g));
    built.operands = {Operand(plain_desc(dst_dims(g), Tag::nchw), pd.diff_dst_desc(), false),
                      Operand(plain_desc(weight_dims(g), weight_tag(g)), pd.weights_desc(), false),
                      Operand(plain_desc(src_dims(g), Tag::nchw), pd.diff_src_desc(), true)};
    built.scratch = pd.scratchpad_desc();
    built.primitive = dnnl::convolution_backward_data(pd);
  });
  if (!ok) return false;
  execute(p.backward_data, {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
          {const_cast<float*>(grad_y), const_cast<float*>(weight), grad_x}, workspace);
  return true;
}

bool dnnl_conv_backward_weights(const ConvGeometry& g, const float* x, const float* grad_y,
                                float* grad_weight, Workspace& workspace) {
  Problem& p = problem(g, false);
  bool ok = ensure_built(p, p.backward_weights, [&](Built& built) {
    dnnl::convolution_backward_weights::desc desc(
        dnnl::algorithm::convolution_direct, any_desc(src_dims(g)), any_desc(weight_dims(g)),
        any_desc(dst_dims(g)), {g.sh, g.sw}, {g.dh - 1, g.dw - 1}, {g.ph, g.pw}, {g.ph, g.pw});
    dnnl::convolution_backward_weights::primitive_desc pd(desc, user_scratchpad(), cpu_engine(),
                                                          hint(p, g));
    built.operands = {
        Operand(plain_desc(src_dims(g), Tag::nchw), pd.src_desc(), false),
        Operand(plain_desc(dst_dims(g), Tag::nchw), pd.diff_dst_desc(), false),
        Operand(plain_desc(weight_dims(g), weight_tag(g)), pd.diff_weights_desc(), true)};
    built.scratch = pd.scratchpad_desc();
    built.primitive = dnnl::convolution_backward_weights(pd);
  });
  if (!ok) return false;
  execute(p.backward_weights, {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS},
          {const_cast<float*>(x), const_cast<float*>(grad_y), grad_weight}, workspace);
  return true;
}

}  // namespace tessera::cpu

#endif  // TESSERA_HAS_DNNL
