// CPU structured GEMM entry points: the plain Eigen reference (what tests compare against)
// and the blocked fast path (tile skipping + k-range restriction over Eigen block products).
#pragma once

#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <structgrad/core/types.h>
#include "ops/gemm_desc.h"

namespace sg::detail::cpu {

/// Below this many multiply-adds a product runs on one thread. On the project's 2-core VMs an
/// OpenMP parallel region costs about 60 µs (waking the sleeping second thread), more than a
/// small product takes alone: x[1024, 16]·Uᵀ took 82 µs on two threads and 11 µs on one.
constexpr int64_t kMinParallelMacs = int64_t{1} << 23;

/// Calls f() with OpenMP, and so Eigen, limited to one thread when `macs` is below
/// kMinParallelMacs. omp_set_num_threads changes only the calling thread's setting, so
/// products running concurrently on other threads keep theirs.
template <typename F>
void with_threads_for(int64_t macs, F&& f) {
#ifdef _OPENMP
  if (macs < kMinParallelMacs) {
    const int previous = omp_get_max_threads();
    omp_set_num_threads(1);
    try {
      f();
    } catch (...) {
      omp_set_num_threads(previous);
      throw;
    }
    omp_set_num_threads(previous);
    return;
  }
#endif
  f();
}

/// Plain reference: materialises op(A) and op(B) through Eigen's triangularView /
/// selfadjointView (reading only the triangle each descriptor allows), multiplies densely in
/// the problem's dtype and applies the output mask. Slow; for tests and as a fallback.
void reference_gemm(const GemmProblem& p, DType dtype);

/// Same product in float64 regardless of the buffers' dtype: inputs are read as `dtype`,
/// the result is written to `c_out` as doubles (row-major m×n). The tests' float64 oracle.
void reference_gemm_f64(const GemmProblem& p, DType dtype, double* c_out);

/// The fast path: one blocked structured GEMM (see ops/cpu/blocked_gemm.cpp).
void blocked_gemm(const GemmProblem& p, DType dtype);

/// Multiply-adds (sum of m·n·k over the Eigen block products) issued by the most recent
/// blocked_gemm call; shows that tile skipping and k-range restriction are real
/// (Upper·Upper at N = 512 does about N³/5, not N³). A debug counter, not thread-safe
/// across concurrent blocked_gemm calls.
int64_t blocked_gemm_last_macs();

/// Dense·Dense with a Full mask through Eigen's GEMM.
void dense_gemm(const GemmProblem& p, DType dtype);

}  // namespace sg::detail::cpu
