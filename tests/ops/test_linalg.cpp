// Structured linear algebra on CPU and CUDA: solve_triangular, cholesky, cholesky_ex, logdet,
// cholesky_solve and inverse. Values are checked against Eigen references computed on the host
// from the same inputs, with bounds taken from the rounding-error analyses of the algorithms; the
// backends' kernels must write every entry of poisoned outputs and never read what they are told
// to ignore; gradients go through the structure-aware gradcheck in float64 and are compared with
// their closed forms; bad input gets the same message on every device; and the float32 backward
// stays exact when float32 products run in TF32.
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

namespace {

using S = sg::Structure;
using sgtest::holds_invariant;
using sgtest::message_of;
using sgtest::rel_error;

template <typename R>
using Mat = Eigen::Matrix<R, Eigen::Dynamic, Eigen::Dynamic>;
using MatD = Mat<double>;

// The orders every value test runs at: the smallest cases, an odd order, both sides of the CPU
// Cholesky's block of 64, one short of two blocks, and one large matrix.
constexpr int64_t kSizes[] = {1, 2, 3, 31, 64, 65, 127, 1000};

// ---- rounding units and host references ------------------------------------------------------

/// The unit roundoff u of a dtype: 2⁻²⁴ for float32, 2⁻⁵³ for float64.
double unit_roundoff(sg::DType dtype) { return dtype == sg::kFloat32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53); }

/// The unit roundoff u_R of a host scalar (2⁻⁶⁴ for x86's long double, 2⁻⁵³ for double).
template <typename R>
double unit_roundoff_of() {
  return static_cast<double>(std::numeric_limits<R>::epsilon()) / 2;
}

