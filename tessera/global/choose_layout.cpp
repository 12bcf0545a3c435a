#include "tessera/global/choose_layout.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

#include "tessera/global/layout.h"

namespace tessera::global {

namespace {

std::string sbps_str(const std::vector<NdSbp>& sbps) {
  std::string text = "(";
  for (size_t i = 0; i < sbps.size(); ++i) text += (i ? ", " : "") + nd_sbp_str(sbps[i]);
  return text + ")";
}

// Runs op's inference on the shards the rank at `index` would hold with
// these SBPs. The local shapes, or the reason they do not work out.
struct ShardInference {
  MetaVector outputs;
  std::string failure;
};

ShardInference infer_on_shards(const OpDef& op, const MetaVector& metas,
                               const std::vector<NdSbp>& input_sbps, const Placement& placement,
                               const Attrs& attrs, int index) {
  MetaVector local;
  ShardOffsets offsets;
  for (size_t i = 0; i < metas.size(); ++i) {
    Region region = shard_region(metas[i].shape, placement, input_sbps[i], index);
    local.push_back({region.size, metas[i].dtype, metas[i].device});
    offsets.push_back(region.start);
  }
  // An op's rules reject shards they cannot handle (a reshape whose rows do
  // not split as its output's elements) with its argument error; that is
  // the answer "this signature does not hold here". Any other exception is
  // a bug and propagates.
  try {
    Attrs local_attrs = op.localize ? op.localize(attrs, local, metas, offsets) : attrs;
    return {op.infer(local, local_attrs), ""};
  } catch (const Error& error) {
    return {{}, error.what()};
  }
}

// Whether the combination gives every rank exactly its output shards.
bool holds(const OpDef& op, const MetaVector& metas, const MetaVector& outputs,
           const std::vector<NdSbp>& input_sbps, const std::vector<NdSbp>& output_sbps,
           const Placement& placement, const Attrs& attrs, std::string& why) {
  // Ranks whose shards have the same shapes infer alike, unless the op's
  // attrs depend on where a shard starts (localize): on a large mesh only a
  // few shapes occur (a split is even, or one longer).
  std::vector<std::vector<Shape>> seen;
  bool alike = !op.localize;
  for (size_t i = 0; i < metas.size() && alike; ++i) {
    alike = splits_evenly(metas[i].shape, placement, input_sbps[i]);
  }
  for (size_t o = 0; o < outputs.size() && alike; ++o) {
    alike = splits_evenly(outputs[o].shape, placement, output_sbps[o]);
  }
  for (int index = 0; index < (alike ? 1 : placement.size()); ++index) {
    if (!op.localize) {
      std::vector<Shape> shapes;
      for (size_t i = 0; i < metas.size(); ++i) {
        shapes.push_back(local_shape(metas[i].shape, placement, input_sbps[i], index));
      }
      for (size_t o = 0; o < outputs.size(); ++o) {
        shapes.push_back(local_shape(outputs[o].shape, placement, output_sbps[o], index));
      }
      if (std::find(seen.begin(), seen.end(), shapes) != seen.end()) continue;
      seen.push_back(std::move(shapes));
    }
    ShardInference got = infer_on_shards(op, metas, input_sbps, placement, attrs, index);
    if (!got.failure.empty()) {
      why = got.failure;
      return false;
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      Shape want = local_shape(outputs[o].shape, placement, output_sbps[o], index);
      if (got.outputs.at(o).shape != want) {
        why = str_cat("output ", o, " of the shard at index ", index, " would be ",
                      shape_str(got.outputs.at(o).shape), ", not ", shape_str(want));
        return false;
      }
    }
  }
  return true;
}

struct Candidate {
  std::vector<size_t> choice;  // a signature index per mesh axis
  std::vector<NdSbp> input_sbps;
  std::vector<NdSbp> output_sbps;
  std::vector<BoxingPlan> boxing;
  double communication = 0;
  double compute = 0;
};

// Decisions are pure functions of (op, input metas, attrs), so eager
// dispatch remembers them: a training step asks the same questions every
// step. Per thread, keyed on the interned placements and SBPs.
struct DecisionKey {
  const OpDef* op;
  MetaVector inputs;
  Attrs attrs;
  // The signature a script asked for, if any (interned: compared by identity).
  std::vector<NdSbp> scripted;

