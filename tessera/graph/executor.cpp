#include "tessera/graph/executor.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "tessera/core/allocator.h"
#include "tessera/core/grad_mode.h"
#include "tessera/core/rng.h"
#include "tessera/graph/fused.h"
#include "tessera/graph/trace.h"
#include "tessera/ops/workspace_region.h"

namespace tessera::graph {

namespace {

bool direct_dtype(DType dtype) {
  return dtype != DType::bf16 && dtype != DType::f16;
}

// Whether the node's values are all local CPU tensors of dtypes its kernel
// computes in directly.
bool local_cpu(const Graph& graph, const Node& node) {
  auto ok = [&](int id) {
    const TensorMeta& meta = graph.value(id).meta;
    const bool number = meta.shape.empty();  // a 0-d CPU number joins any device
    return !meta.is_global() && (meta.device == Device{} || number) && direct_dtype(meta.dtype);
  };
  for (int id : node.inputs) {
    if (!ok(id)) return false;
  }
  for (int id : node.outputs) {
    if (!ok(id) || graph.value(id).meta.device != Device{}) return false;
  }
  return true;
}

// A tensor over `arena`'s bytes from `offset`, with `meta`'s shape and dtype.
Tensor arena_view(const Tensor& arena, int64_t offset, const TensorMeta& meta) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = arena.impl().storage;
  impl->offset = offset / static_cast<int64_t>(dtype_size(meta.dtype));
  impl->shape = meta.shape;
  impl->strides = contiguous_strides(meta.shape);
  impl->dtype = meta.dtype;
  impl->device = Device{};
  return Tensor(std::move(impl));
}

// Waits for a collective still writing (or reading) the tensors' memory.
void wait_for_collectives(const TensorVector& tensors) {
  for (const Tensor& tensor : tensors) {
    Storage* storage = tensor.defined() ? tensor.impl().storage.get() : nullptr;
    if (storage != nullptr && storage->has_pending()) storage->wait_pending();
  }
}

bool overlap_collectives() {
  const char* value = std::getenv("TESSERA_GRAPH_OVERLAP");
  return value == nullptr || std::string_view(value) != "0";
}

}  // namespace

Executor::Executor(Graph graph, int memory_variant)
    : graph_(std::move(graph)),
      memory_variant_(memory_variant),
      workspace_bytes_(graph_.nodes().size(), 0),
      env_(graph_.values().size()),
      draws_(static_cast<size_t>(graph_.num_draws())) {
  for (const Constant& constant : graph_.constants()) {
    env_[static_cast<size_t>(constant.value)] = constant.tensor;
  }
  const bool overlap = overlap_collectives();
  for (const Node& node : graph_.nodes()) {
    Step step;
    step.dynamic_attrs = has_run_attrs(node);
    step.async_collective = overlap && may_run_async(node);
    const bool direct =
        local_cpu(graph_, node) && node.op->kind != OpKind::collective && !node.op->global_only;
    if (node.fused) {
      step.kind = StepKind::fused;
    } else if (direct && node.op->view) {
      step.kind = StepKind::view;
    } else if (direct) {
      const DType kernel_dtype =
          node.op->kernel_dtype_input >= 0 && !node.inputs.empty()
              ? graph_.value(node.inputs[static_cast<size_t>(node.op->kernel_dtype_input)])
                    .meta.dtype
              : graph_.value(node.outputs.at(0)).meta.dtype;
      if (has_kernel(*node.op, DeviceType::cpu, kernel_dtype)) {
        step.kind = StepKind::kernel;
        step.kernel = find_kernel(*node.op, DeviceType::cpu, kernel_dtype);
      }
    }
    steps_.push_back(std::move(step));
  }
  place(plan_memory(graph_, memory_variant_));
}

