#include <atomic>
#include <chrono>
#include <cmath>
#include <set>
#include <thread>

#include "tessera/core/work_queue.h"
#include "testing.h"

namespace tessera::testing {
namespace {

TEST(DType, SizesNamesAndPromotion) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::boolean), 1u);
  EXPECT_STREQ(dtype_name(DType::boolean), "bool");
  EXPECT_EQ(dtype_from_name("f16"), DType::f16);
  EXPECT_THROW(dtype_from_name("float7"), Error);
  EXPECT_EQ(promote_types(DType::i64, DType::f32), DType::f32);
  EXPECT_EQ(promote_types(DType::boolean, DType::u8), DType::u8);
  EXPECT_EQ(promote_types(DType::i32, DType::i64), DType::i64);
  EXPECT_EQ(promote_types(DType::f16, DType::bf16), DType::f32);
  EXPECT_EQ(promote_types(DType::f64, DType::f32), DType::f64);
  EXPECT_EQ(promote_types(DType::bf16, DType::i64), DType::bf16);
}

TEST(DType, HalfAndBFloat16Conversions) {
  // Exactly representable values round-trip; others round to nearest even.
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f}) {
    EXPECT_EQ(static_cast<float>(Half(v)), v) << v;
  }
  EXPECT_EQ(static_cast<float>(Half(1.0f + 1.0f / 4096)), 1.0f);  // below half an ulp
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(1e6f))));
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(NAN))));
  EXPECT_EQ(Half(1.0f).bits, 0x3c00);
  EXPECT_EQ(Half(-2.0f).bits, 0xc000);
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(static_cast<float>(BFloat16(3.140625f)), 3.140625f);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(NAN))));
}

TEST(Shape, BroadcastAndDims) {
  EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}, "t"), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {3}, "t"), (Shape{3}));
  EXPECT_THROW(broadcast_shapes({2, 3}, {4, 3, 2}, "t"), Error);
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Strides{12, 4, 1}));
  EXPECT_EQ(normalize_dim(-1, 3, "t"), 2);
  EXPECT_THROW(normalize_dim(3, 3, "t"), Error);
  EXPECT_EQ(normalize_dims({}, 2, "t"), (std::vector<int64_t>{0, 1}));
}

TEST(Allocator, CachesAndReusesBlocks) {
  CpuAllocator& allocator = CpuAllocator::instance();
  allocator.empty_cache();
  AllocatorStats before = allocator.stats();
  void* first = allocator.allocate(3000000);
  allocator.deallocate(first, 3000000);
  void* second = allocator.allocate(3000000);
  EXPECT_EQ(first, second);  // same size class: the cached block comes back
  EXPECT_EQ(reinterpret_cast<uintptr_t>(second) % 64, 0u);
  AllocatorStats during = allocator.stats();
  EXPECT_EQ(during.system_allocations, before.system_allocations + 1);
  EXPECT_EQ(during.allocations, before.allocations + 2);  // both, the cached one too
  EXPECT_GE(during.current_bytes - before.current_bytes, 3000000);
  allocator.deallocate(second, 3000000);
  EXPECT_EQ(allocator.stats().current_bytes, before.current_bytes);
  EXPECT_GE(allocator.stats().cached_bytes, 3000000);
  allocator.empty_cache();
  EXPECT_EQ(allocator.stats().cached_bytes, 0);
}

TEST(Allocator, TracksPeakOfTensors) {
  CpuAllocator& allocator = CpuAllocator::instance();
  allocator.reset_peak();
  int64_t start = allocator.stats().current_bytes;
  {
    Tensor big = Tensor::empty({1 << 20}, DType::f32);
    EXPECT_GE(allocator.stats().current_bytes - start, 4 << 20);
  }
  EXPECT_EQ(allocator.stats().current_bytes, start);
  EXPECT_GE(allocator.stats().peak_bytes - start, 4 << 20);
  EXPECT_EQ(CpuAllocator::round_size(1), 64u);
  EXPECT_EQ(CpuAllocator::round_size(5000), 5120u);
  EXPECT_EQ(CpuAllocator::round_size((2 << 20) + 1), size_t{4} << 20);
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  std::vector<std::atomic<int>> hits(100000);
  parallel_for(0, 100000, 1000, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) hits[i]++;
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, SmallRangesStayOnTheCallingThread) {
  std::set<std::thread::id> ids;
  parallel_for(0, 100, 1000, [&](int64_t, int64_t) { ids.insert(std::this_thread::get_id()); });
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(*ids.begin(), std::this_thread::get_id());
}

