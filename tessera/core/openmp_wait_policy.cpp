// A library of its own (libtessera_openmp_env, see CMakeLists.txt), needed
// last by libtessera: its constructor must run before libgomp's, which reads
// OMP_WAIT_POLICY once, and the loader initialises needed libraries from the
// last one back (each after its own dependencies).
//
// libgomp's default wait policy has each OpenMP thread spin for about 3 ms
// (300,000 spins) after every parallel region, and the team's barrier spins
// too. oneDNN's convolutions and parallel_for run on that team; when
// anything else wants a core (another process, a communication thread), a
// spinning thread holds it and the step time jumps (2 threads, ResNet-8 on a
// busy machine: 0.52-0.90 s a step spinning, 0.15-0.20 s passive). Never
// spinning (OMP_WAIT_POLICY=PASSIVE) costs a futex wake-up per region
// instead: +17% on a 1M-element add. A short spin, 1,000 spins (about
// 10 us, bridging the gap between consecutive ops), keeps both: measured in
// docs/design/batch_norm.md. A user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT
// is kept.

#include <cstdlib>

namespace {

[[gnu::constructor]] void short_openmp_spin() {
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    ::setenv("GOMP_SPINCOUNT", "1000", 0);
  }
}

}  // namespace