  bool operator==(const DecisionKey& other) const {
    if (op != other.op || inputs.size() != other.inputs.size() || !(attrs == other.attrs) ||
        scripted != other.scripted) {
      return false;
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const TensorMeta& a = inputs[i];
      const TensorMeta& b = other.inputs[i];
      if (a.shape != b.shape || a.dtype != b.dtype || a.device != b.device ||
          !(a.placement == b.placement) || !(a.sbp == b.sbp)) {
        return false;
      }
    }
    return true;
  }
};

struct DecisionKeyHash {
  size_t operator()(const DecisionKey& key) const {
    size_t h = std::hash<const void*>()(key.op) ^ key.attrs.hash();
    for (const TensorMeta& meta : key.inputs) {
      for (int64_t size : meta.shape) h = h * 1000003 ^ std::hash<int64_t>()(size);
      h = h * 31 + static_cast<size_t>(meta.dtype);
      h = h * 31 + std::hash<const void*>()(meta.placement.id());
      h = h * 31 + std::hash<const void*>()(meta.sbp.defined() ? &meta.sbp.sbps() : nullptr);
    }
    for (const NdSbp& sbp : key.scripted) h = h * 31 + std::hash<const void*>()(&sbp.sbps());
    return h;
  }
};

constexpr size_t kMaxRememberedDecisions = 4096;

// An in-place op cannot move what it writes: the signature must take each
// written input, and give its output, in the layout the input has.
bool keeps_written_layouts(const OpDef& op, const MetaVector& metas, const Candidate& c) {
  for (size_t o = 0; o < op.writes.size(); ++o) {
    const auto w = static_cast<size_t>(op.writes[o]);
    if (!(c.input_sbps[w] == metas[w].sbp) || !(c.output_sbps.at(o) == metas[w].sbp)) {
      return false;
    }
  }
  return true;
}

LayoutDecision decide(const OpDef& op, const MetaVector& inputs, const Attrs& attrs,
                      const CostModel& model, const ScriptedSignature* scripted = nullptr);

thread_local LayoutScript* active_script = nullptr;

// How many scripted calls a call may skip to find its op: eager issues a
// few calls a trace of the step does not (and the other way round).
constexpr size_t kScriptLookahead = 32;

}  // namespace

LayoutScript::LayoutScript(std::vector<ScriptedSignature> steps)
    : steps_(std::move(steps)), done_(steps_.size(), false) {
  TESSERA_CHECK(active_script == nullptr,
                "[LayoutScript] a script is already active on this "
                "thread; scripts do not nest");
  active_script = this;
}

LayoutScript::~LayoutScript() {
  active_script = nullptr;
}

int LayoutScript::missed() const {
  return static_cast<int>(steps_.size()) - followed_;
}

void LayoutScript::taken(bool yes) {
  if (!yes) return;
  ++followed_;
  done_[cursor_ - 1] = true;
}

std::string LayoutScript::missed_str() const {
  std::string text;
  for (size_t k = 0; k < steps_.size(); ++k) {
    if (done_[k]) continue;
    text += str_cat("#", k, " ", steps_[k].op ? steps_[k].op->name : "?", ": ",
                    sbps_str(steps_[k].inputs), " -> ", sbps_str(steps_[k].outputs), "\n");
  }
  return text;
}

const ScriptedSignature* LayoutScript::next(const OpDef& op, const MetaVector& inputs) {
  auto same_call = [&](const ScriptedSignature& step) {
    if (step.op != &op || step.shapes.size() != inputs.size()) return false;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (step.shapes[i] != inputs[i].shape) return false;
    }
    return true;
  };
  for (size_t k = cursor_; k < steps_.size() && k < cursor_ + kScriptLookahead; ++k) {
    if (same_call(steps_[k])) {
      cursor_ = k + 1;
      return &steps_[k];
    }
  }
  return nullptr;
}

std::string layouts_str(const MetaVector& inputs) {
  std::string text;
  for (size_t i = 0; i < inputs.size(); ++i) {
    text += (i ? ", " : "") + std::string("input ") + std::to_string(i) + ": ";
    text += inputs[i].is_global()
                ? placement_str(inputs[i].placement) + " " + nd_sbp_str(inputs[i].sbp)
                : "local " + shape_str(inputs[i].shape);
  }
  return text;
}

