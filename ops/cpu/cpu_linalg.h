// CPU linear algebra kernels (ops/cpu/linalg.cpp), the CPU backend's solve_triangular, cholesky
// and triangular_inverse: Eigen's triangular solves and a blocked Cholesky over Eigen blocks.
#pragma once

#include <structgrad/core/tensor.h>
#include "ops/gemm_desc.h"

namespace sg::detail::cpu {

// Each takes a batch as the Backend does ([..., n, n]; a solve's T may be one matrix the batch
// shares) and runs matrix by matrix, in parallel over the batch where it holds several matrices.

/// Backend::solve_triangular on host buffers (float32 or float64).
void solve_triangular(const Tensor& t, Structure kind, bool trans, bool unit_diagonal, bool left, const Tensor& b,
                      Tensor& x);
/// Backend::cholesky on host buffers; info is a host int64 tensor of the batch shape.
void cholesky(const Tensor& a, Tensor& out, Tensor& info);
/// Backend::triangular_inverse on host buffers.
void triangular_inverse(const Tensor& t, Structure kind, bool unit_diagonal, Tensor& out);

}  // namespace sg::detail::cpu
