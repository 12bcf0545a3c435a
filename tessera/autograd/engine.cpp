#include "tessera/autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "tessera/core/grad_mode.h"
#include "tessera/autograd/node.h"
#include "tessera/ops/op.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

GlobalGradHooks global_hooks;

void finish_global_backward(bool failed) {
  if (global_hooks.finish) global_hooks.finish(failed);
}

// Adds b into a slot, treating an undefined slot as zero.
void accumulate(Tensor& slot, const Tensor& value) {
  slot = slot.defined() ? add(slot, value) : value;
}

// Brings a gradient to the shape and dtype its target expects (gradients of
// broadcast inputs are already reduced by the op's gradient function; this
// catches dtype differences such as f64 roots on f32 graphs).
Tensor conform(const Tensor& gradient, const TensorMeta& meta, const std::string& op_name) {
  TESSERA_CHECK(gradient.shape() == meta.shape, "[backward] gradient of '", op_name,
                "' has shape ", shape_str(gradient.shape()), " but its input has shape ",
                shape_str(meta.shape));
  return gradient.dtype() == meta.dtype ? gradient : gradient.to(meta.dtype);
}

struct Capture {
  // For autograd::grad: gradients intercepted for requested inputs.
  std::unordered_map<const TensorImpl*, size_t> leaf_slots;
  std::unordered_map<const Node*, std::vector<std::pair<int, size_t>>> node_slots;
  std::vector<Tensor> results;
};

void execute(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads,
             bool retain_graph, bool create_graph, Capture* capture) {
  TESSERA_CHECK(roots.size() == root_grads.size() || root_grads.empty(),
                "[backward] got ", roots.size(), " outputs but ", root_grads.size(),
                " gradients");
  GradModeGuard mode(create_graph);

  // Seed gradients.
  std::vector<Tensor> seeds;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    TESSERA_CHECK(root.requires_grad(), "[backward] output ", i,
                  " does not require grad and has no grad_fn; did you forget "
                  "set_requires_grad() on an input, or run under NoGradGuard?");
    Tensor seed = root_grads.empty() ? Tensor() : root_grads[i];
    if (!seed.defined()) {
      TESSERA_CHECK(root.numel() == 1, "[backward] output ", i, " has shape ",
                    shape_str(root.shape()),
                    "; an implicit gradient exists only for one-element outputs, pass a "
                    "gradient of the same shape");
      // d(root)/d(root) = 1 is the same on every rank, so a global root's seed
      // is broadcast, whatever the root's SBP (a partial loss included).
      seed = root.is_global() ? ones(root.shape(), root.placement(),
                                     NdSbp::broadcast(root.placement().ndim()), root.dtype())
                              : ones_like(root);
    }
    TESSERA_CHECK(seed.shape() == root.shape(), "[backward] gradient has shape ",
                  shape_str(seed.shape()), " but output ", i, " has shape ",
                  shape_str(root.shape()));
    seeds.push_back(seed);
  }

  // Count, for every node reachable from the roots, how many edges feed it.
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack;
  for (const Tensor& root : roots) {
    if (Node* node = root.grad_fn().get()) {
      if (dependencies.emplace(node, 0).second) stack.push_back(node);
    }
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& edge : node->next_edges) {
      if (!edge.node) continue;
      auto [it, inserted] = dependencies.emplace(edge.node.get(), 0);
      it->second += 1;
      if (inserted) stack.push_back(edge.node.get());
    }
  }

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto deliver_leaf = [&](const std::shared_ptr<TensorImpl>& leaf, const Tensor& gradient) {
    if (capture) {
      auto it = capture->leaf_slots.find(leaf.get());
      if (it != capture->leaf_slots.end()) accumulate(capture->results[it->second], gradient);
      return;
    }
    // Without create_graph the gradient carries no tape already (grad mode
    // is off); only a seed the caller passed may still require grad.
    Tensor value = create_graph || !gradient.requires_grad() ? gradient : gradient.detach();
    if (leaf->global && !create_graph && global_hooks.accumulate &&
        global_hooks.accumulate(leaf, value))
      return;
    if (leaf->global) {
      // A global leaf keeps its own layout: a broadcast parameter that met
      // split data gets a partial gradient here, and this is its all-reduce.
      value = value.to_global(leaf->global->placement, leaf->global->sbp);
    }
    if (leaf->grad) {
      leaf->grad = add(Tensor(leaf->grad), value).impl_ptr();
    } else {
      leaf->grad = value.impl_ptr();
    }
  };
  auto compare = [](Node* a, Node* b) { return a->sequence < b->sequence; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(compare)> ready(compare);

  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    if (Node* node = root.grad_fn().get()) {
      auto& buffer = buffers[node];
      buffer.resize(node->saved.output_metas.size());
      accumulate(buffer[root.impl().output_nr], seeds[i]);
    } else {
      deliver_leaf(root.impl_ptr(), seeds[i]);
    }
  }
  for (const Tensor& root : roots) {
    Node* node = root.grad_fn().get();
    if (node && dependencies[node] == 0) {
      dependencies[node] = -1;  // queued
      ready.push(node);
    }
  }

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::vector<Tensor> grad_outputs = std::move(buffers[node]);
    buffers.erase(node);
    grad_outputs.resize(node->saved.output_metas.size());
    if (capture) {
      auto it = capture->node_slots.find(node);
      if (it != capture->node_slots.end()) {
        for (auto [output_nr, slot] : it->second) {
          if (grad_outputs[output_nr].defined()) {
            accumulate(capture->results[slot], grad_outputs[output_nr]);
          }
        }
      }
    }
    TESSERA_CHECK(node->saved.op->grad != nullptr, "[", node->saved.op->name,
                  "] has no gradient function; it cannot be differentiated");
    TESSERA_CHECK(!node->saved.released, "[backward] the graph through '", node->saved.op->name,
                  "' was already freed by an earlier backward; pass retain_graph=true to the "
                  "first backward to backpropagate twice");
    std::vector<Tensor> input_grads;
    {
      GradContext context(node->saved, std::move(grad_outputs), create_graph);
      input_grads = node->saved.op->grad(context);
    }
    TESSERA_CHECK(input_grads.size() == node->next_edges.size(), "[", node->saved.op->name,
                  "] gradient returned ", input_grads.size(), " tensors for ",
                  node->next_edges.size(), " inputs");
    for (size_t i = 0; i < input_grads.size(); ++i) {
      const Edge& edge = node->next_edges[i];
      if (!edge.active() || !input_grads[i].defined()) {
        if (edge.node) {
          if (--dependencies[edge.node.get()] == 0) ready.push(edge.node.get());
        }
        continue;
      }
      Tensor gradient = conform(input_grads[i], node->saved.input_metas[i], node->saved.op->name);
      if (edge.leaf) {
        deliver_leaf(edge.leaf, gradient);
      } else {
        auto& buffer = buffers[edge.node.get()];
        buffer.resize(edge.node->saved.output_metas.size());
        accumulate(buffer[edge.output_nr], gradient);
        if (--dependencies[edge.node.get()] == 0) ready.push(edge.node.get());
      }
    }
    if (!retain_graph) {
      node->saved.inputs.clear();
      node->saved.saved_outputs.clear();
      node->saved.released = true;
    }
  }
}

}  // namespace

