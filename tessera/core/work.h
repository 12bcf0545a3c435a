#pragma once

// Work that finishes on another thread (a collective in flight).

#include <exception>
#include <memory>

namespace tessera {

// A handle to work started elsewhere. wait() blocks until it has finished
// and rethrows its error (every call does, until the error is handled).
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
};

// Work that is already over when it is handed out (it ran on the caller's
// thread); `error` is what it threw, if anything.
std::shared_ptr<Work> completed_work(std::exception_ptr error = nullptr);

}  // namespace tessera
