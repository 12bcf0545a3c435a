#include "tessera/data/dataloader.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <system_error>
#include <thread>

#include "tessera/core/rng.h"

namespace tessera::data {

namespace {
constexpr int kMaxWorkers = 256;
}  // namespace

// One pass over the data. Worker w loads batches w, w + W, w + 2W, ... in
// order and keeps at most `prefetch` of them waiting; the consumer takes
// batch k from whichever worker owns it, so batches come out in order. The
// consumer (one thread) owns the Run through shared_ptrs; workers only
// borrow it, and the destructor joins them.
class DataLoader::Run {
 public:
  Run(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> order, int64_t batch_size,
      int64_t num_batches, int num_workers, int prefetch)
      : dataset_(std::move(dataset)),
        order_(std::move(order)),
        batch_size_(batch_size),
        num_batches_(num_batches),
        num_workers_(static_cast<int>(std::min<int64_t>(num_workers, num_batches))),
        prefetch_(prefetch),
        pending_(static_cast<size_t>(num_workers_), 0) {
    try {
      for (int worker = 0; worker < num_workers_; ++worker) {
        threads_.emplace_back([this, worker] { work(worker); });
      }
    } catch (const std::system_error& error) {
      stop();
      TESSERA_FAIL("[DataLoader] could not start ", num_workers_, " worker threads (", error.what(),
                   "); use fewer num_workers, or 0 to load on this thread");
    }
  }

  ~Run() { stop(); }

  // Loads (or waits for) the next batch; false after the last one. Rethrows
  // a loading error, after which the pass is over.
  bool next() {
    if (done_) return false;
    if (next_batch_ >= num_batches_) {
      stop();
      return false;
    }
    const int64_t batch = next_batch_++;
    if (num_workers_ == 0) {
      try {
        current_ = dataset_->get_batch(batch_indices(batch));
      } catch (...) {
        done_ = true;
        throw;
      }
      return true;
    }
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_cv_.wait(lock, [&] { return ready_.count(batch) != 0; });
      auto it = ready_.find(batch);
      slot = std::move(it->second);
      ready_.erase(it);
      --pending_[static_cast<size_t>(batch % num_workers_)];
    }
    space_cv_.notify_all();
    if (slot.error) {
      stop();
      std::rethrow_exception(slot.error);
    }
    current_ = std::move(slot.example);
    return true;
  }

  // Stops the workers (each finishes the batch in hand) and joins them.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    space_cv_.notify_all();
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
    threads_.clear();
    done_ = true;
  }

  bool done() const { return done_; }
  const Example& current() const { return current_; }

 private:
  struct Slot {
    Example example;
    std::exception_ptr error;
  };

  std::vector<int64_t> batch_indices(int64_t batch) const {
    const int64_t begin = batch * batch_size_;
    const int64_t end = std::min<int64_t>(begin + batch_size_, static_cast<int64_t>(order_.size()));
    return std::vector<int64_t>(order_.begin() + begin, order_.begin() + end);
  }

  void work(int worker) {
    const auto slot_index = static_cast<size_t>(worker);
    for (int64_t batch = worker; batch < num_batches_; batch += num_workers_) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        space_cv_.wait(lock, [&] { return stopping_ || pending_[slot_index] < prefetch_; });
        if (stopping_) return;
      }
      Slot slot;
      try {
        slot.example = dataset_->get_batch(batch_indices(batch));
      } catch (...) {
        slot.error = std::current_exception();
      }
      const bool failed = slot.error != nullptr;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.emplace(batch, std::move(slot));
        ++pending_[slot_index];
      }
      ready_cv_.notify_one();
      // Later batches of this worker would never be consumed: the consumer
      // stops at this one.
      if (failed) return;
    }
  }

  const std::shared_ptr<const Dataset> dataset_;
  const std::vector<int64_t> order_;
  const int64_t batch_size_;
  const int64_t num_batches_;
  const int num_workers_;
  const int prefetch_;

  // Consumer side.
  int64_t next_batch_ = 0;
  Example current_;
  bool done_ = false;

  // Shared with the workers, guarded by mutex_.
  std::mutex mutex_;
  std::condition_variable ready_cv_;  // the consumer waits for its batch
  std::condition_variable space_cv_;  // workers wait for room to prefetch
  std::map<int64_t, Slot> ready_;
  std::vector<int> pending_;  // per worker: batches loaded and not yet consumed
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  TESSERA_CHECK(dataset_ != nullptr, "[DataLoader] needs a dataset, got a null pointer");
  TESSERA_CHECK(options_.batch_size >= 1, "[DataLoader] batch_size must be >= 1, got ",
                options_.batch_size);
  TESSERA_CHECK(options_.num_workers >= 0 && options_.num_workers <= kMaxWorkers,
                "[DataLoader] num_workers must be in [0, ", kMaxWorkers, "], got ",
                options_.num_workers, " (0 loads batches on the calling thread)");
  TESSERA_CHECK(options_.prefetch >= 1, "[DataLoader] prefetch must be >= 1 batch per worker, got ",
                options_.prefetch);
  TESSERA_CHECK(!(options_.sampler && options_.shuffle),
                "[DataLoader] sampler and shuffle=true are mutually exclusive; use a "
                "RandomSampler (or a DistributedSampler with shuffle) instead");
}

