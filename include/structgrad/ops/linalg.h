// Structured linear algebra: triangular solves, Cholesky, log-determinants and inverses, forward
// and backward, on every device. The structure of an operand says what it is (an Upper or Lower
// T, a Symmetric positive definite S), and every gradient is projected onto its input's
// structure: a triangular input gets a triangular gradient, a Symmetric input a symmetric one
// under the (G + Gᵀ)/2 convention (docs/gradients.md).
//
// The backward of a solve or a Cholesky factorization always runs in exact float32 or float64,
// whatever sg::set_matmul_precision says: its rounding errors grow with the condition number.
#pragma once

#include <structgrad/core/tensor.h>
#include <structgrad/ops/structure.h>

namespace sg {

/// X with op(T)·X = B (`left`) or X·T = B (otherwise), for a triangular T [n, n] (Upper or Lower:
/// its structure says which) and B [n, k] (left) or [k, n]. With `unit_diagonal` T's diagonal is
/// taken as ones and gets no gradient. Throws naming `solve_triangular` for a Dense T or an exact
/// zero on its diagonal. Example: `auto x = sg::solve_triangular(L, b);`
Tensor solve_triangular(const Tensor& t, const Tensor& b, bool left = true, bool unit_diagonal = false);

/// The lower Cholesky factor L of a Symmetric positive definite S: L·Lᵀ = S. The gradient for S is
/// Symmetric. Throws naming `cholesky` and the first pivot that is not positive (reading it back
/// synchronises a CUDA device). Example: `sg::LowerTriangular L = sg::cholesky(S);`
LowerTriangular cholesky(const Tensor& s);

/// cholesky without throwing, like torch.linalg.cholesky_ex: `info` is a 0-d int64 tensor on S's
/// device, 0 when S is positive definite, else k ≥ 1 where the leading minor of order k is not (L
/// then holds no meaningful values). Nothing synchronises.
struct CholeskyResult {
  LowerTriangular L;  ///< the factor
  Tensor info;        ///< 0-d int64: 0 on success, else the 1-based failing pivot
};
/// Example: `auto [L, info] = sg::cholesky_ex(S);  if (info.item() != 0) { ... }`
CholeskyResult cholesky_ex(const Tensor& s);

/// log det X as a 0-d tensor. A Symmetric X is taken as positive definite (through its Cholesky
/// factor; gradient X⁻¹, Symmetric); a triangular X gives Σ log|xᵢᵢ| (gradient diag(1/xᵢᵢ)).
/// Example: `auto ld = sg::logdet(K);`
Tensor logdet(const Tensor& x);

/// S⁻¹·B for S = L·Lᵀ, given the LowerTriangular factor L and B [n, k]; gradients for L and B.
/// Example: `auto alpha = sg::cholesky_solve(L, y);`
Tensor cholesky_solve(const Tensor& l, const Tensor& b);

/// T⁻¹ of a triangular T, of the same structure. Example: `sg::LowerTriangular m = sg::inverse(L);`
Tensor inverse(const Tensor& t);
/// inverse keeping the static type. Example: `sg::UpperTriangular v = sg::inverse(u);`
UpperTriangular inverse(const UpperTriangular& t);
/// inverse keeping the static type. Example: `sg::LowerTriangular m = sg::inverse(l);`
LowerTriangular inverse(const LowerTriangular& t);

}  // namespace sg
