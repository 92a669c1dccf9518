// Helpers of the linear-algebra tests (test_linalg.cpp, test_linalg_grad.cpp, test_linalg_errors.cpp):
// rounding units, Eigen references and the error bounds of the algorithms' analyses, inputs, closed-form
// gradients, and the fixtures.
#pragma once

#include <gtest/gtest.h>

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <structgrad/structgrad.h>
#include "ops/backend.h"
#include "test_util.h"

namespace sgtest::linalg {

using S = sg::Structure;
using sgtest::holds_invariant;
using sgtest::message_of;
using sgtest::rel_error;

template <typename R>
using Mat = Eigen::Matrix<R, Eigen::Dynamic, Eigen::Dynamic>;
using MatD = Mat<double>;

// The orders every value test runs at: the smallest cases, an odd order, both sides of the CPU
// Cholesky's block of 64, one short of two blocks, and one large matrix.
inline constexpr int64_t kSizes[] = {1, 2, 3, 31, 64, 65, 127, 1000};

// ---- rounding units and host references ------------------------------------------------------

/// The unit roundoff u of a dtype: 2⁻²⁴ for float32, 2⁻⁵³ for float64.
inline double unit_roundoff(sg::DType dtype) { return dtype == sg::kFloat32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53); }

/// The unit roundoff u_R of a host scalar (2⁻⁶⁴ for x86's long double, 2⁻⁵³ for double).
template <typename R>
inline double unit_roundoff_of() {
  return static_cast<double>(std::numeric_limits<R>::epsilon()) / 2;
}

/// Calls f with a value of the reference scalar for order n: long double up to n = 127, double
/// above (a long double factorization of order 1000 takes seconds). Every bound below adds the
/// reference's own rounding, u_R, to the tested dtype's u.
template <typename F>
inline void with_reference(int64_t n, F&& f) {
  if (n <= 127) f(static_cast<long double>(0));
  else f(0.0);
}

