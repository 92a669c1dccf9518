// Structured linear algebra: triangular solves, Cholesky, log-determinants and inverses, forward
// and backward, on every device. The structure of an operand says what it is (an Upper or Lower
// T, a Symmetric positive definite S), and every gradient is projected onto its input's
// structure: a triangular input gets a triangular gradient, a Symmetric input a symmetric one
// under the (G + Gᵀ)/2 convention (docs/gradients.md).
//
// Every op takes a matrix [n, n] or a batch of them [..., n, n] and works matrix by matrix; the
// batch dimensions of a solve's T and B broadcast as torch.matmul's do.
//
// The backward of a solve or a Cholesky factorization always runs in exact float32 or float64,
// whatever sg::set_matmul_precision says: its rounding errors grow with the condition number.
#pragma once

#include <utility>

#include <structgrad/core/tensor.h>
#include <structgrad/ops/structure.h>

namespace sg {

/// X with T·X = B (`left`) or X·T = B (otherwise), for a triangular T [..., n, n] (Upper or Lower:
/// its structure says which) and B [..., n, k] (left) or [..., k, n]. With `unit_diagonal` T's
/// diagonal is taken as ones and gets no gradient. Throws naming `solve_triangular` for a Dense T
/// or an exact zero on a diagonal. Example: `auto x = sg::solve_triangular(L, b);`
Tensor solve_triangular(const Tensor& t, const Tensor& b, bool left = true, bool unit_diagonal = false);

/// The lower Cholesky factor L of a Symmetric positive definite S [..., n, n]: L·Lᵀ = S. The
/// gradient for S is Symmetric. Throws naming `cholesky`, the matrix and its first pivot that is not
/// positive, or a NaN it holds (reading the codes back synchronises a CUDA device).
/// Example: `sg::LowerTriangular L = sg::cholesky(S);`
LowerTriangular cholesky(const Tensor& s);

/// cholesky without throwing, like torch.linalg.cholesky_ex: `info` is an int64 tensor of S's batch
/// shape ([] for one matrix) on S's device, per matrix 0 when it is positive definite, else k ≥ 1
/// where its leading minor of order k is not, or holds a NaN (that matrix of L then holds no
/// meaningful values). Nothing synchronises, so a retry loop or a captured graph can use it.
struct CholeskyResult {
  LowerTriangular L;  ///< the factors
  Tensor info;        ///< int64 [...]: 0 on success, else the 1-based failing pivot
};
/// Example: `auto [L, info] = sg::cholesky_ex(S);  if (info.item() != 0) { ... }`
CholeskyResult cholesky_ex(const Tensor& s);

/// log det X per matrix of X [..., n, n], of the batch shape ([] for one matrix), as torch.logdet.
/// A Symmetric X is taken as positive definite (through its Cholesky factor; gradient X⁻¹,
/// Symmetric). A triangular X gives log Π xᵢᵢ: NaN where the determinant is negative, −inf where
/// it is 0 (gradient diag(1/xᵢᵢ)); slogdet gives log|det X| whatever the sign.
/// Example: `auto ld = sg::logdet(K);`
Tensor logdet(const Tensor& x);

/// sign(det X) and log|det X| per matrix, as torch.linalg.slogdet; the gradient flows through
/// `logabsdet` alone.
struct SignLogAbsDet {
  Tensor sign;       ///< −1, 0 or 1, of the batch shape (all ones for a Symmetric X)
  Tensor logabsdet;  ///< log|det X|, of the batch shape
};
/// slogdet of a triangular or Symmetric positive definite X [..., n, n]. For a triangular X,
/// logabsdet is Σ log|xᵢᵢ|: the log-Jacobian of a triangular flow layer.
/// Example: `auto [sign, log_abs_det] = sg::slogdet(W);`
SignLogAbsDet slogdet(const Tensor& x);

/// S⁻¹·B for S = L·Lᵀ, given the LowerTriangular factor L [..., n, n] and B [..., n, k]; gradients
/// for L and B.
/// Example: `auto alpha = sg::cholesky_solve(L, y);`
Tensor cholesky_solve(const Tensor& l, const Tensor& b);

/// T⁻¹ of a triangular T [..., n, n], of the same structure. Example: `sg::LowerTriangular m = sg::inverse(L);`
Tensor inverse(const Tensor& t);
/// inverse keeping the static type. Example: `sg::UpperTriangular v = sg::inverse(u);`
UpperTriangular inverse(const UpperTriangular& t);
/// inverse keeping the static type. Example: `sg::LowerTriangular m = sg::inverse(l);`
LowerTriangular inverse(const LowerTriangular& t);

/// The backward formulas of the ops above, for bindings that run their own autograd (the PyTorch
/// operators). Not recorded; batches as the ops take them.
namespace linalg_backward {
/// dS (Symmetric) of L = cholesky(S), given L and dL (read through its lower triangle).
Tensor cholesky(const Tensor& l, const Tensor& dl);
/// (dT, dB) of X = solve_triangular(T, B, left, unit_diagonal), given T, X and G = dX: dT in T's
/// triangle (summed over a batch that shared T; zero diagonal with `unit_diagonal`), each computed
/// only where asked (undefined otherwise).
std::pair<Tensor, Tensor> solve_triangular(const Tensor& t, const Tensor& x, const Tensor& g, bool left,
                                           bool unit_diagonal, bool needs_t, bool needs_b);
/// dS = g·S⁻¹ of logdet(S) for S = L·Lᵀ, given L and g of the batch shape.
Tensor logdet(const Tensor& l, const Tensor& g);
}  // namespace linalg_backward

}  // namespace sg
