#pragma once

// Memory lent to the kernels' workspaces on one thread. A graph executor
// plans each kernel's scratch memory in its arena (once a run has shown how
// much the kernel takes) and lends that place while the kernel runs:
//
//   LentWorkspace lent(arena_bytes + offset, planned_bytes);
//   kernel(context);            // its Workspace buffers come from the region
//   learned = lent.used();      // what it asked for, planned or not
//
// Buffers that do not fit come from the allocator as usual. Scopes nest: an
// inner one lends its own region until it ends.

#include <cstddef>

namespace tessera {

// Each buffer taken from a lent region starts at a multiple of this, as
// every tensor in a graph's arena does.
constexpr size_t kLentAlignment = 64;

class LentWorkspace {
 public:
  LentWorkspace(void* region, size_t bytes);
  ~LentWorkspace();
  LentWorkspace(const LentWorkspace&) = delete;
  LentWorkspace& operator=(const LentWorkspace&) = delete;

  // The bytes the workspaces asked for on this thread while this scope was
  // innermost, each buffer rounded up to kLentAlignment (the region size
  // that would have held them all).
  size_t used() const { return used_; }

 private:
  friend class Workspace;
  // A buffer of `bytes` from the region, or null when it does not fit;
  // counted in used() either way.
  void* take(size_t bytes);

  char* region_;
  size_t bytes_;
  size_t used_ = 0;
  LentWorkspace* outer_;
};

}  // namespace tessera
