// The structured GEMM's tuning switches and counters (tuning.h).
#include "cuda/gemm/tuning.h"

#include <atomic>
#include <mutex>

namespace sg::detail::cuda {

namespace {
TuningState<GemmTuning>& state() {
  static TuningState<GemmTuning> tuning;
  return tuning;
}
}  // namespace

GemmTuning gemm_tuning() { return state().get(); }

void set_gemm_tuning(const GemmTuning& options) { state().set(options); }

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
