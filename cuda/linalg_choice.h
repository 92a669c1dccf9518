// Where the CUDA Cholesky of one matrix runs: our blocked factor or cuSOLVER's potrf, the floor the
// dispatcher never goes below. The orders below are data: cuda/linalg_choice.csv holds the
// measurements they come from (`bench_linalg_cuda --n ... --dtype float32,float64`, the backend rows
// "cholesky" against "cusolver potrf"), and tests/cuda/test_linalg_choice.cpp checks, on any machine,
// that for every measured order the dispatcher picks the faster of the two. Plain C++.
#pragma once

#include <cstdint>

namespace sg::detail::cuda {

/// The smallest order from which potrf factors one matrix, per dtype (0: never).
struct PotrfFrom {
  int64_t f32 = 0;
  int64_t f64 = 0;
};

/// From cuda/linalg_choice.csv.
constexpr PotrfFrom kCholeskyPotrfFrom{192, 192};

/// Whether one matrix of order n (float64 when `f64`) is factored by potrf, for the orders of `from`.
constexpr bool cholesky_uses_potrf(bool f64, int64_t n, PotrfFrom from = kCholeskyPotrfFrom) {
  const int64_t threshold = f64 ? from.f64 : from.f32;
  return threshold > 0 && n >= threshold;
}

}  // namespace sg::detail::cuda
