// The structured GEMM's tuning switches and counters (tuning.h).
#include "cuda/gemm/tuning.h"

#include <atomic>
#include <mutex>

namespace sg::detail::cuda {

namespace {

std::mutex options_mutex;
GemmTuning current_options;

}  // namespace

GemmTuning gemm_tuning() {
  std::lock_guard<std::mutex> lock(options_mutex);
  return current_options;
}

void set_gemm_tuning(const GemmTuning& options) {
  std::lock_guard<std::mutex> lock(options_mutex);
  current_options = options;
}

GemmCounters& gemm_counters() {
  static GemmCounters counters;
  return counters;
}

GemmStats gemm_stats() {
  const GemmCounters& c = gemm_counters();
  GemmStats s;
#define SG_GEMM_SNAPSHOT(name) s.name = c.name.load();
  SG_GEMM_COUNTERS(SG_GEMM_SNAPSHOT)
#undef SG_GEMM_SNAPSHOT
  return s;
}

}  // namespace sg::detail::cuda
