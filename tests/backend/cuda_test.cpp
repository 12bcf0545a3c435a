// CUDA tensors: availability, the errors of builds and machines without
// CUDA (always run), and on a GPU the copies between devices and the caching
// allocator (skipped without one).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing.h"

namespace tessera {
namespace {

using tessera::testing::error_of;

constexpr Device kCuda0{DeviceType::cuda, 0};

#define TESSERA_REQUIRE_CUDA() \
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason()

// Values no two positions share, in `dtype`'s range (u8 wraps at 256, bool is i % 2).
Tensor distinct(const Shape& shape, DType dtype) {
  const int64_t count = numel(shape);
  std::vector<double> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    values[static_cast<size_t>(i)] = dtype == DType::boolean ? i % 2
                                     : dtype == DType::u8    ? (i * 7) % 256
                                                             : i * 1.5 - 3;
  }
  return Tensor::from_vector(values, shape).to(dtype);
}

TEST(CudaTest, AvailabilityIsConsistent) {
  EXPECT_GE(cuda::device_count(), 0);
  EXPECT_EQ(cuda::is_available(), cuda::device_count() > 0);
  EXPECT_EQ(cuda::unavailable_reason().empty(), cuda::is_available());
  if (!cuda::is_built()) {
    EXPECT_EQ(cuda::device_count(), 0);
    EXPECT_HAS(cuda::unavailable_reason(), "Tessera was built without CUDA");
    EXPECT_EQ(cuda::memory_stats(0).system_allocations, 0);
  }
  cuda::empty_cache();  // harmless with or without devices
}

TEST(CudaTest, MissingDeviceIsAClearError) {
  // cuda:0 on a machine without CUDA; one past the last device on a GPU machine.
  const int index = cuda::device_count();
  const Device missing{DeviceType::cuda, index};
  const std::string message = error_of([&] { Tensor::empty({2, 3}, DType::f32, missing); });
  const std::string head = "[storage] device cuda:" + std::to_string(index) + " is not available: ";
  EXPECT_EQ(message.rfind(head, 0), 0u) << message;
  if (!cuda::is_built()) {
    EXPECT_EQ(message,
              "[storage] device cuda:0 is not available: Tessera was built without CUDA; "
              "valid: cpu");
  } else if (!cuda::is_available()) {
    EXPECT_HAS(message, cuda::unavailable_reason());
    EXPECT_HAS(message, "; valid: cpu");
  } else {
    EXPECT_HAS(message, "valid: cpu, cuda:0");
  }
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  EXPECT_EQ(error_of([&] { x.to(missing); }), message);
  EXPECT_EQ(error_of([&] { x.cuda(index); }).rfind(head, 0), 0u);
  EXPECT_EQ(error_of([&] {
              Tensor::empty({2}, DType::f32, Device{DeviceType::cuda, -1});
            }).rfind("[storage] device cuda:-1 is not available: ", 0),
            0u);
}

TEST(CudaTest, CpuToCpuIsTheSameTensor) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3});
  EXPECT_TRUE(x.cpu().is_same(x));
  EXPECT_TRUE(x.to(Device{}).is_same(x));
}

// The copy is on the tape: a gradient comes back through both transfers to
// the device each tensor lives on, as PyTorch's .to() does.
TEST(CudaTest, GradientsFlowBackThroughCopiesBetweenDevices) {
  TESSERA_REQUIRE_CUDA();
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3}).set_requires_grad();
  Tensor w = Tensor::from_vector<float>({4, 5, 6}, {3});
  Tensor on_gpu = x.cuda();
  EXPECT_TRUE(on_gpu.requires_grad());
  mul(on_gpu.cpu(), w).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), Device{});
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4, 5, 6}));
}

TEST(CudaTest, RoundTripKeepsValuesForEveryDtypeAndShape) {
  TESSERA_REQUIRE_CUDA();
  const std::vector<DType> dtypes = {DType::f32, DType::f64, DType::bf16, DType::f16,
                                     DType::i64, DType::i32, DType::u8,   DType::boolean};
  const std::vector<Shape> shapes = {{}, {0}, {1}, {7}, {3, 5}, {2, 3, 4}, {0, 3}};
  for (DType dtype : dtypes) {
    for (const Shape& shape : shapes) {
      Tensor x = distinct(shape, dtype);
      Tensor on_gpu = x.cuda();
      EXPECT_EQ(on_gpu.device(), kCuda0);
      EXPECT_EQ(on_gpu.shape(), shape);
      EXPECT_EQ(on_gpu.dtype(), dtype);
      Tensor back = on_gpu.cpu();
      EXPECT_EQ(back.device(), Device{});
      EXPECT_EQ(back.to_vector<double>(), x.to_vector<double>())
          << dtype_name(dtype) << " " << shape_str(shape);
      // Reading a CUDA tensor copies it to the CPU first.
      EXPECT_EQ(on_gpu.to_vector<double>(), x.to_vector<double>());
    }
  }
}

