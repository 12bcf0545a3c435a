// The dispatcher: meta tensors run every op's inference, mode handlers see
// every call, and the handlers of the layers above are installed.

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "tessera/backend/cuda.h"
#include "tessera/core/allocator.h"
#include "tessera/core/work_queue.h"
#include "tessera/ops/dispatch.h"
#include "tessera/ops/workspace_region.h"
#include "tessera/optim/adam.h"
#include "tessera/optim/clip_grad.h"
#include "tessera/optim/sgd.h"
#include "testing.h"

namespace tessera::testing {
namespace {

// Every registered op, called on meta copies of its SBP case's inputs,
// gives the outputs' shapes, dtypes (and, for views, strides) of the real
// call, and no storage.
TEST(MetaTensors, EveryOpInfersTheRealOutputs) {
  std::set<std::string> covered;
  for (const SbpCase& sbp_case : sbp_cases()) {
    SCOPED_TRACE(sbp_case.op);
    const OpDef& op = find_op(sbp_case.op);
    std::vector<Tensor> inputs = sbp_case.inputs();
    covered.insert(sbp_case.op);
    if (inputs.empty()) continue;  // factories take no tensors to make meta
    std::vector<Tensor> metas;
    for (const Tensor& input : inputs) metas.push_back(input.to_meta());
    std::vector<Tensor> real = call(op, inputs, sbp_case.attrs);
    std::vector<Tensor> meta = call(op, metas, sbp_case.attrs);
    ASSERT_EQ(meta.size(), real.size());
    for (size_t o = 0; o < real.size(); ++o) {
      EXPECT_TRUE(meta[o].is_meta());
      EXPECT_EQ(meta[o].shape(), real[o].shape());
      EXPECT_EQ(meta[o].dtype(), real[o].dtype());
      if (op.view) {
        EXPECT_EQ(meta[o].strides(), real[o].strides());
      }
    }
  }
  // A transfer to another device has no SBP case (a global tensor does not
  // change device); its meta call is checked below, as are send and recv's
  // (which need a peer to run for real).
  covered.insert("to_device");
  covered.insert("send");
  covered.insert("recv");
  std::string missing;
  for (const OpDef* op : all_ops()) {
    if (!covered.count(op->name) && !op->global_only) missing += " " + op->name;
  }
  EXPECT_TRUE(missing.empty()) << "ops never run on meta tensors:" << missing;
}

TEST(MetaTensors, PointToPointOpsInferTheirOutputs) {
  // Rank 0 of a 2-rank job, as a planner would see it: nothing moves.
  const Attrs pair{
      {"ranks", std::vector<int64_t>{0, 1}}, {"peer", int64_t{1}}, {"tag", int64_t{3}}};
  Tensor token = call1(find_op("send"), {Tensor::empty({4, 2}, DType::f64, Device::meta())}, pair);
  EXPECT_TRUE(token.is_meta());
  EXPECT_EQ(token.dim(), 0);
  EXPECT_EQ(token.dtype(), DType::f32);
  Attrs from_peer = pair;
  from_peer.set("shape", std::vector<int64_t>{5, 3})
      .set("dtype", DType::i64)
      .set("device_type", static_cast<int64_t>(DeviceType::meta))
      .set("device_index", int64_t{0});
  Tensor received = call1(find_op("recv"), {}, from_peer);
  EXPECT_TRUE(received.is_meta());
  EXPECT_EQ(received.shape(), (Shape{5, 3}));
  EXPECT_EQ(received.dtype(), DType::i64);
  Attrs self = pair;
  self.set("peer", int64_t{0});
  EXPECT_HAS(error_of([&] {
               call(find_op("recv"), {},
                    self.set("shape", std::vector<int64_t>{1})
                        .set("dtype", DType::f32)
                        .set("device_type", int64_t{0})
                        .set("device_index", int64_t{0}));
             }),
             "[recv] peer 0 is this rank itself");
}

TEST(MetaTensors, PublicFunctionsAndAutogradRunOnMeta) {
  Tensor x = Tensor::empty({4, 3}, DType::f32, Device::meta()).set_requires_grad();
  Tensor w = Tensor::empty({3, 5}, DType::f32, Device::meta()).set_requires_grad();
  Tensor y = relu(matmul(x, w) * 2.0 + 1.0);
  EXPECT_TRUE(y.is_meta());
  EXPECT_EQ(y.shape(), (Shape{4, 5}));
  Tensor loss = sum(softmax(y, 1));
  EXPECT_EQ(loss.dim(), 0);
  loss.backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(x.grad().is_meta());
  EXPECT_EQ(x.grad().shape(), x.shape());
  EXPECT_EQ(w.grad().shape(), w.shape());
}

TEST(MetaTensors, ReadingDataIsAnError) {
  Tensor x = Tensor::empty({2, 3}, DType::f32, Device::meta());
  EXPECT_HAS(error_of([&] { x.to_vector<float>(); }), "meta tensor");
  EXPECT_HAS(error_of([&] { x.sum().item<float>(); }), "has no data");
  EXPECT_HAS(error_of([&] { x.data<float>(); }), "meta");
  EXPECT_HAS(error_of([&] { x.cpu(); }), "has no data");
  EXPECT_HAS(error_of([&] { ones({2, 3}).copy_(x); }), "has no data");
  EXPECT_HAS(to_string(x), "device=meta");
  // Writing into a meta tensor only checks the shapes.
  x.copy_(ones({3}));
  EXPECT_HAS(error_of([&] { x.copy_(ones({4})); }), "cannot be broadcast");
}

TEST(MetaTensors, ToMetaKeepsShapeDtypeAndLayout) {
  Tensor x = uniform({3, 4}).t();
  Tensor m = x.to_meta();
  EXPECT_TRUE(m.is_meta());
  EXPECT_EQ(m.shape(), (Shape{4, 3}));
  EXPECT_EQ(m.dtype(), DType::f64);
  EXPECT_EQ(m.strides(), x.strides());
  EXPECT_TRUE(x.to(Device::meta()).is_meta());
  EXPECT_EQ(device_str(m.device()), "meta");
}

TEST(MetaTensors, GlobalMetaNeedsNoProcessGroup) {
  // A mesh this process does not have: four ranks.
  Placement mesh(DeviceType::cpu, {0, 1, 2, 3});
  Tensor x = make_global_meta({8, 16}, DType::f32, mesh, NdSbp(Sbp::split(0)));
  Tensor w = make_global_meta({16, 4}, DType::f32, mesh, NdSbp(Sbp::broadcast()));
  Tensor y = matmul(x, w);
  EXPECT_TRUE(y.is_global());
  EXPECT_TRUE(y.is_meta());
  EXPECT_EQ(y.shape(), (Shape{8, 4}));
  EXPECT_EQ(y.nd_sbp(), NdSbp(Sbp::split(0)));
  // Split rows summed over rows: a partial sum.
  Tensor total = sum(y, std::vector<int64_t>{0});
  EXPECT_EQ(total.nd_sbp(), NdSbp(Sbp::partial_sum()));
  EXPECT_HAS(error_of([&] { y.to_vector<float>(); }), "meta tensor");
}

// A mode handler that records every call and passes it on.
class Recorder final : public Handler {
 public:
  const char* name() const override { return "recorder"; }
  TensorVector run(const OpDef& op, const TensorVector& inputs, const Attrs& attrs) override {
    calls.push_back(op.name);
    return redispatch(op, inputs, attrs);
  }
  std::vector<std::string> calls;
};

TEST(Dispatcher, AModeHandlerThatIsNotATraceLeavesOptimizerStepsAsEager) {
  // The optimizer leaves its step count to the graph only under a graph
  // trace; under any other mode handler a step counts as it does eagerly.
  Tensor w = uniform({3}).to(DType::f32).set_requires_grad(true);
  optim::Adam adam({w}, {.lr = 0.1});
  Recorder recorder;
  {
    HandlerScope scope(recorder);
    for (int i = 0; i < 2; ++i) {
      adam.zero_grad();
      (w * w).sum().backward();
      adam.step();
    }
  }
  EXPECT_EQ(adam.state_dict().at("state.0.step").item<int64_t>(), 2);
  EXPECT_NE(std::find(recorder.calls.begin(), recorder.calls.end(), "adam_step"),
            recorder.calls.end());
}

TEST(Dispatcher, ModeHandlerSeesEveryCallOnce) {
  Tensor a = uniform({2, 3}), b = uniform({3, 2});
  Recorder recorder;
  Tensor y;
  {
    HandlerScope scope(recorder);
    y = relu(matmul(a, b));
  }
  EXPECT_EQ(recorder.calls, (std::vector<std::string>{"matmul", "relu"}));
  EXPECT_TRUE(all_close(y, relu(matmul(a, b))));
  // Out of scope again: nothing more is recorded.
  relu(a);
  EXPECT_EQ(recorder.calls.size(), 2u);
}

TEST(Dispatcher, NestedModesRunInnermostFirst) {
  Recorder outer, inner;
  Tensor a = uniform({3});
  {
    HandlerScope outer_scope(outer);
    HandlerScope inner_scope(inner);
    exp(a);
  }
  EXPECT_EQ(inner.calls, (std::vector<std::string>{"exp"}));
  EXPECT_TRUE(outer.calls.empty());  // redispatch skips the modes
}

TEST(Dispatcher, AutogradRecordsWhateverHandlerRuns) {
  Tensor a = uniform({3}).set_requires_grad();
  Recorder recorder;
  Tensor y;
  {
    HandlerScope scope(recorder);
    y = sum(exp(a));
  }
  y.backward();
  EXPECT_TRUE(all_close(a.grad(), exp(a.detach())));
}

// Writes and optimizer updates are ops too: a tracer sees every one.
TEST(Dispatcher, InPlaceWritesAndOptimizerUpdatesReachTheModes) {
  Tensor w = uniform({4}).set_requires_grad();
  Tensor v = uniform({4}).set_requires_grad();
  sum(mul(w, v)).backward();
  optim::SGD sgd({w}, {.lr = 0.1, .momentum = 0.9});
  optim::AdamW adam({v}, {.lr = 0.01});
  Tensor x = zeros({2, 3});
  Recorder recorder;
  {
    HandlerScope scope(recorder);
    x.copy_(uniform({3}));
    x.fill_(1.0);
    sgd.step();
    adam.step();
    optim::clip_grad_norm_({w, v}, 0.01);
  }
  auto seen = [&](const std::string& name) {
    return std::count(recorder.calls.begin(), recorder.calls.end(), name);
  };
  EXPECT_EQ(seen("fill_"), 1);
  EXPECT_EQ(seen("sgd_momentum_step"), 1);
  EXPECT_EQ(seen("adam_step"), 1);
  EXPECT_GE(seen("copy_"), 3);  // copy_, and clipping scales both gradients in place
  EXPECT_EQ(x.sum().item<float>(), 6.0f);
}

// to_global and to_local are ops: a tracer sees them, meta tensors run
// them, and autograd records them.
TEST(MetaTensors, LocalGlobalConversionsAreOps) {
  const Placement one = Placement::cpu(1);
  Tensor x = uniform({4, 3}).set_requires_grad();
  Recorder recorder;
  Tensor y;
  {
    HandlerScope scope(recorder);
    y = x.to_global(one, Sbp::split(0)).to_global(one, Sbp::broadcast()).to_local();
  }
  EXPECT_EQ(recorder.calls, (std::vector<std::string>{"local_to_global", "to_global", "to_local"}));
  EXPECT_TRUE(all_close(y, x.detach()));
  sum(mul(y, 3.0)).backward();
  EXPECT_TRUE(all_close(x.grad(), mul(ones_like(x), 3.0)));
  // On meta tensors: shapes and layouts, no data, no process group.
  Tensor m = x.detach().to_meta().to_global(one, Sbp::split(1));
  EXPECT_TRUE(m.is_meta() && m.is_global());
  EXPECT_EQ(m.shape(), (Shape{4, 3}));
  EXPECT_EQ(m.to_global(one, Sbp::partial_sum()).nd_sbp(), NdSbp(Sbp::partial_sum()));
  EXPECT_TRUE(m.to_local().is_meta());
  EXPECT_EQ(m.to_local().shape(), (Shape{4, 3}));
  // A plan for a mesh this one-process job does not have.
  const Placement four = Placement::cpu(4);
  Tensor piece = Tensor::empty({2, 3}, DType::f32, Device::meta()).to_global(four, Sbp::split(0));
  EXPECT_EQ(piece.shape(), (Shape{8, 3}));
  Tensor moved = piece.to_global(four, Sbp::split(1));
  EXPECT_EQ(moved.nd_sbp(), NdSbp(Sbp::split(1)));
  EXPECT_EQ(moved.to_local().shape(), (Shape{8, 1}));  // rank 0's columns of [8, 3]
  // Real tensors still name the missing ranks.
  EXPECT_HAS(error_of([&] { x.detach().to_global(four, Sbp::split(0)); }),
             "names rank 1 but this job has 1 processes");
}

// x.to(device) is the op to_device: a mode handler sees the transfer, and
// on a meta input it infers the output without storage.
TEST(Dispatcher, DeviceTransfersAreOps) {
  const Device cuda0{DeviceType::cuda, 0};
  Tensor x = uniform({2, 3});
  Recorder recorder;
  {
    HandlerScope scope(recorder);
    if (cuda::is_available()) {
      Tensor back = x.cuda().cpu();
      EXPECT_TRUE(all_close(back, x));
    } else {
      EXPECT_HAS(error_of([&] { x.cuda(); }), "[storage] device cuda:0 is not available");
    }
  }
  ASSERT_FALSE(recorder.calls.empty());
  EXPECT_EQ(recorder.calls[0], "to_device");
  Tensor meta = call1(find_op("to_device"), {x.to_meta()},
                      {{"device_type", static_cast<int64_t>(cuda0.type)}, {"device_index", 0}});
  EXPECT_TRUE(meta.is_meta());
  EXPECT_EQ(meta.shape(), x.shape());
  EXPECT_EQ(meta.dtype(), x.dtype());
  // A transfer is on the tape, and its gradient (a transfer back to the
  // input's device) runs in backward.
  Tensor leaf = x.to_meta();
  leaf.set_requires_grad();
  Tensor moved = call1(find_op("to_device"), {leaf},
                       {{"device_type", static_cast<int64_t>(cuda0.type)}, {"device_index", 0}});
  ASSERT_TRUE(moved.requires_grad());
  moved.sum().backward();
  ASSERT_TRUE(leaf.grad().defined());
  EXPECT_TRUE(leaf.grad().is_meta());
  EXPECT_EQ(leaf.grad().shape(), x.shape());
}

// A factory given a layout is a call of the same op, which the eager-global
// handler runs: a mode handler sees "full" and "randn".
TEST(Dispatcher, GlobalFactoriesAreTheFactoryOpsWithALayout) {
  const Placement one = Placement::cpu(1);
  Recorder recorder;
  Tensor z, r;
  {
    HandlerScope scope(recorder);
    z = zeros({4, 2}, one, NdSbp(Sbp::split(0)));
    r = randn({3}, one, NdSbp(Sbp::broadcast()));
  }
  EXPECT_EQ(recorder.calls, (std::vector<std::string>{"full", "randn"}));
  EXPECT_TRUE(z.is_global() && r.is_global());
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(8, 0.0f));
  EXPECT_EQ(r.shape(), (Shape{3}));
}

// A kernel's scratch memory: aligned buffers from the device's allocator,
// counted, all returned when the workspace ends.
TEST(Dispatcher, WorkspaceServesAlignedBuffersAndCountsThem) {
  const int64_t before = CpuAllocator::instance().stats().current_bytes;
  {
    Workspace workspace(Device{});
    float* a = workspace.allocate_as<float>(100);
    void* b = workspace.allocate(3);
    EXPECT_NE(static_cast<void*>(a), b);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
    EXPECT_EQ(workspace.peak_bytes(), 403u);
    EXPECT_GT(CpuAllocator::instance().stats().current_bytes, before);
  }
  EXPECT_EQ(CpuAllocator::instance().stats().current_bytes, before);
}

// Memory lent to the workspaces of one thread (a graph executor lends its
// arena's place for a kernel's scratch): buffers come from the region while
// they fit, in 64-byte steps, then from the allocator; used() counts them
// all, and an inner scope counts its own.
TEST(Dispatcher, ALentRegionServesWorkspacesWhileItFits) {
  alignas(64) static char region[256];
  const int64_t before = CpuAllocator::instance().stats().current_bytes;
  LentWorkspace lent(region, sizeof region);
  Workspace workspace(Device{});
  EXPECT_EQ(workspace.allocate(100), static_cast<void*>(region));
  EXPECT_EQ(workspace.allocate(128), static_cast<void*>(region + 128));
  EXPECT_EQ(CpuAllocator::instance().stats().current_bytes, before);
  const auto* beyond = static_cast<const char*>(workspace.allocate(1));  // 320 > 256
  EXPECT_TRUE(beyond < region || beyond >= region + sizeof region);
  EXPECT_GT(CpuAllocator::instance().stats().current_bytes, before);
  EXPECT_EQ(lent.used(), 320u);
  {
    LentWorkspace inner(nullptr, 0);
    Workspace other(Device{});
    EXPECT_NE(other.allocate(10), nullptr);
    EXPECT_EQ(inner.used(), 64u);
  }
  EXPECT_EQ(lent.used(), 320u);
}

TEST(Dispatcher, KernelsWaitForWorkStillWritingTheirInputs) {
  // Work on another thread still writes `t` (as an asynchronous collective
  // does); a kernel that reads it, and one that writes it, wait for it.
  WorkQueue queue;
  Tensor t = zeros({4});
  Storage& storage = *t.impl().storage;
  std::shared_ptr<Work> work = queue.submit(
      [t]() mutable {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        float* data = t.data<float>();
        for (int i = 0; i < 4; ++i) data[i] = static_cast<float>(i + 1);
      },
      [&](const std::shared_ptr<Work>& queued) { storage.set_pending(queued); });
  EXPECT_TRUE(storage.has_pending());
  EXPECT_EQ(add(t, 1.0).to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_FALSE(storage.has_pending());
  EXPECT_TRUE(work->is_completed());

  // A view shares the storage, so it waits too; and an error of the work
  // reaches the kernel that waits for it.
  Tensor u = zeros({2, 2});
  std::shared_ptr<Work> failing = queue.submit(
      [] { TESSERA_FAIL("[test] the collective failed"); },
      [&](const std::shared_ptr<Work>& queued) { u.impl().storage->set_pending(queued); });
  EXPECT_HAS(error_of([&] { u.narrow(0, 0, 1).fill_(3.0); }), "[test] the collective failed");
  EXPECT_FALSE(u.impl().storage->has_pending());
}

TEST(Dispatcher, HandlersAreInstalledByTheirLayers) {
  EXPECT_STREQ(handler_for(DispatchKey::local)->name(), "eager-local");
  EXPECT_STREQ(handler_for(DispatchKey::meta)->name(), "meta");
  EXPECT_STREQ(handler_for(DispatchKey::global)->name(), "eager-global");
  EXPECT_EQ(dispatch_key({uniform({2})}), DispatchKey::local);
  EXPECT_EQ(dispatch_key({uniform({2}), uniform({2}).to_meta()}), DispatchKey::meta);
}

}  // namespace
}  // namespace tessera::testing
