// The structured GEMM's process-wide options and counters (options.h).
#include "cuda/gemm/options.h"

#include <atomic>
#include <mutex>

namespace sg::detail::cuda {

namespace {

std::mutex options_mutex;
GemmOptions current_options;

}  // namespace

GemmOptions gemm_options() {
  std::lock_guard<std::mutex> lock(options_mutex);
  return current_options;
}

void set_gemm_options(const GemmOptions& options) {
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
  s.dmma_launches = c.dmma_launches.load();
  s.dmma_f64_launches = c.dmma_f64_launches.load();
  s.pipelined_launches = c.pipelined_launches.load();
  s.register_b_launches = c.register_b_launches.load();
  s.raw_block_map_launches = c.raw_block_map_launches.load();
  s.tma_store_launches = c.tma_store_launches.load();
  s.mirror_zero_launches = c.mirror_zero_launches.load();
  s.tall_launches = c.tall_launches.load();
  s.transposed_a_outputs = c.transposed_a_outputs.load();
  s.wide_launches = c.wide_launches.load();
  s.wide_structured_launches = c.wide_structured_launches.load();
  s.wide_tma_store_launches = c.wide_tma_store_launches.load();
  s.wide_split_launches = c.wide_split_launches.load();
  s.operand_copies = c.operand_copies.load();
  s.mirror_copies = c.mirror_copies.load();
  return s;
}

}  // namespace sg::detail::cuda