void set_global_grad_hooks(GlobalGradHooks hooks) {
  global_hooks = hooks;
}

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads,
                  bool retain_graph, bool create_graph) {
  // Global leaves may receive their gradients on a communication thread;
  // backward returns only once they have all arrived, even when it fails.
  struct WaitForGradients {
    bool done = false;
    ~WaitForGradients() {
      if (done) return;
      try {
        finish_global_backward(/*failed=*/true);
      } catch (const std::exception&) {  // the error in flight is the one to report
      }
    }
  } wait;
  execute(roots, root_grads, retain_graph || create_graph, create_graph, nullptr);
  wait.done = true;
  finish_global_backward(/*failed=*/false);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused) {
  Capture capture;
  capture.results.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    TESSERA_CHECK(inputs[i].requires_grad(), "[grad] input ", i, " does not require grad");
    if (inputs[i].grad_fn()) {
      capture.node_slots[inputs[i].grad_fn().get()].emplace_back(inputs[i].impl().output_nr, i);
    } else {
      capture.leaf_slots[inputs[i].impl_ptr().get()] = i;
    }
  }
  execute(outputs, grad_outputs, retain_graph || create_graph, create_graph, &capture);
  for (size_t i = 0; i < inputs.size(); ++i) {
    TESSERA_CHECK(allow_unused || capture.results[i].defined(), "[grad] input ", i,
                  " was not used to compute the outputs; pass allow_unused=true to get an "
                  "undefined gradient for it");
  }
  return capture.results;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  run_backward({*this}, {gradient}, retain_graph, create_graph);
}

}  // namespace tessera
