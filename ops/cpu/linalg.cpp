// The CPU linear algebra kernels: triangular solves and inverses through Eigen's triangularView,
// and a blocked right-looking Cholesky over Eigen blocks that reports the failing pivot (Eigen's
// LLT only says that one failed). A batch runs matrix by matrix, its matrices spread over the
// OpenMP threads.
#include <algorithm>
#include <cmath>
#include <cstring>

#ifdef _OPENMP
#include <omp.h>
#endif

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

/// The number of matrices of t [..., r, c].
int64_t count_of(const Tensor& t) { return shape_numel(Shape(t.shape().begin(), t.shape().end() - 2)); }

/// Runs body(i) for each matrix i < count of a batch whose matrices each cost about `flops`: on the
/// OpenMP threads where there are several matrices and enough work, else in order (where a single
/// matrix's Eigen calls may use the threads themselves).
template <typename Body>
void for_each_matrix(int64_t count, int64_t flops, Body&& body) {
#ifdef _OPENMP
  constexpr int64_t kMinParallelFlops = int64_t{1} << 20;
  if (count > 1 && count * flops >= kMinParallelFlops && omp_get_max_threads() > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) body(i);
    return;
  }
#endif
  for (int64_t i = 0; i < count; ++i) body(i);
}

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

/// Solves with one matrix T (n × n at t) in place on one matrix X (rows × cols at x).
template <typename T>
void solve_one(const T* t, int64_t n, Structure kind, bool trans, bool unit_diagonal, bool left, T* x, int64_t rows,
               int64_t cols) {
  ConstMatMap<T> tm(t, n, n);
  MatMap<T> xm(x, rows, cols);
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
void solve_typed(const Tensor& t, Structure kind, bool trans, bool unit_diagonal, bool left, const Tensor& b,
                 Tensor& x) {
  const int64_t n = t.size(-1), rows = x.size(-2), cols = x.size(-1), count = count_of(x);
  const int64_t t_step = count_of(t) == 1 ? 0 : n * n, x_step = rows * cols;
  const T* tp = ptr<T>(t);
  const T* bp = ptr<T>(b);
  T* xp = ptr<T>(x);
  for_each_matrix(count, n * n * (left ? cols : rows), [&](int64_t i) {
    T* xi = xp + i * x_step;
    if (bp != xp) std::memcpy(xi, bp + i * x_step, static_cast<size_t>(x_step) * sizeof(T));
    solve_one(tp + i * t_step, n, kind, trans, unit_diagonal, left, xi, rows, cols);
  });
}

template <typename T>
void cholesky_typed(const Tensor& a, Tensor& out, Tensor& info) {
  const int64_t n = a.size(-1);
  const T* ap = ptr<T>(a);
  T* lp = ptr<T>(out);
  int64_t* codes = ptr<int64_t>(info);
  for_each_matrix(count_of(a), n * n * n / 3, [&](int64_t i) {
    MatMap<T> l(lp + i * n * n, n, n);
    l = ConstMatMap<T>(ap + i * n * n, n, n).template triangularView<Eigen::Lower>();
    codes[i] = cholesky_blocked(l) + 1;
  });
}

template <typename T>
void inverse_typed(const Tensor& t, Structure kind, bool unit_diagonal, Tensor& out) {
  const int64_t n = t.size(-1);
  const T* tp = ptr<T>(t);
  T* op = ptr<T>(out);
  for_each_matrix(count_of(t), n * n * n / 3, [&](int64_t i) {
    MatMap<T> o(op + i * n * n, n, n);
    o.setIdentity();
    solve_one(tp + i * n * n, n, kind, false, unit_diagonal, true, op + i * n * n, n, n);
    // The solve fills the other triangle with the identity's exact zeros already; the diagonal of a
    // unit-diagonal inverse is exactly one.
  });
}

}  // namespace

void solve_triangular(const Tensor& t, Structure kind, bool trans, bool unit_diagonal, bool left, const Tensor& b,
                      Tensor& x) {
  if (x.numel() == 0) return;
  if (t.dtype() == DType::Float32) solve_typed<float>(t, kind, trans, unit_diagonal, left, b, x);
  else solve_typed<double>(t, kind, trans, unit_diagonal, left, b, x);
}

void cholesky(const Tensor& a, Tensor& out, Tensor& info) {
  if (info.numel() == 0) return;
  if (a.dtype() == DType::Float32) cholesky_typed<float>(a, out, info);
  else cholesky_typed<double>(a, out, info);
}

void triangular_inverse(const Tensor& t, Structure kind, bool unit_diagonal, Tensor& out) {
  if (out.numel() == 0) return;
  if (t.dtype() == DType::Float32) inverse_typed<float>(t, kind, unit_diagonal, out);
  else inverse_typed<double>(t, kind, unit_diagonal, out);
}

}  // namespace sg::detail::cpu