void Executor::release_arena() {
  const tessera::Storage* old = arena_.defined() ? arena_.impl().storage.get() : nullptr;
  if (old == nullptr) return;
  // The gradients the last run left in it (this run writes them anyway).
  for (const GradWrite& write : graph_.grad_writes()) {
    std::shared_ptr<TensorImpl>& grad = write.leaf.impl().grad;
    if (grad == nullptr) continue;
    const TensorImpl& local = grad->global && grad->global->local ? *grad->global->local : *grad;
    if (local.storage.get() == old) grad.reset();
  }
  // Every tensor over it the executor holds; constants stay.
  for (size_t v = 0; v < env_.size(); ++v) {
    if (graph_.values()[v].kind != ValueKind::constant) env_[v] = Tensor();
  }
  for (Step& step : steps_) step.view_inputs.clear();
  arena_ = Tensor();
}

void Executor::place(MemoryPlan memory) {
  memory_ = std::move(memory);
  storage_.assign(graph_.values().size(), Storage::none);
  // The outputs are the caller's: new tensors every run. Gradients live in
  // the arena (passes/memory_planning.cpp), or, when the graph adds to the
  // last run's, are new each run like any value the plan did not place.
  for (int id : graph_.outputs()) {
    storage_[static_cast<size_t>(memory_.roots[static_cast<size_t>(id)])] = Storage::fresh;
  }
  arena_ = memory_.arena_bytes > 0 ? Tensor::empty({memory_.arena_bytes}, DType::u8) : Tensor();
  for (size_t v = 0; v < graph_.values().size(); ++v) {
    if (memory_.offsets[v] < 0) continue;
    storage_[v] = Storage::arena;
    env_[v] = arena_view(arena_, memory_.offsets[v], graph_.values()[v].meta);
  }
  // Outputs the plan did not place are new each run, except a view's and
  // an in-place write's, which are their input's memory.
  for (size_t n = 0; n < graph_.nodes().size(); ++n) {
    const Node& node = graph_.nodes()[n];
    const bool aliases = (node.op->view || !node.op->writes.empty()) && !node.fused;
    for (int output : node.outputs) {
      Storage& storage = storage_[static_cast<size_t>(output)];
      if (storage == Storage::none && !aliases) storage = Storage::fresh;
    }
    steps_[n].awaits.clear();
    steps_[n].releases.clear();
  }
  // A value made new each run (a collective's result, a value the plan did
  // not place) goes after the last node that needs its memory, the
  // caller's outputs and the gradients excepted (their last use is the
  // end). A view is cached across runs only over memory that outlives a run.
  const int end = static_cast<int>(graph_.nodes().size());
  std::vector<bool> inputs(graph_.values().size(), false);
  for (int id : graph_.inputs()) inputs[static_cast<size_t>(id)] = true;
  for (int n = 0; n < end; ++n) {
    const Node& node = graph_.nodes()[static_cast<size_t>(n)];
    Step& step = steps_[static_cast<size_t>(n)];
    step.cache_view = std::none_of(node.inputs.begin(), node.inputs.end(), [&](int input) {
      const auto r = static_cast<size_t>(memory_.roots[static_cast<size_t>(input)]);
      return storage_[r] == Storage::fresh || inputs[r];
    });
    for (int output : node.outputs) {
      const auto r = static_cast<size_t>(memory_.roots[static_cast<size_t>(output)]);
      if (storage_[r] != Storage::fresh) continue;
      const int last = std::max(memory_.last_use[r], n);
      if (last < end) steps_[static_cast<size_t>(last)].releases.push_back(output);
    }
  }
  // The run's fullest point by this plan: the arena, and the new values
  // alive after each node (they go after the node in their releases).
  // Gradients made new each run (a collective's result) are held by their
  // parameters from the last run until this one writes its own.
  auto allocated = [](const TensorMeta& meta) {
    return static_cast<int64_t>(
        CpuAllocator::round_size(static_cast<size_t>(numel(meta.shape)) * dtype_size(meta.dtype)));
  };
  int64_t fresh = 0;
  for (const GradWrite& write : graph_.grad_writes()) {
    if (write.value < 0) continue;
    const auto r = static_cast<size_t>(memory_.roots[static_cast<size_t>(write.value)]);
    if (storage_[r] == Storage::fresh && !graph_.values()[r].meta.is_global()) {
      fresh += allocated(graph_.values()[r].meta);
    }
  }
  int64_t fullest = fresh;
  std::vector<int64_t> held(graph_.values().size(), 0);
  for (int n = 0; n < end; ++n) {
    for (int output : graph_.nodes()[static_cast<size_t>(n)].outputs) {
      const auto v = static_cast<size_t>(output);
      const TensorMeta& meta = graph_.values()[v].meta;
      if (storage_[v] != Storage::fresh || memory_.roots[v] != output || meta.is_global()) continue;
      held[v] = allocated(meta);
      fresh += held[v];
    }
    fullest = std::max(fullest, fresh);
    for (int output : steps_[static_cast<size_t>(n)].releases) {
      const auto r = static_cast<size_t>(memory_.roots[static_cast<size_t>(output)]);
      fresh -= std::exchange(held[r], 0);
    }
  }
  planned_peak_bytes_ = (memory_.arena_bytes > 0 ? static_cast<int64_t>(CpuAllocator::round_size(
                                                       static_cast<size_t>(memory_.arena_bytes)))
                                                 : 0) +
                        fullest;
  // Where each asynchronous out-of-place collective must be complete.
  for (size_t n = 0; n < graph_.nodes().size(); ++n) {
    const int ready = memory_.collective_ready[n];
    Step& step = steps_[n];
    if (!step.async_collective || ready < 0) continue;
    // It runs blocking where no later node uses its outputs (nothing would
    // wait for it), or where a node before `ready` writes one of its inputs
    // (launched, it would read the written values).
    auto root = [&](int value) { return memory_.roots[static_cast<size_t>(value)]; };
    bool inputs_written = ready == static_cast<int>(n);
    for (int m = static_cast<int>(n) + 1; m <= ready && !inputs_written; ++m) {
      const Node& writer = graph_.nodes()[static_cast<size_t>(m)];
      if (writer.fused) continue;
      for (int w : writer.op->writes) {
        for (int input : graph_.nodes()[n].inputs) {
          inputs_written =
              inputs_written || root(writer.inputs.at(static_cast<size_t>(w))) == root(input);
        }
      }
    }
    if (inputs_written) {
      step.async_collective = false;
    } else {
      steps_[static_cast<size_t>(ready)].awaits.push_back(static_cast<int>(n));
    }
  }
}