/// Calls f with a value of the reference scalar for order n: long double up to n = 127, double
/// above (a long double factorization of order 1000 takes seconds). Every bound below adds the
/// reference's own rounding, u_R, to the tested dtype's u.
template <typename F>
void with_reference(int64_t n, F&& f) {
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
double inf_norm(const Mat<R>& m) {
  return static_cast<double>(m.cwiseAbs().rowwise().sum().maxCoeff());
}

/// ‖m‖₁, the largest column sum of |m|.
template <typename R>
double one_norm(const Mat<R>& m) {
  return static_cast<double>(m.cwiseAbs().colwise().sum().maxCoeff());
}

/// κ₂(S) = λmax/λmin of a symmetric positive definite S, from Eigen's symmetric eigensolver in R.
template <typename R>
double spd_kappa(const Mat<R>& s) {
  const Eigen::SelfAdjointEigenSolver<Mat<R>> eig(s, Eigen::EigenvaluesOnly);
  return static_cast<double>(eig.eigenvalues().maxCoeff() / eig.eigenvalues().minCoeff());
}

/// max |rᵢⱼ| / scaleᵢⱼ: a componentwise backward error (0/0 counts as 0, r/0 as infinity, NaN
/// stays NaN so that every bound fails on it).
template <typename R>
double componentwise_ratio(const Mat<R>& r, const Mat<R>& scale) {
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
testing::AssertionResult within(const char* what, double value, double bound) {
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
testing::AssertionResult solve_is_accurate(const Mat<R>& a, bool lower, const Mat<R>& x, const Mat<R>& b,
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
testing::AssertionResult side_solve_is_accurate(bool left, const Mat<R>& a, bool lower, const Mat<R>& x,
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
testing::AssertionResult cholesky_is_accurate(const Mat<R>& s, const Mat<R>& l, double u) {
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
testing::AssertionResult spd_logdet_is_accurate(const Mat<R>& s, double got, double u) {
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
testing::AssertionResult triangular_logdet_is_accurate(const Mat<R>& t, double got, double u) {
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
testing::AssertionResult inverse_is_accurate(const Mat<R>& t, bool lower, const Mat<R>& m, double u) {
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
testing::AssertionResult cholesky_solve_is_accurate(const Mat<R>& l, const Mat<R>& x, const Mat<R>& b, double u) {
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
testing::AssertionResult product_is_accurate(const Mat<R>& got, const Mat<R>& p, const Mat<R>& scale, double terms,
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
testing::AssertionResult solve_backward_is_accurate(const Mat<R>& t, bool lower, bool unit, bool left, const Mat<R>& x,
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
testing::AssertionResult inverse_backward_is_accurate(const Mat<R>& m, bool lower, const Mat<R>& g, const Mat<R>& dt,
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
sg::Tensor triangular_f64(S s, int64_t n) {
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
sg::Tensor spd_f64(int64_t n) {
  const sg::Tensor a = sg::randn({n, n}, sg::kFloat64);
  return sg::gram(a) * (1.0 / static_cast<double>(n)) + sg::Symmetric::eye(n, sg::kFloat64);
}

/// `t` converted to dtype and moved to device, keeping its structure tag.
sg::Tensor as(const sg::Tensor& t, sg::DType dtype, sg::Device device) { return t.to(dtype).to(device); }

/// `t` with every diagonal entry replaced by `value` (same structure, dtype and device).
sg::Tensor with_diagonal_value(const sg::Tensor& t, double value) {
  return sg::with_diagonal(t, sg::full({t.size(0)}, value, sg::TensorOptions().dtype(t.dtype()).device(t.device())));
}

/// The values of a and b are equal as IEEE values (NaN equals NaN), shapes and tags too.
testing::AssertionResult unchanged(const sg::Tensor& now, const sg::Tensor& before) {
  if (now.shape() != before.shape() || now.structure() != before.structure() || now.dtype() != before.dtype())
    return testing::AssertionFailure() << "shape, structure or dtype changed";
  const std::vector<double> a = now.to_vector(), b = before.to_vector();
  for (size_t i = 0; i < a.size(); ++i)
    if (!sgtest::same_ieee(a[i], b[i])) return testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  return testing::AssertionSuccess();
}

std::string describe(S s, bool left, bool unit, int64_t n, int64_t k) {
  return std::string(sg::structure_name(s)) + (left ? " left" : " right") + (unit ? " unit" : "") +
         " n=" + std::to_string(n) + " k=" + std::to_string(k);
}

// ---- gradients in closed form (double, evaluated at the library's own forward outputs) -------

/// The projection onto a triangle (zeros elsewhere).
MatD project(const MatD& m, bool lower) { return read_triangle<double>(m, lower, false); }

/// Gradients of ⟨G, X⟩ for X = solve_triangular(T, B, left, unit): with A = the triangle read,
/// dB = A⁻ᵀ·G (left) or G·A⁻ᵀ (right), dT = proj(−dB·Xᵀ) (left) or proj(−Xᵀ·dB) (right), and no
/// gradient on a unit diagonal.
std::pair<MatD, MatD> solve_gradients(const MatD& t, bool lower, bool unit, bool left, const MatD& x, const MatD& g) {
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
MatD cholesky_gradient(const MatD& l, const MatD& g) {
  const MatD m = tri_solve<double>(l, true, identity<double>(l.rows()));
  MatD phi = project(l.transpose() * project(g, true), true);
  phi.diagonal() *= 0.5;
  const MatD y = m.transpose() * phi * m;
  return (y + y.transpose()) / 2;
}

/// Gradients of ⟨G, X⟩ for X = cholesky_solve(L, B) = (L·Lᵀ)⁻¹·B: dB = L⁻ᵀ·L⁻¹·G and
/// dL = −tril((dB·Xᵀ + X·dBᵀ)·L).
std::pair<MatD, MatD> cholesky_solve_gradients(const MatD& l, const MatD& x, const MatD& g) {
  const MatD db = tri_solve<double>(MatD(l.transpose()), false, tri_solve<double>(l, true, g));
  const MatD dl = project(-(db * x.transpose() + x * db.transpose()) * l, true);
  return {dl, db};
}

/// Flattens a host matrix row-major (to compare with a tensor's to_vector()).
std::vector<double> flat(const MatD& m) {
  std::vector<double> v;
  v.reserve(static_cast<size_t>(m.size()));
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) v.push_back(m(i, j));
  return v;
}

/// ‖T‖∞·‖T⁻¹‖∞ of a triangular host matrix.
double kappa_inf(const MatD& t, bool lower) {
  return inf_norm<double>(t) * inf_norm<double>(tri_solve<double>(t, lower, identity<double>(t.rows())));
}

/// The relative Frobenius bound for a gradient computed by a chain of `stages` triangular solves,
/// inverses and products at order n, each adding at most (n + 1)(u + u_d)·κ relative error
/// (u_d = 2⁻⁵³ for the double reference): 2·stages·(n + 1)(u + u_d)·κ.
double chain_bound(int stages, int64_t n, double u, double kappa) {
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

// ---- values against references -----------------------------------------------------------------

TEST_P(LinalgValues, SolveTriangularAgainstEigen) {
  sg::manual_seed(101);
  for (int64_t n : kSizes)
    for (S s : {S::UpperTriangular, S::LowerTriangular}) {
      const sg::Tensor t = on_device(triangular_f64(s, n));
      // A unit-diagonal solve gets a stored diagonal of 7: reading it would change every result.
      const sg::Tensor t_garbage = with_diagonal_value(t, 7.0);
      for (bool unit : {false, true})
        for (bool left : {true, false})
          for (int64_t k : {int64_t{1}, int64_t{5}}) {
            const std::string what = describe(s, left, unit, n, k);
            const sg::Tensor& tt = unit ? t_garbage : t;
            const sg::Tensor b = on_device(sg::randn(left ? sg::Shape{n, k} : sg::Shape{k, n}, sg::kFloat64));
            const sg::Tensor x = sg::solve_triangular(tt, b, left, unit);
            ASSERT_EQ(x.structure(), S::Dense) << what;
            ASSERT_EQ(x.shape(), b.shape()) << what;
            ASSERT_EQ(x.dtype(), dtype()) << what;
            ASSERT_TRUE(x.device() == device()) << what;
            with_reference(n, [&](auto zero) {
              using R = decltype(zero);
              const bool lower = s == S::LowerTriangular;
              const Mat<R> a = read_triangle<R>(host<R>(tt), lower, unit);
              EXPECT_TRUE(side_solve_is_accurate<R>(left, a, lower, host<R>(x), host<R>(b), u())) << what;
            });
          }
    }
}

TEST_P(LinalgValues, CholeskyAgainstEigen) {
  sg::manual_seed(102);
  for (int64_t n : kSizes) {
    const sg::Tensor s = on_device(spd_f64(n));
    const sg::LowerTriangular l = sg::cholesky(s);
    const std::string what = "n=" + std::to_string(n);
    ASSERT_EQ(l.structure(), S::LowerTriangular) << what;
    ASSERT_EQ(l.shape(), s.shape()) << what;
    ASSERT_EQ(l.dtype(), dtype()) << what;
    ASSERT_TRUE(l.device() == device()) << what;
    EXPECT_TRUE(holds_invariant(l)) << what;  // exact zeros above the diagonal
    with_reference(n, [&](auto zero) {
      using R = decltype(zero);
      EXPECT_TRUE(cholesky_is_accurate<R>(host<R>(s), host<R>(l), u())) << what;
    });
    // cholesky_ex: the same factor, and info a 0-d int64 zero on S's device.
    const sg::CholeskyResult ex = sg::cholesky_ex(s);
    EXPECT_EQ(ex.L.structure(), S::LowerTriangular) << what;
    EXPECT_TRUE(unchanged(ex.L, l)) << what;
    EXPECT_EQ(ex.info.dim(), 0) << what;
    EXPECT_EQ(ex.info.dtype(), sg::kInt64) << what;
    EXPECT_TRUE(ex.info.device() == device()) << what;
    EXPECT_EQ(ex.info.item(), 0.0) << what;
  }
}

TEST_P(LinalgValues, LogdetAgainstEigen) {
  sg::manual_seed(103);
  for (int64_t n : kSizes) {
    const std::string what = "n=" + std::to_string(n);
    const sg::Tensor s = on_device(spd_f64(n));
    const sg::Tensor ld = sg::logdet(s);
    ASSERT_EQ(ld.dim(), 0) << what;
    ASSERT_EQ(ld.dtype(), dtype()) << what;
    ASSERT_TRUE(ld.device() == device()) << what;
    with_reference(n, [&](auto zero) {
      using R = decltype(zero);
      EXPECT_TRUE(spd_logdet_is_accurate<R>(host<R>(s), ld.item(), u())) << "Symmetric " << what;
    });
    for (S st : {S::UpperTriangular, S::LowerTriangular}) {
      const sg::Tensor t = on_device(triangular_f64(st, n));
      const sg::Tensor lt = sg::logdet(t);
      ASSERT_EQ(lt.dim(), 0) << what;
      with_reference(n, [&](auto zero) {
        using R = decltype(zero);
        EXPECT_TRUE(triangular_logdet_is_accurate<R>(host<R>(t), lt.item(), u())) << sg::structure_name(st) << " " << what;
      });
    }
  }
}

TEST_P(LinalgValues, InverseAgainstEigen) {
  sg::manual_seed(104);
  for (int64_t n : kSizes)
    for (S s : {S::UpperTriangular, S::LowerTriangular}) {
      const std::string what = std::string(sg::structure_name(s)) + " n=" + std::to_string(n);
      const sg::Tensor t = on_device(triangular_f64(s, n));
      const sg::Tensor m = sg::inverse(t);
      ASSERT_EQ(m.structure(), s) << what;
      ASSERT_EQ(m.dtype(), dtype()) << what;
      ASSERT_TRUE(m.device() == device()) << what;
      EXPECT_TRUE(holds_invariant(m)) << what;  // exact zeros in the other triangle
      with_reference(n, [&](auto zero) {
        using R = decltype(zero);
        EXPECT_TRUE(inverse_is_accurate<R>(host<R>(t), s == S::LowerTriangular, host<R>(m), u())) << what;
      });
    }
}

TEST_P(LinalgValues, CholeskySolveAgainstEigen) {
  sg::manual_seed(105);
  for (int64_t n : kSizes)
    for (int64_t k : {int64_t{1}, int64_t{4}}) {
      const std::string what = "n=" + std::to_string(n) + " k=" + std::to_string(k);
      const sg::Tensor l = on_device(triangular_f64(S::LowerTriangular, n));
      const sg::Tensor b = on_device(sg::randn({n, k}, sg::kFloat64));
      const sg::Tensor x = sg::cholesky_solve(l, b);
      ASSERT_EQ(x.structure(), S::Dense) << what;
      ASSERT_EQ(x.shape(), b.shape()) << what;
      with_reference(n, [&](auto zero) {
        using R = decltype(zero);
        EXPECT_TRUE(cholesky_solve_is_accurate<R>(host<R>(l), host<R>(x), host<R>(b), u())) << what;
      });
    }
}

TEST_P(LinalgValues, CholeskyThenSolveRecoversTheSystem) {
  // The two ops together solve S·X = B with (S + ΔS)·X̂ = B, |ΔS| ≤ γ₃ₙ₊₁·|L̂|·|L̂ᵀ| (Higham
  // Thm 10.4), tested as |S·X̂ − B| ≤ 2(3n + 1)(u + u_R)·(|L̂|·|L̂ᵀ|·|X̂| + |B|) entrywise.
  sg::manual_seed(106);
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{65}, int64_t{127}}) {
    const sg::Tensor s = on_device(spd_f64(n));
    const sg::Tensor b = on_device(sg::randn({n, 3}, sg::kFloat64));
    const sg::LowerTriangular l = sg::cholesky(s);
    const sg::Tensor x = sg::cholesky_solve(l, b);
    with_reference(n, [&](auto zero) {
      using R = decltype(zero);
      const Mat<R> sr = host<R>(s), lr = host<R>(l), xr = host<R>(x), br = host<R>(b);
      const double omega =
          componentwise_ratio<R>(sr * xr - br, lr.cwiseAbs() * lr.transpose().cwiseAbs() * xr.cwiseAbs() + br.cwiseAbs());
      EXPECT_LE(omega, 2 * (3 * static_cast<double>(n) + 1) * (u() + unit_roundoff_of<R>())) << "n=" << n;
    });
  }
}

// The backward at orders where the CPU Cholesky has several blocks, against references at the
// library's own forward outputs (so only the backward's rounding is measured). The backward of a
// solve and of an inverse is checked stage by stage with componentwise bounds
// (solve_backward_is_accurate, inverse_backward_is_accurate). The Cholesky-based gradients, whose
// intermediate L⁻¹ is not visible, are compared with their closed forms in double within
// chain_bound:
//   cholesky: 5 stages (L⁻¹, Lᵀ·L̄, two products with L⁻¹, the symmetrization), κ₂(S) = κ₂(L)²;
//   logdet:   3 stages (L⁻¹, L⁻ᵀ·L⁻¹, the upstream scale), κ₂(S);
//   cholesky_solve: dB 2 solves, dL 6 stages (4 solves, 2 products), κ = κ∞(L)·κ∞(Lᵀ).
TEST_P(LinalgValues, BackwardAgainstReferences) {
  sg::manual_seed(107);
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{65}, int64_t{127}}) {
    for (S s : {S::UpperTriangular, S::LowerTriangular}) {
      const bool lower = s == S::LowerTriangular;
      for (bool unit : {false, true})
        for (bool left : {true, false}) {
          const int64_t k = 4;
          const std::string what = describe(s, left, unit, n, k);
          sg::Tensor t0 = triangular_f64(s, n);
          if (unit) t0 = with_diagonal_value(t0, 7.0);
          sg::Tensor t = on_device(t0).requires_grad_();
          sg::Tensor b = on_device(sg::randn(left ? sg::Shape{n, k} : sg::Shape{k, n}, sg::kFloat64)).requires_grad_();
          const sg::Tensor g = on_device(sg::randn(b.shape(), sg::kFloat64));
          const sg::Tensor x = sg::solve_triangular(t, b, left, unit);
          x.backward(g);
          ASSERT_TRUE(t.grad().defined() && b.grad().defined()) << what;
          EXPECT_EQ(t.grad().structure(), s) << what;
          EXPECT_EQ(b.grad().structure(), S::Dense) << what;
          EXPECT_TRUE(holds_invariant(t.grad())) << what;
          with_reference(n, [&](auto zero) {
            using R = decltype(zero);
            EXPECT_TRUE(solve_backward_is_accurate<R>(host<R>(t), lower, unit, left, host<R>(x), host<R>(g),
                                                      host<R>(t.grad()), host<R>(b.grad()), u()))
                << what;
          });
        }
      sg::Tensor t = on_device(triangular_f64(s, n)).requires_grad_();
      const sg::Tensor m = sg::inverse(t);
      const sg::Tensor g = on_device(sg::randn({n, n}, sg::kFloat64));
      m.backward(g);
      EXPECT_EQ(t.grad().structure(), s);
      with_reference(n, [&](auto zero) {
        using R = decltype(zero);
        EXPECT_TRUE(inverse_backward_is_accurate<R>(host<R>(m), lower, host<R>(g), host<R>(t.grad()), u()))
            << "inverse " << sg::structure_name(s) << " n=" << n;
      });
    }
    {
      sg::Tensor s = on_device(spd_f64(n)).requires_grad_();
      const sg::LowerTriangular l = sg::cholesky(s);
      const sg::Tensor g = on_device(sg::randn({n, n}, sg::kFloat64));
      l.backward(g);
      const double kappa = spd_kappa<double>(host<double>(s));
      EXPECT_EQ(s.grad().structure(), S::Symmetric);
      EXPECT_TRUE(holds_invariant(s.grad())) << "n=" << n;
      EXPECT_LE(rel_error(s.grad().to_vector(), flat(cholesky_gradient(host<double>(l), host<double>(g)))),
                chain_bound(5, n, u(), kappa))
          << "cholesky n=" << n;
      s.zero_grad();
      sg::logdet(s).backward();
      const MatD l_inv = tri_solve<double>(host<double>(l), true, identity<double>(n));
      EXPECT_LE(rel_error(s.grad().to_vector(), flat(l_inv.transpose() * l_inv)), chain_bound(3, n, u(), kappa))
          << "logdet n=" << n;
    }
    {
      sg::Tensor l = on_device(triangular_f64(S::LowerTriangular, n)).requires_grad_();
      sg::Tensor b = on_device(sg::randn({n, 3}, sg::kFloat64)).requires_grad_();
      const sg::Tensor g = on_device(sg::randn({n, 3}, sg::kFloat64));
      const sg::Tensor x = sg::cholesky_solve(l, b);
      x.backward(g);
      const auto [dl, db] = cholesky_solve_gradients(host<double>(l), host<double>(x), host<double>(g));
      const MatD ld = host<double>(l);
      const double kappa = kappa_inf(ld, true) * kappa_inf(MatD(ld.transpose()), false);
      EXPECT_LE(rel_error(l.grad().to_vector(), flat(dl)), chain_bound(6, n, u(), kappa)) << "cholesky_solve dL n=" << n;
      EXPECT_LE(rel_error(b.grad().to_vector(), flat(db)), chain_bound(2, n, u(), kappa)) << "cholesky_solve dB n=" << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DevicesAndDtypes, LinalgValues, testing::ValuesIn(sgtest::test_devices_and_dtypes()),
                         sgtest::device_dtype_test_name);

// ---- the backends' kernels with poisoned outputs ---------------------------------------------

/// An n×n Dense tensor holding `v` (row-major) with NaN written into the triangle the kernel must
/// not read (above the diagonal when `lower`, below otherwise) and, when `poison_diagonal`, on the
/// diagonal.
sg::Tensor poisoned(const std::vector<double>& v, int64_t n, bool lower, bool poison_diagonal, sg::TensorOptions o) {
  std::vector<double> p = v;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      if ((lower ? j > i : j < i) || (poison_diagonal && i == j)) p[static_cast<size_t>(i * n + j)] = NAN;
  return sg::from_vector(p, {n, n}, o);
}

/// A 0-d int64 tensor holding a value no kernel would write.
sg::Tensor garbage_info(sg::Device device) {
  return sg::full({}, -12345.0, sg::TensorOptions().dtype(sg::kInt64).device(device));
}

TEST_P(LinalgKernels, CholeskyWritesEveryEntryAndInfo) {
  sg::manual_seed(201);
  sg::detail::Backend& backend = sg::detail::backend_for(device());
  for (int64_t n : {1, 3, 64, 65, 127}) {
    const std::string what = "n=" + std::to_string(n);
    const sg::Tensor s = on_device(spd_f64(n));
    // S's upper triangle holds NaN: only the lower one may be read.
    const sg::Tensor a = poisoned(s.to_vector(), n, true, false, opts());
    sg::Tensor out = sg::full({n, n}, NAN, opts());
    sg::Tensor info = garbage_info(device());
    backend.cholesky(a, out, info);
    EXPECT_EQ(info.item(), 0.0) << what;
    const std::vector<double> v = out.to_vector();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double e = v[static_cast<size_t>(i * n + j)];
        if (j > i) EXPECT_EQ(e, 0.0) << what << " entry (" << i << ", " << j << ")";  // exact zeros, not NaN
        else EXPECT_TRUE(std::isfinite(e)) << what << " entry (" << i << ", " << j << ")";
      }
    with_reference(n, [&](auto zero) {
      using R = decltype(zero);
      EXPECT_TRUE(cholesky_is_accurate<R>(host<R>(s), host<R>(out), u())) << what;
    });
  }
  // A failing pivot comes back in info, overwriting the garbage, without throwing: the leading
  // minor of order 3 of this matrix is negative (l₃₃² = 1 − 1 − 1).
  const sg::Tensor bad = sg::from_vector(std::vector<double>{4, 2, 2, 0, 2, 5, 3, 0, 2, 3, 1, 1, 0, 0, 1, 3}, {4, 4}, opts());
  sg::Tensor out = sg::full({4, 4}, NAN, opts());
  sg::Tensor info = garbage_info(device());
  EXPECT_NO_THROW(backend.cholesky(bad, out, info));
  EXPECT_EQ(info.item(), 3.0);
}

TEST_P(LinalgKernels, TriangularInverseWritesEveryEntry) {
  sg::manual_seed(202);
  sg::detail::Backend& backend = sg::detail::backend_for(device());
  for (int64_t n : {1, 3, 64, 65, 127})
    for (bool lower : {true, false})
      for (bool unit : {false, true}) {
        const std::string what = std::string(lower ? "Lower" : "Upper") + (unit ? " unit" : "") + " n=" + std::to_string(n);
        const sg::Tensor t = on_device(triangular_f64(lower ? S::LowerTriangular : S::UpperTriangular, n));
        // The other triangle holds NaN, and so does the diagonal of a unit-diagonal T.
        const sg::Tensor a = poisoned(t.to_vector(), n, lower, unit, opts());
        sg::Tensor out = sg::full({n, n}, NAN, opts());
        backend.triangular_inverse(a, lower ? S::LowerTriangular : S::UpperTriangular, unit, out);
        const std::vector<double> v = out.to_vector();
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j) {
            const double e = v[static_cast<size_t>(i * n + j)];
            if (lower ? j > i : j < i) EXPECT_EQ(e, 0.0) << what << " entry (" << i << ", " << j << ")";
            else if (unit && i == j) EXPECT_EQ(e, 1.0) << what << " entry (" << i << ", " << i << ")";
            else EXPECT_TRUE(std::isfinite(e)) << what << " entry (" << i << ", " << j << ")";
          }
        with_reference(n, [&](auto zero) {
          using R = decltype(zero);
          EXPECT_TRUE(inverse_is_accurate<R>(read_triangle<R>(host<R>(t), lower, unit), lower, host<R>(out), u())) << what;
        });
      }
}

TEST_P(LinalgKernels, SolveTriangularEveryLayout) {
  sg::manual_seed(203);
  sg::detail::Backend& backend = sg::detail::backend_for(device());
  for (int64_t n : {1, 3, 64, 65, 127})
    for (bool stored_lower : {true, false})
      for (bool trans : {false, true})
        for (bool left : {true, false})
          for (bool unit : {false, true}) {
            const int64_t k = 3;
            const std::string what = std::string(stored_lower ? "stored Lower" : "stored Upper") +
                                     (trans ? " transposed" : "") + (left ? " left" : " right") + (unit ? " unit" : "") +
                                     " n=" + std::to_string(n);
            const sg::Tensor t =
                on_device(triangular_f64(stored_lower ? S::LowerTriangular : S::UpperTriangular, n));
            const sg::Tensor a = poisoned(t.to_vector(), n, stored_lower, unit, opts());
            const sg::Tensor b = on_device(sg::randn(left ? sg::Shape{n, k} : sg::Shape{k, n}, sg::kFloat64));
            sg::Tensor x = b.clone();
            // kind is the structure of op(T): transposing swaps the triangle.
            const S kind = stored_lower != trans ? S::LowerTriangular : S::UpperTriangular;
            backend.solve_triangular(a, kind, trans, unit, left, x);
            with_reference(n, [&](auto zero) {
              using R = decltype(zero);
              const Mat<R> stored = read_triangle<R>(host<R>(t), stored_lower, unit);
              const Mat<R> op = trans ? Mat<R>(stored.transpose()) : stored;
              const bool op_lower = stored_lower != trans;
              EXPECT_TRUE(side_solve_is_accurate<R>(left, op, op_lower, host<R>(x), host<R>(b), u())) << what;
            });
          }
}

INSTANTIATE_TEST_SUITE_P(DevicesAndDtypes, LinalgKernels, testing::ValuesIn(sgtest::test_devices_and_dtypes()),
                         sgtest::device_dtype_test_name);

// ---- gradients: structure-aware gradcheck in float64 ---------------------------------------------

constexpr int64_t kGradSizes[] = {1, 3, 5};

TEST_P(LinalgGrad, SolveTriangularGradcheck) {
  sg::manual_seed(301);
  for (int64_t n : kGradSizes)
    for (S s : {S::UpperTriangular, S::LowerTriangular})
      for (bool left : {true, false})
        for (bool unit : {false, true}) {
          const std::string what = describe(s, left, unit, n, 2);
          sg::Tensor t = on_device(triangular_f64(s, n));
          if (unit) t = with_diagonal_value(t, 7.0);
          t.requires_grad_();
          const sg::Tensor b = on_device(sg::randn(left ? sg::Shape{n, 2} : sg::Shape{2, n}, sg::kFloat64)).requires_grad_();
          const sg::GradcheckResult r = sg::gradcheck(
              [left, unit](const std::vector<sg::Tensor>& in) { return sg::solve_triangular(in[0], in[1], left, unit); },
              {t, b});
          EXPECT_TRUE(r.ok) << what << ": " << r.message;
        }
}

TEST_P(LinalgGrad, CholeskyGradcheck) {
  sg::manual_seed(302);
  for (int64_t n : kGradSizes) {
    // S = A·Aᵀ/n + I: its eigenvalues are ≥ 1, far from the finite differences' steps of 1e-6.
    const sg::Tensor s = on_device(spd_f64(n)).requires_grad_();
    const sg::GradcheckResult r =
        sg::gradcheck([](const std::vector<sg::Tensor>& in) { return sg::Tensor(sg::cholesky(in[0])); }, {s});
    EXPECT_TRUE(r.ok) << "cholesky n=" << n << ": " << r.message;
    const sg::GradcheckResult ex =
        sg::gradcheck([](const std::vector<sg::Tensor>& in) { return sg::Tensor(sg::cholesky_ex(in[0]).L); }, {s});
    EXPECT_TRUE(ex.ok) << "cholesky_ex n=" << n << ": " << ex.message;
  }
}

TEST_P(LinalgGrad, LogdetGradcheck) {
  sg::manual_seed(303);
  auto f = [](const std::vector<sg::Tensor>& in) { return sg::logdet(in[0]); };
  for (int64_t n : kGradSizes) {
    const sg::GradcheckResult sym = sg::gradcheck(f, {on_device(spd_f64(n)).requires_grad_()});
    EXPECT_TRUE(sym.ok) << "Symmetric n=" << n << ": " << sym.message;
    for (S s : {S::UpperTriangular, S::LowerTriangular}) {
      // Diagonal entries of both signs: the gradient is 1/tᵢᵢ through |tᵢᵢ|.
      const sg::GradcheckResult r = sg::gradcheck(f, {on_device(triangular_f64(s, n)).requires_grad_()});
      EXPECT_TRUE(r.ok) << sg::structure_name(s) << " n=" << n << ": " << r.message;
    }
  }
}

TEST_P(LinalgGrad, CholeskySolveGradcheck) {
  sg::manual_seed(304);
  for (int64_t n : kGradSizes) {
    const sg::Tensor l = on_device(triangular_f64(S::LowerTriangular, n)).requires_grad_();
    const sg::Tensor b = on_device(sg::randn({n, 2}, sg::kFloat64)).requires_grad_();
    const sg::GradcheckResult r =
        sg::gradcheck([](const std::vector<sg::Tensor>& in) { return sg::cholesky_solve(in[0], in[1]); }, {l, b});
    EXPECT_TRUE(r.ok) << "n=" << n << ": " << r.message;
  }
}

TEST_P(LinalgGrad, InverseGradcheck) {
  sg::manual_seed(305);
  for (int64_t n : kGradSizes)
    for (S s : {S::UpperTriangular, S::LowerTriangular}) {
      const sg::GradcheckResult r = sg::gradcheck([](const std::vector<sg::Tensor>& in) { return sg::inverse(in[0]); },
                                                  {on_device(triangular_f64(s, n)).requires_grad_()});
      EXPECT_TRUE(r.ok) << sg::structure_name(s) << " n=" << n << ": " << r.message;
    }
  // The typed overloads keep the static type and record the same backward.
  static_assert(std::is_same_v<decltype(sg::inverse(std::declval<const sg::UpperTriangular&>())), sg::UpperTriangular>);
  static_assert(std::is_same_v<decltype(sg::inverse(std::declval<const sg::LowerTriangular&>())), sg::LowerTriangular>);
  const sg::GradcheckResult up = sg::gradcheck(
      [](const std::vector<sg::Tensor>& in) { return sg::Tensor(sg::inverse(sg::UpperTriangular(in[0]))); },
      {on_device(triangular_f64(S::UpperTriangular, 4)).requires_grad_()});
  EXPECT_TRUE(up.ok) << "inverse(UpperTriangular): " << up.message;
  const sg::GradcheckResult low = sg::gradcheck(
      [](const std::vector<sg::Tensor>& in) { return sg::Tensor(sg::inverse(sg::LowerTriangular(in[0]))); },
      {on_device(triangular_f64(S::LowerTriangular, 4)).requires_grad_()});
  EXPECT_TRUE(low.ok) << "inverse(LowerTriangular): " << low.message;
}

TEST_P(LinalgGrad, GradientsKeepTheInputsStructures) {
  sg::manual_seed(306);
  const int64_t n = 6;
  // Triangular inputs: the gradient carries the tag and exact zeros in the other triangle; with a
  // unit diagonal, exact zeros on the diagonal too.
  for (S s : {S::UpperTriangular, S::LowerTriangular})
    for (bool left : {true, false})
      for (bool unit : {false, true}) {
        const std::string what = describe(s, left, unit, n, 3);
        sg::Tensor t = on_device(with_diagonal_value(triangular_f64(s, n), unit ? 7.0 : 2.0)).requires_grad_();
        const sg::Tensor b = on_device(sg::randn(left ? sg::Shape{n, 3} : sg::Shape{3, n}, sg::kFloat64));
        sg::sum(sg::solve_triangular(t, b, left, unit) * on_device(sg::randn(b.shape(), sg::kFloat64))).backward();
        ASSERT_TRUE(t.grad().defined()) << what;
        EXPECT_EQ(t.grad().structure(), s) << what;
        EXPECT_TRUE(holds_invariant(t.grad())) << what;
        const std::vector<double> d = sg::diagonal(t.grad().detach()).to_vector();
        for (int64_t i = 0; i < n; ++i) {
          if (unit) EXPECT_EQ(d[static_cast<size_t>(i)], 0.0) << what << " diagonal " << i;
          else EXPECT_NE(d[static_cast<size_t>(i)], 0.0) << what << " diagonal " << i;
        }
      }
  for (S s : {S::UpperTriangular, S::LowerTriangular}) {
    sg::Tensor t = on_device(triangular_f64(s, n)).requires_grad_();
    sg::sum(sg::square(sg::inverse(t))).backward();
    EXPECT_EQ(t.grad().structure(), s);
    EXPECT_TRUE(holds_invariant(t.grad())) << "inverse " << sg::structure_name(s);
    t.zero_grad();
    sg::logdet(t).backward();
    EXPECT_EQ(t.grad().structure(), s);
    EXPECT_TRUE(holds_invariant(t.grad())) << "logdet " << sg::structure_name(s);
  }
  sg::Tensor l = on_device(triangular_f64(S::LowerTriangular, n)).requires_grad_();
  sg::sum(sg::cholesky_solve(l, on_device(sg::randn({n, 2}, sg::kFloat64)))).backward();
  EXPECT_EQ(l.grad().structure(), S::LowerTriangular);
  EXPECT_TRUE(holds_invariant(l.grad())) << "cholesky_solve";
  // A Symmetric input: the gradient is Symmetric, its halves equal bit for bit.
  const std::vector<std::pair<std::string, std::function<sg::Tensor(const sg::Tensor&)>>> of_s = {
      {"cholesky", [](const sg::Tensor& x) { return sg::Tensor(sg::cholesky(x)); }},
      {"cholesky_ex", [](const sg::Tensor& x) { return sg::Tensor(sg::cholesky_ex(x).L); }},
      {"logdet", [](const sg::Tensor& x) { return sg::logdet(x); }},
  };
  for (const auto& [name, f] : of_s) {
    sg::Tensor s = on_device(spd_f64(n)).requires_grad_();
    const sg::Tensor y = f(s);
    sg::sum(y * on_device(sg::randn(y.shape(), sg::kFloat64))).backward();
    ASSERT_TRUE(s.grad().defined()) << name;
    EXPECT_EQ(s.grad().structure(), S::Symmetric) << name;
    EXPECT_TRUE(holds_invariant(s.grad())) << name;
  }
}

TEST_P(LinalgGrad, LogdetGradientIsTheInverse) {
  // d log det S / dS = S⁻¹, against Eigen's inverse of S in float64: within chain_bound of 5
  // stages (the factorization, L⁻¹, L⁻ᵀ·L⁻¹, the upstream scale, and the reference's own inverse)
  // with κ₂(S).
  sg::manual_seed(307);
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{65}}) {
    sg::Tensor s = on_device(spd_f64(n)).requires_grad_();
    sg::logdet(s).backward();
    const MatD sd = host<double>(s);
    const MatD s_inv = sd.inverse();
    const double bound = chain_bound(5, n, unit_roundoff(sg::kFloat64), spd_kappa<double>(sd));
    EXPECT_EQ(s.grad().structure(), S::Symmetric);
    EXPECT_LE(rel_error(s.grad().to_vector(), flat(s_inv)), bound) << "n=" << n;
    // An upstream gradient scales it.
    s.zero_grad();
    (sg::logdet(s) * 3.0).backward();
    EXPECT_LE(rel_error(s.grad().to_vector(), flat(3.0 * s_inv)), bound) << "n=" << n << " upstream 3";
  }
}

TEST_P(LinalgGrad, CholeskyBackwardMatchesTheClosedFormOnASmallCase) {
  // S = [[4, 2], [2, 5]] has L = [[2, 0], [1, 2]]: l₁₁ = √s₁₁, l₂₁ = s₂₁/√s₁₁,
  // l₂₂ = √(s₂₂ − s₂₁²/s₁₁). For f = sum(L), by hand: ∂f/∂s₁₁ = 1/4 − 1/8 + 1/16 = 3/16,
  // ∂f/∂s₂₂ = 1/4, and along the symmetric direction e₂₁ + e₁₂, ∂f/∂s₂₁ = 1/2 − 1/4 = 1/4, which
  // the Symmetric gradient splits over its two off-diagonal entries: 1/8 each. Every value is a
  // short dyadic fraction; the float64 backward must match it to within 1e-15.
  sg::Tensor s = sg::as_symmetric(sg::from_vector(std::vector<double>{4, 2, 2, 5}, {2, 2}, f64()));
  s.requires_grad_();
  sg::sum(sg::cholesky(s)).backward();
  EXPECT_TRUE(sgtest::all_close(s.grad().to_vector(), {0.1875, 0.125, 0.125, 0.25}, 1e-15, 1e-15));
  // The closed form used by the backward tests gives the same.
  const MatD expected = cholesky_gradient((MatD(2, 2) << 2, 0, 1, 2).finished(), MatD::Ones(2, 2));
  EXPECT_TRUE(sgtest::all_close(flat(expected), {0.1875, 0.125, 0.125, 0.25}, 1e-15, 1e-15));
}

INSTANTIATE_TEST_SUITE_P(Devices, LinalgGrad, testing::ValuesIn(sgtest::test_devices()), sgtest::device_test_name);

// ---- edge cases --------------------------------------------------------------------------------

TEST_P(Linalg, EmptyMatrices) {
  const sg::Tensor t = sg::UpperTriangular::zeros(0, f64()), l = sg::LowerTriangular::zeros(0, f64());
  const sg::Tensor s = sg::Symmetric::zeros(0, f64());
  EXPECT_EQ(sg::solve_triangular(t, sg::zeros({0, 3}, f64())).shape(), (sg::Shape{0, 3}));
  EXPECT_EQ(sg::solve_triangular(l, sg::zeros({3, 0}, f64()), false).shape(), (sg::Shape{3, 0}));
  EXPECT_EQ(sg::cholesky(s).shape(), (sg::Shape{0, 0}));
  EXPECT_EQ(sg::cholesky_ex(s).info.item(), 0.0);
  EXPECT_EQ(sg::logdet(s).item(), 0.0);
  EXPECT_EQ(sg::logdet(t).item(), 0.0);
  EXPECT_EQ(sg::inverse(l).structure(), S::LowerTriangular);
  EXPECT_EQ(sg::cholesky_solve(l, sg::zeros({0, 2}, f64())).shape(), (sg::Shape{0, 2}));
}

TEST_P(Linalg, UnitDiagonalSolveIgnoresAZeroDiagonal) {
  // With unit_diagonal the stored diagonal is never read, so zeros there are no error.
  const sg::Tensor t = sg::as_lower(sg::tensor({{0.0, 0.0}, {3.0, 0.0}}, f64()));
  const sg::Tensor x = sg::solve_triangular(t, sg::from_vector(std::vector<double>{1.0, 5.0}, {2, 1}, f64()), true, true);
  EXPECT_EQ(x.to_vector(), (std::vector<double>{1.0, 2.0}));
}

TEST_P(Linalg, CholeskyExRetryWithJitter) {
  // The usual pattern for a nearly indefinite kernel matrix: add jitter·I, growing tenfold, until
  // the factorization succeeds, looking only at info; nothing throws.
  sg::manual_seed(401);
  const int64_t n = 20;
  const sg::Tensor s = on_device(sg::Tensor(sg::Symmetric::randn(n, sg::kFloat64)));  // indefinite
  const sg::Tensor eye = on_device(sg::Tensor(sg::Symmetric::eye(n, sg::kFloat64)));
  double jitter = 0.0;
  int tries = 0;
  sg::CholeskyResult r;
  EXPECT_NO_THROW({
    for (; tries < 30; ++tries) {
      r = sg::cholesky_ex(sg::as_symmetric(s + eye * jitter));
      if (r.info.item() == 0.0) break;
      EXPECT_GE(r.info.item(), 1.0);
      EXPECT_LE(r.info.item(), static_cast<double>(n));
      jitter = jitter == 0.0 ? 1e-3 : jitter * 10;
    }
  });
  EXPECT_GT(tries, 0);  // the first attempt, without jitter, failed
  ASSERT_LT(tries, 30);
  ASSERT_EQ(r.info.item(), 0.0);
  EXPECT_TRUE(holds_invariant(r.L));
  with_reference(n, [&](auto zero) {
    using R = decltype(zero);
    EXPECT_TRUE(cholesky_is_accurate<R>(host<R>(s + eye * jitter), host<R>(r.L), unit_roundoff(sg::kFloat64)))
        << "jitter " << jitter;
  });
}

INSTANTIATE_TEST_SUITE_P(Devices, Linalg, testing::ValuesIn(sgtest::test_devices()), sgtest::device_test_name);

// ---- bad input: one message on every device ----------------------------------------------------

/// The message `f` throws with its tensors on `device`, after checking that the same call on the
/// CPU throws the same one; `expected` is the CPU's exact text.
void expect_message(sg::Device device, const std::function<void(sg::Device)>& f, const std::string& expected) {
  const std::string cpu = message_of([&] { f(sg::kCPU); });
  EXPECT_EQ(cpu, expected);
  EXPECT_EQ(message_of([&] { f(device); }), cpu) << "on " << device;
}

sg::TensorOptions f64_on(sg::Device d) { return sg::TensorOptions().dtype(sg::kFloat64).device(d); }
sg::TensorOptions f32_on(sg::Device d) { return sg::TensorOptions().dtype(sg::kFloat32).device(d); }

/// A 4×4 symmetric matrix whose leading minors of orders 1 and 2 are positive definite and the
/// one of order 3 is not (l₃₃² = 1 − 1 − 1 < 0).
sg::Tensor indefinite_at_3(sg::Device d) {
  return sg::as_symmetric(
      sg::from_vector(std::vector<double>{4, 2, 2, 0, 2, 5, 3, 0, 2, 3, 1, 1, 0, 0, 1, 3}, {4, 4}, f64_on(d)));
}

TEST_P(LinalgErrors, SolveTriangular) {
  const sg::Device dev = GetParam();
  auto upper = [](sg::Device d, int64_t n) { return sg::Tensor(sg::triu(sg::ones({n, n}, f64_on(d)))); };
  expect_message(dev, [](sg::Device d) { sg::solve_triangular(sg::ones({2, 3}, f64_on(d)), sg::ones({2, 1}, f64_on(d))); },
                 "solve_triangular: expected T to be a square matrix or a batch of them, got shape [2, 3]");
  expect_message(dev, [](sg::Device d) { sg::solve_triangular(sg::ones({3}, f64_on(d)), sg::ones({3, 1}, f64_on(d))); },
                 "solve_triangular: expected T to be a matrix or a batch of matrices, got shape [3]");
  expect_message(dev, [](sg::Device d) { sg::solve_triangular(sg::eye(3, f64_on(d)), sg::ones({3, 1}, f64_on(d))); },
                 "solve_triangular: expected T to be UpperTriangular or LowerTriangular (tag it with sg::triu, "
                 "sg::tril, sg::as_upper or sg::as_lower), got a Dense tensor");
  expect_message(dev, [](sg::Device d) { sg::solve_triangular(sg::Symmetric::eye(3, f64_on(d)), sg::ones({3, 1}, f64_on(d))); },
                 "solve_triangular: expected T to be UpperTriangular or LowerTriangular (tag it with sg::triu, "
                 "sg::tril, sg::as_upper or sg::as_lower), got a Symmetric tensor");
  expect_message(dev, [&](sg::Device d) { sg::solve_triangular(upper(d, 3), sg::ones({4, 2}, f64_on(d))); },
                 "solve_triangular: T of shape [3, 3] does not fit B of shape [4, 2] (a left solve needs B with 3 rows)");
  expect_message(dev, [&](sg::Device d) { sg::solve_triangular(upper(d, 3), sg::ones({3, 2}, f64_on(d)), false); },
                 "solve_triangular: T of shape [3, 3] does not fit B of shape [3, 2] (a right solve needs B with 3 "
                 "columns)");
  expect_message(dev, [&](sg::Device d) { sg::solve_triangular(upper(d, 3), sg::ones({3}, f64_on(d))); },
                 "solve_triangular: expected B to be a matrix or a batch of matrices, got shape [3]");
  expect_message(dev,
                 [](sg::Device d) {
                   const sg::Tensor t = sg::as_upper(sg::tensor({{2.0, 1.0, 1.0}, {0.0, 0.0, 1.0}, {0.0, 0.0, 3.0}}, f64_on(d)));
                   sg::solve_triangular(t, sg::ones({3, 1}, f64_on(d)));
                 },
                 "solve_triangular: T has an exact zero on its diagonal at (1, 1); a triangular matrix with a zero "
                 "pivot is singular");
  expect_message(dev, [&](sg::Device d) { sg::solve_triangular(sg::triu(sg::ones({3, 3}, f32_on(d))), sg::ones({3, 1}, f64_on(d))); },
                 "solve_triangular: expected T and B of one dtype, got float32 and float64");
  expect_message(dev,
                 [](sg::Device d) {
                   sg::solve_triangular(sg::ones({3, 3}, sg::TensorOptions().dtype(sg::kInt64).device(d)),
                                        sg::ones({3, 1}, f64_on(d)));
                 },
                 "solve_triangular: expected a floating-point tensor, got int64");
  expect_message(dev,
                 [&](sg::Device d) {
                   sg::solve_triangular(upper(d, 3), sg::ones({3, 1}, sg::TensorOptions().dtype(sg::kInt64).device(d)));
                 },
                 "solve_triangular: expected a floating-point tensor, got int64");
  if (dev.is_cuda()) {
    EXPECT_EQ(message_of([&] { sg::solve_triangular(upper(dev, 3), sg::ones({3, 1}, f64_on(sg::kCPU))); }),
              "solve_triangular: expected T and B on one device, got cuda:0 and cpu");
  }
}

TEST_P(LinalgErrors, CholeskyAndLogdet) {
  const sg::Device dev = GetParam();
  for (std::string op : {"cholesky", "cholesky_ex", "logdet"}) {
    auto call = [op](const sg::Tensor& s) {
      if (op == "cholesky") sg::cholesky(s);
      else if (op == "cholesky_ex") sg::cholesky_ex(s);
      else sg::logdet(s);
    };
    expect_message(dev, [&](sg::Device d) { call(sg::ones({2, 3}, f64_on(d))); },
                   op + ": expected a square matrix or a batch of them, got shape [2, 3]");
    expect_message(dev, [&](sg::Device d) { call(sg::ones({2, 2}, sg::TensorOptions().dtype(sg::kInt64).device(d))); },
                   op + ": expected a floating-point tensor, got int64");
  }
  const std::string tag_it = "expected a Symmetric positive definite matrix (tag it with sg::sym or sg::as_symmetric), got a ";
  expect_message(dev, [](sg::Device d) { sg::cholesky(sg::eye(3, f64_on(d))); }, "cholesky: " + tag_it + "Dense tensor");
  expect_message(dev, [](sg::Device d) { sg::cholesky(sg::LowerTriangular::eye(3, f64_on(d))); },
                 "cholesky: " + tag_it + "LowerTriangular tensor");
  expect_message(dev, [](sg::Device d) { sg::cholesky_ex(sg::eye(3, f64_on(d))); }, "cholesky_ex: " + tag_it + "Dense tensor");
  expect_message(dev, [](sg::Device d) { sg::logdet(sg::eye(3, f64_on(d))); },
                 "logdet: expected a Symmetric positive definite or a triangular matrix, got a Dense tensor (tag it "
                 "with sg::sym, sg::as_symmetric, sg::triu or sg::tril)");
  // Not positive definite: the message names the op and the failing pivot, the third here.
  expect_message(dev, [](sg::Device d) { sg::cholesky(indefinite_at_3(d)); },
                 "cholesky: the matrix is not positive definite: pivot 3 of 4 is not positive");
  expect_message(dev, [](sg::Device d) { sg::logdet(indefinite_at_3(d)); },
                 "logdet: the matrix is not positive definite: pivot 3 of 4 is not positive");
  // cholesky_ex never throws for it and returns that pivot.
  sg::CholeskyResult r;
  EXPECT_NO_THROW(r = sg::cholesky_ex(indefinite_at_3(dev)));
  EXPECT_EQ(r.info.item(), 3.0);
  // A NaN on the diagonal fails at its own pivot; one off the diagonal at (2, 0) reaches the
  // pivot of row 2 through the update of column 0. Without the NaN the matrix is positive
  // definite (pivots 2, 2, 2 and √2.75).
  auto with_nan = [](sg::Device d, int64_t i, int64_t j) {
    std::vector<double> v = {4, 2, 2, 0, 2, 5, 3, 0, 2, 3, 6, 1, 0, 0, 1, 3};
    v[static_cast<size_t>(i * 4 + j)] = v[static_cast<size_t>(j * 4 + i)] = NAN;
    return sg::as_symmetric(sg::from_vector(v, {4, 4}, f64_on(d)));
  };
  expect_message(dev, [&](sg::Device d) { sg::cholesky(with_nan(d, 1, 1)); },
                 "cholesky: the matrix is not positive definite: pivot 2 of 4 is not positive");
  expect_message(dev, [&](sg::Device d) { sg::cholesky(with_nan(d, 2, 0)); },
                 "cholesky: the matrix is not positive definite: pivot 3 of 4 is not positive");
  EXPECT_EQ(sg::cholesky_ex(with_nan(dev, 1, 1)).info.item(), 2.0);
  EXPECT_EQ(sg::cholesky_ex(with_nan(dev, 2, 0)).info.item(), 3.0);
}

TEST_P(LinalgErrors, CholeskySolve) {
  const sg::Device dev = GetParam();
  auto lower = [](sg::Device d, int64_t n) { return sg::Tensor(sg::tril(sg::ones({n, n}, f64_on(d)))); };
  expect_message(dev, [](sg::Device d) { sg::cholesky_solve(sg::ones({2, 3}, f64_on(d)), sg::ones({2, 1}, f64_on(d))); },
                 "cholesky_solve: expected L to be a square matrix or a batch of them, got shape [2, 3]");
  expect_message(dev, [](sg::Device d) { sg::cholesky_solve(sg::triu(sg::ones({3, 3}, f64_on(d))), sg::ones({3, 1}, f64_on(d))); },
                 "cholesky_solve: expected L to be the LowerTriangular Cholesky factor (sg::cholesky), got an "
                 "UpperTriangular tensor");
  expect_message(dev, [](sg::Device d) { sg::cholesky_solve(sg::eye(3, f64_on(d)), sg::ones({3, 1}, f64_on(d))); },
                 "cholesky_solve: expected L to be the LowerTriangular Cholesky factor (sg::cholesky), got a Dense "
                 "tensor");
  expect_message(dev, [&](sg::Device d) { sg::cholesky_solve(lower(d, 3), sg::ones({2, 1}, f64_on(d))); },
                 "cholesky_solve: T of shape [3, 3] does not fit B of shape [2, 1] (a left solve needs B with 3 rows)");
  expect_message(dev,
                 [](sg::Device d) {
                   const sg::Tensor l = sg::as_lower(sg::tensor({{1.0, 0.0, 0.0}, {1.0, 2.0, 0.0}, {1.0, 1.0, 0.0}}, f64_on(d)));
                   sg::cholesky_solve(l, sg::ones({3, 1}, f64_on(d)));
                 },
                 "cholesky_solve: L has an exact zero on its diagonal at (2, 2); a triangular matrix with a zero pivot "
                 "is singular");
  expect_message(dev, [&](sg::Device d) { sg::cholesky_solve(lower(d, 3), sg::ones({3, 1}, f32_on(d))); },
                 "cholesky_solve: expected T and B of one dtype, got float64 and float32");
  expect_message(dev,
                 [&](sg::Device d) { sg::cholesky_solve(lower(d, 3), sg::ones({3, 1}, sg::TensorOptions().dtype(sg::kInt64).device(d))); },
                 "cholesky_solve: expected a floating-point tensor, got int64");
  if (dev.is_cuda()) {
    EXPECT_EQ(message_of([&] { sg::cholesky_solve(lower(dev, 3), sg::ones({3, 1}, f64_on(sg::kCPU))); }),
              "cholesky_solve: expected T and B on one device, got cuda:0 and cpu");
  }
}

TEST_P(LinalgErrors, Inverse) {
  const sg::Device dev = GetParam();
  expect_message(dev, [](sg::Device d) { sg::inverse(sg::ones({2, 3}, f64_on(d))); },
                 "inverse: expected T to be a square matrix or a batch of them, got shape [2, 3]");
  expect_message(dev, [](sg::Device d) { sg::inverse(sg::Symmetric::eye(3, f64_on(d))); },
                 "inverse: expected T to be UpperTriangular or LowerTriangular (tag it with sg::triu, sg::tril, "
                 "sg::as_upper or sg::as_lower), got a Symmetric tensor");
  expect_message(dev, [](sg::Device d) { sg::inverse(sg::eye(3, f64_on(d))); },
                 "inverse: expected T to be UpperTriangular or LowerTriangular (tag it with sg::triu, sg::tril, "
                 "sg::as_upper or sg::as_lower), got a Dense tensor");
  expect_message(dev, [](sg::Device d) { sg::inverse(sg::tril(sg::ones({3, 3}, f64_on(d)), -1)); },
                 "inverse: T has an exact zero on its diagonal at (0, 0); a triangular matrix with a zero pivot is "
                 "singular");
  expect_message(dev, [](sg::Device d) { sg::inverse(sg::ones({3, 3}, sg::TensorOptions().dtype(sg::kInt64).device(d))); },
                 "inverse: expected a floating-point tensor, got int64");
}

TEST_P(LinalgErrors, FailedCallsLeaveTheirInputsUnchanged) {
  // Every failing call above throws before writing anything: its inputs keep their values and
  // tags, their gradients stay undefined, and the next valid call works.
  const sg::Device dev = GetParam();
  sg::manual_seed(503);
  sg::Tensor t = sg::as_upper(sg::tensor({{2.0, 1.0, 1.0}, {0.0, 0.0, 1.0}, {0.0, 0.0, 3.0}}, f64_on(dev)));
  t.requires_grad_();
  sg::Tensor b = sg::ones({3, 2}, f64_on(dev)).requires_grad_();
  sg::Tensor s = indefinite_at_3(dev).requires_grad_();
  const sg::Tensor t0 = t.detach().clone(), b0 = b.detach().clone(), s0 = s.detach().clone();
  EXPECT_THROW(sg::solve_triangular(t, b), sg::Error);
  EXPECT_THROW(sg::solve_triangular(t, b, false), sg::Error);
  EXPECT_THROW(sg::inverse(t), sg::Error);
  EXPECT_THROW(sg::cholesky(s), sg::Error);
  EXPECT_THROW(sg::logdet(s), sg::Error);
  EXPECT_THROW(sg::cholesky_solve(t, b), sg::Error);
  EXPECT_TRUE(unchanged(t, t0));
  EXPECT_TRUE(unchanged(b, b0));
  EXPECT_TRUE(unchanged(s, s0));
  EXPECT_FALSE(t.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  EXPECT_FALSE(s.grad().defined());
  // The unit-diagonal solve does not read the zero: it succeeds, and T's diagonal gets no gradient.
  sg::sum(sg::solve_triangular(t, b, true, true)).backward();
  EXPECT_TRUE(unchanged(t, t0));
  EXPECT_EQ(sg::diagonal(t.grad().detach()).to_vector(), (std::vector<double>{0.0, 0.0, 0.0}));
}

INSTANTIATE_TEST_SUITE_P(Devices, LinalgErrors, testing::ValuesIn(sgtest::test_devices()), sgtest::device_test_name);

// ---- CUDA: float32 against float64 at n = 1000, and the backward under TF32 -----------------------

/// float32 solve_triangular (left, Lower, k columns) and cholesky on CUDA at order n, forward and
/// backward, against references in double at the same inputs and at the library's own forward
/// outputs: the solve and its backward by the componentwise checks above (no κ in their bounds),
/// the factor by cholesky_is_accurate, and S's gradient against the closed form within
/// chain_bound(5, n, u, κ₂(S)) as in BackwardAgainstReferences. Under TF32 the relative Frobenius errors of X, dT, dB
/// and dS must also stay under 1e-4; the forward factor, which may use TF32 products, is then not
/// checked.
void check_float32_on_cuda(int64_t n, int64_t k, bool under_tf32) {
  const double u = unit_roundoff(sg::kFloat32);
  sg::Tensor t = as(triangular_f64(S::LowerTriangular, n), sg::kFloat32, sg::kCUDA).requires_grad_();
  sg::Tensor b = as(sg::randn({n, k}, sg::kFloat64), sg::kFloat32, sg::kCUDA).requires_grad_();
  const sg::Tensor g = as(sg::randn({n, k}, sg::kFloat64), sg::kFloat32, sg::kCUDA);
  const sg::Tensor x = sg::solve_triangular(t, b);
  x.backward(g);
  const MatD td = host<double>(t), xd = host<double>(x), bd = host<double>(b), gd = host<double>(g);
  const MatD dtd = host<double>(t.grad()), dbd = host<double>(b.grad());
  EXPECT_TRUE(solve_is_accurate<double>(td, true, xd, bd, u)) << "solve X, n=" << n;
  EXPECT_TRUE(solve_backward_is_accurate<double>(td, true, false, true, xd, gd, dtd, dbd, u)) << "solve, n=" << n;

  sg::Tensor s = as(spd_f64(n), sg::kFloat32, sg::kCUDA).requires_grad_();
  const sg::Tensor gl = as(sg::randn({n, n}, sg::kFloat64), sg::kFloat32, sg::kCUDA);
  const sg::LowerTriangular l = sg::cholesky(s);
  l.backward(gl);
  const MatD sd = host<double>(s), ld = host<double>(l);
  if (!under_tf32) {
    EXPECT_TRUE(cholesky_is_accurate<double>(sd, ld, u)) << "cholesky L, n=" << n;
  }
  const double ds_error = rel_error(s.grad().to_vector(), flat(cholesky_gradient(ld, host<double>(gl))));
  EXPECT_LE(ds_error, chain_bound(5, n, u, spd_kappa<double>(sd))) << "cholesky dS, n=" << n;

  if (under_tf32) {
    const auto [dt, db] = solve_gradients(td, true, false, true, xd, gd);
    EXPECT_LE(rel_error(flat(xd), flat(tri_solve<double>(td, true, bd))), 1e-4) << "solve X";
    EXPECT_LE(rel_error(flat(dtd), flat(dt)), 1e-4) << "solve dT";
    EXPECT_LE(rel_error(flat(dbd), flat(db)), 1e-4) << "solve dB";
    EXPECT_LE(ds_error, 1e-4) << "cholesky dS";
  }
}

TEST(LinalgCuda, Float32AgainstFloat64AtN1000) {
  SG_SKIP_IF_UNAVAILABLE(sg::kCUDA);
  sg::manual_seed(601);
  check_float32_on_cuda(1000, 8, false);
}

TEST(LinalgCuda, BackwardStaysExactUnderTF32) {
  // With float32 products in TF32 (u = 2⁻¹¹, relative errors near 1e-3), the backward of a solve
  // and of a Cholesky factorization still runs in exact float32: at n = 256 with κ₂ of a few units
  // its relative errors stay near 1e-6, well under 1e-4, and the stagewise checks hold with
  // float32's u. The forward solve is exact by the backend's contract too.
  SG_SKIP_IF_UNAVAILABLE(sg::kCUDA);
  const PrecisionGuard tf32(sg::Precision::TF32);
  sg::manual_seed(602);
  check_float32_on_cuda(256, 16, true);
}

}  // namespace
