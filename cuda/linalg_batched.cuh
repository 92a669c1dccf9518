// Fused kernels for batches of small matrices (cuda/linalg_batched.cu): a group of lanes, a thread
// block, or one thread per right-hand side owns a matrix in registers or shared memory, reads only
// the part its structure stores, and writes the whole result in one pass. Each entry point returns
// false, launching nothing, where its kernel does not take the problem (too large a matrix, too
// little shared memory); the caller then runs the large kernels matrix by matrix.
#pragma once

#include <cstdint>

#include <structgrad/core/tensor.h>
#include "ops/gemm_desc.h"

namespace sg::detail::cuda::batched {

/// The largest order (and, for products, extent) the fused kernels take.
constexpr int64_t kMaxOrder = 128;

/// Backend::cholesky on a batch of matrices of order at most kMaxOrder, writing every info code.
bool cholesky(const Tensor& a, Tensor& out, Tensor& info, int device);
/// Backend::cholesky_backward.
bool cholesky_backward(const Tensor& l, const Tensor& dl, Tensor& ds, int device);
/// Backend::solve_triangular (t one matrix the batch shares, or one per matrix of x).
bool solve_triangular(const Tensor& t, Structure kind, bool trans, bool unit_diagonal, bool left, const Tensor& b,
                      Tensor& x, int device);
/// Backend::triangular_inverse.
bool triangular_inverse(const Tensor& t, Structure kind, bool unit_diagonal, Tensor& out, int device);
/// Backend::gemm for a batch of small products (no accumulate, no op(A)ᵀ output).
bool gemm(const GemmProblem& p, DType dtype, int device);

}  // namespace sg::detail::cuda::batched