Tensor Executor::output_tensor(int value) {
  const auto v = static_cast<size_t>(value);
  const TensorMeta& meta = graph_.values()[v].meta;
  switch (storage_[v]) {
    case Storage::arena:
      return env_[v];
    default:
      return Tensor::empty(meta.shape, meta.dtype, meta.device);
  }
}

TensorVector Executor::run(const TensorVector& inputs) {
  NoGradGuard no_grad;  // the graph holds its backward already
  if (workspace_grew_) {  // the last run's kernels took scratch memory the plan lacked
    workspace_grew_ = false;
    release_arena();
    place(plan_memory(graph_, memory_variant_, workspace_bytes_));
  }
  bind_inputs(graph_, inputs, env_);

  const auto& nodes = graph_.nodes();
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    Step& step = steps_[n];
    TensorVector args;
    for (int id : node.inputs) args.push_back(env_[static_cast<size_t>(id)]);
    Attrs dynamic;
    if (step.dynamic_attrs) dynamic = run_attrs(node, draws_);
    const Attrs& attrs = step.dynamic_attrs ? dynamic : node.attrs;
    for (int launched : step.awaits) {
      TensorVector results;
      for (int output : nodes[static_cast<size_t>(launched)].outputs)
        results.push_back(env_[static_cast<size_t>(output)]);
      wait_for_collectives(results);
    }

    switch (step.kind) {
      case StepKind::view: {
        bool cached = step.view_inputs.size() == args.size() &&
                      env_[static_cast<size_t>(node.outputs[0])].defined();
        for (size_t i = 0; cached && i < args.size(); ++i) {
          cached = step.view_inputs[i].impl_ptr() == args[i].impl_ptr();
        }
        if (!cached) {
          Tensor view = node.op->view(args, attrs);
          // A view op may copy (reshape of a strided tensor): only a true
          // alias stays valid for the next run.
          const bool alias = view.impl().storage == args[0].impl().storage;
          env_[static_cast<size_t>(node.outputs[0])] = std::move(view);
          step.view_inputs = alias && step.cache_view ? args : TensorVector();
        }
        break;
      }
      case StepKind::fused: {
        TensorVector outputs;
        for (int output : node.outputs) outputs.push_back(output_tensor(output));
        wait_for_collectives(args);
        wait_for_collectives(outputs);
        run_fused_into(*node.fused, args, outputs);
        for (size_t o = 0; o < outputs.size(); ++o)
          env_[static_cast<size_t>(node.outputs[o])] = outputs[o];
        break;
      }
      case StepKind::kernel: {
        TensorVector outputs;
        if (!node.op->writes.empty()) {
          for (int w : node.op->writes) outputs.push_back(args[static_cast<size_t>(w)]);
        } else {
          for (int output : node.outputs) outputs.push_back(output_tensor(output));
        }
        wait_for_collectives(args);
        wait_for_collectives(outputs);
        if (node.op->contiguous_inputs) {
          for (Tensor& arg : args) {
            if (!arg.is_contiguous()) arg = arg.contiguous();
          }
        }
        // Scratch memory from the arena where the plan has a place for it;
        // a kernel that takes more makes the next run plan for it.
        const int64_t region = memory_.workspace_offsets[n];
        LentWorkspace lent(region >= 0 ? static_cast<char*>(arena_.raw_data()) + region : nullptr,
                           region >= 0 ? static_cast<size_t>(workspace_bytes_[n]) : 0);
        Workspace workspace(Device{});
        KernelContext context{*node.op, args, outputs, attrs, workspace, Stream{Device{}}};
        step.kernel(context);
        if (static_cast<int64_t>(lent.used()) > workspace_bytes_[n]) {
          workspace_bytes_[n] = static_cast<int64_t>(lent.used());
          workspace_grew_ = true;
        }
        if (!node.op->writes.empty()) {
          for (const Tensor& written : outputs) written.bump_version();
        }
        for (size_t o = 0; o < outputs.size(); ++o)
          env_[static_cast<size_t>(node.outputs[o])] = outputs[o];
        break;
      }
      case StepKind::dispatch: {
        TensorVector results;
        if (step.async_collective) {
          Attrs launched = attrs;
          launched.set("async", true);
          results = call(*node.op, args, launched);
        } else {
          results = call(*node.op, args, attrs);
        }
        for (size_t o = 0; o < node.outputs.size(); ++o) {
          const auto v = static_cast<size_t>(node.outputs[o]);
          if (storage_[v] == Storage::arena) {
            env_[v].copy_(results[o]);  // the arena tensor stays the value's
          } else {
            env_[v] = results[o];
          }
        }
        break;
      }
    }
    for (int value : step.releases) env_[static_cast<size_t>(value)] = Tensor();
  }

  finish_run(graph_, env_);
  TensorVector outputs;
  for (size_t o = 0; o < graph_.outputs().size(); ++o) {
    outputs.push_back(
        wrap_shard(env_[static_cast<size_t>(graph_.outputs()[o])], graph_.output_globals()[o]));
  }
  // Inputs and new tensors are the caller's: the executor keeps none.
  for (int id : graph_.inputs()) env_[static_cast<size_t>(id)] = Tensor();
  for (size_t v = 0; v < storage_.size(); ++v) {
    if (storage_[v] == Storage::fresh) env_[v] = Tensor();
  }
  return outputs;
}

}  // namespace tessera::graph
