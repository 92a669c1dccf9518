// The structured GEMM's options and statistics: one struct of settings read once per product (like
// torch.backends.cuda.matmul), and one struct of counters for the tests. Plain C++: the tile
// scheduler and the kernel selection take the options as an argument and run without CUDA.
#pragma once

#include <atomic>
#include <cstdint>

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

/// The options of every structured product (sg::detail::cuda::gemm_options()).
struct GemmOptions {
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
};

/// The options products read now (process-wide, like torch.backends.cuda.matmul).
GemmOptions gemm_options();
/// Sets the options of every later product.
void set_gemm_options(const GemmOptions& options);

/// Sets the options for a scope and restores the previous ones at its end (tests, benchmarks).
/// Example: `GemmOptionsGuard guard([](GemmOptions& o) { o.tf32_loop = Tf32Loop::MmaSync; });`
class GemmOptionsGuard {
 public:
  template <class Edit>
  explicit GemmOptionsGuard(Edit edit) : previous_(gemm_options()) {
    GemmOptions options = previous_;
    edit(options);
    set_gemm_options(options);
  }
  ~GemmOptionsGuard() { set_gemm_options(previous_); }
  GemmOptionsGuard(const GemmOptionsGuard&) = delete;
  GemmOptionsGuard& operator=(const GemmOptionsGuard&) = delete;

 private:
  GemmOptions previous_;
};

/// What the structured GEMM did since the process started: launches per kernel and copies made.
/// For the tests, which check that a product ran where it should.
struct GemmStats {
  int64_t dmma_launches = 0;            ///< exact float32 on the FP64 tensor cores
  int64_t dmma_f64_launches = 0;        ///< float64 on the FP64 tensor cores
  int64_t pipelined_launches = 0;       ///< the pipelined wgmma kernel
  int64_t register_b_launches = 0;      ///< the register-B kernel
  int64_t raw_block_map_launches = 0;   ///< ... that copied each k-step of B as one 3-D box
  int64_t tma_store_launches = 0;       ///< ... that wrote C by TMA stores
  int64_t mirror_zero_launches = 0;     ///< ... whose tiles of zeros were stored by their mirror tiles
  int64_t tall_launches = 0;            ///< the tall kernel
  int64_t transposed_a_outputs = 0;     ///< ... that also wrote op(A)ᵀ
  int64_t wide_launches = 0;            ///< the wide kernel
  int64_t wide_structured_launches = 0; ///< ... on a structured product's panel-ordered plan
  int64_t wide_tma_store_launches = 0;  ///< ... with TMA stores (dense plans)
  int64_t wide_split_launches = 0;      ///< ... with its last round cut in k
  int64_t operand_copies = 0;           ///< relayout and k-major copies of operands
  int64_t mirror_copies = 0;            ///< ... of a Symmetric operand's mirrored part only
};
GemmStats gemm_stats();

/// The counters behind gemm_stats, which the launcher bumps.
struct GemmCounters {
  std::atomic<int64_t> dmma_launches{0}, dmma_f64_launches{0}, pipelined_launches{0}, register_b_launches{0}, raw_block_map_launches{0},
      tma_store_launches{0}, mirror_zero_launches{0}, tall_launches{0}, transposed_a_outputs{0}, wide_launches{0},
      wide_structured_launches{0}, wide_tma_store_launches{0}, wide_split_launches{0}, operand_copies{0},
      mirror_copies{0};
};
GemmCounters& gemm_counters();

}  // namespace sg::detail::cuda
