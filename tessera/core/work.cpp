#include "tessera/core/work.h"

#include "tessera/core/work_queue.h"

namespace tessera {

namespace {

[[gnu::tls_model("initial-exec")]] thread_local bool queue_thread = false;

class CompletedWork final : public Work {
 public:
  explicit CompletedWork(std::exception_ptr error) : error_(std::move(error)) {}
  void wait() override {
    if (error_) std::rethrow_exception(error_);
  }
  bool is_completed() override { return true; }

 private:
  std::exception_ptr error_;
};

}  // namespace

std::shared_ptr<Work> completed_work(std::exception_ptr error) {
  return std::make_shared<CompletedWork>(std::move(error));
}

// A queued task and its completion, shared by the queue and the Work.
struct WorkQueue::Task final : Work {
  std::function<void()> body;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::exception_ptr error;

  void wait() override {
    std::unique_lock<std::mutex> lock(mutex);
    finished.wait(lock, [this] { return done; });
    if (error) std::rethrow_exception(error);
  }
  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mutex);
    return done;
  }
};

WorkQueue::WorkQueue(std::function<void()> on_start)
    : thread_([this, on_start = std::move(on_start)] { run(on_start); }) {}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

std::shared_ptr<Work> WorkQueue::submit(
    std::function<void()> task,
    const std::function<void(const std::shared_ptr<Work>&)>& on_queued) {
  auto entry = std::make_shared<Task>();
  entry->body = std::move(task);
  if (on_queued) on_queued(entry);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(entry);
  }
  ready_.notify_one();
  return entry;
}

void WorkQueue::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

bool WorkQueue::on_any_queue_thread() {
  return queue_thread;
}

void WorkQueue::run(const std::function<void()>& on_start) {
  queue_thread = true;
  if (on_start) on_start();
  for (;;) {
    std::shared_ptr<Task> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    std::exception_ptr error;
    try {
      task->body();
    } catch (...) {
      error = std::current_exception();
    }
    task->body = nullptr;  // what the task holds goes now, not when the Work does
    {
      std::lock_guard<std::mutex> lock(task->mutex);
      task->error = error;
      task->done = true;
    }
    task->finished.notify_all();
    std::lock_guard<std::mutex> lock(mutex_);
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace tessera
