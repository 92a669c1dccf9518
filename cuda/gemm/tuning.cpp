// The structured GEMM's tuning switches and counters (tuning.h).
#include "cuda/gemm/tuning.h"

#include <atomic>

namespace sg::detail::cuda {

GemmTuning gemm_tuning() { return tuning_state<GemmTuning>().get(); }

void set_gemm_tuning(const GemmTuning& options) { tuning_state<GemmTuning>().set(options); }

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
