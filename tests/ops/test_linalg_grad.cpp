// Gradients of the structured linear algebra: the structure-aware gradcheck in float64 on every
// device, the structures the gradients keep, and the closed forms.
#include "ops/linalg_check.h"

namespace {

using namespace sgtest::linalg;

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
      // Diagonal entries of both signs: slogdet's gradient is 1/tᵢᵢ through |tᵢᵢ|.
      const sg::Tensor t = on_device(triangular_f64(s, n));
      const sg::GradcheckResult r = sg::gradcheck(
          [](const std::vector<sg::Tensor>& in) { return sg::slogdet(in[0]).logabsdet; }, {t.detach().requires_grad_()});
      EXPECT_TRUE(r.ok) << "slogdet " << sg::structure_name(s) << " n=" << n << ": " << r.message;
      // logdet where the determinant is positive (it is NaN elsewhere): the same gradient.
      const sg::Tensor positive = sg::with_diagonal(t, sg::abs(sg::diagonal(t)));
      const sg::GradcheckResult p = sg::gradcheck(f, {positive.detach().requires_grad_()});
      EXPECT_TRUE(p.ok) << "logdet " << sg::structure_name(s) << " n=" << n << ": " << p.message;
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

}  // namespace