TEST(ThreadPool, NestedCallsAndExceptions) {
  std::atomic<int64_t> total{0};
  parallel_for(0, 4, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      parallel_for(0, 1000, 10, [&](int64_t a, int64_t b) { total += b - a; });
    }
  });
  EXPECT_EQ(total.load(), 4000);
  EXPECT_THROW(parallel_for(0, 100, 1, [](int64_t lo, int64_t) {
                 if (lo > 10) throw Error("boom");
               }),
               Error);
  EXPECT_GE(num_threads(), 1);
}

TEST(Rng, PhiloxKnownAnswers) {
  // Known-answer vectors of Philox4x32-10 (Salmon et al., Random123).
  auto zero = Philox::block(0, 0, 0);
  EXPECT_EQ(zero, (std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  auto ones = Philox::block(~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0});
  EXPECT_EQ(ones, (std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  auto pi = Philox::block(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull);
  EXPECT_EQ(pi, (std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Rng, GeneratorStateRoundTrips) {
  Generator g(5);
  uint64_t first = g.reserve(10);
  EXPECT_EQ(first, 0u);
  EXPECT_EQ(g.offset(), 10u);
  g.set_state(9, 3);
  EXPECT_EQ(g.seed(), 9u);
  EXPECT_EQ(g.reserve(1), 3u);
}

TEST(Tensor, HandlesShareStateAndReportMetadata) {
  Tensor a = zeros({2, 3});
  Tensor b = a;
  EXPECT_TRUE(a.is_same(b));
  EXPECT_EQ(a.numel(), 6);
  EXPECT_EQ(a.dim(), 2);
  EXPECT_EQ(a.size(-1), 3);
  EXPECT_THROW(a.size(2), Error);
  EXPECT_THROW(a.data<double>(), Error);
  Tensor undefined;
  EXPECT_FALSE(undefined.defined());
  EXPECT_THROW(undefined.shape(), Error);
  EXPECT_THROW(add(undefined, a), Error);
  EXPECT_NE(to_string(a).find("[2, 3]"), std::string::npos);
  EXPECT_THROW(Tensor::from_vector<int64_t>({1}, {1}).set_requires_grad(), Error);
}

TEST(Tensor, EmptyRejectsShapesWhoseSizeOverflows) {
  const int64_t huge = int64_t{1} << 40;
  EXPECT_HAS(error_of([&] { Tensor::empty({huge, huge}); }), "too large");
  // A zero dim makes numel 0, but the strides of the other dims still overflow.
  EXPECT_HAS(error_of([&] { Tensor::empty({0, huge, huge}); }), "too large");
  EXPECT_HAS(error_of([] { Tensor::empty({-1, 2}); }), "negative size");
  EXPECT_EQ(Tensor::empty({0, 1 << 20, 1 << 10}).numel(), 0);
}

TEST(Dispatch, MissingKernelNamesOpAndDtype) {
  // exp() itself would promote integers; the op has no i64 kernel.
  try {
    call(find_op("exp"), {ones({2}, DType::i64)});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("[exp]"), std::string::npos) << message;
    EXPECT_NE(message.find("i64"), std::string::npos) << message;
    EXPECT_NE(message.find("f32"), std::string::npos) << message;
  }
  EXPECT_THROW(find_op("no_such_op"), Error);
}

TEST(Dispatch, SixteenBitFloatsWithoutAKernelRunInF32) {
  // exp has f32 and f64 kernels only: f16 and bf16 inputs are widened, the
  // result rounded back, and the gradient flows through both casts.
  for (DType dtype : {DType::f16, DType::bf16}) {
    Tensor x = make({0.5, -1.25, 2}, {3}).to(dtype).set_requires_grad();
    Tensor y = exp(x);
    EXPECT_EQ(y.dtype(), dtype);
    Tensor expected = exp(x.detach().to(DType::f32)).to(dtype);
    EXPECT_EQ(y.to(DType::f64).to_vector<double>(), expected.to(DType::f64).to_vector<double>());
    sum(y).backward();
    EXPECT_EQ(x.grad().dtype(), dtype);
    EXPECT_EQ(x.grad().to(DType::f64).to_vector<double>(),
              y.detach().to(DType::f64).to_vector<double>());
  }
}

TEST(Shape, CheckedArithmeticNamesTheOpOnOverflow) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(checked_add(big - 1, 1, "op"), big);
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31, "op"), int64_t{1} << 62);
  EXPECT_HAS(error_of([&] { checked_add(big, 1, "reshape"); }), "[reshape]");
  EXPECT_HAS(error_of([&] { checked_mul(big, 2, "expand"); }), "[expand]");
  // 3 * 6148914691236517206 wraps to 2 in int64.
  EXPECT_HAS(error_of([] { checked_numel({3, 6148914691236517206}, "view"); }), "[view]");
  EXPECT_HAS(error_of([] { checked_numel({2, -1}, "full"); }), "[full] invalid size -1");
  EXPECT_EQ(checked_numel({0, big, big}, "op"), 0);
  EXPECT_EQ(checked_numel({}, "op"), 1);
  // (5 + 2 * 1 - 2 * (3 - 1) - 1) / 2 + 1 = 2; a window that does not fit gives 0.
  EXPECT_EQ(window_output_size(5, 3, 2, 1, 2, "conv2d"), 2);
  EXPECT_EQ(window_output_size(3, int64_t{1} << 40, 1, 0, 1, "max_pool2d"), 0);
  EXPECT_HAS(error_of([] { window_output_size(3, 3, 1, int64_t{1} << 62, 1, "conv2d"); }),
             "[conv2d]");
}

TEST(Shape, DimsOfAZeroDimTensorNameNoAxis) {
  EXPECT_TRUE(normalize_dims({0}, 0, "sum").empty());
  EXPECT_TRUE(normalize_dims({-1}, 0, "sum").empty());
  EXPECT_HAS(error_of([] { normalize_dims({1}, 0, "sum"); }), "[sum] dim 1 is out of range");
}

TEST(DimVector, ReadsLikeAVectorInlineAndOnTheHeap) {
  Shape small{2, 3, 4};
  EXPECT_EQ(small.size(), 3u);
  EXPECT_EQ(small.capacity(), DimVector::kInline);  // no heap block for a 3-d shape
  small.insert(small.begin() + 1, 7);
  EXPECT_EQ(small, (Shape{2, 7, 3, 4}));
  small.erase(small.begin());
  EXPECT_EQ(small, (Shape{7, 3, 4}));
  // Beyond kInline values it moves to the heap and keeps every value.
  Shape big;
  for (int64_t i = 0; i < 20; ++i) big.push_back(i);
  EXPECT_EQ(big.size(), 20u);
  EXPECT_GE(big.capacity(), 20u);
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(big[static_cast<size_t>(i)], i);
  // Copies and moves, inline and heap, in both directions.
  Shape copy = big;
  Shape moved = std::move(copy);
  EXPECT_EQ(moved, big);
  EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from vector is empty
  moved = small;
  EXPECT_EQ(moved, small);
  Shape from_heap = std::move(big);
  EXPECT_EQ(from_heap.size(), 20u);
  // It converts to and from std::vector<int64_t>, and compares with one.
  std::vector<int64_t> as_vector = small;
  EXPECT_EQ(as_vector, (std::vector<int64_t>{7, 3, 4}));
  EXPECT_EQ(Shape(as_vector), small);
  EXPECT_TRUE(small == as_vector);
  EXPECT_LT((Shape{1, 2}), (Shape{1, 3}));
  // insert of its own values copies them first.
  Shape self{1, 2};
  self.insert(self.begin(), self.begin(), self.end());
  EXPECT_EQ(self, (Shape{1, 2, 1, 2}));
  self.resize(6, 9);
  EXPECT_EQ(self, (Shape{1, 2, 1, 2, 9, 9}));
  EXPECT_THROW((void)self.at(6), std::out_of_range);
}

// An element that counts the live instances, so a test sees every
// construction matched by one destruction, inline and on the heap.
struct Counted {
  static inline int live = 0;
  std::string value;
  explicit Counted(std::string v = "") : value(std::move(v)) { ++live; }
  Counted(const Counted& other) : value(other.value) { ++live; }
  Counted(Counted&& other) noexcept : value(std::move(other.value)) { ++live; }
  Counted& operator=(const Counted&) = default;
  Counted& operator=(Counted&&) noexcept = default;
  ~Counted() { --live; }
  bool operator==(const Counted& other) const { return value == other.value; }
};

std::vector<std::string> values_of(const SmallVector<Counted, 2>& v) {
  std::vector<std::string> out;
  for (const Counted& c : v) out.push_back(c.value);
  return out;
}

TEST(SmallVector, KeepsFewElementsInlineAndDestroysEveryOne) {
  using V = SmallVector<Counted, 2>;
  {
    V v{Counted("a"), Counted("b")};
    const auto* object = reinterpret_cast<const char*>(&v);
    const auto* first = reinterpret_cast<const char*>(v.data());
    EXPECT_TRUE(first >= object && first < object + sizeof(V));  // inside the object
    EXPECT_EQ(v.capacity(), 2u);
    EXPECT_EQ(Counted::live, 2);
    // Growing past N moves to the heap and keeps every element; an element
    // of the vector itself can be appended while it grows.
    v.push_back(v[0]);
    v.emplace_back("d");
    EXPECT_EQ(values_of(v), (std::vector<std::string>{"a", "b", "a", "d"}));
    EXPECT_EQ(Counted::live, 4);
    first = reinterpret_cast<const char*>(v.data());
    EXPECT_FALSE(first >= object && first < object + sizeof(V));
    // Copies and moves, from the heap and from inline.
    V copy = v;
    V moved = std::move(copy);
    EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from vector is empty
    EXPECT_EQ(moved, v);
    V small{Counted("x")};
    V from_inline = std::move(small);
    EXPECT_EQ(values_of(from_inline), (std::vector<std::string>{"x"}));
    moved = from_inline;
    EXPECT_EQ(values_of(moved), (std::vector<std::string>{"x"}));
    // insert (of its own elements too), erase, resize.
    v.insert(v.begin() + 1, v.begin(), v.begin() + 2);
    EXPECT_EQ(values_of(v), (std::vector<std::string>{"a", "a", "b", "b", "a", "d"}));
    v.insert(v.begin(), Counted("z"));
    v.erase(v.begin() + 1, v.begin() + 4);
    EXPECT_EQ(values_of(v), (std::vector<std::string>{"z", "b", "a", "d"}));
    v.resize(2);
    v.resize(3, Counted("q"));
    EXPECT_EQ(values_of(v), (std::vector<std::string>{"z", "b", "q"}));
    v.pop_back();
    EXPECT_THROW((void)v.at(2), std::out_of_range);
    // It converts to and from std::vector.
    std::vector<Counted> as_vector = v;
    EXPECT_EQ(as_vector.size(), 2u);
    EXPECT_EQ(values_of(V(as_vector)), values_of(v));
    EXPECT_EQ(Counted::live,
              static_cast<int>(v.size() + moved.size() + from_inline.size() + as_vector.size()));
  }
  EXPECT_EQ(Counted::live, 0);
}

// An element whose copy throws on the third copy.
struct ThrowsOnThirdCopy {
  static inline int live = 0;
  static inline int copies = 0;
  ThrowsOnThirdCopy() { ++live; }
  ThrowsOnThirdCopy(const ThrowsOnThirdCopy&) {
    if (++copies == 3) throw std::runtime_error("third copy");
    ++live;
  }
  ThrowsOnThirdCopy& operator=(const ThrowsOnThirdCopy&) = default;
  ~ThrowsOnThirdCopy() { --live; }
};

TEST(SmallVector, AThrowingElementCopyLeaksNothing) {
  {
    const std::vector<ThrowsOnThirdCopy> source(4);
    ThrowsOnThirdCopy::copies = 0;
    // The two elements built before the throw are destroyed, on the heap
    // block (four do not fit inline), which is freed.
    EXPECT_THROW((SmallVector<ThrowsOnThirdCopy, 2>(source)), std::runtime_error);
    EXPECT_EQ(ThrowsOnThirdCopy::live, 4);
  }
  EXPECT_EQ(ThrowsOnThirdCopy::live, 0);
}

TEST(SmallVector, AnOpCallKeepsItsListsInline) {
  // The lists an op call passes (inputs, metas, outputs) hold a few
  // elements inside the object.
  TensorVector tensors{ones({2}), ones({3})};
  MetaVector metas{tensors[0].meta(), tensors[1].meta()};
  EXPECT_EQ(tensors.capacity(), TensorVector::kInline);
  EXPECT_EQ(metas.capacity(), MetaVector::kInline);
  EXPECT_EQ(metas[1].shape, (Shape{3}));
}

TEST(WorkQueue, RunsTasksInOrderOnItsThreadAndHandsBackErrors) {
  WorkQueue queue;
  std::vector<int> order;
  std::atomic<bool> on_queue{true};
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < 5; ++i) {
    works.push_back(queue.submit([&, i] {
      if (!queue.on_queue_thread() || !WorkQueue::on_any_queue_thread()) on_queue = false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      order.push_back(i);
    }));
  }
  std::shared_ptr<Work> failing = queue.submit([] { TESSERA_FAIL("[test] the task failed"); });
  EXPECT_FALSE(WorkQueue::on_any_queue_thread());
  works.back()->wait();
  EXPECT_TRUE(works.front()->is_completed());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(on_queue);
  EXPECT_THROW(failing->wait(), Error);
  EXPECT_THROW(failing->wait(), Error);  // every wait reports it
  std::shared_ptr<Work> last = queue.submit([] {});
  queue.drain();
  EXPECT_TRUE(last->is_completed());  // drain returns only once everything has run
  std::shared_ptr<Work> done = completed_work();
  EXPECT_TRUE(done->is_completed());
  done->wait();
}

