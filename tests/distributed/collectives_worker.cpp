// One rank of a multi-process collectives test. Run N copies with the
// launcher's environment (RANK, WORLD_SIZE, TESSERA_RDZV, ...). Each rank
// checks every collective against values it can compute alone, prints the
// first mismatch to stderr and exits 1. Modes (argv[1]):
//   all        every collective (default)
//   die_early  the last rank exits before an all_reduce the others enter
//   leave_early  the same with status 0, through the normal exit path
//   stall      the last rank sleeps past the timeout instead of entering it
//   die_later, stall_later  the same after a first all_reduce
//   mismatch_cached  rank 0 repeats an all_reduce layout it has checked while
//              rank 1 passes a new one; both must fail naming both shapes
//   which      prints the Group class that init_process_group chose, then a barrier
//   killed_in_dp_step, killed_in_boxing  global tensors on every rank: rank 1
//              is killed (SIGKILL) in the third step of data-parallel
//              training (after the forward pass, before the gradients'
//              all-reduce), or in the third round of boxing conversions
//              (before an all-to-all); the others must fail naming it

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include "tessera/global/parallel.h"
#include "tessera/tessera.h"

using namespace tessera;
using namespace tessera::distributed;

namespace {

int g_rank = 0;

#define EXPECT_WORKER(cond, ...)                                                          \
  do {                                                                                    \
    if (!(cond))                                                                          \
      TESSERA_FAIL("rank ", g_rank, " check failed at line ", __LINE__, ": ", #cond, " ", \
                   ##__VA_ARGS__);                                                        \
  } while (0)

template <typename T>
Tensor filled(const Shape& shape, const std::function<double(int64_t)>& value) {
  std::vector<T> data(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<T>(value(static_cast<int64_t>(i)));
  return Tensor::from_vector(data, shape);
}

template <typename T>
void expect_values(const Tensor& tensor, const std::function<double(int64_t)>& value,
                   const char* what) {
  std::vector<T> got = tensor.to_vector<T>();
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_WORKER(static_cast<double>(got[i]) == value(static_cast<int64_t>(i)), what, " at ", i,
                  ": got ", static_cast<double>(got[i]), ", expected ",
                  value(static_cast<int64_t>(i)));
  }
}

template <typename T>
void check_all_reduce(Group& group) {
  const int n = group.size(), r = group.rank();
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
    Tensor t = filled<T>({2, 3}, [&](int64_t i) { return r * 10 + i; });
    group.all_reduce(t, op);
    expect_values<T>(
        t,
        [&](int64_t i) {
          if (op == ReduceOp::max) return static_cast<double>((n - 1) * 10 + i);
          if (op == ReduceOp::min) return static_cast<double>(i);
          return static_cast<double>(10 * n * (n - 1) / 2 + n * i);
        },
        reduce_op_name(op));
  }
}

// Large enough (200 KB, 5 MB) for backends that switch algorithm on size or
// work in chunks, with lengths no world size divides.
void check_large_all_reduce(Group& group) {
  const int n = group.size(), r = group.rank();
  for (const auto& [count, op] : {std::pair<int64_t, ReduceOp>{50001, ReduceOp::sum},
                                  {50001, ReduceOp::min}, {1300001, ReduceOp::sum}}) {
    Tensor t = filled<float>({count}, [&](int64_t i) { return (i % 1000) * (r + 1); });
    group.all_reduce(t, op);
    expect_values<float>(
        t,
        [&](int64_t i) {
          const double unit = static_cast<double>(i % 1000);
          return op == ReduceOp::sum ? unit * n * (n + 1) / 2 : unit;
        },
        reduce_op_name(op));
  }
}

template <typename T>
void check_all_gather(Group& group) {
  const int n = group.size(), r = group.rank();
  Tensor t = filled<T>({2, 3}, [&](int64_t i) { return r * 7 + i; });
  std::vector<Tensor> all = group.all_gather(t);
  EXPECT_WORKER(static_cast<int>(all.size()) == n);
  for (int k = 0; k < n; ++k) {
    EXPECT_WORKER(all[k].shape() == Shape({2, 3}), shape_str(all[k].shape()));
    expect_values<T>(
        all[k], [&](int64_t i) { return k * 7 + i; }, "all_gather");
  }
  // A 0-d tensor gathers into 0-d pieces.
  std::vector<Tensor> scalars = group.all_gather(full({}, r + 0.5, DType::f64));
  for (int k = 0; k < n; ++k) {
    EXPECT_WORKER(scalars[k].dim() == 0 && scalars[k].item<double>() == k + 0.5,
                  shape_str(scalars[k].shape()));
  }
}

void check_uneven(Group& group) {
  const int n = group.size(), r = group.rank();
  // Rank r contributes r rows, so rank 0 sends nothing.
  Tensor t = filled<int64_t>({r, 2}, [&](int64_t i) { return r * 100 + i; });
  std::vector<Tensor> all = group.all_gather_uneven(t);
  for (int k = 0; k < n; ++k) {
    EXPECT_WORKER(all[k].shape() == Shape({k, 2}), shape_str(all[k].shape()));
    expect_values<int64_t>(
        all[k], [&](int64_t i) { return k * 100 + i; }, "all_gather_uneven");
  }
  // Pieces of several 2 MiB rounds in shared memory, each rank's a different
  // number of rounds (rank 0's none at all), gathered even and uneven.
  constexpr int64_t kRowFloats = 1000;
  const int64_t many = r * 300 + 7;  // rows of kRowFloats floats
  Tensor large = filled<float>({many, kRowFloats}, [&](int64_t i) { return (i * 3 + r) % 4099; });
  std::vector<Tensor> pieces = group.all_gather_uneven(r == 0 ? large.slice(0, 0, 0) : large);
  for (int k = 0; k < n; ++k) {
    const int64_t rows = k == 0 ? 0 : k * 300 + 7;
    EXPECT_WORKER(pieces[k].shape() == Shape({rows, kRowFloats}), shape_str(pieces[k].shape()));
    expect_values<float>(
        pieces[k], [&](int64_t i) { return (i * 3 + k) % 4099; }, "large all_gather_uneven");
  }
  Tensor even = filled<float>({700, kRowFloats}, [&](int64_t i) { return (i + 11 * r) % 997; });
  pieces = group.all_gather(even);
  for (int k = 0; k < n; ++k) {
    expect_values<float>(
        pieces[k], [&](int64_t i) { return (i + 11 * k) % 997; }, "large all_gather");
  }
  // Rows to rank j: (r + j) % 3; values name sender and receiver.
  std::vector<Tensor> inputs;
  for (int j = 0; j < n; ++j) {
    inputs.push_back(
        filled<float>({(r + j) % 3, 2}, [&](int64_t i) { return r * 1000 + j * 100 + i; }));
  }
  std::vector<Tensor> got = group.all_to_all(inputs);
  for (int k = 0; k < n; ++k) {
    EXPECT_WORKER(got[k].shape() == Shape({(k + r) % 3, 2}), shape_str(got[k].shape()));
    expect_values<float>(
        got[k], [&](int64_t i) { return k * 1000 + r * 100 + i; }, "all_to_all");
  }
  // Several rounds in shared memory: rows to rank j are (r + 2j) * 150 % 701
  // rows of kRowFloats floats (some pieces empty, some over a round).
  auto sent_rows = [](int from, int to) -> int64_t { return (from + 2 * to) * 150 % 701; };
  auto value = [](int from, int to, int64_t i) {
    return static_cast<float>((i + 7 * from + 13 * to) % 1021);
  };
  inputs.clear();
  for (int j = 0; j < n; ++j) {
    inputs.push_back(
        filled<float>({sent_rows(r, j), kRowFloats}, [&](int64_t i) { return value(r, j, i); }));
  }
  got = group.all_to_all(inputs);
  for (int k = 0; k < n; ++k) {
    EXPECT_WORKER(got[k].shape() == Shape({sent_rows(k, r), kRowFloats}),
                  shape_str(got[k].shape()));
    expect_values<float>(
        got[k], [&](int64_t i) { return value(k, r, i); }, "large all_to_all");
  }
  std::vector<Tensor> bytes;
  for (int j = 0; j < n; ++j)
    bytes.push_back(filled<uint8_t>({1}, [&](int64_t) { return r * 16 + j; }));
  got = group.all_to_all(bytes);
  for (int k = 0; k < n; ++k)
    expect_values<uint8_t>(
        got[k], [&](int64_t) { return k * 16 + r; }, "u8");
}

void check_reduce_scatter(Group& group) {
  const int n = group.size(), r = group.rank();
  std::vector<Tensor> inputs;
  for (int j = 0; j < n; ++j) {
    inputs.push_back(filled<double>({3}, [&](int64_t i) { return r * 1000 + j * 10 + i; }));
  }
  Tensor sum = group.reduce_scatter(inputs, ReduceOp::sum);
  expect_values<double>(
      sum, [&](int64_t i) { return 1000.0 * n * (n - 1) / 2 + n * (r * 10 + i); },
      "reduce_scatter sum");
  Tensor max = group.reduce_scatter(inputs, ReduceOp::max);
  expect_values<double>(
      max, [&](int64_t i) { return (n - 1) * 1000 + r * 10 + i; }, "max");
  // Chunks of several ring segments (512 KiB each), with a short last one.
  constexpr int64_t kLong = 300001;
  std::vector<Tensor> longs, ints;
  for (int j = 0; j < n; ++j) {
    longs.push_back(filled<float>({kLong}, [&](int64_t i) { return (i * 7 + r * 3 + j) % 1000; }));
    ints.push_back(filled<int32_t>({kLong}, [&](int64_t i) { return (i + r * 5 + j) % 97 - 40; }));
  }
  Tensor long_sum = group.reduce_scatter(longs, ReduceOp::sum);
  expect_values<float>(
      long_sum,
      [&](int64_t i) {
        double total = 0;
        for (int k = 0; k < n; ++k) total += (i * 7 + k * 3 + r) % 1000;
        return total;
      },
      "reduce_scatter long sum");
  Tensor int_min = group.reduce_scatter(ints, ReduceOp::min);
  expect_values<int32_t>(
      int_min,
      [&](int64_t i) {
        double lowest = 1e9;
        for (int k = 0; k < n; ++k) lowest = std::min<double>(lowest, (i + k * 5 + r) % 97 - 40);
        return lowest;
      },
      "reduce_scatter long min");
}

void check_broadcast_p2p_barrier(Group& group) {
  const int n = group.size(), r = group.rank();
  const int root = n - 1;
  Tensor t = filled<double>({4}, [&](int64_t i) { return r == root ? 7.5 + i : -1.0; });
  group.broadcast(t, root);
  expect_values<double>(
      t, [&](int64_t i) { return 7.5 + i; }, "broadcast");
  // Over three shared-memory rounds (2 MiB each), from rank 0; and empty.
  const int64_t long_count = 1300001;
  Tensor wide = filled<float>({long_count}, [&](int64_t i) {
    return r == 0 ? static_cast<float>(i % 1009) - 3.0f : 99.0f;
  });
  group.broadcast(wide, 0);
  expect_values<float>(
      wide, [&](int64_t i) { return static_cast<float>(i % 1009) - 3.0f; }, "long broadcast");
  Tensor none = Tensor::empty({0, 3}, DType::i64);
  group.broadcast(none, root);
  if (n >= 2) {
    Tensor out = filled<int32_t>({5}, [&](int64_t i) { return r * 3 + i; });
    Tensor in = Tensor::empty({5}, DType::i32);
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    if (r % 2 == 0) {
      group.send(out, next, 3);
      group.recv(in, prev, 3);
    } else {
      group.recv(in, prev, 3);
      group.send(out, next, 3);
    }
    expect_values<int32_t>(
        in, [&](int64_t i) { return prev * 3 + i; }, "send/recv ring");
  }
  group.barrier();
}

void check_split(Group& group) {
  const int n = group.size(), r = group.rank();
  std::vector<int> members;  // same parity as this rank, listed from high to low
  for (int k = n - 1; k >= 0; --k) {
    if (k % 2 == r % 2) members.push_back(k);
  }
  std::shared_ptr<Group> sub = group.split(members);
  EXPECT_WORKER(sub->size() == static_cast<int>(members.size()));
  EXPECT_WORKER(members[sub->rank()] == r, "sub rank ", sub->rank());
  Tensor t = Tensor::from_vector<int64_t>({r}, {1});
  sub->all_reduce(t);
  int64_t expected = 0;
  for (int k : members) expected += k;
  EXPECT_WORKER(t.item<int64_t>() == expected, t.item<int64_t>(), " vs ", expected);
  std::vector<Tensor> gathered = sub->all_gather(Tensor::from_vector<int64_t>({r}, {1}));
  EXPECT_WORKER(gathered.size() == members.size(), gathered.size(), " pieces");
  for (size_t k = 0; k < gathered.size(); ++k) {
    EXPECT_WORKER(gathered[k].item<int64_t>() == members[k], "piece ", k, " is ",
                  gathered[k].item<int64_t>(), ", want ", members[k]);
  }
  sub->barrier();
  // A second split of the same list must rendezvous afresh, not reuse the first's keys.
  std::shared_ptr<Group> again = group.split(members);
  again->barrier();
}

// Bad inputs raise on the calling rank before anything is sent; mismatches across
// ranks raise on every rank once the shapes are exchanged.
void check_errors(Group& group) {
  const int n = group.size(), r = group.rank();
  auto message_of = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const Error& error) {
      return error.what();
    }
    return "no error";
  };
  Tensor bytes = Tensor::empty({2}, DType::u8);
  std::string message = message_of([&] { group.all_reduce(bytes); });
  EXPECT_WORKER(message.rfind("[all_reduce]", 0) == 0, message);
  message = message_of([&] { group.send(bytes, r, 0); });
  EXPECT_WORKER(message.rfind("[send]", 0) == 0, message);
  message = message_of([&] { group.broadcast(bytes, n); });
  EXPECT_WORKER(message.rfind("[broadcast]", 0) == 0, message);
  if (n >= 2) {
    Tensor mismatched = Tensor::empty({r + 1, 2}, DType::f32);
    message = message_of([&] { group.all_gather(mismatched); });
    EXPECT_WORKER(message.rfind("[all_gather]", 0) == 0, message);
    // The checks below are the Gloo backend's peer layout checks; the MPI
    // backend checks only what its gathers exchange anyway.
    if (dynamic_cast<GlooGroup*>(&group) == nullptr) {
      group.barrier();
      return;
    }
    // Every rank names its own shape and a peer's, real dims included.
    Tensor trailing = Tensor::empty({2, 3 + r % 2, 4}, DType::f32);
    message = message_of([&] { group.all_gather(trailing); });
    EXPECT_WORKER(
        message.find("f32 [2, " + std::to_string(3 + r % 2) + ", 4]") != std::string::npos,
        message);
    EXPECT_WORKER(
        message.find("f32 [2, " + std::to_string(3 + (r + 1) % 2) + ", 4]") != std::string::npos,
        message);
    // Peers' dtype and shape are checked before data moves, even for all_reduce and broadcast.
    Tensor sized = zeros({r == 0 ? 4 : 5}, DType::f32);
    message = message_of([&] { group.all_reduce(sized); });
    EXPECT_WORKER(message.rfind("[all_reduce] rank " + std::to_string(r), 0) == 0, message);
    EXPECT_WORKER(message.find("f32 [4]") != std::string::npos, message);
    EXPECT_WORKER(message.find("f32 [5]") != std::string::npos, message);
    Tensor typed = zeros({3}, r == 0 ? DType::f64 : DType::f32);
    message = message_of([&] { group.broadcast(typed, 0); });
    EXPECT_WORKER(message.rfind("[broadcast]", 0) == 0, message);
    EXPECT_WORKER(message.find("f64 [3]") != std::string::npos, message);
    std::vector<Tensor> pieces;
    // Layouts new to both ranks (f64 [3] was reduce-scattered before: a rank
    // holding it would skip the wait, see CachedLayoutMeetingANewOneFailsNamingBoth).
    for (int j = 0; j < n; ++j) pieces.push_back(zeros({r == 1 ? 5 : 2}, DType::f64));
    message = message_of([&] { group.reduce_scatter(pieces); });
    EXPECT_WORKER(message.rfind("[reduce_scatter]", 0) == 0, message);
    // all_to_all pieces whose trailing dims differ between ranks.
    std::vector<Tensor> sent;
    for (int j = 0; j < n; ++j) sent.push_back(zeros({1, r == 1 ? 3 : 2}, DType::f32));
    message = message_of([&] { (void)group.all_to_all(sent); });
    EXPECT_WORKER(
        message.rfind("[all_to_all]", 0) == 0 && message.find("rank") != std::string::npos,
        message);
    // In shared memory, ranks in different collectives raise at once, each
    // naming both calls (over TCP they would wait out the timeout).
    if (auto* gloo = dynamic_cast<GlooGroup*>(&group); gloo->uses_shared_memory()) {
      Tensor both = zeros({2}, DType::f32);
      message = message_of([&] {
        if (r == 0) {
          group.all_reduce(both);
        } else {
          (void)group.all_gather(both);
        }
      });
      const std::string expected = r == 0 ? "calls all_reduce but rank 1 calls all_gather"
                                          : "calls all_gather but rank 0 calls all_reduce";
      EXPECT_WORKER(message.find(expected) != std::string::npos, message);
      // A barrier is a call like the others there.
      message = message_of([&] {
        if (r == 0) {
          group.barrier();
        } else {
          group.all_reduce(both);
        }
      });
      const std::string named =
          r == 0 ? "[barrier] rank 0 of " : "calls all_reduce but rank 0 calls barrier";
      EXPECT_WORKER(message.find(named) != std::string::npos, message);
      // Ranks that name different roots all raise, naming both.
      message = message_of([&] { group.broadcast(both, r == 0 ? 0 : 1); });
      EXPECT_WORKER(
          message.find(r == 0 ? "from rank 0 but rank 1 from rank 1"
                              : "from rank 1 but rank 0 from rank 0") != std::string::npos,
          message);
    }
    // The group still works after mismatches caught before any data moved.
    Tensor ok = Tensor::from_vector<int64_t>({1}, {1});
    group.all_reduce(ok);
    EXPECT_WORKER(ok.item<int64_t>() == n, ok.item<int64_t>());
    // send/recv: the sizes must agree; both sides name both.
    if (r < 2) {
      Tensor buffer = zeros({r == 0 ? 4 : 6}, DType::f32);
      message = message_of([&] {
        if (r == 0) group.send(buffer, 1, 9);
        if (r == 1) group.recv(buffer, 0, 9);
      });
      const char* op = r == 0 ? "[send]" : "[recv]";
      EXPECT_WORKER(message.rfind(op, 0) == 0, message);
      EXPECT_WORKER(message.find("(4 elements)") != std::string::npos, message);
      EXPECT_WORKER(message.find("(6 elements)") != std::string::npos, message);
    }
  }
  group.barrier();
}

