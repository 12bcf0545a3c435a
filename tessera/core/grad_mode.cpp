#include "tessera/core/grad_mode.h"

namespace tessera {

namespace {
// Read on every op call: initial-exec is one load from the thread pointer
// (the libraries are loaded with the program, not opened later).
[[gnu::tls_model("initial-exec")]] thread_local bool grad_mode_enabled = true;
}

bool grad_enabled() { return grad_mode_enabled; }
void set_grad_enabled(bool enabled) { grad_mode_enabled = enabled; }

}  // namespace tessera
