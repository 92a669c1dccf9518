// Progress line.
#include <structgrad/nn/progress.h>

#include <cstdio>

namespace sg::nn {

Progress::Progress(int64_t total, int64_t every, bool quiet)
    : total_(total), every_(every > 0 ? every : 1), quiet_(quiet), start_(std::chrono::steady_clock::now()) {}

bool Progress::should_report(int64_t step) const {
  return !quiet_ && (step % every_ == 0 || step == total_ || step == 1);
}

double Progress::steps_per_second(int64_t step) const {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return s > 0 ? static_cast<double>(step) / s : 0.0;
}

void Progress::update(int64_t step, double loss) {
  if (!should_report(step)) return;
  const double rate = steps_per_second(step);
  const double eta = rate > 0 ? static_cast<double>(total_ - step) / rate : 0.0;
  std::printf("step %6lld/%lld  loss %.6f  %.1f steps/s  ETA %.1fs\n", static_cast<long long>(step),
              static_cast<long long>(total_), loss, rate, eta);
  std::fflush(stdout);
}

}  // namespace sg::nn
