#pragma once

// A thread that runs host work in order, like a CUDA stream: the queue a
// process group runs its asynchronous collectives on.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "tessera/core/work.h"

namespace tessera {

// One thread that runs tasks one at a time, in the order they were
// submitted. Destroying the queue runs what is left, then joins.
class WorkQueue {
 public:
  // `on_start` runs first on the queue's thread (thread-local settings).
  explicit WorkQueue(std::function<void()> on_start = {});
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `task`; its Work finishes when the task has run. `on_queued`
  // gets the Work before the task can start (to mark what it writes).
  std::shared_ptr<Work> submit(
      std::function<void()> task,
      const std::function<void(const std::shared_ptr<Work>&)>& on_queued = {});
  // Blocks until every task submitted so far has run. Errors stay with
  // their Work.
  void drain();
  // Whether the caller is this queue's own thread.
  bool on_queue_thread() const { return std::this_thread::get_id() == thread_.get_id(); }
  // Whether the caller is the thread of any WorkQueue: work there runs in
  // queue order, so it never waits for other queued work.
  static bool on_any_queue_thread();

 private:
  struct Task;
  void run(const std::function<void()>& on_start);

  std::mutex mutex_;
  std::condition_variable ready_, idle_;
  std::deque<std::shared_ptr<Task>> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tessera