std::vector<LayoutOption> layout_options(const OpDef& op, const MetaVector& inputs,
                                         const Attrs& attrs, const Placement& placement,
                                         const CostModel& model,
                                         std::vector<std::string>* rejected) {
  MetaVector metas = inputs;
  const NdSbp all_broadcast = uniform(Sbp::broadcast(), placement.ndim());
  for (TensorMeta& meta : metas) {
    meta.placement = placement;
    meta.sbp = all_broadcast;
  }
  const MetaVector outputs = op.infer(metas, attrs);
  const std::vector<SbpSignature> signatures = sbp_signatures(op, metas, attrs);

  // Per mesh axis, the signatures that hold for its split alone.
  const int ndim = placement.ndim();
  std::vector<std::vector<size_t>> fitting(static_cast<size_t>(ndim));
  for (int axis = 0; axis < ndim; ++axis) {
    for (size_t s = 0; s < signatures.size(); ++s) {
      std::vector<NdSbp> in_sbps, out_sbps;
      for (const Sbp& sbp : signatures[s].inputs)
        in_sbps.push_back(with_axis(all_broadcast, axis, sbp));
      for (const Sbp& sbp : signatures[s].outputs)
        out_sbps.push_back(with_axis(all_broadcast, axis, sbp));
      std::string why;
      if (holds(op, metas, outputs, in_sbps, out_sbps, placement, attrs, why)) {
        fitting[static_cast<size_t>(axis)].push_back(s);
      } else if (axis == 0 && rejected != nullptr) {
        rejected->push_back(signature_str(signatures[s]) + ": " + why);
      }
    }
  }

  // Every combination of them that also holds across axes, priced.
  std::vector<LayoutOption> options;
  std::vector<size_t> cursor(static_cast<size_t>(ndim), 0);
  const bool any = std::all_of(fitting.begin(), fitting.end(),
                               [](const std::vector<size_t>& f) { return !f.empty(); });
  while (any) {
    LayoutOption c;
    for (int axis = 0; axis < ndim; ++axis) {
      c.choice.push_back(fitting[static_cast<size_t>(axis)][cursor[static_cast<size_t>(axis)]]);
    }
    for (size_t i = 0; i < metas.size(); ++i) {
      std::vector<Sbp> sbps;
      for (size_t s : c.choice) sbps.push_back(signatures[s].inputs[i]);
      c.input_sbps.emplace_back(sbps);
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      std::vector<Sbp> sbps;
      for (size_t s : c.choice) sbps.push_back(signatures[s].outputs[o]);
      c.output_sbps.emplace_back(sbps);
    }
    // An in-place op gives each output in the layout of the input it writes.
    bool keeps = true;
    for (size_t o = 0; o < op.writes.size(); ++o) {
      keeps = keeps && c.input_sbps[static_cast<size_t>(op.writes[o])] == c.output_sbps.at(o);
    }
    std::string why;
    if (keeps && (ndim == 1 ||
                  holds(op, metas, outputs, c.input_sbps, c.output_sbps, placement, attrs, why))) {
      MetaVector local_in, local_out;
      for (size_t i = 0; i < metas.size(); ++i) {
        local_in.push_back({local_shape(metas[i].shape, placement, c.input_sbps[i], 0),
                            metas[i].dtype, metas[i].device});
      }
      for (size_t o = 0; o < outputs.size(); ++o) {
        local_out.push_back({local_shape(outputs[o].shape, placement, c.output_sbps[o], 0),
                             outputs[o].dtype, outputs[o].device});
      }
      c.compute_seconds = model.compute_seconds(op_cost(op, local_in, local_out, attrs), op.kind);
      options.push_back(std::move(c));
    }
    // Next combination, the last axis fastest.
    int axis = ndim - 1;
    for (; axis >= 0; --axis) {
      size_t& at = cursor[static_cast<size_t>(axis)];
      if (++at < fitting[static_cast<size_t>(axis)].size()) break;
      at = 0;
    }
    if (axis < 0) break;
  }
  return options;
}

LayoutDecision choose_layout(const OpDef& op, const MetaVector& inputs, const Attrs& attrs,
                             const CostModel& model) {
  const ScriptedSignature* scripted =
      active_script != nullptr ? active_script->next(op, inputs) : nullptr;
  // Only the default model is fixed for the process; another may change.
  if (&model != &default_cost_model()) {
    LayoutDecision decision = decide(op, inputs, attrs, model, scripted);
    if (scripted != nullptr) active_script->taken(decision.input_sbps == scripted->inputs &&
                                                  decision.output_sbps == scripted->outputs);
    return decision;
  }
  thread_local std::unordered_map<DecisionKey, LayoutDecision, DecisionKeyHash> remembered;
  DecisionKey key{&op, inputs, attrs, {}};
  if (scripted != nullptr) {
    key.scripted = scripted->inputs;
    key.scripted.insert(key.scripted.end(), scripted->outputs.begin(), scripted->outputs.end());
  }
  auto found = remembered.find(key);
  if (found == remembered.end()) {
    LayoutDecision decision = decide(op, inputs, attrs, model, scripted);
    if (remembered.size() >= kMaxRememberedDecisions) remembered.clear();
    found = remembered.emplace(std::move(key), std::move(decision)).first;
  }
  if (scripted != nullptr) {
    active_script->taken(found->second.input_sbps == scripted->inputs &&
                         found->second.output_sbps == scripted->outputs);
  }
  return found->second;
}