// A view is checked against the memory it shares: every element it can
// reach (negative strides and zero-size views included) must be inside.
TEST(Views, AnAliasMustStayInsideItsMemory) {
  const Tensor base = arange(0, 12).to(DType::f32);  // 12 elements
  EXPECT_TRUE(equal(make_alias(base, {3}, {4}, 3), Tensor::from_vector<float>({3, 7, 11}, {3})));
  EXPECT_EQ(make_alias(base, {0, 5}, {1, 100}, 50).numel(), 0);  // reaches nothing
  EXPECT_EQ(make_alias(base, {4}, {0}, 11).numel(), 4);          // a broadcast of the last
  EXPECT_HAS(error_of([&] { make_alias(base, {3}, {4}, 4); }),
             "[view] a view of shape [3], strides [4] and offset 4 reaches elements 4 to 12 of "
             "memory holding 12 (valid: 0 to 11)");
  EXPECT_HAS(error_of([&] { make_alias(base, {3}, {-4}, 5); }), "reaches elements -3 to 5");
  EXPECT_HAS(error_of([&] { make_alias(base, {2}, {1}, -1); }), "reaches elements -1 to 0");
  EXPECT_HAS(error_of([&] { make_alias(base, {2, 2}, {INT64_MAX, 1}, 0); }), "[view]");
  EXPECT_HAS(error_of([&] { make_alias(base, {2, 2}, {1}, 0); }), "2 dims but 1 strides");
  // Meta tensors have no memory to check.
  EXPECT_EQ(make_alias(base.to_meta(), {100}, {1}, 0).numel(), 100);
}

}  // namespace
}  // namespace tessera::testing
