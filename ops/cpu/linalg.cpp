// The CPU linear algebra kernels: triangular solves and inverses through Eigen's triangularView,
// and a blocked right-looking Cholesky over Eigen blocks that reports the failing pivot (Eigen's
// LLT only says that one failed).
#include <cmath>

#include <Eigen/Dense>

#include <structgrad/core/error.h>
#include "ops/cpu/cpu_linalg.h"

namespace sg::detail::cpu {
namespace {

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MatMap = Eigen::Map<RowMat<T>>;
template <typename T>
using ConstMatMap = Eigen::Map<const RowMat<T>>;

template <typename T>
T* ptr(const Tensor& t) { return static_cast<T*>(t.data_ptr()); }

/// Solves with the triangular view of Mode (Lower or Upper, maybe | UnitDiag) of T's storage, read
/// transposed or not, on the left or the right of x.
template <int Mode, typename T>
void solve_with_view(const ConstMatMap<T>& t, bool trans, bool left, MatMap<T>& x) {
  const auto view = t.template triangularView<Mode>();
  if (trans) {
    if (left) view.transpose().solveInPlace(x);
    else view.transpose().template solveInPlace<Eigen::OnTheRight>(x);
  } else {
    if (left) view.solveInPlace(x);
    else view.template solveInPlace<Eigen::OnTheRight>(x);
  }
}

template <typename T>
void solve_typed(const Tensor& t, Structure kind, bool trans, bool unit_diagonal, bool left, Tensor& x) {
  const int64_t n = t.size(0);
  ConstMatMap<T> tm(ptr<T>(t), n, n);
  MatMap<T> xm(ptr<T>(x), x.size(0), x.size(1));
  // kind is the structure of op(T): the stored triangle is the other one when T is read transposed.
  const bool stored_lower = (kind == Structure::LowerTriangular) != trans;
  if (stored_lower) {
    if (unit_diagonal) solve_with_view<Eigen::UnitLower>(tm, trans, left, xm);
    else solve_with_view<Eigen::Lower>(tm, trans, left, xm);
  } else {
    if (unit_diagonal) solve_with_view<Eigen::UnitUpper>(tm, trans, left, xm);
    else solve_with_view<Eigen::Upper>(tm, trans, left, xm);
  }
}

/// Cholesky of the lower triangle of l in place, one column at a time; returns the failing column
/// or −1.
template <typename Block>
int64_t cholesky_unblocked(Block l) {
  using T = typename Block::Scalar;
  const int64_t n = l.rows();
  for (int64_t j = 0; j < n; ++j) {
    T d = l(j, j);
    if (j > 0) d -= l.row(j).head(j).squaredNorm();
    if (!(d > T(0))) return j;  // also catches NaN
    d = std::sqrt(d);
    l(j, j) = d;
    const int64_t below = n - j - 1;
    if (below > 0) {
      if (j > 0) l.col(j).tail(below).noalias() -= l.bottomLeftCorner(below, j) * l.row(j).head(j).transpose();
      l.col(j).tail(below) /= d;
    }
  }
  return -1;
}

/// Blocked right-looking Cholesky of the lower triangle of a in place: factor a diagonal block,
/// solve the panel below it, update the trailing lower triangle. Returns the failing pivot or −1.
template <typename T>
int64_t cholesky_blocked(MatMap<T>& a) {
  constexpr int64_t kBlock = 64;
  const int64_t n = a.rows();
  for (int64_t k = 0; k < n; k += kBlock) {
    const int64_t b = std::min(kBlock, n - k), rest = n - k - b;
    const int64_t failed = cholesky_unblocked(a.block(k, k, b, b));
    if (failed >= 0) return k + failed;
    if (rest == 0) break;
    auto panel = a.block(k + b, k, rest, b);
    a.block(k, k, b, b).template triangularView<Eigen::Lower>().transpose().template solveInPlace<Eigen::OnTheRight>(
        panel);
    a.block(k + b, k + b, rest, rest).template selfadjointView<Eigen::Lower>().rankUpdate(panel, T(-1));
  }
  return -1;
}

template <typename T>
void cholesky_typed(const Tensor& a, Tensor& out, Tensor& info) {
  const int64_t n = a.size(0);
  MatMap<T> l(ptr<T>(out), n, n);
  l = ConstMatMap<T>(ptr<T>(a), n, n).template triangularView<Eigen::Lower>();
  const int64_t failed = cholesky_blocked(l);
  *ptr<int64_t>(info) = failed + 1;
}

template <typename T>
void inverse_typed(const Tensor& t, Structure kind, bool unit_diagonal, Tensor& out) {
  const int64_t n = t.size(0);
  MatMap<T> o(ptr<T>(out), n, n);
  o.setIdentity();
  solve_typed<T>(t, kind, false, unit_diagonal, true, out);
  // The solve fills the other triangle with the identity's exact zeros already; the diagonal of a
  // unit-diagonal inverse is exactly one.
}

}  // namespace

void solve_triangular(const Tensor& t, Structure kind, bool trans, bool unit_diagonal, bool left, Tensor& x) {
  if (x.numel() == 0) return;
  if (t.dtype() == DType::Float32) solve_typed<float>(t, kind, trans, unit_diagonal, left, x);
  else solve_typed<double>(t, kind, trans, unit_diagonal, left, x);
}

void cholesky(const Tensor& a, Tensor& out, Tensor& info) {
  if (a.dtype() == DType::Float32) cholesky_typed<float>(a, out, info);
  else cholesky_typed<double>(a, out, info);
}

void triangular_inverse(const Tensor& t, Structure kind, bool unit_diagonal, Tensor& out) {
  if (out.numel() == 0) return;
  if (t.dtype() == DType::Float32) inverse_typed<float>(t, kind, unit_diagonal, out);
  else inverse_typed<double>(t, kind, unit_diagonal, out);
}

}  // namespace sg::detail::cpu