namespace {

LayoutDecision decide(const OpDef& op, const MetaVector& inputs, const Attrs& attrs,
                      const CostModel& model, const ScriptedSignature* scripted) {
  LayoutDecision decision;
  decision.op = &op;
  for (const TensorMeta& input : inputs) {
    if (!input.is_global()) continue;
    if (!decision.placement.defined()) decision.placement = input.placement;
    TESSERA_CHECK(input.placement == decision.placement, "[", op.name,
                  "] global inputs must share one placement; got ", layouts_str(inputs),
                  ". Move them with to_global(placement, sbp) first");
  }
  const Placement& placement = decision.placement;
  TESSERA_CHECK(placement.defined(), "[", op.name, "] choose_layout needs a global input");
  const NdSbp all_broadcast = uniform(Sbp::broadcast(), placement.ndim());
  for (size_t i = 0; i < inputs.size(); ++i) {
    TensorMeta meta = inputs[i];
    if (!meta.is_global()) {
      TESSERA_CHECK(numel(meta.shape) == 1, "[", op.name, "] input ", i,
                    " is a local tensor of shape ", shape_str(meta.shape),
                    " while others are global (", layouts_str(inputs),
                    "); make it global with to_global(placement, sbp)");
      meta.placement = placement;
      meta.sbp = all_broadcast;
    }
    decision.inputs.push_back(meta);
  }
  const MetaVector& metas = decision.inputs;
  decision.outputs = op.infer(metas, attrs);
  std::vector<Candidate> candidates;
  for (LayoutOption& option :
       layout_options(op, metas, attrs, placement, model, &decision.rejected)) {
    Candidate c;
    c.choice = std::move(option.choice);
    c.input_sbps = std::move(option.input_sbps);
    c.output_sbps = std::move(option.output_sbps);
    c.compute = option.compute_seconds;
    for (size_t i = 0; i < metas.size(); ++i) {
      c.boxing.push_back(plan_boxing(metas[i], placement, c.input_sbps[i], model));
      c.communication += c.boxing.back().seconds;
    }
    if (keeps_written_layouts(op, metas, c)) candidates.push_back(std::move(c));
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) {
                     if (a.communication != b.communication)
                       return a.communication < b.communication;
                     if (a.compute != b.compute) return a.compute < b.compute;
                     return a.choice < b.choice;
                   });

  // A scripted signature that holds goes first.
  if (scripted != nullptr) {
    auto match = std::find_if(candidates.begin(), candidates.end(), [&](const Candidate& c) {
      return c.input_sbps == scripted->inputs && c.output_sbps == scripted->outputs;
    });
    if (match != candidates.end()) std::rotate(candidates.begin(), match, match + 1);
  }
  // The best, and the next one.
  const Candidate* chosen = nullptr;
  for (const Candidate& c : candidates) {
    if (chosen == nullptr) {
      chosen = &c;
      continue;
    }
    decision.runner_up =
        LayoutDecision::Alternative{c.input_sbps, c.output_sbps, c.communication, c.compute};
    break;
  }
  TESSERA_CHECK(chosen != nullptr || op.writes.empty(), "[", op.name, "] writes ",
                layouts_str(inputs), " in place, and none of its SBP signatures keeps the ",
                "layout of the inputs it writes; lay those out as broadcast or split alike");
  TESSERA_CHECK(chosen != nullptr, "[", op.name, "] has no SBP signature for ", layouts_str(inputs),
                "; the all-broadcast one should always hold: its inference rejects the whole "
                "shapes on one rank");
  decision.input_sbps = chosen->input_sbps;
  decision.output_sbps = chosen->output_sbps;
  decision.boxing = chosen->boxing;
  decision.communication_seconds = chosen->communication;
  decision.compute_seconds = chosen->compute;
  for (size_t o = 0; o < decision.outputs.size(); ++o) {
    decision.outputs[o].placement = placement;
    decision.outputs[o].sbp = decision.output_sbps[o];
  }
  return decision;
}

}  // namespace

std::string LayoutDecision::explain() const {
  std::string text =
      str_cat("[", op ? op->name : "?", "] on ", placement_str(placement), ": ",
              sbps_str(input_sbps), " -> ", sbps_str(output_sbps), ", ",
              communication_seconds * 1e6, " us moving + ", compute_seconds * 1e6, " us computing");
  for (size_t i = 0; i < boxing.size(); ++i) {
    if (boxing[i].steps.empty()) continue;
    text += str_cat("\n  input ", i, ": ", boxing[i].explain());
  }
  if (runner_up) {
    text += str_cat("\n  runner-up ", sbps_str(runner_up->input_sbps), " -> ",
                    sbps_str(runner_up->output_sbps), ": ", runner_up->seconds() * 1e6, " us (+",
                    (runner_up->seconds() - seconds()) * 1e6, " us)");
  } else {
    text += "\n  no other signature holds";
  }
  for (const std::string& reason : rejected) text += "\n  does not hold: " + reason;
  return text;
}

}  // namespace tessera::global