void DataLoader::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  if (options_.sampler) options_.sampler->set_epoch(epoch);
}

DataLoader::~DataLoader() {
  // Joins the workers now even if an iterator outlives the loader (it then reads as ended).
  if (std::shared_ptr<Run> run = active_.lock()) run->stop();
}

int64_t DataLoader::size() const {
  const int64_t count = options_.sampler ? options_.sampler->size() : dataset_->size();
  const int64_t full = count / options_.batch_size;
  const bool partial = count % options_.batch_size != 0;
  return full + (partial && !options_.drop_last ? 1 : 0);
}

std::vector<int64_t> DataLoader::indices() const {
  if (options_.sampler) return options_.sampler->indices();
  const int64_t count = dataset_->size();
  if (options_.shuffle) return permutation(count, options_.seed, epoch_);
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

DataLoader::Iterator DataLoader::begin() {
  if (std::shared_ptr<Run> previous = active_.lock()) previous->stop();
  auto run = std::make_shared<Run>(dataset_, indices(), options_.batch_size, size(),
                                   options_.num_workers, options_.prefetch);
  active_ = run;
  run->next();
  return Iterator(std::move(run));
}

std::vector<int64_t> DataLoader::permutation(int64_t n, uint64_t seed, int64_t epoch) {
  TESSERA_CHECK(n >= 0, "[DataLoader::permutation] n must be >= 0, got ", n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  for (int64_t i = n - 1; i > 0; --i) {
    const auto words = Philox::block(seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(i));
    const uint64_t random = (static_cast<uint64_t>(words[0]) << 32) | words[1];
    // Maps 64 random bits onto [0, i] by multiply-shift; the bias is below 2^-40 for any
    // dataset that fits in memory.
    const auto j = static_cast<int64_t>(
        (static_cast<unsigned __int128>(random) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

DataLoader::Iterator::reference DataLoader::Iterator::operator*() const {
  TESSERA_CHECK(!at_end(), "[DataLoader] dereferenced an iterator that is past the end");
  return run_->current();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  TESSERA_CHECK(!at_end(), "[DataLoader] incremented an iterator that is past the end");
  run_->next();
  return *this;
}

bool DataLoader::Iterator::at_end() const {
  return run_ == nullptr || run_->done();
}

bool DataLoader::Iterator::operator==(const Iterator& other) const {
  const bool end = at_end();
  return end == other.at_end() && (end || run_ == other.run_);
}

}  // namespace tessera::data
