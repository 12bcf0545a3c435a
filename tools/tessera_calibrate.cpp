// tessera-calibrate: measures this machine for the planner's cost model
// (DESIGN §8) and writes a profile (JSON, global::CostModel::from_json).
//
//   tessera-calibrate --out profile.json                  one process
//   tessera-run -n 4 tessera-calibrate --out profile.json  as a job of 4 ranks
//
// Every rank measures at once, so ranks that share cores are measured
// sharing them:
//   - matmul, convolution and elementwise ops over a range of sizes, each
//     fitted as seconds = per call + max(FLOPs / rate, bytes / rate), on
//     operands out of cache, as a step's ops mostly find them;
//   - all-reduce, all-gather, reduce-scatter and all-to-all of 16 KiB to 16 MiB on
//     groups of every size that divides the job (consecutive ranks, all
//     groups at once, as a mesh axis runs them), fitted per group size as
//     seconds = alpha + link bytes * beta (the ring's bytes on the busiest
//     link, global::CostModel::link_bytes);
//   - what an op call costs on global tensors beyond the local op, and the
//     fixed cost of boxing a small tensor (the floors of per-call cost and
//     alpha: a planned step is made of such calls and boxings).
// Rank 0 writes the profile; it names the job it was measured on.

#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tessera/global/cost_model.h"
#include "tessera/io/atomic_file_writer.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

struct Options {
  std::string out = "profile.json";
  int repetitions = 7;
  bool quick = false;  // fewer sizes, for tests
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "tessera-calibrate: %s\n"
               "usage: tessera-calibrate [--out FILE] [--repetitions N] [--quick]\n"
               "       tessera-run -n RANKS tessera-calibrate [--out FILE]\n",
               problem.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      options.quick = true;
    } else if ((arg == "--out" || arg == "--repetitions") && i + 1 < argc) {
      const std::string value = argv[++i];
      if (arg == "--out") {
        options.out = value;
      } else {
        char* end = nullptr;
        const long count = std::strtol(value.c_str(), &end, 10);
        if (*end != '\0' || count < 1 || count > 1000) {
          usage("--repetitions needs a count from 1 to 1000, got '" + value + "'");
        }
        options.repetitions = static_cast<int>(count);
      }
    } else if (arg == "--help" || arg == "-h") {
      usage("measures this machine for the planner");
    } else {
      usage("unknown argument '" + arg + "'");
    }
  }
  return options;
}

// Bytes of the largest cache (the last level's; 32 MiB where the system
// does not say).
double last_level_cache_bytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const long largest = std::max(l3, l2);
  return largest > 0 ? static_cast<double>(largest) : 32.0 * (1 << 20);
}

// Seconds per call of fn: the median over `repetitions` timings, each of
// as many calls as take about 10 ms (the same count on every rank), from
// one barrier to the end of a second one, the slowest rank's. Ranks that
// share cores must be measured sharing them: a single short call can end
// within one time slice before a peer is even scheduled, and a timer
// started as each rank leaves the barrier would then see a core of its own.
template <typename Fn>
double median_seconds(distributed::Group& group, int repetitions, Fn&& fn) {
  using clock = std::chrono::steady_clock;
  fn();
  const auto first = clock::now();
  fn();
  const double once = std::chrono::duration<double>(clock::now() - first).count();
  Tensor calls =
      Tensor::from_vector(std::vector<double>{std::ceil(10e-3 / std::max(once, 1e-7))}, {1});
  group.all_reduce(calls, distributed::ReduceOp::max);
  const int count = static_cast<int>(std::clamp(calls.item<double>(), 1.0, 10000.0));
  std::vector<double> times;
  for (int i = 0; i < repetitions; ++i) {
    group.barrier();
    const auto start = clock::now();
    for (int call = 0; call < count; ++call) fn();
    group.barrier();
    times.push_back(std::chrono::duration<double>(clock::now() - start).count() / count);
  }
  Tensor slowest = Tensor::from_vector(times, {static_cast<int64_t>(times.size())});
  group.all_reduce(slowest, distributed::ReduceOp::max);
  std::vector<double> maxima = slowest.to_vector<double>();
  std::sort(maxima.begin(), maxima.end());
  return maxima[maxima.size() / 2];
}

// Seconds per call of `op` on an operand set (`make` returns one, of
// `bytes_per_set` bytes), cycling through copies of it: enough that a set
// has left the caches when its turn comes again. A training step's ops
// mostly read what was written long before (the forward pass's
// activations, read again in the backward; the weights, once per step), so
// an op timed on operands it just read (in cache) runs up to several times
// faster than it does in the step.
template <typename Make, typename Op>
double cold_median_seconds(distributed::Group& group, int repetitions, double bytes_per_set,
                           Make&& make, Op&& op) {
  const auto count = static_cast<size_t>(
      std::clamp(std::ceil(2 * last_level_cache_bytes() / bytes_per_set), 1.0, 4096.0));
  std::vector<decltype(make())> sets{make()};
  while (sets.size() < count) {  // copies: cheaper than drawing numbers again
    auto copy = sets.front();
    for (Tensor& tensor : copy) tensor = tensor.clone();
    sets.push_back(std::move(copy));
  }
  size_t next = 0;
  return median_seconds(group, repetitions, [&] { op(sets[next++ % sets.size()]); });
}