TEST(CudaTest, NonContiguousViewsCopyInLogicalOrder) {
  TESSERA_REQUIRE_CUDA();
  Tensor base = distinct({4, 6}, DType::f32);
  // CPU views go up laid out densely.
  for (const Tensor& view : {base.t(), base.slice(1, 1, 6, 2), base.narrow(0, 1, 2),
                             base.select(1, 3), base.unsqueeze(1).expand({4, 3, 6})}) {
    Tensor up = view.cuda();
    EXPECT_TRUE(up.is_contiguous());
    EXPECT_EQ(up.to_vector<float>(), view.to_vector<float>()) << shape_str(view.shape());
  }
  // Views of a CUDA tensor (no kernel needed to make them) come down the same way.
  Tensor on_gpu = base.cuda();
  EXPECT_EQ(on_gpu.t().cpu().to_vector<float>(), base.t().to_vector<float>());
  EXPECT_EQ(on_gpu.slice(1, 1, 6, 2).cpu().to_vector<float>(),
            base.slice(1, 1, 6, 2).to_vector<float>());
  EXPECT_EQ(on_gpu.narrow(0, 2, 2).select(1, 4).to_vector<float>(),
            base.narrow(0, 2, 2).select(1, 4).to_vector<float>());
  EXPECT_EQ(on_gpu.select(0, 3).select(0, 5).item<float>(),
            base.select(0, 3).select(0, 5).item<float>());
  EXPECT_EQ(on_gpu.unsqueeze(0).expand({3, 4, 6}).cpu().to_vector<float>(),
            base.unsqueeze(0).expand({3, 4, 6}).to_vector<float>());
  EXPECT_EQ(on_gpu.narrow(1, 0, 0).cpu().numel(), 0);
}

TEST(CudaTest, CopyInPlaceAndPrinting) {
  TESSERA_REQUIRE_CUDA();
  Tensor target = Tensor::empty({2, 3}, DType::f64, kCuda0);
  target.copy_(Tensor::from_vector<float>({1, 2, 3}, {3}));  // cast and broadcast on the way
  EXPECT_EQ(target.to_vector<double>(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  Tensor host = Tensor::empty({2, 3}, DType::f64);
  host.copy_(target);
  EXPECT_EQ(host.to_vector<double>(), target.to_vector<double>());
  target.fill_(2.5);
  EXPECT_EQ(target.to_vector<double>(), std::vector<double>(6, 2.5));
  Tensor other = Tensor::empty({3, 2}, DType::f64, kCuda0);
  other.copy_(target.t());  // a strided CUDA source
  EXPECT_EQ(other.to_vector<double>(), std::vector<double>(6, 2.5));
  EXPECT_HAS(to_string(target), "device=cuda:0");
  EXPECT_HAS(to_string(target), "values=[2.5, 2.5");
}

TEST(CudaTest, OpsAndHostPointersRaiseClearly) {
  TESSERA_REQUIRE_CUDA();
  Tensor a = Tensor::from_vector<float>({1, 2}, {2}).cuda();
  EXPECT_HAS(error_of([&] { add(a, a); }),
             "[add] no kernel registered for device cuda (Tessera "
             "has no CUDA kernels yet");
  EXPECT_HAS(error_of([&] { a.data<float>(); }),
             "[tensor] data<f32> reads host memory but this tensor is on cuda:0");
  EXPECT_HAS(error_of([&] {
               add(a, Tensor::from_vector<float>({1, 2}, {2}));
             }),
             "inputs are on different devices: cuda:0 and cpu");
  EXPECT_HAS(error_of([&] { data::TensorDataset(a, a); }),
             "[TensorDataset] data and targets must be CPU tensors, got cuda:0 and cuda:0");
}

TEST(CudaTest, AllocatorReusesFreedBlocks) {
  TESSERA_REQUIRE_CUDA();
  cuda::empty_cache();
  const AllocatorStats before = cuda::memory_stats(0);
  void* first = nullptr;
  {
    Tensor x = Tensor::empty({1000}, DType::f32, kCuda0);
    first = x.raw_data();
    EXPECT_GT(cuda::memory_stats(0).current_bytes, before.current_bytes);
  }
  const AllocatorStats freed = cuda::memory_stats(0);
  EXPECT_EQ(freed.current_bytes, before.current_bytes);
  EXPECT_GE(freed.cached_bytes, 4000);
  // Same size class (4000 and 3900 bytes both round to 4096): the same block comes back.
  Tensor y = Tensor::empty({975}, DType::f32, kCuda0);
  EXPECT_EQ(y.raw_data(), first);
  EXPECT_EQ(cuda::memory_stats(0).system_allocations, freed.system_allocations);
  EXPECT_EQ(cuda::memory_stats(0).system_allocations, before.system_allocations + 1);
  y = Tensor();
  cuda::empty_cache();
  EXPECT_EQ(cuda::memory_stats(0).cached_bytes, 0);
  cuda::synchronize(0);
  EXPECT_HAS(error_of([] { cuda::synchronize(-1); }), "[synchronize] cuda:-1 is not available");
}

}  // namespace
}  // namespace tessera