/// The values of a 1-D or 2-D tensor (any device, any dtype: exact in double) as a host matrix.
template <typename R>
Mat<R> host(const sg::Tensor& t) {
  const std::vector<double> v = t.to_vector();
  const int64_t rows = t.size(0), cols = t.dim() == 2 ? t.size(1) : 1;
  Mat<R> m(rows, cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m(i, j) = static_cast<R>(v[static_cast<size_t>(i * cols + j)]);
  return m;
}

/// The triangle of `t` a solve reads: the other triangle zeroed (it may hold poison in the kernel
/// tests) and, with a unit diagonal, ones on the diagonal whatever `t` stores there.
template <typename R>
Mat<R> read_triangle(const Mat<R>& t, bool lower, bool unit) {
  Mat<R> m = t;
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      if (lower ? j > i : j < i) m(i, j) = 0;
  if (unit) m.diagonal().setOnes();
  return m;
}

/// A⁻¹·B for a triangular A (Eigen's triangularView<>().solve).
template <typename R>
Mat<R> tri_solve(const Mat<R>& a, bool lower, const Mat<R>& b) {
  if (lower) return a.template triangularView<Eigen::Lower>().solve(b);
  return a.template triangularView<Eigen::Upper>().solve(b);
}

template <typename R>
Mat<R> identity(Eigen::Index n) {
  return Mat<R>::Identity(n, n);
}

/// ‖m‖∞, the largest row sum of |m|.
template <typename R>
inline double inf_norm(const Mat<R>& m) {
  return static_cast<double>(m.cwiseAbs().rowwise().sum().maxCoeff());
}

/// ‖m‖₁, the largest column sum of |m|.
template <typename R>
inline double one_norm(const Mat<R>& m) {
  return static_cast<double>(m.cwiseAbs().colwise().sum().maxCoeff());
}

/// κ₂(S) = λmax/λmin of a symmetric positive definite S, from Eigen's symmetric eigensolver in R.
template <typename R>
inline double spd_kappa(const Mat<R>& s) {
  const Eigen::SelfAdjointEigenSolver<Mat<R>> eig(s, Eigen::EigenvaluesOnly);
  return static_cast<double>(eig.eigenvalues().maxCoeff() / eig.eigenvalues().minCoeff());
}

/// max |rᵢⱼ| / scaleᵢⱼ: a componentwise backward error (0/0 counts as 0, r/0 as infinity, NaN
/// stays NaN so that every bound fails on it).
template <typename R>
inline double componentwise_ratio(const Mat<R>& r, const Mat<R>& scale) {
  double worst = 0;
  for (Eigen::Index i = 0; i < r.rows(); ++i)
    for (Eigen::Index j = 0; j < r.cols(); ++j) {
      const R num = r(i, j) < 0 ? -r(i, j) : r(i, j);
      if (num == 0) continue;
      const double q = scale(i, j) > 0 ? static_cast<double>(num / scale(i, j)) : INFINITY;
      if (std::isnan(q) || std::isnan(worst)) worst = NAN;
      else if (q > worst) worst = q;
    }
  return worst;
}

/// Success when value ≤ bound, else "<what> <value> > <bound>" (NaN fails).
inline testing::AssertionResult within(const char* what, double value, double bound) {
  if (value <= bound) return testing::AssertionSuccess();
  return testing::AssertionFailure() << what << " " << value << " > " << bound;
}

/// Checks X̂ for A·X = B with A triangular (a right solve X·T = B enters as Tᵀ·Xᵀ = Bᵀ; a unit
/// diagonal is written into A). Substitution in IEEE arithmetic gives columns with
/// (A + ΔAⱼ)·x̂ⱼ = bⱼ, |ΔAⱼ| ≤ γₙ|A|, γₙ = nu/(1 − nu) (Higham, Accuracy and Stability of Numerical
/// Algorithms, Thm 8.5); γₙ₊₁ when it multiplies by the diagonal's reciprocals instead of
/// dividing, as GPU kernels often do. So
///   backward: |A·X̂ − B| ≤ 2(n + 1)(u + u_R)·(|A|·|X̂| + |B|) entrywise (the residual itself is
///             computed in R, hence u_R; the factor 2 covers γₙ₊₁ > (n + 1)u and blocked updates);
///   forward:  ‖X̂ − X‖∞ ≤ 2(n + 1)(u + u_R)·κ∞(A)·‖X̂‖∞ against Eigen's solve in R
///             (X̂ − X = −A⁻¹·ΔA·X̂).
template <typename R>
inline testing::AssertionResult solve_is_accurate(const Mat<R>& a, bool lower, const Mat<R>& x, const Mat<R>& b,
                                           double u) {
  const double n = static_cast<double>(a.rows()), ur = unit_roundoff_of<R>();
  const double omega = componentwise_ratio<R>(a * x - b, a.cwiseAbs() * x.cwiseAbs() + b.cwiseAbs());
  const double omega_bound = 2 * (n + 1) * (u + ur);
  if (testing::AssertionResult r = within("componentwise backward error", omega, omega_bound); !r) return r;
  const double kappa = inf_norm<R>(a) * inf_norm<R>(tri_solve<R>(a, lower, identity<R>(a.rows())));
  const double forward = inf_norm<R>(Mat<R>(x - tri_solve<R>(a, lower, b))) / inf_norm<R>(x);
  return within("forward error", forward, omega_bound * kappa) << " (κ∞ = " << kappa << ")";
}

/// solve_is_accurate for a solve on either side: A·X = B (left), or X·A = B (right), checked as
/// Aᵀ·Xᵀ = Bᵀ.
template <typename R>
inline testing::AssertionResult side_solve_is_accurate(bool left, const Mat<R>& a, bool lower, const Mat<R>& x,
                                                const Mat<R>& b, double u) {
  if (left) return solve_is_accurate<R>(a, lower, x, b, u);
  return solve_is_accurate<R>(Mat<R>(a.transpose()), !lower, Mat<R>(x.transpose()), Mat<R>(b.transpose()), u);
}

/// Checks a Cholesky factor L̂ of S. The computed factor satisfies L̂·L̂ᵀ = S + ΔS with
/// |ΔS| ≤ γₙ₊₁·|L̂|·|L̂ᵀ| (Higham Thm 10.3), so
///   backward: |L̂·L̂ᵀ − S| ≤ 2(n + 1)(u + u_R)·|L̂|·|L̂ᵀ| entrywise;
///   forward:  ‖L̂ − L‖_F ≤ 2(n + 1)(u + u_R)·κ₂(S)·‖L‖_F against Eigen's LLT in R: to first order
///             the factor changes relatively by at most κ₂(S) times S's relative normwise change
///             (Sun's perturbation bound, Higham Thm 10.8), here of the order (n + 1)u.
template <typename R>
inline testing::AssertionResult cholesky_is_accurate(const Mat<R>& s, const Mat<R>& l, double u) {
  const double n = static_cast<double>(s.rows()), ur = unit_roundoff_of<R>();
  const Mat<R> lt = l.transpose();
  const double omega = componentwise_ratio<R>(l * lt - s, l.cwiseAbs() * lt.cwiseAbs());
  const double omega_bound = 2 * (n + 1) * (u + ur);
  if (testing::AssertionResult r = within("componentwise backward error", omega, omega_bound); !r) return r;
  const Eigen::LLT<Mat<R>> llt(s);
  if (llt.info() != Eigen::Success) return testing::AssertionFailure() << "the reference LLT failed";
  const Mat<R> ref = llt.matrixL();
  const double kappa = spd_kappa<R>(s);
  const double forward = static_cast<double>((l - ref).norm() / ref.norm());
  return within("forward error", forward, omega_bound * kappa) << " (κ = " << kappa << ")";
}

/// Checks log det S for a symmetric positive definite S, computed as 2·Σ log l̂ᵢᵢ. To first order
/// the factorization's ΔS changes the result by tr(S⁻¹ΔS) ≤ γₙ₊₁·⟨|S⁻¹|, |L|·|Lᵀ|⟩, and the n
/// logarithms and their sum add at most nu·Σ|2 log lᵢᵢ|; both are tested with a factor 2 and with
/// u + u_R (the reference is Eigen's LLT in R).
template <typename R>
inline testing::AssertionResult spd_logdet_is_accurate(const Mat<R>& s, double got, double u) {
  const double n = static_cast<double>(s.rows()), ur = unit_roundoff_of<R>();
  const Eigen::LLT<Mat<R>> llt(s);
  const Mat<R> l = llt.matrixL();
  R ref = 0, abs_terms = 0;
  for (Eigen::Index i = 0; i < l.rows(); ++i) {
    ref += 2 * std::log(l(i, i));
    abs_terms += std::abs(2 * std::log(l(i, i)));
  }
  const Mat<R> s_inv = llt.solve(identity<R>(s.rows()));
  const double sensitivity = static_cast<double>(s_inv.cwiseAbs().cwiseProduct(l.cwiseAbs() * l.transpose().cwiseAbs()).sum());
  const double bound = 2 * (n + 1) * (u + ur) * sensitivity + 2 * n * (u + ur) * static_cast<double>(abs_terms);
  return within("logdet error", std::abs(got - static_cast<double>(ref)), bound)
         << " (logdet " << got << ", reference " << static_cast<double>(ref) << ")";
}

/// Checks Σ log|tᵢᵢ| of a triangular T: each logarithm is within an ulp and the sum of n terms
/// within nu·Σ|log|tᵢᵢ||, tested as 2(n + 1)(u + u_R)·(1 + Σ|log|tᵢᵢ||).
template <typename R>
inline testing::AssertionResult triangular_logdet_is_accurate(const Mat<R>& t, double got, double u) {
  const double n = static_cast<double>(t.rows()), ur = unit_roundoff_of<R>();
  R ref = 0, abs_terms = 0;
  for (Eigen::Index i = 0; i < t.rows(); ++i) {
    const R term = std::log(std::abs(t(i, i)));
    ref += term;
    abs_terms += std::abs(term);
  }
  const double bound = 2 * (n + 1) * (u + ur) * (1 + static_cast<double>(abs_terms));
  return within("logdet error", std::abs(got - static_cast<double>(ref)), bound)
         << " (logdet " << got << ", reference " << static_cast<double>(ref) << ")";
}

/// Checks M̂ = T⁻¹ for a triangular T. Column-oriented inversions give |T·M̂ − I| ≤ cₙu·|T|·|M̂|
/// and row-oriented ones the same for M̂·T (Du Croz and Higham, Stability of methods for matrix
/// inversion, 1992); either residual is accepted:
///   backward: min over the two sides of the componentwise ratio ≤ 2(n + 1)(u + u_R) (cₙ = γₙ₊₁
///             allows for multiplying by reciprocals, as in solve_is_accurate);
///   forward:  ‖M̂ − M‖∞ ≤ 2(n + 1)(u + u_R)·κ∞(T)·‖M̂‖∞ (follows from either residual), M from
///             Eigen in R.
template <typename R>
inline testing::AssertionResult inverse_is_accurate(const Mat<R>& t, bool lower, const Mat<R>& m, double u) {
  const double n = static_cast<double>(t.rows()), ur = unit_roundoff_of<R>();
  const Mat<R> id = identity<R>(t.rows());
  const double omega_bound = 2 * (n + 1) * (u + ur);
  double omega = componentwise_ratio<R>(t * m - id, t.cwiseAbs() * m.cwiseAbs());
  if (!(omega <= omega_bound)) {
    const double left = componentwise_ratio<R>(m * t - id, m.cwiseAbs() * t.cwiseAbs());
    if (left <= omega_bound) omega = left;
  }
  if (testing::AssertionResult r = within("componentwise backward error", omega, omega_bound); !r) return r;
  const Mat<R> ref = tri_solve<R>(t, lower, id);
  const double kappa = inf_norm<R>(t) * inf_norm<R>(ref);
  const double forward = inf_norm<R>(Mat<R>(m - ref)) / inf_norm<R>(m);
  return within("forward error", forward, omega_bound * kappa) << " (κ∞ = " << kappa << ")";
}

/// Checks X̂ = (L·Lᵀ)⁻¹·B, two substitutions: Ŷ from L·Y = B, then X̂ from Lᵀ·X = Ŷ. Each obeys
/// the forward bound of solve_is_accurate, and the first one's error is carried through L⁻ᵀ:
/// ‖X̂ − X‖∞ ≤ 2(n + 1)(u + u_R)·κ₁(L)·(1 + κ∞(L))·‖X̂‖∞, X from Eigen in R.
template <typename R>
inline testing::AssertionResult cholesky_solve_is_accurate(const Mat<R>& l, const Mat<R>& x, const Mat<R>& b, double u) {
  const double n = static_cast<double>(l.rows()), ur = unit_roundoff_of<R>();
  const Mat<R> l_inv = tri_solve<R>(l, true, identity<R>(l.rows()));
  const double k_inf = inf_norm<R>(l) * inf_norm<R>(l_inv), k_one = one_norm<R>(l) * one_norm<R>(l_inv);
  const Mat<R> ref = tri_solve<R>(Mat<R>(l.transpose()), false, tri_solve<R>(l, true, b));
  const double forward = inf_norm<R>(Mat<R>(x - ref)) / inf_norm<R>(x);
  const double bound = 2 * (n + 1) * (u + ur) * k_one * (1 + k_inf);
  return within("forward error", forward, bound);
}

/// Checks P̂ against the exact value P (computed in R) of the conventional products it was computed
/// with, from factors the test knows: |P̂ − P| ≤ γₘ·scale entrywise for m terms summed per entry,
/// with scale = |A|·|B| for one product (and |A|·|B|·|C|, m = 2n, for two chained ones), tested as
/// 2(m + 1)(u + u_R)·scale. An entry with a zero scale must be exact.
template <typename R>
inline testing::AssertionResult product_is_accurate(const Mat<R>& got, const Mat<R>& p, const Mat<R>& scale, double terms,
                                             double u) {
  const double omega = componentwise_ratio<R>(got - p, scale);
  const double bound = 2 * (terms + 1) * (u + unit_roundoff_of<R>());
  return within("componentwise error", omega, bound);
}

/// Checks the backward of X = solve_triangular(T, B, left, unit) for the upstream G stage by stage,
/// from what it is built of (A = the triangle read): dB̂ solves Aᵀ·dB = G (left) or dB·Aᵀ = G
/// (right), so it has a solve's componentwise backward error (solve_is_accurate); dT̂ is the
/// projected product −dB̂·X̂ᵀ (left) or −X̂ᵀ·dB̂ (right) of k terms per entry (product_is_accurate),
/// exactly zero on a unit diagonal. Neither bound involves κ(T): any precision lost in the
/// backward, a TF32 product say, shows.
template <typename R>
inline testing::AssertionResult solve_backward_is_accurate(const Mat<R>& t, bool lower, bool unit, bool left, const Mat<R>& x,
                                                    const Mat<R>& g, const Mat<R>& dt, const Mat<R>& db, double u) {
  const Mat<R> a = read_triangle<R>(t, lower, unit);
  // dB solves Aᵀ·dB = G (left) or dB·Aᵀ = G (right).
  testing::AssertionResult r = side_solve_is_accurate<R>(left, Mat<R>(a.transpose()), !lower, db, g, u);
  if (!r) return testing::AssertionFailure() << "dB: " << r.message();
  const Mat<R> xt = x.transpose();
  Mat<R> p = read_triangle<R>(left ? Mat<R>(-db * xt) : Mat<R>(-xt * db), lower, false);
  Mat<R> scale = read_triangle<R>(left ? Mat<R>(db.cwiseAbs() * xt.cwiseAbs()) : Mat<R>(xt.cwiseAbs() * db.cwiseAbs()),
                                  lower, false);
  if (unit) {
    p.diagonal().setZero();
    scale.diagonal().setZero();
  }
  r = product_is_accurate<R>(dt, p, scale, static_cast<double>(left ? x.cols() : x.rows()), u);
  if (!r) return testing::AssertionFailure() << "dT: " << r.message();
  return testing::AssertionSuccess();
}

/// Checks the backward of M = inverse(T) for the upstream G: dT̂ = −proj(M̂ᵀ·G·M̂ᵀ) from the
/// forward output M̂, two chained products (product_is_accurate with m = 2n).
template <typename R>
inline testing::AssertionResult inverse_backward_is_accurate(const Mat<R>& m, bool lower, const Mat<R>& g, const Mat<R>& dt,
                                                      double u) {
  const Mat<R> mt = m.transpose();
  const Mat<R> p = read_triangle<R>(Mat<R>(-mt * g * mt), lower, false);
  const Mat<R> scale = read_triangle<R>(Mat<R>(mt.cwiseAbs() * g.cwiseAbs() * mt.cwiseAbs()), lower, false);
  return product_is_accurate<R>(dt, p, scale, 2.0 * static_cast<double>(m.rows()), u);
}

// ---- inputs ----------------------------------------------------------------------------------

/// A well-conditioned triangular matrix (float64, CPU) of structure s: off-diagonal entries
/// N(0, 1/(4n)), diagonal entries ±(1 + U[0, 1)) with random signs. The strictly triangular part N
/// has ‖N‖₂ ≈ 0.8 below every |tᵢᵢ| ≥ 1, so κ₂(T) stays near 3 for every n, with T's diagonal or
/// with a unit one (a raw randn triangular matrix is exponentially ill-conditioned in n). The
/// negative diagonal entries exercise logdet's |tᵢᵢ|.
inline sg::Tensor triangular_f64(S s, int64_t n) {
  std::vector<double> v = sg::randn({n, n}, sg::kFloat64).to_vector();
  const std::vector<double> d = sg::rand({n}, sg::kFloat64).to_vector();
  const double scale = 0.5 / std::sqrt(static_cast<double>(n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double& e = v[static_cast<size_t>(i * n + j)];
      if (i == j) e = (e < 0 ? -1.0 : 1.0) * (1.0 + d[static_cast<size_t>(i)]);
      else if (s == S::LowerTriangular ? j > i : j < i) e = 0.0;
      else e *= scale;
    }
  const sg::Tensor t = sg::from_vector(v, {n, n}, sg::kFloat64);
  return s == S::LowerTriangular ? sg::Tensor(sg::as_lower(t)) : sg::Tensor(sg::as_upper(t));
}

/// A well-conditioned symmetric positive definite S = A·Aᵀ/n + I (float64, CPU, Symmetric, its
/// halves equal bit for bit): its eigenvalues lie in [1, about 5].
inline sg::Tensor spd_f64(int64_t n) {
  const sg::Tensor a = sg::randn({n, n}, sg::kFloat64);
  return sg::gram(a) * (1.0 / static_cast<double>(n)) + sg::Symmetric::eye(n, sg::kFloat64);
}

/// `t` converted to dtype and moved to device, keeping its structure tag.
inline sg::Tensor as(const sg::Tensor& t, sg::DType dtype, sg::Device device) { return t.to(dtype).to(device); }

/// `t` with every diagonal entry replaced by `value` (same structure, dtype and device).
inline sg::Tensor with_diagonal_value(const sg::Tensor& t, double value) {
  return sg::with_diagonal(t, sg::full({t.size(0)}, value, sg::TensorOptions().dtype(t.dtype()).device(t.device())));
}

/// The values of a and b are equal as IEEE values (NaN equals NaN), shapes and tags too.
inline testing::AssertionResult unchanged(const sg::Tensor& now, const sg::Tensor& before) {
  if (now.shape() != before.shape() || now.structure() != before.structure() || now.dtype() != before.dtype())
    return testing::AssertionFailure() << "shape, structure or dtype changed";
  const std::vector<double> a = now.to_vector(), b = before.to_vector();
  for (size_t i = 0; i < a.size(); ++i)
    if (!sgtest::same_ieee(a[i], b[i])) return testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  return testing::AssertionSuccess();
}

inline std::string describe(S s, bool left, bool unit, int64_t n, int64_t k) {
  return std::string(sg::structure_name(s)) + (left ? " left" : " right") + (unit ? " unit" : "") +
         " n=" + std::to_string(n) + " k=" + std::to_string(k);
}

// ---- gradients in closed form (double, evaluated at the library's own forward outputs) -------

/// The projection onto a triangle (zeros elsewhere).
inline MatD project(const MatD& m, bool lower) { return read_triangle<double>(m, lower, false); }

/// Gradients of ⟨G, X⟩ for X = solve_triangular(T, B, left, unit): with A = the triangle read,
/// dB = A⁻ᵀ·G (left) or G·A⁻ᵀ (right), dT = proj(−dB·Xᵀ) (left) or proj(−Xᵀ·dB) (right), and no
/// gradient on a unit diagonal.
inline std::pair<MatD, MatD> solve_gradients(const MatD& t, bool lower, bool unit, bool left, const MatD& x, const MatD& g) {
  const MatD a = read_triangle<double>(t, lower, unit);
  const MatD at = a.transpose();
  MatD db, dt;
  if (left) {
    db = tri_solve<double>(at, !lower, g);
    dt = project(-db * x.transpose(), lower);
  } else {
    db = tri_solve<double>(a, lower, MatD(g.transpose())).transpose();
    dt = project(-x.transpose() * db, lower);
  }
  if (unit) dt.diagonal().setZero();
  return {dt, db};
}

/// Gradient of ⟨G, L⟩ for L = cholesky(S): with L̄ = tril(G) and Φ = the lower triangle with the
/// diagonal halved, dS = sym(L⁻ᵀ·Φ(Lᵀ·L̄)·L⁻¹), sym(X) = (X + Xᵀ)/2.
inline MatD cholesky_gradient(const MatD& l, const MatD& g) {
  const MatD m = tri_solve<double>(l, true, identity<double>(l.rows()));
  MatD phi = project(l.transpose() * project(g, true), true);
  phi.diagonal() *= 0.5;
  const MatD y = m.transpose() * phi * m;
  return (y + y.transpose()) / 2;
}

/// Gradients of ⟨G, X⟩ for X = cholesky_solve(L, B) = (L·Lᵀ)⁻¹·B: dB = L⁻ᵀ·L⁻¹·G and
/// dL = −tril((dB·Xᵀ + X·dBᵀ)·L).
inline std::pair<MatD, MatD> cholesky_solve_gradients(const MatD& l, const MatD& x, const MatD& g) {
  const MatD db = tri_solve<double>(MatD(l.transpose()), false, tri_solve<double>(l, true, g));
  const MatD dl = project(-(db * x.transpose() + x * db.transpose()) * l, true);
  return {dl, db};
}

/// Flattens a host matrix row-major (to compare with a tensor's to_vector()).
inline std::vector<double> flat(const MatD& m) {
  std::vector<double> v;
  v.reserve(static_cast<size_t>(m.size()));
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) v.push_back(m(i, j));
  return v;
}

/// ‖T‖∞·‖T⁻¹‖∞ of a triangular host matrix.
inline double kappa_inf(const MatD& t, bool lower) {
  return inf_norm<double>(t) * inf_norm<double>(tri_solve<double>(t, lower, identity<double>(t.rows())));
}

/// The relative Frobenius bound for a gradient computed by a chain of `stages` triangular solves,
/// inverses and products at order n, each adding at most (n + 1)(u + u_d)·κ relative error
/// (u_d = 2⁻⁵³ for the double reference): 2·stages·(n + 1)(u + u_d)·κ.
inline double chain_bound(int stages, int64_t n, double u, double kappa) {
  return 2.0 * stages * (static_cast<double>(n) + 1) * (u + unit_roundoff_of<double>()) * kappa;
}

/// Restores the float32 product precision when it goes out of scope.
class PrecisionGuard {
 public:
  explicit PrecisionGuard(sg::Precision p) : saved_(sg::matmul_precision()) { sg::set_matmul_precision(p); }
  ~PrecisionGuard() { sg::set_matmul_precision(saved_); }
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;

 private:
  sg::Precision saved_;
};

// ---- fixtures ----------------------------------------------------------------------------------

/// Tests of one device and one dtype.
class LinalgValues : public testing::TestWithParam<sgtest::DeviceDtype> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam().device); }
  sg::Device device() const { return GetParam().device; }
  sg::DType dtype() const { return GetParam().dtype; }
  sg::TensorOptions opts() const { return sg::TensorOptions().dtype(dtype()).device(device()); }
  double u() const { return unit_roundoff(dtype()); }
  sg::Tensor on_device(const sg::Tensor& t) const { return as(t, dtype(), device()); }
};

/// The backends' kernels, called directly.
class LinalgKernels : public LinalgValues {};

/// Tests of one device in float64 (gradients) or across dtypes (errors).
class Linalg : public testing::TestWithParam<sg::Device> {
 protected:
  void SetUp() override { SG_SKIP_IF_UNAVAILABLE(GetParam()); }
  sg::TensorOptions f64() const { return sg::TensorOptions().dtype(sg::kFloat64).device(GetParam()); }
  sg::Tensor on_device(const sg::Tensor& t) const { return t.to(GetParam()); }
};

class LinalgGrad : public Linalg {};
class LinalgErrors : public Linalg {};

}  // namespace sgtest::linalg
