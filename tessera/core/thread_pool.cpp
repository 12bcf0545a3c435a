#include "tessera/core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tessera/core/work_queue.h"

#ifdef TESSERA_OPENMP
#include <omp.h>
#endif

namespace tessera {

namespace {

// TESSERA_NUM_THREADS if set; else the cores shared among the ranks on this
// machine (LOCAL_WORLD_SIZE, set by tessera-run, or mpirun's
// OMPI_COMM_WORLD_LOCAL_SIZE), as torchrun does: ranks that each used every
// core would spin against each other's communication (measured: a 1 MiB
// all_reduce on 2 ranks took 11 ms instead of 0.8 ms with Gloo, 24 ms
// instead of 0.3 ms with MPI).
int default_thread_count() {
  if (const char* env = std::getenv("TESSERA_NUM_THREADS")) {
    int value = std::atoi(env);
    if (value > 0) return value;
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int local_ranks = 1;
  for (const char* name : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
    if (const char* env = std::getenv(name)) {
      local_ranks = std::max(1, std::atoi(env));
      break;
    }
  }
  return std::max(1, cores / local_ranks);
}

#ifndef TESSERA_OPENMP
[[gnu::tls_model("initial-exec")]] thread_local bool inside_worker = false;

// Without OpenMP: our own pool. Workers sleep on a condition variable between
// jobs (no spinning, so they never compete with other threads for the
// cores). A job is a chunked range; each participant claims chunk indices
// from an atomic counter.
class ThreadPool {
 public:
  explicit ThreadPool(int count) { resize(count); }
  ~ThreadPool() { stop_workers(); }

  int size() const { return thread_count_; }

  void resize(int count) {
    stop_workers();
    thread_count_ = std::max(1, count);
    stopping_ = false;
    for (int i = 1; i < thread_count_; ++i) workers_.emplace_back([this] { worker_loop(); });
  }

  // Returns false if the pool is busy (caller then runs inline).
  bool run(int64_t begin, int64_t end, int64_t chunks,
           const std::function<void(int64_t, int64_t)>& fn) {
    std::unique_lock<std::mutex> busy(busy_mutex_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_fn_ = &fn;
      job_begin_ = begin;
      job_end_ = end;
      job_chunks_ = chunks;
      next_chunk_.store(0);
      pending_ = static_cast<int>(workers_.size());
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    inside_worker = true;  // nested parallel_for on the caller runs inline
    work_on_job();
    inside_worker = false;
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void work_on_job() {
    int64_t length = job_end_ - job_begin_;
    for (;;) {
      int64_t chunk = next_chunk_.fetch_add(1);
      if (chunk >= job_chunks_) break;
      int64_t lo = job_begin_ + length * chunk / job_chunks_;
      int64_t hi = job_begin_ + length * (chunk + 1) / job_chunks_;
      try {
        (*job_fn_)(lo, hi);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  void worker_loop() {
    inside_worker = true;
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
      }
      work_on_job();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
    workers_.clear();
  }

  int thread_count_ = 1;
  std::vector<std::thread> workers_;
  std::mutex busy_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  bool stopping_ = false;
  uint64_t generation_ = 0;
  const std::function<void(int64_t, int64_t)>* job_fn_ = nullptr;
  int64_t job_begin_ = 0, job_end_ = 0, job_chunks_ = 0;
  std::atomic<int64_t> next_chunk_{0};
  int pending_ = 0;
  std::exception_ptr error_;
};

ThreadPool& pool() {
  static ThreadPool* instance = new ThreadPool(default_thread_count());
  return *instance;
}

#else  // TESSERA_OPENMP
// With oneDNN in the build, its OpenMP team runs the convolutions, and an
// OpenMP worker spins for a while after every parallel region. A second pool
// of our own would then fight those spinning threads for the cores (measured:
// our workers got a fifth of a core during a CNN step). So parallel_for runs
// on the same OpenMP team, as ATen's does: one set of threads for all work.
int& openmp_thread_count() {
  static int count = default_thread_count();
  return count;
}

void run_chunks(int64_t begin, int64_t length, int64_t chunks, int threads,
                const std::function<void(int64_t, int64_t)>& fn) {
  std::atomic<int64_t> next_chunk{0};
  std::mutex error_mutex;
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    for (;;) {
      const int64_t chunk = next_chunk.fetch_add(1);
      if (chunk >= chunks) break;
      try {
        fn(begin + length * chunk / chunks, begin + length * (chunk + 1) / chunks);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}
#endif

}  // namespace

#ifdef TESSERA_OPENMP

int num_threads() { return openmp_thread_count(); }

void set_num_threads(int count) {
  openmp_thread_count() = std::max(1, count);
}

void detail::parallel_for_split(int64_t begin, int64_t end, int64_t grain,
                                const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t length = end - begin;
  if (length <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int threads = num_threads();
  if (WorkQueue::on_any_queue_thread()) {  // see below
    fn(begin, end);
    return;
  }
  const int64_t chunks = std::min<int64_t>(4 * threads, (length + grain - 1) / grain);
  if (chunks <= 1 || threads == 1 || omp_in_parallel()) {
    fn(begin, end);
    return;
  }
  run_chunks(begin, length, chunks, threads, fn);
}

#else

int num_threads() { return pool().size(); }

void set_num_threads(int count) {
  pool().resize(count);
}

void detail::parallel_for_split(int64_t begin, int64_t end, int64_t grain,
                                const std::function<void(int64_t, int64_t)>& fn) {
  int64_t length = end - begin;
  if (length <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  // A communication thread's host work (a collective's copies) stays on it:
  // it is small, the pool belongs to the compute, and memory its collective
  // still writes may be read there without waiting for itself.
  if (length <= grain || inside_worker || WorkQueue::on_any_queue_thread()) {
    fn(begin, end);
    return;
  }
  ThreadPool& threads = pool();
  // A few chunks per thread, claimed dynamically, so a worker that wakes late
  // on a busy machine does not hold up the whole op.
  int64_t chunks = std::min<int64_t>(4 * threads.size(), (length + grain - 1) / grain);
  if (chunks <= 1 || !threads.run(begin, end, chunks, fn)) fn(begin, end);
}

#endif

}  // namespace tessera
