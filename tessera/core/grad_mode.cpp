#include "tessera/core/grad_mode.h"

namespace tessera {

namespace {
thread_local bool grad_mode_enabled = true;
}

bool grad_enabled() { return grad_mode_enabled; }
void set_grad_enabled(bool enabled) { grad_mode_enabled = enabled; }

}  // namespace tessera
