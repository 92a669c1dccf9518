// The tuning switches of the CUDA linear algebra (cuda/linalg_*.cu), for the tests and the benchmark's
// comparisons: which path a solve takes and how the Cholesky's updates and the triangular products
// are run. Process-wide, like the structured GEMM's (cuda/gemm/tuning.h); the defaults are what the
// library runs. Plain C++.
#pragma once

#include <cstdint>

#include "cuda/tuning_state.h"

namespace sg::detail::cuda {

/// The switches of every later solve, factorization and inverse (sg::detail::cuda::linalg_tuning()).
struct LinalgTuning {
  /// Solves with at most this many right-hand sides run in one launch, a CTA per block row and group
  /// of columns; wider ones on the blocked path over the GEMM.
  int64_t few_columns = 64;
  /// The Cholesky's trailing updates (A22 −= L21·L21ᵀ) of at least this order are cut into two
  /// diagonal halves and one off-diagonal product, which skips the upper quarter's flops.
  int64_t split_update_from = 1024;
  /// The order of the Cholesky's diagonal blocks, each factored and inverted by one CTA: 64 or 128.
  int64_t cholesky_leaf_f32 = 128;
  int64_t cholesky_leaf_f64 = 128;
  /// Products whose every extent (m, n and k) is at most this run on the small-tile kernel of
  /// cuda/linalg_common.cu rather than the GEMM: the recursions' lowest levels, which a handful of
  /// 128-tiles would leave on a few SMs. 0: every product on the GEMM. The defaults are the fastest
  /// settings of `bench_linalg_cuda --variants 1`.
  int64_t own_products_up_to_f32 = 128;
  int64_t own_products_up_to_f64 = 0;
  /// Triangular operands whose zeros are stored go to the GEMM as Dense (cuBLAS) instead of the
  /// structured kernel: twice the flops, at DGEMM's rate in float64, which the structured kernel's
  /// FP64 loop does not reach on the recursions' products.
  bool dense_triangles_f32 = false;
  bool dense_triangles_f64 = true;
  /// The blocked solve's leaves (a diagonal block's inverse times kLeaf rows of the right-hand
  /// sides) go to the GEMM as Dense in float32 too: cuBLAS spreads such thin products over more SMs.
  bool dense_solve_leaves = true;
};

/// The switches solves and factorizations read now.
LinalgTuning linalg_tuning();
/// Sets the switches of every later solve and factorization.
void set_linalg_tuning(const LinalgTuning& options);

/// Sets the switches for a scope and restores the previous ones at its end (tests, benchmarks).
/// Example: `LinalgTuningGuard guard([](LinalgTuning& o) { o.few_columns = 0; });`
using LinalgTuningGuard = ScopedTuning<LinalgTuning, linalg_tuning, set_linalg_tuning>;

}  // namespace sg::detail::cuda
