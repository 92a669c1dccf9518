// First-class structured matrices (docs/semantics.md). UpperTriangular, LowerTriangular and Symmetric
// are typed handles over a square tensor whose Structure tag they guarantee; they convert
// implicitly to Tensor and work anywhere a Tensor does, including as parameters with .grad().
// Enter a structure with triu / tril / sym (differentiable projections) or as_upper / as_lower /
// as_symmetric (checked); leave it with .dense().
#pragma once

#include <structgrad/core/tensor.h>

namespace sg {

class UpperTriangular;
class LowerTriangular;
class Symmetric;

/// The upper triangle of a square matrix (entries with j − i >= diagonal, diagonal >= 0),
/// tagged UpperTriangular. Differentiable: grad = triu(G). Example: `auto U = sg::triu(W);`
UpperTriangular triu(const Tensor& x, int64_t diagonal = 0);
/// The lower triangle of a square matrix (entries with j − i <= diagonal, diagonal <= 0), tagged
/// LowerTriangular. Differentiable: grad = tril(G). Example: `auto L = sg::tril(W);`
LowerTriangular tril(const Tensor& x, int64_t diagonal = 0);
/// (x + xᵀ)/2 of a square matrix, tagged Symmetric. Differentiable: grad = (G + Gᵀ)/2.
/// Example: `auto S = sg::sym(W);`
Symmetric sym(const Tensor& x);
/// x tagged UpperTriangular after checking that every entry below the diagonal is exactly 0;
/// throws sg::Error naming the first offending entry. Example: `auto U = sg::as_upper(t);`
UpperTriangular as_upper(const Tensor& x);
/// x tagged LowerTriangular after checking that every entry above the diagonal is exactly 0;
/// throws sg::Error naming the first offending entry. Example: `auto L = sg::as_lower(t);`
LowerTriangular as_lower(const Tensor& x);
/// x tagged Symmetric after checking x[i][j] == x[j][i] bit for bit; throws naming the
/// first offending pair. Example: `auto S = sg::as_symmetric(t);`
Symmetric as_symmetric(const Tensor& x);

/// An n×n upper-triangular matrix. Example:
/// `auto U = sg::UpperTriangular::randn(64).requires_grad_();  auto C = sg::matmul(U, U);`
class UpperTriangular : public Tensor {
 public:
  UpperTriangular() = default;
  /// Wraps a tensor already tagged UpperTriangular (throws otherwise; see triu / as_upper).
  explicit UpperTriangular(const Tensor& t);
  /// triu of a standard-normal matrix.
  static UpperTriangular randn(int64_t n, TensorOptions options = {});
  /// The n×n zero matrix, tagged Upper. Example: `auto w = sg::UpperTriangular::zeros(16).requires_grad_();`
  static UpperTriangular zeros(int64_t n, TensorOptions options = {});
  /// The n×n identity, tagged Upper. Example: `auto u = sg::UpperTriangular::eye(8);`
  static UpperTriangular eye(int64_t n, TensorOptions options = {});
  /// The side n of each matrix. Example: `u.n() == u.size(-1)`.
  int64_t n() const { return size(-1); }
  /// Tensor::requires_grad_ keeping the static type. Example: `auto u = sg::UpperTriangular::eye(4).requires_grad_();`
  UpperTriangular& requires_grad_(bool on = true) {
    Tensor::requires_grad_(on);
    return *this;
  }
};

/// An n×n lower-triangular matrix, such as a Cholesky factor or a `scale_tril`. Example:
/// `auto L = sg::LowerTriangular::randn(64).requires_grad_();  auto C = sg::matmul(L, L);`
class LowerTriangular : public Tensor {
 public:
  LowerTriangular() = default;
  /// Wraps a tensor already tagged LowerTriangular (throws otherwise; see tril / as_lower).
  explicit LowerTriangular(const Tensor& t);
  /// tril of a standard-normal matrix.
  static LowerTriangular randn(int64_t n, TensorOptions options = {});
  /// The n×n zero matrix, tagged Lower. Example: `auto l = sg::LowerTriangular::zeros(16).requires_grad_();`
  static LowerTriangular zeros(int64_t n, TensorOptions options = {});
  /// The n×n identity, tagged Lower. Example: `auto l = sg::LowerTriangular::eye(8);`
  static LowerTriangular eye(int64_t n, TensorOptions options = {});
  /// The side n of each matrix. Example: `l.n() == l.size(-1)`.
  int64_t n() const { return size(-1); }
  /// Tensor::requires_grad_ keeping the static type. Example: `auto l = sg::LowerTriangular::eye(4).requires_grad_();`
  LowerTriangular& requires_grad_(bool on = true) {
    Tensor::requires_grad_(on);
    return *this;
  }
};

/// An n×n symmetric matrix. Example: `auto S = sg::Symmetric::randn(64);`
class Symmetric : public Tensor {
 public:
  Symmetric() = default;
  /// Wraps a tensor already tagged Symmetric (throws otherwise; see sym / as_symmetric).
  explicit Symmetric(const Tensor& t);
  /// sym of a standard-normal matrix times √2, so off-diagonal entries are standard normal.
  static Symmetric randn(int64_t n, TensorOptions options = {});
  /// The n×n zero matrix, tagged Symmetric. Example: `auto s = sg::Symmetric::zeros(8).requires_grad_();`
  static Symmetric zeros(int64_t n, TensorOptions options = {});
  /// The n×n identity, tagged Symmetric. Example: `auto s = sg::Symmetric::eye(8);`
  static Symmetric eye(int64_t n, TensorOptions options = {});
  /// The side n of each matrix. Example: `s.n() == s.size(-1)`.
  int64_t n() const { return size(-1); }
  /// Tensor::requires_grad_ keeping the static type. Example: `auto s = sg::Symmetric::eye(4).requires_grad_();`
  Symmetric& requires_grad_(bool on = true) {
    Tensor::requires_grad_(on);
    return *this;
  }
};

// Static structure where the rules of docs/semantics.md know it.
/// @{
/// Elementwise ops whose result type the structure rules know statically: Upper ± Upper,
/// −Upper, Upper·scalar and Upper ⊙ t for t of rank ≤ 2 (0-d, [1], a row [n], a column [n, 1], an
/// n×n matrix) are Upper, in either order. A t of rank 3 or more is an sg::Error naming mul.
/// Example: `sg::UpperTriangular v = sg::exp(log_scale) * u - u;`
UpperTriangular operator+(const UpperTriangular& a, const UpperTriangular& b);
UpperTriangular operator-(const UpperTriangular& a, const UpperTriangular& b);
UpperTriangular operator-(const UpperTriangular& a);
UpperTriangular operator*(const UpperTriangular& a, const UpperTriangular& b);
UpperTriangular operator*(const UpperTriangular& a, const Tensor& b);
UpperTriangular operator*(const Tensor& a, const UpperTriangular& b);
UpperTriangular operator*(const UpperTriangular& a, double s);
UpperTriangular operator*(double s, const UpperTriangular& a);
/// @}
/// @{
/// The same for LowerTriangular: Lower ± Lower, −Lower, Lower·scalar and Lower ⊙ t (rank ≤ 2) are
/// Lower. Example: `sg::LowerTriangular scale = sg::exp(log_s) * L;`
LowerTriangular operator+(const LowerTriangular& a, const LowerTriangular& b);
LowerTriangular operator-(const LowerTriangular& a, const LowerTriangular& b);
LowerTriangular operator-(const LowerTriangular& a);
LowerTriangular operator*(const LowerTriangular& a, const LowerTriangular& b);
LowerTriangular operator*(const LowerTriangular& a, const Tensor& b);
LowerTriangular operator*(const Tensor& a, const LowerTriangular& b);
LowerTriangular operator*(const LowerTriangular& a, double s);
LowerTriangular operator*(double s, const LowerTriangular& a);
/// @}
/// @{
/// Lower ⊙ Upper (either order) is diagonal, which both structures hold; it is tagged Upper.
/// Example: `sg::UpperTriangular d = l * u;`
UpperTriangular operator*(const LowerTriangular& a, const UpperTriangular& b);
UpperTriangular operator*(const UpperTriangular& a, const LowerTriangular& b);
/// @}
/// @{
/// Sym ± Sym, −Sym, Sym ⊙ Sym and Sym·scalar are Symmetric. Example: `sg::Symmetric t = s + s * s;`
Symmetric operator+(const Symmetric& a, const Symmetric& b);
Symmetric operator-(const Symmetric& a, const Symmetric& b);
Symmetric operator-(const Symmetric& a);
Symmetric operator*(const Symmetric& a, const Symmetric& b);
Symmetric operator*(const Symmetric& a, double s);
Symmetric operator*(double s, const Symmetric& a);
/// @}

/// @{
/// with_diagonal and transpose keep the static structured type (the Tensor forms in ops/shape.h
/// keep the tag but return a Tensor). Example: `sg::LowerTriangular L = sg::with_diagonal(sg::tril(W), d);`
UpperTriangular with_diagonal(const UpperTriangular& x, const Tensor& d);
LowerTriangular with_diagonal(const LowerTriangular& x, const Tensor& d);
Symmetric with_diagonal(const Symmetric& x, const Tensor& d);
LowerTriangular transpose(const UpperTriangular& x);
UpperTriangular transpose(const LowerTriangular& x);
Symmetric transpose(const Symmetric& x);
/// @}

}  // namespace sg