// Least squares of t = a + b * x, weighted by 1 / t^2 (relative error,
// for ops: small and large calls alike) or by 1 / t (collectives: large
// messages, which a step waits for, count more, without drowning the
// small ones); a and b kept from going below zero.
std::pair<double, double> fit_line(const std::vector<double>& x, const std::vector<double>& t,
                                   bool relative = true) {
  double sw = 0, sx = 0, st = 0, sxx = 0, sxt = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double w = relative ? 1.0 / (t[i] * t[i]) : 1.0 / t[i];
    sw += w;
    sx += w * x[i];
    st += w * t[i];
    sxx += w * x[i] * x[i];
    sxt += w * x[i] * t[i];
  }
  const double det = sw * sxx - sx * sx;
  double b = det > 0 ? (sw * sxt - sx * st) / det : 0;
  double a = (st - b * sx) / sw;
  if (b <= 0) {  // no measurable slope: take the largest case's rate
    b = t.back() / x.back();
    a = 0;
  }
  if (a < 0) {  // through the origin
    a = 0;
    b = sxt / sxx;
  }
  return {a, b};
}

global::ComputeModel fit_compute(const std::vector<double>& work, const std::vector<double>& times,
                                 bool flops, const global::ComputeModel& base) {
  auto [per_call, seconds_per_unit] = fit_line(work, times);
  global::ComputeModel rates = base;
  rates.seconds_per_call = per_call;
  (flops ? rates.flops_per_second : rates.bytes_per_second) = 1.0 / seconds_per_unit;
  return rates;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    std::shared_ptr<distributed::Group> world = distributed::init_process_group();
    const int rank = world->rank();
    const int ranks = world->size();
    const int reps = options.repetitions;
    global::CostModel model;

    // Elementwise: c = a + b reads two arrays and writes one.
    std::vector<double> bytes, times;
    for (int64_t n : options.quick ? std::vector<int64_t>{1 << 12, 1 << 18}
                                   : std::vector<int64_t>{1 << 10, 1 << 14, 1 << 18, 1 << 22}) {
      times.push_back(cold_median_seconds(
          *world, reps, 3.0 * 4.0 * static_cast<double>(n),
          [&] {
            return std::array{randn({n}), randn({n})};
          },
          [](const auto& set) { (void)add(set[0], set[1]); }));
      bytes.push_back(3.0 * 4.0 * static_cast<double>(n));
    }
    global::ComputeModel elementwise = fit_compute(bytes, times, false, global::ComputeModel{});
    // Matmul: square and skinny products (a batch of rows against a weight).
    std::vector<double> flops;
    times.clear();
    std::vector<std::array<int64_t, 3>> shapes =
        options.quick ? std::vector<std::array<int64_t, 3>>{{64, 64, 64}, {256, 256, 256}}
                      : std::vector<std::array<int64_t, 3>>{{32, 64, 64},      {128, 256, 256},
                                                            {512, 512, 512},   {64, 1024, 1024},
                                                            {1024, 784, 1024}, {2048, 1024, 1024}};
    for (const auto& [m, k, n] : shapes) {
      times.push_back(cold_median_seconds(
          *world, reps, 4.0 * static_cast<double>(m * k + k * n + m * n),
          [&] {
            return std::array{randn({m, k}), randn({k, n})};
          },
          [](const auto& set) { (void)matmul(set[0], set[1]); }));
      flops.push_back(2.0 * static_cast<double>(m * k * n));
    }
    global::ComputeModel gemm = fit_compute(flops, times, true, elementwise);
    // Convolution: 3x3, same padding.
    flops.clear();
    times.clear();
    for (const auto& [batch, channels, size] :
         options.quick
             ? std::vector<std::array<int64_t, 3>>{{4, 8, 16}}
             : std::vector<std::array<int64_t, 3>>{{8, 16, 28}, {32, 32, 28}, {64, 64, 14}}) {
      times.push_back(cold_median_seconds(
          *world, reps,
          4.0 * static_cast<double>(2 * batch * channels * size * size + channels * channels * 9),
          [&] {
            return std::array{randn({batch, channels, size, size}),
                              randn({channels, channels, 3, 3})};
          },
          [](const auto& set) { (void)conv2d(set[0], set[1], {}, 1, 1); }));
      flops.push_back(2.0 * static_cast<double>(batch * channels * size * size * channels * 9));
    }
    global::ComputeModel convolution = fit_compute(flops, times, true, elementwise);
    // What a call costs on global tensors beyond the local op (the layout
    // decision, wrapping the shards): a planned step is made of such calls.
    const Placement mesh = Placement::cpu(ranks);
    const NdSbp broadcast(Sbp::broadcast());
    Tensor small_a = randn({16}).to_global(mesh, broadcast);
    Tensor small_b = randn({16}).to_global(mesh, broadcast);
    const double global_call =
        median_seconds(*world, 3 * reps, [&] { (void)add(small_a, small_b); });
    for (global::ComputeModel* rates : {&elementwise, &gemm, &convolution}) {
      rates->seconds_per_call = std::max(rates->seconds_per_call, global_call);
    }
    // The fixed cost of boxing a small tensor (all-gather of S(0) to B),
    // dispatch and plan included: the alpha a plan's boxing pays.
    Tensor split = randn({16 * static_cast<int64_t>(ranks)})
                       .to_global(mesh, broadcast)
                       .to_global(mesh, NdSbp(Sbp::split(0)));
    const double small_boxing =
        ranks > 1
            ? median_seconds(*world, 3 * reps, [&] { (void)split.to_global(mesh, broadcast); })
            : 0.0;
    // Ops the planner prices by FLOPs alone get the matmul rate's tenth (a
    // loop, not a tuned kernel); by bytes, elementwise's.
    global::ComputeModel other = elementwise;
    other.flops_per_second = gemm.flops_per_second / 10;
    model.set_compute(other);
    model.set_compute(OpKind::matmul, gemm);
    model.set_compute(OpKind::convolution, convolution);

    // Collectives on groups of each size that divides the job.
    for (int size = 2; size <= ranks; ++size) {
      if (ranks % size != 0) continue;
      std::vector<int> members;
      for (int r = rank / size * size; r < rank / size * size + size; ++r) members.push_back(r);
      std::shared_ptr<distributed::Group> group = size == ranks ? world : world->split(members);
      // Each collective gets a fit of its own (their transports and
      // algorithms differ), and all of them together one for the rest.
      using global::Collective;
      const Collective kinds[] = {Collective::all_reduce, Collective::all_gather,
                                  Collective::reduce_scatter, Collective::all_to_all};
      std::map<Collective, std::pair<std::vector<double>, std::vector<double>>> samples;
      std::vector<double> link, seconds;
      for (int64_t kib : options.quick ? std::vector<int64_t>{16, 1024}
                                       : std::vector<int64_t>{16, 256, 1024, 4096, 16384}) {
        const int64_t count = kib * 1024 / 4;
        const double payload = static_cast<double>(count) * 4;
        Tensor input = full({count}, 1.0);
        std::vector<Tensor> pieces;
        for (int r = 0; r < size; ++r) pieces.push_back(full({count / size}, 1.0));
        for (Collective kind : kinds) {
          double taken = 0, handed = payload;
          if (kind == Collective::all_reduce) {
            taken = median_seconds(*world, reps, [&] {
              Tensor buffer = input.clone();
              group->all_reduce(buffer);
            });
          } else if (kind == Collective::all_gather) {
            // Boxing gathers pieces that may differ in length.
            taken =
                median_seconds(*world, reps, [&] { (void)group->all_gather_uneven(pieces[0]); });
            handed = payload / size;
          } else if (kind == Collective::reduce_scatter) {
            taken = median_seconds(*world, reps, [&] { (void)group->reduce_scatter(pieces); });
          } else {
            // Boxing between splits (S(i) to S(j)) exchanges pieces.
            taken = median_seconds(*world, reps, [&] { (void)group->all_to_all(pieces); });
          }
          const double bytes = global::CostModel::link_bytes(kind, handed, size);
          samples[kind].first.push_back(bytes);
          samples[kind].second.push_back(taken);
          link.push_back(bytes);
          seconds.push_back(taken);
        }
      }
      auto set = [&](const std::vector<double>& x, const std::vector<double>& y,
                     std::optional<Collective> kind) {
        auto [alpha, beta] = fit_line(x, y, /*relative=*/false);
        model.set_link(size, global::LinkModel{std::max(alpha, small_boxing), beta}, kind);
      };
      set(link, seconds, std::nullopt);
      for (Collective kind : kinds) set(samples[kind].first, samples[kind].second, kind);
    }

    struct sysinfo info {};
    if (sysinfo(&info) == 0) {
      model.memory_bytes = static_cast<double>(info.totalram) * info.mem_unit / ranks;
    }
    model.set_ranks_per_node(ranks);
    // Ranks that share the cores have none to spare for a collective running
    // beside the backward pass: its time adds to the step.
    model.overlaps_communication =
        ranks < static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    model.name = "this machine, " + std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks");
    model.sources = "measured by tessera-calibrate";
    if (rank == 0) {
      const std::string text = model.to_json();
      io::AtomicFileWriter file(options.out, "tessera-calibrate");
      file.write(text.data(), text.size());
      file.commit();
      std::printf("tessera-calibrate: wrote %s\n%s", options.out.c_str(), text.c_str());
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tessera-calibrate: %s\n", error.what());
    return 1;
  }
  return 0;
}