// Data-parallel training of a small MLP, or rounds of boxing conversions, in
// which rank 1 is killed with SIGKILL at a fixed point of the third round.
void run_until_rank_1_is_killed(Group& group, const std::string& mode) {
  const Placement all = Placement::cpu(group.size());
  auto kill_rank_1 = [&](int round) {
    if (round == 2 && group.rank() == 1) ::kill(::getpid(), SIGKILL);
  };
  manual_seed(3);
  if (mode == "killed_in_dp_step") {
    auto model = std::make_shared<nn::Sequential>();
    model->push_back(std::make_shared<nn::Linear>(16, 32));
    model->push_back(std::make_shared<nn::ReLU>());
    model->push_back(std::make_shared<nn::Linear>(32, 4));
    global::parallelize(*model, all, {});
    optim::SGD sgd(model->parameters(), {.lr = 0.1});
    for (int step = 0; step < 5; ++step) {
      Tensor x = randn({12, 16}).to_global(all, Sbp::broadcast()).to_global(all, Sbp::split(0));
      Tensor y = randint(0, 4, {12}).to_global(all, Sbp::broadcast()).to_global(all, Sbp::split(0));
      sgd.zero_grad();
      Tensor loss = cross_entropy(model->forward(x), y);
      kill_rank_1(step);
      loss.backward();
      sgd.step();
    }
  } else {
    for (int round = 0; round < 5; ++round) {
      Tensor x = randn({12, 9}).to_global(all, Sbp::broadcast()).to_global(all, Sbp::split(0));
      Tensor gathered = x.to_global(all, Sbp::broadcast());  // all-gather
      Tensor partial = (gathered * 2.0).to_global(all, Sbp::partial_sum());
      Tensor scattered = partial.to_global(all, Sbp::split(0));  // reduce-scatter
      kill_rank_1(round);
      Tensor columns = scattered.to_global(all, Sbp::split(1));  // all-to-all
      (void)columns.to_local();
    }
  }
  std::fprintf(stderr, "rank %d: finished although rank 1 was killed\n", g_rank);
  std::_Exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "all";
  try {
    std::shared_ptr<Group> group = init_process_group();
    g_rank = group->rank();
    if (mode == "which") {
      // The mangled name contains the class name, e.g. "GlooGroup" or "MpiGroup".
      std::printf("rank %d of %d: %s\n", group->rank(), group->size(), typeid(*group).name());
      std::fflush(stdout);
      group->barrier();
      return 0;
    }
    if (mode == "leave_early") {
      group->barrier();
      if (group->rank() == group->size() - 1) return 0;
      Tensor t = Tensor::from_vector<float>({1.0f}, {1});
      group->all_reduce(t);
      std::fprintf(stderr, "rank %d: all_reduce finished although a peer left\n", g_rank);
      return 2;
    }
    if (mode == "die_early") {
      group->barrier();
      if (group->rank() == group->size() - 1) std::_Exit(3);
      Tensor t = Tensor::from_vector<float>({1.0f}, {1});
      group->all_reduce(t);
      std::fprintf(stderr, "rank %d: all_reduce finished although a peer died\n", g_rank);
      return 2;
    }
    if (mode == "die_later" || mode == "stall_later") {
      // As die_early and stall, after a first all_reduce has set up the
      // transport (shared memory between the ranks of one machine).
      Tensor first = Tensor::from_vector<float>({1.0f}, {1});
      group->all_reduce(first);
      group->barrier();
      if (group->rank() == group->size() - 1) {
        if (mode == "die_later") std::_Exit(3);
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        std::_Exit(0);
      }
      Tensor t = Tensor::from_vector<float>({1.0f}, {1});
      group->all_reduce(t);
      std::fprintf(stderr, "rank %d: all_reduce finished although a peer died\n", g_rank);
      return 2;
    }
    if (mode == "stall") {
      group->barrier();
      if (group->rank() == group->size() - 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        std::_Exit(0);
      }
      Tensor t = Tensor::from_vector<float>({1.0f}, {1});
      group->all_reduce(t);
      std::fprintf(stderr, "rank %d: all_reduce finished although a peer died\n", g_rank);
      return 2;
    }
    if (mode == "killed_in_dp_step" || mode == "killed_in_boxing") {
      run_until_rank_1_is_killed(*group, mode);
    }
    if (mode == "mismatch_cached") {
      Tensor t = zeros({3}, DType::f32);
      group->all_reduce(t);  // every rank checks f32 [3] once
      Tensor next = zeros({group->rank() == 1 ? 4 : 3}, DType::f32);
      group->all_reduce(next);
      std::fprintf(stderr, "rank %d: mismatched all_reduce finished\n", g_rank);
      return 2;
    }
    check_all_reduce<float>(*group);
    check_all_reduce<double>(*group);
    check_all_reduce<int64_t>(*group);
    check_all_reduce<int32_t>(*group);
    check_large_all_reduce(*group);
    if (auto* gloo = dynamic_cast<GlooGroup*>(group.get()); gloo != nullptr && group->size() > 1) {
      // Every rank runs on this machine: shared memory unless switched off.
      const char* setting = std::getenv("TESSERA_SHARED_MEMORY");
      const bool expected = setting == nullptr || std::string(setting) != "0";
      EXPECT_WORKER(gloo->uses_shared_memory() == expected, "shared memory ",
                    gloo->uses_shared_memory(), ", expected ", expected);
    }
    check_all_gather<float>(*group);
    check_all_gather<uint8_t>(*group);
    check_uneven(*group);
    check_reduce_scatter(*group);
    check_broadcast_p2p_barrier(*group);
    check_split(*group);
    check_errors(*group);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    std::fflush(stderr);
    // Skip destructors: a group whose peer vanished must not block the exit.
    std::_Exit(1);
  }
  return 0;
}
