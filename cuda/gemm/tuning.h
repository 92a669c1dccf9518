// The structured GEMM's tuning switches and launch counters, for the tests and the benchmark's
// comparisons: the library runs on the defaults, and a product's own settings (its precision) come
// with its GemmProblem. The switches are read once per product; the tile scheduler and the kernel
// selection take them as an argument and run without CUDA.
#pragma once

#include <atomic>
#include <cstdint>
#include <tuple>

#include "cuda/tuning_state.h"

namespace sg::detail::cuda {

/// A setting the library decides by itself unless told: Auto is what it uses; Never and Always
/// exist for the tests and the benchmark's comparisons.
enum class Choice : uint8_t { Auto, Never, Always };

/// How the tile scheduler orders and cuts the work of the one-item-per-block kernels.
enum class GemmSchedule : uint8_t {
  Balanced,       ///< the default: heaviest first (or shared-panel order), split-K where the cost model says it pays
  HeaviestFirst,  ///< heaviest first, no split
  Raster,         ///< tiles in row-major order, no split
};

/// Which mainloop exact float32 (not TF32) runs.
enum class Fp32Loop : uint8_t {
  Auto,  ///< the FP64 tensor cores for the large tiles where the device has full-rate float64 and
         ///< the library holds sm_90a code; FFMA elsewhere and for the small tiles
  Fma,   ///< FFMA everywhere
  Dmma,  ///< the FP64 tensor cores for every product where they run, small ones too
};

/// Which mainloop float64 runs.
enum class Fp64Loop : uint8_t {
  Auto,  ///< the FP64 tensor cores (128 tiles) or DFMA (64 tiles), whichever plan the tile scheduler
         ///< ranks first, where the device has full-rate float64 and the library holds sm_90a code;
         ///< DFMA elsewhere
  Dfma,  ///< DFMA everywhere
  Dmma,  ///< the FP64 tensor cores for every product where they run
};

/// Which tensor-core mainloop TF32 runs.
enum class Tf32Loop : uint8_t {
  Auto,                 ///< wgmma with TMA copies and every kernel of the family (sm_90a), mma.sync elsewhere
  WgmmaStaged,          ///< wgmma with every tile staged through registers (no TMA)
  MmaSync,              ///< mma.sync everywhere
  WgmmaTmaOuterMajor,   ///< wgmma with TMA copies of the outer-major operands only
  WgmmaBarrierPerStep,  ///< as Auto, but no pipelined kernel: one barrier per k-step
};

/// The switches of every structured product (sg::detail::cuda::gemm_tuning()); the defaults are what
/// the library runs.
struct GemmTuning {
  GemmSchedule schedule = GemmSchedule::Balanced;
  Fp32Loop fp32_loop = Fp32Loop::Auto;
  Fp64Loop fp64_loop = Fp64Loop::Auto;
  Tf32Loop tf32_loop = Tf32Loop::Auto;
  /// Copy a k-major or Symmetric operand into the layout its kernel reads fastest before the
  /// product (outer-major for wgmma, k-major for exact float32's FP64 loop).
  Choice relayout = Choice::Auto;
  /// Run products with A outer-major and B k-major, one of them triangular, with B from registers.
  Choice register_b = Choice::Auto;
  /// Run large products whose operands both come by direct copies on the wide kernel (128 × 256).
  Choice wide_tiles = Choice::Auto;
  /// Cut the wide kernel's last, part-empty round of tiles in k.
  Choice wide_split = Choice::Auto;
  /// Run large register-B products on the tall kernel (256 × 128).
  Choice tall_tiles = Choice::Auto;
  /// The wide kernel writes its tiles by TMA stores where C takes them.
  bool wide_tma_store = true;
  /// The tall kernel also writes op(A)ᵀ where the caller asks for it (GemmProblem::at).
  bool transposed_a_output = true;
  /// The persistent kernels begin before the kernel ahead of them in the stream completes.
  bool dependent_launch = true;
  /// Fill operand copies and op(A)ᵀ with NaN before writing them, so that a kernel that reads a
  /// part they do not hold fails its check (tests only).
  bool poison_copies = false;

  /// The fields as a tuple, for comparisons and the launch plans' cache key.
  auto fields() const {
    return std::make_tuple(schedule, fp32_loop, fp64_loop, tf32_loop, relayout, register_b, wide_tiles, wide_split,
                           tall_tiles, wide_tma_store, transposed_a_output, dependent_launch, poison_copies);
  }
  bool operator==(const GemmTuning& other) const { return fields() == other.fields(); }
  bool operator<(const GemmTuning& other) const { return fields() < other.fields(); }
};

/// The switches products read now (process-wide).
GemmTuning gemm_tuning();
/// Sets the switches of every later product.
void set_gemm_tuning(const GemmTuning& options);

/// Sets the switches for a scope and restores the previous ones at its end (tests, benchmarks).
/// Example: `GemmTuningGuard guard([](GemmTuning& o) { o.tf32_loop = Tf32Loop::MmaSync; });`
using GemmTuningGuard = ScopedTuning<GemmTuning, gemm_tuning, set_gemm_tuning>;

/// The launch counters, each written once here: the statistics (GemmStats) and their atomic
/// counterparts (GemmCounters) are both made from this list.
#define SG_GEMM_COUNTERS(X)                                                                       \
  X(dmma_launches)             /* exact float32 on the FP64 tensor cores */                      \
  X(dmma_f64_launches)         /* float64 on the FP64 tensor cores */                            \
  X(pipelined_launches)        /* the pipelined wgmma kernel */                                  \
  X(register_b_launches)       /* the register-B kernel */                                       \
  X(raw_block_map_launches)    /* ... that copied each k-step of B as one 3-D box */             \
  X(tma_store_launches)        /* ... that wrote C by TMA stores */                              \
  X(mirror_zero_launches)      /* ... whose tiles of zeros were stored by their mirror tiles */  \
  X(tall_launches)             /* the tall kernel */                                             \
  X(transposed_a_outputs)      /* ... that also wrote op(A)ᵀ */                                  \
  X(wide_launches)             /* the wide kernel */                                             \
  X(wide_structured_launches)  /* ... on a structured product's panel-ordered plan */            \
  X(wide_tma_store_launches)   /* ... with TMA stores (dense plans) */                           \
  X(wide_split_launches)       /* ... with its last round cut in k */                            \
  X(operand_copies)            /* relayout and k-major copies of operands */                     \
  X(mirror_copies)             /* ... of a Symmetric operand's mirrored part only */

/// What the structured GEMM did since the process started (SG_GEMM_COUNTERS): launches per kernel and
/// copies made. For the tests, which check that a product ran where it should.
struct GemmStats {
#define SG_GEMM_STAT(name) int64_t name = 0;
  SG_GEMM_COUNTERS(SG_GEMM_STAT)
#undef SG_GEMM_STAT
};
GemmStats gemm_stats();

/// The counters behind gemm_stats, which the launcher bumps.
struct GemmCounters {
#define SG_GEMM_COUNTER(name) std::atomic<int64_t> name{0};
  SG_GEMM_COUNTERS(SG_GEMM_COUNTER)
#undef SG_GEMM_COUNTER
};
GemmCounters& gemm_counters();

}  // namespace sg::detail::cuda
