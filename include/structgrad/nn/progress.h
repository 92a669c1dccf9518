// A one-line progress report for training loops: step, loss, steps/s and ETA, printed
// every `every` steps and at the end; silent when quiet.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace sg::nn {

/// Example: `sg::nn::Progress bar(steps, 50, quiet); for (...) { ...; bar.update(step, loss); }`
class Progress {
 public:
  /// Reports every `every` steps, on step 1 and on the last step; nothing when `quiet`.
  /// Example: `sg::nn::Progress bar(200, 25);`
  Progress(int64_t total_steps, int64_t every = 50, bool quiet = false);
  /// Reports step (1-based) with its loss; `loss` is read only on reporting steps.
  void update(int64_t step, double loss);
  /// Reports whatever loss the callback returns, only on reporting steps (avoids a device sync
  /// per step). Example: `bar.update(step, [&] { return loss.item(); });`
  template <typename F>
  void update_lazy(int64_t step, F&& loss) {
    if (should_report(step)) update(step, loss());
  }
  /// True when update(step, …) would print. Example: `if (bar.should_report(step)) ...`
  bool should_report(int64_t step) const;
  /// step divided by the seconds since construction. Example: `bar.steps_per_second(step)`.
  double steps_per_second(int64_t step) const;

 private:
  int64_t total_, every_;
  bool quiet_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace sg::nn
