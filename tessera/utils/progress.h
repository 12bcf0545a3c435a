#pragma once

// A one-line live progress bar for training loops:
//   epoch 2/5 [==========>         ] 230/469  loss 0.3412  5210 samples/s  ETA 0:04
// On a terminal it redraws in place; otherwise (CI logs, pipes) it prints a
// line every tenth of the epoch so logs stay short.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace tessera::utils {

class ProgressBar {
 public:
  // `visible` false keeps it silent (every rank but the first of a job).
  ProgressBar(std::string label, int64_t total_steps, bool visible = true)
      : label_(std::move(label)),
        total_(total_steps),
        visible_(visible),
        interactive_(isatty(fileno(stdout)) != 0),
        start_(std::chrono::steady_clock::now()) {}

  // Call after each step with the samples it processed and its loss.
  void update(int64_t samples, double loss) {
    ++step_;
    samples_ += samples;
    loss_ = step_ == 1 ? loss : 0.9 * loss_ + 0.1 * loss;  // smoothed for display
    const bool last = step_ == total_;
    if (!visible_) return;
    const bool milestone = total_ >= 10 ? step_ % (total_ / 10) == 0 : true;
    if (!last && !interactive_ && !milestone) return;
    auto now = std::chrono::steady_clock::now();
    if (interactive_ && !last && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    draw(now);
  }

  // Seconds since construction.
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  double samples_per_second() const { return samples_ / std::max(elapsed(), 1e-9); }

 private:
  void draw(std::chrono::steady_clock::time_point now) {
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double rate = samples_ / std::max(seconds, 1e-9);
    const double eta = step_ > 0 ? seconds / step_ * (total_ - step_) : 0.0;
    constexpr int kWidth = 24;
    const int filled = total_ > 0 ? static_cast<int>(kWidth * step_ / total_) : kWidth;
    std::string bar(kWidth, ' ');
    for (int i = 0; i < filled; ++i) bar[i] = '=';
    if (filled < kWidth) bar[filled] = '>';
    const int eta_s = static_cast<int>(eta + 0.5);
    std::printf("%s%s [%s] %lld/%lld  loss %.4f  %.0f samples/s  ETA %d:%02d%s",
                interactive_ ? "\r" : "", label_.c_str(), bar.c_str(),
                static_cast<long long>(step_), static_cast<long long>(total_), loss_, rate,
                eta_s / 60, eta_s % 60, interactive_ && step_ < total_ ? "" : "\n");
    std::fflush(stdout);
  }

  std::string label_;
  int64_t total_;
  bool visible_;
  bool interactive_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
  int64_t step_ = 0;
  int64_t samples_ = 0;
  double loss_ = 0.0;
};

}  // namespace tessera::utils
