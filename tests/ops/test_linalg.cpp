// Structured linear algebra on CPU and CUDA: solve_triangular, cholesky, cholesky_ex, logdet,
// cholesky_solve and inverse. Values are checked against Eigen references computed on the host
// from the same inputs, with bounds taken from the rounding-error analyses of the algorithms; the
// backends' kernels must write every entry of poisoned outputs and never read what they are told
// to ignore; and the float32 backward stays exact when float32 products run in TF32. Gradients:
// test_linalg_grad.cpp; bad input: test_linalg_errors.cpp.
#include "ops/linalg_check.h"

namespace {

using namespace sgtest::linalg;

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
      const auto [sign, log_abs_det] = sg::slogdet(t);
      ASSERT_EQ(log_abs_det.dim(), 0) << what;
      ASSERT_EQ(sign.dim(), 0) << what;
      with_reference(n, [&](auto zero) {
        using R = decltype(zero);
        EXPECT_TRUE(triangular_logdet_is_accurate<R>(host<R>(t), log_abs_det.item(), u()))
            << sg::structure_name(st) << " " << what;
      });
      // The diagonal's signs are random: logdet is log|det| where the product is positive, NaN elsewhere.
      double expected_sign = 1;
      for (double d : sg::diagonal(t).to_vector()) expected_sign *= d < 0 ? -1.0 : 1.0;
      EXPECT_EQ(sign.item(), expected_sign) << what;
      const double ld = sg::logdet(t).item();
      if (expected_sign > 0) EXPECT_EQ(ld, log_abs_det.item()) << what;
      else EXPECT_TRUE(std::isnan(ld)) << what << ": logdet " << ld << " of a negative determinant";
    }
  }
}

TEST_P(Linalg, TriangularLogdetFollowsTheDeterminantsSign) {
  // torch.logdet's convention: log det, NaN for a negative determinant, −inf for a zero one.
  const auto lower = [&](std::vector<double> diagonal) {
    const int64_t n = static_cast<int64_t>(diagonal.size());
    return sg::as_lower(sg::diag_embed(on_device(sg::from_vector(diagonal, {n}, sg::kFloat64))));
  };
  const struct { std::vector<double> diagonal; double sign, logabsdet, logdet; } cases[] = {
      {{2.0, 3.0}, 1, std::log(6.0), std::log(6.0)},
      {{-2.0, 3.0}, -1, std::log(6.0), NAN},
      {{-2.0, -3.0}, 1, std::log(6.0), std::log(6.0)},
      {{-2.0, 0.0}, 0, -INFINITY, -INFINITY},
  };
  for (const auto& c : cases) {
    const sg::Tensor l = lower(c.diagonal);
    const std::string what = "diagonal (" + std::to_string(c.diagonal[0]) + ", " + std::to_string(c.diagonal[1]) + ")";
    const auto [sign, log_abs_det] = sg::slogdet(l);
    EXPECT_EQ(sign.item(), c.sign) << what;
    EXPECT_DOUBLE_EQ(log_abs_det.item(), c.logabsdet) << what;
    const double ld = sg::logdet(l).item();
    if (std::isnan(c.logdet)) EXPECT_TRUE(std::isnan(ld)) << what << ": got " << ld;
    else EXPECT_DOUBLE_EQ(ld, c.logdet) << what;
  }
  // The gradient is diag(1/lᵢᵢ) whatever the sign, through slogdet's logabsdet and logdet alike.
  const sg::Tensor w = lower({-2.0, 4.0}).detach().requires_grad_();
  sg::slogdet(w).logabsdet.backward();
  EXPECT_EQ(sg::diagonal(w.grad()).to_vector(), (std::vector<double>{-0.5, 0.25}));
  // A Symmetric positive definite matrix has sign 1.
  const sg::Tensor s = on_device(spd_f64(3));
  EXPECT_EQ(sg::slogdet(s).sign.item(), 1.0);
  EXPECT_EQ(sg::slogdet(s).logabsdet.item(), sg::logdet(s).item());
  EXPECT_EQ(sgtest::message_of([&] { sg::slogdet(on_device(sg::eye(3, sg::kFloat64))); }),
            "slogdet: expected a Symmetric positive definite or a triangular matrix, got a Dense tensor (tag it "
            "with sg::sym, sg::as_symmetric, sg::triu or sg::tril)");
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
            backend.solve_triangular(a, kind, trans, unit, left, x, x);
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
