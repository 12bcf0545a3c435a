#pragma once

#include <cstdint>
#include <functional>

namespace tessera {

// Number of threads parallel_for uses: TESSERA_NUM_THREADS if set, else the
// core count divided by the ranks sharing this machine (LOCAL_WORLD_SIZE).
// OpenBLAS itself runs single-threaded: large products are split over these
// threads (backend/cpu/gemm.cpp), so no other threads compete for the cores.
int num_threads();
// Changes the thread count for later parallel_for calls (products included).
void set_num_threads(int count);

// Runs fn(chunk_begin, chunk_end) over [begin, end) split into chunks of at
// least `grain` iterations (a few per thread, handed out dynamically). Ranges smaller than
// `grain`, calls from inside a worker, and calls while another thread holds
// the pool run inline on the calling thread. Exceptions from chunks are
// rethrown on the caller.
template <typename Fn>
void parallel_for(int64_t begin, int64_t end, int64_t grain, Fn&& fn);

namespace detail {
// parallel_for's split across the threads.
void parallel_for_split(int64_t begin, int64_t end, int64_t grain,
                        const std::function<void(int64_t, int64_t)>& fn);
}  // namespace detail

// A range of one chunk runs here without building a std::function, so a
// small op's loop costs a call, not an allocation.
template <typename Fn>
void parallel_for(int64_t begin, int64_t end, int64_t grain, Fn&& fn) {
  if (end - begin <= (grain < 1 ? 1 : grain)) {
    if (end > begin) fn(begin, end);
    return;
  }
  detail::parallel_for_split(begin, end, grain,
                             std::function<void(int64_t, int64_t)>(std::ref(fn)));
}

// Elements per chunk that make a simple elementwise loop worth splitting.
constexpr int64_t kElementwiseGrain = 32768;

}  // namespace tessera
