// CPU structured GEMM entry points: the plain Eigen reference (what tests compare against)
// and the blocked fast path (tile skipping + k-range restriction over Eigen block products).
#pragma once

#include "../../core/types.h"
#include "../gemm_desc.h"

namespace sg::detail::cpu {

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
